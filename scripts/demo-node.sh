#!/usr/bin/env bash
# Part two of the demo, run by scripts/demo.sh inside build/test/sim_node:
# the simulated k3s API (HTTPS, client certificates, watch), a private
# containerd standing in for k3s's, and the simulated nvidia-smi/systemctl
# are all set up in this environment. usage: demo-node.sh ROOT ARCHIVE
set -euo pipefail
root=$1
archive=$2
gpunode=$(cd "$(dirname "$0")/.." && pwd)/build/gpunode

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "gpunode $*"; set +e; "$gpunode" "$@"; rc=$?; set -e; printf '(exit %d)\n' "$rc"; }
gpus() {
  printf '$ kubectl get nodes -o custom-columns=...\n'
  kubectl get nodes -o 'custom-columns=NAME:.metadata.name,GPU:.status.allocatable.nvidia\.com/gpu,SHARED:.status.allocatable.nvidia\.com/gpu\.shared'
}

say "6. The whole node, from scratch: time-slicing, 8 slots per GPU"
run status --root "$root" --variant time-slicing
run install --root "$root" --image-archive "$archive" --variant time-slicing
gpus
say "   Rerun: every layer is checked, nothing is written"
run install --root "$root" --image-archive "$archive" --variant time-slicing

say "7. Fewer slots (8 -> 4): the config changes, the plugin pods restart by themselves"
run install --root "$root" --image-archive "$archive" --variant time-slicing --replicas 4
gpus

say "8. Back to one slot per GPU: the time-slicing ConfigMap is removed"
run install --root "$root" --image-archive "$archive"
gpus
printf '$ kubectl get ds,cm -n kube-system\n'
kubectl -n kube-system get ds,cm

say "9. Someone applied the upstream manifest without runtimeClassName"
kubectl -n kube-system patch ds nvidia-device-plugin-daemonset --type=json \
  -p '[{"op":"remove","path":"/spec/template/spec/runtimeClassName"}]'
sleep 1
run status --root "$root" --only plugin,allocatable
say "   install puts it right"
run install --root "$root" --image-archive "$archive"

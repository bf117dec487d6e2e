#!/usr/bin/env bash
# Part three of the demo, run by scripts/demo.sh inside build/test/sim_cluster:
# one simulated k3s API server and four nodes (a server without GPUs, two GPU
# agents, a CPU-only agent), each with its own host tree, its own containerd
# and its kubelet's credentials. DIR/NODE.env holds how gpunode runs there.
# usage: demo-cluster.sh DIR
set -euo pipefail
dir=$1
archive=$dir/k8s-device-plugin.tar
gpunode=$(cd "$(dirname "$0")/.." && pwd)/build/gpunode

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# on NODE ARGS...: gpunode ARGS on that node (its host tree, its containerd).
on() {
  local node=$1; shift
  local root; root=$(sed -n 's/^ROOT=//p' "$dir/$node.env")
  printf '%s$ gpunode %s\n' "$node" "$*"
  set +e
  env $(grep -v '^ROOT=' "$dir/$node.env") "$gpunode" "$@" --root "$root"
  rc=$?
  set -e
  printf '(exit %d)\n' "$rc"
}
gpus() {
  printf '$ kubectl get nodes -o custom-columns=...\n'
  kubectl get nodes -o 'custom-columns=NAME:.metadata.name,LABELLED:.metadata.labels.nvidia\.com/gpu\.present,COUNT:.metadata.labels.nvidia\.com/gpu\.count,GPU:.status.allocatable.nvidia\.com/gpu'
}

say "10. Many nodes: a server without GPUs, agents gpu-a (1 GPU) and gpu-b (2), CPU-only cpu-1"
say "    On an agent, gpunode uses the kubelet's own identity; the cluster part is not there yet"
on gpu-a install --image-archive "$archive" --timeout 30s
say "    The cluster part, once, from the server (admin kubeconfig)"
on server install --scope cluster --timeout 30s
say "    Each GPU agent's part: it labels its own Node, the DaemonSet follows the label"
on gpu-a install --image-archive "$archive" --timeout 30s
on gpu-b install --image-archive "$archive" --timeout 30s
gpus
printf '$ kubectl -n kube-system get pods -o wide\n'
kubectl -n kube-system get pods -o 'custom-columns=POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase'

say "11. Time-slicing for every GPU node: plan shows each node's slots now and after"
on server plan --scope cluster --variant time-slicing --replicas 4
say "    install refuses to change other nodes without --all-nodes"
on server install --scope cluster --variant time-slicing --replicas 4 --timeout 30s
on server install --scope cluster --variant time-slicing --replicas 4 --all-nodes --timeout 30s
gpus
say "    status on an agent shows what the cluster runs"
on gpu-b status --only plugin,allocatable

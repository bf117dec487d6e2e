#!/usr/bin/env bash
# The demo: gpunode against simulated GPU nodes. Each node is a host tree
# built from real readings (an H200's nvidia-smi, containerd configs rendered
# from k3s's templates) with simulated nvidia-smi and systemctl on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
top=$(pwd)
demo=$top/build/demo
mkdir -p "$demo"
export PATH=$top/test/sim/bin:$PATH
gpunode=$top/build/gpunode

host=(--only preflight,driver,toolkit,handler)  # the host layers; the cluster comes in part two
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "gpunode $*"; set +e; "$gpunode" "$@"; rc=$?; set -e; printf '(exit %d)\n' "$rc"; }

say "1. The host layers of a healthy node: one H200, k3s with config v3, toolkit in /usr/bin"
bash test/sim/host-tree.sh "$demo/node-a" good-v3
export GPUNODE_SIM_ROOT=$demo/node-a
run status --root "$demo/node-a" "${host[@]}"
run install --root "$demo/node-a" "${host[@]}"
say "   Rerun: nothing to change (install converges)"
run install --root "$demo/node-a" "${host[@]}"

say "2. The most common field failure: toolkit installed after k3s started"
bash test/sim/host-tree.sh "$demo/node-b" toolkit-after-k3s
export GPUNODE_SIM_ROOT=$demo/node-b
run install --root "$demo/node-b" "${host[@]}"
say "   Let gpunode restart k3s and wait for containerd's new config"
run install --root "$demo/node-b" --restart-k3s "${host[@]}"

say "2b. No toolkit at all: the bundle on the USB stick carries NVIDIA's toolkit packages, the host's rpm installs them"
bash test/sim/host-tree.sh "$demo/node-t" no-toolkit
rm -rf "$demo/node-t/var/lib/rpm" "$demo/toolkit-rpm" "$demo/usb-t"
rpm --root "$demo/node-t" --dbpath /var/lib/rpm --initdb 2>/dev/null
# Stand-ins shaped like NVIDIA's four packages (the real ones cannot be
# downloaded here), and a small device plugin image for the bundle.
test/tools/make-toolkit-packages.sh "$demo/toolkit-rpm" --family rpm --arch "$(dpkg --print-architecture)" >/dev/null
build/test/make_test_image "$demo/k8s-device-plugin-v0.19.3.tar" --mib 20 >/dev/null
printf '$ %s\n' "gpunode bundle create --out $demo/usb-t --image-archive ... --toolkit-packages $demo/toolkit-rpm"
"$gpunode" bundle create --out "$demo/usb-t" --image-archive "$demo/k8s-device-plugin-v0.19.3.tar" \
  --toolkit-packages "$demo/toolkit-rpm" 2>&1 | tail -1
export GPUNODE_SIM_ROOT=$demo/node-t
run install --root "$demo/node-t" --bundle "$demo/usb-t" --insecure-skip-signature "${host[@]}"
say "   Rerun with --restart-k3s: the packages are the bundle's, k3s picks up the runtime"
run install --root "$demo/node-t" --bundle "$demo/usb-t" --insecure-skip-signature --restart-k3s "${host[@]}"

say "3. Eight GPUs with MIG on, as JSON lines for automation"
bash test/sim/host-tree.sh "$demo/node-c" good-v2
GPUNODE_SIM_GPU_COUNT=8 GPUNODE_SIM_GPU_MIG=Enabled run install --root "$demo/node-c" --only driver --json

say "4. A hand-made containerd template that dropped SystemdCgroup (pods die after seconds)"
bash test/sim/host-tree.sh "$demo/node-d" no-systemd-cgroup
run status --root "$demo/node-d" "${host[@]}"

say "4b. Below the driver: nvidia-smi is fine, but /dev/nvidia-uvm is missing (every CUDA container fails)"
bash test/sim/host-tree.sh "$demo/node-u" no-uvm
run status --root "$demo/node-u" --only driver
say "4c. An HGX board (8 GPUs, NVSwitches) whose Fabric Manager is stopped: CUDA would fail with 802"
bash test/sim/host-tree.sh "$demo/node-h" hgx-fm-stopped
GPUNODE_SIM_ROOT=$demo/node-h GPUNODE_SIM_GPU_COUNT=8 \
  GPUNODE_SIM_GPU_Q=test/fixtures/gpu/derived/hgx-8gpu-q-fabric-not-started.txt \
  run status --root "$demo/node-h" --only driver
say "4d. A GPU that fell off the bus (Xid 79 in the kernel log): a warning naming it"
bash test/sim/host-tree.sh "$demo/node-x" hgx
GPUNODE_SIM_ROOT=$demo/node-x GPUNODE_SIM_GPU_COUNT=8 \
  GPUNODE_SIM_GPU_Q=test/fixtures/gpu/derived/hgx-8gpu-q-fabric-completed.txt \
  GPUNODE_SIM_KERNEL_LOG=test/fixtures/gpu/derived/dmesg-xid-79.txt \
  run status --root "$demo/node-x" --only driver

say "5. The device plugin image: verified blob by blob before containerd sees it"
bash test/sim/host-tree.sh "$demo/node-e" good-v3
build/test/make_test_image "$demo/damaged.tar" --mib 20 --damage corrupt-layer >/dev/null
# A private containerd stands in for k3s's (`k3s ctr` forwards to it).
build/test/sim_node --root "$demo/node-e" --containerd -- \
  "$gpunode" install --root "$demo/node-e" --only image --image-archive "$demo/damaged.tar" || true

# Part two: the cluster layers against the simulated k3s node.
build/test/sim_node --root "$demo/node-e" --containerd -- \
  bash scripts/demo-node.sh "$demo/node-e" "$demo/k8s-device-plugin-v0.19.3.tar"

# Part three: many nodes behind one simulated API server.
build/test/sim_cluster --dir "$demo/cluster" --node server:server:0:cpu-server \
  --node gpu-a:agent:1 --node gpu-b:agent:2 --node cpu-1:agent:0:cpu-agent -- \
  bash scripts/demo-cluster.sh "$demo/cluster"

# Part four: the same kind of cluster rolled out by Ansible.
build/test/sim_cluster --dir "$demo/fleet" --node server:server:0:cpu-server \
  --node gpu-a:agent:1 --node gpu-b:agent:2 --node gpu-c:agent:1 \
  --node gpu-d:agent:2:agent-no-handler --node cpu-1:agent:0:cpu-agent -- \
  /usr/bin/python3 scripts/demo-fleet.py "$demo/fleet"

say "Done. The simulated nodes are under build/demo/; try: build/gpunode --help"

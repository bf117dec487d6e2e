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

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "gpunode $*"; set +e; "$gpunode" "$@"; rc=$?; set -e; printf '(exit %d)\n' "$rc"; }

say "1. A healthy node: one H200, k3s with config v3, toolkit in /usr/bin"
bash test/sim/host-tree.sh "$demo/node-a" good-v3
export GPUNODE_SIM_ROOT=$demo/node-a
run status --root "$demo/node-a"
run install --root "$demo/node-a"
say "   Rerun: nothing to change (install converges)"
run install --root "$demo/node-a"

say "2. The most common field failure: toolkit installed after k3s started"
bash test/sim/host-tree.sh "$demo/node-b" toolkit-after-k3s
export GPUNODE_SIM_ROOT=$demo/node-b
run install --root "$demo/node-b"
say "   Let gpunode restart k3s and wait for containerd's new config"
run install --root "$demo/node-b" --restart-k3s

say "3. Eight GPUs with MIG on, as JSON lines for automation"
bash test/sim/host-tree.sh "$demo/node-c" good-v2
GPUNODE_SIM_GPU_COUNT=8 GPUNODE_SIM_GPU_MIG=Enabled run install --root "$demo/node-c" --only driver --json

say "4. A hand-made containerd template that dropped SystemdCgroup (pods die after seconds)"
bash test/sim/host-tree.sh "$demo/node-d" no-systemd-cgroup
run status --root "$demo/node-d"

say "5. The device plugin image: verified blob by blob, imported into containerd, pinned"
# A private containerd stands in for k3s's (k3s ctr -> ctr --address ...).
ctd=$demo/containerd
rm -rf "$ctd"; mkdir -p "$ctd/bin"
cat >"$ctd/config.toml" <<TOML
version = 2
root = "$ctd/root"
state = "$ctd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$ctd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$ctd/opt"
TOML
printf '#!/bin/sh\n[ "$1" = ctr ] || exit 1\nshift\nexec ctr --address %s "$@"\n' "$ctd/containerd.sock" >"$ctd/bin/k3s"
chmod +x "$ctd/bin/k3s"
setsid containerd --config "$ctd/config.toml" >"$ctd/log" 2>&1 &
ctd_pid=$!
trap 'kill $ctd_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do ctr --address "$ctd/containerd.sock" version >/dev/null 2>&1 && break; sleep 0.1; done
export PATH=$ctd/bin:$PATH
build/test/make_test_image "$demo/k8s-device-plugin-v0.19.3.tar" --mib 20
build/test/make_test_image "$demo/damaged.tar" --mib 20 --damage corrupt-layer >/dev/null
run install --root "$demo/node-a" --only image --image-archive "$demo/damaged.tar"
run install --root "$demo/node-a" --only image --image-archive "$demo/k8s-device-plugin-v0.19.3.tar"
say "   Rerun: the image is in place and pinned, nothing is imported"
run install --root "$demo/node-a" --image-archive "$demo/k8s-device-plugin-v0.19.3.tar"
printf '$ k3s ctr images ls\n'; k3s ctr -n k8s.io images ls

say "Done. The simulated nodes are under build/demo/; try: build/gpunode --help"

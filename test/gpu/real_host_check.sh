#!/usr/bin/env bash
# On a real NVIDIA host (no k3s needed): runs the shipped, portable gpunode's
# driver checks against the real driver, NVML with --root / and the real
# nvidia-smi through a --root tree, then the two child-process hazards of the
# hardening issue with the real nvidia-smi behind a wrapper: a background job
# left holding its stdout, and 200 MB of output. Prints what it saw; exits 77
# without a GPU. Usage: test/gpu/real_host_check.sh [PATH/TO/bin/gpunode]
set -uo pipefail
gpunode=${1:-build/portable/gpunode/bin/gpunode}
smi=$(command -v nvidia-smi) || { echo "no nvidia-smi: skipped"; exit 77; }
[ -r /proc/driver/nvidia/version ] || { echo "no NVIDIA driver: skipped"; exit 77; }
"$smi" -L
cat /proc/driver/nvidia/version

# Wall seconds and peak RSS (KiB) of a command, from the kernel's rusage.
measure() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
rc = subprocess.run(sys.argv[1:]).returncode
print(f"-> exit {rc}, {time.monotonic() - t:.2f} s, peak RSS "
      f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024} MiB",
      file=sys.stderr)
PY
}

echo "== status --only driver (NVML, --root /)"
measure "$gpunode" status --only driver
"$gpunode" status --only driver --json | grep '"stage":"driver"'

tree=$(mktemp -d)
trap 'rm -rf "$tree" "$wrap"' EXIT
mkdir -p "$tree/proc/driver/nvidia"
cp /proc/driver/nvidia/version "$tree/proc/driver/nvidia/version"
# The host's device nodes, as the plain files a tree holds them as, and
# whether nvidia-uvm is loaded: the driver layer checks both.
mkdir -p "$tree/dev"
for node in /dev/nvidia*; do
  [ -e "$node" ] && [ ! -d "$node" ] && : >"$tree$node"
done
[ -d /sys/module/nvidia_uvm ] && mkdir -p "$tree/sys/module/nvidia_uvm"
echo "== status --root TREE --only driver (the real nvidia-smi)"
measure "$gpunode" status --root "$tree" --only driver

wrap=$(mktemp -d)
cat >"$wrap/nvidia-smi" <<EOF
#!/bin/sh
# The real nvidia-smi, then a background job that keeps its stdout open.
"$smi" "\$@"; rc=\$?
sleep 20 &
exit \$rc
EOF
chmod +x "$wrap/nvidia-smi"
echo "== a wrapper leaves 'sleep 20' holding stdout (must not wait 20 s or blame the driver)"
PATH=$wrap:$PATH measure "$gpunode" status --root "$tree" --only driver
echo "left running: $(pgrep -c -f 'sleep 20' || true) sleep process(es)"
pkill -f 'sleep 20' || true

cat >"$wrap/nvidia-smi" <<EOF
#!/bin/sh
# The real answer, then 200 MB more.
"$smi" "\$@"; rc=\$?
head -c 200000000 /dev/zero | tr '\\0' x
exit \$rc
EOF
echo "== a wrapper prints 200 MB after the real answer (memory must stay bounded, the cut named)"
PATH=$wrap:$PATH measure "$gpunode" status --root "$tree" --only driver 2>&1 | cut -c1-400

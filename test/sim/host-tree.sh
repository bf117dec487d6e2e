#!/usr/bin/env bash
# Builds a simulated GPU host's file system under DIR, for `gpunode --root DIR`.
# The files are the real ones: k3s-rendered containerd configs and H200
# driver readings from test/fixtures. Used by the tests and by the demo.
#
# usage: host-tree.sh DIR SCENARIO [NODE_NAME]
#   NODE_NAME (default gpu-node-1) is written as node-name in config.yaml.
#   Agent scenarios have no /etc/rancher/k3s/k3s.yaml (only servers get one).
#   good-v3            k3s v1.32+ (config v3), toolkit in /usr/bin, handler rendered
#   good-v2            k3s v1.30 (config v2), toolkit in /usr/bin, handler rendered
#   agent              like good-v3 but an agent node (k3s-agent.service)
#   toolkit-after-k3s  toolkit in /usr/bin, but k3s rendered its config before it existed
#   no-toolkit         no nvidia-container-runtime anywhere, no handler
#   toolkit-dir        toolkit only in /usr/local/nvidia/toolkit (GPU operator style)
#   toolkit-shadow     toolkit in /usr/local/nvidia/toolkit AND /usr/bin (leftover dir)
#   stale-handler      handler points at /usr/bin/nvidia-container-runtime, which is gone
#   no-systemd-cgroup  a config-v3.toml.tmpl override dropped SystemdCgroup from nvidia
#   template-override  a config-v3.toml.tmpl override that keeps the base template
#   malformed-config   config.toml is not valid TOML
#   no-config          k3s installed, containerd config never rendered
#   no-k3s             driver and toolkit, but no k3s at all
#   no-driver          like good-v3 but the kernel module is not loaded
#   cpu-agent          k3s agent (k3s-agent.service), no driver, no toolkit, no handler
#   cpu-server         k3s server, no driver, no toolkit, no handler
#   agent-no-handler   GPU agent with the toolkit, but k3s rendered its config before it
#   no-uvm             like good-v3 but nvidia-uvm is not loaded: no /dev/nvidia-uvm(-tools)
#   uvm-node-missing   nvidia-uvm is loaded, but /dev/nvidia-uvm was never created
#   no-device-nodes    like good-v3 but no /dev/nvidiactl and no /dev/nvidia<N>
#   hgx                an HGX board: 4 NVSwitches on the PCI bus, Fabric Manager
#                      580.159.04 installed and active
#   hgx-no-fm          the same board without Fabric Manager
#   hgx-fm-stopped     Fabric Manager installed but not running
#   hgx-fm-mismatch    Fabric Manager 580.95.05 under driver 580.159.04
# Device nodes are plain files here (a tree cannot hold character devices
# without privileges); gpunode takes anything but a directory as one.
set -euo pipefail
dir=${1:?usage: host-tree.sh DIR SCENARIO}
scenario=${2:?usage: host-tree.sh DIR SCENARIO}
node_name=${3:-gpu-node-1}
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/../fixtures
cdir=$dir/var/lib/rancher/k3s/agent/etc/containerd

exe() { mkdir -p "$(dirname "$dir$1")"; printf '#!/bin/sh\necho "simulated %s"\n' "$1" >"$dir$1"; chmod 0755 "$dir$1"; }
driver() {
  mkdir -p "$dir/proc/driver/nvidia" "$dir/dev" "$dir/sys/module/nvidia" "$dir/sys/module/nvidia_uvm"
  cp "$fixtures/gpu/h200-580.159.04/proc-driver-nvidia-version" "$dir/proc/driver/nvidia/version"
  # The nodes the real H200 host had (fixtures/gpu/h200-580.159.04/dev-nodes.txt),
  # with room for up to 8 GPUs.
  for n in nvidiactl nvidia-uvm nvidia-uvm-tools nvidia0 nvidia1 nvidia2 nvidia3 nvidia4 nvidia5 nvidia6 nvidia7; do
    : >"$dir/dev/$n"
  done
  pci 0000:00:06.0 0x030200   # the H200: a 3D controller
}
# A PCI function in sysfs: address, class (vendor NVIDIA).
pci() {
  mkdir -p "$dir/sys/bus/pci/devices/$1"
  echo 0x10de >"$dir/sys/bus/pci/devices/$1/vendor"
  echo "$2" >"$dir/sys/bus/pci/devices/$1/class"
}
# An HGX board's NVSwitches (class 0x068000, "other bridge") and their nodes.
nvswitches() {
  local i=0
  for a in 0000:05:00.0 0000:06:00.0 0000:07:00.0 0000:08:00.0; do
    pci "$a" 0x068000; : >"$dir/dev/nvidia-nvswitch$i"; i=$((i + 1))
  done
  : >"$dir/dev/nvidia-nvswitchctl"
}
# Fabric Manager VERSION installed (nv-fabricmanager and its unit), ACTIVE yes|no.
fabric_manager() {
  mkdir -p "$dir/usr/bin" "$dir/etc/systemd/system"
  printf '#!/bin/sh\necho "Fabric Manager version is : %s"\n' "$1" >"$dir/usr/bin/nv-fabricmanager"
  chmod 0755 "$dir/usr/bin/nv-fabricmanager"
  printf '[Unit]\nDescription=NVIDIA fabric manager service (simulated)\n[Service]\nExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n' \
    >"$dir/etc/systemd/system/nvidia-fabricmanager.service"
  # The simulated systemctl's is-active reads this.
  if [ "$2" = yes ]; then mkdir -p "$dir/run/sim-active"; : >"$dir/run/sim-active/nvidia-fabricmanager"; fi
}
good_v3() { driver; k3s; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi; config v3-nvidia.toml; }
k3s() {
  local unit=${1:-k3s}
  exe /usr/local/bin/k3s
  mkdir -p "$dir/etc/systemd/system" "$dir/etc/rancher/k3s"
  printf '[Unit]\nDescription=Lightweight Kubernetes (simulated)\n[Service]\nExecStart=/usr/local/bin/k3s %s\n' \
    "$([ "$unit" = k3s ] && echo server || echo agent)" >"$dir/etc/systemd/system/$unit.service"
  # The name k3s registers the node as; the simulated cluster uses it too.
  printf 'node-name: %s\nwrite-kubeconfig-mode: "0600"\n' "$node_name" >"$dir/etc/rancher/k3s/config.yaml"
}
config() { mkdir -p "$cdir"; cp "$fixtures/containerd/$1" "$cdir/config.toml"; }

rm -rf "$dir"
mkdir -p "$dir"
case $scenario in
  good-v3) driver; k3s; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi; config v3-nvidia.toml ;;
  good-v2) driver; k3s; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime-experimental; config v2-nvidia.toml ;;
  agent) driver; k3s k3s-agent; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi; config v3-nvidia.toml ;;
  toolkit-after-k3s) driver; k3s; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi; config v3-no-nvidia.toml ;;
  no-toolkit) driver; k3s; config v3-no-nvidia.toml ;;
  toolkit-dir) driver; k3s; exe /usr/local/nvidia/toolkit/nvidia-container-runtime; config v3-nvidia-toolkit-dir.toml ;;
  toolkit-shadow) driver; k3s; exe /usr/local/nvidia/toolkit/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime; config v3-nvidia-toolkit-dir.toml ;;
  stale-handler) driver; k3s; exe /usr/local/nvidia/toolkit/nvidia-container-runtime; config v3-nvidia.toml ;;
  no-systemd-cgroup)
    driver; k3s; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi
    mkdir -p "$cdir"
    # A template copied from config.toml and edited by hand, without
    # SystemdCgroup for nvidia (k3s #7130); k3s renders it as written.
    awk '/runtimes.'"'"'nvidia'"'"'.options\]/{inopt=1} /^\[/{if(!/runtimes.'"'"'nvidia'"'"'.options\]/)inopt=0} !(inopt && /SystemdCgroup/)' \
      "$fixtures/containerd/v3-nvidia.toml" | sed '1d' >"$cdir/config-v3.toml.tmpl"
    cp "$cdir/config-v3.toml.tmpl" "$cdir/config.toml"
    ;;
  template-override)
    driver; k3s; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi; config v3-nvidia.toml
    printf '{{ template "base" . }}\n' >"$cdir/config-v3.toml.tmpl" ;;
  malformed-config)
    driver; k3s; exe /usr/bin/nvidia-container-runtime; config v3-nvidia.toml
    printf '\n[plugins.broken\n  x = 1\n' >>"$cdir/config.toml" ;;
  no-config) driver; k3s; exe /usr/bin/nvidia-container-runtime ;;
  no-k3s) driver; exe /usr/bin/nvidia-container-runtime ;;
  cpu-agent) k3s k3s-agent; config v3-no-nvidia.toml ;;
  cpu-server) k3s; config v3-no-nvidia.toml ;;
  agent-no-handler) driver; k3s k3s-agent; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi; config v3-no-nvidia.toml ;;
  no-driver) k3s; exe /usr/bin/nvidia-container-runtime; exe /usr/bin/nvidia-container-runtime.cdi; config v3-nvidia.toml ;;
  no-uvm) good_v3; rm -rf "$dir/dev/nvidia-uvm" "$dir/dev/nvidia-uvm-tools" "$dir/sys/module/nvidia_uvm" ;;
  uvm-node-missing) good_v3; rm -f "$dir/dev/nvidia-uvm" "$dir/dev/nvidia-uvm-tools" ;;
  no-device-nodes) good_v3; rm -f "$dir"/dev/nvidiactl "$dir"/dev/nvidia[0-9] ;;
  hgx) good_v3; nvswitches; fabric_manager 580.159.04 yes ;;
  hgx-no-fm) good_v3; nvswitches ;;
  hgx-fm-stopped) good_v3; nvswitches; fabric_manager 580.159.04 no ;;
  hgx-fm-mismatch) good_v3; nvswitches; fabric_manager 580.95.05 yes ;;
  *) echo "host-tree.sh: unknown scenario '$scenario'" >&2; exit 2 ;;
esac

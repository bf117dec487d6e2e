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
set -euo pipefail
dir=${1:?usage: host-tree.sh DIR SCENARIO}
scenario=${2:?usage: host-tree.sh DIR SCENARIO}
node_name=${3:-gpu-node-1}
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/../fixtures
cdir=$dir/var/lib/rancher/k3s/agent/etc/containerd

exe() { mkdir -p "$(dirname "$dir$1")"; printf '#!/bin/sh\necho "simulated %s"\n' "$1" >"$dir$1"; chmod 0755 "$dir$1"; }
driver() {
  mkdir -p "$dir/proc/driver/nvidia"
  cp "$fixtures/gpu/h200-580.159.04/proc-driver-nvidia-version" "$dir/proc/driver/nvidia/version"
}
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
  *) echo "host-tree.sh: unknown scenario '$scenario'" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Builds the real tier's upstream parts from the Go module proxy, each from
# its own module under test/real/components (one go.mod per component, so
# that Go's version selection keeps each one's dependencies its own), into a
# cache outside the checkout. A component is rebuilt only when its go.mod,
# go.sum, sources or build flags change: the cache key is their sha256.
#
#   test/real/build-components.sh            build what is missing; print the
#                                            bin directory
#   GPUNODE_REAL_CACHE=DIR                   cache (default /var/cache/gpunode-real)
#
# Exit 77 (ctest's skip) with the reason when Go >= 1.24 is missing: the
# tool directive in the components' go.mod needs it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUNODE_REAL_CACHE:-/var/cache/gpunode-real}
export PATH=$PATH:/usr/local/go/bin
export GOFLAGS=${GOFLAGS:--buildvcs=false} GOTOOLCHAIN=local

if ! command -v go >/dev/null 2>&1; then
  echo "build-components: skipped: no Go toolchain (the real tier needs Go >= 1.24)" >&2
  exit 77
fi
minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$minor" ] || [ "$minor" -lt 24 ]; then
  echo "build-components: skipped: $(go env GOVERSION) is older than Go 1.24" >&2
  exit 77
fi

k8s_version=v1.36.2
v=k8s.io/component-base/version
k8s_ldflags="-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=36 -X $v.gitTreeState=clean -X $v.buildDate=2026-01-01T00:00:00Z"

# component | cgo | output=package ... (packages relative to the module graph)
# cgo: kine's SQLite, and go-nvml's dlopen of libnvidia-ml (the plugin and
# the runtime's internal/cuda) need it.
components=(
  "k8s|0|k8s=."
  "kine|1|kine=github.com/k3s-io/kine"
  "containerd|0|containerd=github.com/containerd/containerd/v2/cmd/containerd ctr=github.com/containerd/containerd/v2/cmd/ctr containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
  "device-plugin|1|nvidia-device-plugin=github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin"
  "nvidia-runtime|1|nvidia-container-runtime=github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime"
  "bed|0|realbed=./cmd/realbed pause=./cmd/pause cuda-sample=./cmd/cuda-sample realbed.test=test:."
)

bin=$cache/bin
mkdir -p "$cache" "$bin"
exec 9>"$cache/.lock"
flock 9
for c in "${components[@]}"; do
  IFS='|' read -r name cgo outputs <<<"$c"
  dir=$here/components/$name
  [ "$name" = bed ] && dir=$here/bed
  key=$( (cd "$dir" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 | sort -z | xargs -0 sha256sum; sed -n "/^  *case \$name in/,/^  *esac/p" "$here/build-components.sh"; echo "$cgo $outputs $k8s_ldflags $(go env GOVERSION)") | sha256sum | cut -c1-16)
  out=$cache/$name-$key
  if [ ! -f "$out/.done" ]; then
    echo "build-components: building $name (cold: minutes)" >&2
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    start=$(date +%s)
    for o in $outputs; do
      flags="-s -w"
      case $name in
        k8s) flags=$k8s_ldflags ;;
        # Their Makefiles' -X: the version each prints and logs.
        nvidia-runtime) flags="$flags -X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=1.17.8" ;;
        device-plugin) flags="$flags -X github.com/NVIDIA/k8s-device-plugin/internal/info.version=v0.19.3" ;;
      esac
      pkg=${o#*=}
      if [ "${pkg#test:}" != "$pkg" ]; then
        # The tier's tests, compiled once: ctest runs this binary.
        (cd "$dir" && CGO_ENABLED=$cgo go test -c -trimpath -o "$out.tmp/${o%%=*}" "${pkg#test:}")
      else
        (cd "$dir" && CGO_ENABLED=$cgo go build -trimpath -ldflags "$flags" -o "$out.tmp/${o%%=*}" "$pkg")
      fi
    done
    echo "$(( $(date +%s) - start ))" >"$out.tmp/.build-seconds"
    : >"$out.tmp/.done"
    rm -rf "$out"
    mv "$out.tmp" "$out"
    echo "build-components: built $name in $(cat "$out/.build-seconds")s" >&2
  fi
  for o in $outputs; do ln -sfn "$out/${o%%=*}" "$bin/${o%%=*}"; done
  # Earlier builds of this component (another go.sum) are not used again.
  for old in "$cache/$name"-*; do
    [ "$old" = "$out" ] || rm -rf "$old"
  done
done
echo "$bin"

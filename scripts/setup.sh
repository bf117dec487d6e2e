#!/usr/bin/env bash
# Installs what gpunode needs to build and test (Debian 12 packages only;
# containerd is the real one the image tests start on a private socket) and
# builds it into ./build. Idempotent: apt runs only when a package is missing,
# and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

build_packages=(g++ cmake ninja-build pkg-config
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libssl-dev libspdlog-dev
  libyaml-cpp-dev libarchive-dev libcurl4-openssl-dev catch2
  containerd
  docker-registry skopeo  # a real loopback registry for the pull tests
  apache2-utils  # htpasswd (bcrypt) for the registry that wants credentials
  rpm  # rpmbuild and rpm --root: the toolkit packages' tests (dpkg is there)
  python3-yaml openssl  # the simulated k3s node (test/sim/k3s_sim.py)
  debootstrap  # the bullseye chroot of the packaging tests (label package)
  # ansible-doc finds the collection the .deb installs (test-deb.sh); the
  # collection's tests (test/ansible, test/collection) and its lint
  ansible-core ansible-lint
  openssh-server  # the test's own key-only sshd, for the node reached over SSH
  python3  # Debian's own: the tests run /usr/bin/python3, whatever PATH says
  clang-format  # the meta-clang-format test holds the sources to .clang-format
  ccache  # a rebuild in a fresh clone reuses the objects of an earlier one
  # the real tier (test/real): runc and the CNI plugins under real
  # containerd and kubelet; nsenter and ip for its node namespaces
  runc containernetworking-plugins util-linux iproute2
  # /bin/sh of the real tier's CUDA sample stand-in image: the proof Pods
  # run their fixed script in the image's shell (installer/proof/proof_pod.hpp)
  busybox-static)

# Real kubectl drives the simulated node in the tests. This machine image
# ships a current one; elsewhere Debian's own (kubernetes-client) stands in.
command -v kubectl >/dev/null 2>&1 || build_packages+=(kubernetes-client)

. scripts/lib/ensure-packages.sh
ensure_packages setup "${build_packages[@]}"

# scripts/test-sanitize.sh and scripts/fuzz.sh need the packages, not build/.
[ "${GPUNODE_SETUP_PACKAGES_ONLY:-0}" = 1 ] && exit 0

# Two cores and 24 GiB: two jobs are the sweet spot.
jobs=${GPUNODE_BUILD_JOBS:-$(nproc)}
. scripts/lib/build.sh
configure_build build -DGPUNODE_WERROR=ON
build_with_progress setup build "$jobs"

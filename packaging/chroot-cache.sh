#!/usr/bin/env bash
# Prints the path of a cached Debian root file system (debootstrap
# --variant=minbase), making it first when it is missing. The cache is only
# ever copied, never entered, so every test starts from the same tree.
#   packaging/chroot-cache.sh [SUITE]   (default bullseye: glibc 2.31;
#   Ubuntu's jammy and noble come from archive.ubuntu.com, unsigned unless
#   ubuntu-archive-keyring.gpg is installed)
# Exit 77 (ctest's "skipped") without root, debootstrap or the mirror.
set -euo pipefail
suite=${1:-bullseye}
cache=${GPUNODE_CHROOT_CACHE:-$(cd "$(dirname "$0")/.." && pwd)/build-chroot}
case $suite in
  xenial|bionic|focal|jammy|noble) mirror=${GPUNODE_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu} ;;
  *) mirror=${GPUNODE_DEBIAN_MIRROR:-http://deb.debian.org/debian} ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "chroot-cache: skipped: needs root (chroot, debootstrap)" >&2; exit 77; }
if [ ! -x "$cache/$suite/bin/sh" ]; then
  command -v debootstrap >/dev/null || { echo "chroot-cache: skipped: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 77; }
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  if [ ! -x "$cache/$suite/bin/sh" ]; then
    rm -rf "$cache/$suite.tmp"
    start=$(date +%s)
    if ! debootstrap --variant=minbase "$suite" "$cache/$suite.tmp" "$mirror" >"$cache/$suite.log" 2>&1; then
      echo "chroot-cache: skipped: debootstrap $suite from $mirror failed (offline?); see $cache/$suite.log" >&2
      rm -rf "$cache/$suite.tmp"
      exit 77
    fi
    mv "$cache/$suite.tmp" "$cache/$suite"
    echo "chroot-cache: debootstrap $suite took $(( $(date +%s) - start ))s" >&2
  fi
fi
echo "$cache/$suite"

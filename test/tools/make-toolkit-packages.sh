#!/usr/bin/env bash
# Builds stand-ins for NVIDIA's container toolkit packages, for the tests:
# the real ones cannot be downloaded here. They have NVIDIA's names, the same
# dependencies among the four and the same file paths (nvidia-container-
# toolkit's packaging/debian/*.install and packaging/rpm/SPECS/*.spec; libnvidia-
# container's packaging), with shell scripts in place of the binaries: each
# prints "<name> version <V>" like the real --version does.
#
#   test/tools/make-toolkit-packages.sh OUT_DIR [--family deb|rpm]
#       [--version 1.17.8-1] [--arch amd64|arm64] [--postinst-sleep SECONDS]
#       [--runtime BINARY]
#
# --runtime (the real tier, test/real): nvidia-container-runtime and .cdi
# are BINARY, the real runtime built from nvidia-container-toolkit's module,
# and config.toml puts it in CDI mode (mode = "cdi", the devices named by
# the CDI specs in /etc/cdi and /var/run/cdi), as `nvidia-ctk config --set
# nvidia-container-runtime.mode=cdi` would.
#
# --postinst-sleep (deb only: an rpm scriptlet would make rpm require
# /bin/sh, which the tests' rpm databases lack): nvidia-container-toolkit,
# which dpkg configures last, gets a postinst that, the first time it runs,
# writes its pid to /tmp/gpunode-test-postinst.pid (in the root dpkg
# installs into) and sleeps: a slow transaction to interrupt, or to cut as a
# power cut would.
#
# Writes OUT_DIR/<name>_<version>_<arch>.deb (dpkg-deb --build) or
# OUT_DIR/<name>-<version>.<rpm arch>.rpm (rpmbuild -bb), one per package, and
# prints their paths. The rpms declare no dependency outside the set
# (AutoReqProv: no), so `rpm -U --root` installs them into an empty tree.
set -euo pipefail

out=${1:?usage: make-toolkit-packages.sh OUT_DIR [--family deb|rpm] [--version V] [--arch A]}
shift
family=deb version=1.17.8-1 arch=amd64 postinst_sleep= runtime=
while [ $# -gt 0 ]; do
  case $1 in
    --family) family=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --postinst-sleep) postinst_sleep=$2; shift 2 ;;
    --runtime) runtime=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    *) echo "make-toolkit-packages: unknown argument $1" >&2; exit 2 ;;
  esac
done
upstream=${version%-*}   # 1.17.8 of 1.17.8-1
release=${version##*-}
case $arch in
  amd64) multiarch=x86_64-linux-gnu rpm_arch=x86_64 ;;
  arm64) multiarch=aarch64-linux-gnu rpm_arch=aarch64 ;;
  *) echo "make-toolkit-packages: unknown arch $arch (amd64, arm64)" >&2; exit 2 ;;
esac
case $family in
  deb) libdir=/usr/lib/$multiarch ;;
  rpm) libdir=/usr/lib64 ;;
  *) echo "make-toolkit-packages: unknown family $family (deb, rpm)" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Package -> the files it installs (a path ending in .so.* is a library stand-in).
declare -A files=(
  [libnvidia-container1]="$libdir/libnvidia-container.so.$upstream $libdir/libnvidia-container-go.so.$upstream"
  [libnvidia-container-tools]="/usr/bin/nvidia-container-cli"
  [nvidia-container-toolkit-base]="/usr/bin/nvidia-container-runtime /usr/bin/nvidia-container-runtime.cdi /usr/bin/nvidia-container-runtime.legacy /usr/bin/nvidia-ctk /usr/bin/nvidia-cdi-hook /etc/nvidia-container-runtime/config.toml"
  [nvidia-container-toolkit]="/usr/bin/nvidia-container-runtime-hook"
)
# Package -> what it depends on, in the family's syntax (NVIDIA's control
# file and spec).
declare -A deb_depends=(
  [libnvidia-container1]=""
  [libnvidia-container-tools]="libnvidia-container1 (>= $version), libnvidia-container1 (<< 2.0.0)"
  [nvidia-container-toolkit-base]=""
  [nvidia-container-toolkit]="nvidia-container-toolkit-base (= $version), libnvidia-container-tools (>= $version), libnvidia-container-tools (<< 2.0.0)"
)
declare -A rpm_requires=(
  [libnvidia-container1]=""
  [libnvidia-container-tools]="libnvidia-container1 >= $version, libnvidia-container1 < 2.0.0"
  [nvidia-container-toolkit-base]=""
  [nvidia-container-toolkit]="nvidia-container-toolkit-base == $version, libnvidia-container-tools >= $version, libnvidia-container-tools < 2.0.0"
)

# Lays out package $1's files under directory $2.
fill() {
  local name=$1 root=$2 f
  for f in ${files[$name]}; do
    mkdir -p "$root$(dirname "$f")"
    case $f in
      *.so.*) printf 'stand-in for %s %s\n' "$(basename "$f")" "$version" >"$root$f"
              ln -sf "$(basename "$f")" "$root${f%.so.*}.so.1" ;;
      */config.toml)
        if [ -n "$runtime" ]; then
          printf '[nvidia-container-runtime]\nmode = "cdi"\nlog-level = "info"\ndebug = "/var/log/nvidia-container-runtime.log"\nruntimes = ["runc"]\n\n[nvidia-container-runtime.modes.cdi]\ndefault-kind = "nvidia.com/gpu"\nspec-dirs = ["/etc/cdi", "/var/run/cdi"]\n' >"$root$f"
        else
          printf '#accept-nvidia-visible-devices-as-volume-mounts = false\n[nvidia-container-runtime]\nmode = "auto"\n' >"$root$f"
        fi ;;
      */nvidia-container-runtime|*/nvidia-container-runtime.cdi)
        if [ -n "$runtime" ]; then
          cp "$runtime" "$root$f"
        else
          printf '#!/bin/sh\necho "%s version %s"\n' "$(basename "$f")" "$upstream" >"$root$f"
        fi
        chmod 0755 "$root$f" ;;
      *) printf '#!/bin/sh\necho "%s version %s"\n' "$(basename "$f")" "$upstream" >"$root$f"
         chmod 0755 "$root$f" ;;
    esac
  done
}

for name in libnvidia-container1 libnvidia-container-tools nvidia-container-toolkit-base nvidia-container-toolkit; do
  if [ "$family" = deb ]; then
    root=$work/$name
    fill "$name" "$root"
    mkdir -p "$root/DEBIAN"
    {
      echo "Package: $name"
      echo "Version: $version"
      echo "Architecture: $arch"
      echo "Maintainer: NVIDIA CORPORATION <cudatools@nvidia.com>"
      [ -n "${deb_depends[$name]}" ] && echo "Depends: ${deb_depends[$name]}"
      echo "Section: utils"
      echo "Priority: optional"
      echo "Homepage: https://github.com/NVIDIA/nvidia-container-toolkit"
      echo "Description: $name (gpunode test stand-in)"
    } >"$root/DEBIAN/control"
    [ "$name" = nvidia-container-toolkit-base ] && echo /etc/nvidia-container-runtime/config.toml >"$root/DEBIAN/conffiles"
    if [ -n "$postinst_sleep" ] && [ "$name" = nvidia-container-toolkit ]; then
      printf '#!/bin/sh\n[ -e /tmp/gpunode-test-postinst.pid ] && exit 0\necho $$ >/tmp/gpunode-test-postinst.pid\nsleep %s\n' "$postinst_sleep" >"$root/DEBIAN/postinst"
      chmod 0755 "$root/DEBIAN/postinst"
    fi
    file=$out/${name}_${version}_${arch}.deb
    dpkg-deb --root-owner-group -Zxz --build "$root" "$file" >/dev/null
    echo "$file"
  else
    top=$work/rpm
    mkdir -p "$top/SPECS" "$top/BUILDROOT"
    spec=$top/SPECS/$name.spec
    {
      echo "Name: $name"
      echo "Version: $upstream"
      echo "Release: $release"
      echo "Summary: $name (gpunode test stand-in)"
      echo "License: Apache-2.0"
      echo "Vendor: NVIDIA CORPORATION"
      echo "AutoReqProv: no"
      [ -n "${rpm_requires[$name]}" ] && echo "Requires: ${rpm_requires[$name]}"
      echo "%description"
      echo "$name, a stand-in for the tests of gpunode."
      echo "%install"
      echo "cp -a $work/rpmroot-$name/. %{buildroot}/"
      echo "%files"
      for f in ${files[$name]}; do
        echo "$f"
        case $f in *.so.*) echo "${f%.so.*}.so.1" ;; esac
      done
    } >"$spec"
    fill "$name" "$work/rpmroot-$name"
    rpmbuild --quiet -bb --target "$rpm_arch" --define "_topdir $top" \
      --define "_build_id_links none" --define "debug_package %{nil}" \
      --define "__os_install_post %{nil}" "$spec" >/dev/null 2>"$work/rpmbuild.log" ||
      { cat "$work/rpmbuild.log" >&2; exit 1; }
    file=$out/$name-$version.$rpm_arch.rpm
    mv "$top/RPMS/$rpm_arch/$name-$version.$rpm_arch.rpm" "$file"
    echo "$file"
  fi
done

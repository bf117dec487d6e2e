#!/usr/bin/env bash
# Proves the portable tree runs where the plain build cannot: in a Debian 11
# (bullseye, glibc 2.31, older than every target's) root file system, via
# chroot, it runs `version`, `bundle verify` of a signed bundle the tree
# made itself (so bin/gpunode + lib/gpunode/ and the Ansible collection on
# the stick are checked too)
# and `status --root` of a simulated host tree. It also shows the plain
# binary failing there (GLIBC_2.3x not found), so the proof can fail.
#   packaging/prove-portable.sh [BUILD_DIR [SUITE]]   (default build bullseye;
#   e.g. jammy for Ubuntu 22.04's glibc 2.35)
# Exit 0 proven, 1 not, 77 skipped (no root, debootstrap or mirror).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
tree=$build/portable/gpunode
[ -x "$tree/bin/gpunode" ] || { echo "prove-portable: no portable tree at $tree (build first)" >&2; exit 1; }
[ -x "$build/test/make_test_image" ] || { echo "prove-portable: needs $build/test/make_test_image" >&2; exit 1; }
suite=${2:-bullseye}
rc=0; cache=$("$repo/packaging/chroot-cache.sh" "$suite") || rc=$?
[ $rc -eq 0 ] || exit $rc

work=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-prove.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
cp -a "$cache" "$root"
fail() { echo "prove-portable: FAILED: $*" >&2; exit 1; }
in_chroot() { chroot "$root" /usr/bin/env -i PATH=/t/test/sim/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
echo "chroot: $(in_chroot /usr/bin/ldd --version | head -1)"

# What the stick carries: made by the portable tree itself, outside.
"$build/test/make_test_image" "$work/plugin.tar" --mib 1 >/dev/null
"$tree/bin/gpunode" bundle keygen --out "$work/publisher" >/dev/null 2>&1
"$tree/bin/gpunode" bundle create --out "$root/stick" --image-archive "$work/plugin.tar" \
  --sign-key "$work/publisher.key" 2>&1 | sed 's/^/outside: /'
[ -f "$root/stick/lib/gpunode/gpunode" ] || fail "the bundle lacks lib/gpunode/ (not the portable tree)"
# The Ansible collection rides along, where ANSIBLE_COLLECTIONS_PATH=<stick>/ansible/collections
# finds it, file for file (bundle verify below checks each is listed and hashed).
collection=ansible_collections/gpunode/gpunode
[ -f "$root/stick/ansible/collections/$collection/galaxy.yml" ] || fail "the bundle lacks the Ansible collection"
diff -r "$tree/share/ansible/collections/$collection" "$root/stick/ansible/collections/$collection" >&2 ||
  fail "the stick's collection differs from the portable tree's"
echo "stick: ansible/collections/$collection: $(find "$root/stick/ansible/collections" -type f | wc -l) files"
cp "$work/publisher.pub" "$root/publisher.pub"
mkdir -p "$root/t/test"
cp -a "$repo/test/sim" "$repo/test/fixtures" "$root/t/test/"
bash "$repo/test/sim/host-tree.sh" "$root/fixture" good-v3
cp "$build/gpunode" "$root/gpunode-plain"

# The plain build, given every library it links except glibc's own (so
# glibc is the only thing that differs from the portable tree):
mkdir -p "$root/plainlib"
for f in "$tree"/lib/gpunode/lib*; do
  case ${f##*/} in libc.so.*|libm.so.*|libresolv.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
    *) cp "$f" "$root/plainlib/" ;; esac
done
echo "# plain build (linked against glibc $(ldd --version | head -1 | awk '{print $NF}')), LD_LIBRARY_PATH=/plainlib:"
echo "\$ /gpunode-plain version"
if out=$(in_chroot LD_LIBRARY_PATH=/plainlib /gpunode-plain version 2>&1); then
  fail "the plain build ran in the chroot: the proof proves nothing"
fi
echo "$out" | head -3
echo "$out" | grep -q "version .GLIBC_2\.[0-9]*' not found" || fail "the plain build failed for another reason"

echo "# portable tree, from the stick:"
echo "\$ /stick/bin/gpunode version"
in_chroot /stick/bin/gpunode version | tee "$work/version.txt"
grep -q '^gpunode [0-9]' "$work/version.txt" || fail "version"
echo "\$ /stick/bin/gpunode bundle verify /stick --trust-key /publisher.pub"
in_chroot /stick/bin/gpunode bundle verify /stick --trust-key /publisher.pub 2>&1 | tee "$work/verify.txt"
grep -q '^bundle verify: ok - .* signed by ' "$work/verify.txt" || fail "bundle verify"
echo "\$ /stick/bin/gpunode status --root /fixture --only driver,toolkit,handler"
if ! in_chroot GPUNODE_SIM_ROOT=/fixture /stick/bin/gpunode status --root /fixture \
  --only driver,toolkit,handler --no-color >"$work/status.txt" 2>&1; then
  cat "$work/status.txt"; fail "status"
fi
cat "$work/status.txt"
for stage in driver toolkit handler; do
  grep -q "^\[$stage\] *ok " "$work/status.txt" || fail "status: $stage not ok"
done
# NVML still loads: the tests' stand-in libnvidia-ml.so.1 (test/stubs/
# stub_nvidia_ml.c, answering as the H200 with no variable set) where RHEL keeps it
# (/usr/lib64, which neither bullseye's ld.so.cache nor Debian's loader
# searches), asked with --root / as on a real node.
mkdir -p "$root/usr/lib64"
cc -shared -fPIC -O2 -o "$root/usr/lib64/libnvidia-ml.so.1" "$repo/test/stubs/stub_nvidia_ml.c"
# libcuda.so.1 too: the driver layer proves CUDA works (a stand-in that
# answers as CUDA 13.0 with two devices, test/stubs/stub_cuda.c).
cc -shared -fPIC -O2 -o "$root/usr/lib64/libcuda.so.1" "$repo/test/stubs/stub_cuda.c"
mkdir -p "$root/proc/driver/nvidia" "$root/dev" "$root/sys/module/nvidia_uvm"
cp "$repo/test/fixtures/gpu/h200-580.159.04/proc-driver-nvidia-version" "$root/proc/driver/nvidia/version"
# The device nodes a GPU container needs, as plain files (this chroot has
# no devtmpfs; gpunode takes anything but a directory as a node).
for node in nvidiactl nvidia0 nvidia-uvm nvidia-uvm-tools; do : >"$root/dev/$node"; done
echo "\$ /stick/bin/gpunode status --only driver   # NVML and libcuda from /usr/lib64 (fakes), root /"
in_chroot /stick/bin/gpunode status --only driver --no-color >"$work/nvml.txt" 2>&1 || { cat "$work/nvml.txt"; fail "NVML"; }
cat "$work/nvml.txt"
grep -q '^\[driver\] *ok .*(fake NVML).*(NVML)$' "$work/nvml.txt" || fail "the driver stage did not use NVML"
grep -q '^\[driver\] *ok .*CUDA 13.0 works (NVML)$' "$work/nvml.txt" || fail "the driver stage did not load libcuda.so.1"
# A tampered stick is refused in the chroot too (exit 4).
printf 'x' >>"$root/stick/lib/gpunode/gpunode"
set +e; in_chroot /stick/bin/gpunode bundle verify /stick --trust-key /publisher.pub >/dev/null 2>&1; code=$?; set -e
[ $code -eq 4 ] || fail "a tampered bundle gave exit $code, not 4"
echo "tampered lib/gpunode/gpunode: bundle verify exit 4 (refused)"
echo "prove-portable: ok: portable gpunode runs on glibc $(in_chroot /usr/bin/ldd --version | head -1 | awk '{print $NF}')"

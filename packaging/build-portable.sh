#!/usr/bin/env bash
# Builds the portable tree: bin/gpunode (a POSIX sh launcher),
# lib/gpunode/ (the stripped binary, every shared library `ldd` names and
# glibc's own loader) and share/ansible/collections/ (the Ansible collection
# of packaging/ansible/, which the .deb installs under /usr and `bundle
# create` copies onto the stick). It runs on any x86_64 Linux with a kernel
# glibc 2.36 supports (>= 3.2), whatever its glibc: see packaging/README.md.
#
#   packaging/build-portable.sh [BINARY [OUTDIR]]
#     BINARY  default build/gpunode (built by scripts/setup.sh)
#     OUTDIR  default build-portable/gpunode (replaced)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/gpunode}
out=${2:-build-portable/gpunode}
[ -x "$bin" ] || { echo "build-portable: no binary at $bin (run scripts/setup.sh)" >&2; exit 2; }

case $(uname -m) in
  x86_64) loader=ld-linux-x86-64.so.2 ;;
  aarch64) loader=ld-linux-aarch64.so.1 ;;
  *) echo "build-portable: unsupported architecture $(uname -m)" >&2; exit 2 ;;
esac

tmp="$out.tmp"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT  # a failed run leaves no half tree
mkdir -p "$tmp/bin" "$tmp/lib/gpunode"
# `ldd` lines: "libfoo.so.1 => /path/libfoo.so.1 (0x...)" and the loader as
# "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
for l in $libs; do
  # Copy the file the link points to, under the name the binary asks for.
  install -m 0644 "$(readlink -f "$l")" "$tmp/lib/gpunode/$(basename "$l")"
done
[ -f "$tmp/lib/gpunode/$loader" ] || { echo "build-portable: ldd did not name $loader" >&2; exit 2; }
chmod 0755 "$tmp/lib/gpunode/$loader"
install -m 0755 "$bin" "$tmp/lib/gpunode/gpunode"
strip --strip-unneeded "$tmp/lib/gpunode/gpunode"
sed "s/ld-linux-x86-64.so.2/$loader/" "$here/portable-wrapper.sh" >"$tmp/bin/gpunode"
chmod 0755 "$tmp/bin/gpunode"

# The collection, as Ansible finds it below a collections path
# (<path>/ansible_collections/<namespace>/<name>): only the files git would
# track, so no __pycache__/ (.gitignore) from a local ansible run. Outside a
# git checkout (a source tarball) the same rule is applied by name.
collection=ansible_collections/gpunode/gpunode
src=$here/ansible
dst=$tmp/share/ansible/collections
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(cd "$src" && git ls-files --cached --others --exclude-standard -- "$collection" | sort -u)
else
  files=$(cd "$src" && find "$collection" -name __pycache__ -prune -o \( -type f -o -type l \) -print | sort)
fi
[ -n "$files" ] || { echo "build-portable: no collection at $src/$collection" >&2; exit 2; }
while IFS= read -r f; do
  # A bundle carries no links (bundle verify refuses them): name it here.
  [ ! -L "$src/$f" ] || { echo "build-portable: $src/$f is a symbolic link; the collection must hold regular files" >&2; exit 2; }
  [ -f "$src/$f" ] || continue  # tracked by git but deleted in the checkout
  if [ -x "$src/$f" ]; then mode=0755; else mode=0644; fi
  install -D -m "$mode" "$src/$f" "$dst/$f"
done <<<"$files"

rm -rf "$out"
mv "$tmp" "$out"
raw=$(du -sb "$out" | cut -f1)
gz=$(tar -C "$(dirname "$out")" -czf - "$(basename "$out")" | wc -c)
echo "build-portable: $out: $(ls "$out/lib/gpunode" | wc -l) files in lib/gpunode, $(find "$out/share" -type f | wc -l) in the collection, $((raw / 1024)) KiB, $((gz / 1024)) KiB as .tar.gz"

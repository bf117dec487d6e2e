#!/usr/bin/env bash
# Builds the portable tree: bin/gpunode (a POSIX sh launcher) and
# lib/gpunode/ (the stripped binary, every shared library `ldd` names and
# glibc's own loader). It runs on any x86_64 Linux with a kernel glibc 2.36
# supports (>= 3.2), whatever its glibc: see packaging/README.md.
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

rm -rf "$out"
mv "$tmp" "$out"
raw=$(du -sb "$out" | cut -f1)
gz=$(tar -C "$(dirname "$out")" -czf - "$(basename "$out")" | wc -c)
echo "build-portable: $out: $(ls "$out/lib/gpunode" | wc -l) files, $((raw / 1024)) KiB, $((gz / 1024)) KiB as .tar.gz"

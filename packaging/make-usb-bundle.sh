#!/usr/bin/env bash
# Lays out the USB stick with the portable gpunode: runs `bundle create`
# from the portable tree, which then copies itself (bin/gpunode and
# lib/gpunode/) onto the stick, so install.sh runs on any target host.
#   packaging/make-usb-bundle.sh OUT [bundle create flags: --image-archive
#     FILE.. | --pull REF.., --sign-key KEY, --platform P, ...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: make-usb-bundle.sh OUT [gpunode bundle create flags]}
shift
tree=${GPUNODE_PORTABLE_TREE:-$repo/build/portable/gpunode}
[ -x "$tree/bin/gpunode" ] || { echo "make-usb-bundle: no portable tree at $tree (run scripts/setup.sh)" >&2; exit 2; }
exec "$tree/bin/gpunode" bundle create --out "$out" "$@"

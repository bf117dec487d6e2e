#!/bin/sh
# Renders the man page and bash completion from the binary's own command
# line definition (the build runs this; see packaging/package.cmake).
#   packaging/render-docs.sh BINARY OUTDIR
set -eu
mkdir -p "$2"
"$1" man | gzip -9n >"$2/gpunode.1.gz"
"$1" completion bash >"$2/gpunode.bash"

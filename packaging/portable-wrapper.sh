#!/bin/sh
# gpunode portable launcher. The real binary and every shared library it
# needs, glibc's loader included, live in ../lib/gpunode next to this script.
# Running the loader by path makes the host's glibc irrelevant; the library
# path goes on the loader's argv, never into LD_LIBRARY_PATH, so the host
# programs gpunode spawns (ctr, kubectl, systemctl, nvidia-smi) use the
# host's own libraries.
self=$(readlink -f "$0" 2>/dev/null) || self=$0
lib=$(dirname "$self")/../lib/gpunode
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" --argv0 "$0" \
  "$lib/gpunode" "$@"

#!/usr/bin/env bash
# The Ansible collection's own unit tests (packaging/ansible/.../tests/unit,
# Python's unittest) with Debian's ansible-core: the JSON events onto
# Ansible's contract, the fleet summary, and the modules run as Ansible runs
# them against the real gpunode binary. Skipped (77) without ansible-core.
#   run-unit.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: run-unit.sh BUILD_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
# Debian's ansible lives in /usr/bin/python3's dist-packages, whatever
# python3 comes first on PATH.
if ! /usr/bin/python3 -c 'import ansible.module_utils.basic' 2>/dev/null; then
  echo "SKIPPED: Debian's ansible-core is not installed (/usr/bin/python3 cannot import ansible)"
  exit 77
fi
cd "$repo/packaging/ansible/ansible_collections/gpunode/gpunode/tests/unit"
export PYTHONPATH=$repo/packaging/ansible
export GPUNODE_BINARY=$build/gpunode
export GPUNODE_MAKE_TEST_IMAGE=$build/test/make_test_image
export GPUNODE_SIM=$repo/test/sim
export PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree
exec /usr/bin/python3 -m unittest discover -v -s . -p 'test_*.py'

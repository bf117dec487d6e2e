#!/usr/bin/env bash
# Lints the Ansible collection with what Debian 12 has: ansible-lint
# (production profile, .ansible-lint in the collection) and the sanity tests
# of ansible-test that need nothing from PyPI. The others (validate-modules,
# pylint, pep8, import, yamllint, ansible-doc, ...) install their
# requirements from PyPI into a venv, which a closed network cannot do: they
# are listed as not run. ansible-doc itself is run directly below. Skipped
# (77) without ansible-lint or ansible-test.
#   lint.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
for tool in ansible-lint ansible-test ansible-doc; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is not installed"; exit 77; }
done
collection=$repo/packaging/ansible/ansible_collections/gpunode/gpunode
export ANSIBLE_COLLECTIONS_PATH=$repo/packaging/ansible
export PYTHONDONTWRITEBYTECODE=1
# ansible-test writes tests/output into the collection; a copy keeps the
# source tree clean. ansible-test reads the file list from git, so the copy
# is a repository of its own.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
copy=$work/ansible_collections/gpunode/gpunode
mkdir -p "$(dirname "$copy")"
cp -r "$collection" "$copy"
git -C "$copy" init -q && git -C "$copy" add -A
git -C "$copy" -c user.email=t@t -c user.name=t commit -qm copy

echo "== galaxy.yml's version is gpunode's"
cmake_version=$(sed -nE 's/^project\(gpunode VERSION ([0-9.]+).*/\1/p' "$repo/CMakeLists.txt")
galaxy_version=$(sed -nE 's/^version: *([0-9.]+)$/\1/p' "$collection/galaxy.yml")
if [ -z "$cmake_version" ] || [ "$cmake_version" != "$galaxy_version" ]; then
  echo "lint: galaxy.yml says version '$galaxy_version', CMakeLists.txt's project() '$cmake_version'"
  exit 1
fi

cd "$copy"
echo "== ansible-lint (production profile)"
ANSIBLE_COLLECTIONS_PATH=$work ansible-lint --nocolor

offline_tests=(action-plugin-docs compile empty-init future-import-boilerplate
  ignores line-endings metaclass-boilerplate no-assert no-basestring
  no-dict-iteritems no-dict-iterkeys no-dict-itervalues no-get-exception
  no-illegal-filenames no-main-display no-smart-quotes no-unicode-literals
  replace-urlopen shebang symlinks use-argspec-type-path
  use-compat-six)
echo "== ansible-test sanity: ${offline_tests[*]}"
args=()
for t in "${offline_tests[@]}"; do args+=(--test "$t"); done
ansible-test sanity --python "$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" "${args[@]}"
not_run=$(ansible-test sanity --list-tests 2>/dev/null | grep -vxF -f <(printf '%s\n' "${offline_tests[@]}") | tr '\n' ' ')
echo "ansible-test sanity not run (their requirements come from PyPI): $not_run"

echo "== ansible-doc"
for plugin in gpunode gpunode_facts gpunode_bundle; do
  ANSIBLE_COLLECTIONS_PATH=$work ansible-doc "gpunode.gpunode.$plugin" >/dev/null
done
ANSIBLE_COLLECTIONS_PATH=$work ansible-doc -t filter gpunode.gpunode.fleet_summary >/dev/null
ANSIBLE_COLLECTIONS_PATH=$work ansible-doc -t callback gpunode.gpunode.rollout_summary >/dev/null
ANSIBLE_COLLECTIONS_PATH=$work ansible-doc -t role gpunode.gpunode.gpunode >/dev/null
echo "lint: ok"

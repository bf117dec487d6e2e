#!/bin/sh
# meta-clang-format: every tracked C and C++ source of the checkout in $1 is
# as clang-format (the repo's .clang-format) would write it. Lists the files
# that are not, with the command that fixes them.
set -eu
cd "$1"
command -v clang-format >/dev/null 2>&1 || {
  echo "clang-format is not installed (scripts/setup.sh installs Debian's)" >&2
  exit 1
}
files=$(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null) || {
  echo "not a git checkout: $1" >&2
  exit 1
}
[ -n "$files" ] || { echo "no C or C++ sources found under $1" >&2; exit 1; }
bad=""
for f in $files; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
  echo "not formatted as .clang-format says:$bad" >&2
  echo "fix: clang-format -i$bad" >&2
  exit 1
fi
echo "$(echo "$files" | wc -l) sources formatted"

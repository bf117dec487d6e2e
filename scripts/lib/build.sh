# Sourced by the scripts in scripts/: configures and builds a build tree.
#   configure_build DIR CMAKE_ARG...   Ninja, RelWithDebInfo, through ccache
#   build_with_progress TAG DIR JOBS   ninja, saying what it builds and how far
# ccache (setup.sh installs it) keys objects on paths relative to the
# checkout, so a fresh clone elsewhere, as CI makes, reuses an earlier
# build's objects: a warm rebuild takes a minute or two instead of ~15.
# The settings that make the keys relative live in the launcher the build
# tree records, not in this script's environment: a developer's plain
# `ninja -C build` then fills the cache with the very objects a clone's
# build looks for. (Set only here, they left every manual build's objects
# keyed on absolute paths, and CI rebuilt whatever had changed since its
# own last run: up to ~30 minutes of two CI builds.)
# NOHASHDIR: with -g, ccache would otherwise hash the build directory in,
# and a clone in another folder would miss every object.
configure_build() {
  local dir=$1
  shift
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    local run="env;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1;ccache"
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$run" -DCMAKE_C_COMPILER_LAUNCHER="$run")
  fi
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@" >/dev/null
}

build_with_progress() {
  local tag=$1 dir=$2 jobs=$3
  local status=0 log="$dir/build.log"
  NINJA_STATUS='[%f/%t] ' ninja -C "$dir" -j "$jobs" >"$log" 2>&1 &
  local pid=$! waited=0 shown=-1 done_ total pct
  # A build that ends within 10 s (nothing or little to do) goes without a
  # word. (ninja -n cannot count in advance: CONFIGURE_DEPENDS makes every
  # dry run stop at the glob re-check.) Said on stderr, so a caller that
  # silences stdout (the demo) still shows it.
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    [ "$waited" -ge 10 ] || continue
    if [ "$shown" -lt 0 ]; then
      echo "$tag: building gpunode and its tests into $dir/ (from scratch about 15" \
        "minutes on 2 cores, a minute or two when ccache has the objects; log: $log)" >&2
      shown=0
    fi
    [ $((waited % 5)) -eq 0 ] || continue
    # A line at every tenth of the way, read from ninja's own [done/total].
    read -r done_ total < <(grep -o '^\[[0-9]*/[0-9]*\]' "$log" | tail -1 | tr -d '[]' | tr / ' ') || true
    [ -n "${total:-}" ] && [ "$total" -gt 0 ] || continue
    pct=$((done_ * 100 / total / 10 * 10))
    if [ "$pct" -gt "$shown" ]; then
      shown=$pct
      echo "$tag: build ${pct}% ($done_/$total)" >&2
    fi
  done
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "$tag: the build failed; the end of $log:" >&2
    tail -40 "$log" >&2
    return "$status"
  fi
  [ "$shown" -lt 0 ] || echo "$tag: build done" >&2
}

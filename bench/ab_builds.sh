#!/usr/bin/env bash
# bench/ab_builds.sh: bench/tune_ab.lua once per build, the builds alternating, for an A/B
# of a change that has no tuning switch (a shader's form). Each build is a directory
# holding lumus/core.so (a copy of build/ made before the change: `cp -r build/lumus
# build-base/`). From the repository root on the GPU machine, after `. .gpu/setup.sh`:
#
#   bash bench/ab_builds.sh OUT ROUNDS build-base,build -- --op layer_norm --shapes 4043x65482 ...
#
# writes OUT/ab_<build>_<round>.md and .csv (the builds' names with / as _), and
# OUT/ab.csv: every row with its build and round first.
set -u -o pipefail
if [ $# -lt 4 ] || [ "$4" != "--" ]; then
  echo "usage: bash bench/ab_builds.sh OUT ROUNDS BUILD[,BUILD...] -- tune_ab arguments" >&2; exit 2
fi
out=$1 rounds=$2 builds=$3
shift 4
mkdir -p "$out"
export LUA_PATH="lua/?.lua;lua/?/init.lua;;"
IFS=, read -r -a dirs <<< "$builds"
all="$out/ab.csv"
: > "$all"
for round in $(seq 1 "$rounds"); do
  for dir in "${dirs[@]}"; do
    name=${dir//\//_}
    LUA_CPATH="$dir/?.so;;" lua5.4 bench/tune_ab.lua "$@" --csv "$out/ab_${name}_$round.csv" \
      > "$out/ab_${name}_$round.md" 2>&1 || echo "ab_builds: $dir round $round failed" >&2
    if [ -s "$out/ab_${name}_$round.csv" ]; then
      [ -s "$all" ] || head -n 1 "$out/ab_${name}_$round.csv" | sed 's/^/build,round,/' > "$all"
      tail -n +2 "$out/ab_${name}_$round.csv" | sed "s|^|$dir,$round,|" >> "$all"
    fi
  done
done

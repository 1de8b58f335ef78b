#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/fuzz/run.sh [SECONDS] - build the libFuzzer harnesses and fuzz each one for SECONDS (default 30).
#
# Configures FUZZ_BUILD_DIR (default build-fuzz) with clang-19 and
# -fsanitize=fuzzer,address,undefined, replays every input of tests/fuzz/regressions/<harness>/
# once in full (the findings of issue 19), then fuzzes each harness from
# tests/fuzz/corpus/<harness>/ with its dictionary; new inputs go to FUZZ_BUILD_DIR/corpus/<harness>,
# crashes to FUZZ_BUILD_DIR/crash-<harness>-*. Prints the executions per harness and exits 1
# when a regression input or the fuzzer fails. Environment: FUZZ_BUILD_DIR, JOBS (default 2),
# FUZZ_SEED (libFuzzer's -seed; default 0, a random one).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/tests/fuzz"
secs="${1:-30}"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${JOBS:-2}"
seed="${FUZZ_SEED:-0}"

command -v clang++-19 >/dev/null || { echo "fuzz: clang++-19 not found (tools/setup installs it)" >&2; exit 1; }
launcher=$(command -v ccache || true)
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} >/dev/null
cmake --build "$build" -j "$jobs"

status=0
# Every fuzz_<name>.cpp is a harness; its dictionary is <name>.dict when there is one
# (pipeline shares ir's).
mapfile -t harnesses < <(cd "$here" && ls fuzz_*.cpp | sed 's/^fuzz_//; s/\.cpp$//')
for h in "${harnesses[@]}"; do
  dict="$here/$h.dict"
  [ "$h" = pipeline ] && dict="$here/ir.dict"
  [ -f "$dict" ] || dict=""
  bin="$build/fuzz_$h"
  log="$build/fuzz_$h.log"
  mapfile -t regressions < <(find "$here/regressions/$h" -type f 2>/dev/null | sort)
  if [ ${#regressions[@]} -gt 0 ] &&
    ! "$bin" -rss_limit_mb=2048 -timeout=60 "${regressions[@]}" >"$build/regressions_$h.log" 2>&1; then
    echo "fuzz_$h: a regression input fails (see $build/regressions_$h.log)"
    tail -20 "$build/regressions_$h.log"
    status=1
  fi
  mkdir -p "$build/corpus/$h"
  if ! "$bin" -seed="$seed" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 ${dict:+-dict="$dict"} \
    -print_final_stats=1 -artifact_prefix="$build/crash-$h-" "$build/corpus/$h" $([ -d "$here/corpus/$h" ] && echo "$here/corpus/$h") >"$log" 2>&1; then
    echo "fuzz_$h: FAILED (see $log)"
    grep -A25 -m1 -E "ERROR|finding|runtime error|Test unit written" "$log" || tail -25 "$log"
    status=1
  fi
  execs="$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' || true)"
  echo "fuzz_$h: ${#regressions[@]} regression inputs, ${execs:-0} executions in ${secs} s"
done
exit "$status"

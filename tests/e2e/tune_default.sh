#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/tune_default.sh - tuning that applies by default: `ternjit tune` with default options, then engines with
# default options (`run`, `bench`) use its records; `tune --check` says which records apply and why others do not.
#   tests/e2e/tune_default.sh TERNJIT_BINARY SOURCE_DIR
# Every option is left at its default: no TERNJIT_* variable, the default cache directory
# ($XDG_CACHE_HOME/ternjit), the default thread count (every core) and target (auto). Skipped
# (77) where auto picks a target that declares no tuning spaces (the reference interpreter).
set -u
bin="$(realpath "$1")"
src="$(realpath "$2")"
. "$src/tests/e2e/lib.sh"
e2e_workdir
unset TERNJIT_TARGET TERNJIT_TARGET_OPTIONS TERNJIT_MAX_ISA TERNJIT_THREADS TERNJIT_OPT_LEVEL TERNJIT_TUNING \
  TERNJIT_CACHE_DIR TERNJIT_VERBOSE TERNJIT_RUNTIME_ROWS
export XDG_CACHE_HOME="$work/xdg"
tri="$src/tests/dsl/bitlinear.tri"
layer=(--layer BitLinear)
shape=(--shape M=1,K=256,N=128)

# 1. The default tune stores records in the default cache.
"$bin" tune "$tri" "${layer[@]}" "${shape[@]}" --budget 2s -q >tune.txt 2>tune.err
rc=$?
if [ $rc -ne 0 ] && grep -q "no kernel with knobs to tune" tune.err; then
  echo "SKIPPED: auto picks a target without tuning spaces here: $(cat tune.err)"
  exit 77
fi
[ $rc -eq 0 ] && grep -q "records stored in $XDG_CACHE_HOME/ternjit" tune.txt
check "default tune stores records in the default cache (rc $rc)" $?
[ $rc -eq 0 ] || { sed 's/^/    /' tune.err; e2e_summary tune_default; exit 1; }
# The target auto chose, and the thread count it tuned for: the engine's default, every core.
target="$(sed -n 's/^# [^ ]* on \([a-z0-9_]*\) .*/\1/p' tune.txt)"
threads="$(sed -n 's/^#.* threads=\([0-9]*\) strategy=.*/\1/p' tune.txt)"
[ -n "$target" ] && [ -n "$threads" ] && [ "$threads" -ge 1 ]
check "tune names the target ($target) and the thread count ($threads) it measured with" $?
# A record's key is the problem; its config names the conditions it was measured under.
expect_ok "cache ls: the records' problem and conditions" \
  '^record .* config=M=1;cpu=[^;]*;.*version=[^;]*;config=.* op=[a-z0-9]+\.tmatmul problem=K=256;N=128' -- "$bin" cache ls

# 2. A default engine uses the record: `run` and `bench`, verbose trace only.
TERNJIT_VERBOSE=1 "$bin" run "$tri" "${layer[@]}" "${shape[@]}" >run.txt 2>run.err
check "default run" $?
grep -Eq '^ternjit_verbose,tuning,op=[^,]+,.*,source=exact,applicable=[1-9][0-9]*,skipped=0,config=' run.err
check "default run uses the default tune's record (exact)" $?
grep -q '^ternjit_verbose,tuning,skipped' run.err
[ $? -ne 0 ]
check "... and skips none" $?
TERNJIT_VERBOSE=1 "$bin" bench "$tri" "${layer[@]}" "${shape[@]}" --reps 1 --warmup 0 --min-time 0 >bench.txt 2>bench.err
check "default bench" $?
grep -Eq '^ternjit_verbose,tuning,op=.*,source=exact,' bench.err
check "default bench uses the record too" $?

# 3. tune --check: the record applies here; exit 0.
expect_ok "tune --check: the default tune's records apply" \
  '^# here: cpu=.* version=' ' [1-9][0-9]* records? appl(y|ies), 0 skipped: uses exact M=1: ' '^  applies  M=1 +winner ' -- \
  "$bin" tune --check "$tri" "${layer[@]}" "${shape[@]}"

# 4. --check's own errors.
TERNJIT_TUNING=off E2E_FAIL_RC=1 expect_fail "tune --check with tuning off (exit 1)" "tuning is off" \
  "$bin" tune --check "$tri" "${layer[@]}" "${shape[@]}"
E2E_FAIL_RC=1 expect_fail "tune --check --cache-dir off (exit 1)" "needs a cache directory" \
  "$bin" tune --check "$tri" "${layer[@]}" "${shape[@]}" --cache-dir off
E2E_FAIL_RC=2 expect_fail "tune --check --mpi does not parse (exit 2)" "excludes|mpi" \
  "$bin" tune --check --mpi "$tri" "${layer[@]}" "${shape[@]}"
E2E_FAIL_RC=1 expect_fail "tune --check: a missing file (exit 1)" "cannot (read|open)|missing" \
  "$bin" tune --check missing.tri "${layer[@]}" "${shape[@]}"

if [ "$target" != x86 ]; then
  # The thread count is a condition of the x86 kernels (a GPU target's are its device's).
  echo "note: auto picked $target: the thread-count mismatch cases below are x86's, not run"
  e2e_summary tune_default
  exit
fi

# 5. Records measured with another thread count: kept apart, never applied, skipped with why.
other=$((threads + 1))
"$bin" tune "$tri" "${layer[@]}" "${shape[@]}" --threads "$other" --budget 1s -q >/dev/null 2>tune2.err
check "tune --threads $other" $?
TERNJIT_VERBOSE=1 "$bin" run "$tri" "${layer[@]}" "${shape[@]}" >run2.txt 2>run2.err
check "default run with mismatching records present" $?
grep -q "^ternjit_verbose,tuning,skipped,op=.*,record_m=1,why=measured with threads=$other; here threads=$threads,config=" \
  run2.err
check "the verbose trace says which record was skipped and why" $?
grep -Eq '^ternjit_verbose,tuning,op=.*,source=exact,applicable=[1-9][0-9]*,skipped=[1-9]' run2.err
check "... and still uses the default tune's record" $?
expect_ok "tune --check lists the skipped records with why" ': uses exact M=1: ' \
  "^  skipped  M=1 .*measured with threads=$other; here threads=$threads: " -- \
  "$bin" tune --check "$tri" "${layer[@]}" "${shape[@]}"
expect_ok "tune --check --threads $other: those apply, the default ones do not" ': uses exact M=1: ' \
  "^  skipped  M=1 .*measured with threads=$threads; here threads=$other: " -- \
  "$bin" tune --check "$tri" "${layer[@]}" "${shape[@]}" --threads "$other"

# 6. Only mismatching records: the engine runs the default configuration, check exits 1.
"$bin" tune "$tri" "${layer[@]}" "${shape[@]}" --threads "$other" --budget 1s -q --cache-dir "$work/only-other" \
  >/dev/null 2>&1
check "tune --threads $other into another cache" $?
TERNJIT_VERBOSE=1 "$bin" run "$tri" "${layer[@]}" "${shape[@]}" --cache-dir "$work/only-other" >run3.txt 2>run3.err
grep -Eq '^ternjit_verbose,tuning,op=.*,source=default,applicable=0,skipped=[1-9]' run3.err &&
  grep -q "why=measured with threads=$other; here threads=$threads" run3.err
check "no record applies: the default, with every skip said" $?
E2E_FAIL_RC=1 expect_fail "tune --check: no record applies (exit 1)" "1 of 1 kernels have no record that applies" \
  "$bin" tune --check "$tri" "${layer[@]}" "${shape[@]}" --cache-dir "$work/only-other"
grep -q ': uses default: ' out.txt
check "... and says the default is used" $?

e2e_summary tune_default

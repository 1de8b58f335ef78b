#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/bench_cli.sh - `ternjit bench` on the BitLinear layer with small shapes and few
# repetitions: the JSON's fields and their consistency (positive times, median >= min,
# the ceilings rated at their fastest call, the work 2*M*N*K and the packed weight bytes,
# ratios equal to the quotients of the times and rates they come from), 1 and 2 threads, M=1 and M>1, the reference target, --cold,
# the reference cap, the table, the one shape-binding rule (an unknown symbol is exit 1),
# a bad target, bad options and the flag > variable > default order of TERNJIT_TARGET
# and TERNJIT_THREADS. Never a timing threshold.
#   tests/e2e/bench_cli.sh TERNJIT_BINARY SOURCE_DIR
set -u
bin="$(realpath "$1")"
src="$(realpath "$2")"
tri="$src/tests/dsl/bitlinear.tri"
python=/usr/bin/python3
if [ ! -x "$python" ]; then echo "SKIP: $python (Debian python3) is needed to read the JSON"; exit 77; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
unset TERNJIT_TARGET TERNJIT_TARGET_OPTIONS TERNJIT_MAX_ISA TERNJIT_THREADS TERNJIT_OPT_LEVEL
export TERNJIT_CACHE_DIR="$work/cache"
passed=0
failed=0
fast=(--reps 3 --min-time 0.02 --warmup 1)

# check NAME EXPR... -- CMD...: CMD exits 0, prints JSON, and every Python EXPR over it
# (j: the object; close(a, b): equal within 1e-9 relative) is true.
check() {
  local name="$1"; shift
  local exprs=()
  while [ "$1" != "--" ]; do exprs+=("$1"); shift; done
  shift
  if ! "$@" >out.json 2>err.txt; then
    echo "FAIL $name: exit $?"; sed 's/^/    /' err.txt; failed=$((failed + 1)); return
  fi
  if "$python" - out.json "${exprs[@]}" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
bad = [e for e in sys.argv[2:] if not eval(e)]
for e in bad:
    print("  false:", e)
sys.exit(1 if bad else 0)
PY
  then passed=$((passed + 1)); else
    echo "FAIL $name"; head -60 out.json | sed 's/^/    | /'; failed=$((failed + 1)); fi
}

# expect_fail NAME PATTERN -- CMD...: CMD exits 1 and stderr matches PATTERN.
expect_fail() {
  local name="$1" pattern="$2"; shift 3
  "$@" >out.txt 2>err.txt
  local rc=$?
  if [ $rc -eq 1 ] && grep -qE -- "$pattern" err.txt; then passed=$((passed + 1)); else
    echo "FAIL $name (rc=$rc, expected 1 and /$pattern/)"; sed 's/^/    /' err.txt; failed=$((failed + 1)); fi
}

# What every successful run must satisfy.
sane=(
  'j["kernel"]["median_ns"] > 0' 'j["kernel"]["min_ns"] > 0' 'j["kernel"]["median_ns"] >= j["kernel"]["min_ns"]'
  'j["kernel"]["calls"] >= 3' 'j["kernel"]["samples"] >= 3'
  'j["kernel"]["gbps"] > 0 and j["kernel"]["gops"] > 0'
  'close(j["kernel"]["gops"], j["ops"] / j["kernel"]["median_ns"])'
  'close(j["kernel"]["gbps"], j["weight_bytes"] / j["kernel"]["median_ns"])'
  'close(j["kernel"]["gops_best"], j["ops"] / j["kernel"]["min_ns"])'
  'j["probe"]["gbps"] > 0 and j["probe"]["median_ns"] >= j["probe"]["min_ns"] > 0'
  'j["probe"]["bytes"] >= 64 << 20'
  'close(j["probe"]["gbps"], j["probe"]["bytes"] / j["probe"]["min_ns"])'
  'close(j["probe"]["gbps_median"], j["probe"]["bytes"] / j["probe"]["median_ns"])'
  'close(j["int8_dot"]["gops"], j["int8_dot"]["ops"] / j["int8_dot"]["min_ns"])'
  'j["int8_dot"]["gops"] > 0 and j["int8_dot"]["isa"] in ("avx2", "avx_vnni", "avx512_vnni")'
  'close(j["ratios"]["bandwidth_fraction"], j["kernel"]["gbps"] / j["probe"]["gbps"])'
  'close(j["ratios"]["compute_fraction"], j["kernel"]["gops"] / j["int8_dot"]["gops"])'
  'j["machine"]["cpu"] != "" and j["machine"]["logical_cores"] >= 1'
  'j["function"] == "BitLinear.forward" and j["matmuls"] == 1'
  'close(j["intensity"], j["ops"] / j["weight_bytes"])'
)
# With the reference timed and the outputs checked.
with_ref=(
  'j["checked"] is True'
  'j["reference"]["median_ns"] >= j["reference"]["min_ns"] > 0'
  'close(j["ratios"]["speedup"], j["reference"]["median_ns"] / j["kernel"]["median_ns"])'
)
# The work of BitLinear at M, K, N: 2*M*N*K ops; t2 w[K, N] at 2 bits, f32 gamma[K] and w_scale[N].
# work M K N sets the array `w`.
work() { w=("j[\"ops\"] == 2 * $1 * $2 * $3" "j[\"weight_bytes\"] == $2 * $3 // 4 + 4 * $2 + 4 * $3"
  "j[\"ternary_bytes\"] == $2 * $3 // 4" "j[\"shape\"] == {\"M\": $1, \"K\": $2, \"N\": $3}"); }

auto_target="$("$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=24 "${fast[@]}" --json 2>/dev/null |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["target"])')"
[ -n "$auto_target" ] || { echo "FAIL: bench with the default target printed no JSON"; exit 1; }

for threads in 1 2; do
  work 1 64 24
  check "M=1 threads=$threads" "${sane[@]}" "${with_ref[@]}" "${w[@]}" "j[\"threads\"] == $threads" \
    'j["mode"] == "hot"' -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=24 --threads $threads "${fast[@]}" --json
  work 5 96 40
  check "M=5 K=96 N=40 threads=$threads" "${sane[@]}" "${with_ref[@]}" "${w[@]}" "j[\"threads\"] == $threads" \
    -- "$bin" bench "$tri" --layer BitLinear --shape M=5 --shape K=96,N=40 --threads $threads "${fast[@]}" --json
done
work 3 64 16
check "--target reference" "${sane[@]}" "${with_ref[@]}" "${w[@]}" 'j["target"] == "reference"' \
  -- "$bin" bench "$tri" --layer BitLinear --shape M=3,K=64,N=16 --target reference --threads 1 "${fast[@]}" --json
# The cache size is never 0 and says where it came from (issue 33 item 17: a VM whose
# probe read 0 MiB printed "not beyond the last-level cache: the layer is too small").
check "--cold" "${sane[@]}" "${with_ref[@]}" 'j["mode"] == "cold"' 'j["cold"]["copies"] >= 2' \
  'j["cold"]["rotated_bytes"] == j["cold"]["copies"] * j["weight_bytes"]' \
  'j["machine"]["llc_bytes"] > 0' 'j["machine"]["llc_source"] in ("sysfs", "cpuid", "default")' \
  'j["cold"]["beyond_llc"] == (j["cold"]["rotated_bytes"] > j["machine"]["llc_bytes"])' \
  -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=128,N=64 --cold --threads 1 "${fast[@]}" --json
check "reference over the cap is skipped" "${sane[@]}" 'j["checked"] is False' '"skipped" in j["reference"]' \
  'j["ratios"]["speedup"] is None' \
  -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=24 --ref-max-time 0 --threads 1 "${fast[@]}" --json
check "Layer.S shape key" "${sane[@]}" 'j["shape"].get("N", j["shape"].get("BitLinear.N")) == 8' \
  -- "$bin" bench "$tri" --function BitLinear.forward --shape M=2,K=32,BitLinear.N=8 --threads 1 "${fast[@]}" --json

# Flag > variable > default.
check "TERNJIT_TARGET" 'j["target"] == "reference"' \
  -- env TERNJIT_TARGET=reference "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --threads 1 "${fast[@]}" --json
check "--target over TERNJIT_TARGET" "j[\"target\"] == \"$auto_target\"" \
  -- env TERNJIT_TARGET=reference "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --target auto --threads 1 "${fast[@]}" --json
check "TERNJIT_THREADS" 'j["threads"] == 2' \
  -- env TERNJIT_THREADS=2 "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 "${fast[@]}" --json
check "--threads over TERNJIT_THREADS" 'j["threads"] == 1' \
  -- env TERNJIT_THREADS=2 "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --threads 1 "${fast[@]}" --json
# TERNJIT_MAX_ISA and TERNJIT_TARGET_OPTIONS cap the int8-dot path too; --max-isa wins.
auto_isa="$("$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --threads 1 "${fast[@]}" --json 2>/dev/null |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["int8_dot"]["isa"])')"
check "TERNJIT_MAX_ISA" 'j["int8_dot"]["isa"] == "avx2"' \
  -- env TERNJIT_MAX_ISA=avx2 "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --threads 1 "${fast[@]}" --json
check "TERNJIT_TARGET_OPTIONS" 'j["int8_dot"]["isa"] == "avx2"' \
  -- env TERNJIT_TARGET_OPTIONS=x86.max_isa=avx2 "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 \
  --threads 1 "${fast[@]}" --json
check "--max-isa over TERNJIT_MAX_ISA" "j[\"int8_dot\"][\"isa\"] == \"$auto_isa\"" \
  -- env TERNJIT_MAX_ISA=avx2 "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --max-isa amx --threads 1 \
  "${fast[@]}" --json
# TERNJIT_CACHE_DIR: the compiled kernel is stored there.
check "TERNJIT_CACHE_DIR" 'j["kernel"]["median_ns"] > 0' \
  -- env TERNJIT_CACHE_DIR="$work/cache2" "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --threads 1 \
  "${fast[@]}" --json
if [ -n "$(find "$work/cache2" -type f 2>/dev/null | head -1)" ]; then passed=$((passed + 1)); else
  echo "FAIL TERNJIT_CACHE_DIR: nothing stored in $work/cache2"; failed=$((failed + 1)); fi
expect_fail "bad TERNJIT_THREADS" "TERNJIT_THREADS" \
  -- env TERNJIT_THREADS=many "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 "${fast[@]}"

# The table names every row and the ratios.
if "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=24 --threads 1 "${fast[@]}" >out.txt 2>err.txt &&
  grep -q '^kernel ' out.txt && grep -q '^reference ' out.txt && grep -q '^read probe ' out.txt &&
  grep -q '^int8 dot ' out.txt && grep -q '^speedup over reference: ' out.txt &&
  grep -q '^check: outputs match the reference' out.txt; then passed=$((passed + 1)); else
  echo "FAIL table"; sed 's/^/    | /' out.txt; sed 's/^/    /' err.txt; failed=$((failed + 1)); fi

# --cold's line names the cache size it compared with and its source.
if "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=24 --threads 1 --cold "${fast[@]}" >out.txt 2>err.txt &&
  grep -qE '^# cpu: .* \(last-level cache [0-9]+\.[0-9] MiB, (from sysfs|from cpuid|assumed: neither sysfs nor CPUID reports one)\)$' out.txt &&
  grep -qE '^cold: [0-9]+ weight copies, [0-9.]+ MiB rotated, (not )?beyond the last-level cache \([0-9]+\.[0-9] MiB, (from|assumed)' out.txt
then passed=$((passed + 1)); else
  echo "FAIL --cold table"; sed 's/^/    | /' out.txt; sed 's/^/    /' err.txt; failed=$((failed + 1)); fi

# Bad input: errors with a message, exit 1.
expect_fail "unknown --shape symbol" "no symbol 'Q'" \
  -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16,Q=3 "${fast[@]}"
expect_fail "unbound symbol" "N" -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64 "${fast[@]}"
expect_fail "bad target" "nope" -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --target nope "${fast[@]}"
expect_fail "bad TERNJIT_TARGET" "nope" \
  -- env TERNJIT_TARGET=nope "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 "${fast[@]}"
expect_fail "unknown layer" "no function 'Nope.forward'" \
  -- "$bin" bench "$tri" --layer Nope --shape M=1,K=64,N=16 "${fast[@]}"
expect_fail "--reps 0" "--reps" -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --reps 0
expect_fail "--reps 201" "--reps must be 1..200" -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --reps 201
# A --min-time that never ends is refused at once (timeout: exit 124 if the bench runs on).
for t in inf nan -1 3601; do
  expect_fail "--min-time $t" "--min-time must be" \
    -- timeout 20 "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --reps 3 --warmup 1 --min-time "$t"
done
expect_fail "--threads 0" "--threads" -- "$bin" bench "$tri" --layer BitLinear --shape M=1,K=64,N=16 --threads 0
expect_fail "missing file" "cannot read" -- "$bin" bench "$work/none.tri" --layer BitLinear --shape M=1,K=64,N=16

echo "e2e/bench_cli: $passed passed, $failed failed"
[ $failed -eq 0 ]

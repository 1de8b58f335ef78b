#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tune_mpi.sh - `ternjit tune` (single process and 2 oversubscribed MPI ranks): the table,
# stored records, and that both ranks end with the same decision. Usage: tune_mpi.sh TERNJIT SRCDIR
set -euo pipefail
TERNJIT=$1
SRC=$2
TMP=$(mktemp -d /tmp/ternjit-tune-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Single process: the table names the shapes and a chosen config; records are stored.
"$TERNJIT" tune "$SRC/tests/dsl/bitlinear.tri" --layer BitLinear --target x86 --threads 1 --shape M=1,4 --shape K=256,N=128 \
  --budget 2s --trials 8 --cache-dir "$TMP/c1" -q > "$TMP/single.txt" || fail "tune exited $?"
grep -q 'speedup' "$TMP/single.txt" || fail "no table: $(cat "$TMP/single.txt")"
grep -q 'K=256,M=1,N=128 *tmatmul.0 .*isa=' "$TMP/single.txt" || fail "no M=1 row: $(cat "$TMP/single.txt")"
grep -q 'K=256,M=4,N=128 *tmatmul.0 .*isa=' "$TMP/single.txt" || fail "no M=4 row"
ls "$TMP/c1/v1/records/"*.tjr > /dev/null 2>&1 || fail "no records stored"
# Bad input is an error, not a crash.
if "$TERNJIT" tune "$SRC/tests/dsl/bitlinear.tri" --layer BitLinear --target x86 --threads 1 --shape M=1,K=64,N=64 --strategy nope \
  --cache-dir off -q 2> "$TMP/err.txt"; then fail "bad --strategy accepted"; fi
grep -q "unknown --strategy" "$TMP/err.txt" || fail "bad --strategy message: $(cat "$TMP/err.txt")"

if ! command -v mpirun > /dev/null; then
  echo "SKIP: mpirun not found (install openmpi-bin: tools/setup)"
  exit 77
fi
if "$TERNJIT" tune "$SRC/tests/dsl/bitlinear.tri" --layer BitLinear --target x86 --threads 1 --shape M=1,K=64,N=64 --budget 1s \
  --cache-dir off --mpi -q 2>&1 | grep -q "built without MPI"; then
  echo "SKIP: this ternjit was built without MPI"
  exit 77
fi
MPIRUN=(mpirun -n 2 --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent:-false}
"${MPIRUN[@]}" "$TERNJIT" tune "$SRC/tests/dsl/bitlinear.tri" --layer BitLinear --target x86 --threads 1 --shape M=1,4 \
  --shape K=256,N=128 --budget 4s --trials 10 --cache-dir "$TMP/c2" --mpi -q > "$TMP/mpi.txt" 2>&1 ||
  fail "mpirun tune exited $?: $(cat "$TMP/mpi.txt")"
grep -q 'ranks=2' "$TMP/mpi.txt" || fail "rank 0 did not report 2 ranks: $(cat "$TMP/mpi.txt")"
for shape in 'K=256,M=1,N=128' 'K=256,M=4,N=128'; do
  d0=$(grep "^rank 0 decision: $shape " "$TMP/mpi.txt" | sed 's/^rank 0 //')
  d1=$(grep "^rank 1 decision: $shape " "$TMP/mpi.txt" | sed 's/^rank 1 //')
  [ -n "$d0" ] || fail "rank 0 printed no decision for $shape: $(cat "$TMP/mpi.txt")"
  [ "$d0" = "$d1" ] || fail "ranks disagree for $shape: '$d0' vs '$d1'"
done
ls "$TMP/c2/v1/records/"*.tjr > /dev/null 2>&1 || fail "no records stored by the MPI run"
echo "ok: tune table, records, 2 MPI ranks agree"

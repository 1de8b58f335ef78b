#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/bench_plot.sh - `ternjit bench --plot` writes a PNG roofline (python3-matplotlib);
# without matplotlib, --plot is a clear error before anything runs and the test is skipped.
#   tests/e2e/bench_plot.sh TERNJIT_BINARY SOURCE_DIR
set -u
bin="$(realpath "$1")"
src="$(realpath "$2")"
tri="$src/tests/dsl/bitlinear.tri"
. "$src/tests/e2e/lib.sh"
e2e_workdir
unset TERNJIT_TARGET TERNJIT_TARGET_OPTIONS TERNJIT_MAX_ISA TERNJIT_THREADS
export TERNJIT_CACHE_DIR="$work/cache"
args=("$tri" --layer BitLinear --shape M=4,K=64,N=32 --threads 1 --reps 3 --min-time 0.02 --warmup 1)

if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  if "$bin" bench "${args[@]}" --plot "$work/r.png" >out.txt 2>err.txt; then
    echo "FAIL: --plot succeeded without matplotlib"; exit 1; fi
  grep -q "python3-matplotlib" err.txt || { echo "FAIL: unclear --plot error:"; cat err.txt; exit 1; }
  [ ! -e "$work/r.png" ] || { echo "FAIL: a PNG appeared without matplotlib"; exit 1; }
  echo "SKIP: /usr/bin/python3 cannot import matplotlib (apt install python3-matplotlib, or tools/setup)"
  exit 77
fi
"$bin" bench "${args[@]}" --plot "$work/r.png" >out.txt 2>err.txt || { echo "FAIL: exit $?"; cat err.txt; exit 1; }
grep -q "roofline written to $work/r.png" out.txt || { echo "FAIL: no 'roofline written' line"; cat out.txt; exit 1; }
# A PNG: the signature, an IHDR of a sensible size, and matplotlib reads it back.
/usr/bin/python3 - "$work/r.png" <<'PY' || exit 1
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
assert data[12:16] == b"IHDR", "no IHDR chunk"
w, h = struct.unpack(">II", data[16:24])
assert 400 <= w <= 4000 and 300 <= h <= 4000, f"odd size {w}x{h}"
import matplotlib.image
img = matplotlib.image.imread(sys.argv[1])
assert img.shape[0] == h and img.shape[1] == w
# Not blank: the roof, the points and the labels draw many distinct colours.
assert len({tuple(p) for row in img[::7] for p in row[::7]}) > 20, "the image is nearly blank"
print(f"ok: {w}x{h} PNG roofline")
PY
# --json and --plot together: the JSON on stdout, still the PNG.
rm -f "$work/r.png"
"$bin" bench "${args[@]}" --json --plot "$work/r.png" >out.json 2>err.txt || { echo "FAIL: --json --plot exit $?"; cat err.txt; exit 1; }
/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' out.json || { echo "FAIL: --json output is not JSON"; exit 1; }
[ -s "$work/r.png" ] || { echo "FAIL: no PNG with --json"; exit 1; }
# An unwritable destination is an error, not a crash.
if "$bin" bench "${args[@]}" --plot "$work/no/such/dir/r.png" >out.txt 2>err.txt; then
  echo "FAIL: --plot into a missing directory succeeded"; exit 1; fi
grep -q -- "--plot" err.txt || { echo "FAIL: unclear error for a bad --plot path"; cat err.txt; exit 1; }
echo "e2e/bench_plot: ok"

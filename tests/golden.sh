#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/golden.sh - golden-file runner over a directory of .tir/.tri files.
#
#   tests/golden.sh TERNJIT_BINARY DIR [--update]
#
# Per file, the first rule that applies:
#  1. `// expect-error@LINE:COL: text` lines: `ternjit check FILE` must fail, print an
#     `FILE:LINE:COL: error: ...text...` line for each, and no other `error:` line.
#  2. a `// RUN: ternjit ARGS` line: `ternjit ARGS FILE` (stdout and stderr) must equal
#     FILE.expected byte for byte; --update rewrites FILE.expected instead.
#  3. otherwise a round trip: `ternjit opt --passes= FILE` must print FILE unchanged.
# Prints one line per failure and a closing "N passed, N failed" line; exits 1 on failure.
set -u
bin="$(realpath -e "$1")" || { echo "golden.sh: no binary $1"; exit 2; }
dir="$2"
update="${3:-}"
passed=0
failed=0
tmp="$(mktemp)"
# Paths in diagnostics and outputs are relative to DIR, so expected files do not
# depend on where the checkout lives.
cd "$dir" || exit 1
trap 'rm -f "$tmp"' EXIT

fail() { echo "FAIL $1"; failed=$((failed + 1)); }

while IFS= read -r -d '' f; do
  expects="$(grep -o '// expect-error@[0-9]*:[0-9]*: .*' "$f" || true)"
  run="$(grep -m1 '^// RUN: ternjit ' "$f" | sed 's|^// RUN: ternjit ||' || true)"
  if [ -n "$expects" ]; then
    "$bin" check "$f" >"$tmp" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then fail "$f: expected errors, but 'ternjit check' succeeded"; continue; fi
    ok=1
    while IFS= read -r e; do
      spec="${e#// expect-error@}"
      lc="${spec%%: *}"
      text="${spec#*: }"
      if ! grep -F -- "$f:$lc: error: " "$tmp" | grep -qF -- "$text"; then
        fail "$f: missing '$f:$lc: error: ...$text...'"; ok=0
      fi
    done <<<"$expects"
    want=$(grep -c . <<<"$expects")
    got=$(grep -c ': error: ' "$tmp" || true)
    if [ "$got" -ne "$want" ]; then
      fail "$f: expected $want errors, got $got:"; sed 's/^/    /' "$tmp"; ok=0
    fi
    [ $ok -eq 1 ] && passed=$((passed + 1))
  elif [ -n "$run" ]; then
    # shellcheck disable=SC2086  # RUN arguments are split like a shell command line
    "$bin" $run "$f" >"$tmp" 2>&1
    if [ "$update" = "--update" ]; then
      cp "$tmp" "$f.expected"; passed=$((passed + 1))
    elif [ ! -f "$f.expected" ]; then
      fail "$f: no $f.expected (run with --update to create it)"
    elif ! diff -u "$f.expected" "$tmp" >/dev/null; then
      fail "$f: output differs from $f.expected:"; diff -u "$f.expected" "$tmp" | head -40
    else
      passed=$((passed + 1))
    fi
  else
    "$bin" opt --passes= "$f" >"$tmp" 2>&1
    if ! cmp -s "$f" "$tmp"; then
      fail "$f: does not round-trip:"; diff -u "$f" "$tmp" | head -40
    else
      passed=$((passed + 1))
    fi
  fi
done < <(find . -type f \( -name '*.tir' -o -name '*.tri' \) -printf '%P\0' | sort -z)

echo "$(basename "$dir"): $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

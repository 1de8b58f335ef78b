#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# aarch64_test.sh - AArch64 AOT objects from the llvm target, run under qemu, against the interpreter.
# Usage: aarch64_test.sh LLVM_AOT_CASES SOURCE_DIR [CPU]. Exit 77 (skip) without the cross gcc or qemu.
set -u
cases=$1
src=$2
cpu=${3:-neoverse-n1}
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$tool" > /dev/null; then
    echo "skipped: $tool is not installed"
    exit 77
  fi
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cases" "$dir" aarch64-linux-gnu "$cpu" || { echo "FAIL: emitting the cases"; exit 1; }
fail=0
n=0
for obj in "$dir"/*.o; do
  name=$(basename "$obj" .o)
  n=$((n + 1))
  file "$obj" 2> /dev/null | grep -q "ARM aarch64" || { [ -x "$(command -v file)" ] && { echo "FAIL $name: not an aarch64 object"; fail=1; continue; }; }
  if ! aarch64-linux-gnu-gcc -O1 -std=c11 -include "$dir/$name.h" -DTJ_SYM="$name" "$src/tests/llvm/driver.c" "$obj" \
      -o "$dir/$name.exe" -lm; then
    echo "FAIL $name: link"; fail=1; continue
  fi
  if ! qemu-aarch64 -L /usr/aarch64-linux-gnu "$dir/$name.exe" "$dir/$name.in" "$dir/$name.got"; then
    echo "FAIL $name: run"; fail=1; continue
  fi
  if cmp -s "$dir/$name.want" "$dir/$name.got"; then
    echo "ok   $name ($(stat -c %s "$dir/$name.want") bytes bit-exact)"
  else
    echo "FAIL $name: output differs from the interpreter: $(cmp "$dir/$name.want" "$dir/$name.got" | head -1)"; fail=1
  fi
done
[ "$n" -ge 16 ] || { echo "FAIL: expected 16 cases, got $n"; exit 1; }
exit $fail

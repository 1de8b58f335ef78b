#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_tsan.sh - runs tsan_test once per target; exits 77 (SKIPPED) when TSan cannot start here.
# (e2e/c_threads runs an uninstrumented tsan_test through it too: only the results count there.)
# Usage: run_tsan.sh TSAN_TEST BITLINEAR_TRI TARGET...
# A data race or a wrong result fails. TSan failing to start (an address-space layout
# it cannot use, e.g. high mmap ASLR entropy) is retried once without ASLR (setarch -R),
# then reported as SKIPPED with TSan's reason.
set -u
bin=$1
tri=$2
shift 2
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

cannot_start() {  # TSan died before running the program, with no race report
  grep -q -e 'FATAL: ThreadSanitizer' -e 'ThreadSanitizer: unexpected memory mapping' "$log" &&
    ! grep -q 'WARNING: ThreadSanitizer' "$log"
}

for target in "$@"; do
  "$bin" "$tri" "$target" >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && cannot_start && command -v setarch >/dev/null; then
    setarch "$(uname -m)" -R "$bin" "$tri" "$target" >"$log" 2>&1
    rc=$?
  fi
  cat "$log"
  if [ $rc -ne 0 ] && cannot_start; then
    echo "SKIPPED: ThreadSanitizer cannot run on this machine: $(grep -m1 -e FATAL -e 'unexpected memory' "$log")"
    exit 77
  fi
  if [ $rc -ne 0 ]; then
    echo "FAILED: tsan_test on target $target exited with $rc"
    exit 1
  fi
done
exit 0

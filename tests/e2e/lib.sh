# SPDX-License-Identifier: Apache-2.0
# tests/e2e/lib.sh - what every tests/e2e/*.sh script shares; sourced, never run.
#   e2e_workdir          a fresh temporary directory in $work, removed at exit, made the cwd
#   check NAME RC        counts a pass when RC is 0, else prints FAIL NAME
#   expect_ok NAME PATTERN... -- CMD...
#                        CMD exits 0 and its stdout matches every extended-regex PATTERN
#   expect_fail NAME PATTERN CMD...
#                        CMD exits with an error status (1 to 127: a signal or a crash never
#                        counts as the expected failure) and its stderr matches PATTERN
#                        (extended regex, case-insensitive); E2E_FAIL_RC=N asks for exactly N
#   e2e_summary NAME     prints "NAME: P passed, F failed" and returns non-zero on a failure
# Each command's stdout and stderr are left in out.txt and err.txt of the working directory.
passed=0
failed=0

e2e_workdir() {
  work="$(mktemp -d)"
  trap 'chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT
  cd "$work" || exit 1
}

check() {
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi
}

expect_ok() {
  local name="$1"; shift
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  "$@" >out.txt 2>err.txt
  local rc=$? ok=1
  [ $rc -eq 0 ] || ok=0
  for p in "${patterns[@]}"; do grep -qE -- "$p" out.txt || { echo "  missing: $p"; ok=0; }; done
  if [ $ok -eq 1 ]; then passed=$((passed + 1)); else
    echo "FAIL $name (rc=$rc)"; sed 's/^/    /' err.txt; head -40 out.txt | sed 's/^/    | /'
    failed=$((failed + 1)); fi
}

expect_fail() {
  local name="$1" pattern="$2"; shift 2
  "$@" >out.txt 2>err.txt
  local rc=$? ok=1
  if [ -n "${E2E_FAIL_RC:-}" ]; then [ $rc -eq "$E2E_FAIL_RC" ] || ok=0
  else [ $rc -ge 1 ] && [ $rc -le 127 ] || ok=0; fi
  grep -qiE -- "$pattern" err.txt || ok=0
  if [ $ok -eq 1 ]; then passed=$((passed + 1)); else
    echo "FAIL $name (rc=$rc, expected ${E2E_FAIL_RC:-an error status} and /$pattern/)"
    sed 's/^/    /' err.txt; failed=$((failed + 1)); fi
}

e2e_summary() {
  echo "$1: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

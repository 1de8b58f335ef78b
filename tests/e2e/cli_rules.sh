#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/cli_rules.sh - the one rule set of the `ternjit` command line (docs/cli.md), command by command.
#   tests/e2e/cli_rules.sh TERNJIT_BINARY SOURCE_DIR
# A table names every command and the shared flags it takes. For each: the table and
# `--help`'s command lists agree, its --help lists its flags (and every target option
# alias on the commands that compile), a misspelled flag exits 2 naming the flag meant,
# and a missing file exits 1. Then the shared flags at work on every command that takes
# them (--target auto, --threads, -O, --function/--fn, --cache-dir), their value errors
# (exit 1) and type errors (exit 2), misspelled commands (exit 2, the command meant) and
# the cache flags after the action.
set -u
bin="$(realpath "$1")"
src="$(realpath "$2")"
. "$src/tests/e2e/lib.sh"
e2e_workdir
unset TERNJIT_TARGET TERNJIT_TARGET_OPTIONS TERNJIT_MAX_ISA TERNJIT_THREADS TERNJIT_OPT_LEVEL
export TERNJIT_CACHE_DIR="$work/cache"
tri="$src/tests/dsl/bitlinear.tri"

# COMMAND|the shared flags its --help lists|the arguments of a run on a missing file
compiling="--layer --function --fn --shape --target --target-options --threads -O --seed"
table=(
  "check||missing.tri"
  "ir||missing.tri"
  "opt|--shape -O|missing.tri"
  "compile|$compiling --emit|missing.tri"
  "run|$compiling --cache-dir --check|missing.tri"
  "bench|$compiling --cache-dir --json|missing.tri"
  "tune|$compiling --cache-dir --check|missing.tri"
  "cache|--cache-dir --dir|"
  "cache ls|--json|"
  "cache stat|--json|"
  "cache verify||"
  "cache prune||"
  "cache clear||"
  "cache merge||"
  "info|--json|"
  "inspect|--json|missing.gguf"
  "demo||"
)

# The commands a --help lists under "Subcommands:", one a line.
subcommands() { "$bin" "$@" --help | awk '/^Subcommands:/ {s = 1; next} s && /^  [a-z]/ {print $1} s && /^$/ {s = 0}'; }
# The flag spellings a --help lists (-O, --opt-level, --fn, ...), one a line.
help_flags() { "$bin" "$@" --help | grep -oE '(^|[ ,])--?[A-Za-z][-A-Za-z]*' | tr -d ' ,' | sort -u; }

# 1. The table lists every command and nothing else.
listed="$( (subcommands; subcommands cache | sed 's/^/cache /') | sort)"
tabled="$(for row in "${table[@]}"; do echo "${row%%|*}"; done | sort)"
[ "$listed" = "$tabled" ]
check "the table lists every command of --help" $?
[ "$listed" = "$tabled" ] || diff <(echo "$listed") <(echo "$tabled") | sed 's/^/    /'

# The target option aliases: the flags compile's --help says are --target-options entries.
aliases="$("$bin" compile --help | awk '/the same as --target-options/ {print $1}' | sed 's/,.*//')"
[ -n "$aliases" ] || echo "note: this build's targets declare no option aliases"

for row in "${table[@]}"; do
  IFS='|' read -r cmd flags missing <<<"$row"
  # shellcheck disable=SC2086  # the command's words are intended
  have="$(help_flags $cmd)"
  ok=0
  want="$flags"
  case " $flags " in *" --target "*) want="$flags $aliases" ;; esac
  for f in $want; do grep -qx -- "$f" <<<"$have" || { echo "  $cmd --help lacks $f"; ok=1; }; done
  check "$cmd: --help lists its shared flags" $ok
  # A misspelled flag: exit 2, naming the command, the flag meant and --help.
  typo="--bogus-flag" meant=""
  for f in $flags; do case "$f" in --??*) typo="${f%?}" meant="$f"; break ;; esac; done
  # shellcheck disable=SC2086
  E2E_FAIL_RC=2 expect_fail "$cmd: misspelled flag $typo" \
    "unknown flag '$typo' for 'ternjit $cmd'${meant:+.*did you mean.*'$meant'}" "$bin" $cmd $typo x
  grep -q "run 'ternjit $cmd --help'" err.txt
  check "$cmd: a usage error points at --help" $?
  if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    E2E_FAIL_RC=1 expect_fail "$cmd: a missing file exits 1" "cannot (read|open)|missing" "$bin" $cmd $missing
  fi
done

# 2. Misspelled commands and no command: exit 2, naming the command meant.
E2E_FAIL_RC=2 expect_fail "misspelled command" "unknown command 'compiel'.*did you mean 'compile'" \
  "$bin" compiel "$tri" --layer BitLinear
E2E_FAIL_RC=2 expect_fail "misspelled cache action" "unknown command 'lss' for 'ternjit cache'.*did you mean 'ls'" \
  "$bin" cache lss
E2E_FAIL_RC=2 expect_fail "no command" "needs a command: check, " "$bin"
E2E_FAIL_RC=2 expect_fail "a value of the wrong type" "--threads" "$bin" run "$tri" --threads many
expect_ok "--help exits 0" 'Subcommands:' -- "$bin" --help
expect_ok "--version exits 0" '^ternjit ' -- "$bin" --version

# 3. The shared flags on every command that compiles.
shape=(--shape M=1,K=64,N=16)
common=(--target auto --threads 1 -O 2)
expect_ok "compile: --target auto, --threads, -O, --function" '.' -- \
  "$bin" compile "$tri" --function BitLinear.forward "${shape[@]}" "${common[@]}"
expect_ok "compile: --layer with --fn, --emit ir" 'func @BitLinear.forward' -- \
  "$bin" compile "$tri" --layer BitLinear --fn forward "${shape[@]}" "${common[@]}" --emit ir
expect_ok "compile: the module's only function" 'func @BitLinear.forward' -- \
  "$bin" compile "$tri" "${shape[@]}" --target reference
expect_ok "run: the shared flags and --cache-dir" '^output: f32\[1, 16\]' -- \
  "$bin" run "$tri" --layer BitLinear --function forward "${shape[@]}" "${common[@]}" --cache-dir "$work/run-cache"
[ -n "$(find "$work/run-cache" -type f 2>/dev/null | head -1)" ]
check "run --cache-dir stores the kernel there" $?
expect_ok "bench: the shared flags and --cache-dir" '"threads": 1' -- \
  "$bin" bench "$tri" --fn BitLinear.forward "${shape[@]}" "${common[@]}" --cache-dir "$work/bench-cache" \
  --reps 1 --warmup 0 --min-time 0 --json
"$bin" tune "$tri" --layer BitLinear "${shape[@]}" "${common[@]}" --cache-dir "$work/tune-cache" --budget 1s -q \
  >out.txt 2>err.txt
rc=$?
# auto may pick a target without tuning spaces (the reference target): that is its error.
[ $rc -eq 0 ] && grep -q "records stored in $work/tune-cache" out.txt ||
  { [ $rc -eq 1 ] && grep -q "no kernel with knobs to tune" err.txt; }
check "tune: the shared flags and --cache-dir (rc $rc)" $?
for cmd in compile run bench tune; do
  E2E_FAIL_RC=1 expect_fail "$cmd --threads 0" "--threads must be >= 1" "$bin" $cmd "$tri" "${shape[@]}" --threads 0
  E2E_FAIL_RC=1 expect_fail "$cmd -O 7" "unknown optimization level '7'" "$bin" $cmd "$tri" "${shape[@]}" -O 7
  TERNJIT_OPT_LEVEL=O9 E2E_FAIL_RC=1 expect_fail "$cmd reads TERNJIT_OPT_LEVEL" "TERNJIT_OPT_LEVEL" \
    "$bin" $cmd "$tri" "${shape[@]}"
  E2E_FAIL_RC=1 expect_fail "$cmd: an unknown function" "no function 'BitLinear.back'" \
    "$bin" $cmd "$tri" "${shape[@]}" --layer BitLinear --function back
  for alias in $aliases; do
    # shellcheck disable=SC2086
    "$bin" $cmd --help | grep -q -- "$alias"
    check "$cmd takes the alias $alias" $?
  done
done

TERNJIT_OPT_LEVEL=O9 E2E_FAIL_RC=1 expect_fail "opt reads TERNJIT_OPT_LEVEL" "TERNJIT_OPT_LEVEL" "$bin" opt "$tri"
TERNJIT_OPT_LEVEL=O9 expect_ok "opt --passes takes no level" 'func @BitLinear.forward' -- "$bin" opt "$tri" --passes=

# 4. cache: --cache-dir (or --dir) before or after the action.
"$bin" run "$tri" --layer BitLinear "${shape[@]}" --target reference --cache-dir "$work/c" >/dev/null 2>&1
for form in "cache --cache-dir $work/c stat" "cache stat --cache-dir $work/c" "cache --dir $work/c stat" \
            "cache stat --dir $work/c"; do
  # shellcheck disable=SC2086
  expect_ok "$form" "^directory: +$work/c\$" '^artifacts: +1 ' -- "$bin" $form
done

e2e_summary cli_rules

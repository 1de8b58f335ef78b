#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/cache_cli.sh - `ternjit cache ls|stat|verify|prune|clear|merge` on a temp cache filled by `ternjit run`.
#   tests/e2e/cache_cli.sh TERNJIT_BINARY SOURCE_DIR
set -u
bin="$1"
src="$2"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_workdir
# `ternjit run` uses the default directory: $XDG_CACHE_HOME/ternjit.
export XDG_CACHE_HOME="$work/xdg"
unset TERNJIT_CACHE_DIR
cache="$XDG_CACHE_HOME/ternjit"
run() { "$bin" run "$src/tests/dsl/bitlinear.tri" --layer BitLinear --shape M=4,K=64,N=32 --target reference; }

run >"$work/out1.txt" 2>"$work/err1.txt"
check "first run" $?
run >"$work/out2.txt" 2>"$work/err2.txt"
check "second run" $?
cmp -s "$work/out1.txt" "$work/out2.txt"
check "a disk hit gives the same output" $?
[ "$(stat -c %a "$cache")" = 700 ]
check "the cache root is created 0700" $?

"$bin" cache ls >"$work/ls.txt"
grep -q "^artifact .*target=reference function=BitLinear.forward compile_options=opt=O2;" "$work/ls.txt"
check "ls shows the artifact" $?
[ "$(wc -l <"$work/ls.txt")" -eq 1 ]
check "ls: one artifact per key" $?
"$bin" cache stat | grep -q "^artifacts: *1 "
check "stat counts it" $?
"$bin" cache verify >/dev/null
check "verify: all good" $?
# --json, parsed by Debian's python3 (json module) when it is there.
json_ok() { if [ -x /usr/bin/python3 ]; then /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); $1"; else cat >/dev/null; fi; }
"$bin" cache ls --json | json_ok "assert any(e['kind'] == 'artifact' and e['key']['function'] == 'BitLinear.forward' for e in d), d"
check "ls --json" $?
"$bin" cache stat --json | json_ok "assert d['artifacts'] >= 1 and d['exists'] and d['mode'] == 'private', d"
check "stat --json" $?


entry="$(ls "$cache"/v1/objects/*.tje)"
printf '\xff' | dd of="$entry" bs=1 seek=60 conv=notrunc status=none
"$bin" cache verify >"$work/verify.txt"
[ $? -eq 1 ] && grep -q "^BAD v1/objects/.*checksum mismatch" "$work/verify.txt"
check "verify reports a flipped byte and exits 1" $?
run >"$work/out3.txt" 2>"$work/err3.txt"
check "a run with a corrupt entry still succeeds" $?
cmp -s "$work/out1.txt" "$work/out3.txt" && grep -q "checksum mismatch: removed" "$work/err3.txt"
check "... with the same output and a warning" $?
"$bin" cache verify >/dev/null
check "the rebuilt entry verifies" $?
printf 'junk' >"$entry"
"$bin" cache verify --remove | grep -q "1 removed"
check "verify --remove removes a bad entry" $?

run >/dev/null 2>&1
"$bin" cache prune --max-size 1 | grep -q "^removed 1 artifacts"
check "prune --max-size evicts" $?
"$bin" cache prune --max-size 12Q 2>&1 | grep -q "malformed"
check "prune rejects a bad size" $?

mkdir -p "$work/other"
"$bin" cache --dir "$work/other" stat >/dev/null
"$bin" cache merge "$work/other/" | grep -q "0 copied"
check "merge of an empty cache copies nothing" $?
"$bin" cache merge "$work/missing" >/dev/null 2>&1
[ $? -eq 1 ]
check "merge of a missing directory fails" $?

run >/dev/null 2>&1
"$bin" cache clear >/dev/null && "$bin" cache stat | grep -q "^artifacts: *0 "
check "clear empties the cache" $?

chmod 0777 "$cache"
"$bin" cache stat 2>"$work/refused.txt"
[ $? -eq 1 ] && grep -q "writable by group or others" "$work/refused.txt"
check "a world-writable cache directory is refused" $?
run >"$work/out4.txt" 2>"$work/err4.txt"
[ $? -eq 0 ] && cmp -s "$work/out1.txt" "$work/out4.txt" && [ "$(grep -c 'ternjit: cache:' "$work/err4.txt")" -eq 1 ]
check "... and a run warns once and compiles without it" $?
chmod 0700 "$cache"

# Read-only commands (and clear/prune/verify) never create a missing directory.
for action in ls stat verify clear "prune --max-size 1M"; do
  # shellcheck disable=SC2086  # the action's words are intended
  "$bin" cache --dir "$work/missing/dir" $action >"$work/missing.txt" 2>&1
  [ $? -eq 0 ] && [ ! -e "$work/missing" ]
  check "cache $action on a missing directory creates nothing" $?
done
"$bin" cache --dir "$work/missing/dir" stat --json | json_ok "assert d['exists'] is False and d['artifacts'] == 0, d"
check "stat --json on a missing directory" $?
TERNJIT_CACHE_DIR="$work/missing2" "$bin" cache ls >/dev/null 2>&1
[ ! -e "$work/missing2" ]
check "TERNJIT_CACHE_DIR: ls creates nothing" $?

e2e_summary cache_cli

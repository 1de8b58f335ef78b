#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/weights_cli.sh - `ternjit run --weights` on a GGUF file (by content), --map,
# --random-missing and `ternjit inspect` (which read regular files only), end to end. The GGUF file is written byte by
# byte here (independently of the project's writer).
#   tests/e2e/weights_cli.sh TERNJIT_BINARY
set -u
bin="$1"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
E2E_FAIL_RC=1
e2e_workdir
le() {  # le VALUE BYTES: VALUE little-endian as printf escapes
  local v=$1 n=$2 s="" i
  for ((i = 0; i < n; i++)); do s+=$(printf '\\x%02x' $(((v >> (8 * i)) & 255))); done
  printf '%s' "$s"
}
gguf_tq2() {  # gguf_tq2 FILE NAME: metadata general.architecture = "bitnet" and a U32 array 0..9;
  # one TQ2_0 tensor NAME, dims (256, 4), codes 0x99, d = 0.5
  local name="$2" hdr body i kv
  kv="$(le 20 8)general.architecture$(le 8 4)$(le 6 8)bitnet$(le 3 8)ids$(le 9 4)$(le 4 4)$(le 10 8)"
  for ((i = 0; i < 10; i++)); do kv+="$(le $i 4)"; done
  hdr="GGUF$(le 3 4)$(le 1 8)$(le 2 8)${kv}$(le ${#name} 8)${name}$(le 2 4)$(le 256 8)$(le 4 8)$(le 35 4)$(le 0 8)"
  printf "$hdr" >"$1"
  while [ $(($(stat -c %s "$1") % 32)) -ne 0 ]; do printf '\x00' >>"$1"; done
  for ((i = 0; i < 4; i++)); do
    body=""
    for ((j = 0; j < 64; j++)); do body+='\x99'; done
    printf "${body}\\x00\\x38" >>"$1"
  done
}

cat >g.tri <<'TRI'
layer L0 {
    param w: TernaryTensor[K, N]
    param w_scale: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        return (x @ w) * w_scale
    }
}
TRI
gguf_tq2 model.safetensors "blk.0.w"  # a GGUF file whatever its name says

"$bin" inspect model.safetensors >out.txt 2>err.txt
check "inspect reads GGUF by content" $?
grep -qE '^blk\.0\.w +TQ2_0 +\[256, 4\] +264 +0$' out.txt
check "inspect lists name, type, dims, bytes, offset" $?
grep -q '^  general.architecture (STRING) = "bitnet"$' out.txt && grep -q '^  ids (ARRAY) = \[U32 x 10: 0, 1, 2, 3, 4, 5, 6, 7, \.\.\.\]$' out.txt
check "inspect shows metadata, arrays summarized" $?
"$bin" inspect model.safetensors --map 'blk.{i}.w=L{i}.w' >out.txt 2>err.txt && \
  grep -qE '^  L0\.w +\[256, 4\] +<- blk\.0\.w, ternary$' out.txt && \
  grep -qE '^  L0\.w_scale +\[4\] +<- blk\.0\.w, scale' out.txt
check "inspect --map shows what parameters bind" $?
"$bin" inspect --json model.safetensors >out.json 2>err.txt && grep -q '"type": "TQ2_0"' out.json && \
  grep -q '"format": "gguf"' out.json && grep -q '"count": 10' out.json
check "inspect --json" $?

"$bin" run g.tri --layer L0 --shape M=1 --weights model.safetensors --map 'blk.{i}.w=L{i}.w' >out.txt 2>err.txt
check "run --weights GGUF with --map" $?
expect_fail "unmapped: the parameter is missing, closest names named" "parameter 'L0.w' has no tensor in model.safetensors.*did you mean" \
  "$bin" run g.tri --layer L0 --shape M=1 --weights model.safetensors
cat >typo.tri <<'TRI'
layer L0 {
    param w: TernaryTensor[K, N]
    param w_scale: Tensor[N]
    param w_bias: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        return (x @ w) * w_scale + w_bias
    }
}
TRI
expect_fail "a parameter the file lacks is an error" "parameter 'L0.w_bias' has no tensor" \
  "$bin" run typo.tri --layer L0 --shape M=1 --weights model.safetensors --map 'blk.{i}.w=L{i}.w'
"$bin" run typo.tri --layer L0 --shape M=1 --weights model.safetensors --map 'blk.{i}.w=L{i}.w' --random-missing 3 \
  >out.txt 2>err.txt
check "--random-missing draws it" $?
"$bin" run typo.tri --layer L0 --shape M=1,K=8,N=2 >out.txt 2>err.txt
check "without --weights everything is drawn from --seed" $?
expect_fail "--random-missing needs --weights" "need --weights" "$bin" run g.tri --layer L0 --shape M=1 --random-missing 1
cat >noscale.tri <<'TRI'
layer L0 {
    param w: TernaryTensor[K, N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        return x @ w
    }
}
TRI
expect_fail "scales other than 1 are never dropped" "no parameter 'L0.w_scale' takes them" \
  "$bin" run noscale.tri --layer L0 --shape M=1 --weights model.safetensors --map 'blk.{i}.w=L{i}.w'
if "$bin" info | grep -qE '^  llvm +cpu +available'; then
  "$bin" compile g.tri --layer L0 --shape M=1,K=256,N=4 --target llvm --emit obj --weights model.safetensors \
    --map 'blk.{i}.w=L{i}.w' -o g.o >out.txt 2>err.txt && [ -s g.o ]
  check "compile --emit obj bakes GGUF weights in" $?
fi
printf 'GGUF\x03\x00\x00\x00' >trunc.gguf
expect_fail "truncated GGUF" "trunc.gguf" "$bin" run g.tri --layer L0 --shape M=1 --weights trunc.gguf
expect_fail "inspect a truncated GGUF" "trunc.gguf" "$bin" inspect trunc.gguf

# Only regular files are read: a device never ends (read to EOF it ran out of memory), a
# FIFO without a writer blocked forever. Refused by name and type, at once (timeout: 124).
# The address-space limit bounds a regression's memory; an ASan build (ASAN_OPTIONS set by
# its stage) reserves terabytes of shadow address space and cannot start under it.
limit='ulimit -v 4000000;'
[ -z "${ASAN_OPTIONS:-}" ] || limit=''
mkfifo pipe
for f in /dev/zero pipe; do
  expect_fail "inspect $f: not a regular file" "cannot read '$f': it is a .*, not a regular file" \
    timeout 20 bash -c "$limit"' exec "$0" "$@"' "$bin" inspect "$f"
  expect_fail "run --weights $f: not a regular file" "cannot read '$f': it is a .*, not a regular file" \
    timeout 20 "$bin" run g.tri --layer L0 --shape M=1 --weights "$f"
done
expect_fail "inspect a directory" "cannot read '\.': it is a directory" "$bin" inspect .

# Issue 33 items 2 and 3: name maps matched std::regex against file-controlled names. A
# 100 KB tensor name with a rule whose prefix matches overflowed its stack (SIGSEGV); a rule
# of 12 adjacent placeholders backtracked exponentially on a 41-byte name (> 60 s).
gguf_f32() {  # gguf_f32 FILE NAME: one F32 tensor NAME of dims (4), no metadata
  local name="$2"
  printf "GGUF$(le 3 4)$(le 1 8)$(le 0 8)$(le ${#name} 8)" >"$1"
  printf '%s' "$name" >>"$1"
  printf "$(le 1 4)$(le 4 8)$(le 0 4)$(le 0 8)" >>"$1"
  while [ $(($(stat -c %s "$1") % 32)) -ne 0 ]; do printf '\x00' >>"$1"; done
  printf '\x00%.0s' {1..16} >>"$1"
}
gguf_f32 long.gguf "a$(printf 'x%.0s' {1..100000})"
expect_fail "inspect --map: a 100 KB tensor name is refused by length" "long.gguf: tensor 0 name is 100001 bytes long, over the limit of 4096" \
  timeout 20 "$bin" inspect long.gguf --map 'a{x}=y'
expect_fail "run --map: a 100 KB tensor name is refused by length" "long.gguf: tensor 0 name is 100001 bytes long" \
  timeout 20 "$bin" run g.tri --layer L0 --shape M=1 --weights long.gguf --map 'a{x}=y'
gguf_f32 adjacent.gguf "$(printf 'a%.0s' {1..40})X"
expect_ok "inspect --map: 12 adjacent placeholders match in linear time" '^  T +\[4\] +<- a{40}X, float$' -- \
  timeout 20 "$bin" inspect adjacent.gguf --map '{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}X=T'
gguf_f32 adjacent.gguf "$(printf 'a%.0s' {1..40})b"
expect_ok "inspect --map: 12 adjacent placeholders fail to match in linear time" '^  a{40}b +\[4\] +<- a{40}b, float$' -- \
  timeout 20 "$bin" inspect adjacent.gguf --map '{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}X=T'

# Issue 33 item 10: keys, tensor names and safetensors metadata were printed raw, terminal
# escape sequences included. Now no byte of a file reaches the terminal unescaped: control
# bytes, C1 controls (U+009B is a CSI) and invalid UTF-8 print as \xHH (JSON: \u escapes).
no_raw_controls() {  # no_raw_controls FILE...: no C0 control but newline, no DEL, no C1, valid UTF-8
  local f
  for f in "$@"; do
    LC_ALL=C grep -qP '[\x00-\x09\x0B-\x1F\x7F]|\xC2[\x80-\x9F]' "$f" && return 1
    iconv -f UTF-8 -t UTF-8 "$f" >/dev/null 2>&1 || return 1
  done
  return 0
}
key1=$'k\x1b[31mRED' value1=$'v\x1b[2J' key2=$'bad\xff\xfe' value2=$'\xc2\x9b31m' name1=$'w\x1b]0;title\x07' name2=$'\xc2\x9b1m'
bytes() { printf '%s' "$1" | wc -c; }  # a string's length in bytes, whatever the locale
{
  printf "GGUF$(le 3 4)$(le 2 8)$(le 2 8)"
  printf "$(le $(bytes "$key1") 8)%s$(le 8 4)$(le $(bytes "$value1") 8)%s" "$key1" "$value1"
  printf "$(le $(bytes "$key2") 8)%s$(le 8 4)$(le $(bytes "$value2") 8)%s" "$key2" "$value2"
  printf "$(le $(bytes "$name1") 8)%s$(le 1 4)$(le 4 8)$(le 0 4)$(le 0 8)" "$name1"
  printf "$(le $(bytes "$name2") 8)%s$(le 1 4)$(le 4 8)$(le 0 4)$(le 32 8)" "$name2"
} >esc.gguf
while [ $(($(stat -c %s esc.gguf) % 32)) -ne 0 ]; do printf '\x00' >>esc.gguf; done
printf '\x00%.0s' {1..64} >>esc.gguf
header='{"__metadata__":{"k\u001b]0;t\u0007":"v\u009b2J","w\u001b[31m.format":"x\u001b[5m"},"w\u001b[31m":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}'
{ printf "$(le $(bytes "$header") 8)"; printf '%s' "$header"; printf '\x00\x00\x00\x00'; } >esc.safetensors
for f in esc.gguf esc.safetensors; do
  "$bin" inspect "$f" >out.txt 2>err.txt && no_raw_controls out.txt err.txt
  check "inspect $f: file text escaped" $?
  "$bin" inspect --json "$f" >out.txt 2>err.txt && no_raw_controls out.txt err.txt
  check "inspect --json $f: file text escaped" $?
  "$bin" inspect "$f" --map '{a}=L0.{a}' >out.txt 2>err.txt && no_raw_controls out.txt err.txt
  check "inspect --map $f: file text escaped" $?
  "$bin" run g.tri --layer L0 --shape M=1,K=4,N=4 --weights "$f" --map 'w{a}=L0.w' >out.txt 2>err.txt
  [ $? -eq 1 ] && no_raw_controls out.txt err.txt
  check "run --weights $f: the error escapes file text" $?
done
grep -qF 'k\x1B[31mRED (STRING) = "v\x1B[2J"' <("$bin" inspect esc.gguf)
check "inspect shows an escaped key and value" $?

e2e_summary weights_cli

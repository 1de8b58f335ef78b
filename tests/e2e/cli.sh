#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/cli.sh - end-to-end checks of the `ternjit` CLI: runs, files, and bad input.
#   tests/e2e/cli.sh TERNJIT_BINARY
set -u
bin="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/lib.sh"
e2e_workdir

cat >two.tri <<'TRI'
layer Lin {
    param w: TernaryTensor[K, N]
    param b: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        return x @ w + b
    }
}
layer Head {
    param w: TernaryTensor[N, 2]
    fn forward(output: Tensor[M, N]) -> Tensor[M, 2] {
        return softmax(output @ w, -1)
    }
}
TRI

# A run with random weights writes a safetensors file (tensor "output") that feeds the
# next layer, whose argument has that name.
"$bin" run two.tri --layer Lin --shape M=3,K=5,N=4 --output h.safetensors >/dev/null 2>err.txt
check "run Lin --output" $?
"$bin" run two.tri --layer Head --input h.safetensors >out.txt 2>err.txt
check "run Head --input (shape from the input file)" $?
grep -q '^output: f32\[3, 2\]' out.txt
check "Head output is f32[3, 2]" $?
# The same seed gives the same numbers; a different seed different ones.
"$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --seed 7 >a.txt && \
  "$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --seed 7 >b.txt && cmp -s a.txt b.txt
check "seeded runs are deterministic" $?
"$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --seed 8 >c.txt; ! cmp -s a.txt c.txt
check "another seed differs" $?
# Outputs written and read back through a layer that is the identity on its input.
cat >ident.tri <<'TRI'
layer Id {
    fn forward(output: Tensor[M, N]) -> Tensor[M, N] {
        return output * 1.0
    }
}
TRI
"$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --seed 7 --output y.safetensors >/dev/null && \
  "$bin" run ident.tri --layer Id --input y.safetensors >d.txt 2>err.txt && \
  diff <(sed 1d a.txt) <(sed 1d d.txt) >/dev/null
check "output file round-trips the printed values" $?

# Bad input: each is a located message and a non-zero exit, never a crash.
printf 'layer Bad {\n    fn forward(x: Tensor[N, 784]) -> Tensor[N, 10] {\n        return x @ nope\n    }\n}\n' >bad.tri
expect_fail "malformed .tri" '^bad.tri:3:20: error: unknown name' "$bin" check bad.tri
grep -q '^        return x @ nope$' err.txt && grep -q '^                   \^$' err.txt
check "malformed .tri shows the line and a caret" $?
printf 'func @f(%%x: f32[4]) -> f32[4] {\n^entry:\n  %%0 = frobnicate %%x : f32[4]\n  ret %%0\n}\n' >bad.tir
expect_fail "malformed .tir" '^bad.tir:3:[0-9]+: error: ' "$bin" check bad.tir
printf 'garbage' >bad.safetensors
expect_fail "malformed safetensors (short)" 'bad.safetensors' "$bin" run two.tri --layer Lin --shape M=1,K=2,N=2 --weights bad.safetensors
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"w": {"dtype"' >trunc.safetensors
expect_fail "malformed safetensors (truncated header)" 'trunc.safetensors' "$bin" run two.tri --layer Lin --shape M=1,K=2,N=2 --weights trunc.safetensors
expect_fail "shape mismatch between input and declaration" "input 'output'" "$bin" run two.tri --layer Head --shape N=7 --input h.safetensors
expect_fail "unbound symbol" "symbol 'M'" "$bin" run two.tri --layer Lin --shape K=2,N=2
# Issue 33 item 11: an --input file whose names miss an argument is an error naming the
# file's closest tensor, never a silent run on random inputs; random only when asked.
"$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --output xs.safetensors >/dev/null 2>err.txt
check "run Lin --output (a file whose tensor is not named x)" $?
expect_fail "--input without the argument" "input 'x' has no tensor in xs.safetensors.*--random-missing-inputs" \
  "$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --input xs.safetensors
h='{"outputs":{"dtype":"F32","shape":[1,4],"data_offsets":[0,16]}}'
printf "$(printf '\\x%02x' "${#h}")\\x00\\x00\\x00\\x00\\x00\\x00\\x00%s" "$h" >in2.safetensors
head -c 16 /dev/zero >>in2.safetensors
expect_fail "--input names the closest tensor" "input 'output' has no tensor in in2.safetensors \(did you mean 'outputs'\?\)" \
  "$bin" run two.tri --layer Head --input in2.safetensors --shape M=1,N=4
"$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --input xs.safetensors --random-missing-inputs 3 >r1.txt 2>err.txt && \
  "$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --input xs.safetensors --random-missing-inputs 3 >r2.txt && \
  cmp -s r1.txt r2.txt
check "--random-missing-inputs draws them, seeded" $?
expect_fail "--random-missing-inputs needs --input" "needs --input" \
  "$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --random-missing-inputs 1
expect_fail "unknown layer" "no function 'Nope.forward'" "$bin" run two.tri --layer Nope
expect_fail "missing file" "cannot read 'missing.tri'" "$bin" check missing.tri
expect_fail "unknown target" "unknown target 'nope'" "$bin" run two.tri --layer Lin --shape M=1,K=2,N=2 --target nope
"$bin" run two.tri --layer Lin --shape M=2,K=3,N=2 --seed 7 --target reference >e.txt && cmp -s a.txt e.txt
check "--target reference gives the same numbers as auto" $?
# Issue 19 item 6: huge shapes are errors with exit 1, checked before anything is allocated.
expect_fail "shape product past the element limit" "input 'x' of shape \[4294967296, 4294967296\] has more than 2147483648 elements" \
  "$bin" run two.tri --layer Lin --shape M=4294967296,K=4294967296,N=16
expect_fail "shape past the element limit" "input 'x' of shape \[1099511627776, 4\] has more than" \
  "$bin" run two.tri --layer Lin --shape M=1099511627776,K=4,N=16
expect_fail "shapes past the byte cap" "the largest, input 'x' of shape \[1073741824, 1\], 8589934592 bytes\), over the run's limit" \
  "$bin" run two.tri --layer Lin --shape M=1073741824,K=1,N=1
h='{"x":{"dtype":"F32","shape":[0,4611686018427387905],"data_offsets":[0,0]}}'
printf "$(printf '\\x%02x' "${#h}")\\x00\\x00\\x00\\x00\\x00\\x00\\x00%s" "$h" >zero_rows.safetensors
expect_fail "an empty input with a huge dim" "parameter 'Lin.w' of shape \[4611686018427387905, 2\] has more than" \
  "$bin" run two.tri --layer Lin --input zero_rows.safetensors --shape N=2
expect_fail "bad --shape" "bad shape binding" "$bin" run two.tri --layer Lin --shape M=-1

# --version names the version, the build and the targets.
"$bin" --version > version.txt 2>&1
grep -qE '^ternjit [0-9]+\.[0-9]+\.[0-9]+' version.txt && grep -q '^build ' version.txt && grep -q 'reference (available)' version.txt
check "--version" $?
# A flag overrides its variable, the variable the default (TERNJIT_TARGET, TERNJIT_TARGET_OPTIONS).
TERNJIT_TARGET=nope expect_fail "TERNJIT_TARGET is read by run" "TERNJIT_TARGET='nope': unknown target 'nope'" \
  "$bin" run two.tri --layer Lin --shape M=1,K=2,N=2
TERNJIT_TARGET=nope "$bin" run two.tri --layer Lin --shape M=1,K=2,N=2 --target reference > /dev/null 2>&1
check "--target overrides TERNJIT_TARGET" $?
TERNJIT_TARGET_OPTIONS=x86.max_iza=1 expect_fail "TERNJIT_TARGET_OPTIONS is validated" "TERNJIT_TARGET_OPTIONS='x86.max_iza=1': unknown x86 option 'max_iza'" \
  "$bin" run two.tri --layer Lin --shape M=1,K=2,N=2
expect_fail "--target-options is validated" "unknown llvm option 'tripel'" \
  "$bin" run two.tri --layer Lin --shape M=1,K=2,N=2 --target-options llvm.tripel=x

# compile and tune read the same variables (flag > variable > default).
for cmd in "compile two.tri --layer Lin --shape M=1,K=2,N=2 --emit ir" "tune two.tri --layer Lin --shape M=1,K=2,N=2 --budget 1s"; do
  # shellcheck disable=SC2086
  TERNJIT_TARGET=nope expect_fail "TERNJIT_TARGET is read by ${cmd%% *}" "TERNJIT_TARGET='nope': unknown target 'nope'" "$bin" $cmd
done
TERNJIT_TARGET=nope "$bin" compile two.tri --layer Lin --shape M=1,K=2,N=2 --emit ir --target reference > /dev/null 2>&1
check "compile --target overrides TERNJIT_TARGET" $?
TERNJIT_OPT_LEVEL=O7 expect_fail "TERNJIT_OPT_LEVEL is read by compile" "O7" \
  "$bin" compile two.tri --layer Lin --shape M=1,K=2,N=2 --emit ir --target reference

# One shape-binding rule for run, compile, opt and tune: unknown symbols are errors, and a
# bare S binds the S a calling layer spells Layer.S.
comp="$here/../dsl/mlp_composition.tri"
for cmd in "run two.tri --layer Lin --shape M=1,K=2,N=2,Q=3 --target reference" \
           "compile two.tri --layer Lin --shape M=1,K=2,N=2,Q=3 --target reference --emit ir" \
           "opt two.tri --shape Q=3" \
           "tune two.tri --layer Lin --shape M=1,K=2,N=2,Q=3 --target reference --budget 1s"; do
  # shellcheck disable=SC2086  # the command's words are intended
  expect_fail "unknown --shape symbol: ${cmd%% *}" "no symbol 'Q' in the module \(it has: .*K.*\)" "$bin" $cmd
done
"$bin" run "$comp" --layer MLP --shape B=1,T=2,K=8,N=4 --target reference > run_n.txt 2> err.txt
check "run: N binds BitLinear.N" $?
"$bin" compile "$comp" --layer MLP --shape B=1,T=2,K=8,N=4 --target reference --emit ir > compile_n.txt 2> err.txt
check "compile: N binds BitLinear.N" $?
"$bin" compile "$comp" --layer MLP --shape B=1,T=2,K=8,BitLinear.N=4 --target reference --emit ir > compile_q.txt
cmp -s compile_n.txt compile_q.txt
check "compile: N=4 and BitLinear.N=4 give the same IR" $?
# run --check: every output against the reference target.
"$bin" run two.tri --layer Lin --shape M=3,K=37,N=5 --check > out.txt 2> err.txt
[ $? -eq 0 ] && grep -q "check: output matches the reference target" err.txt
check "run --check" $?

# Bytes that are not printable text are shown escaped in diagnostics (the caret still lines up).
printf 'layer X {\n  param w: Tensor[\001\033[31m\377]\n}\n' > binary.tri
"$bin" check binary.tri > out.txt 2> err.txt
[ $? -eq 1 ] && grep -qF 'param w: Tensor[\x01\x1b[31m\xff]' err.txt && ! LC_ALL=C grep -q $'[\001\033\377]' err.txt
check "non-printable source bytes are escaped" $?
awk '/unexpected control character 0x1b/ {getline; getline; print index($0, "^")}' err.txt > caret.txt
[ "$(cat caret.txt)" = 23 ]  # "  param w: Tensor[" and "\x01" before it
check "the caret sits under the escaped byte" $?
# A symbol bound at run time that breaks an op's shape rule (rope's even head dim D) is
# a located user error with exit 1 on every target, not an aborted pipeline (issue 33
# item 5: "internal error: the IR is invalid after pass 'inline-calls'", exit 134).
printf 'func @f<M, H, D>(%%x: f32[M, H, D], %%p: i32[]) -> f32[M, H, D] {\n^entry:\n  %%y = rope %%x, %%p {theta = 10000, mode = norm} : f32[M, H, D]\n  ret %%y\n}\n' >rope.tir
for t in reference x86 llvm; do
  E2E_FAIL_RC=1 expect_fail "run rope with an odd D on $t" \
    "^rope.tir:3:3: error: after binding, 'rope' needs an even head dim D, got f32\[2, 1, 3\]" \
    "$bin" run rope.tir --shape M=2,H=1,D=3 --target $t
done
E2E_FAIL_RC=1 expect_fail "opt --shape with an odd D" "^rope.tir:3:3: error: after binding, 'rope' needs an even head dim D" \
  "$bin" opt rope.tir --shape M=2,H=1,D=3
"$bin" run rope.tir --shape M=2,H=1,D=4 >out.txt 2>err.txt && grep -q '^output: f32\[2, 1, 4\]' out.txt
check "run rope with an even D" $?

# The run's byte cap is charged for every tensor before any is allocated (issue 33 item
# 19): 4096 random parameters of 64 MB each used to fill 4 GiB for ~50 s, one at a time.
{
  echo 'layer Many {'
  for i in $(seq 0 4095); do echo "    param p$i: Tensor[N]"; done
  echo '    fn forward(x: Tensor[N]) -> Tensor[N] {'
  echo '        let s0 = x + p0'
  for i in $(seq 1 4095); do echo "        let s$i = s$((i - 1)) + p$i"; done
  echo '        return s4095'
  echo '    }'
  echo '}'
} >many.tri
# An address-space limit bounds a regression's memory; an ASan build (ASAN_OPTIONS set by
# its stage) reserves terabytes of shadow address space and cannot start under one.
asan_free() { [ -n "${ASAN_OPTIONS:-}" ] || echo "$*;"; }
# The seconds a refusal may take: 20, or 120 in the ASan stage (several times slower).
refusal_s=20
[ -z "${ASAN_OPTIONS:-}" ] || refusal_s=120
E2E_FAIL_RC=1 expect_fail "4096 parameters of 64 MB are refused at once" \
  "^error: the run's tensors need 275146342400 bytes together \(inputs 134217728 bytes, random parameters 274877906944 bytes, outputs 134217728 bytes; .*over the run's limit of 4294967296 bytes; nothing was allocated" \
  bash -c "$(asan_free ulimit -v 2000000) exec timeout 20 \"\$0\" run many.tri --shape N=16777216 --target reference" "$bin"

# Runaway work stops within seconds with the budget named (issue 33 item 18): a loop of
# 64x64 matmuls on the reference interpreter took 10-43 s to stop at its old default.
printf 'func @spin(%%x: f32[64, 64]) -> f32[64, 64] {\n^entry:\n  br ^loop(%%x)\n^loop(%%a: f32[64, 64]):\n  %%b = matmul %%a, %%x : f32[64, 64]\n  %%c = const {value = 1} : bool[]\n  cond_br %%c, ^loop(%%b), ^done(%%b)\n^done(%%r: f32[64, 64]):\n  ret %%r\n}\n' >spin.tir
E2E_FAIL_RC=1 expect_fail "a runaway reference loop stops at the default work budget" \
  "work limit of 2147483648 element operations at 'matmul' in @spin .*--target-options reference.max_work=N" \
  timeout 20 "$bin" run spin.tir --target reference
E2E_FAIL_RC=1 expect_fail "--target-options reference.max_work" "work limit of 100000 element operations" \
  "$bin" run spin.tir --target reference --target-options reference.max_work=100000
E2E_FAIL_RC=1 expect_fail "TERNJIT_TARGET_OPTIONS reference.max_steps" \
  "execution exceeded 30 instructions \(an infinite loop\?\) in @spin: raise the reference target's option max_steps" \
  env TERNJIT_TARGET_OPTIONS=reference.max_steps=30 "$bin" run spin.tir --target reference
expect_fail "a bad reference.max_work" "reference.max_work is a positive integer" \
  "$bin" run spin.tir --target reference --target-options reference.max_work=lots
# The llvm target refuses a program unrolled past its code-size budget before LLVM
# optimizes it (a Block[4096] chain took 117 s of CPU and 1.2 GB).
cat >chain.tri <<'TRI'
layer Block {
    param w: Tensor[E]
    fn forward(x: Tensor[M, E]) -> Tensor[M, E] {
        return relu(x * w)
    }
}
layer Model {
    param blk: Block[4096]
    fn forward(x: Tensor[M, E]) -> Tensor[M, E] {
        let h = x
        for i in 0..4096 {
            let h = blk[i].forward(h)
        }
        return h
    }
}
TRI
E2E_FAIL_RC=1 expect_fail "llvm refuses a Block[4096] chain within seconds" \
  "llvm: @Model.forward generates [0-9]+ LLVM instructions, over the llvm target's budget of 32768 \(llvm.max_instructions; .*--target-options llvm.max_instructions=N" \
  bash -c "$(asan_free ulimit -v 4000000) exec timeout $refusal_s \"\$0\" run chain.tri --layer Model --shape M=1,E=4 --target llvm" "$bin"

# info --json is one JSON object naming every target and auto's pick.
"$bin" info --json > info.json
check "info --json" $?
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 -c "import json; d=json.load(open('info.json')); assert any(t['name'] == 'reference' and t['available'] for t in d['targets']) and d['auto']"
  check "info --json parses" $?
  # Every target has a "devices" array (targets/target.h devices()): empty for the CPU
  # targets; spirv, where available, lists its Vulkan devices with one marked selected,
  # and on lavapipe (ctest pins VK_ICD_FILENAMES to it) exactly one, of type cpu.
  /usr/bin/python3 - info.json <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
for t in d['targets']:
    assert isinstance(t['devices'], list), t['name']
    if t['name'] in ('reference', 'x86', 'llvm'):
        assert t['devices'] == [], t
    if t['name'] == 'spirv' and t['available']:
        devs = t['devices']
        assert devs and sum(x['selected'] for x in devs) == 1, devs
        for i, x in enumerate(devs):
            assert x['index'] == i and x['name'] and x['api'].startswith('Vulkan 1.'), x
            assert x['memory_bytes'] > 0 and x['subgroup_size'] > 0 and isinstance(x['int_dot'], bool), x
            assert x['limits']['max_workgroup_invocations'] >= 128 and x['limits']['max_buffer_bytes'] > 0, x
        if 'lvp_icd' in os.environ.get('VK_ICD_FILENAMES', ''):
            assert len(devs) == 1 and devs[0]['type'] == 'cpu', devs
PY
  check "info --json lists each target's devices" $?
  if /usr/bin/python3 -c "import json,sys; sys.exit(0 if any(t['name']=='spirv' and t['available'] for t in json.load(open('info.json'))['targets']) else 1)"; then
    "$bin" info > info.txt
    awk '/^  spirv /{s=1} s && /devices:/{d=1} d && /# +type +memory +subgroup +int dot/{h=1} h && /^ +[0-9]+\* /{print; exit}' info.txt | grep -q .
    check "info prints spirv's devices as a table, the selected one marked" $?
  fi
fi

e2e_summary cli

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/compile_gpu.sh - `ternjit compile --target cuda|hip --emit ...` without a GPU,
# `ternjit info` naming why cuda and hip cannot run, and their errors.
#   tests/e2e/compile_gpu.sh TERNJIT_BINARY SOURCE_DIR
# Forms that need NVRTC (ptx, cubin) or hiprtc (hsaco) are checked where the toolchain is;
# with neither installed the script exits 77 (ctest: SKIPPED) after the checks that need none.
set -u
bin="$(realpath "$1")"
src="$(realpath "$2")"
tri="$src/tests/dsl/bitlinear.tri"
. "$src/tests/e2e/lib.sh"
e2e_workdir
export TERNJIT_CACHE_DIR="$work/cache"
skipped=""

base=("$tri" --layer BitLinear --shape M=3,K=37,N=21)

# e_machine of an ELF file, as a decimal number.
e_machine() { od -An -tu2 -j18 -N2 "$1" | tr -d ' '; }

# Source forms need no toolchain at all.
expect_ok "cuda source" 'extern "C" __global__' '__dp4a' 'on cuda \(sm_' 'grid \(' -- \
  "$bin" compile "${base[@]}" --target cuda --emit cuda
expect_ok "hip source" 'extern "C" __global__' '__builtin_amdgcn_sdot4' 'on hip \(gfx90a, wave64\)' -- \
  "$bin" compile "${base[@]}" --target hip --emit hip
expect_ok "hip source gfx1030" 'on hip \(gfx1030, wave32\)' -- \
  "$bin" compile "${base[@]}" --target hip --emit hip --target-options 'hip.offload_arch=gfx1030'
expect_fail "unknown form" "unknown --emit 'spirv' for target 'cuda' \(it emits: ir, cuda, ptx, cubin\)" \
  "$bin" compile "${base[@]}" --target cuda --emit spirv
expect_fail "bad cuda arch" "cuda.arch='sm_70': expected sm_80, sm_86, sm_89, sm_90 or sm_90a" \
  "$bin" compile "${base[@]}" --target cuda --emit cuda --target-options 'cuda.arch=sm_70'
expect_fail "unsupported offload arch" "offload arch 'gfx1100' is not supported" \
  "$bin" compile "${base[@]}" --target hip --emit hsaco -o x.hsaco --target-options 'hip.offload_arch=gfx1100'
expect_fail "cubin needs -o" "is binary: give -o FILE" "$bin" compile "${base[@]}" --target cuda --emit cubin

# `info` lists both targets with why they cannot run here (no driver / no AMD GPU).
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/kfd ]; then
  expect_ok "info" '^ +cuda +gpu +no' 'reason: .*(libcuda|CUDA driver|no device)' '^ +hip +gpu +no' -- "$bin" info
  expect_ok "info json" '"name": "cuda"' '"name": "hip"' -- "$bin" info --json
  expect_fail "run needs a device" "target 'cuda' is unavailable" \
    "$bin" run "${base[@]}" --target cuda
  expect_fail "bench needs a device" "target 'hip' is unavailable" \
    "$bin" bench "${base[@]}" --target hip
  # tune lists the space (no device needed) but its bench says why it cannot time candidates.
  expect_fail "tune needs a device" "libcuda|CUDA driver|no device" \
    "$bin" tune "${base[@]}" --target cuda --budget 1
fi

if "$bin" compile "${base[@]}" --target cuda --emit ptx >ptx.txt 2>err.txt; then
  expect_ok "ptx sm_90 default" '\.target sm_90' '\.entry tj_' -- cat ptx.txt
  expect_ok "ptx sm_80" '\.target sm_80' 'dp4a' -- \
    "$bin" compile "${base[@]}" --target cuda --emit ptx --target-options 'cuda.arch=sm_80'
  expect_ok "cubin" 'wrote k\.cubin' -- \
    "$bin" compile "${base[@]}" --target cuda --emit cubin -o k.cubin --target-options 'cuda.arch=sm_86'
  [ "$(head -c4 k.cubin | od -An -c | tr -d ' ')" = '177ELF' ] && [ "$(e_machine k.cubin)" = 190 ]
  check "cubin is an NVIDIA CUDA ELF (e_machine 190)" $?
else
  grep -q "no NVRTC" err.txt || { echo "FAIL ptx"; sed 's/^/    /' err.txt; failed=$((failed + 1)); }
  skipped="$skipped NVRTC"
fi

if "$bin" compile "${base[@]}" --target hip --emit hsaco -o k.hsaco >out.txt 2>err.txt; then
  [ "$(e_machine k.hsaco)" = 224 ]
  check "hsaco is an AMDGPU ELF (e_machine 224)" $?
  expect_ok "hsaco gfx1030" 'wrote g\.hsaco' -- \
    "$bin" compile "${base[@]}" --target hip --emit hsaco -o g.hsaco --target-options 'hip.offload_arch=gfx1030'
else
  grep -q "no hiprtc" err.txt || { echo "FAIL hsaco"; sed 's/^/    /' err.txt; failed=$((failed + 1)); }
  skipped="$skipped hiprtc"
fi

[ -z "$skipped" ] || echo "not here:$skipped"
e2e_summary compile_gpu || exit 1
if [ "$skipped" = " NVRTC hiprtc" ]; then echo "SKIP: neither NVRTC nor hiprtc is installed"; exit 77; fi
exit 0

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/e2e/examples_args.sh - the examples/bitnet runners on bad arguments and inputs: each
# ends with a message on stderr and exit status 1, never a signal, an abort (134) or a
# Python traceback (issue 33, item 6: `--tokens 1,2,x` once died on an uncaught
# std::invalid_argument).
#   tests/e2e/examples_args.sh BITNET_EXAMPLE [PYTHON LIBTERNJIT SOURCE_DIR]
# Without the last three (no Python environment) only the C++ runner is checked.
set -u
example="$1"
python="${2:-}"
library="${3:-}"
source_dir="${4:-}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
E2E_FAIL_RC=1
e2e_workdir

# refused NAME PATTERN CMD...: expect_fail (exit 1, PATTERN on stderr) and no Python traceback
# or C++ "terminate called" on stderr.
refused() {
  local name="$1"
  expect_fail "$@"
  if grep -qE "Traceback|terminate called" err.txt; then
    echo "FAIL $name: a traceback or an uncaught exception"; sed 's/^/    /' err.txt; failed=$((failed + 1))
  fi
}

# bad_args NAME RUNNER...: every case below, run as RUNNER ARGS.
bad_args() {
  local name="$1"; shift
  refused "$name: --tokens 1,2,x" "tokens.*'x' is not a whole number" "$@" --tokens 1,2,x
  refused "$name: --tokens empty" "tokens" "$@" --tokens ''
  refused "$name: --tokens -3" "tokens.*-3 is outside" "$@" --tokens -3
  refused "$name: --tokens past int32" "tokens.*99999999999 is outside" "$@" --tokens 99999999999
  refused "$name: --decode -1" "decode.*-1 is outside" "$@" --decode -1
  refused "$name: --decode x" "decode.*'x' is not a whole number" "$@" --decode x
  refused "$name: --decode 1.5" "decode.*'1.5' is not a whole number" "$@" --decode 1.5
  refused "$name: --threads -2" "threads.*-2 is outside" "$@" --threads -2
  refused "$name: an unknown option" "bogus" "$@" --bogus
  refused "$name: --model without a value" "model" "$@" --model
  refused "$name: --model and --hf" "model.*hf|hf.*model" "$@" --model a.gguf --hf dir
  refused "$name: a missing model file" "cannot open.*nonexistent.gguf" "$@" --model ./nonexistent.gguf
  refused "$name: a missing checkpoint" "nonexistent" "$@" --hf ./nonexistent
  refused "$name: a model that is no GGUF" "not-a-model" "$@" --model ./not-a-model.gguf
  refused "$name: a token outside the vocabulary" "token id 50 is outside the vocabulary" \
    "$@" --tiny --tokens 50 --decode 1 --target reference
  refused "$name: an unknown target" "nosuch" "$@" --tiny --decode 1 --target nosuch
}

printf 'this is not a GGUF file\n' >not-a-model.gguf
bad_args "bitnet_example" "$example"
refused "bitnet_example: --context below prompt + decode" "--context 2 < prompt \+ decode" \
  "$example" --tiny --decode 3 --context 2 --target reference
refused "bitnet_example: --context x" "context.*'x' is not a whole number" "$example" --context x
expect_ok "bitnet_example: --help" "--tokens" -- "$example" --help

if [ -n "$python" ]; then
  py() { env PYTHONPATH="$source_dir/python" TERNJIT_LIBRARY="$library" "$python" \
             "$source_dir/examples/bitnet/bitnet_example.py" "$@"; }
  bad_args "bitnet_example.py" py
fi
e2e_summary examples_args

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_test.sh - the installed Python package finds the installed libternjit.so, also after a move.
# Usage: install_test.sh CMAKE BUILD_DIR WORK_DIR PYTHON
# Installs the build into WORK_DIR/prefix, then imports `ternjit` from there with
# TERNJIT_LIBRARY unset (the package must find the library through _library_path.txt,
# not the build tree), compiles and runs the BitLinear layer; moves the prefix and
# imports again (the hint is relative). Where PYTHON imports torch, ternjit.torch must load the
# installed PyTorch extension from beside the package. Exits 77 when numpy is missing.
set -euo pipefail
cmake=$1 build=$2 work=$3 python=$4

if ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "SKIP: numpy is missing for $python (tools/setup-python)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"

init=$(find "$work/prefix" -path '*/ternjit/__init__.py' | head -n1)
[ -n "$init" ] || { echo "FAILED: the ternjit package was not installed"; cat "$work/install.log"; exit 1; }
site=$(dirname "$(dirname "$init")")
echo "package: ${site#"$work/"}/ternjit, hint: $(cat "$site/ternjit/_library_path.txt")"

check() {  # check SITE PREFIX: import from SITE, the library must come from PREFIX
  (cd "$work" && env -u TERNJIT_LIBRARY -u TERNJIT_TORCH_LIBRARY PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$1" "$python" - "$2" <<'EOF'
import sys
import numpy as np
import ternjit
prefix = sys.argv[1]
path = ternjit.library_path()
print("library:", path, "version", ternjit.version())
assert path.startswith(prefix + "/"), "library %s is not from %s" % (path, prefix)
assert ternjit.__file__.startswith(prefix + "/"), ternjit.__file__
program = ternjit.Engine(target="reference").compile("""
layer BitLinear {
    param gamma: Tensor[K]
    param w: TernaryTensor[K, N]
    param w_scale: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        return relu((quantize_int8(rmsnorm(x, gamma, 1e-5)) @ w) * w_scale)
    }
}
""", "installed.tri")
program.bind("BitLinear.gamma", np.ones(5, np.float32))
program.bind("BitLinear.w", np.eye(5, 3, dtype=np.int8))
program.bind("BitLinear.w_scale", np.ones(3, np.float32))
y = program.run("BitLinear.forward", np.array([[1, 2, 3, 4, 5]], np.float32))
# rmsnorm: x / sqrt(11 + 1e-5); codes round(x * 127 / 5) = 25, 51, 76; y = code * s.
s = 5 / np.sqrt(11 + 1e-5) / 127
assert np.allclose(y, np.array([[25, 51, 76]]) * s, rtol=1e-5), y
print("BitLinear ok:", y)
try:
    import torch
except ImportError:
    torch = None
if torch is not None:  # the build made and installed the PyTorch extension beside the package
    import ternjit.torch
    ext = ternjit.torch.extension_path()
    assert ext.startswith(prefix + "/") and ternjit.torch.EXTENSION[0] == ext, ext
    layer = ternjit.torch.BitLinear(torch.eye(3, 5, dtype=torch.int8), torch.ones(1),
                                    engine=ternjit.Engine(target="reference"))
    got = layer(torch.tensor([[1.0, 2, 3, 4, 5]]))
    assert torch.allclose(got, torch.tensor([[25.0, 51, 76]]) * 5 / 127, rtol=1e-5), got
    print("torch extension ok:", ext)
EOF
  )
  # ternjit.jax's handler library, installed beside the package when the build had jaxlib,
  # is found there and reaches the installed libternjit.so through its relative run path.
  if [ -e "$1/ternjit/libternjit_jax.so" ]; then
    (cd "$work" && env -u TERNJIT_LIBRARY -u TERNJIT_JAX_LIBRARY PYTHONDONTWRITEBYTECODE=1 JAX_PLATFORMS=cpu \
      TERNJIT_CACHE_DIR=off PYTHONPATH="$1" "$python" - "$2" <<'EOF'
import sys
import jax.numpy as jnp
import ternjit.jax as tj
prefix = sys.argv[1]
assert tj.library_path().startswith(prefix + "/"), tj.library_path()
# x/s = 42.3, -84.7, 127 -> 42, -85, 127; w/g = 1.5 or 0 with g = 2/3 -> codes 1 or 0.
y = tj.bitlinear(jnp.array([[1.0, -2.0, 3.0]]), jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
expected = jnp.array([[169.0, 42.0]]) * (3 / 127) * (2 / 3)
assert jnp.allclose(y, expected, rtol=1e-6), y
print("ternjit.jax ok:", tj.library_path())
EOF
    )
  fi
}

check "$site" "$work/prefix"
mv "$work/prefix" "$work/moved"
check "${site/"$work/prefix"/"$work/moved"}" "$work/moved"
# The installed prefix is ~0.7 GB: a passing run leaves nothing behind (a failing one keeps
# $work to look at).
rm -rf "$work"
echo "PASSED"

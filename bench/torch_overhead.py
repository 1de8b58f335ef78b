# SPDX-License-Identifier: Apache-2.0
# torch_overhead.py - host overhead per call of ternjit's PyTorch op beside nn.Linear and the old ctypes path.
"""One process, one thread (torch.set_num_threads(1), an engine with threads=1), a 64x32
layer (K = 64 in, N = 32 out) on one row: the time per call is host overhead, the kernels'
arithmetic being ~100 ns. Rows, each the median over --repeats timings of --number calls:

- nn.Linear(64, 32): torch's own float layer (the baseline of the ratios);
- BitLinear module: ternjit.torch.BitLinear (nn.Module call + the op);
- torch.ops.ternjit.bitlinear: the op called directly (the OpOverloadPacket), and its
  .default overload;
- ctypes path: what the old Python CPU kernel of the op did per call (reshape, float32
  contiguous input, torch.empty output, Kernel.call_pointers through ctypes);
- call_pointers only: the ctypes call of the kernel's entry point alone.

Usage (from a build tree)::

    TERNJIT_LIBRARY=build/lib/libternjit.so TERNJIT_TORCH_LIBRARY=build/python/torch_ext/libternjit_torch.so \\
        PYTHONPATH=python .deps/venv/bin/python bench/torch_overhead.py [--number 2000] [--repeats 25]
"""
import argparse
import statistics
import timeit

import torch

import ternjit
import ternjit.torch


def per_call_us(fn, number, repeats):
    fn()  # warm: compiles and specializes once
    times = timeit.repeat(fn, number=number, repeat=repeats)
    return statistics.median(times) / number * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=25, help="timings (the median is reported)")
    parser.add_argument("--target", default="auto", help="ternjit target (default auto)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    k, n = 64, 32
    torch.manual_seed(0)
    x = torch.randn(1, k)
    linear = torch.nn.Linear(k, n).eval()
    engine = ternjit.Engine(target=args.target, threads=1)
    layer = ternjit.torch.BitLinear.from_linear(linear, engine=engine).eval()
    op = torch.ops.ternjit.bitlinear
    key = layer.engine_key
    weight, scale = layer.weight, layer.weight_scale
    bias = layer.bias

    # The old CPU kernel's path: a ternjit program with the same layer, called through ctypes.
    program = engine.compile(ternjit.torch.bitlinear_source(False, True, "none"), "<bench>")
    program.bind("BitLinear.w", weight.t().contiguous().numpy(), dtype="t2")
    program.bind("BitLinear.w_scale", scale.expand(n).contiguous().numpy())
    program.bind("BitLinear.bias", bias.numpy())
    kernel = program.kernel("BitLinear.forward", ternjit.TensorSpec((1, k), "f32"))
    y_out = torch.empty(1, n)

    def ctypes_path():
        x2 = x.detach().reshape(-1, k).to(torch.float32).contiguous()
        y = torch.empty((x2.shape[0], n), dtype=torch.float32)
        kernel.call_pointers([x2.data_ptr(), y.data_ptr()])
        return y.reshape(tuple(x.shape[:-1]) + (n,)).to(x.dtype)

    with torch.no_grad():
        expected = ctypes_path()
        for got in (layer(x), op(x, weight, scale, bias, None, 1e-5, "none", key)):
            if not torch.equal(got, expected):
                raise SystemExit("the native op and the ctypes path disagree")
        rows = [
            ("nn.Linear(64, 32)", lambda: linear(x)),
            ("BitLinear module (native op)", lambda: layer(x)),
            ("torch.ops.ternjit.bitlinear", lambda: op(x, weight, scale, bias, None, 1e-5, "none", key)),
            ("torch.ops.ternjit.bitlinear.default",
             lambda: op.default(x, weight, scale, bias, None, 1e-5, "none", key)),
            ("ctypes path (old CPU kernel)", ctypes_path),
            ("call_pointers only", lambda: kernel.call_pointers([x.data_ptr(), y_out.data_ptr()])),
        ]
        results = [(name, per_call_us(fn, args.number, args.repeats)) for name, fn in rows]
    base = results[0][1]
    print("torch %s, ternjit %s, target %s, 1 thread, x[1, %d] -> [1, %d]; median of %d x %d calls"
          % (torch.__version__, ternjit.version(), args.target, k, n, args.repeats, args.number))
    print("| path | us per call | ratio to nn.Linear |")
    print("|---|---|---|")
    for name, us in results:
        print("| %s | %.2f | %.2f |" % (name, us, us / base))


if __name__ == "__main__":
    main()

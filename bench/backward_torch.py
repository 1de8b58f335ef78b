# SPDX-License-Identifier: Apache-2.0
# backward_torch.py - torch's float forward and backward of the bench_backward layer (STE), one thread.
"""The baseline of bench/backward_bench.cpp on the same machine: the 2560 x 6912 BitLinear
``y = q(x) @ t(w)`` with the straight-through estimators written in torch (f32), timed
per call (median of repeats) for M = 8, 32, 128: the forward, the backward with respect to
x only, and with respect to x and the latent weights. Run with Debian's python:
``/usr/bin/python3 bench/backward_torch.py``."""
import time

import torch


def ste(v, q):
    return v + (q - v).detach()


def layer(x, w):
    s = x.abs().amax(dim=-1, keepdim=True) / 127
    xq = ste(x, torch.clamp(torch.round(x / s), -127, 127) * s)
    g = w.abs().mean()
    return xq @ ste(w, torch.clamp(torch.round(w / g), -1, 1) * g)


def median_ms(fn, repeats=7):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    k, n = 2560, 6912
    for m in (8, 32, 128):
        x = torch.randn(m, k)
        w = torch.randn(k, n)
        dy = torch.randn(m, n)
        with torch.no_grad():
            fwd = median_ms(lambda: layer(x, w))

        def backward(wrt_w):
            xr = x.clone().requires_grad_(True)
            wr = w.clone().requires_grad_(wrt_w)
            y = layer(xr, wr)
            t0 = time.perf_counter()
            y.backward(dy)
            return (time.perf_counter() - t0) * 1e3

        dx = sorted(backward(False) for _ in range(5))[2]
        dxdw = sorted(backward(True) for _ in range(5))[2]
        print("torch M=%-4d forward %8.2f ms  bwd_dx %8.2f ms  bwd_dx_dw %8.2f ms" % (m, fwd, dx, dxdw))


if __name__ == "__main__":
    main()

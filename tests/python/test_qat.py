# SPDX-License-Identifier: Apache-2.0
# test_qat.py - ternjit.torch.QATLinear: loss.backward() against torch's float model with STE, and a QAT run.
"""The torch model (torch_qat_linear) is written from the .tri semantics with torch ops
only and the usual straight-through trick ``x + (q(x) - x).detach()``: per-row absmax
int8 quantization of x (torch.round: half to even, as the reference) and per-tensor
absmean ternarization of the latent weights, a float matmul, the bias and the
activation. Its autograd gradients are the STE gradients ternjit's backward computes.

Tolerance: both sides compute in f32 from the same int8/ternary codes; a code may
differ only where x/s lies within an f32 ulp of a rounding tie (never with these
random inputs, checked by comparing the forward outputs first). The matmuls then differ
by reordering: |error| <= K u sum|terms| with u = 2^-24, K <= 64, |terms| <= max|x|
max|w| ... bounded by rtol = atol = 1e-4 on O(1) values (K u = 4e-6 per unit term).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

np = harness.require("numpy", "the pinned environment, tools/setup-python")
torch = harness.require("torch", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()
harness.import_ternjit_torch()


def targets():
    return ["reference"] + [t for t in ("x86", "llvm") if ternjit.has_feature("target:" + t)]


def ste(x, q):
    return x + (q - x).detach()


def torch_qat_linear(x, weight, bias, activation, ste_clip=False):
    s = x.abs().amax(dim=-1, keepdim=True) / 127
    xq = ste(x, torch.clamp(torch.round(x / s), -127, 127) * s)
    g = weight.abs().mean()
    wt = torch.clamp(torch.round(weight / g), -1, 1) * g
    if ste_clip:  # the gradient passes only where |w| <= mean|w|
        mask = (weight.abs() <= g).to(weight.dtype)
        wq = wt.detach() + (weight * mask - (weight * mask).detach())
    else:
        wq = ste(weight, wt)
    y = xq @ wq.t()
    if bias is not None:
        y = y + bias
    return {"none": lambda v: v, "relu": torch.relu, "gelu": torch.nn.functional.gelu,
            "silu": torch.nn.functional.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[activation](y)


def close(a, b, what):
    err = (a - b).abs().max().item() if a.numel() else 0.0
    check(torch.allclose(a, b, rtol=1e-4, atol=1e-4), "%s differs by up to %g" % (what, err))


def test_gradients_equal_torch_ste():
    for target in targets():
        engine = ternjit.Engine(target=target, cache_dir="off")
        for (m, k, n), activation, bias, clip in [((1, 13, 7), "none", True, False), ((5, 37, 19), "gelu", True, False),
                                                  ((16, 64, 9), "relu", False, True), ((3, 8, 33), "tanh", True, True)]:
            torch.manual_seed(m * 100 + k + n)
            layer = ternjit.torch.QATLinear(k, n, bias=bias, activation=activation, ste_clip=clip, engine=engine)
            x = torch.randn(m, k, requires_grad=True)
            y = layer(x)
            x_ref = x.detach().clone().requires_grad_(True)
            w_ref = layer.weight.detach().clone().requires_grad_(True)
            b_ref = layer.bias.detach().clone().requires_grad_(True) if bias else None
            y_ref = torch_qat_linear(x_ref, w_ref, b_ref, activation, clip)
            what = "%s %s M=%d K=%d N=%d clip=%s" % (target, activation, m, k, n, clip)
            close(y, y_ref, "forward " + what)
            dy = torch.randn_like(y)
            y.backward(dy)
            y_ref.backward(dy)
            close(x.grad, x_ref.grad, "dx " + what)
            close(layer.weight.grad, w_ref.grad, "dW " + what)
            if bias:
                close(layer.bias.grad, b_ref.grad, "db " + what)
            check(layer.weight.grad.shape == layer.weight.shape, "dW has the weight's shape")


def run_grad(program, fn, args, dy):
    """.fwd then .bwd of `fn` on numpy `args`: (y, gradients)."""
    outs = program.run(fn + ".fwd", *args)
    outs = outs if isinstance(outs, list) else [outs]
    specs = program.kernel(fn + ".fwd", *args).outputs
    saved = [(a, spec.dtype) for a, spec in zip(outs[1:], specs[1:])]
    grads = program.run(fn + ".bwd", *args, dy, *saved)
    return outs[0], grads if isinstance(grads, list) else [grads]


def test_ste_clip_attribute_equals_torch():
    # The clipping written on the quantizer (ternarize_absmean(w, 1) / (w, 0)) wins over
    # compile_grad's ste_clip default: each is compared with the torch model it names.
    for target in targets():
        engine = ternjit.Engine(target=target, cache_dir="off")
        for attr, option in [(True, False), (False, True), (None, True), (None, False)]:
            clip = option if attr is None else attr
            source = ternjit.torch.qat_linear_source(True, "relu", attr)
            program = engine.compile_grad(source, "QATLinear.forward", wrt=["x", "w", "b"], ste_clip=option)
            torch.manual_seed(7)
            m, k, n = 6, 21, 11
            x = torch.randn(m, k, requires_grad=True)
            w = torch.randn(n, k, requires_grad=True)
            b = torch.randn(n, requires_grad=True)
            dy = torch.randn(m, n)
            y, grads = run_grad(program, "QATLinear.forward",
                                [x.detach().numpy(), w.detach().t().contiguous().numpy(), b.detach().numpy()],
                                dy.numpy())
            y_ref = torch_qat_linear(x, w, b, "relu", clip)
            y_ref.backward(dy)
            what = "%s attribute %s option %s" % (target, attr, option)
            close(torch.from_numpy(y), y_ref.detach(), "forward " + what)
            close(torch.from_numpy(grads[0]), x.grad, "dx " + what)
            close(torch.from_numpy(grads[1]).t(), w.grad, "dW " + what)
            close(torch.from_numpy(grads[2]), b.grad, "db " + what)
            g = w.detach().abs().mean()
            outside = (w.detach().abs() > g)
            check(outside.any().item(), "some weights lie outside the clipping range")
            zero_outside = bool((torch.from_numpy(grads[1]).t()[outside] == 0).all())
            check(zero_outside == clip, "dW is zero outside the range exactly when clipped (%s)" % what)


def test_int8_dx_within_its_bound():
    # int8_dx quantizes dy (times the weight scale g) per row: |dx - dx_exact|[m, k] <=
    # g * sum_n |T[k, n]| * max_n |dy[m, n]| / 254 (half an int8 step per term), plus the
    # f32 reordering slack of close(); dW and db stay exact.
    for target in targets():
        engine = ternjit.Engine(target=target, cache_dir="off")
        for (m, k, n) in [(1, 13, 7), (17, 40, 33)]:
            torch.manual_seed(m + k + n)
            layer = ternjit.torch.QATLinear(k, n, activation="none", engine=engine, int8_dx=True)
            exact = ternjit.torch.QATLinear(k, n, activation="none", engine=engine)
            exact.load_state_dict(layer.state_dict())
            x = torch.randn(m, k, requires_grad=True)
            x2 = x.detach().clone().requires_grad_(True)
            dy = torch.randn(m, n)
            layer(x).backward(dy)
            exact(x2).backward(dy)
            w = layer.weight.detach()
            g = w.abs().mean()
            t = torch.clamp(torch.round(w / g), -1, 1)  # [N, K]
            bound = g * (dy.abs().amax(dim=1, keepdim=True) / 254) * t.abs().sum(dim=0, keepdim=True) * (1 + 1e-5) + 1e-5
            err = (x.grad - x2.grad).abs()
            what = "%s M=%d K=%d N=%d" % (target, m, k, n)
            check(bool((err <= bound).all()), "int8 dx error %g over its bound (%s)" % ((err - bound).max().item(), what))
            check(err.max().item() > 0, "int8 dx equals the exact dx: the option did nothing (%s)" % what)
            close(layer.weight.grad, exact.weight.grad, "dW " + what)
            close(layer.bias.grad, exact.bias.grad, "db " + what)


def test_int8_dw_within_its_bound():
    # int8_dw: the weight gradient from the int8 activation codes xq (x = xq * s per row)
    # and the gradient g' = dy * s quantized per output column to steps
    # t_n = max_m |g'[m, n]| / 127: |dW - dW_exact|[n, k] <= t_n / 2 * sum_m |xq[m, k]|,
    # |xq[m, k]| <= |x[m, k]| / s_m + 1/2; dx and db stay exact.
    for target in targets():
        engine = ternjit.Engine(target=target, cache_dir="off")
        for (m, k, n) in [(3, 13, 7), (17, 40, 33)]:
            torch.manual_seed(m + k + n + 1)
            layer = ternjit.torch.QATLinear(k, n, activation="none", engine=engine, int8_dw=True)
            exact = ternjit.torch.QATLinear(k, n, activation="none", engine=engine)
            exact.load_state_dict(layer.state_dict())
            x = torch.randn(m, k, requires_grad=True)
            x2 = x.detach().clone().requires_grad_(True)
            dy = torch.randn(m, n)
            layer(x).backward(dy)
            exact(x2).backward(dy)
            s = x.detach().abs().amax(dim=1, keepdim=True) / 127  # [M, 1]
            codes = x.detach().abs() / s + 0.5                      # [M, K]
            t = (dy.abs() * s).amax(dim=0) / 127                    # [N]
            bound = (t[:, None] / 2) * codes.sum(dim=0)[None, :] * (1 + 1e-5) + 1e-5  # [N, K]
            err = (layer.weight.grad - exact.weight.grad).abs()
            what = "%s M=%d K=%d N=%d" % (target, m, k, n)
            check(bool((err <= bound).all()), "int8 dW error %g over its bound (%s)" % ((err - bound).max().item(), what))
            check(err.max().item() > 0, "int8 dW equals the exact dW: the option did nothing (%s)" % what)
            close(x.grad, x2.grad, "dx " + what)
            close(layer.bias.grad, exact.bias.grad, "db " + what)


def test_qat_mlp_loss_goes_down():
    # A 2-layer MLP on a synthetic regression task (a fixed random teacher), seeded; with
    # the exact backward, with the int8_dx option, and with int8_dx and int8_dw.
    engine = ternjit.Engine(target="auto", cache_dir="off")
    for int8_dx, int8_dw in ((False, False), (True, False), (True, True)):
        train_mlp(engine, int8_dx, int8_dw)


def train_mlp(engine, int8_dx, int8_dw=False, wrap=None):
    """Trains the MLP 200 steps (through ``wrap(model)`` if given, e.g. torch.compile) and
    checks that the loss goes down; returns the model."""
    torch.manual_seed(3)
    start = time.time()
    model = torch.nn.Sequential(ternjit.torch.QATLinear(16, 32, activation="relu", engine=engine, int8_dx=int8_dx,
                                                        int8_dw=int8_dw),
                                ternjit.torch.QATLinear(32, 4, engine=engine, int8_dx=int8_dx, int8_dw=int8_dw))
    teacher = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    data = torch.randn(256, 16)
    with torch.no_grad():
        target = teacher(data)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    net = model if wrap is None else wrap(model)
    losses = []
    for step in range(200):
        idx = torch.randint(0, 256, (32,))
        loss = torch.nn.functional.mse_loss(net(data[idx]), target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
    print("QAT (int8_dx=%s, int8_dw=%s%s): mean loss of the first 20 steps %.4f, of the last 20 %.4f (%.1f s)" % (
        int8_dx, int8_dw, "" if wrap is None else ", wrapped", first, last, time.time() - start))
    check(all(np.isfinite(losses)), "a loss is not finite")
    check(last < 0.5 * first, "the loss did not go down: %.4f -> %.4f" % (first, last))
    # The trained layers export to inference BitLinear layers computing the same forward.
    with torch.no_grad():
        x = data[:8]
        h = model[0](x)
        close(model[0].to_bitlinear()(x), h, "exported BitLinear")
    return model


if __name__ == "__main__":
    torch.set_num_threads(1)
    harness.run([test_gradients_equal_torch_ste, test_ste_clip_attribute_equals_torch, test_int8_dx_within_its_bound,
                 test_int8_dw_within_its_bound, test_qat_mlp_loss_goes_down])

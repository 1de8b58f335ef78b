# SPDX-License-Identifier: Apache-2.0
# test_torch.py - ternjit.torch.BitLinear against the same layer written with torch ops.
"""The torch model of the layer (torch_bitlinear) is written from the .tri semantics with
torch ops only: rmsnorm by hand, per-row absmax int8 quantization with torch.round
(round half to even, as the reference) and clamp, a matmul with the ternary weight as
float, the per-channel scale and relu.

Two comparisons, with the tolerance of tests/python/bitlinear_numpy.py (f32 reordering
error after the exact int8 codes, plus one step for each code whose h/s lies within
2e-4 of a rounding tie, found from the torch model's own h/s):

- rmsnorm in float64 rounded once to float32, exactly as the reference interpreter
  computes it: against the reference target the codes must agree exactly (no near-tie
  allowance); compiled targets may compute rmsnorm in f32 and get the allowance;
- the plain all-float32 torch layer: its rmsnorm differs from the reference's by an ulp
  or two, so every target gets the near-tie allowance.
"""
import copy
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

np = harness.require("numpy", "python3-numpy")
torch = harness.require("torch", "python3-torch")
ternjit = harness.import_ternjit()
import ternjit.torch  # noqa: E402
import bitlinear_numpy as ref  # noqa: E402

# M = 1, 3, 16 with K and N that are not multiples of 4 or 8.
SHAPES = [(1, 37, 19), (3, 70, 13), (16, 45, 29)]


def targets():
    return ["reference"] + [t for t in ("x86", "llvm") if ternjit.has_feature("target:" + t)] + ["auto"]


def torch_bitlinear(x, weight, gamma, scale, rms_dtype=torch.float32, eps=1e-5):
    """The layer in torch ops (weight is [N, K], the nn.Linear layout): (y, magnitude,
    near-tie flip bound) as in bitlinear_numpy.bitlinear."""
    xd = x.to(rms_dtype)
    h = (xd / torch.sqrt((xd * xd).mean(dim=-1, keepdim=True) + eps) * gamma.to(rms_dtype)).to(torch.float32)
    s = h.abs().amax(dim=-1, keepdim=True) / 127.0
    safe = torch.where(s > 0, s, torch.ones_like(s))
    ratio = h / safe
    q = torch.clamp(torch.round(ratio), -127, 127)  # torch.round: half to even
    q = torch.where(s > 0, q, torch.zeros_like(q))
    hq = q * s
    y = torch.relu((hq @ weight.to(torch.float32).t()) * scale)
    magnitude = (hq.abs().double() @ weight.abs().double().t()) * scale.abs().double()
    flips = ref.flip_bound(ratio.numpy(), s.numpy(), weight.t().numpy(), scale.numpy())
    return y, magnitude, flips


def random_layer(gen, m, k, n):
    x = torch.randn(m, k, generator=gen)
    weight = torch.randint(-1, 2, (n, k), generator=gen, dtype=torch.int8)
    gamma = torch.rand(k, generator=gen) + 0.5
    scale = torch.rand(n, generator=gen) * 0.09 + 0.01
    return x, weight, gamma, scale


def compare(y, x, weight, gamma, scale, rms_dtype, exact_codes, what):
    expected, magnitude, flips = torch_bitlinear(x, weight, gamma, scale, rms_dtype)
    check(isinstance(y, torch.Tensor) and y.dtype == torch.float32, "%s: got %r" % (what, type(y)))
    problem = ref.compare(y.numpy(), expected.numpy(), magnitude.numpy(), 0 * flips if exact_codes else flips,
                          x.shape[-1])
    check(problem is None, "%s: %s" % (what, problem))


def test_bitlinear_matches_torch():
    gen = torch.Generator().manual_seed(3)
    for target in targets():
        engine = ternjit.Engine(target=target)
        for m, k, n in SHAPES:
            x, weight, gamma, scale = random_layer(gen, m, k, n)
            layer = ternjit.torch.BitLinear(weight, gamma, scale, engine=engine)
            y = layer(x)
            check(y.shape == (m, n), "shape %s" % (tuple(y.shape),))
            what = "target %s M=%d K=%d N=%d" % (target, m, k, n)
            compare(y, x, weight, gamma, scale, torch.float64, target == "reference", what + " (rmsnorm in f64)")
            compare(y, x, weight, gamma, scale, torch.float32, False, what + " (all f32)")


def test_module_behaves_like_a_torch_module():
    gen = torch.Generator().manual_seed(4)
    k, n = 37, 19
    x, weight, gamma, scale = random_layer(gen, 6, k, n)
    layer = ternjit.torch.BitLinear(weight, gamma, scale, engine=ternjit.Engine(target="reference"))
    check(layer.in_features == k and layer.out_features == n and "in_features=37" in repr(layer), repr(layer))
    y = layer(x)
    # Leading dims, non-contiguous input, a grad-requiring input (autograd-free result).
    check(torch.equal(layer(x.reshape(2, 3, k)), y.reshape(2, 3, n)), "leading dims")
    xt = x.t().contiguous().t()
    check(not xt.is_contiguous(), "the view is contiguous")
    check(torch.equal(layer(xt), y), "non-contiguous input")
    xg = x.clone().requires_grad_(True)
    yg = layer(xg)
    check(yg.grad_fn is None and not yg.requires_grad, "result tracks gradients")
    with torch.no_grad():
        check(torch.equal(layer(x), y), "no_grad")
    # state_dict round trip rebinds the weights.
    other = ternjit.torch.BitLinear(torch.zeros_like(weight), torch.ones(k), torch.ones(n),
                                    engine=ternjit.Engine(target="reference"))
    check(not torch.equal(other(x), y), "zero weights gave the same output")
    other.load_state_dict(layer.state_dict())
    check(torch.equal(other(x), y), "load_state_dict did not rebind the weights")
    # Empty batch.
    check(layer(x[:0]).shape == (0, n), "empty batch")
    # deepcopy shares the engine and rebuilds the program; torch.save/load pickles the
    # buffers and the engine's options.
    twin = copy.deepcopy(layer)
    check(twin.engine is layer.engine and torch.equal(twin(x), y), "deepcopy")
    blob = io.BytesIO()
    torch.save(layer, blob)
    blob.seek(0)
    loaded = torch.load(blob)
    check(loaded.engine.options == layer.engine.options and torch.equal(loaded(x), y), "torch.save/load")


def test_from_linear():
    torch.manual_seed(5)
    linear = torch.nn.Linear(45, 29, bias=False)
    gamma = torch.rand(45) + 0.5
    layer = ternjit.torch.BitLinear.from_linear(linear, gamma, engine=ternjit.Engine(target="reference"))
    w = linear.weight.detach()
    scale = w.abs().mean(dim=1)
    weight = torch.clamp(torch.round(w / scale[:, None]), -1, 1).to(torch.int8)
    check(torch.equal(layer.weight, weight) and torch.equal(layer.scale, scale), "ternarization")
    x = torch.randn(3, 45)
    compare(layer(x), x, weight, gamma, scale, torch.float64, True, "from_linear")
    try:
        ternjit.torch.BitLinear.from_linear(torch.nn.Linear(4, 4))
        check(False, "a Linear with bias was accepted")
    except ternjit.Error as e:
        check(e.status == ternjit.UNSUPPORTED and "bias" in e.message, repr(e))


def test_errors():
    engine = ternjit.Engine(target="reference")
    gen = torch.Generator().manual_seed(6)
    x, weight, gamma, scale = random_layer(gen, 2, 8, 4)
    cases = [
        (lambda: ternjit.torch.BitLinear(weight * 2, gamma, scale, engine=engine), "outside {-1, 0, 1}"),
        (lambda: ternjit.torch.BitLinear(weight.float(), gamma, scale, engine=engine), "integer tensor"),
        (lambda: ternjit.torch.BitLinear(weight, gamma[:-1], scale, engine=engine), "gamma must be [8]"),
        (lambda: ternjit.torch.BitLinear(weight, gamma, scale[:-1], engine=engine), "scale must be [4]"),
        (lambda: ternjit.torch.BitLinear(weight, gamma, scale, engine=engine)(x[:, :-1]), "x[..., 8], got [2, 7]"),
    ]
    for fn, fragment in cases:
        try:
            fn()
            check(False, "no error for %r" % fragment)
        except ternjit.Error as e:
            check(fragment in e.message, "message %r lacks %r" % (e.message, fragment))


if __name__ == "__main__":
    torch.set_num_threads(1)
    harness.run([test_bitlinear_matches_torch, test_module_behaves_like_a_torch_module, test_from_linear,
                 test_errors])

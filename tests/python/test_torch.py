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

np = harness.require("numpy", "the pinned environment, tools/setup-python")
torch = harness.require("torch", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()
harness.import_ternjit_torch()
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
            layer = ternjit.torch.BitLinear(weight, scale, norm=gamma, activation="relu", engine=engine)
            y = layer(x)
            check(y.shape == (m, n), "shape %s" % (tuple(y.shape),))
            what = "target %s M=%d K=%d N=%d" % (target, m, k, n)
            compare(y, x, weight, gamma, scale, torch.float64, target == "reference", what + " (rmsnorm in f64)")
            compare(y, x, weight, gamma, scale, torch.float32, False, what + " (all f32)")


def test_module_behaves_like_a_torch_module():
    gen = torch.Generator().manual_seed(4)
    k, n = 37, 19
    x, weight, gamma, scale = random_layer(gen, 6, k, n)
    layer = ternjit.torch.BitLinear(weight, scale, norm=gamma, activation="relu",
                                    engine=ternjit.Engine(target="reference"))
    check(layer.in_features == k and layer.out_features == n and "in_features=37" in repr(layer), repr(layer))
    y = layer(x)
    # Leading dims, non-contiguous input, a grad-requiring input (autograd-free result).
    check(torch.equal(layer(x.reshape(2, 3, k)), y.reshape(2, 3, n)), "leading dims")
    xt = x.t().contiguous().t()
    check(not xt.is_contiguous(), "the view is contiguous")
    check(torch.equal(layer(xt), y), "non-contiguous input")
    # BitLinear is inference only: a grad-requiring input gives a result whose backward
    # raises, saying so (torch 2 would otherwise record the op and warn at backward).
    xg = x.clone().requires_grad_(True)
    yg = layer(xg)
    check(torch.equal(yg.detach(), y) and yg.requires_grad and yg.grad_fn is not None, "result does not track gradients")
    try:
        yg.sum().backward()
        check(False, "backward through BitLinear did not raise")
    except RuntimeError as e:
        check("inference only" in str(e) and "QATLinear" in str(e), "backward error: %s" % e)
    check(xg.grad is None, "backward through BitLinear produced a gradient")
    with torch.no_grad():
        check(torch.equal(layer(x), y), "no_grad")
    # state_dict round trip rebinds the weights.
    other = ternjit.torch.BitLinear(torch.zeros_like(weight), torch.ones(n), norm=torch.ones(k), activation="relu",
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
    loaded = torch.load(blob, weights_only=False)  # a whole module, not weights (torch >= 2.6 defaults to True)
    check(loaded.engine.options == layer.engine.options and torch.equal(loaded(x), y), "torch.save/load")


def test_errors():
    engine = ternjit.Engine(target="reference")
    gen = torch.Generator().manual_seed(6)
    x, weight, gamma, scale = random_layer(gen, 2, 8, 4)
    cases = [
        (lambda: ternjit.torch.BitLinear(weight * 2, scale, engine=engine), "outside {-1, 0, 1}"),
        (lambda: ternjit.torch.BitLinear(weight.float(), scale, engine=engine), "integer tensor"),
        (lambda: ternjit.torch.BitLinear(weight, scale, norm=gamma[:-1], engine=engine), "norm must be [8]"),
        (lambda: ternjit.torch.BitLinear(weight, scale[:-1], engine=engine), "1 or 4 (out_features)"),
        (lambda: ternjit.torch.BitLinear(weight, scale, bias=scale[:-1], engine=engine), "bias must be [4]"),
        (lambda: ternjit.torch.BitLinear(weight, scale, activation="swish", engine=engine), "unknown activation"),
        (lambda: ternjit.torch.BitLinear(weight, scale, engine=engine)(x[:, :-1]), "x[..., 8], got x[..., 7]"),
        (lambda: ternjit.torch.bitlinear(x, weight * 3, scale, None, None, 1e-5, "none", ""), "outside {-1, 0, 1}"),
        (lambda: ternjit.torch.bitlinear(x, weight.float(), scale, None, None, 1e-5, "none", ""), "int8 CPU tensor"),
    ]
    for fn, fragment in cases:
        try:
            fn()
            check(False, "no error for %r" % fragment)
        except ternjit.Error as e:  # the module's own checks
            check(fragment in e.message, "message %r lacks %r" % (e.message, fragment))
        except ValueError as e:  # the op's (the extension raises torch's ValueError)
            check(fragment in str(e), "message %r lacks %r" % (str(e), fragment))


# ---------------------------------------------------------------- BitNet b1.58 and the custom op

def bitnet_reference(x, weight, weight_scale, bias):
    """BitNet b1.58's BitLinear in torch float ops, on the ternary weights: per-token absmax
    int8 activation quantization (scale 127 / max|x|, max clamped at 1e-5, torch.round half
    to even) and F.linear with the dequantized weights ``weight * weight_scale``.

    Returns (y, magnitude, flips) for bitlinear_numpy.compare: the tolerance is the f32
    reordering bound on ``|xq| @ |w|*|scale| + |bias|`` (ternjit computes ``q * s`` with
    ``s = max/127`` where BitNet divides by ``127/max``: the same codes, scales an ulp
    apart) plus one step for each code whose ``x * 127/max`` lies within 2e-4 of a tie
    (ternjit rounds ``x / s``, which may land on the other side of such a tie)."""
    x = x.to(torch.float32)
    amax = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5)
    sc = 127.0 / amax
    ratio = x * sc
    xq = ratio.round().clamp(-128, 127) / sc
    wd = weight.to(torch.float32) * weight_scale.reshape(-1, 1).to(torch.float32)
    y = torch.nn.functional.linear(xq, wd, bias)
    magnitude = xq.abs().double() @ wd.abs().double().t()
    if bias is not None:
        magnitude = magnitude + bias.abs().double()
    scale_n = weight_scale.reshape(-1).to(torch.float32).expand(weight.shape[0])
    flips = ref.flip_bound(ratio.numpy(), (1.0 / sc).numpy(), weight.t().numpy(), scale_n.numpy())
    return y.detach(), magnitude, flips


class TinyModel(torch.nn.Module):
    """A small transformer-like MLP: three Linear layers with and without bias, GELU in between."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(37, 45)
        self.act = torch.nn.GELU()
        self.gate = torch.nn.Linear(37, 45, bias=False)
        self.down = torch.nn.Linear(45, 29, bias=False)

    def forward(self, x):
        return self.down(self.act(self.up(x)) * self.gate(x))


def converted_model(target="reference"):
    torch.manual_seed(11)
    model = TinyModel().eval()
    original = copy.deepcopy(model)
    ternjit.torch.convert(model, engine=ternjit.Engine(target=target))
    return original, model


def test_convert_matches_bitnet_float():
    """Every converted layer, on the input it actually receives, against BitNet's float
    computation with the same ternary weights (per-tensor absmean scale, bias kept)."""
    for target in targets():
        original, model = converted_model(target)
        for name in ("up", "gate", "down"):
            layer = getattr(model, name)
            check(isinstance(layer, ternjit.torch.BitLinear), "%s not converted: %r" % (name, layer))
            check(layer.weight_scale.numel() == 1 and layer.norm is None and layer.activation == "none", repr(layer))
            w = getattr(original, name).weight.detach()
            check(torch.equal(layer.weight, torch.clamp(torch.round(w / w.abs().mean()), -1, 1).to(torch.int8)),
                  "%s ternarization" % name)
        seen = {}
        hooks = [getattr(model, n).register_forward_hook(lambda mod, inp, out, n=n: seen.__setitem__(n, (inp[0], out)))
                 for n in ("up", "gate", "down")]
        for rows in (1, 5, 16):
            x = torch.randn(rows, 37)
            model(x)
            for n, (inp, out) in seen.items():
                layer = getattr(model, n)
                expected, magnitude, flips = bitnet_reference(inp, layer.weight, layer.weight_scale, layer.bias)
                problem = ref.compare(out.numpy(), expected.numpy(), magnitude.numpy(), flips, inp.shape[-1])
                check(problem is None, "target %s layer %s M=%d: %s" % (target, n, rows, problem))
        for h in hooks:
            h.remove()


def test_trace_and_script():
    """torch.jit.trace and torch.jit.script see the op (not a stale output buffer) and
    agree with eager mode on inputs they were not traced with; both save and load."""
    _, model = converted_model()
    x0, x1 = torch.randn(4, 37), torch.randn(7, 37)
    eager = model(x1)
    traced = torch.jit.trace(model, x0)
    check("ternjit::bitlinear" in str(traced.inlined_graph), "the op is not in the traced graph")
    check(torch.equal(traced(x1), eager), "traced module differs from eager on a new input")
    # The graph must not return one buffer twice (the old module traced a torch.empty).
    a, b = traced(x1), traced(x1)
    check(a.data_ptr() != b.data_ptr() and torch.equal(a, b), "the traced graph reuses its output buffer")
    scripted = torch.jit.script(model)
    check("ternjit::bitlinear" in str(scripted.inlined_graph), "the op is not in the scripted graph")
    check(torch.equal(scripted(x1), eager), "scripted module differs from eager")
    for m in (traced, scripted):
        blob = io.BytesIO()
        torch.jit.save(m, blob)
        blob.seek(0)
        check(torch.equal(torch.jit.load(blob)(x1), eager), "a saved and loaded module differs")
    # A module with a callable activation traces (it is applied in torch after the op).
    layer = ternjit.torch.BitLinear(model.down.weight, model.down.weight_scale, activation=torch.nn.functional.silu,
                                    engine=ternjit.Engine(target="reference"))
    x2 = torch.randn(3, 45)
    check(torch.equal(torch.jit.trace(layer, x2)(x2), torch.nn.functional.silu(model.down(x2))), "callable activation")


def test_meta_shapes():
    _, model = converted_model()
    y = model(torch.empty(2, 3, 37, device="meta"))
    check(y.device.type == "meta" and tuple(y.shape) == (2, 3, 29), "meta: %s" % (y,))
    y16 = model.up(torch.empty(4, 37, device="meta", dtype=torch.float16))
    check(y16.dtype == torch.float16 and tuple(y16.shape) == (4, 45), "meta dtype: %s" % (y16,))


def test_outputs_are_fresh_and_weights_rebind():
    _, model = converted_model()
    layer = model.down
    x = torch.randn(3, 45)
    a, b = layer(x), layer(x)
    check(a.data_ptr() != b.data_ptr() and torch.equal(a, b), "an output buffer was reused")
    a.fill_(7)
    check(not torch.equal(layer(x), a), "writing an old output changed the next one")
    # In-place changes to a buffer are seen (the version counter moves).
    with torch.no_grad():
        layer.weight.neg_()
    check(torch.allclose(layer(x), -b, rtol=0, atol=1e-6), "an in-place weight change was not seen")
    other = ternjit.torch.BitLinear(torch.zeros_like(layer.weight), torch.ones(1),
                                    engine=ternjit.Engine(target="reference"))
    other.load_state_dict(layer.state_dict())
    check(torch.equal(other(x), layer(x)), "load_state_dict did not rebind")


def pack_hf(values):
    """transformers' pack_weights: int [out, in] in {-1,0,1} -> uint8 [ceil(out/4), in]."""
    out = values.shape[0]
    rows = (out + 3) // 4
    unpacked = (values + 1).to(torch.uint8)
    packed = torch.zeros((rows,) + tuple(values.shape[1:]), dtype=torch.uint8)
    for i in range(min(4, out // rows + 1)):
        start, end = i * rows, min((i + 1) * rows, out)
        packed[: end - start] |= unpacked[start:end] << (2 * i)
    return packed


class HFBitLinear(torch.nn.Module):
    """The layout and forward of transformers' integrations/bitnet.py BitLinear: packed uint8
    weights, weight_scale that the output is divided by, per-token int8 activation quant."""

    def __init__(self, values, weight_scale, bias=None):
        super().__init__()
        self.out_features, self.in_features = values.shape
        self.register_buffer("weight", pack_hf(values))
        self.register_buffer("weight_scale", torch.tensor([weight_scale], dtype=torch.float32))
        self.bias = None if bias is None else torch.nn.Parameter(bias)
        self.rms_norm = None

    def forward(self, x):
        w = torch.cat([(self.weight >> (2 * i)) & 3 for i in range(4)], dim=0)[: self.out_features].float() - 1
        scale = 127.0 / x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5)
        xq = (x * scale).round().clamp(-128, 127)
        y = torch.nn.functional.linear(xq, w) / (self.weight_scale * scale)
        return y if self.bias is None else y + self.bias


HFBitLinear.__name__ = "BitLinear"


def test_convert_hf_style_bitlinear():
    gen = torch.Generator().manual_seed(12)
    values = torch.randint(-1, 2, (29, 45), generator=gen)
    hf = HFBitLinear(values, 1.0 / 0.037, torch.randn(29, generator=gen))
    model = torch.nn.Sequential(hf, torch.nn.ReLU())
    x = torch.randn(6, 45, generator=gen)
    expected_model = model(x).detach()
    ternjit.torch.convert(model, engine=ternjit.Engine(target="reference"))
    layer = model[0]
    check(isinstance(layer, ternjit.torch.BitLinear), "not converted: %r" % (layer,))
    check(torch.equal(layer.weight, values.to(torch.int8)), "unpacked weights differ")
    expected, magnitude, flips = bitnet_reference(x, layer.weight, layer.weight_scale, layer.bias)
    problem = ref.compare(layer(x).numpy(), expected.numpy(), magnitude.numpy(), flips, 45)
    check(problem is None, "HF-style layer: %s" % problem)
    problem = ref.compare(model(x).numpy(), expected_model.numpy(), magnitude.numpy(), flips, 45)
    check(problem is None, "against the HF-style module's own forward: %s" % problem)


def test_compile_and_export_need_torch2():
    """torch.compile and torch.export do not exist before torch 2: tests/python/test_torch2.py
    runs them (and reports SKIPPED here); this only pins that the op's schema is functional."""
    schema = str(torch.ops.ternjit.bitlinear.default._schema)
    check("Tensor(a" not in schema and schema.endswith("-> Tensor"), schema)


def test_cuda_tensors():
    """CUDA tensors run on the cuda target in place (launch on torch's current stream).
    Without a CUDA device (torch without CUDA, or no driver) what can be checked is that
    the op has a CUDA kernel, that it refuses (unavailable) with the reason, and that the
    launch path of a CPU kernel is UNSUPPORTED."""
    check(torch._C._dispatch_has_kernel_for_dispatch_key("ternjit::bitlinear", "CUDA"), "no CUDA kernel registered")
    gen = torch.Generator().manual_seed(9)
    x, weight, gamma, scale = random_layer(gen, 3, 16, 8)
    engine = ternjit.Engine(target="reference")
    program = engine.compile(ternjit.torch.bitlinear_source(False, False, "none", 1e-5), "<t>")
    program.bind("BitLinear.w", weight.t().contiguous().numpy(), dtype="t2")
    program.bind("BitLinear.w_scale", scale.numpy())
    kernel = program.kernel("BitLinear.forward", ternjit.TensorSpec((3, 16), "f32"))
    for fn in (kernel.device_handles, lambda: kernel.launch_pointers(0, [0, 0])):
        try:
            fn()
            check(False, "a CPU kernel accepted the framework launch path")
        except ternjit.Error as e:
            check(e.status == ternjit.UNSUPPORTED, "status %s: %s" % (e.status_name, e.message))
    if not (torch.cuda.is_available() and ternjit.has_feature("target:cuda")):
        if ternjit.has_feature("target:cuda"):
            return  # the cuda target without a device: its kernel would fail at launch, not here
        try:  # the CUDA kernel itself, called as the dispatcher would on CUDA tensors
            op = torch.ops.ternjit.bitlinear.default
            op.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA), x, weight, scale, None, None, 1e-5,
                          "none", "")
            check(False, "no error without the cuda target")
        except RuntimeError as e:
            check("needs the cuda target" in str(e) and "unavailable" in str(e), str(e))
        return
    # On a CUDA machine: the op on CUDA tensors matches the CPU op.
    want = ternjit.torch.bitlinear(x, weight, scale, None, gamma, 1e-5, "relu", "")
    got = ternjit.torch.bitlinear(x.cuda(), weight.cuda(), scale.cuda(), None, gamma.cuda(), 1e-5, "relu",
                                  "")
    check(got.device.type == "cuda", str(got.device))
    check(torch.allclose(got.cpu(), want, rtol=1e-5, atol=1e-5), "CUDA result differs from the CPU op")


if __name__ == "__main__":
    torch.set_num_threads(1)
    harness.run([test_bitlinear_matches_torch, test_module_behaves_like_a_torch_module, test_errors,
                 test_convert_matches_bitnet_float, test_trace_and_script, test_meta_shapes,
                 test_outputs_are_fresh_and_weights_rebind, test_convert_hf_style_bitlinear,
                 test_compile_and_export_need_torch2, test_cuda_tensors])

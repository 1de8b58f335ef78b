# SPDX-License-Identifier: Apache-2.0
# torch.py - PyTorch integration: the ternjit::bitlinear custom op, the BitLinear module and convert().
"""PyTorch integration (CPU tensors, and CUDA tensors where the cuda target is available;
Debian's python3-torch, 1.13 or later).

Importing this module registers the custom op ``torch.ops.ternjit.bitlinear`` with
``torch.library`` (a CPU kernel that runs a ternjit-compiled layer, a CUDA kernel, and a
Meta kernel for shape propagation)::

    ternjit::bitlinear(Tensor x, Tensor weight, Tensor weight_scale, Tensor? bias,
                       Tensor? norm_weight, float norm_eps, str activation, str engine) -> Tensor

computing, for ``x[..., K]`` and ``weight`` int8 ``[N, K]`` in {-1, 0, 1} (the
``nn.Linear`` layout)::

    h = rmsnorm(x, norm_weight, norm_eps)      if norm_weight is given, else x
    q = quantize_int8(h)                       per token: s = max|h|/127, round half to even
    y = (q @ weight.T) * weight_scale (+ bias) weight_scale: one value (per tensor) or [N]
    return activation(y)                       "none", "relu", "gelu" (erf), "silu", "sigmoid", "tanh"

which is BitNet b1.58's BitLinear (per-tensor absmean weight scale, per-token int8
absmax activation quantization) when ``norm_weight`` is None, ``weight_scale`` is the
weights' mean absolute value and ``activation`` is "none". The only difference from
BitNet's own float code: a row with ``max|x| < 1e-5`` is scaled by its own max (BitNet
clamps the max at 1e-5), so both are approximations of the row on different grids.

Because it is a registered op, ``torch.jit.trace`` records it, ``torch.jit.script``
compiles calls to it, and scripted or traced modules save and load (the loading process
must ``import ternjit.torch``). ``torch.compile`` and ``torch.export`` need torch 2; the
op declares no aliasing and allocates its output on every call, which is what they
require. The result has no ``grad_fn`` (inference only).

:class:`BitLinear` is an ``nn.Module`` around the op; :func:`convert` replaces a model's
``nn.Linear`` layers (ternarized with BitNet's absmean rule) and HF-style packed
``BitLinear`` layers with it.

On CUDA tensors the op runs in place on the device: the layer is compiled by the
``cuda`` target (the op's engine options with ``target="cuda"`` and
``cuda.device=<x's device index>``), its weights are uploaded once per program, and the
kernel is enqueued on ``torch.cuda.current_stream()`` reading ``x`` and writing a fresh
output through their data pointers (``Kernel.launch_pointers``): no host copy and no
synchronization. Where the cuda target is unavailable the CUDA kernel raises
:class:`ternjit.Error` (UNAVAILABLE) saying why. Concurrent calls of one layer on several
streams are serialized by a lock (a kernel owns its scratch buffers).

Compiled programs are cached per (engine, configuration, parameter tensors): a parameter
is identified by its data pointer, shape, strides, dtype and version counter, and the
cache holds only weak references, so changing a parameter in place (``load_state_dict``,
``copy_``) or replacing it recompiles, and a dead tensor drops its program.
"""

import json
import threading
import weakref

import torch
from torch.library import Library

import ternjit

#: Activations fused into the kernel (the .tri built-ins of the same names).
ACTIVATIONS = ("none", "relu", "gelu", "silu", "sigmoid", "tanh")

_SCHEMA = ("bitlinear(Tensor x, Tensor weight, Tensor weight_scale, Tensor? bias, Tensor? norm_weight, "
           "float norm_eps, str activation, str engine) -> Tensor")


def bitlinear_source(norm, bias, activation, eps=1e-5):
    """The ``.tri`` layer the op compiles for one configuration (weights [K, N] in the layer)."""
    if activation not in ACTIVATIONS:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "unknown activation '%s' (expected one of %s)" %
                            (activation, ", ".join(ACTIVATIONS)))
    lines = ["layer BitLinear {"]
    if norm:
        lines.append("    param gamma: Tensor[K]")
    lines += ["    param w: TernaryTensor[K, N]", "    param w_scale: Tensor[N]"]
    if bias:
        lines.append("    param bias: Tensor[N]")
    lines.append("    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {")
    if norm:
        lines.append("        let h = rmsnorm(x, gamma, %r)" % float(eps))
        lines.append("        let q = quantize_int8(h)")
    else:
        lines.append("        let q = quantize_int8(x)")
    lines.append("        let y = q @ w")
    lines.append("        let z = y * w_scale" + (" + bias" if bias else ""))
    lines.append("        return %s" % ("z" if activation == "none" else activation + "(z)"))
    lines += ["    }", "}", ""]
    return "\n".join(lines)


#: The layer of tests/dsl/bitlinear.tri (rmsnorm 1e-5, per-channel scale, relu), without comments.
BITLINEAR_SOURCE = """\
layer BitLinear {
    param gamma: Tensor[K]
    param w: TernaryTensor[K, N]
    param w_scale: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        let h = rmsnorm(x, gamma, 1e-5)
        let q = quantize_int8(h)
        let y = q @ w
        return relu(y * w_scale)
    }
}
"""

#: The rmsnorm epsilon of :data:`BITLINEAR_SOURCE`.
EPS = 1e-5

# ------------------------------------------------------------------------ engines

_lock = threading.Lock()
_engines = {}  # key -> Engine


def engine_key(engine):
    """The ``engine`` string the op takes for ``engine`` (None: ``Engine.from_env()``).

    The key is the engine's options as JSON, so a traced or scripted graph that names it
    recreates an equal engine in another process; in this one the first engine registered
    under a key runs it (engines with equal options compile alike)."""
    key = "" if engine is None or engine.options.get("from_env") else json.dumps(engine.options, sort_keys=True)
    if engine is not None:
        with _lock:
            current = _engines.get(key)
            if current is None or current.closed:
                _engines[key] = engine
    return key


def _require_cuda_target():
    if not ternjit.has_feature("target:cuda"):
        try:  # the reason, from the library itself
            ternjit.Engine(target="cuda")
        except ternjit.Error as e:
            raise ternjit.Error(ternjit.UNAVAILABLE, "bitlinear on CUDA tensors needs the cuda target: %s" %
                                e.message) from None


def _cuda_engine_for(key, device_index):
    """The engine of the op's `key` retargeted to the cuda target on device `device_index`."""
    cuda_key = "%s|cuda:%d" % (key, device_index)
    with _lock:
        engine = _engines.get(cuda_key)
        if engine is not None and not engine.closed:
            return engine
    _require_cuda_target()
    options = {} if key == "" else json.loads(key)
    options.pop("from_env", None)
    options["target"] = "cuda"
    extra = "cuda.device=%d" % device_index
    given = options.get("target_options")
    options["target_options"] = extra if not given else given + ";" + extra
    engine = ternjit.Engine(**options)
    with _lock:
        return _engines.setdefault(cuda_key, engine)


def _engine_for(key):
    with _lock:
        engine = _engines.get(key)
        if engine is None or engine.closed:
            if key == "":
                engine = ternjit.Engine.from_env()
            else:
                try:
                    engine = ternjit.Engine(**json.loads(key))
                except (ValueError, TypeError) as e:
                    raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bad ternjit engine key %r: %s" % (key, e)) from None
            _engines[key] = engine
        return engine


# ------------------------------------------------------------------------ programs

class _Entry:
    """One compiled configuration with its parameters bound, and its kernels per row count."""

    def __init__(self, program, refs, versions, n, k):
        self.program = program
        self.refs = refs
        self.versions = versions
        self.kernels = {}
        self.n = n
        self.k = k

    def alive(self, tensors):
        for ref, version, t in zip(self.refs, self.versions, tensors):
            if (ref is None) != (t is None):
                return False
            if t is not None and (ref() is None or t._version != version):
                return False
        return True


_programs = {}  # key -> _Entry


def _identity(t):
    if t is None:
        return None
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype), str(t.device))


def _drop(key):
    with _lock:
        _programs.pop(key, None)


def _as_f32(t, what, numel=None, devices=("cpu",)):
    if not isinstance(t, torch.Tensor) or t.device.type not in devices or not t.is_floating_point():
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: %s must be a floating %s tensor, got %s" %
                            (what, " or ".join(d.upper() for d in devices), _describe(t)))
    # Parameters are bound from host copies (ternjit uploads them to the device once).
    flat = t.detach().to(torch.float32).reshape(-1).cpu().contiguous()
    if numel is not None and flat.numel() != numel:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: %s must have %d values, got %s" %
                            (what, numel, list(t.shape)))
    return flat


def _describe(t):
    if isinstance(t, torch.Tensor):
        return "%s%s on %s" % (str(t.dtype).replace("torch.", ""), list(t.shape), t.device)
    return type(t).__name__


def _check_weight(weight, devices=("cpu",)):
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or weight.dtype != torch.int8 \
            or weight.device.type not in devices:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT,
                            "bitlinear: weight must be an int8 %s tensor [out_features, in_features] of "
                            "{-1, 0, 1}, got %s" % (" or ".join(d.upper() for d in devices), _describe(weight)))


def _entry(x_features, weight, weight_scale, bias, norm_weight, norm_eps, activation, engine, cuda_device=None):
    """The compiled configuration; `cuda_device` (an index): on the cuda target on that device."""
    devices = ("cpu",) if cuda_device is None else ("cpu", "cuda")
    _check_weight(weight, devices)
    n, k = (int(d) for d in weight.shape)
    if x_features != k:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear expects x[..., %d], got x[..., %d]" % (k, x_features))
    tensors = (weight, weight_scale, bias, norm_weight)
    key = (engine, cuda_device, activation, float(norm_eps)) + tuple(_identity(t) for t in tensors)
    with _lock:
        entry = _programs.get(key)
    if entry is not None and entry.alive(tensors):
        return entry
    scale = _as_f32(weight_scale, "weight_scale", devices=devices)
    if scale.numel() == 1:
        scale = scale.expand(n).contiguous()
    elif scale.numel() != n:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: weight_scale must have 1 or %d (out_features) "
                                                      "values, got %s" % (n, list(weight_scale.shape)))
    if weight.numel() and (int(weight.min()) < -1 or int(weight.max()) > 1):
        raise ternjit.Error(ternjit.INVALID_INPUT, "bitlinear: weight has values outside {-1, 0, 1} (range [%d, %d])"
                            % (int(weight.min()), int(weight.max())))
    eng = _engine_for(engine) if cuda_device is None else _cuda_engine_for(engine, cuda_device)
    program = eng.compile(bitlinear_source(norm_weight is not None, bias is not None, activation, norm_eps),
                          "<ternjit::bitlinear>")
    # [out, in] -> the layer's w[K, N]; ternjit copies what it binds.
    program.bind("BitLinear.w", weight.detach().t().cpu().contiguous().numpy(), dtype="t2")
    program.bind("BitLinear.w_scale", scale.numpy())
    if bias is not None:
        program.bind("BitLinear.bias", _as_f32(bias, "bias", n, devices).numpy())
    if norm_weight is not None:
        program.bind("BitLinear.gamma", _as_f32(norm_weight, "norm_weight", k, devices).numpy())
    refs = [None if t is None else weakref.ref(t, lambda _ref, key=key: _drop(key)) for t in tensors]
    entry = _Entry(program, refs, [None if t is None else t._version for t in tensors], n, k)
    with _lock:
        _programs[key] = entry
    return entry


def _bitlinear_cpu(x, weight, weight_scale, bias, norm_weight, norm_eps, activation, engine):
    if x.dim() < 1:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: x must have at least one dimension")
    entry = _entry(int(x.shape[-1]), weight, weight_scale, bias, norm_weight, norm_eps, activation, engine)
    out_dtype = x.dtype if x.is_floating_point() else torch.float32
    x2 = x.detach().reshape(-1, entry.k).to(torch.float32).contiguous()
    rows = int(x2.shape[0])
    # A fresh output every call: nothing a caller (or a traced graph) holds is ever reused.
    y = torch.empty((rows, entry.n), dtype=torch.float32)
    if rows > 0:
        with _lock:
            kernel = entry.kernels.get(rows)
        if kernel is None:
            kernel = entry.program.kernel("BitLinear.forward", ternjit.TensorSpec((rows, entry.k), "f32"))
            with _lock:
                entry.kernels[rows] = kernel
        kernel.call_pointers([x2.data_ptr(), y.data_ptr()])
    return y.reshape(tuple(x.shape[:-1]) + (entry.n,)).to(out_dtype)


def _bitlinear_cuda(x, weight, weight_scale, bias, norm_weight, norm_eps, activation, engine):
    """The op on a CUDA tensor `x`: the cuda target's kernel enqueued on torch's current
    stream on x's and a fresh output's device memory (untested without a CUDA device)."""
    if x.dim() < 1:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: x must have at least one dimension")
    _require_cuda_target()
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    entry = _entry(int(x.shape[-1]), weight, weight_scale, bias, norm_weight, norm_eps, activation, engine, index)
    out_dtype = x.dtype if x.is_floating_point() else torch.float32
    x2 = x.detach().reshape(-1, entry.k).to(torch.float32).contiguous()
    if x2.data_ptr() % 16 != 0:  # a view at an odd offset: the kernels load 16 bytes at a time
        x2 = x2.clone()
    rows = int(x2.shape[0])
    y = torch.empty((rows, entry.n), dtype=torch.float32, device=x.device)
    if rows > 0:
        with _lock:
            kernel = entry.kernels.get(rows)
        if kernel is None:
            kernel = entry.program.kernel("BitLinear.forward", ternjit.TensorSpec((rows, entry.k), "f32"))
            with _lock:
                entry.kernels[rows] = kernel
        stream = torch.cuda.current_stream(x.device)
        # One launch of a kernel at a time: it owns its scratch buffers. Stream order does
        # the rest (x2 and y are allocated on this stream by the caching allocator).
        with _lock:
            kernel.launch_pointers(stream.cuda_stream, [x2.data_ptr(), y.data_ptr()])
    return y.reshape(tuple(x.shape[:-1]) + (entry.n,)).to(out_dtype)


def _bitlinear_meta(x, weight, weight_scale, bias, norm_weight, norm_eps, activation, engine):
    out_dtype = x.dtype if x.is_floating_point() else torch.float32
    return x.new_empty(tuple(x.shape[:-1]) + (weight.shape[0],), dtype=out_dtype)


_library = Library("ternjit", "DEF")
_library.define(_SCHEMA)
_library.impl("bitlinear", _bitlinear_cpu, "CPU")
_library.impl("bitlinear", _bitlinear_cuda, "CUDA")
_library.impl("bitlinear", _bitlinear_meta, "Meta")
# torch 1.13 registers no autograd fallthrough for meta tensors.
_library.impl("bitlinear", _bitlinear_meta, "AutogradMeta")

#: The registered op.
bitlinear = torch.ops.ternjit.bitlinear

# ------------------------------------------------------------------------ modules


class _Call(torch.nn.Module):
    """Wraps a plain callable so it can sit in a module tree (traceable, not scriptable)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def absmean_ternarize(w, per="tensor"):
    """BitNet b1.58's weight quantization: ``scale = mean|W|`` (per tensor, or per output
    row with ``per="channel"``), clamped at 1e-5, and ``clamp(round(W / scale), -1, 1)``.
    Returns (int8 ternary [out, in], float32 scale [] or [out])."""
    w = w.detach().to(torch.float32)
    if per == "tensor":
        scale = w.abs().mean().clamp(min=1e-5)
        q = torch.clamp(torch.round(w / scale), -1, 1)
    elif per == "channel":
        scale = w.abs().mean(dim=1).clamp(min=1e-5)
        q = torch.clamp(torch.round(w / scale[:, None]), -1, 1)
    else:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "scale granularity must be 'tensor' or 'channel', got %r" % per)
    return q.to(torch.int8), scale


class BitLinear(torch.nn.Module):
    """A ternary linear layer run by ternjit through ``torch.ops.ternjit.bitlinear``.

    Args:
        weight: ternary weights ``[out_features, in_features]`` (the ``nn.Linear`` layout),
            an integer tensor of {-1, 0, 1}.
        weight_scale: one value (per-tensor, BitNet b1.58) or ``[out_features]``.
        bias: optional ``[out_features]``, added after the scale.
        norm: optional rmsnorm gain ``[in_features]``, applied to x before quantization
            (BitNet's SubLN normalization, when a model keeps it inside the layer).
        norm_eps: the rmsnorm epsilon.
        activation: ``None`` / "none", a fused activation from :data:`ACTIVATIONS`, or any
            callable (an ``nn.Module`` stays scriptable), applied to the result in torch.
        engine: a :class:`ternjit.Engine` (default: ``Engine.from_env()``).

    The tensors are buffers (``state_dict``, ``.to()``, ``load_state_dict`` work; a changed
    buffer recompiles on the next call). Raises :class:`ternjit.Error` for non-ternary
    weights or mismatched shapes.
    """

    def __init__(self, weight, weight_scale, bias=None, *, norm=None, norm_eps=1e-5, activation=None, engine=None):
        super().__init__()
        weight = torch.as_tensor(weight)
        if weight.dim() != 2:
            raise ternjit.Error(ternjit.INVALID_ARGUMENT,
                                "BitLinear weight must be [out_features, in_features], got %s" % list(weight.shape))
        if weight.is_floating_point() or weight.is_complex():
            raise ternjit.Error(ternjit.INVALID_ARGUMENT,
                                "BitLinear weight must be an integer tensor of {-1, 0, 1}, got %s" % weight.dtype)
        if weight.numel() and (int(weight.min()) < -1 or int(weight.max()) > 1):
            raise ternjit.Error(ternjit.INVALID_INPUT, "BitLinear weight has values outside {-1, 0, 1} (range [%d, %d])"
                                % (int(weight.min()), int(weight.max())))
        out_features, in_features = (int(d) for d in weight.shape)
        weight_scale = torch.as_tensor(weight_scale, dtype=torch.float32).detach()
        if weight_scale.numel() not in (1, out_features):
            raise ternjit.Error(ternjit.INVALID_ARGUMENT, "BitLinear weight_scale must have 1 or %d (out_features) "
                                "values, got %s" % (out_features, list(weight_scale.shape)))
        for what, t, n in (("bias", bias, out_features), ("norm", norm, in_features)):
            if t is not None and torch.as_tensor(t).numel() != n:
                raise ternjit.Error(ternjit.INVALID_ARGUMENT, "BitLinear %s must be [%d], got %s" %
                                    (what, n, list(torch.as_tensor(t).shape)))
        self.in_features = in_features
        self.out_features = out_features
        self.register_buffer("weight", weight.detach().to(torch.int8).contiguous().clone())
        self.register_buffer("weight_scale", weight_scale.reshape(-1).contiguous().clone())
        self.register_buffer("bias", None if bias is None else
                             torch.as_tensor(bias, dtype=torch.float32).detach().reshape(-1).contiguous().clone())
        self.register_buffer("norm", None if norm is None else
                             torch.as_tensor(norm, dtype=torch.float32).detach().reshape(-1).contiguous().clone())
        self.norm_eps = float(norm_eps)
        if activation is None or isinstance(activation, str):
            name = "none" if activation is None else activation
            if name not in ACTIVATIONS:
                raise ternjit.Error(ternjit.INVALID_ARGUMENT, "unknown activation '%s' (expected one of %s, or a "
                                    "callable)" % (name, ", ".join(ACTIVATIONS)))
            self.activation = name
            self.post = torch.nn.Identity()
        else:
            self.activation = "none"
            self.post = activation if isinstance(activation, torch.nn.Module) else _Call(activation)
        self.engine = engine
        self.engine_key = engine_key(engine)

    @classmethod
    def from_linear(cls, linear, per="tensor", norm=None, norm_eps=1e-5, activation=None, engine=None):
        """Ternarizes a ``torch.nn.Linear`` with :func:`absmean_ternarize` (per tensor by
        default, as BitNet b1.58); its bias is kept."""
        weight, scale = absmean_ternarize(linear.weight, per)
        bias = None if linear.bias is None else linear.bias.detach()
        return cls(weight, scale, bias, norm=norm, norm_eps=norm_eps, activation=activation, engine=engine)

    def forward(self, x):
        """``x[..., in_features]`` (CPU) -> ``[..., out_features]`` in x's floating dtype."""
        y = torch.ops.ternjit.bitlinear(x, self.weight, self.weight_scale, self.bias, self.norm, self.norm_eps,
                                        self.activation, self.engine_key)
        return self.post(y)

    def __setstate__(self, state):
        super().__setstate__(state)
        engine_key(self.engine)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, scale=%s, bias=%s, norm=%s, activation=%s" % (
            self.in_features, self.out_features, "tensor" if self.weight_scale.numel() == 1 else "channel",
            self.bias is not None, self.norm is not None, self.activation)


# ------------------------------------------------------------------------ convert

def unpack_hf_weight(packed, out_features):
    """The ternary values of a HF-style packed BitLinear weight: uint8 ``[ceil(out/4), in]``,
    value ``v + 1`` of row ``r`` in bits ``2 * (r // rows)`` of byte row ``r % rows``
    (transformers' ``pack_weights``). Returns int8 ``[out_features, in]``."""
    packed = packed.detach().to(torch.uint8)
    rows = packed.shape[0]
    planes = [((packed >> (2 * i)) & 3) for i in range(4)]
    values = torch.cat(planes, dim=0)[:out_features].to(torch.int8) - 1
    if values.shape[0] != out_features:
        raise ternjit.Error(ternjit.INVALID_INPUT, "packed weight of %d rows cannot hold %d output features" %
                            (rows, out_features))
    if values.numel() and int(values.max()) > 1:
        raise ternjit.Error(ternjit.INVALID_INPUT, "packed weight holds the code 3 (no ternary value)")
    return values


def _is_hf_bitlinear(module):
    """A module laid out like transformers' BitLinear: a packed uint8 ``weight`` and a
    ``weight_scale`` the output is divided by."""
    return type(module).__name__ in ("BitLinear", "AutoBitLinear") and hasattr(module, "weight_scale") \
        and isinstance(getattr(module, "weight", None), torch.Tensor) and module.weight.dtype == torch.uint8


def _from_hf(module, engine):
    out_features = int(getattr(module, "out_features", 0) or 4 * module.weight.shape[0])
    weight = unpack_hf_weight(module.weight, out_features)
    # transformers divides the integer product by weight_scale: the dequantized weight is w / weight_scale.
    scale = 1.0 / module.weight_scale.detach().to(torch.float32).reshape(-1)
    bias = None if getattr(module, "bias", None) is None else module.bias.detach()
    norm, eps = None, 1e-5
    rms = getattr(module, "rms_norm", None)
    if rms is not None:
        norm = rms.weight.detach()
        eps = float(getattr(rms, "variance_epsilon", getattr(rms, "eps", 1e-5)))
    return BitLinear(weight, scale, bias, norm=norm, norm_eps=eps, engine=engine)


def convert(model, per="tensor", engine=None, skip=()):
    """Replaces, in place and recursively, every ``nn.Linear`` of ``model`` by
    :meth:`BitLinear.from_linear` (BitNet b1.58 absmean ternarization) and every HF-style
    packed ``BitLinear``/``AutoBitLinear`` by an equivalent :class:`BitLinear`. Modules whose
    qualified name is in ``skip`` (e.g. ``"lm_head"``) are left alone. Returns ``model``
    (a bare ``nn.Linear`` is returned converted)."""
    skip = set(skip)
    if isinstance(model, torch.nn.Linear) or _is_hf_bitlinear(model):
        return _convert_one(model, per, engine)
    for name, child in list(model.named_modules()):
        for child_name, sub in list(child.named_children()):
            qualified = (name + "." if name else "") + child_name
            if qualified in skip or isinstance(sub, BitLinear):
                continue
            if isinstance(sub, torch.nn.Linear) or _is_hf_bitlinear(sub):
                setattr(child, child_name, _convert_one(sub, per, engine))
    return model


def _convert_one(module, per, engine):
    if _is_hf_bitlinear(module):
        return _from_hf(module, engine)
    return BitLinear.from_linear(module, per=per, engine=engine)


# ------------------------------------------------------------------------ training (QAT)

def qat_linear_source(bias, activation, ste_clip=None):
    """The ``.tri`` layer :class:`QATLinear` compiles: BitNet b1.58's BitLinear on latent
    float weights passed per call (they change every optimizer step)::

        y = activation(quantize_int8(x) @ ternarize_absmean(w[, ste_clip]) (+ b))

    with ``w`` [K, N] (the transpose of ``nn.Linear``'s weight). ``ste_clip`` True/False
    writes the quantizer's STE clipping attribute; None leaves it to compile_grad."""
    if activation not in ACTIVATIONS:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "unknown activation '%s' (expected one of %s)" %
                            (activation, ", ".join(ACTIVATIONS)))
    args = "x: Tensor[M, K], w: Tensor[K, N]" + (", b: Tensor[N]" if bias else "")
    clip = "" if ste_clip is None else (", 1" if ste_clip else ", 0")
    z = "quantize_int8(x) @ ternarize_absmean(w%s)" % clip + (" + b" if bias else "")
    body = z if activation == "none" else "%s(%s)" % (activation, z)
    return "layer QATLinear {\n    fn forward(%s) -> Tensor[M, N] {\n        return %s\n    }\n}\n" % (args, body)


_qat_programs = {}  # (engine key, bias, activation, ste_clip, int8_dx, int8_dw) -> Program


def _qat_program(engine_name, bias, activation, ste_clip, int8_dx=False, int8_dw=False):
    key = (engine_name, bias, activation, ste_clip, int8_dx, int8_dw)
    with _lock:
        program = _qat_programs.get(key)
    if program is None or program.closed:
        engine = _engine_for(engine_name)
        wrt = ["x", "w"] + (["b"] if bias else [])
        # The clipping is the quantizer's attribute in the source (the pass default unused).
        program = engine.compile_grad(qat_linear_source(bias, activation, ste_clip), "QATLinear.forward", wrt=wrt,
                                      file_name="qat_linear.tri", int8_dx=int8_dx, int8_dw=int8_dw)
        with _lock:
            _qat_programs[key] = program
    return program


class _QATLinearFunction(torch.autograd.Function):
    """Forward and backward of :class:`QATLinear` through ternjit's ``.fwd``/``.bwd``."""

    @staticmethod
    def forward(ctx, x, weight, bias, activation, ste_clip, engine_name, int8_dx, int8_dw):
        program = _qat_program(engine_name, bias is not None, activation, ste_clip, int8_dx, int8_dw)
        lead = x.shape[:-1]
        x2 = x.detach().to(torch.float32).reshape(-1, x.shape[-1]).contiguous().numpy()
        w = weight.detach().to(torch.float32).t().contiguous().numpy()
        args = [x2, w] + ([bias.detach().to(torch.float32).contiguous().numpy()] if bias is not None else [])
        outs = program.run("QATLinear.forward.fwd", *args)
        outs = outs if isinstance(outs, list) else [outs]
        specs = program.kernel("QATLinear.forward.fwd", *args).outputs
        # The saved tensors go back to .bwd as they came (a ternary one as "t2").
        ctx.program, ctx.args = program, args
        ctx.saved_outs = [(a, spec.dtype) for a, spec in zip(outs[1:], specs[1:])]
        ctx.x_shape, ctx.x_dtype = x.shape, x.dtype
        return torch.from_numpy(outs[0]).reshape(*lead, w.shape[1]).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        dy = grad_out.detach().to(torch.float32).reshape(-1, grad_out.shape[-1]).contiguous().numpy()
        grads = ctx.program.run("QATLinear.forward.bwd", *ctx.args, dy, *ctx.saved_outs)
        dx = torch.from_numpy(grads[0]).reshape(ctx.x_shape).to(ctx.x_dtype)
        dw = torch.from_numpy(grads[1]).t().contiguous()
        db = torch.from_numpy(grads[2]) if len(grads) > 2 else None
        return dx, dw, db, None, None, None, None, None


class QATLinear(torch.nn.Module):
    """A BitNet b1.58 linear layer for quantization-aware training: latent float
    ``weight`` [out_features, in_features] (and ``bias``) are trained; the forward runs
    ``activation(quantize_int8(x) @ ternarize_absmean(weight).T + bias)`` and the backward
    its straight-through gradients, both compiled by ternjit (``Engine.compile_grad``).
    ``loss.backward()`` gives the gradients torch's float model with STE
    (``x + (q(x) - x).detach()``) gives; ``ste_clip`` zeroes the weight gradient where
    ``|w| > mean|w|``. ``int8_dx=True`` opts in to a faster, lower-precision input
    gradient (the incoming gradient quantized to int8 per row), ``int8_dw=True`` to a
    faster, lower-precision weight gradient (an exact int8 x int8 matmul of the int8
    activations and the incoming gradient quantized per output column); both off: exact. Without autograd (``torch.no_grad()``, or nothing requiring a gradient) the
    forward runs the plain function: no saved tensors are produced. Export the trained
    layer with :meth:`to_bitlinear`."""

    def __init__(self, in_features, out_features, bias=True, activation="none", ste_clip=False, engine=None,
                 int8_dx=False, int8_dw=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None
        torch.nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        qat_linear_source(bias, activation)  # validates the activation
        self.activation = activation
        self.ste_clip = bool(ste_clip)
        self.int8_dx = bool(int8_dx)
        self.int8_dw = bool(int8_dw)
        self.engine = engine_key(engine)

    def forward(self, x):
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad or self.weight.requires_grad or (self.bias is not None and self.bias.requires_grad))
        if needs_grad:
            return _QATLinearFunction.apply(x, self.weight, self.bias, self.activation, self.ste_clip, self.engine,
                                            self.int8_dx, self.int8_dw)
        # No backward will run: the plain forward, without the saved tensors .fwd returns.
        program = _qat_program(self.engine, self.bias is not None, self.activation, self.ste_clip, self.int8_dx,
                               self.int8_dw)
        x2 = x.detach().to(torch.float32).reshape(-1, x.shape[-1]).contiguous().numpy()
        w = self.weight.detach().to(torch.float32).t().contiguous().numpy()
        args = [x2, w] + ([self.bias.detach().to(torch.float32).contiguous().numpy()] if self.bias is not None else [])
        y = program.run("QATLinear.forward", *args)
        y = y[0] if isinstance(y, list) else y
        return torch.from_numpy(y).reshape(*x.shape[:-1], w.shape[1]).to(x.dtype)

    def to_bitlinear(self):
        """The inference layer (ternary weights, per-tensor absmean scale) this one computes."""
        w = self.weight.detach().to(torch.float32)
        scale = w.abs().mean()
        ternary = torch.clamp(torch.round(w / scale), -1, 1).to(torch.int8) if scale > 0 else torch.zeros_like(w, dtype=torch.int8)
        bias = None if self.bias is None else self.bias.detach().to(torch.float32)
        return BitLinear(ternary, scale.reshape(1), bias, activation=self.activation,
                         engine=_engine_for(self.engine) if self.engine else None)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s, activation=%s, ste_clip=%s, int8_dx=%s, int8_dw=%s" % (
            self.weight.shape[1], self.weight.shape[0], self.bias is not None, self.activation, self.ste_clip,
            self.int8_dx, self.int8_dw)

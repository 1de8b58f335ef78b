# SPDX-License-Identifier: Apache-2.0
# torch.py - PyTorch integration: loads the ternjit ops' extension; BitLinear, convert() and QATLinear.
"""PyTorch integration (torch 2; CPU tensors, and CUDA tensors where the cuda target is available).

Importing this module loads ternjit's PyTorch extension (libternjit_torch.so, a C++
library registered in torch's dispatcher with ``TORCH_LIBRARY``; see :func:`extension_path`
for where it is found) which defines the custom op ``torch.ops.ternjit.bitlinear`` (a CPU
kernel that runs a ternjit-compiled layer, a CUDA kernel, a Meta kernel for shape
propagation, and an Autograd kernel)::

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
``engine`` is "" (``Engine.from_env()``) or an engine's options as JSON (:func:`engine_key`).

Because it is a registered op, ``torch.jit.trace``/``script``, ``torch.compile`` (no graph
break) and ``torch.export`` (save and load) record it; a process that loads such a graph
must ``import ternjit.torch``. The op declares no aliasing and allocates its output on
every call. It is inference only: where autograd records it (an input requires grad) the
result has a ``grad_fn`` whose backward raises a RuntimeError saying so; train with
:class:`QATLinear`. Errors of the op are torch's exceptions: ValueError for bad
arguments or weights, RuntimeError otherwise (a failure of the library ends with its
ternjit status, e.g. "(ternjit: unavailable)").

:class:`BitLinear` is an ``nn.Module`` around the op; :func:`convert` replaces a model's
``nn.Linear`` layers (ternarized with BitNet's absmean rule) and HF-style packed
``BitLinear`` layers with it. :class:`QATLinear` trains through the ops
``ternjit::qat_linear`` (its forward, with an autograd formula), ``qat_linear_fwd`` and
``qat_linear_bwd`` (the ``.fwd`` and ``.bwd`` functions of ``Engine.compile_grad``).

On CUDA tensors the op runs in place on the device: the layer is compiled by the
``cuda`` target (the op's engine options with ``target="cuda"`` and
``cuda.device=<x's device index>``), its weights are uploaded once per program, and the
kernel is enqueued on torch's current CUDA stream of x's device reading ``x`` and
writing a fresh output through their data pointers (``ternjit_kernel_launch``): no host
copy and no synchronization. Where the cuda target is unavailable the CUDA kernel raises
a RuntimeError saying why. Concurrent calls of one layer on several streams are
serialized by a lock (a kernel owns its scratch buffers).

Compiled programs are cached per (engine, configuration, parameter tensors): a parameter
is identified by its TensorImpl, data pointer, shape, strides, dtype and version counter
(inference tensors have none: change them only outside inference mode), and the cache
holds only weak references, so changing a parameter in place (``load_state_dict``,
``copy_``) or replacing it recompiles, and a dead tensor's program goes at the next
compile.
"""

import ctypes
import json
import os
import threading

import torch

import ternjit

#: Activations fused into the kernel (the .tri built-ins of the same names).
ACTIVATIONS = ("none", "relu", "gelu", "silu", "sigmoid", "tanh")


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

    The key is the engine's options as JSON, so a traced, scripted, compiled or exported
    graph that names it recreates an equal engine in another process (the extension keeps
    one engine per key; engines with equal options compile alike)."""
    key = "" if engine is None or engine.options.get("from_env") else json.dumps(engine.options, sort_keys=True)
    if engine is not None:
        with _lock:
            current = _engines.get(key)
            if current is None or current.closed:
                _engines[key] = engine
    return key


def _engine_for(key):
    """A Python :class:`ternjit.Engine` for an engine string (the one registered under it, if any)."""
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


# ------------------------------------------------------------------------ the extension

#: The file name of the PyTorch extension (python/torch_ext).
EXTENSION_NAME = "libternjit_torch.so"


def extension_path():
    """Where the extension is loaded from: ``TERNJIT_TORCH_LIBRARY`` (set by ctest), else
    ``libternjit_torch.so`` beside this package (installed there by python/CMakeLists.txt)."""
    return os.environ.get("TERNJIT_TORCH_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                    EXTENSION_NAME)


def _load_extension():
    path = extension_path()
    if not os.path.isfile(path):
        how = ("TERNJIT_TORCH_LIBRARY names %s, which does not exist" % path if os.environ.get("TERNJIT_TORCH_LIBRARY")
               else "TERNJIT_TORCH_LIBRARY is not set and there is no %s beside the package (%s)" % (EXTENSION_NAME, path))
        raise ternjit.Error(ternjit.UNAVAILABLE, "ternjit.torch needs its PyTorch extension: %s; it is built (target "
                            "ternjit_torch) and installed when the build's Python imports torch" % how)
    # libternjit first, through the package: the extension then binds to this instance
    # (the loader matches its SONAME) rather than loading a second copy.
    capi = ternjit._lib()
    try:
        torch.ops.load_library(path)
        ext = ctypes.CDLL(path)
    except OSError as e:
        raise ternjit.Error(ternjit.UNAVAILABLE, "cannot load the ternjit PyTorch extension %s: %s" % (path, e)) from None
    ext.ternjit_torch_libternjit_symbol.restype = ctypes.c_void_p
    ext.ternjit_torch_libternjit_path.restype = ctypes.c_char_p
    mine = ctypes.cast(capi.ternjit_version, ctypes.c_void_p).value
    if ext.ternjit_torch_libternjit_symbol() != mine:
        raise ternjit.Error(ternjit.UNAVAILABLE, "the ternjit PyTorch extension %s uses libternjit %s, the package %s: "
                            "set TERNJIT_LIBRARY to the library the extension was built with" %
                            (path, ext.ternjit_torch_libternjit_path().decode(), ternjit.library_path()))
    return path, ext.ternjit_torch_libternjit_path().decode()


#: (the extension's path, the path of the libternjit it and the package share).
EXTENSION = _load_extension()

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
            self.has_post = False  # skips the Identity's call: a module call is a few us of host time
        else:
            self.activation = "none"
            self.post = activation if isinstance(activation, torch.nn.Module) else _Call(activation)
            self.has_post = True
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
        if torch.jit.is_scripting():
            y = torch.ops.ternjit.bitlinear(x, self.weight, self.weight_scale, self.bias, self.norm, self.norm_eps,
                                            self.activation, self.engine_key)
        else:
            y = self._call_op(x)
        return self.post(y) if self.has_post else y

    @torch.jit.unused
    def _call_op(self, x):
        # The buffers straight from their dict: nn.Module.__getattr__ costs about 0.5 us a
        # read, most of the module's host time beside the op's.
        buffers = self._buffers
        return bitlinear(x, buffers["weight"], buffers["weight_scale"], buffers["bias"], buffers["norm"],
                         self.norm_eps, self.activation, self.engine_key)

    def __setstate__(self, state):
        super().__setstate__(state)
        if "has_post" not in self.__dict__:  # pickled before the attribute existed
            self.has_post = not isinstance(self._modules.get("post"), torch.nn.Identity)
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
        return torch.ops.ternjit.qat_linear(x, self.weight, self.bias, self.activation, self.ste_clip, self.int8_dx,
                                            self.int8_dw, self.engine)

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

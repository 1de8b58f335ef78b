# SPDX-License-Identifier: Apache-2.0
# jax.py - JAX integration: BitNet b1.58's BitLinear through XLA FFI handlers, with ternjit's straight-through gradient.
"""JAX integration (CPU; float32).

:func:`bitlinear` computes, for ``x[..., K]`` and latent float weights ``w[K, N]`` (the
layout of ``jnp.dot(x, w)`` and of flax's ``Dense`` kernel; the transpose of
``nn.Linear``'s weight)::

    y = activation(quantize_int8(x) @ ternarize_absmean(w) (+ b))

the training form of BitNet b1.58's BitLinear: per row ``s = max|x| / 127``,
``q = clip(round_half_even(x / s), -127, 127) * s``; per tensor ``g = mean|w|``,
``t = clip(round_half_even(w / g), -1, 1) * g``. The forward and the backward are ternjit
kernels run by XLA through typed FFI handlers (``libternjit_jax.so``, registered with
``jax.ffi.register_ffi_target`` and called with ``jax.ffi.ffi_call``), so the function
works under ``jax.jit``, ``jax.grad`` and ``jax.vmap``:

- ``jax.custom_vjp``: the forward of a differentiated call is ternjit's ``.fwd`` (y and the
  tensors the backward needs) and the backward its ``.bwd``, the straight-through estimator
  (``q(x) + stop_gradient``-style: dx = dz @ t.T, dw = q.T @ dz, db = sum dz with
  ``dz = dy * activation'``; ``ste_clip=True`` zeroes dw where ``|w| > mean|w|``).
- ``vmap``: a batched ``x`` (with ``w`` and ``b`` shared) folds into rows, one kernel call;
  a batched ``w`` or ``b`` runs one call per batch member (``jax.lax.map``). The backward
  uses ``vmap_method="sequential"``: each member's dw and db are their own reductions over
  its rows, so its rows cannot be folded into one call.

Layers are compiled once per configuration (activation, bias, ``ste_clip``, ``int8_dx``,
``int8_dw``) in the handler library, by an engine made from the environment
(``TERNJIT_TARGET``, ``TERNJIT_THREADS``, ... as ``Engine.from_env()``), and kernels once
per shape. The handler library is found through ``TERNJIT_JAX_LIBRARY`` (the build's
``python/jax_ext/libternjit_jax.so``; ctest sets it), else beside this module, where the
install puts it. Without it the first call raises :class:`ternjit.Error` (UNAVAILABLE)
saying why.
"""

import collections
import ctypes
import functools
import os
import threading

import numpy as np

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

import ternjit
from ternjit import _capi

__all__ = ["bitlinear", "register", "ACTIVATIONS", "TARGETS", "library_path"]

#: Activations fused into the kernels (the .tri built-ins of the same names; gelu is the erf form).
ACTIVATIONS = ("none", "relu", "gelu", "silu", "sigmoid", "tanh")

#: The FFI target names (CPU), by the layer function each runs.
TARGETS = _TARGETS = {"forward": "ternjit_bitlinear_forward", "fwd": "ternjit_bitlinear_fwd", "bwd": "ternjit_bitlinear_bwd"}
_LIBRARY_NAME = "libternjit_jax.so"

# ------------------------------------------------------------------------ the handler library


class _Output(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("rank", ctypes.c_int32), ("shape", ctypes.c_int64 * 4),
                ("per_row", ctypes.c_int32)]


class _ConfigStruct(ctypes.Structure):
    _fields_ = [("activation", ctypes.c_char_p), ("has_bias", ctypes.c_int32), ("ste_clip", ctypes.c_int32),
                ("int8_dx", ctypes.c_int32), ("int8_dw", ctypes.c_int32)]


_lock = threading.Lock()
_library = None
_library_path = None


def library_path():
    """Where the handler library is looked for (``TERNJIT_JAX_LIBRARY``, else beside this module)."""
    return os.environ.get("TERNJIT_JAX_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                 _LIBRARY_NAME)


def _handlers():
    """The handler library, loaded and its targets registered with XLA on first use."""
    global _library, _library_path
    with _lock:
        if _library is not None:
            return _library
        path = library_path()
        ternjit.library_path()  # libternjit.so first: the handler library links it by its soname
        if not os.path.exists(path):
            raise ternjit.Error(ternjit.UNAVAILABLE,
                                "ternjit.jax needs the XLA FFI handler library %s, which is not at %s: it is built "
                                "(CMake target ternjit_jax) only when the configured Python environment has jaxlib, "
                                "and installed beside the ternjit package; set TERNJIT_JAX_LIBRARY to its path"
                                % (_LIBRARY_NAME, path))
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise ternjit.Error(ternjit.UNAVAILABLE, "cannot load %s: %s" % (path, e)) from None
        lib.ternjit_jax_bitlinear_describe.restype = ctypes.c_int32
        lib.ternjit_jax_bitlinear_describe.argtypes = [
            ctypes.POINTER(_ConfigStruct), ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.POINTER(_Output), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
        lib.ternjit_jax_last_error.restype = ctypes.c_char_p
        lib.ternjit_jax_last_error.argtypes = []
        for function, target in _TARGETS.items():
            symbol = getattr(lib, "ternjit_jax_bitlinear_" + function)
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(symbol), platform="cpu")
        _library, _library_path = lib, path
        return lib


def register():
    """Loads the handler library and registers its FFI targets (:data:`TARGETS`) with XLA, as
    the first :func:`bitlinear` call does; a process running a deserialized ``jax.export``
    artifact that calls them must do this first. Returns the library's path."""
    _handlers()
    return _library_path


# ------------------------------------------------------------------------ configuration and shapes

class _Config(collections.namedtuple("_Config", ["activation", "has_bias", "ste_clip", "int8_dx", "int8_dw"])):
    """One compiled configuration of the layer (hashable: a static argument of the transforms)."""

    def attributes(self):
        """The FFI call's attributes (numpy bools become XLA PRED attributes)."""
        return {"activation": self.activation, "has_bias": np.bool_(self.has_bias),
                "ste_clip": np.bool_(self.ste_clip), "int8_dx": np.bool_(self.int8_dx),
                "int8_dw": np.bool_(self.int8_dw)}


_Spec = collections.namedtuple("_Spec", ["shape", "dtype", "per_row"])
_JNP_DTYPE = {_capi.F32: jnp.float32, _capi.T2: jnp.int8, _capi.I8: jnp.int8, _capi.I32: jnp.int32}


@functools.lru_cache(maxsize=None)
def _fwd_specs(config, rows, k, n):
    """The outputs of the layer's ``.fwd`` for x [rows, k] and w [k, n] (y, then the saved
    tensors), each with whether it holds one slice per row. Compiles the layer and the
    kernel in the handler library, where the handlers then find them."""
    lib = _handlers()
    c = _ConfigStruct(config.activation.encode(), int(config.has_bias), int(config.ste_clip), int(config.int8_dx),
                      int(config.int8_dw))
    outputs = (_Output * 16)()
    count = ctypes.c_size_t(0)
    status = lib.ternjit_jax_bitlinear_describe(ctypes.byref(c), rows, k, n, outputs, 16, ctypes.byref(count))
    if status != ternjit.OK:
        raise ternjit.Error(status, "bitlinear: " + lib.ternjit_jax_last_error().decode("utf-8", "replace"))
    specs = []
    for out in outputs[:count.value]:
        if out.dtype not in _JNP_DTYPE:
            raise ternjit.Error(ternjit.INTERNAL, "bitlinear: a saved tensor of ternjit dtype %d" % out.dtype)
        specs.append(_Spec(tuple(out.shape[:out.rank]), _JNP_DTYPE[out.dtype], bool(out.per_row)))
    return tuple(specs)


def _ffi(config, function, args, results, vmap_method):
    call = jax.ffi.ffi_call(_TARGETS[function], [jax.ShapeDtypeStruct(s, d) for s, d in results],
                            vmap_method=vmap_method)
    return tuple(call(*args, **config.attributes()))


# ------------------------------------------------------------------------ forward with a vmap rule

@functools.lru_cache(maxsize=None)
def _forward_op(config, function):
    """The FFI call of ``forward`` (y) or ``fwd`` (y, saved...) on x [M, K], w [K, N] (, b [N]),
    with its vmap rule: rows fold when only x is batched."""

    @custom_vmap
    def op(*args):
        rows, k = args[0].shape
        n = args[1].shape[1]
        if function == "forward":
            results = [((rows, n), jnp.float32)]
        else:
            results = [(s.shape, s.dtype) for s in _fwd_specs(config, rows, k, n)]
        # custom_vmap's rule below is what batches this call; "sequential" is never used.
        return _ffi(config, function, args, results, "sequential")

    @op.def_vmap
    def rule(axis_size, in_batched, *args):
        x_batched = in_batched[0]
        if x_batched and not any(in_batched[1:]):
            _, rows, k = args[0].shape
            n = args[1].shape[1]
            outs = op(args[0].reshape(axis_size * rows, k), *args[1:])
            if function == "forward":
                per_row = [True]
            else:
                per_row = [s.per_row for s in _fwd_specs(config, axis_size * rows, k, n)]
            # Per-row outputs unfold to [axis_size, rows, ...]; the others (from w alone) are shared.
            outs = tuple(o.reshape((axis_size, rows) + o.shape[1:]) if r else o for o, r in zip(outs, per_row))
            return outs, tuple(per_row)
        # Per-member weights: one call per batch member; unbatched arguments are shared.
        batched = [a for a, b in zip(args, in_batched) if b]

        def member(values):
            it = iter(values)
            return op(*[next(it) if b else a for a, b in zip(args, in_batched)])

        outs = jax.lax.map(member, batched)
        return tuple(outs), (True,) * len(outs)

    return op


# ------------------------------------------------------------------------ custom_vjp

def _args(x2, w, b):
    return (x2, w) if b is None else (x2, w, b)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _bitlinear2(config, x2, w, b):
    return _forward_op(config, "forward")(*_args(x2, w, b))[0]


def _bitlinear2_fwd(config, x2, w, b):
    y, *saved = _forward_op(config, "fwd")(*_args(x2, w, b))
    return y, (x2, w, b, tuple(saved))


def _bitlinear2_bwd(config, residuals, dy):
    x2, w, b, saved = residuals
    results = [(x2.shape, jnp.float32), (w.shape, jnp.float32)] + ([] if b is None else [(b.shape, jnp.float32)])
    # Sequential under vmap: a batch member's dw and db sum over its own rows only.
    grads = _ffi(config, "bwd", _args(x2, w, b) + (dy.astype(jnp.float32),) + saved, results, "sequential")
    return grads[0], grads[1], None if b is None else grads[2]


_bitlinear2.defvjp(_bitlinear2_fwd, _bitlinear2_bwd)


# ------------------------------------------------------------------------ the public function

def _describe(a):
    return "%s%s" % (getattr(a, "dtype", type(a).__name__), list(np.shape(a)))


def _check_f32(a, what):
    dtype = getattr(a, "dtype", None)
    if dtype is None or np.dtype(dtype) != np.float32:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: %s must be a float32 array, got %s (other dtypes "
                            "are not supported: convert with .astype(jnp.float32))" % (what, _describe(a)))


def bitlinear(x, w, b=None, activation="none", *, ste_clip=False, int8_dx=False, int8_dw=False):
    """BitNet b1.58's BitLinear, ``activation(quantize_int8(x) @ ternarize_absmean(w) (+ b))``.

    Args:
        x: float32 ``[..., K]``; leading dims fold into the rows of one kernel call.
        w: float32 ``[K, N]``, the latent float weights (ternarized per call, per tensor).
        b: optional float32 ``[N]``.
        activation: one of :data:`ACTIVATIONS`.
        ste_clip: the weight gradient passes only where ``|w| <= mean|w|``.
        int8_dx, int8_dw: the opt-in lower-precision input / weight gradients
            (docs/training.md); both off: exact straight-through gradients.

    Returns float32 ``[..., N]``. Differentiable once (``jax.grad``, ``jax.vjp``) in x, w and
    b; works under ``jax.jit`` and ``jax.vmap``. Raises :class:`ternjit.Error` for a wrong
    dtype, shape or activation (when traced) and XLA's runtime error carrying ternjit's
    message when a kernel fails.
    """
    if activation not in ACTIVATIONS:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: unknown activation %r (expected one of %s)" %
                            (activation, ", ".join(ACTIVATIONS)))
    _check_f32(x, "x")
    _check_f32(w, "w")
    if b is not None:
        _check_f32(b, "b")
    if np.ndim(x) < 1 or np.ndim(w) != 2 or np.shape(x)[-1] != np.shape(w)[0]:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear expects x [..., K] and w [K, N], got x %s and w %s" %
                            (list(np.shape(x)), list(np.shape(w))))
    k, n = np.shape(w)
    if b is not None and tuple(np.shape(b)) != (n,):
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: b must be [%d] (N), got %s" % (n, list(np.shape(b))))
    if k == 0 or n == 0:
        raise ternjit.Error(ternjit.INVALID_ARGUMENT, "bitlinear: K and N must be positive, got w %s" %
                            list(np.shape(w)))
    _handlers()
    x = jnp.asarray(x)
    lead = tuple(x.shape[:-1])
    rows = int(np.prod(lead, dtype=np.int64))
    if rows == 0:  # nothing to run; zero gradients follow from y not depending on the inputs
        return jnp.zeros(lead + (n,), jnp.float32)
    config = _Config(activation, b is not None, bool(ste_clip), bool(int8_dx), bool(int8_dw))
    y = _bitlinear2(config, x.reshape(rows, k), jnp.asarray(w), None if b is None else jnp.asarray(b))
    return y.reshape(lead + (n,))

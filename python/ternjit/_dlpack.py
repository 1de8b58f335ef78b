# SPDX-License-Identifier: Apache-2.0
# _dlpack.py - DLPack arrays as ternjit tensors, and the ternary matmul dispatch's kernels and
# bound weights over them (Engine.tmatmul_dispatch / Engine.tmatmul_bind return these).
"""DLPack 1.x exports, TMatMulKernel and TMatMulBound (re-exported by the package)."""
import ctypes

from . import _capi
from . import _dtype_name  # defined by the package before it imports this module
from ._errors import Error, _check, _lib, _misuse  # noqa: F401

_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


_DLPACK_READ_ONLY = 1


class _DLPack:
    """A DLPack 1.x export of one array (torch, numpy, jax: anything with ``__dlpack__``).

    The capsule is kept unconsumed while this object lives, so the producer's deleter runs
    when it is collected; ternjit reads and writes the memory in place (no copy).
    """

    def __init__(self, obj, what):
        if not hasattr(obj, "__dlpack__"):
            raise _misuse("%s is a %s, not a DLPack array (no __dlpack__)" % (what, type(obj).__name__))
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:
            raise _misuse("%s (%s) does not export DLPack 1.x (__dlpack__ takes no max_version)"
                          % (what, type(obj).__name__)) from None
        except BufferError as e:
            raise _misuse("%s (%s) cannot be exported by DLPack: %s" % (what, type(obj).__name__, e)) from None
        self.capsule = capsule
        self.what = what
        if _PyCapsule_IsValid(capsule, b"dltensor_versioned"):
            self.address = _PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        elif _PyCapsule_IsValid(capsule, b"dltensor"):
            # A producer that answers max_version=(1, 0) with a DLPack 0.x capsule (jax
            # 0.10 does): its DLTensor (the same struct in both versions) wrapped in a 1.x
            # header pointing at the same memory, marked read-only, since a 0.x export
            # cannot say whether it may be written (jax arrays may not).
            legacy = ctypes.cast(_PyCapsule_GetPointer(capsule, b"dltensor"), ctypes.POINTER(_capi.DLTensor))
            self.wrapper = _capi.DLManagedTensorVersioned()
            self.wrapper.version.major, self.wrapper.version.minor = 1, 0
            self.wrapper.flags = _DLPACK_READ_ONLY
            self.wrapper.dl_tensor = legacy.contents
            self.address = ctypes.addressof(self.wrapper)
        else:
            raise _misuse("%s (%s) exported no DLPack capsule" % (what, type(obj).__name__))

    def view(self, lib, writable):
        """The ternjit_tensor of the export (its checks: CPU, dtype, compact row-major)."""
        t = _capi.Tensor()
        _check(lib, lib.ternjit_tensor_from_dlpack(self.address, 1 if writable else 0, ctypes.byref(t)))
        shape = tuple(t.shape[i] for i in range(t.rank))
        return t.data, t.dtype, shape


_FEATURE_ENTRY = {"dlpack": "ternjit_run_dlpack", "tmatmul-dispatch": "ternjit_tmatmul_dispatch",
                  "tmatmul-bound": "ternjit_tmatmul_bind"}


def _need_feature(lib, name, what):
    if getattr(lib, _FEATURE_ENTRY[name], None) is None:
        raise Error(_capi.UNSUPPORTED, "%s needs a libternjit with feature '%s'" % (what, name))


class TMatMulKernel:
    """A kernel of :meth:`Engine.tmatmul_dispatch`: ``kernel(x, w, y, x_scale=None,
    w_scale=None, bias=None, residual=None)`` on DLPack arrays (torch, numpy, jax: read and
    written in place), ``y`` [m, N] float32 written; returns ``y``. ``fn``/``state`` are
    the C entry and its state (``fn_address`` as an int), callable without Python.
    """

    def __init__(self, engine, desc, fn, state):
        self._engine = engine  # the kernel lives as long as its engine
        self.desc = desc
        self.fn = fn
        self.state = state

    @property
    def fn_address(self):
        return ctypes.cast(self.fn, ctypes.c_void_p).value

    def _weight_bytes(self):
        d = self.desc
        n = d.k * d.n
        return {0: -(-n // 4), 1: -(-n // 5), 2: n // 256 * 66, 3: n // 256 * 54, 4: n // 64 * 18}[d.weight]

    def _expected(self, rows):
        """Per argument: (dtypes taken, element count) for `rows` rows (the C kernel reads
        raw pointers, so every size is checked here before the call)."""
        d = self.desc
        x_dtype = {0: _capi.F32, 1: _capi.BF16, 2: _capi.I8, 3: _capi.F32}[d.x]
        scale_n = {0: 0, 1: d.n, 2: -(-d.k // max(d.group, 1)) * d.n}[d.scale]
        return {
            "x": ((x_dtype,), rows * d.k),
            "w": ((_capi.U8, _capi.I8), self._weight_bytes()),
            "y": ((_capi.F32,), rows * d.n),
            "x_scale": ((_capi.F32,), rows),
            "w_scale": ((_capi.F32,), scale_n),
            "bias": ((_capi.F32,), d.n),
            "residual": ((_capi.F32,), rows * d.n),
        }

    def __call__(self, x, w, y, x_scale=None, w_scale=None, bias=None, residual=None):
        return self._call(x=x, w=w, y=y, x_scale=x_scale, w_scale=w_scale, bias=bias, residual=residual)

    def _views(self, lib, buffers, rows=None):
        """The DLPack exports (kept alive by the caller) and views of the non-None
        `buffers`, each checked against the descriptor for `rows` rows (None: x's)."""
        keep = []
        views = {}
        for name, value in buffers.items():
            if value is None:
                continue
            export = _DLPack(value, name)
            keep.append(export)
            views[name] = export.view(lib, name == "y")
        if rows is None:
            x_shape = views["x"][2]
            if len(x_shape) != 2:
                raise _misuse("x must be a matrix [m, K], got shape %s" % (list(x_shape),))
            rows = x_shape[0]
        for name, (dtypes, count) in self._expected(rows).items():
            if name not in views:
                continue
            data, dtype, shape = views[name]
            numel = 1
            for extent in shape:
                numel *= extent
            if dtype not in dtypes or numel != count:
                raise _misuse("tmatmul kernel: %s is %s of shape %s; the descriptor (m = %d rows) needs %d elements "
                              "of %s" % (name, _dtype_name(dtype), list(shape), rows, count,
                                         " or ".join(_dtype_name(t) for t in dtypes)))
        return keep, views, rows

    def _call(self, **buffers):
        lib = self._engine._lib
        self._engine._live_handle()
        keep, views, rows = self._views(lib, buffers)
        args = _capi.TMatMulArgs()
        for name, (data, _, _) in views.items():
            setattr(args, name, data)
        args.m = rows
        status = self.fn(self.state, ctypes.byref(args))
        _check(lib, status)
        del keep
        return buffers["y"]


class TMatMulBound(TMatMulKernel):
    """A weight bound once by :meth:`Engine.tmatmul_bind`: ``bound(x, y, x_scale=None,
    residual=None)`` (the weight, its scale and bias are bound). ``bytes`` is the host
    memory it holds; ``close()`` frees it now (also done by its engine's close).
    """

    def __init__(self, engine, desc, handle):
        lib = engine._lib
        fn = _capi.TMATMUL_FN()
        state = ctypes.c_void_p()
        _check(lib, lib.ternjit_tmatmul_bound_entry(handle, ctypes.byref(fn), ctypes.byref(state)))
        super().__init__(engine, desc, fn, state)
        self._handle = handle

    def __call__(self, x, y, x_scale=None, residual=None):
        if self._handle is None:
            raise _misuse("the bound weight is closed")
        return self._call(x=x, y=y, x_scale=x_scale, residual=residual)

    @property
    def bytes(self):
        return self._engine._lib.ternjit_tmatmul_bound_bytes(self._handle) if self._handle is not None else 0

    def close(self):
        """Frees the bound weight now. Idempotent."""
        if getattr(self, "_handle", None) is not None:
            self._engine._lib.ternjit_tmatmul_bound_destroy(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

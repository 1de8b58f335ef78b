# SPDX-License-Identifier: Apache-2.0
# __init__.py - the Python binding of ternjit: numpy arrays in and out over the C ABI (ctypes).
"""ternjit from Python: compile ``.tri`` layers and run them on numpy arrays.

Example::

    import numpy as np, ternjit
    engine = ternjit.Engine()                       # or ternjit.Engine.from_env()
    prog = engine.compile(open("bitlinear.tri").read(), "bitlinear.tri")
    prog.bind("BitLinear.gamma", np.ones(64, np.float32))
    prog.bind("BitLinear.w", w_int8)                # int8 values in {-1, 0, 1}, shape [K, N]
    prog.bind("BitLinear.w_scale", scale_f32)
    y = prog.run("BitLinear.forward", x_f32)        # numpy float32 [M, N]

Every failure of the library raises :class:`Error` carrying the C status and the message
of ``ternjit_last_error()`` (for source text: ``file:line:col: error: ...`` with the line
and a caret). Misuse detected in Python (an unsupported dtype, a missing shape) raises
:class:`Error` with status ``INVALID_ARGUMENT`` too, so callers catch one type.

dtypes: float32 <-> f32, float16 <-> f16, int8 <-> i8 (and t2, ternary values), uint8 <->
u8, int32 <-> i32, and bf16 as uint16 bit patterns (numpy has no bfloat16; see
:func:`to_bf16` / :func:`from_bf16`). float64 arrays are converted to float32.
Non-contiguous arrays are copied to contiguous ones; nothing else is copied.

The library is found through ``TERNJIT_LIBRARY``, then next to the package, then the
system loader (see :mod:`ternjit._capi`); it is loaded on first use, so ``import ternjit``
works without it and the first call raises :class:`Error` (status ``UNAVAILABLE``).
"""

import collections
import ctypes
import threading
import weakref

import numpy as np

from . import _capi

__all__ = [
    "Error", "Engine", "Program", "Kernel", "TMatMulKernel", "TMatMulBound", "TensorSpec",
    "version", "abi_version", "has_feature", "feature_names", "features", "library_path",
    "to_bf16", "from_bf16", "ABI_VERSION", "__version__",
    "BITNET_2B4T", "read_bitnet_config", "write_synthetic_bitnet", "bitnet_name_map", "bitnet_tri_source",
    "read_hf_bitnet_config", "hf_bitnet_name_map",
]

#: The binding's own version (the library's is :func:`version`).
__version__ = "0.1.0"
#: The C ABI version this binding speaks.
ABI_VERSION = _capi.ABI_VERSION

# Status codes, re-exported: ternjit.INVALID_INPUT etc.
OK = _capi.OK
INVALID_INPUT = _capi.INVALID_INPUT
INVALID_ARGUMENT = _capi.INVALID_ARGUMENT
NOT_FOUND = _capi.NOT_FOUND
UNSUPPORTED = _capi.UNSUPPORTED
UNAVAILABLE = _capi.UNAVAILABLE
IO_ERROR = _capi.IO_ERROR
INTERNAL = _capi.INTERNAL



from ._errors import Error, _check, _last_error, _lib, _misuse  # noqa: E402,F401




# ------------------------------------------------------------------------ dtypes

_DTYPE_BY_NAME = {
    "f32": _capi.F32, "float32": _capi.F32,
    "f16": _capi.F16, "float16": _capi.F16,
    "bf16": _capi.BF16, "bfloat16": _capi.BF16,
    "i8": _capi.I8, "int8": _capi.I8,
    "u8": _capi.U8, "uint8": _capi.U8,
    "i32": _capi.I32, "int32": _capi.I32,
    "t2": _capi.T2, "ternary": _capi.T2,
}
_NUMPY_OF = {
    _capi.F32: np.dtype(np.float32), _capi.F16: np.dtype(np.float16), _capi.BF16: np.dtype(np.uint16),
    _capi.I8: np.dtype(np.int8), _capi.U8: np.dtype(np.uint8), _capi.I32: np.dtype(np.int32),
    _capi.T2: np.dtype(np.int8),
}
_DTYPE_OF_NUMPY = {
    np.dtype(np.float32): _capi.F32, np.dtype(np.float16): _capi.F16, np.dtype(np.uint16): _capi.BF16,
    np.dtype(np.int8): _capi.I8, np.dtype(np.uint8): _capi.U8, np.dtype(np.int32): _capi.I32,
}
_SUPPORTED_TEXT = "float32, float16, int8, uint8, int32, or uint16 holding bf16 bit patterns"


def _dtype_code(dtype):
    """A ternjit_dtype from a name ("f32", "bf16", "t2", ...), a code, or a numpy dtype."""
    if isinstance(dtype, str):
        code = _DTYPE_BY_NAME.get(dtype.lower())
        if code is None:
            raise _misuse("unknown dtype '%s' (expected one of %s)" % (dtype, ", ".join(sorted(_DTYPE_BY_NAME))))
        return code
    if isinstance(dtype, int) and dtype in _capi.DTYPE_NAMES:
        return dtype
    try:
        npd = np.dtype(dtype)
    except TypeError:
        raise _misuse("unknown dtype %r" % (dtype,)) from None
    if npd not in _DTYPE_OF_NUMPY:
        raise _misuse("dtype %s is not supported (use %s)" % (npd, _SUPPORTED_TEXT))
    return _DTYPE_OF_NUMPY[npd]


def _dtype_name(code):
    return _capi.DTYPE_NAMES[code]


def _convert(array, dtype, what):
    """(contiguous numpy array, ternjit_dtype) for `array`, converting only where safe."""
    arr = np.asarray(array)
    if dtype is None:
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype not in _DTYPE_OF_NUMPY:
            raise _misuse("%s has dtype %s, which ternjit does not take (use %s; pass dtype= to convert)" %
                          (what, arr.dtype, _SUPPORTED_TEXT))
        code = _DTYPE_OF_NUMPY[arr.dtype]
    else:
        code = _dtype_code(dtype)
        want = _NUMPY_OF[code]
        if arr.dtype != want:
            if code == _capi.BF16:
                if arr.dtype.kind != "f":
                    raise _misuse("%s: bf16 takes uint16 bit patterns or floats, got %s" % (what, arr.dtype))
                arr = to_bf16(arr)
            elif want.kind in "iu":
                if arr.dtype.kind not in "iub":
                    raise _misuse("%s: dtype %s needs integer values, got %s" % (what, _dtype_name(code), arr.dtype))
                info = np.iinfo(want)
                if arr.size and (arr.min() < info.min or arr.max() > info.max):
                    raise _misuse("%s: values in [%d, %d] do not fit %s" %
                                  (what, arr.min(), arr.max(), _dtype_name(code)))
                arr = arr.astype(want)
            else:
                arr = arr.astype(want)
    if not (arr.flags.c_contiguous and arr.flags.aligned):
        arr = np.require(arr, requirements=["C", "A"])
    return arr, code


def _shape_array(shape):
    shape = tuple(int(d) for d in shape)
    return shape, (ctypes.c_int64 * max(len(shape), 1))(*shape)


def _tensor(data_ptr, code, shape):
    """(ternjit_tensor, keep-alive shape buffer)."""
    shape, buf = _shape_array(shape)
    t = _capi.Tensor(data_ptr, code, len(shape), ctypes.cast(buf, ctypes.POINTER(ctypes.c_int64)))
    return t, buf


class TensorSpec(collections.namedtuple("TensorSpec", ["shape", "dtype"])):
    """The shape and dtype name ("f32", ...) of a kernel input or output."""

    __slots__ = ()

    def __new__(cls, shape, dtype="f32"):
        code = _dtype_code(dtype)
        return super().__new__(cls, tuple(int(d) for d in shape), _dtype_name(code))

    @property
    def numpy_dtype(self):
        """The numpy dtype holding this tensor (uint16 for bf16, int8 for t2)."""
        return _NUMPY_OF[_DTYPE_BY_NAME[self.dtype]]

    def empty(self):
        """A new uninitialized numpy array of this spec, its data 64-byte aligned (numpy
        aligns to 16 only): the x86 kernels store a large result (a weight gradient) with
        streaming stores only into 64-byte aligned rows, about twice as fast."""
        dtype = np.dtype(self.numpy_dtype)
        n = 1
        for d in self.shape:
            n *= d
        raw = np.empty(n * dtype.itemsize + 64, dtype=np.uint8)
        offset = (-raw.ctypes.data) % 64
        return raw[offset:offset + n * dtype.itemsize].view(dtype).reshape(self.shape)


class _Inputs:
    """Converted inputs of one call: the arrays (kept alive) and the ternjit_tensor array."""

    def __init__(self, values, what):
        self.arrays = []
        self.specs = []
        keep = []
        structs = []
        for i, v in enumerate(values):
            if isinstance(v, TensorSpec):
                arr, code, ptr = None, _DTYPE_BY_NAME[v.dtype], None
                shape = v.shape
            elif isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], str):
                # (array, dtype name): e.g. int8 values passed as "t2"
                arr, code = _convert(v[0], v[1], "%s %d" % (what, i))
                ptr, shape = arr.ctypes.data, arr.shape
            else:
                arr, code = _convert(v, None, "%s %d" % (what, i))
                ptr, shape = arr.ctypes.data, arr.shape
            t, buf = _tensor(ptr, code, shape)
            keep.append(buf)
            structs.append(t)
            self.arrays.append(arr)
            self.specs.append(TensorSpec(shape, code))
        self._keep = keep
        self.count = len(structs)
        self.structs = (_capi.Tensor * max(len(structs), 1))(*structs)


# ------------------------------------------------------------------------ library info

def version():
    """The library's version string ("0.1.0")."""
    return _lib().ternjit_version().decode()


def abi_version():
    """The library's ABI version (equal to :data:`ABI_VERSION` once loaded)."""
    return int(_lib().ternjit_abi_version())


def has_feature(name):
    """True if the library has feature `name` ("target:reference", "safetensors", ...)."""
    return bool(_lib().ternjit_has_feature(name.encode()))


def feature_names():
    """Every feature name the library knows (present here or not): its fixed features,
    then ``target:NAME`` for each target of its registry (``ternjit_feature_names``)."""
    return _lib().ternjit_feature_names().decode().split(",")


def features():
    """The names of :func:`feature_names` that this library has here."""
    lib = _lib()
    return [f for f in feature_names() if lib.ternjit_has_feature(f.encode())]


def library_path():
    """Where libternjit.so was loaded from."""
    _lib()
    return _capi.library_path()


def to_bf16(array):
    """float array -> uint16 bf16 bit patterns, rounded to nearest even (NaN stays NaN)."""
    f = np.ascontiguousarray(np.asarray(array, dtype=np.float32))
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FC0), rounded).astype(np.uint16)


def from_bf16(array):
    """uint16 bf16 bit patterns -> float32 (exact)."""
    u = np.ascontiguousarray(np.asarray(array, dtype=np.uint16))
    return (u.astype(np.uint32) << 16).view(np.float32)


# ------------------------------------------------------------------------ bitnet files (_bitnet.py)

from ._bitnet import (BITNET_2B4T, _bitnet_struct, bitnet_name_map, bitnet_tri_source,  # noqa: E402,F401
                      hf_bitnet_name_map, read_bitnet_config, read_hf_bitnet_config, write_synthetic_bitnet)

# ------------------------------------------------------------------------ engine

# ------------------------------------------------------------------------ DLPack, tmatmul (_dlpack.py)

from ._dlpack import TMatMulBound, TMatMulKernel, _DLPack, _need_feature  # noqa: E402,F401


class Engine:
    """Compiles ``.tri`` source into programs. Thread-safe; engines share nothing.

    ``Engine(target="auto", opt_level=2, threads=0, verbose=False, cache_dir=None,
    target_options=None, tuning=None)`` or :meth:`from_env` (TERNJIT_TARGET,
    TERNJIT_OPT_LEVEL, ...). ``target_options`` is each target's own options as
    ``"x86.max_isa=avx2;llvm.cpu=znver4"``; ``tuning`` is "cached" (None: the default),
    "off" or "tune". An unknown or unavailable target, or an option a target does not
    take, raises :class:`Error` saying why.
    """

    def __init__(self, target="auto", opt_level=2, threads=0, verbose=False, cache_dir=None,
                 target_options=None, tuning=None):
        lib = _lib()
        opts = _capi.EngineOptions()
        lib.ternjit_engine_options_init_sized(ctypes.byref(opts), ctypes.sizeof(opts))
        opts.target = str(target).encode()
        opts.opt_level = int(opt_level)
        opts.threads = int(threads)
        opts.verbose = 1 if verbose else 0
        if cache_dir is not None:
            opts.cache_dir = str(cache_dir).encode()
        if target_options is not None:
            opts.target_options = str(target_options).encode()
        if tuning is not None:
            opts.tuning = str(tuning).encode()
        handle = ctypes.c_void_p()
        _check(lib, lib.ternjit_engine_create(ctypes.byref(opts), ctypes.byref(handle)))
        self._init(lib, handle, dict(target=str(target), opt_level=int(opt_level), threads=int(threads),
                                     verbose=bool(verbose), cache_dir=cache_dir, target_options=target_options,
                                     tuning=tuning))

    @classmethod
    def from_env(cls):
        """An engine configured by the TERNJIT_* environment variables."""
        lib = _lib()
        handle = ctypes.c_void_p()
        _check(lib, lib.ternjit_engine_create_from_env(ctypes.byref(handle)))
        engine = cls.__new__(cls)
        engine._init(lib, handle, {"from_env": True})
        return engine

    def _init(self, lib, handle, options):
        self._lib = lib
        self._handle = handle
        self._programs = weakref.WeakSet()
        self._bound = weakref.WeakSet()  # bound weights, freed before the engine
        self.options = options

    @property
    def closed(self):
        return self._handle is None

    def _live_handle(self):
        if self._handle is None:
            raise _misuse("the engine is closed")
        return self._handle

    def compile(self, source, file_name="<python>"):
        """Compiles `.tri` source text; errors carry ``file_name:line:col``."""
        if isinstance(source, str):
            source = source.encode("utf-8")
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.ternjit_compile(self._live_handle(), source, len(source),
                                                    str(file_name).encode(), ctypes.byref(handle)))
        program = Program(self, handle)
        self._programs.add(program)
        return program

    def compile_grad(self, source, function, wrt=(), ste_clip=False, file_name="<python>", int8_dx=False,
                     int8_dw=False):
        """Compiles `.tri` source with the reverse-mode gradient of `function` added.

        The program gets ``function + ".fwd"`` (the function's results, then the tensors
        saved for the backward) and ``function + ".bwd"`` (arguments: the function's, one
        gradient per float result, the saved tensors; results: one gradient per `wrt`
        entry). `wrt` names arguments (``"x"``) and parameters (``"@Layer.w"``; a ternary
        parameter's gradient is f32, the latent weights'); empty: every float argument
        and float or ternary parameter the function reads. Quantizers are
        straight-through estimators, clipped to their range with ``ste_clip`` (the
        default for quantizers without their own ``ste_clip`` argument).

        ``int8_dx=True`` opts in to lower precision (it changes the gradients): the input
        gradient of a ternary matmul quantizes the incoming gradient to int8 per row and
        runs on the int8 ternary kernel. ``int8_dw=True`` likewise for the weight
        gradient: an exact int8 x int8 -> int32 matmul of the int8 activations and the
        incoming gradient quantized per output column (docs/training.md,
        "Lower-precision gradients").
        """
        if isinstance(source, str):
            source = source.encode("utf-8")
        names = [str(w).encode() for w in wrt]
        array = (ctypes.c_char_p * max(1, len(names)))(*names)
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.ternjit_compile_grad(
            self._live_handle(), source, len(source), str(file_name).encode(), str(function).encode(), array,
            len(names), (1 if ste_clip else 0) | (2 if int8_dx else 0) | (4 if int8_dw else 0), ctypes.byref(handle)))
        program = Program(self, handle)
        self._programs.add(program)
        return program

    def compile_file(self, path):
        """Compiles a `.tri` file (its path names it in diagnostics)."""
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as e:
            raise Error(IO_ERROR, "cannot read '%s': %s" % (path, e.strerror or e)) from None
        return self.compile(source, str(path))

    def tmatmul_dispatch(self, m, k, n, weight="tern2", x="f32", scale=None, group=0, bias=False,
                         residual=False, act=None, threads=0, m_max=0):
        """The ternary matmul kernel of a descriptor (docs/c_abi.md, "Ternary matmul
        dispatch"): ``m`` rows (or None for any m up to ``m_max``), weight ``[k, n]`` in
        ``weight`` ("tern2", "tern1.6", "tq2_0", "tq1_0", "q2_0"), activation ``x`` ("f32",
        "bf16", "i8" with a per-row scale, "f32_row_i8": quantized per row in the kernel), ``scale`` (None, "column", "group" with
        ``group``), ``bias``/``residual`` flags, ``act`` (None, "relu", "relu2", "silu",
        "gelu"), ``threads`` (0: the engine's). The same descriptor returns the same kernel
        (a lookup); a combination the engine does not compute raises :class:`Error`
        (UNSUPPORTED) naming it. Returns a :class:`TMatMulKernel`.
        """
        lib = self._lib
        _need_feature(lib, "tmatmul-dispatch", "tmatmul_dispatch")
        d = self._tmatmul_desc(m, k, n, weight, x, scale, group, bias, residual, act, threads, m_max)
        fn = _capi.TMATMUL_FN()
        state = ctypes.c_void_p()
        _check(lib, lib.ternjit_tmatmul_dispatch(self._live_handle(), ctypes.byref(d), ctypes.byref(fn),
                                                 ctypes.byref(state)))
        return TMatMulKernel(self, d, fn, state)

    def tmatmul_bind(self, w, m, k, n, w_scale=None, bias=None, weight="tern2", x="f32", scale=None, group=0,
                     residual=False, act=None, threads=0, m_max=0):
        """Binds weight `w` (packed bytes in `weight`'s format), `w_scale` and `bias` (arrays,
        when the descriptor has them: ``scale`` set, ``bias`` given) once to the kernel of
        the descriptor of :meth:`tmatmul_dispatch` (``ternjit_tmatmul_bind``): the arrays
        may be freed after. Returns a :class:`TMatMulBound`, called with x only.
        """
        lib = self._lib
        _need_feature(lib, "tmatmul-bound", "tmatmul_bind")
        d = self._tmatmul_desc(m, k, n, weight, x, scale, group, bias is not None, residual, act, threads, m_max)
        probe = TMatMulKernel(self, d, None, None)  # the descriptor's size checks
        keep, views, _ = probe._views(lib, {"w": w, "w_scale": w_scale, "bias": bias}, rows=1)
        handle = ctypes.c_void_p()
        w_data = views["w"][0] if "w" in views else None
        _check(lib, lib.ternjit_tmatmul_bind(self._live_handle(), ctypes.byref(d), w_data, probe._weight_bytes(),
                                             views["w_scale"][0] if "w_scale" in views else None,
                                             views["bias"][0] if "bias" in views else None, ctypes.byref(handle)))
        del keep
        bound = TMatMulBound(self, d, handle)
        self._bound.add(bound)
        return bound

    def _tmatmul_desc(self, m, k, n, weight, x, scale, group, bias, residual, act, threads, m_max):
        lib = self._lib
        d = _capi.TMatMulDesc()
        lib.ternjit_tmatmul_desc_init(ctypes.byref(d))
        try:
            d.weight = _capi.TMATMUL_WEIGHTS[weight]
            d.x = _capi.TMATMUL_X[x]
            d.scale = _capi.TMATMUL_SCALES[scale]
            d.act = _capi.TMATMUL_ACTS[act]
        except KeyError as e:
            raise _misuse("tmatmul_dispatch: unknown value %s (weights %s, x %s, scales %s, acts %s)"
                          % (e, sorted(_capi.TMATMUL_WEIGHTS), sorted(_capi.TMATMUL_X),
                             ["column", "group"], ["relu", "relu2", "silu", "gelu"])) from None
        d.m = _capi.TMATMUL_ANY_M if m is None else int(m)
        d.m_max = int(m_max)
        d.k, d.n, d.group, d.threads = int(k), int(n), int(group), int(threads)
        d.flags = (_capi.TMATMUL_BIAS if bias else 0) | (_capi.TMATMUL_RESIDUAL if residual else 0)
        return d

    def close(self):
        """Destroys the engine now, closing its programs first. Idempotent."""
        if self._handle is None:
            return
        for program in list(self._programs):
            program.close()
        for bound in list(self._bound):
            bound.close()
        self._lib.ternjit_engine_destroy(self._handle)
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __copy__(self):
        return self  # one handle, one owner: copies share the (thread-safe) engine

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        # Pickling records how the engine was made, not its state (it has no weights).
        if self.options.get("from_env"):
            return (Engine.from_env, ())
        o = self.options
        return (Engine, (o["target"], o["opt_level"], o["threads"], o["verbose"], o["cache_dir"], o["target_options"],
                         o["tuning"]))

    def __del__(self):
        # Programs hold a reference to their engine, so none is alive here.
        if getattr(self, "_handle", None) is not None:
            self._lib.ternjit_engine_destroy(self._handle)
            self._handle = None

    def __repr__(self):
        return "ternjit.Engine(%s%s)" % (self.options, ", closed" if self.closed else "")


# ------------------------------------------------------------------------ program

_FORMATS = {
    "plain": _capi.FORMAT_PLAIN,
    "tern2": _capi.FORMAT_TERN2,
    "tern2-sm": _capi.FORMAT_TERN2_SM, "tern2_sm": _capi.FORMAT_TERN2_SM,
    "tern1.6": _capi.FORMAT_TERN1_6, "tern1_6": _capi.FORMAT_TERN1_6, "tern16": _capi.FORMAT_TERN1_6,
    "bitplane": _capi.FORMAT_BITPLANE,
}


def _packed_bytes(fmt, n):
    """Bytes a packed format needs for n values (formats/ternary.h in the C++ tree)."""
    if fmt in (_capi.FORMAT_TERN2, _capi.FORMAT_TERN2_SM):
        return (n + 3) // 4
    if fmt == _capi.FORMAT_TERN1_6:
        return (n + 4) // 5
    return 16 * ((n + 63) // 64)


class Program:
    """A compiled module with its bound weights; made by :meth:`Engine.compile`.

    Keeps its engine alive. Thread-safe: functions specialize once per input shape.
    """

    def __init__(self, engine, handle):
        self.engine = engine
        self._lib = engine._lib
        self._handle = handle
        self._kernels = {}
        self._kernels_lock = threading.Lock()

    @property
    def closed(self):
        return self._handle is None

    def _live_handle(self):
        if self._handle is None:
            raise _misuse("the program is closed")
        return self._handle

    # -------------------------------------------------------------- weights

    def bind(self, name, array, format="plain", shape=None, dtype=None):
        """Binds parameter `name` ("Layer.param") from `array` (copied by the library).

        ``format="plain"``: float parameters take float32/float16/bf16 (uint16) arrays,
        ternary ones int8 values in {-1, 0, 1}; `dtype` ("t2", "f16", ...) overrides the
        inferred one. Packed formats ("tern2", "tern2-sm", "tern1.6", "bitplane") take the
        packed bytes (uint8, or any integer array viewed as bytes) and the logical `shape`.
        """
        fmt = _FORMATS.get(str(format).lower())
        if fmt is None:
            raise _misuse("unknown weight format '%s' (expected %s)" % (format, ", ".join(_FORMATS)))
        what = "parameter '%s'" % name
        if fmt == _capi.FORMAT_PLAIN:
            arr, code = _convert(array, dtype, what)
            if shape is not None and tuple(int(d) for d in shape) != arr.shape:
                raise _misuse("%s: shape %s given for an array of shape %s" % (what, tuple(shape), arr.shape))
            logical = arr.shape
        else:
            if shape is None:
                raise _misuse("%s: format '%s' needs the logical shape (shape=...)" % (what, format))
            if dtype is not None and _dtype_code(dtype) != _capi.U8:
                raise _misuse("%s: packed format '%s' takes u8 bytes, not %s" % (what, format, dtype))
            arr = np.asarray(array)
            if arr.dtype.kind not in "iu":
                raise _misuse("%s: packed format '%s' takes bytes (uint8), got %s" % (what, format, arr.dtype))
            arr = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            code, logical = _capi.U8, shape
        logical, buf = _shape_array(logical)
        if fmt != _capi.FORMAT_PLAIN and all(d >= 0 for d in logical):
            # The library reads exactly the bytes the shape needs; it cannot see the array's
            # length, so a short (or long) buffer is refused here.
            need = _packed_bytes(fmt, int(np.prod(logical, dtype=object)))
            if arr.nbytes != need:
                raise _misuse("%s: format '%s' data for shape %s needs %d bytes, got %d"
                              % (what, format, logical, need, arr.nbytes))
        # The library is told the array's length too, and checks it against the format's need.
        _check(self._lib, self._lib.ternjit_bind_weight_sized(
            self._live_handle(), name.encode(), arr.ctypes.data, arr.nbytes, code, fmt,
            ctypes.cast(buf, ctypes.POINTER(ctypes.c_int64)), len(logical)))

    def bind_file(self, path, map=None):
        """Binds every parameter a weights file holds: safetensors, GGUF or a Hugging Face
        BitNet checkpoint (told apart by content). `map`: rules "PATTERN=TARGET" renaming
        file tensors to parameters ("model.layers.{i}.mlp.up_proj.weight=L{i}.w")."""
        if not map:
            _check(self._lib, self._lib.ternjit_bind_weights_file(self._live_handle(), str(path).encode()))
            return
        rules = [str(r).encode() for r in ([map] if isinstance(map, str) else map)]
        arr = (ctypes.c_char_p * len(rules))(*rules)
        _check(self._lib, self._lib.ternjit_bind_weights_file_mapped(
            self._live_handle(), str(path).encode(), arr, len(rules)))

    def bind_hf_bitnet(self, directory, layer="BitNet"):
        """Binds the Hugging Face BitNet checkpoint directory `directory` (every safetensors file
        of it, with :func:`hf_bitnet_name_map`) to layer `layer` of a program compiled from
        ``bitnet_tri_source(read_hf_bitnet_config(directory), capacity)``; every parameter of
        the layer must bind, else :class:`Error` names the first that does not."""
        _check(self._lib, self._lib.ternjit_bind_hf_bitnet(self._live_handle(), str(directory).encode(),
                                                          str(layer).encode()))

    def bind_random(self, seed):
        """Binds every still-unbound parameter to random values drawn from `seed`."""
        _check(self._lib, self._lib.ternjit_bind_random(self._live_handle(), int(seed) & 0xFFFFFFFFFFFFFFFF))

    # -------------------------------------------------------------- kernels and runs

    def kernel(self, function, *inputs):
        """The kernel of `function` specialized for these inputs (arrays or :class:`TensorSpec`).

        The same function and input specs return the same :class:`Kernel`.
        """
        ins = _Inputs(inputs, "input")
        return self._kernel(function, ins)

    def _kernel(self, function, ins):
        key = (function, tuple(ins.specs))
        kernel = self._kernels.get(key)
        if kernel is not None:
            return kernel
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.ternjit_get_kernel(self._live_handle(), function.encode(), ins.structs,
                                                       ins.count, ctypes.byref(handle)))
        kernel = Kernel(self, function, handle, ins.specs)
        with self._kernels_lock:
            return self._kernels.setdefault(key, kernel)

    def run(self, function, *inputs, out=None):
        """Runs `function` ("Layer.forward") on numpy inputs.

        An input may be an ``(array, dtype)`` pair to pass it as that dtype (``"t2"`` for
        int8 values in {-1, 0, 1}, as a ternary result of another function comes back).

        Returns the output array, or a list when the function has several results.
        `out` (an array or a list of arrays of the result specs) receives the results
        instead of freshly allocated arrays.
        """
        ins = _Inputs(inputs, "input")
        kernel = self._kernel(function, ins)
        outs = kernel._outputs_for(out)
        out_structs, keep = [], []
        for spec, arr in zip(kernel.outputs, outs):
            t, buf = _tensor(arr.ctypes.data, _DTYPE_BY_NAME[spec.dtype], spec.shape)
            out_structs.append(t)
            keep.append(buf)
        out_array = (_capi.Tensor * max(len(out_structs), 1))(*out_structs)
        _check(self._lib, self._lib.ternjit_run(self._live_handle(), function.encode(), ins.structs, ins.count,
                                                out_array, len(out_structs)))
        return outs[0] if len(outs) == 1 else outs

    def run_dlpack(self, function, inputs, outputs):
        """Runs `function` on DLPack arrays (torch, numpy, jax; DLPack 1.x, CPU, compact
        row-major), reading ``inputs`` and writing ``outputs`` in place: no copy is made,
        and an array ternjit cannot take as it is (strided, float64, on a GPU, read-only as
        an output) raises :class:`Error` (INVALID_ARGUMENT) saying why. Returns ``outputs``.
        """
        _need_feature(self._lib, "dlpack", "run_dlpack")
        ins = [_DLPack(a, "input %d" % i) for i, a in enumerate(inputs)]
        outs = [_DLPack(a, "output %d" % i) for i, a in enumerate(outputs)]
        in_ptrs = (ctypes.c_void_p * max(len(ins), 1))(*[e.address for e in ins])
        out_ptrs = (ctypes.c_void_p * max(len(outs), 1))(*[e.address for e in outs])
        _check(self._lib, self._lib.ternjit_run_dlpack(self._live_handle(), function.encode(), in_ptrs, len(ins),
                                                       out_ptrs, len(outs)))
        return outputs

    def close(self):
        """Destroys the program now; a :class:`Kernel` still referenced keeps what it runs
        until it goes. Idempotent."""
        if self._handle is not None:
            self._lib.ternjit_program_destroy(self._handle)
            self._handle = None
            self._kernels = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __copy__(self):
        return self  # one handle, one owner: copies share the (thread-safe) program

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("a ternjit.Program cannot be pickled (compile the source again and rebind the weights)")

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self._lib.ternjit_program_destroy(self._handle)
            self._handle = None

    def __repr__(self):
        return "<ternjit.Program%s>" % (" closed" if self.closed else "")


class Kernel:
    """One function specialized for one set of input specs, with its raw entry point.

    For frameworks: ``fn(state, buffers)`` is the C function pointer (``fn_address`` as an
    int) and ``state`` its state pointer; ``buffers`` holds the input data pointers in
    argument order, then the output data pointers in result order, each contiguous with
    the shapes of :attr:`inputs` and :attr:`outputs`. It returns a ternjit status (0 ok).
    The kernel holds a reference to what it runs (``ternjit_kernel_retain``): ``fn``,
    ``state`` and calls stay valid and correct while this object lives, also after
    :meth:`Program.close`.
    """

    def __init__(self, program, function, handle, input_specs):
        self.program = program
        self.function = function
        self._handle = None
        lib = program._lib
        self._lib = lib
        _check(lib, lib.ternjit_kernel_retain(handle))
        self._handle = handle
        self.inputs = list(input_specs)
        outputs = []
        for i in range(lib.ternjit_kernel_num_outputs(handle)):
            code, rank, shape = ctypes.c_int(), ctypes.c_int32(), ctypes.POINTER(ctypes.c_int64)()
            _check(lib, lib.ternjit_kernel_output(handle, i, ctypes.byref(code), ctypes.byref(rank),
                                                  ctypes.byref(shape)))
            outputs.append(TensorSpec([shape[d] for d in range(rank.value)], code.value))
        self.outputs = outputs
        fn, state = _capi.KERNEL_FN(), ctypes.c_void_p()
        _check(lib, lib.ternjit_kernel_entry(handle, ctypes.byref(fn), ctypes.byref(state)))
        self.fn = fn
        self.fn_address = ctypes.cast(fn, ctypes.c_void_p).value
        self.state = state.value
        self._n = len(self.inputs) + len(self.outputs)

    def _outputs_for(self, out):
        if out is None:
            return [spec.empty() for spec in self.outputs]
        outs = [out] if isinstance(out, np.ndarray) else list(out)
        if len(outs) != len(self.outputs):
            raise _misuse("'%s' has %d results, got %d out arrays" % (self.function, len(self.outputs), len(outs)))
        for i, (spec, arr) in enumerate(zip(self.outputs, outs)):
            problem = _out_problem(spec, arr)
            if problem is not None:
                raise _misuse("out %d of '%s': %s" % (i, self.function, problem))
        # Two results written into overlapping memory: always wrong, whichever is written last.
        for i, a in enumerate(outs):
            for j in range(i):
                if a.size and outs[j].size and np.may_share_memory(a, outs[j]):
                    raise _misuse("out %d of '%s' overlaps out %d: expected separate memory for every result, got "
                                  "[0x%x, 0x%x) and [0x%x, 0x%x)" % (i, self.function, j, *_extent(a), *_extent(outs[j])))
        return outs

    def call_pointers(self, pointers):
        """Calls the entry point on raw data pointers (ints), inputs then outputs. Nothing is
        checked: the buffers must match :attr:`inputs` and :attr:`outputs`."""
        if len(pointers) != self._n:
            raise _misuse("kernel '%s' takes %d buffers, got %d" % (self.function, self._n, len(pointers)))
        buffers = (ctypes.c_void_p * max(self._n, 1))(*pointers)
        status = self.fn(self.state, buffers)
        if status != OK:
            raise Error(status, _last_error(self._lib, status))

    def device_handles(self):
        """GPU targets: the native handles of the device the kernel runs on, as ints (cuda:
        the CUcontext and the CUdevice; spirv: VkInstance, VkPhysicalDevice, VkDevice,
        VkQueue, the queue family). Raises :class:`Error` (UNSUPPORTED) for CPU targets."""
        lib = self._lib
        count = ctypes.c_size_t(8)
        handles = (ctypes.c_size_t * 8)()
        _check(lib, lib.ternjit_kernel_device(self._handle, handles, ctypes.byref(count)))
        return [int(handles[i]) for i in range(count.value)]

    def launch_pointers(self, stream, pointers):
        """GPU targets, the framework launch path: enqueues the kernel on `stream` (cuda: a
        CUstream as an int, e.g. ``torch.cuda.current_stream().cuda_stream``; 0: the legacy
        default stream) reading and writing device pointers (ints, inputs then outputs, each
        holding its tensor contiguously) and returns without waiting. Nothing is checked
        but the count; two launches of one kernel must not run at the same time (it owns its
        scratch). Raises :class:`Error` (UNSUPPORTED) for CPU targets."""
        if len(pointers) != self._n:
            raise _misuse("kernel '%s' takes %d buffers, got %d" % (self.function, self._n, len(pointers)))
        buffers = (ctypes.c_void_p * max(self._n, 1))(*pointers)
        _check(self._lib, self._lib.ternjit_kernel_launch(self._handle, stream or None, buffers))

    def __call__(self, *inputs, out=None):
        """Runs on numpy inputs that match :attr:`inputs` exactly (dtype and shape)."""
        if len(inputs) != len(self.inputs):
            raise _misuse("kernel '%s' takes %d inputs, got %d" % (self.function, len(self.inputs), len(inputs)))
        arrays = []
        for i, (spec, v) in enumerate(zip(self.inputs, inputs)):
            arr = np.asarray(v)
            if arr.dtype != spec.numpy_dtype or arr.shape != spec.shape:
                raise _misuse("input %d of kernel '%s' must be %s%s, got %s" %
                              (i, self.function, spec.dtype, list(spec.shape), _describe(arr)))
            arrays.append(np.require(arr, requirements=["C", "A"]))
        outs = self._outputs_for(out)
        # call_pointers checks nothing: an out that partly overlaps an input would be read
        # after it is written (the same array is a cache updated in place, as Program.run allows).
        for j, o in enumerate(outs):
            for i, a in enumerate(arrays):
                if o.size and a.size and np.may_share_memory(o, a) and _extent(o) != _extent(a):
                    raise _misuse("out %d of kernel '%s' partly overlaps input %d: expected separate memory (or the "
                                  "same array), got [0x%x, 0x%x) and [0x%x, 0x%x)" %
                                  (j, self.function, i, *_extent(o), *_extent(a)))
        self.call_pointers([a.ctypes.data for a in arrays] + [o.ctypes.data for o in outs])
        return outs[0] if len(outs) == 1 else outs

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("a ternjit.Kernel cannot be pickled")

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self._lib.ternjit_kernel_release(self._handle)
            self._handle = None

    def __repr__(self):
        return "<ternjit.Kernel %s %s -> %s>" % (
            self.function, ", ".join("%s%s" % (s.dtype, list(s.shape)) for s in self.inputs),
            ", ".join("%s%s" % (s.dtype, list(s.shape)) for s in self.outputs))


def _extent(arr):
    """The byte range [start, end) of a contiguous array."""
    start = arr.__array_interface__["data"][0]
    return start, start + arr.nbytes


def _out_problem(spec, arr):
    """Which property of `arr` keeps it from receiving a result of `spec`, as "expected
    ..., got ..."; None when it can (ternjit writes it in place, from the C side)."""
    if not isinstance(arr, np.ndarray):
        device = getattr(arr, "device", None)
        return "expected a numpy.ndarray in host memory, got %s%s" % (
            type(arr).__module__ + "." + type(arr).__name__, "" if device is None else " on device %s" % (device,))
    if arr.dtype != spec.numpy_dtype:
        return "dtype: expected %s, got %s" % (spec.numpy_dtype, arr.dtype)
    if arr.shape != spec.shape:
        return "shape: expected %s, got %s" % (list(spec.shape), list(arr.shape))
    if not arr.flags.c_contiguous:
        want, step = [], arr.itemsize
        for extent in reversed(arr.shape):
            want.insert(0, step)
            step *= extent
        return "strides: expected C-contiguous %s (bytes), got %s" % (want, list(arr.strides))
    if not arr.flags.writeable:
        return "writable: expected a writable array, got a read-only one"
    if not arr.flags.aligned:
        address = arr.__array_interface__["data"][0]
        return "alignment: expected data aligned to %d bytes (its element size), got address 0x%x (%d past)" % (
            arr.itemsize, address, address % arr.itemsize)
    return None


def _describe(v):
    if isinstance(v, np.ndarray):
        return "%s%s" % (v.dtype, list(v.shape))
    return type(v).__name__

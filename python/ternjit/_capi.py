# SPDX-License-Identifier: Apache-2.0
# _capi.py - loads libternjit.so and declares the C ABI of include/ternjit/ternjit.h for ctypes.
"""Low-level ctypes declarations of the ternjit C ABI (``ternjit.h``).

Nothing here is public API: use the classes of :mod:`ternjit`. The library is loaded on
first use by :func:`library`, looked up in this order:

1. the ``TERNJIT_LIBRARY`` environment variable (a path to ``libternjit.so``);
2. next to the package: ``libternjit.so`` in the package directory, then the relative
   library directory written at install time into ``_library_path.txt`` (relative to the
   package directory, so a relocated install prefix still works);
3. the system loader (``libternjit.so``, ``libternjit.so.<abi>``, ``ctypes.util.find_library``).
"""

import ctypes
import ctypes.util
import glob
import os
import threading

#: The ABI version this binding was written for (TERNJIT_ABI_VERSION in ternjit.h).
ABI_VERSION = 2

# ternjit_status
OK = 0
INVALID_INPUT = 1
INVALID_ARGUMENT = 2
NOT_FOUND = 3
UNSUPPORTED = 4
UNAVAILABLE = 5
IO_ERROR = 6
INTERNAL = 7

STATUS_NAMES = {
    OK: "ok",
    INVALID_INPUT: "invalid input",
    INVALID_ARGUMENT: "invalid argument",
    NOT_FOUND: "not found",
    UNSUPPORTED: "unsupported",
    UNAVAILABLE: "unavailable",
    IO_ERROR: "I/O error",
    INTERNAL: "internal error",
}

# ternjit_dtype
F32, F16, BF16, I8, U8, I32, T2 = range(7)
DTYPE_NAMES = {F32: "f32", F16: "f16", BF16: "bf16", I8: "i8", U8: "u8", I32: "i32", T2: "t2"}

# ternjit_format
FORMAT_PLAIN, FORMAT_TERN2, FORMAT_TERN2_SM, FORMAT_TERN1_6, FORMAT_BITPLANE = range(5)


class Tensor(ctypes.Structure):
    """ternjit_tensor: a caller-owned, row-major, contiguous tensor."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
    ]


class BitNetConfig(ctypes.Structure):
    """ternjit_bitnet_config: a BitNet b1.58 decoder's shape (llama.cpp `bitnet` metadata)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("blocks", ctypes.c_int64),
        ("hidden", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("kv_heads", ctypes.c_int64),
        ("ffn", ctypes.c_int64),
        ("vocab", ctypes.c_int64),
        ("context", ctypes.c_int64),
        ("rope_theta", ctypes.c_double),
        ("rms_eps", ctypes.c_double),
        ("ffn_activation", ctypes.c_int32),
        ("embedding", ctypes.c_int32),
        ("kv_cache", ctypes.c_int32),
        ("separate_head", ctypes.c_int32),
    ]


class EngineOptions(ctypes.Structure):
    """ternjit_engine_options (fill with ternjit_engine_options_init_sized first)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("target", ctypes.c_char_p),
        ("opt_level", ctypes.c_int32),
        ("threads", ctypes.c_int32),
        ("cache_dir", ctypes.c_char_p),
        ("verbose", ctypes.c_int32),
        # Later fields, filled by ternjit_engine_options_init_sized up to this struct's size.
        ("max_isa", ctypes.c_char_p),
        ("parallel_for", ctypes.c_void_p),
        ("parallel_pool", ctypes.c_void_p),
        ("cache_max_bytes", ctypes.c_uint64),
        ("cache_shared_group", ctypes.c_int32),
        ("target_options", ctypes.c_char_p),
        ("tuning", ctypes.c_char_p),
        ("trace", ctypes.c_void_p),
        ("trace_context", ctypes.c_void_p),
    ]


#: ternjit_kernel_fn: int32_t (*)(const void* state, void* const* buffers).
KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))

_handle = ctypes.c_void_p
_status = ctypes.c_int

# name -> (restype, argtypes)
_PROTOTYPES = {
    "ternjit_abi_version": (ctypes.c_uint32, []),
    "ternjit_version": (ctypes.c_char_p, []),
    "ternjit_has_feature": (ctypes.c_int, [ctypes.c_char_p]),
    "ternjit_feature_names": (ctypes.c_char_p, []),
    "ternjit_last_error": (ctypes.c_char_p, []),
    "ternjit_engine_options_init": (None, [ctypes.POINTER(EngineOptions)]),
    "ternjit_engine_options_init_sized": (None, [ctypes.POINTER(EngineOptions), ctypes.c_size_t]),
    "ternjit_engine_create": (_status, [ctypes.POINTER(EngineOptions), ctypes.POINTER(_handle)]),
    "ternjit_engine_create_from_env": (_status, [ctypes.POINTER(_handle)]),
    "ternjit_engine_destroy": (None, [_handle]),
    "ternjit_compile": (_status, [_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                  ctypes.POINTER(_handle)]),
    "ternjit_compile_grad": (_status, [_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, ctypes.c_uint32,
                                       ctypes.POINTER(_handle)]),
    "ternjit_program_destroy": (None, [_handle]),
    "ternjit_bind_weight": (_status, [_handle, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_int64), ctypes.c_int32]),
    "ternjit_bind_weight_sized": (_status, [_handle, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                            ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32]),
    "ternjit_bind_weights_file": (_status, [_handle, ctypes.c_char_p]),
    "ternjit_bind_weights_file_mapped": (_status, [_handle, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                                                   ctypes.c_size_t]),
    "ternjit_bind_random": (_status, [_handle, ctypes.c_uint64]),
    "ternjit_read_bitnet_config": (_status, [ctypes.c_char_p, ctypes.POINTER(BitNetConfig)]),
    "ternjit_write_synthetic_bitnet": (_status, [ctypes.c_char_p, ctypes.POINTER(BitNetConfig), ctypes.c_uint64]),
    "ternjit_bitnet_tri_source": (_status, [ctypes.POINTER(BitNetConfig), ctypes.c_int64, ctypes.c_char_p,
                                            ctypes.POINTER(ctypes.c_size_t)]),
    "ternjit_read_hf_bitnet_config": (_status, [ctypes.c_char_p, ctypes.POINTER(BitNetConfig),
                                                ctypes.POINTER(ctypes.c_int32)]),
    "ternjit_bind_hf_bitnet": (_status, [_handle, ctypes.c_char_p, ctypes.c_char_p]),
    "ternjit_run": (_status, [_handle, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_size_t,
                              ctypes.POINTER(Tensor), ctypes.c_size_t]),
    "ternjit_get_kernel": (_status, [_handle, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_size_t,
                                     ctypes.POINTER(_handle)]),
    "ternjit_kernel_num_outputs": (ctypes.c_size_t, [_handle]),
    "ternjit_kernel_output": (_status, [_handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int),
                                        ctypes.POINTER(ctypes.c_int32),
                                        ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))]),
    "ternjit_kernel_entry": (_status, [_handle, ctypes.POINTER(KERNEL_FN), ctypes.POINTER(ctypes.c_void_p)]),
    "ternjit_kernel_retain": (_status, [_handle]),
    "ternjit_kernel_release": (_status, [_handle]),
    "ternjit_kernel_device": (_status, [_handle, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
    "ternjit_kernel_launch": (_status, [_handle, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
}


# DLPack 1.x (ternjit.h declares the same layout).
class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# ternjit_tmatmul_desc / ternjit_tmatmul_args (ternjit.h, "the ternary matmul dispatch").
TMATMUL_ANY_M = -1
TMATMUL_WEIGHTS = {"tern2": 0, "tern1.6": 1, "tq2_0": 2, "tq1_0": 3, "q2_0": 4}
TMATMUL_X = {"f32": 0, "bf16": 1, "i8": 2, "f32_row_i8": 3}
TMATMUL_SCALES = {None: 0, "none": 0, "column": 1, "group": 2}
TMATMUL_ACTS = {None: 0, "none": 0, "relu": 1, "relu2": 2, "silu": 3, "gelu": 4}
TMATMUL_BIAS = 1
TMATMUL_RESIDUAL = 2


class TMatMulDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("m", ctypes.c_int64),
        ("m_max", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("weight", ctypes.c_int),
        ("x", ctypes.c_int),
        ("scale", ctypes.c_int),
        ("group", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
        ("act", ctypes.c_int),
        ("threads", ctypes.c_int32),
    ]


class TMatMulArgs(ctypes.Structure):
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("x_scale", ctypes.c_void_p),
        ("w", ctypes.c_void_p),
        ("w_scale", ctypes.c_void_p),
        ("bias", ctypes.c_void_p),
        ("residual", ctypes.c_void_p),
        ("y", ctypes.c_void_p),
        ("m", ctypes.c_int64),
    ]


#: ternjit_tmatmul_fn: int32_t (*)(const void* state, const ternjit_tmatmul_args* args).
TMATMUL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(TMatMulArgs))

# Added within ABI 2: declared where the library has them (an older ABI-2 library loads
# without them; the features "dlpack", "tmatmul-dispatch" and "tmatmul-bound" say which it has).
_OPTIONAL_PROTOTYPES = {
    "ternjit_run_dlpack": (_status, [_handle, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                     ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]),
    "ternjit_tensor_from_dlpack": (_status, [ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(Tensor)]),
    "ternjit_tmatmul_desc_init": (None, [ctypes.POINTER(TMatMulDesc)]),
    "ternjit_tmatmul_dispatch": (_status, [_handle, ctypes.POINTER(TMatMulDesc), ctypes.POINTER(TMATMUL_FN),
                                           ctypes.POINTER(ctypes.c_void_p)]),
    "ternjit_tmatmul_bind": (_status, [_handle, ctypes.POINTER(TMatMulDesc), ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "ternjit_tmatmul_bound_entry": (_status, [ctypes.c_void_p, ctypes.POINTER(TMATMUL_FN),
                                              ctypes.POINTER(ctypes.c_void_p)]),
    "ternjit_tmatmul_bound_bytes": (ctypes.c_size_t, [ctypes.c_void_p]),
    "ternjit_tmatmul_bound_destroy": (None, [ctypes.c_void_p]),
}

_lock = threading.Lock()
_lib = None
_lib_path = None


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def candidates():
    """The library paths/names tried, in order (see the module docstring)."""
    found = []
    env = os.environ.get("TERNJIT_LIBRARY")
    if env:
        found.append(env)
    here = _package_dir()
    found.append(os.path.join(here, "libternjit.so"))
    hint = os.path.join(here, "_library_path.txt")
    if os.path.isfile(hint):
        # Written by the install rule: the library directory relative to the package.
        with open(hint, encoding="utf-8") as f:
            rel = f.read().strip()
        if rel:
            libdir = os.path.normpath(os.path.join(here, rel))
            found.append(os.path.join(libdir, "libternjit.so"))
            # Without the development symlink, the versioned file (libternjit.so.1 ...).
            found.extend(sorted(glob.glob(os.path.join(libdir, "libternjit.so.*")), key=len))
    found.append("libternjit.so")
    found.append("libternjit.so.%d" % ABI_VERSION)
    system = ctypes.util.find_library("ternjit")
    if system:
        found.append(system)
    return found


def _declare(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in _OPTIONAL_PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes


def library():
    """The loaded library (a ctypes.CDLL); raises OSError naming every place tried."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        env = os.environ.get("TERNJIT_LIBRARY")
        for path in candidates():
            is_path = os.sep in path
            if is_path and not os.path.exists(path):
                tried.append("%s (no such file)" % path)
                if path == env:
                    # An explicit TERNJIT_LIBRARY that is wrong is an error, not a fallback.
                    break
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                if path == env:
                    break
                continue
            try:
                _declare(lib)
            except AttributeError as e:
                tried.append("%s (not a ternjit library: %s)" % (path, e))
                continue
            abi = lib.ternjit_abi_version()
            if abi != ABI_VERSION:
                raise OSError("%s has ABI version %d, this binding needs %d" % (path, abi, ABI_VERSION))
            _lib, _lib_path = lib, path
            return _lib
        raise OSError("cannot load libternjit.so; tried: " + "; ".join(tried) +
                      " (set TERNJIT_LIBRARY to the library's path)")


def library_path():
    """The path or name the library was loaded from (loads it if needed)."""
    library()
    return _lib_path

# SPDX-License-Identifier: Apache-2.0
# bitlinear_numpy.py - the BitLinear layer of tests/dsl/bitlinear.tri in numpy, and its tolerance.
"""The layer, as the .tri source and the reference interpreter define it::

    h = rmsnorm(x, gamma, 1e-5)   # computed in double, rounded once to f32
    q = quantize_int8(h)          # per row: s = max|h|/127 (f32), round_half_even(h/s) in
                                  # [-127, 127] (f32 division), times s
    y = relu((q @ w) * w_scale)   # w[K, N] in {-1, 0, 1}

Tolerance (see :func:`tolerance`): the int8 codes are exact integers, so the only
freedom left to a kernel is the order of the float operations after them, bounded by a
few f32 ulps of the magnitude ``(|q| @ |w|) * |w_scale|``. On top of that a kernel may
compute rmsnorm in f32 rather than in double (and a torch model does): h then moves by
an ulp or two, and where h/s lies within ~1e-5 of a rounding tie (x.5) its int8 code may
round the other way, by one step. Such near-tie elements are found from the model's own
h/s (:func:`flip_bound`, with a margin of 2e-4), and each one widens the tolerance of the
outputs it feeds by one step ``s[m] * |w[k, n]| * |w_scale[n]|``. Every other element must
agree to the f32 bound, so a real bug (a lost tail column, a wrong scale, a dropped K
element, one code off by one step away from a tie) is caught.
"""

import json
import struct

import numpy as np

EPS = 1e-5


def rmsnorm(x, gamma, eps=EPS):
    xd = np.asarray(x, np.float64)
    denom = np.sqrt(np.mean(xd * xd, axis=-1, keepdims=True) + eps)
    return (xd / denom * np.asarray(gamma, np.float64)).astype(np.float32)


def quantize_int8(h):
    """(codes as float32, per-row scales s as float32 [M, 1])."""
    h = np.asarray(h, np.float32)
    s = (np.max(np.abs(h), axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
    safe = np.where(s == 0, np.float32(1), s)
    codes = np.clip(np.round(h / safe), -127, 127).astype(np.float32)  # np.round: half to even
    codes = np.where(s == 0, np.float32(0), codes)
    return codes, s


#: How close to a rounding tie (in units of h/s) a value must be for its code to be
#: allowed to round either way.
TIE_MARGIN = 2e-4


def flip_bound(ratio, s, w, w_scale, margin=TIE_MARGIN):
    """[M, N] widening of the tolerance for codes that may round either way (see above).

    ratio: h/s [M, K] as the model computed it; s: [M, 1] row scales."""
    frac = np.abs(np.asarray(ratio, np.float64)) % 1.0
    near = (np.abs(frac - 0.5) < margin).astype(np.float64)
    scale = np.abs(np.asarray(w_scale, np.float64))
    return np.asarray(s, np.float64) * (near @ np.abs(np.asarray(w, np.float64))) * scale[None, :]


def bitlinear(x, gamma, w, w_scale):
    """(y [M, N] float32, magnitude [M, N], flip bound [M, N]) for :func:`compare`."""
    h = rmsnorm(x, gamma)
    codes, s = quantize_int8(h)
    hq = (codes * s).astype(np.float32)
    wd = np.asarray(w, np.float64)
    scale = np.asarray(w_scale, np.float64)
    y = np.maximum((hq.astype(np.float64) @ wd) * scale, 0.0)
    magnitude = (np.abs(hq).astype(np.float64) @ np.abs(wd)) * np.abs(scale)
    ratio = h / np.where(s == 0, np.float32(1), s)
    return y.astype(np.float32), magnitude, flip_bound(ratio, s, w, w_scale)


def tolerance(magnitude, flips, k):
    """Allowed |actual - expected| per element: f32 reordering, plus near-tie flips."""
    return (k + 8) * 2.0 ** -22 * magnitude + flips + 1e-30


def compare(actual, expected, magnitude, flips, k):
    """None if within tolerance, else a message naming the worst element."""
    actual = np.asarray(actual, np.float64)
    if actual.shape != np.shape(expected):
        return "shape %s, expected %s" % (actual.shape, np.shape(expected))
    if not np.all(np.isfinite(actual)):
        return "non-finite outputs"
    err = np.abs(actual - np.asarray(expected, np.float64))
    tol = tolerance(magnitude, flips, k)
    bad = err > tol
    if not np.any(bad):
        return None
    i = np.unravel_index(np.argmax(err - tol), err.shape)
    return "%d of %d elements off; worst at %s: got %r, expected %r, |err| %.3g > tol %.3g (near-tie part %.3g)" % (
        int(bad.sum()), err.size, tuple(int(v) for v in i), float(actual[i]), float(np.asarray(expected)[i]),
        float(err[i]), float(tol[i]), float(np.asarray(flips)[i]))


def random_layer(rng, m, k, n):
    """x [M, K], gamma [K], w [K, N] int8 ternary, w_scale [N]: float32 except w."""
    x = rng.standard_normal((m, k)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, k).astype(np.float32)
    w = rng.integers(-1, 2, (k, n)).astype(np.int8)
    w_scale = rng.uniform(0.01, 0.1, n).astype(np.float32)
    return x, gamma, w, w_scale


def pack_tern2(values):
    """Row-major {-1,0,1} -> tern2 bytes: code = v + 1, element i in bits 2*(i%4) of byte i/4."""
    flat = (np.asarray(values, np.int64).reshape(-1) + 1).astype(np.uint8)
    padded = np.zeros((flat.size + 3) // 4 * 4, np.uint8)
    padded[:flat.size] = flat
    quads = padded.reshape(-1, 4)
    return (quads[:, 0] | (quads[:, 1] << 2) | (quads[:, 2] << 4) | (quads[:, 3] << 6)).astype(np.uint8)


_ST_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8",
              np.dtype(np.float16): "F16", np.dtype(np.int32): "I32"}


def write_safetensors(path, tensors):
    """Writes {name: array} as a safetensors file."""
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        data = arr.tobytes()
        header[name] = {"dtype": _ST_DTYPES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)

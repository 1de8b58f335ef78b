# SPDX-License-Identifier: Apache-2.0
# test_dlpack.py - Program.run_dlpack, Engine.tmatmul_dispatch and tmatmul_bind on torch, numpy and jax arrays: zero copy, refusals.
"""Inputs and outputs go through DLPack 1.x: the library reads and writes the frameworks'
memory in place, checked by data pointer. Strided, float64, GPU-less device types and
read-only outputs are refused with INVALID_ARGUMENT. The dispatched kernel is checked
against numpy. Needs torch, numpy and jax (the pinned environment); SKIPPED without them."""

import harness

np = harness.require("numpy", "the arrays")
torch = harness.require("torch", "torch tensors through DLPack")
jax = harness.require("jax", "jax arrays through DLPack")
import jax.numpy as jnp  # noqa: E402

ternjit = harness.import_ternjit()

SOURCE = """
layer L {
    fn f(x: Tensor[M, K]) -> Tensor[M, K] {
        return relu(x) * 2
    }
}
"""


def program():
    engine = ternjit.Engine(cache_dir="off", threads=1)
    return engine, engine.compile(SOURCE)


def expected(x):
    return np.maximum(np.asarray(x), 0) * 2


def test_torch_in_out_zero_copy():
    _, p = program()
    x = torch.randn(3, 5)
    y = torch.full((3, 5), float("nan"))
    ptr = y.data_ptr()
    p.run_dlpack("L.f", [x], [y])
    harness.check(y.data_ptr() == ptr, "the output tensor was replaced")
    harness.check(np.array_equal(y.numpy(), expected(x.numpy())), "torch result differs")
    # The result viewed by numpy and jax without a copy.
    harness.check(np.from_dlpack(y).ctypes.data == ptr, "numpy.from_dlpack copied")


def test_numpy_and_jax_inputs():
    _, p = program()
    xn = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    xj = jnp.asarray(xn)
    for x in (xn, xj):
        y = np.full((4, 6), np.nan, dtype=np.float32)
        p.run_dlpack("L.f", [x], [y])
        harness.check(np.array_equal(y, expected(xn)), "result differs for %s" % type(x).__name__)
    # The library is handed jax's own buffer (no copy on the way in).
    lib = ternjit._capi.library()
    harness.check(ternjit._DLPack(xj, "x").view(lib, False)[0] == xj.unsafe_buffer_pointer(), "jax input copied")
    harness.check(ternjit._DLPack(xn, "x").view(lib, False)[0] == xn.ctypes.data, "numpy input copied")
    # A ternjit output consumed by jax: zero copy where jax takes the buffer as it is.
    y = np.zeros((4, 6), dtype=np.float32)
    p.run_dlpack("L.f", [xj], [y])
    yj = jnp.from_dlpack(y)
    harness.check(np.array_equal(np.asarray(yj), expected(xn)), "jax view differs")


def test_refusals():
    _, p = program()
    x = torch.randn(4, 6)
    y = torch.empty(4, 6)

    def refused(inputs, outputs, text):
        try:
            p.run_dlpack("L.f", inputs, outputs)
        except ternjit.Error as e:
            harness.check(e.status == ternjit.INVALID_ARGUMENT, "status %s for %s" % (e.status, text))
            harness.check(text in str(e), "message %r lacks %r" % (str(e), text))
            return
        raise harness.Failure("not refused: " + text)

    refused([x.t()], [torch.empty(6, 4)], "not contiguous row-major")
    refused([x[:, ::2]], [torch.empty(4, 3)], "not contiguous row-major")
    refused([x.double()], [y], "dtype")
    ro = np.zeros((4, 6), dtype=np.float32)
    ro.flags.writeable = False
    refused([x], [ro], "read-only")
    refused([x], [np.zeros((4, 6))], "dtype")  # float64 output
    refused([x], [jnp.zeros((4, 6), dtype=jnp.float32)], "read-only")  # jax arrays are immutable
    try:
        p.run_dlpack("L.f", [[1.0, 2.0]], [y])
        raise harness.Failure("a list was taken")
    except ternjit.Error as e:
        harness.check("DLPack" in str(e), str(e))


def tern2(values):
    flat = (values.reshape(-1).astype(np.int16) + 1).astype(np.uint8)
    flat = np.concatenate([flat, np.ones((-len(flat)) % 4, dtype=np.uint8)])
    q = flat.reshape(-1, 4)
    return (q[:, 0] | (q[:, 1] << 2) | (q[:, 2] << 4) | (q[:, 3] << 6)).astype(np.uint8)


def test_tmatmul_dispatch():
    engine = ternjit.Engine(cache_dir="off", threads=1)
    rng = np.random.default_rng(2)
    M, K, N = 3, 37, 11
    w = rng.integers(-1, 2, size=(K, N)).astype(np.int8)
    packed = tern2(w)
    xq = rng.integers(-127, 128, size=(M, K)).astype(np.int8)
    xs = rng.uniform(0.001, 0.02, size=(M,)).astype(np.float32)
    s = rng.uniform(0.5, 2, size=(N,)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    k = engine.tmatmul_dispatch(M, K, N, x="i8", scale="column", bias=True, act="relu")
    harness.check(k.state.value == engine.tmatmul_dispatch(M, K, N, x="i8", scale="column", bias=True,
                                                            act="relu").state.value, "a hit is another kernel")
    want = np.maximum((xq.astype(np.float64) @ w) * xs[:, None] * s + b, 0)
    # torch arrays in and out, the weight as a uint8 torch tensor.
    y = torch.full((M, N), float("nan"))
    k(torch.from_numpy(xq), torch.from_numpy(packed), y, x_scale=torch.from_numpy(xs),
      w_scale=torch.from_numpy(s), bias=torch.from_numpy(b))
    harness.check(np.allclose(y.numpy(), want, rtol=1e-5, atol=1e-5), "torch dispatch result differs")
    # jax inputs, numpy output.
    yn = np.full((M, N), np.nan, dtype=np.float32)
    k(jnp.asarray(xq), jnp.asarray(packed), yn, x_scale=jnp.asarray(xs), w_scale=jnp.asarray(s), bias=jnp.asarray(b))
    harness.check(np.allclose(yn, want, rtol=1e-5, atol=1e-5), "jax dispatch result differs")
    # Buffers of the wrong size or dtype never reach the kernel.
    for bad in ({"y": np.zeros((M, N - 1), np.float32)}, {"y": np.zeros((M, N), np.float64)},
                {"w": packed[:-1]}, {"bias": b[:-1]}):
        call = dict(x=xq, w=packed, y=yn, x_scale=xs, w_scale=s, bias=b)
        call.update(bad)
        try:
            k(**call)
            raise harness.Failure("not refused: %s" % list(bad))
        except ternjit.Error as e:
            harness.check(e.status == ternjit.INVALID_ARGUMENT, str(e))
    # A call missing the bias, and a refused descriptor.
    try:
        k(xq, packed, yn, x_scale=xs, w_scale=s)
        raise harness.Failure("a call without bias ran")
    except ternjit.Error as e:
        harness.check(e.status == ternjit.INVALID_ARGUMENT and "bias" in str(e), str(e))
    try:
        engine.tmatmul_dispatch(1, 256, 8, weight="tq2_0", scale="group", group=64)
        raise harness.Failure("a GGUF weight with a group scale was taken")
    except ternjit.Error as e:
        harness.check(e.status == ternjit.UNSUPPORTED, str(e))


def quantize_rows(x):
    """The IR's quantize_int8 per row: s = max|x| / 127 (f32), q = round half to even of x / s."""
    s = (np.abs(x).max(axis=1) / np.float32(127)).astype(np.float32)
    safe = np.where(s == 0, np.float32(1), s)
    q = np.clip(np.rint(x / safe[:, None]), -127, 127).astype(np.int8)
    return q, s


def test_tmatmul_bound():
    engine = ternjit.Engine(cache_dir="off", threads=1)
    rng = np.random.default_rng(3)
    M, K, N = 4, 37, 11
    w = rng.integers(-1, 2, size=(K, N)).astype(np.int8)
    s = rng.uniform(0.5, 2, size=(N,)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    packed = tern2(w)
    bound = engine.tmatmul_bind(torch.from_numpy(packed.copy()), None, K, N, w_scale=s.copy(), bias=jnp.asarray(b),
                                x="f32_row_i8", scale="column", m_max=M)
    harness.check(bound.bytes >= packed.size, "bytes %d below the packed weight" % bound.bytes)
    x = rng.standard_normal((M, K)).astype(np.float32)
    q, xs = quantize_rows(x)
    for m in (1, M):
        y = torch.full((m, N), float("nan"))
        bound(torch.from_numpy(x[:m]), y)
        want = (q[:m].astype(np.float64) @ w) * xs[:m, None] * s + b
        harness.check(np.allclose(y.numpy(), want, rtol=1e-5, atol=1e-5), "bound result differs at m = %d" % m)
    # GGUF Q2_0 per call: 18-byte blocks {f16 d; 16 bytes of 2-bit codes}, value code - 1.
    K2, N2 = 128, 3
    codes = rng.integers(0, 3, size=(N2, K2)).astype(np.uint8)
    d = np.array([0.5, 1.0, 2.0], dtype=np.float16)
    blocks = np.zeros((N2, K2 // 64, 18), dtype=np.uint8)
    for n in range(N2):
        for blk in range(K2 // 64):
            blocks[n, blk, :2] = np.frombuffer(d[n].tobytes(), np.uint8)
            c = codes[n, blk * 64:(blk + 1) * 64].reshape(16, 4)
            blocks[n, blk, 2:] = c[:, 0] | (c[:, 1] << 2) | (c[:, 2] << 4) | (c[:, 3] << 6)
    k = engine.tmatmul_dispatch(2, K2, N2, weight="q2_0")
    x2 = rng.standard_normal((2, K2)).astype(np.float32)
    y2 = np.full((2, N2), np.nan, dtype=np.float32)
    k(x2, blocks.reshape(-1), y2)
    want2 = x2.astype(np.float64) @ ((codes.astype(np.float64) - 1) * d.astype(np.float64)[:, None]).T
    harness.check(np.allclose(y2, want2, rtol=1e-5, atol=1e-4), "Q2_0 result differs")
    # A wrong-sized weight never reaches the library; a closed bound weight is refused.
    try:
        engine.tmatmul_bind(packed[:-1], 1, K, N)
        raise harness.Failure("a short weight was bound")
    except ternjit.Error as e:
        harness.check(e.status == ternjit.INVALID_ARGUMENT, str(e))
    bound.close()
    try:
        bound(x, torch.empty(M, N))
        raise harness.Failure("a closed bound weight ran")
    except ternjit.Error as e:
        harness.check(e.status == ternjit.INVALID_ARGUMENT, str(e))
    engine.tmatmul_bind(packed, 1, K, N)  # freed by the engine's close
    engine.close()


if __name__ == "__main__":
    harness.run([test_torch_in_out_zero_copy, test_numpy_and_jax_inputs, test_refusals, test_tmatmul_dispatch,
                 test_tmatmul_bound])

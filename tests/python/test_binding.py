# SPDX-License-Identifier: Apache-2.0
# test_binding.py - the numpy binding: BitLinear vs numpy on every CPU target, weights, kernels, errors.
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

np = harness.require("numpy", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()
import bitlinear_numpy as ref  # noqa: E402

BITLINEAR = os.path.join(harness.SOURCE_DIR, "tests", "dsl", "bitlinear.tri")
FORWARD = "BitLinear.forward"
# M = 1, 3, 16 with K and N that are not multiples of 4 or 8.
SHAPES = [(1, 37, 19), (3, 70, 13), (16, 45, 29), (2, 8, 4)]


def targets():
    """Engines to test: the reference, each available compiled target (spirv where a Vulkan
    device exists: lavapipe under ctest), and auto."""
    names = ["reference"] + [t for t in ("x86", "llvm", "spirv") if ternjit.has_feature("target:" + t)] + ["auto"]
    return names


def bind_layer(program, gamma, w, w_scale):
    program.bind("BitLinear.gamma", gamma)
    program.bind("BitLinear.w", w)
    program.bind("BitLinear.w_scale", w_scale)


def check_layer(y, x, gamma, w, w_scale, exact_codes, what):
    """exact_codes: the target rounds like the numpy model (the reference does), so no
    near-tie flips are allowed."""
    expected, magnitude, flips = ref.bitlinear(x, gamma, w, w_scale)
    check(y.dtype == np.float32, "%s: dtype %s" % (what, y.dtype))
    problem = ref.compare(y, expected, magnitude, 0 * flips if exact_codes else flips, x.shape[1])
    check(problem is None, "%s: %s" % (what, problem))


def test_version_and_features():
    check(ternjit.abi_version() == ternjit.ABI_VERSION == 2, "ABI %d" % ternjit.abi_version())
    check(re.fullmatch(r"\d+\.\d+\.\d+.*", ternjit.version()) is not None, "version %r" % ternjit.version())
    check(ternjit.has_feature("target:reference"), "no reference target")
    check(not ternjit.has_feature("no-such-feature"), "unknown feature reported present")
    feats = ternjit.features()
    check("target:reference" in feats and "safetensors" in feats, "features %s" % feats)
    # The list comes from the library: every target of its registry, present here or not.
    names = ternjit.feature_names()
    for t in ("reference", "x86", "llvm", "cuda", "hip", "spirv"):
        check("target:" + t in names, "target:%s missing from feature_names %s" % (t, names))
    check(set(feats) <= set(names) and len(names) == len(set(names)), "feature_names %s" % names)


def test_bitlinear_matches_numpy():
    rng = np.random.default_rng(5)
    for target in targets():
        engine = ternjit.Engine(target=target)
        for m, k, n in SHAPES:
            program_k = engine.compile_file(BITLINEAR)  # weights are bound once per program
            x, gamma, w, w_scale = ref.random_layer(rng, m, k, n)
            bind_layer(program_k, gamma, w, w_scale)
            y = program_k.run(FORWARD, x)
            check(y.shape == (m, n), "%s: shape %s" % (target, y.shape))
            # The reference interpreter rounds exactly as the numpy model: no near-tie flips.
            check_layer(y, x, gamma, w, w_scale, target == "reference",
                        "target %s M=%d K=%d N=%d" % (target, m, k, n))
            # Other row counts on the same bound weights: a specialization per shape.
            for m2 in (1, 5):
                x2 = rng.standard_normal((m2, k)).astype(np.float32)
                check_layer(program_k.run(FORWARD, x2), x2, gamma, w, w_scale, target == "reference",
                            "target %s M=%d K=%d N=%d" % (target, m2, k, n))


def test_inputs_are_converted_not_mutated():
    rng = np.random.default_rng(6)
    x, gamma, w, w_scale = ref.random_layer(rng, 3, 37, 19)
    program = ternjit.Engine(target="reference").compile_file(BITLINEAR)
    # float64 gamma/scale become float32; a non-contiguous x (a transposed view) is copied.
    program.bind("BitLinear.gamma", gamma.astype(np.float64))
    program.bind("BitLinear.w", w.astype(np.int64), dtype="t2")
    program.bind("BitLinear.w_scale", w_scale.astype(np.float64))
    xt = np.asfortranarray(x)
    before = xt.copy()
    y = program.run(FORWARD, xt)
    check(np.array_equal(xt, before), "input modified")
    check_layer(y, x, gamma, w, w_scale, True, "converted inputs")
    # run(out=...) writes into the caller's array.
    out = np.full((3, 19), np.nan, np.float32)
    got = program.run(FORWARD, x, out=out)
    check(got is out and np.array_equal(out, y), "out= not used")


def test_packed_random_and_file_weights_agree_with_plain():
    rng = np.random.default_rng(7)
    m, k, n = 3, 45, 29
    x, gamma, w, w_scale = ref.random_layer(rng, m, k, n)
    engine = ternjit.Engine(target="auto")
    plain = engine.compile_file(BITLINEAR)
    bind_layer(plain, gamma, w, w_scale)
    y_plain = plain.run(FORWARD, x)

    packed = engine.compile_file(BITLINEAR)
    packed.bind("BitLinear.gamma", gamma)
    packed.bind("BitLinear.w", ref.pack_tern2(w), format="tern2", shape=(k, n))
    packed.bind("BitLinear.w_scale", w_scale)
    check(np.array_equal(packed.run(FORWARD, x), y_plain), "tern2-packed weights differ from plain ones")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bitlinear.safetensors")
        ref.write_safetensors(path, {"BitLinear.gamma": gamma, "BitLinear.w": w, "w_scale": w_scale})
        from_file = engine.compile_file(BITLINEAR)
        from_file.bind_file(path)
        check(np.array_equal(from_file.run(FORWARD, x), y_plain), "safetensors weights differ from plain ones")

    # bind_random fills what is unbound, deterministically per seed.
    outs = []
    for _ in range(2):
        p = engine.compile_file(BITLINEAR)
        p.bind("BitLinear.gamma", gamma)
        p.bind("BitLinear.w_scale", w_scale)
        p.bind_random(11)
        outs.append(p.run(FORWARD, x))
    check(np.array_equal(outs[0], outs[1]), "bind_random(11) is not deterministic")


def test_kernel_entry_point():
    rng = np.random.default_rng(8)
    m, k, n = 3, 70, 13
    x, gamma, w, w_scale = ref.random_layer(rng, m, k, n)
    program = ternjit.Engine().compile_file(BITLINEAR)
    bind_layer(program, gamma, w, w_scale)
    kernel = program.kernel(FORWARD, ternjit.TensorSpec((m, k), "f32"))
    check(kernel.inputs == [ternjit.TensorSpec((m, k), "f32")], "inputs %s" % kernel.inputs)
    check(kernel.outputs == [ternjit.TensorSpec((m, n), "f32")], "outputs %s" % kernel.outputs)
    check(kernel.fn_address and kernel.state, "null entry point or state")
    check(program.kernel(FORWARD, x) is kernel, "same shapes gave another kernel")
    y = kernel(x)
    check(np.array_equal(y, program.run(FORWARD, x)), "kernel call differs from run")
    # The raw calling convention: inputs then outputs, as plain data pointers.
    out = np.zeros((m, n), np.float32)
    kernel.call_pointers([x.ctypes.data, out.ctypes.data])
    check(np.array_equal(out, y), "call_pointers differs")
    try:
        kernel(x[:, :-1])
        check(False, "a wrong shape reached the raw kernel")
    except ternjit.Error as e:
        check(e.status == ternjit.INVALID_ARGUMENT and "[3, 70]" in e.message, repr(e))


def test_kernel_outlives_its_program():
    # Issue 33: a kernel called after its program (and engine) were destroyed corrupted the
    # heap; it now holds a reference to what it runs.
    rng = np.random.default_rng(81)
    m, k, n = 2, 40, 9
    x, gamma, w, w_scale = ref.random_layer(rng, m, k, n)
    engine = ternjit.Engine(target="reference", cache_dir="off")
    program = engine.compile_file(BITLINEAR)
    bind_layer(program, gamma, w, w_scale)
    y = program.run(FORWARD, x)
    kernel = program.kernel(FORWARD, ternjit.TensorSpec((m, k), "f32"))
    fn, state = kernel.fn, kernel.state
    program.close()
    engine.close()
    del program, engine
    check(np.array_equal(kernel(x), y), "kernel after its program was closed differs")
    out = np.zeros((m, n), np.float32)
    buffers = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)
    check(fn(state, buffers) == ternjit.OK and np.array_equal(out, y), "raw entry after close differs")


def test_threads_share_a_program():
    rng = np.random.default_rng(9)
    k, n = 37, 19
    _, gamma, w, w_scale = ref.random_layer(rng, 1, k, n)
    program = ternjit.Engine().compile_file(BITLINEAR)
    bind_layer(program, gamma, w, w_scale)
    xs = [rng.standard_normal((1 + i % 4, k)).astype(np.float32) for i in range(16)]
    expected = [program.run(FORWARD, x) for x in xs]
    errors = []

    def worker(t):
        try:
            for rep in range(5):
                i = (t * 5 + rep) % len(xs)
                if not np.array_equal(program.run(FORWARD, xs[i]), expected[i]):
                    errors.append("thread %d: input %d differs" % (t, i))
        except Exception as e:  # collected for the main thread
            errors.append("thread %d: %r" % (t, e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "; ".join(errors))


def write_gguf_tq2(path, name, w, d):
    """A GGUF v3 file holding one TQ2_0 tensor `name`, dims (K, N) = w.shape, row n (ggml's
    N rows of K) = w[:, n], block scale d[n] (packed here, independently of the library)."""
    import struct
    k, n = w.shape
    info = struct.pack("<Q", len(name)) + name.encode() + struct.pack("<IQQIQ", 2, k, n, 35, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + info
    head += b"\0" * (-len(head) % 32)
    data = bytearray()
    for col in range(n):
        row = w[:, col].astype(np.int64) + 1
        for b in range(k // 256):
            vals = row[256 * b:256 * b + 256]
            for j in range(2):
                for m in range(32):
                    data.append(sum(int(vals[128 * j + 32 * l + m]) << (2 * l) for l in range(4)))
            data += np.float16(d[col]).tobytes()
    with open(path, "wb") as f:
        f.write(head + bytes(data))


def test_gguf_file_and_sized_bind():
    rng = np.random.default_rng(12)
    m, k, n = 2, 256, 5
    x, gamma, w, _ = ref.random_layer(rng, m, k, n)
    d = np.array([0.5, 0.25, 1.0, 2.0, 0.125], np.float32)
    engine = ternjit.Engine(target="auto")
    plain = engine.compile_file(BITLINEAR)
    bind_layer(plain, gamma, w, d)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.bin")  # GGUF by content, whatever the name
        write_gguf_tq2(path, "blk.0.w", w, d)
        p = engine.compile_file(BITLINEAR)
        p.bind("BitLinear.gamma", gamma)
        p.bind_file(path, map=["blk.{i}.w=BitLinear.w"])
        check(np.array_equal(p.run(FORWARD, x), plain.run(FORWARD, x)), "GGUF weights differ from plain ones")
        unmapped = engine.compile_file(BITLINEAR)
        expect_error(lambda: unmapped.bind_file(path), ternjit.INVALID_INPUT, "holds none of the program's parameters")
    # The library itself checks a packed buffer's length (ternjit_bind_weight_sized).
    fresh = engine.compile_file(BITLINEAR)
    code = fresh._lib.ternjit_bind_weight_sized(
        fresh._live_handle(), b"BitLinear.w", np.zeros(10, np.uint8).ctypes.data, 10, 4, 1,
        (ctypes.c_int64 * 2)(64, 16), 2)
    check(code == ternjit.INVALID_ARGUMENT, "sized bind of a short buffer returned %d" % code)


def expect_error(fn, status, *fragments):
    try:
        fn()
    except ternjit.Error as e:
        check(status is None or e.status == status,
              "status %s (%s), expected %s: %s" % (e.status, e.status_name, status, e.message))
        for f in fragments:
            if hasattr(f, "search"):
                check(f.search(e.message), "message %r lacks %r" % (e.message, f.pattern))
            else:
                check(f in e.message, "message %r lacks %r" % (e.message, f))
        return e
    raise harness.Failure("no ternjit.Error raised")


def test_bad_source_reports_file_line_col():
    engine = ternjit.Engine(target="reference")
    bad = "layer L {\n    fn forward(x: Tensor[N]) -> Tensor[N] {\n        return x +* 2\n    }\n}\n"
    e = expect_error(lambda: engine.compile(bad, "bad.tri"), ternjit.INVALID_INPUT,
                     re.compile(r"bad\.tri:3:\d+: error: "))
    check("^" in e.message, "no caret line in %r" % e.message)
    unknown = "layer L {\n    fn forward(x: Tensor[N]) -> Tensor[N] {\n        return relu(y)\n    }\n}\n"
    expect_error(lambda: engine.compile(unknown, "unknown.tri"), ternjit.INVALID_INPUT,
                 re.compile(r"unknown\.tri:3:\d+: error: .*'y'"))
    expect_error(lambda: engine.compile_file("/nonexistent/x.tri"), ternjit.IO_ERROR, "/nonexistent/x.tri")


def test_wrong_shapes_and_names_are_clear():
    rng = np.random.default_rng(10)
    m, k, n = 3, 37, 19
    x, gamma, w, w_scale = ref.random_layer(rng, m, k, n)
    program = ternjit.Engine(target="reference").compile_file(BITLINEAR)
    bind_layer(program, gamma, w, w_scale)
    # K of x disagrees with the bound weights.
    e = expect_error(lambda: program.run(FORWARD, x[:, :-1].copy()), None, "36")
    check(e.status in (ternjit.INVALID_INPUT, ternjit.INVALID_ARGUMENT), repr(e))
    check("37" in e.message or "K" in e.message, "message %r names neither K nor 37" % e.message)
    # Rank and arity.
    expect_error(lambda: program.run(FORWARD, x[0]), None, "x")
    expect_error(lambda: program.run(FORWARD), None)
    expect_error(lambda: program.run(FORWARD, x, x), None)
    # Unknown names.
    expect_error(lambda: program.run("BitLinear.backward", x), ternjit.NOT_FOUND, "BitLinear.backward")
    expect_error(lambda: program.bind("BitLinear.nope", gamma), ternjit.NOT_FOUND, "nope")
    # Weights that contradict the declaration.
    fresh = ternjit.Engine(target="reference").compile_file(BITLINEAR)
    fresh.bind("BitLinear.gamma", gamma)
    expect_error(lambda: fresh.bind("BitLinear.w", np.full((k, n), 2, np.int8)), ternjit.INVALID_INPUT)
    expect_error(lambda: fresh.bind("BitLinear.w", np.zeros((k + 1, n), np.int8)), None, "BitLinear.w")
    # Misuse caught in Python.
    expect_error(lambda: fresh.bind("BitLinear.w", w.astype(np.int64)), ternjit.INVALID_ARGUMENT, "int64")
    expect_error(lambda: fresh.bind("BitLinear.w", ref.pack_tern2(w), format="tern2"), ternjit.INVALID_ARGUMENT,
                 "shape")
    expect_error(lambda: fresh.bind("BitLinear.w", w, format="tern3"), ternjit.INVALID_ARGUMENT, "tern3")
    # A packed buffer shorter (or longer) than the shape needs is refused, never read past.
    expect_error(lambda: fresh.bind("BitLinear.w", ref.pack_tern2(w)[:10], format="tern2", shape=(k, n)),
                 ternjit.INVALID_ARGUMENT, "got 10")
    expect_error(lambda: fresh.bind("BitLinear.w", w.astype(np.int64) * 200, dtype="t2"),
                 ternjit.INVALID_ARGUMENT, "do not fit")


def test_engine_options_and_lifetime():
    expect_error(lambda: ternjit.Engine(target="no-such-target"), None, "no-such-target")
    expect_error(lambda: ternjit.Engine(target="reference", cache_dir="off", target_options="x86.max_iza=avx2"),
                 ternjit.INVALID_ARGUMENT, "unknown x86 option 'max_iza'")
    expect_error(lambda: ternjit.Engine(target="reference", cache_dir="off", tuning="sometimes"),
                 ternjit.INVALID_ARGUMENT, "tuning")
    ternjit.Engine(target="reference", cache_dir="off", target_options="x86.max_isa=avx2", tuning="cached").close()
    saved = {v: os.environ.get(v) for v in ("TERNJIT_TARGET", "TERNJIT_OPT_LEVEL")}
    try:
        os.environ["TERNJIT_TARGET"] = "reference"
        os.environ["TERNJIT_OPT_LEVEL"] = "banana"
        expect_error(ternjit.Engine.from_env, None, "TERNJIT_OPT_LEVEL")
        os.environ["TERNJIT_OPT_LEVEL"] = "1"
        engine = ternjit.Engine.from_env()
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
    program = engine.compile_file(BITLINEAR)
    del engine  # the program keeps its engine alive
    rng = np.random.default_rng(12)
    x, gamma, w, w_scale = ref.random_layer(rng, 1, 8, 4)
    bind_layer(program, gamma, w, w_scale)
    check_layer(program.run(FORWARD, x), x, gamma, w, w_scale, True, "engine from env")
    kernel = program.kernel(FORWARD, x)
    program.engine.close()  # closes its programs first
    check(program.closed, "engine.close() left its program open")
    expect_error(lambda: program.run(FORWARD, x), ternjit.INVALID_ARGUMENT, "closed")
    # A kernel holds what it runs: it still computes the layer after the close.
    check_layer(kernel(x), x, gamma, w, w_scale, True, "kernel after engine.close()")


DTYPES_SOURCE = """
layer D {
    fn forward(a: Tensor<f16>[N], b: Tensor<bf16>[N], c: Tensor<i32>[N], d: Tensor<i8>[N]) -> Tensor<f16>[N] {
        return a + cast<f16>(b) + cast<f16>(c) + cast<f16>(d)
    }
    fn ints(c: Tensor<i32>[N], d: Tensor<i8>[N]) -> Tensor<i32>[N] {
        return c * cast<i32>(d)
    }
}
"""


def test_dtypes_in_and_out():
    program = ternjit.Engine(target="reference").compile(DTYPES_SOURCE, "dtypes.tri")
    a = np.array([1.5, 2.0, -0.5], np.float16)
    b = ternjit.to_bf16([0.25, 1.0, 8.0])  # bf16 travels as uint16 bit patterns
    c = np.array([1, 2, -7], np.int32)
    d = np.array([-3, 4, 127], np.int8)
    y = program.run("D.forward", a, b, c, d)
    check(y.dtype == np.float16 and np.array_equal(y, np.array([-0.25, 9.0, 127.5], np.float16)), "f16 %s" % y)
    z = program.run("D.ints", c, d)
    check(z.dtype == np.int32 and np.array_equal(z, np.array([-3, 8, -889], np.int32)), "i32 %s" % z)
    kernel = program.kernel("D.forward", *[ternjit.TensorSpec([3], t) for t in ("f16", "bf16", "i32", "i8")])
    check(kernel.outputs == [ternjit.TensorSpec([3], "f16")], "outputs %s" % kernel.outputs)
    check(np.array_equal(kernel(a, b, c, d), y), "kernel call")
    # A declared bf16 input given float32 is refused by the library, naming the input.
    e = expect_error(lambda: program.run("D.forward", a, ternjit.from_bf16(b), c, d), None, "'b'")
    check("bf16" in e.message and "f32" in e.message, "message %r" % e.message)


def test_verbose_option_reaches_the_library():
    code = ("import sys, ternjit; ternjit.Engine(target='reference', verbose=sys.argv[1] == '1')"
            ".compile_file(sys.argv[2])")
    env = dict(os.environ)
    env.pop("TERNJIT_VERBOSE", None)
    for flag in ("0", "1"):
        done = subprocess.run([sys.executable, "-c", code, flag, BITLINEAR], env=env, capture_output=True, text=True)
        check(done.returncode == 0, "exit %d: %s" % (done.returncode, done.stderr))
        check(("ternjit_verbose,compile" in done.stderr) == (flag == "1"), "verbose=%s: %r" % (flag, done.stderr))


def test_bf16_helpers():
    values = np.array([1.0, -2.5, 3.140625, 1e-3, 65504.0, -0.0], np.float32)
    bits = ternjit.to_bf16(values)
    check(bits.dtype == np.uint16 and bits[0] == 0x3F80 and bits[1] == 0xC020, "bits %s" % bits)
    back = ternjit.from_bf16(bits)
    check(np.all(np.abs(back - values) <= np.abs(values) * 2.0 ** -8), "round trip %s" % back)
    check(np.isnan(ternjit.from_bf16(ternjit.to_bf16(np.float32("nan")))), "NaN lost")
    check(np.isinf(ternjit.from_bf16(ternjit.to_bf16(np.float32("inf")))), "inf lost")
    # Ties round to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    check(ternjit.to_bf16(np.float32(1 + 2.0 ** -8)) == 0x3F80, "tie not to even")


def test_out_refusals_say_which_property():
    """Each out= refusal names the property that failed, with expected and got."""
    rng = np.random.default_rng(3)
    x, gamma, w, w_scale = ref.random_layer(rng, 3, 45, 19)
    program = ternjit.Engine(target="reference").compile_file(BITLINEAR)
    bind_layer(program, gamma, w, w_scale)

    def refusal(out, *expected):
        try:
            program.run(FORWARD, x, out=out)
        except ternjit.Error as e:
            for text in expected:
                check(text in str(e), "out= refusal %r lacks %r" % (str(e), text))
            return
        raise harness.Failure("out=%r was accepted" % (type(out),))

    class DeviceTensor:  # what a GPU framework's tensor looks like to the binding
        device = "cuda:0"

    refusal([DeviceTensor()], "out 0 of 'BitLinear.forward'", "expected a numpy.ndarray in host memory",
            "got __main__.DeviceTensor on device cuda:0")
    refusal([(0.0,) * 19] * 3, "'BitLinear.forward' has 1 results, got 3 out arrays")
    refusal(np.zeros((3, 19), np.float64), "dtype: expected float32, got float64")
    refusal(np.zeros((3, 18), np.float32), "shape: expected [3, 19], got [3, 18]")
    refusal(np.zeros((3, 19), np.float32, order="F"), "strides: expected C-contiguous [76, 4] (bytes), got [4, 12]")
    read_only = np.zeros((3, 19), np.float32)
    read_only.flags.writeable = False
    refusal(read_only, "writable: expected a writable array, got a read-only one")
    unaligned = np.frombuffer(bytearray(3 * 19 * 4 + 1), np.float32, count=3 * 19, offset=1).reshape(3, 19)
    check(unaligned.flags.writeable and not unaligned.flags.aligned, "the test array is not what it should be")
    refusal(unaligned, "alignment: expected data aligned to 4 bytes (its element size)", "(1 past)")

    two = ternjit.Engine(target="reference").compile(
        "layer T {\n    fn forward(x: Tensor[4]) -> (Tensor[4], Tensor[4]) {\n"
        "        return (x * 2.0, x + 1.0)\n    }\n}\n")
    v = np.arange(4, dtype=np.float32)
    shared = np.zeros(8, np.float32)
    try:
        two.run("T.forward", v, out=[shared[:4], shared[2:6]])
        raise harness.Failure("overlapping outs were accepted")
    except ternjit.Error as e:
        check("out 1 of 'T.forward' overlaps out 0: expected separate memory" in str(e), str(e))
    kernel = two.kernel("T.forward", v)
    buf = np.zeros(8, np.float32)
    buf[:4] = v
    try:
        kernel(buf[:4], out=[buf[1:5], np.zeros(4, np.float32)])
        raise harness.Failure("an out partly overlapping an input was accepted")
    except ternjit.Error as e:
        check("out 0 of kernel 'T.forward' partly overlaps input 0" in str(e), str(e))
    a, b = two.run("T.forward", v, out=[np.zeros(4, np.float32), np.zeros(4, np.float32)])
    check(np.array_equal(a, v * 2) and np.array_equal(b, v + 1), "valid outs: %s %s" % (a, b))


def test_compile_grad():
    # y = x * w elementwise: dx = dy * w and dw = dy * x exactly; errors are ternjit.Error.
    src = "layer P {\n    fn forward(x: Tensor[N], w: Tensor[N]) -> Tensor[N] {\n        return x * w\n    }\n}\n"
    engine = ternjit.Engine(target="reference", cache_dir="off")
    prog = engine.compile_grad(src, "P.forward", wrt=["w", "x"])
    x = np.array([1.0, -2.0, 0.5], np.float32)
    w = np.array([0.25, 4.0, -1.0], np.float32)
    dy = np.array([2.0, -1.0, 8.0], np.float32)
    check(np.array_equal(prog.run("P.forward.fwd", x, w), x * w), "fwd is the forward")
    dw, dx = prog.run("P.forward.bwd", x, w, dy)
    check(np.array_equal(dw, dy * x) and np.array_equal(dx, dy * w), "gradients %s %s" % (dw, dx))
    # An (array, dtype) input is converted to that dtype.
    check(np.array_equal(prog.run("P.forward.fwd", (np.array([1, 2, 3], np.int32), "f32"), w),
                         np.array([1, 2, 3], np.float32) * w), "(array, dtype) input")
    for function, wrt, status in (("P.nope", [], ternjit.NOT_FOUND), ("P.forward", ["nope"], ternjit.INVALID_INPUT)):
        try:
            engine.compile_grad(src, function, wrt=wrt)
            check(False, "compile_grad(%s, %s) did not fail" % (function, wrt))
        except ternjit.Error as e:
            check(e.status == status, "compile_grad(%s, %s): status %s: %s" % (function, wrt, e.status, e))


if __name__ == "__main__":
    harness.run([test_version_and_features, test_bitlinear_matches_numpy, test_inputs_are_converted_not_mutated,
                 test_packed_random_and_file_weights_agree_with_plain, test_kernel_entry_point,
                 test_kernel_outlives_its_program,
                 test_threads_share_a_program, test_bad_source_reports_file_line_col,
                 test_wrong_shapes_and_names_are_clear, test_engine_options_and_lifetime, test_dtypes_in_and_out,
                 test_verbose_option_reaches_the_library, test_bf16_helpers, test_gguf_file_and_sized_bind, test_compile_grad,
                 test_out_refusals_say_which_property])

# SPDX-License-Identifier: Apache-2.0
# test_bitnet.py - llama.cpp `bitnet` files through the Python API: the synthetic writer, the
# configuration read back, and its ternary projections bound with the name map, checked
# against an independent numpy decoding of the file's TQ2_0 blocks and f32 norms.
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

np = harness.require("numpy", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()

TINY = {"blocks": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 512, "vocab": 50, "context": 64}


def read_gguf(path):
    """A minimal, independent GGUF v3 reader: metadata keys and tensor infos -> (dims, type, bytes)."""
    data = open(path, "rb").read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, data, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = take("Q")
        s = data[pos[0]:pos[0] + n].decode()
        pos[0] += n
        return s

    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(sizes[t])

    check(data[:4] == b"GGUF", "magic")
    pos[0] = 4
    check(take("I") == 3, "version 3")
    n_tensors, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    start = (pos[0] + 31) // 32 * 32
    tensors = {name: (dims, ty, data[start + off:]) for name, dims, ty, off in infos}
    return meta, tensors


def tq2_0(dims, raw):
    """TQ2_0 (K, N) -> values int8 [N, K] and the f16 block scales [N, K / 256]
    (byte 32 j + m, bits 2 l: element 128 j + 32 l + m, code = value + 1; d last)."""
    k, n = dims
    blocks = np.frombuffer(raw[:n * k // 256 * 66], dtype=np.uint8).reshape(n, k // 256, 66)
    qs = blocks[:, :, :64].reshape(n, k // 256, 2, 32)
    vals = np.empty((n, k // 256, 2, 4, 32), dtype=np.int8)
    for l in range(4):
        vals[:, :, :, l, :] = ((qs >> (2 * l)) & 3).astype(np.int8) - 1
    d = blocks[:, :, 64:66].copy().view(np.float16).reshape(n, k // 256).astype(np.float32)
    return vals.reshape(n, k), d


def main():
    check(ternjit.has_feature("bitnet-gguf"), "the library has the bitnet-gguf feature")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.gguf")
        ternjit.write_synthetic_bitnet(path, TINY, seed=11)
        cfg = ternjit.read_bitnet_config(path)
        for k, v in TINY.items():
            check(cfg[k] == v, "config %s: %r == %r" % (k, cfg[k], v))
        check(cfg["rope_theta"] == 500000.0, "rope theta")
        meta, tensors = read_gguf(path)
        check(meta["general.architecture"] == "bitnet", "architecture")
        check(meta["bitnet.block_count"] == 2 and meta["bitnet.attention.head_count_kv"] == 2, "block and kv head counts")
        check(len(meta["tokenizer.ggml.tokens"]) == 50, "the vocabulary")
        check(tensors["token_embd.weight"][0] == [256, 50] and tensors["token_embd.weight"][1] == 1, "token_embd F16 (E, V)")
        check(tensors["blk.1.ffn_down.weight"][0] == [512, 256] and tensors["blk.1.ffn_down.weight"][1] == 35,
              "ffn_down TQ2_0 (F, E)")

        # blk.1.ffn_down bound as L1.w through the name map, and blk.1.attn_sub_norm... of
        # width 256 as L1.gamma: y = relu((quantize(rmsnorm(x)) @ w) * w_scale) vs numpy.
        vals, d = tq2_0(*[tensors["blk.1.attn_output.weight"][i] for i in (0, 2)])
        check(np.all(d == d[0, 0]), "one scale per tensor")
        gamma = np.frombuffer(tensors["blk.1.attn_sub_norm.weight"][2][:256 * 4], dtype=np.float32)
        engine = ternjit.Engine(target="reference", cache_dir="off")
        program = engine.compile(open(os.path.join(harness.SOURCE_DIR, "tests", "dsl", "bitlinear.tri")).read())
        program.bind_file(path, map=["blk.1.attn_output.weight=BitLinear.w", "blk.1.attn_sub_norm.weight=BitLinear.gamma"])
        rng = np.random.default_rng(3)
        x = rng.standard_normal((3, 256)).astype(np.float32)
        y = program.run("BitLinear.forward", x)
        # numpy: rmsnorm in float64, absmax int8 quantization, the exact integer product.
        h = x.astype(np.float64) / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + 1e-5) * gamma
        s = np.max(np.abs(h), axis=1, keepdims=True) / 127.0
        q = np.clip(np.round(h / s), -127, 127)
        want = np.maximum((q @ vals.T.astype(np.float64)) * s * d[:, 0][None, :], 0)
        # Tolerance: the int8 codes may differ by one at a rounding tie of f32 vs float64
        # arithmetic (each such flip moves a dot by at most s * 1); the rest is f32 rounding
        # of sums of |q| <= 127 * 256 terms: 1e-3 relative, plus 2 codes' worth absolute.
        err = np.abs(y - want)
        tol = 1e-3 * np.abs(want) + 2 * s * d[0, 0] + 1e-6
        check(np.all(err <= tol), "BitLinear on the bound file vs numpy (max err %g)" % err.max())
        check(np.count_nonzero(want) > 0, "a non-trivial output")
        check(ternjit.bitnet_name_map("M")[2] == "blk.{i}.attn_norm.weight=M.blk.{i}.attn_norm", "name map")
        try:
            ternjit.write_synthetic_bitnet(os.path.join(tmp, "bad.gguf"), dict(TINY, hidden=64))
            check(False, "hidden 64 refused")
        except ternjit.Error as e:
            check("multiples of 256" in str(e), "the refusal says why: %s" % e)
        activation(tmp)
        config_checked(tmp)
    kv_in_place()
    print("ok")


def activation(tmp):
    """The FFN gate through the C ABI: written and read back as bitnet.hidden_activation; a
    caller's struct without the field (ABI 2's size) reads relu^2 files and is refused a silu
    one rather than told relu^2; an unknown value is refused by name."""
    import ctypes
    from ternjit import _capi
    check(ternjit.has_feature("bitnet-activation"), "the library has the bitnet-activation feature")
    silu = os.path.join(tmp, "silu.gguf")
    ternjit.write_synthetic_bitnet(silu, dict(TINY, ffn_activation="silu"), seed=2)
    check(ternjit.read_bitnet_config(silu)["ffn_activation"] == "silu", "silu read back")
    check(read_gguf(silu)[0]["bitnet.hidden_activation"] == "silu", "the key in the file")
    relu = os.path.join(tmp, "tiny.gguf")
    check(ternjit.read_bitnet_config(relu)["ffn_activation"] == "relu2", "relu2 by default")
    check("silu(" in ternjit.bitnet_tri_source(dict(TINY, ffn_activation="silu"), 8), "silu gate in the source")
    check("square(relu(" in ternjit.bitnet_tri_source(TINY, 8), "relu^2 gate in the source")
    lib = ternjit._lib()
    old_size = _capi.BitNetConfig.ffn_activation.offset  # ABI 2's struct ended at rms_eps
    c = _capi.BitNetConfig()
    c.struct_size = old_size
    c.ffn_activation = 7  # past an old caller's struct: never read nor written
    check(lib.ternjit_read_bitnet_config(relu.encode(), ctypes.byref(c)) == 0 and c.ffn_activation == 7,
          "an old-size struct reads a relu^2 file and nothing past its size")
    check(lib.ternjit_read_bitnet_config(silu.encode(), ctypes.byref(c)) == ternjit.INVALID_ARGUMENT,
          "an old-size struct cannot say silu: refused")
    try:
        ternjit.write_synthetic_bitnet(os.path.join(tmp, "bad.gguf"), dict(TINY, ffn_activation="gelu"))
        check(False, "gelu refused")
    except ternjit.Error as e:
        check("ffn_activation" in str(e), "the refusal names the key: %s" % e)
    c = _capi.BitNetConfig(ctypes.sizeof(_capi.BitNetConfig), 2, 256, 4, 2, 512, 50, 64, 500000.0, 1e-5, 2)
    check(lib.ternjit_write_synthetic_bitnet(os.path.join(tmp, "bad2.gguf").encode(), ctypes.byref(c), 1)
          == ternjit.INVALID_ARGUMENT, "ffn_activation 2 refused by the C ABI")


def config_checked(tmp):
    """Every entry that takes a configuration checks it first, as reading a GGUF file does
    (issue 33, item 1): heads 0, or hidden INT64_MIN with heads -1, once killed the process
    with SIGFPE in bitnet_tri_source; an int past int64 once wrapped silently in ctypes."""
    import ctypes
    from ternjit import _capi
    lib = ternjit._lib()
    bad = [(dict(TINY, heads=0), "head_count = 0"),
           (dict(TINY, hidden=-(1 << 63), heads=-1), "embedding_length = -9223372036854775808"),
           (dict(TINY, kv_heads=0), "head_count_kv = 0"),
           (dict(TINY, rope_theta=0.0), "rope.freq_base"),
           (dict(TINY, hidden=(1 << 64) + 256), "is not an int64"),
           (dict(TINY, heads=4.5), "is not an int64")]
    for config, needle in bad:
        for name, call in (("bitnet_tri_source", lambda: ternjit.bitnet_tri_source(config, 8)),
                           ("write_synthetic_bitnet",
                            lambda: ternjit.write_synthetic_bitnet(os.path.join(tmp, "never.gguf"), config))):
            try:
                call()
                check(False, "%s refuses %s" % (name, needle))
            except ternjit.Error as e:
                check(e.status == ternjit.INVALID_ARGUMENT and needle in str(e), "%s: %s" % (name, e))
    for capacity, needle in ((0, "capacity 0 is out of range"), ((1 << 64) + 8, "capacity")):
        try:
            ternjit.bitnet_tri_source(TINY, capacity)
            check(False, "capacity %d refused" % capacity)
        except ternjit.Error as e:
            check(needle in str(e), "capacity refused: %s" % e)
    # The C ABI itself, with a struct no Python check has seen.
    for heads, hidden in ((0, 256), (-1, -(1 << 63))):
        c = _capi.BitNetConfig(ctypes.sizeof(_capi.BitNetConfig), 2, hidden, heads, 2, 512, 50, 64, 500000.0, 1e-5)
        n = ctypes.c_size_t(1 << 20)
        buf = ctypes.create_string_buffer(n.value)
        check(lib.ternjit_bitnet_tri_source(ctypes.byref(c), 8, buf, ctypes.byref(n)) == ternjit.INVALID_ARGUMENT,
              "ternjit_bitnet_tri_source refuses heads %d, hidden %d" % (heads, hidden))
        check(lib.ternjit_write_synthetic_bitnet(os.path.join(tmp, "never.gguf").encode(), ctypes.byref(c), 1)
              == ternjit.INVALID_ARGUMENT, "ternjit_write_synthetic_bitnet refuses heads %d" % heads)
    check(not os.path.exists(os.path.join(tmp, "never.gguf")), "nothing written for a refused config")


KV = """
layer KV {
    fn step(x: Tensor[2, 1, 4], pos: Tensor<i32>[], kc: Tensor[2, 6, 1, 4]) -> (Tensor[2, 6, 1, 4], Tensor[2, 1, 4]) {
        let k0 = kv_write(kc, x, pos, 0)
        let k1 = kv_write(k0, attention(x, k0, k0, pos, 0, 0.5), pos, 1)
        return (k1, attention(x, k1, k1, pos, 1, 0.5))
    }
}
"""


def kv_in_place():
    """The same numpy array as input cache and output cache is updated in place and gives the
    bits distinct arrays give; a partial overlap is an error naming both buffers."""
    for target in ["reference"] + [t for t in ("x86", "llvm") if ternjit.has_feature("target:" + t)]:
        engine = ternjit.Engine(target=target, cache_dir="off")
        program = engine.compile(KV)
        rng = np.random.default_rng(1)
        x = rng.standard_normal((2, 1, 4)).astype(np.float32)
        cache = np.full((2, 6, 1, 4), np.nan, dtype=np.float32)
        cache[:, :2] = rng.standard_normal((2, 2, 1, 4)).astype(np.float32)
        pos = np.array(2, dtype=np.int32)
        want_cache, want_a = program.run("KV.step", x, pos, cache.copy())
        shared = cache.copy()
        a = np.zeros((2, 1, 4), dtype=np.float32)
        program.run("KV.step", x, pos, shared, out=[shared, a])
        check(np.array_equal(shared[:, :4], want_cache[:, :4]) and np.array_equal(a, want_a),
              "%s: the cache updated in place equals the distinct-buffer result" % target)
        check(np.all(np.isnan(shared[:, 4:])), "%s: rows past pos + M untouched" % target)
        big = np.zeros(2 * 6 * 4 + 4, dtype=np.float32)
        inp = big[:48].reshape(2, 6, 1, 4)
        outp = big[4:52].reshape(2, 6, 1, 4)
        try:
            program.run("KV.step", x, pos, inp, out=[outp, a])
            check(False, "%s: a partial overlap is refused" % target)
        except ternjit.Error as e:
            check("output 0 overlaps input 2" in str(e), "%s: the error names both: %s" % (target, e))


if __name__ == "__main__":
    main()

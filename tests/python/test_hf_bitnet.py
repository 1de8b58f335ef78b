# SPDX-License-Identifier: Apache-2.0
# test_hf_bitnet.py - Hugging Face's own BitNet as the oracle: a tiny random BitNet b1.58 model
# made with transformers' BitNetForCausalLM (the 2B4T configuration's structure scaled down),
# saved with save_pretrained as packed uint8 + weight_scale (linear_class "bitlinear") and as
# bf16 master weights ("autobitlinear", online), loaded by ternjit from each checkpoint
# directory into the decoder (read_hf_bitnet_config, bitnet_tri_source, bind_hf_bitnet); the
# logits of a prefill and of decode steps with the KV caches match transformers' forward with
# its own KV cache within a bound derived below, on every CPU target, with f32 and f16 caches.
# Also: a packed checkpoint with its own head (tie_word_embeddings false), the master weights
# in save_pretrained's shards, the examples/bitnet runners with --hf, and refusals.
import ctypes
import os
import subprocess
import sys
import tempfile

# Offline, and transformers' BitLinear / ActQuant / WeightQuant run eagerly: they are
# decorated with torch.compile, which would build C++ kernels for minutes on a loaded machine;
# eager mode executes the same torch operations one by one (set before torch is imported).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TORCHDYNAMO_DISABLE"] = "1"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

np = harness.require("numpy", "the pinned environment, tools/setup-python")
torch = harness.require("torch", "the pinned environment, tools/setup-python")
harness.require("transformers", "the pinned environment, tools/setup-python")
harness.require("safetensors", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()

# The model's tensors are far too small to gain from intra-op threads; on a busy machine
# they only contend (10x slower measured with 2 threads on 2 shared cores).
torch.set_num_threads(1)

from safetensors.torch import load_file  # noqa: E402
from transformers import BitNetConfig, BitNetForCausalLM, DynamicCache  # noqa: E402
from transformers.integrations.bitnet import AutoBitLinear, BitLinear, pack_weights  # noqa: E402
from transformers.quantizers.quantizer_bitnet import BitNetHfQuantizer  # noqa: E402
from transformers.utils.quantization_config import BitNetQuantConfig  # noqa: E402

# microsoft/bitnet-b1.58-2B-4T scaled down: 30 -> 2 blocks, hidden 2560 -> 256, 20/5 heads of
# 128 -> 4/1 heads of 64 (4 query heads per KV head, as there), FFN 6912 -> 768, vocabulary
# 128256 -> 300; relu2, RoPE theta 500000, rms eps 1e-5, tied embeddings, bf16 weights.
SHAPE = dict(vocab_size=300, hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=1, max_position_embeddings=64, hidden_act="relu2", rms_norm_eps=1e-5,
             tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
             rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
FORMS = {"packed": BitNetQuantConfig(linear_class="bitlinear", quantization_mode="offline"),
         "master": BitNetQuantConfig(linear_class="autobitlinear", quantization_mode="online"),
         # transformers' default head: tie_word_embeddings false, lm_head.weight its own table
         "untied": BitNetQuantConfig(linear_class="bitlinear", quantization_mode="offline")}
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PROMPT = [17, 203, 5, 88, 150]
DECODE = 6
CAPACITY = 16


def quantized(config, quant, dtype):
    """A BitNetForCausalLM whose projections transformers' own quantizer replaced, as
    from_pretrained does for a quantization_config: the model whose state save_pretrained
    writes in each form."""
    config.quantization_config = quant.to_dict()
    model = BitNetForCausalLM(config).to(dtype)
    BitNetHfQuantizer(quant)._process_model_before_weight_loading(model)
    return model


def absmean(w):
    """WeightQuant's ternarization in f32: (ternary values, scale s) with w ~ q / s."""
    w = w.float()
    s = 1.0 / w.abs().mean().clamp(min=1e-5)
    return (w * s).round().clamp(-1, 1), s


def make_checkpoints(root):
    """The checkpoint directories of one random model (seed 0): packed, master weights, packed
    with its own head, and the master weights in shards."""
    torch.manual_seed(0)
    base = BitNetForCausalLM(BitNetConfig(**SHAPE))
    with torch.no_grad():
        # Norm weights away from 1 (a misplaced norm changes the result); embedding rows of
        # unit variance, so the tied head's logits spread over tens of units.
        for name, p in base.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.8, 1.2)
        base.model.embed_tokens.weight.normal_(0.0, 1.0)
    state = {k: v.to(torch.bfloat16) for k, v in base.state_dict().items() if k != "lm_head.weight"}
    dirs = {}
    for form, quant in FORMS.items():
        tied = form != "untied"
        model = quantized(BitNetConfig(**dict(SHAPE, tie_word_embeddings=tied)), quant, torch.bfloat16)
        weights = dict(state)
        if not tied:
            weights["lm_head.weight"] = torch.randn(weights["model.embed_tokens.weight"].shape).to(torch.bfloat16)
        if form != "master":
            for k in list(weights):
                if k.split(".")[-2] in PROJECTIONS:
                    q, s = absmean(weights[k])
                    weights[k] = pack_weights(q)  # transformers' own packing
                    weights[k[:-len("weight")] + "weight_scale"] = s.reshape(1).to(torch.bfloat16)
        missing, unexpected = model.load_state_dict(weights, strict=False, assign=True)
        check(missing == (["lm_head.weight"] if tied else []) and not unexpected,
              "%s: state %s %s" % (form, missing, unexpected))
        if tied:
            model.tie_weights()
        dirs[form] = os.path.join(root, form)
        model.save_pretrained(dirs[form])
        if form == "master":  # the same checkpoint in shards (model.safetensors.index.json)
            dirs["sharded"] = os.path.join(root, "sharded")
            model.save_pretrained(dirs["sharded"], max_shard_size="300KB")
    return dirs


def oracle(directory):
    """transformers' own model of the checkpoint directory, loaded by from_pretrained (config.json,
    the quantizer's layer replacement, the saved tensors, the head: tied, or lm_head.weight),
    computing in float32 (the checkpoint's bf16 values widened exactly)."""
    model = BitNetForCausalLM.from_pretrained(directory, dtype=torch.float32)
    tied = model.config.tie_word_embeddings
    check((model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()) == tied, "the head")
    return model.eval()


class F16Cache(DynamicCache):
    """transformers' DynamicCache holding k and v rounded to f16, as ternjit's f16 caches do
    (k after RoPE; the attention of the step that writes them reads them rounded too)."""

    def update(self, key_states, value_states, *args, **kwargs):
        return super().update(key_states.half().float(), value_states.half().float(), *args, **kwargs)


GROUPS = {"q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "o_proj": "attn_out",
          "gate_proj": "ffn_in", "up_proj": "ffn_in", "down_proj": "ffn_out"}


class Probe:
    """Forward pre-hooks on every BitLinear / AutoBitLinear: records each int8 code's distance
    to a rounding tie (transformers' own scale: 127 / max|x| per token), and can move chosen
    codes to the other integer next to their tie (what a few ulps of difference in ternjit's
    input can do)."""

    def __init__(self, model):
        self.step = 0
        self.records = []  # (step, layer, group, row, col, distance, r)
        self.flips = {}    # (step, layer, group) -> [(row, col)]
        for name, module in model.named_modules():
            if isinstance(module, (BitLinear, AutoBitLinear)):
                parts = name.split(".")
                module.register_forward_pre_hook(self._hook(int(parts[2]), GROUPS[parts[-1]], parts[-1]))

    def _hook(self, layer, group, proj):
        def hook(module, args):
            x = args[0]
            flat = x.reshape(-1, x.shape[-1]).float()
            scale = 127.0 / flat.abs().max(dim=-1, keepdim=True).values.clamp(min=1e-5)
            r = flat * scale
            if proj in ("q_proj", "gate_proj", "o_proj", "down_proj"):  # one record per shared input
                d = ((r - torch.floor(r)) - 0.5).abs()
                for row, col in torch.nonzero(d < 1e-3).tolist():
                    self.records.append((self.step, layer, group, row, col, float(d[row, col]), float(r[row, col])))
            flips = self.flips.get((self.step, layer, group))
            if not flips:
                return None
            moved = flat.clone()
            for row, col in flips:
                # The other integer next to the tie than transformers' rounding (half to even) picks.
                other = 2 * torch.floor(r[row, col]) + 1 - torch.round(r[row, col])
                moved[row, col] = other / scale[row, 0]
            return (moved.reshape(x.shape).to(x.dtype),) + tuple(args[1:])
        return hook


def hf_run(model, probe, cache_class, ids=None):
    """Prefill on PROMPT, then DECODE steps, each fed transformers' own greedy token (or
    ids[t] when given): the logits of every position [len(PROMPT) + DECODE, V] and the ids."""
    probe.step = 0
    cache = cache_class(config=model.config)
    fed = list(PROMPT)
    rows = []
    with torch.no_grad():
        out = model(torch.tensor([fed]), cache=cache, use_cache=True)
        rows.append(out.logits[0].numpy().astype(np.float64))
        for t in range(len(PROMPT), len(PROMPT) + DECODE):
            probe.step += 1
            fed.append(ids[t] if ids else int(np.argmax(rows[-1][-1])))
            out = model(torch.tensor([fed[-1:]]), cache=cache, use_cache=True)
            rows.append(out.logits[0].numpy().astype(np.float64))
    return np.concatenate(rows), fed


def ternjit_run(program, config, ids, kv):
    """The same steps through ternjit's decoder, the caches updated in place."""
    d = config["hidden"] // config["heads"]
    dtype = np.float16 if kv == "f16" else np.float32
    k_cache = np.full((config["blocks"], CAPACITY, config["kv_heads"], d), np.nan, dtype=dtype)
    v_cache = k_cache.copy()

    def step(tokens, pos):
        logits = np.empty((len(tokens), config["vocab"]), dtype=np.float32)
        program.run("BitNet.forward", np.array(tokens, dtype=np.int32), np.array(pos, dtype=np.int32), k_cache,
                    v_cache, out=[logits, k_cache, v_cache])
        return logits.astype(np.float64)

    rows = [step(ids[:len(PROMPT)], 0)]
    for t in range(len(PROMPT), len(ids)):
        rows.append(step([ids[t]], t))
    return np.concatenate(rows)


# The bound, derived. ternjit's decoder and transformers' BitNet compute the same function
# (docs/bitnet.md compares them op by op), both in f32, from the same bf16 weights; with f16
# caches transformers' cache is rounded to f16 as ternjit's is (F16Cache). Two things differ:
#  1. f32 rounding: every value on the longest path (embedding, 2 blocks of norms, integer
#     projections scaled in f32, RoPE, softmax over <= 11 positions, the 256-term head) carries
#     a few dozen roundings of 2^-24 and sums whose errors grow like sqrt(K) 2^-24 (K <= 768):
#     a few 1e-7 of the row's largest |logit| (measured: 1e-7); F32_REL = 1e-5 of it is the
#     allowance, still 100x below the effect of f16 caches, so any real difference fails.
#  2. int8 codes: an activation whose x * 127 / max|x| lies within DELTA of a rounding tie may
#     round the other way in ternjit (its x differs from transformers' by those roundings,
#     <= ETA of the row's largest |x|, so <= 127 ETA code units). For every such code of
#     transformers' run the probe moves it across its tie in transformers' own forward and
#     adds that change of every logit to the bound (the changes of several codes add, to first
#     order). A code that stays put costs nothing; one that flips costs ~1e-3 of the logits.
F32_REL = 1e-5
ETA = 1e-6
DELTA = 127 * ETA


def bound(model, probe, cache_class, want, ids, records):
    """Per logit: F32_REL of its row's largest |logit| plus every near-tie code's effect."""
    rows = np.max(np.abs(want), axis=1, keepdims=True) * F32_REL
    total = np.broadcast_to(rows, want.shape).copy()
    near = [r for r in records if r[5] < DELTA]
    for step, layer, group, row, col, _, _ in near:
        probe.flips = {(step, layer, group): [(row, col)]}
        moved, _ = hf_run(model, probe, cache_class, ids)
        total += np.abs(moved - want)
    probe.flips = {}
    return total, len(near)


def check_ternarization(directory):
    """Master weights: ternjit's absmean (formats/README.md: the mean summed in double, rounded
    to f32) gives WeightQuant's values on every element of this checkpoint, so both ternarize
    alike; a tie between them would be a real difference, reported here."""
    state = load_file(os.path.join(directory, "model.safetensors"))
    for name, w in state.items():
        if name.split(".")[-2] not in PROJECTIONS:
            continue
        q, s = absmean(w)
        x = w.float().numpy()
        mean = np.float32(np.abs(x.astype(np.float64)).sum() / x.size)
        mine = np.clip(np.rint(x * (np.float32(1) / max(mean, np.float32(1e-5)))), -1, 1)
        check(np.array_equal(mine, q.numpy()), "%s: ternjit's absmean ternary values equal WeightQuant's" % name)


def check_examples(directory):
    """examples/bitnet's runners with --hf DIR (Python; C++ when ctest gives its path in
    TERNJIT_BITNET_EXAMPLE) print the greedy tokens ternjit's decoder gives here."""
    config = ternjit.read_hf_bitnet_config(directory)
    program = ternjit.Engine(target="reference", cache_dir="off").compile(
        ternjit.bitnet_tri_source(config, len(PROMPT) + 3), "hf.tri")
    program.bind_hf_bitnet(directory)
    k_cache = np.zeros((config["blocks"], len(PROMPT) + 3, config["kv_heads"], config["hidden"] // config["heads"]),
                       dtype=np.float16)
    v_cache = k_cache.copy()
    ids, fed, pos = [], list(PROMPT), 0
    for _ in range(3):
        logits = np.empty((len(fed), config["vocab"]), dtype=np.float32)
        program.run("BitNet.forward", np.array(fed, dtype=np.int32), np.array(pos, dtype=np.int32), k_cache, v_cache,
                    out=[logits, k_cache, v_cache])
        pos += len(fed)
        ids.append(int(np.argmax(logits[-1])))
        fed = ids[-1:]
    want = "tokens: " + " ".join(str(t) for t in ids)
    args = ["--hf", directory, "--tokens", ",".join(str(t) for t in PROMPT), "--decode", "3", "--target", "reference"]
    runners = [[sys.executable, os.path.join(harness.SOURCE_DIR, "examples", "bitnet", "bitnet_example.py")]]
    if os.environ.get("TERNJIT_BITNET_EXAMPLE"):
        runners.append([os.environ["TERNJIT_BITNET_EXAMPLE"]])
    for runner in runners:
        out = subprocess.run(runner + args, capture_output=True, text=True, timeout=300)
        check(out.returncode == 0 and want in out.stdout.splitlines(),
              "%s: %r expected, got %s%s" % (os.path.basename(runner[-1]), want, out.stdout, out.stderr))
        print("%s --hf: %s" % (os.path.basename(runner[-1]), want))


def check_refusals(root, dirs):
    """Through the C ABI: a checkpoint transformers runs as float projections is refused by
    name; binding checks the program against the checkpoint."""
    plain = os.path.join(root, "plain")
    torch.manual_seed(1)
    BitNetForCausalLM(BitNetConfig(**SHAPE)).save_pretrained(plain)
    try:
        ternjit.read_hf_bitnet_config(plain)
        check(False, "a checkpoint without quantization_config is refused")
    except ternjit.Error as e:
        check("'quantization_config'" in str(e) and "float nn.Linear" in str(e), "the refusal says why: %s" % e)
    config = ternjit.read_hf_bitnet_config(dirs["packed"])
    engine = ternjit.Engine(target="reference", cache_dir="off")
    for changed, needle in ((dict(config, vocab=301), "'BitNet.token_embd'"), (dict(config, ffn=512), ".ffn_")):
        program = engine.compile(ternjit.bitnet_tri_source(changed, CAPACITY), "hf.tri")
        try:
            program.bind_hf_bitnet(dirs["packed"])
            check(False, "a decoder of another shape is refused")
        except ternjit.Error as e:
            check(needle in str(e), "the refusal names the parameter: %s" % e)
    for key in ("kv_cache", "embedding"):
        try:
            ternjit.bitnet_tri_source(dict(config, **{key: "i8"}), CAPACITY)
            check(False, "%s i8 refused" % key)
        except ternjit.Error as e:
            check(key in str(e), "the refusal names %s: %s" % (key, e))
    c = ternjit._bitnet_struct(dict(config))
    c.kv_cache = 3  # past the C ABI's codes 0 f16, 1 bf16, 2 f32
    n = ctypes.c_size_t(0)
    check(ternjit._lib().ternjit_bitnet_tri_source(ctypes.byref(c), CAPACITY, None,
                                                   ctypes.byref(n)) == ternjit.INVALID_ARGUMENT,
          "kv_cache 3 refused by the C ABI")
    program = engine.compile(ternjit.bitnet_tri_source(config, CAPACITY), "hf.tri")
    try:
        program.bind_hf_bitnet(dirs["packed"], layer="Decoder")
        check(False, "a layer the program lacks is refused")
    except ternjit.Error as e:
        check("'Decoder'" in str(e), "the refusal names the layer: %s" % e)


def check_sharded(single, sharded):
    """save_pretrained's shards (and index) bind the same parameters as its single file: the
    same logits, bit for bit."""
    config = ternjit.read_hf_bitnet_config(sharded)
    files = [f for f in os.listdir(sharded) if f.endswith(".safetensors")]
    check(len(files) > 1 and os.path.exists(os.path.join(sharded, "model.safetensors.index.json")),
          "save_pretrained wrote shards: %s" % files)
    check(config == ternjit.read_hf_bitnet_config(single), "the same configuration from the shards")
    logits = []
    for directory in (single, sharded):
        program = ternjit.Engine(target="reference", cache_dir="off").compile(
            ternjit.bitnet_tri_source(config, CAPACITY), "hf.tri")
        program.bind_hf_bitnet(directory)
        logits.append(ternjit_run(program, config, PROMPT + [3, 4], "f16"))
    check(np.array_equal(logits[0], logits[1]), "sharded == single file, bitwise")
    print("sharded (%d files): the same logits as the single file" % len(files))


def main():
    targets = ["reference"] + [t for t in ("x86", "llvm") if ternjit.has_feature("target:" + t)]
    with tempfile.TemporaryDirectory(prefix="ternjit_hf_bitnet_") as root:
        dirs = make_checkpoints(root)
        for form in FORMS:
            check_form(form, dirs[form], targets)
        check_sharded(dirs["master"], dirs["sharded"])
        check_examples(dirs["packed"])
        check_refusals(root, dirs)
    print("ok")


def check_form(form, directory, targets):
    config = ternjit.read_hf_bitnet_config(directory)
    check(config["weights"] == ("master" if form == "master" else "packed"), "%s: weights %s" % (form, config["weights"]))
    check(config["embedding"] == "bf16" and config["blocks"] == 2 and config["kv_heads"] == 1 and config["ffn"] == 768
          and config["separate_head"] == (form == "untied"), "%s: the configuration read back: %s" % (form, config))
    if form == "master":
        check_ternarization(directory)
    model = oracle(directory)
    probe = Probe(model)
    plain, ids = hf_run(model, probe, DynamicCache)
    # transformers' forward over the whole sequence at once equals its prefill + decode steps.
    with torch.no_grad():
        whole = model(torch.tensor([ids])).logits[0].numpy()
    check(np.allclose(whole, plain, rtol=0, atol=F32_REL * np.abs(plain).max()), "%s: transformers' own decode steps" % form)
    for kv, cache_class in (("f32", DynamicCache), ("f16", F16Cache)):
        probe.records = []
        want, _ = hf_run(model, probe, cache_class, ids)
        limit, near = bound(model, probe, cache_class, want, ids, probe.records)
        print("%s, %s caches: %d int8 codes within %.2g of a tie, the bound %.3g of the row's largest |logit| at most" %
              (form, kv, near, DELTA, (limit.max(axis=1) / np.abs(want).max(axis=1)).max()))
        for target in targets:
            engine = ternjit.Engine(target=target, cache_dir="off")
            program = engine.compile(ternjit.bitnet_tri_source(dict(config, kv_cache=kv), CAPACITY), "hf.tri")
            program.bind_hf_bitnet(directory)
            got = ternjit_run(program, config, ids, kv)
            err = np.abs(got - want)
            rel = (err.max(axis=1) / np.abs(want).max(axis=1)).max()
            print("  %s: max |logit - transformers| = %.3g (%.3g of the row's largest |logit|); vs transformers' f32 "
                  "cache %.3g of it" % (target, err.max(), rel,
                                        (np.abs(got - plain).max(axis=1) / np.abs(plain).max(axis=1)).max()))
            worst = np.unravel_index(np.argmax(err - limit), err.shape)
            check(np.all(err <= limit), "%s %s %s: position %d logit %d differs by %.3g, bound %.3g" %
                  (form, kv, target, worst[0], worst[1], err[worst], limit[worst]))
            # Greedy tokens agree wherever transformers' top two are further apart than the bound allows.
            for t in range(len(ids)):
                top = np.argsort(want[t])[::-1][:2]
                if want[t, top[0]] - want[t, top[1]] > limit[t, top[0]] + limit[t, top[1]]:
                    check(int(np.argmax(got[t])) == int(top[0]), "%s %s %s: greedy token at position %d" %
                          (form, kv, target, t))


if __name__ == "__main__":
    main()

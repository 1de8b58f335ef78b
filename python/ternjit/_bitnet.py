# SPDX-License-Identifier: Apache-2.0
# _bitnet.py - ternjit's BitNet b1.58 file helpers (llama.cpp `bitnet` GGUF files, Hugging Face
# checkpoint directories), re-exported by the package: ``ternjit.read_bitnet_config`` etc.
"""BitNet b1.58 models: configurations, synthetic files, `.tri` source and name maps."""
import ctypes
import operator

from . import _capi
from ._errors import _check, _lib, _misuse

#: The 2B4T configuration (microsoft/bitnet-b1.58-2B-4T), as :func:`read_bitnet_config` returns one.
#: ``ffn_activation`` is ``"relu2"`` (the published 2B4T) or ``"silu"`` (llama.cpp's `bitnet` graph);
#: ``embedding`` and ``kv_cache`` the token table's and the KV caches' element types ("f16", "bf16", "f32");
#: ``separate_head`` True when the head is its own table ``output`` rather than the token table.
BITNET_2B4T = {"blocks": 30, "hidden": 2560, "heads": 20, "kv_heads": 5, "ffn": 6912, "vocab": 128256,
               "context": 4096, "rope_theta": 500000.0, "rms_eps": 1e-5, "ffn_activation": "relu2",
               "embedding": "f16", "kv_cache": "f16", "separate_head": False}
_BITNET_ACTIVATIONS = ("relu2", "silu")
_BITNET_NAMED = ("ffn_activation", "embedding", "kv_cache", "separate_head")
_BITNET_FLOATS = ("f16", "bf16", "f32")  # ternjit_bitnet_config's codes 0, 1, 2


def _bitnet_struct(full):
    act = full["ffn_activation"]
    if act not in _BITNET_ACTIVATIONS:
        raise _misuse("bitnet config: ffn_activation %r is not one of %s" % (act, ", ".join(_BITNET_ACTIVATIONS)))
    kinds = []
    for key in ("embedding", "kv_cache"):
        if full[key] not in _BITNET_FLOATS:
            raise _misuse("bitnet config: %s %r is not one of %s" % (key, full[key], ", ".join(_BITNET_FLOATS)))
        kinds.append(_BITNET_FLOATS.index(full[key]))
    # Only what the C struct cannot hold is refused here (ctypes would wrap an int past int64
    # silently); every check of the values is the library's, the same as a GGUF file's.
    values = [_c_field(k, full[k], type(BITNET_2B4T[k])) for k in BITNET_2B4T if k not in _BITNET_NAMED]
    return _capi.BitNetConfig(ctypes.sizeof(_capi.BitNetConfig), *values, _BITNET_ACTIVATIONS.index(act), *kinds,
                              1 if full["separate_head"] else 0)


def _c_field(key, value, kind):
    """`value` as the int64 or double of the C struct's field `key`; ternjit.Error when it is not one."""
    try:
        if kind is int:
            if isinstance(value, bool):
                raise TypeError("a bool")
            v = operator.index(value)
            if not -(1 << 63) <= v < (1 << 63):
                raise OverflowError("outside int64")
            return v
        return float(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise _misuse("bitnet config: %s = %r is not %s (%s)" % (key, value, "an int64" if kind is int else "a float", e))


def _bitnet_dict(c):
    out = {k: getattr(c, k) for k in BITNET_2B4T if k not in _BITNET_NAMED}
    out["ffn_activation"] = _BITNET_ACTIVATIONS[c.ffn_activation]
    out["embedding"] = _BITNET_FLOATS[c.embedding]
    out["kv_cache"] = _BITNET_FLOATS[c.kv_cache]
    out["separate_head"] = bool(c.separate_head)
    return out


def read_bitnet_config(path):
    """The configuration of the llama.cpp `bitnet` GGUF file at `path`, as a dict with the keys
    of :data:`BITNET_2B4T` (ternjit/bitnet.h)."""
    lib = _lib()
    c = _capi.BitNetConfig()
    c.struct_size = ctypes.sizeof(_capi.BitNetConfig)
    _check(lib, lib.ternjit_read_bitnet_config(str(path).encode(), ctypes.byref(c)))
    return _bitnet_dict(c)


def read_hf_bitnet_config(directory):
    """The decoder of the Hugging Face BitNet checkpoint directory `directory` (config.json +
    safetensors, as transformers' ``save_pretrained`` writes it; ternjit::read_hf_bitnet_config):
    a dict with the keys of :data:`BITNET_2B4T` (``embedding``: the checkpoint's token table type)
    and ``weights``: ``"packed"`` (linear_class bitlinear) or ``"master"`` (float master weights,
    autobitlinear online). A field transformers computes another way than the decoder raises
    :class:`Error` naming it. Bind it with :meth:`Program.bind_hf_bitnet` (docs/bitnet.md)."""
    lib = _lib()
    c = _capi.BitNetConfig()
    c.struct_size = ctypes.sizeof(_capi.BitNetConfig)
    weights = ctypes.c_int32(0)
    _check(lib, lib.ternjit_read_hf_bitnet_config(str(directory).encode(), ctypes.byref(c), ctypes.byref(weights)))
    out = _bitnet_dict(c)
    out["weights"] = ("packed", "master")[weights.value]
    return out


def hf_bitnet_name_map(layer="BitNet"):
    """The name-map rules from a Hugging Face BitNet checkpoint's tensor names to layer `layer`'s
    parameters (the same list as the C++ ternjit::hf_bitnet_name_map)."""
    rules = ["model.embed_tokens.weight=%s.token_embd" % layer, "model.norm.weight=%s.output_norm" % layer,
             "lm_head.weight=%s.output" % layer]
    for hf, ours in (("input_layernorm", "attn_norm"), ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
                     ("self_attn.v_proj", "attn_v"), ("self_attn.attn_sub_norm", "attn_sub_norm"),
                     ("self_attn.o_proj", "attn_output"), ("post_attention_layernorm", "ffn_norm"),
                     ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"), ("mlp.ffn_sub_norm", "ffn_sub_norm"),
                     ("mlp.down_proj", "ffn_down")):
        rules.append("model.layers.{i}.%s.weight=%s.blk.{i}.%s" % (hf, layer, ours))
    return rules


def write_synthetic_bitnet(path, config=None, seed=0):
    """Writes a synthetic llama.cpp `bitnet` model to `path`: random TQ2_0 ternary weights drawn
    from `seed`, llama.cpp's tensor names and metadata. `config` is a dict overriding keys of
    :data:`BITNET_2B4T` (the default)."""
    full = dict(BITNET_2B4T)
    for k, v in (config or {}).items():
        if k not in full:
            raise _misuse("write_synthetic_bitnet: unknown config key %r (it takes %s)" % (k, ", ".join(full)))
        full[k] = v
    lib = _lib()
    c = _bitnet_struct(full)
    _check(lib, lib.ternjit_write_synthetic_bitnet(str(path).encode(), ctypes.byref(c), int(seed) & 0xFFFFFFFFFFFFFFFF))


def bitnet_tri_source(config, capacity):
    """The decoder's `.tri` source for `config` (a dict as :func:`read_bitnet_config` returns)
    with a KV cache of `capacity` rows: layer ``BitNet``, ``BitNet.forward(ids, pos, k_cache,
    v_cache) -> (logits, k_cache, v_cache)`` (docs/bitnet.md)."""
    full = dict(BITNET_2B4T)
    full.update(config)
    lib = _lib()
    c = _bitnet_struct(full)
    capacity = _c_field("capacity", capacity, int)
    n = ctypes.c_size_t(0)
    lib.ternjit_bitnet_tri_source(ctypes.byref(c), capacity, None, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    _check(lib, lib.ternjit_bitnet_tri_source(ctypes.byref(c), capacity, buf, ctypes.byref(n)))
    return buf.value.decode()


def bitnet_name_map(layer="BitNet"):
    """The name-map rules binding a `bitnet` file to layer `layer`'s parameters (the same list
    as the C++ ternjit::bitnet_name_map)."""
    rules = ["token_embd.weight=%s.token_embd" % layer, "output_norm.weight=%s.output_norm" % layer]
    for t in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_sub_norm", "attn_output", "ffn_norm", "ffn_gate",
              "ffn_up", "ffn_sub_norm", "ffn_down"):
        rules.append("blk.{i}.%s.weight=%s.blk.{i}.%s" % (t, layer, t))
    rules.append("output.weight=%s.output" % layer)
    return rules

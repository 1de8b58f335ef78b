#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# bitnet_example.py - bitnet_example.cpp through the Python package: a llama.cpp `bitnet` GGUF
# file (or a synthetic one written first) or a Hugging Face checkpoint directory (--hf DIR:
# config.json + safetensors as transformers' save_pretrained writes them), prefill on token
# ids, greedy decoding with the host-owned f16 KV caches passed as input and output of every
# step (updated in place).
#
#   PYTHONPATH=python TERNJIT_LIBRARY=build/lib/libternjit.so \
#     python3 examples/bitnet/bitnet_example.py [--model F.gguf | --hf DIR] [--tiny] [--tokens 1,2,3]
#                                               [--decode N] [--target auto|x86|llvm|reference] [--threads T]
#
# A bad argument or any failure is a message on stderr and exit status 1.
import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import ternjit

TINY = {"blocks": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 512, "vocab": 50, "context": 64}


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is exit status 1 like every other failure (the C++ runner's)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        sys.exit("bitnet_example.py: %s (--help lists the options)" % message)


def whole_number(lo, hi):
    """An argparse type: a whole number in [lo, hi]."""
    def parse(text):
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError("'%s' is not a whole number" % text)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError("%s is outside [%d, %d]" % (text, lo, hi))
        return v
    return parse


def token_ids(text):
    """--tokens: comma-separated ids, each a whole number in [0, 2^31)."""
    return [whole_number(0, 2**31 - 1)(t) for t in text.split(",")]


def main():
    ap = Parser(description=__doc__)
    ap.add_argument("--model")
    ap.add_argument("--hf", help="a Hugging Face BitNet checkpoint directory")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--tokens", type=token_ids, default=[1, 2, 3, 4, 5, 6, 7, 8])
    ap.add_argument("--decode", type=whole_number(0, 1 << 20), default=16)
    ap.add_argument("--target", default="auto")
    ap.add_argument("--threads", type=whole_number(0, 1 << 16), default=0)
    a = ap.parse_args()
    prompt = a.tokens
    tmp = None
    model = a.model
    if a.model and a.hf:
        ap.error("--model and --hf name two models: give one")
    if model is None and a.hf is None:
        tmp = tempfile.mkdtemp(prefix="ternjit_bitnet_example_")
        model = os.path.join(tmp, "bitnet-synthetic.gguf")
        t0 = time.perf_counter()
        ternjit.write_synthetic_bitnet(model, TINY if a.tiny else None, seed=1)
        print("wrote synthetic model %s in %.1f s" % (model, time.perf_counter() - t0))
    try:
        c = ternjit.read_hf_bitnet_config(a.hf) if a.hf else ternjit.read_bitnet_config(model)
        outside = [t for t in prompt if t >= c["vocab"]]
        if outside:
            raise ternjit.Error(ternjit.INVALID_ARGUMENT, "token id %d is outside the vocabulary [0, %d)"
                                % (outside[0], c["vocab"]))
        context = len(prompt) + a.decode
        d = c["hidden"] // c["heads"]
        engine = ternjit.Engine(target=a.target, threads=a.threads)
        program = engine.compile(ternjit.bitnet_tri_source(c, context), "bitnet.tri")
        if a.hf:
            program.bind_hf_bitnet(a.hf)
        else:
            program.bind_file(model, map=ternjit.bitnet_name_map("BitNet"))
        k_cache = np.zeros((c["blocks"], context, c["kv_heads"], d), dtype=np.float16)
        v_cache = np.zeros_like(k_cache)

        def step(ids, pos):
            logits = np.empty((len(ids), c["vocab"]), dtype=np.float32)
            program.run("BitNet.forward", np.array(ids, dtype=np.int32), np.array(pos, dtype=np.int32), k_cache,
                        v_cache, out=[logits, k_cache, v_cache])
            return logits

        t0 = time.perf_counter()
        logits = step(prompt, 0)  # compiles the M = prompt step on first use
        prefill = time.perf_counter() - t0
        generated = [int(np.argmax(logits[-1]))]
        t0 = time.perf_counter()
        for t in range(1, a.decode):
            generated.append(int(np.argmax(step([generated[-1]], len(prompt) + t - 1)[0])))
        decode = time.perf_counter() - t0
        print("tokens: " + " ".join(str(t) for t in generated))
        print("prefill (with compiling): %d tokens in %.3f s = %.2f tokens/s" % (len(prompt), prefill, len(prompt) / prefill))
        if a.decode > 1:
            print("decode (first step compiles M = 1): %d tokens in %.3f s = %.2f tokens/s"
                  % (a.decode - 1, decode, (a.decode - 1) / decode))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    # A failure is a message and exit status 1, never a traceback.
    try:
        sys.exit(main())
    except (ternjit.Error, OSError, MemoryError) as e:
        sys.exit("bitnet_example.py: %s" % e)

# SPDX-License-Identifier: Apache-2.0
# ggml_backend.py - llama.cpp's own llama-bench on the 2B4T-shaped BitNet files, stock and with
# libggml-ternjit loaded, side by side in one run of this script.
"""Runs the pinned llama.cpp's llama-bench (tools/build-llama-cpp) on the synthetic 2B4T-shaped
`bitnet` file in TQ2_0 (ternjit.write_synthetic_bitnet) and TQ1_0 (the same file re-encoded
losslessly by the pinned llama-quantize), for each thread count: decode (tg) and prefill (pp)
tokens/s, stock and with the ternjit backend, alternating per file and thread count so both
see the same machine state. The two need separate processes: ggml gives every model of a
process the ACCEL devices it has loaded (llama.cpp adds them to every model's buffer list and
every context), so llama-bench cannot run with and without the backend in one process.
Reported per row: tokens/s (mean +- stddev of llama-bench's repetitions), the ratio with /
stock, each process's peak RSS (GNU time), and the memory the backend packed beside the
GGUF's bytes (from its log line, llama-bench -v).

Usage (from a build tree; the files, ~1.3 GB each, are written once into --dir)::

    TERNJIT_LIBRARY=build/lib/libternjit.so PYTHONPATH=python .deps/venv/bin/python bench/ggml_backend.py \\
        --backend build/integrations/ggml/libggml-ternjit.so [--dir DIR] [--threads 1,2] \\
        [--prompts 128,512] [--gen 32] [--reps 3] [--markdown]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import ternjit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA = os.environ.get("TERNJIT_LLAMA_CPP_DIR", os.path.join(ROOT, ".deps", "llama.cpp"))


def write_files(directory):
    """The TQ2_0 and TQ1_0 files, written when absent."""
    tq2 = os.path.join(directory, "bitnet-2b4t-tq2_0.gguf")
    tq1 = os.path.join(directory, "bitnet-2b4t-tq1_0.gguf")
    if not os.path.exists(tq2):
        print(f"writing {tq2}", file=sys.stderr)
        ternjit.write_synthetic_bitnet(tq2 + ".partial", {"ffn_activation": "silu"}, seed=1)
        os.replace(tq2 + ".partial", tq2)
    if not os.path.exists(tq1):
        print(f"writing {tq1} (llama-quantize)", file=sys.stderr)
        subprocess.run([os.path.join(LLAMA, "bin", "llama-quantize"), "--allow-requantize",
                        "--token-embedding-type", "f16", "--output-tensor-type", "f16",
                        tq2, tq1 + ".partial", "TQ1_0"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        os.replace(tq1 + ".partial", tq1)
    return [("TQ2_0", tq2), ("TQ1_0", tq1)]


def llama_bench(model, threads, args, backend):
    """One llama-bench process: its JSON rows, peak RSS (KiB) and the backend's last log line."""
    env = dict(os.environ)
    env.pop("GGML_BACKEND_PATH", None)
    if backend:
        env["GGML_BACKEND_PATH"] = backend
    with tempfile.NamedTemporaryFile("w+", suffix=".time") as tfile:
        cmd = ["/usr/bin/time", "-f", "%M", "-o", tfile.name, os.path.join(LLAMA, "bin", "llama-bench"),
               "-m", model, "-t", str(threads), "-p", args.prompts, "-n", str(args.gen),
               "-r", str(args.reps), "-o", "json", "-v"]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"llama-bench failed ({run.returncode}):\n{run.stderr[-3000:]}")
        rss_kib = int(tfile.read().strip().splitlines()[-1])
    packed = [l for l in run.stderr.splitlines() if l.startswith("ggml-ternjit:") and "packed" in l]
    if backend and not packed:
        sys.exit("llama-bench ran with the backend but it packed no weight (is it loaded? GGML_BACKEND_PATH)")
    return json.loads(run.stdout), rss_kib, packed[-1] if packed else ""


def label(row):
    return f"pp{row['n_prompt']}" if row["n_prompt"] else f"tg{row['n_gen']}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", required=True, help="libggml-ternjit.so")
    p.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "ternjit-ggml-bench"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--prompts", default="128,512")
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    rows = []
    for name, path in write_files(args.dir):
        gguf_mib = os.path.getsize(path) / 2**20
        for threads in [int(t) for t in args.threads.split(",")]:
            stock, stock_rss, _ = llama_bench(path, threads, args, None)
            ours, ours_rss, packed = llama_bench(path, threads, args, os.path.abspath(args.backend))
            m = re.search(r"([\d.]+) MiB in ternjit's layout, from ([\d.]+) MiB", packed)
            for s, o in zip(stock, ours):
                assert label(s) == label(o)
                rows.append({"file": name, "gguf_mib": gguf_mib, "threads": threads, "test": label(s),
                             "stock": (s["avg_ts"], s["stddev_ts"]), "ternjit": (o["avg_ts"], o["stddev_ts"]),
                             "ratio": o["avg_ts"] / s["avg_ts"], "stock_rss_mib": stock_rss / 1024,
                             "ternjit_rss_mib": ours_rss / 1024,
                             "packed_mib": float(m.group(1)) if m else None,
                             "packed_from_mib": float(m.group(2)) if m else None})
            print(json.dumps(rows[-1]), file=sys.stderr)
    head = ["file", "threads", "test", "stock t/s", "with ternjit t/s", "ratio", "peak RSS stock / ternjit MiB",
            "packed MiB (from GGUF MiB)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([
            r["file"], str(r["threads"]), r["test"], f"{r['stock'][0]:.2f} +- {r['stock'][1]:.2f}",
            f"{r['ternjit'][0]:.2f} +- {r['ternjit'][1]:.2f}", f"{r['ratio']:.2f}x",
            f"{r['stock_rss_mib']:.0f} / {r['ternjit_rss_mib']:.0f}",
            f"{r['packed_mib']:.0f} ({r['packed_from_mib']:.0f})" if r["packed_mib"] else "-"]) + " |")
    print("\n".join(lines) if args.markdown else json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

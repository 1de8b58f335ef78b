# SPDX-License-Identifier: Apache-2.0
# roofline.py - draws `ternjit bench --plot`'s roofline (embedded in the ternjit binary, run by /usr/bin/python3).
#   python3 roofline.py DATA.json OUT.png   the JSON `ternjit bench --json` prints
#   python3 roofline.py --check             exit 0 when matplotlib imports, else 3
# Log-log: arithmetic intensity (ops per weight byte) against GOPS. The roofs are the
# streaming-read bandwidth (GOPS = intensity x GB/s) and the int8-dot ceiling measured in
# the same run; the points are the kernel and, when it ran, the reference target.
import json
import sys


def main(argv):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"roofline: python3-matplotlib is not installed ({e})", file=sys.stderr)
        return 3
    if argv[1:] == ["--check"]:
        return 0
    if len(argv) != 3:
        print("usage: roofline.py DATA.json OUT.png | --check", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        d = json.load(f)
    bw = d["probe"]["gbps"]
    peak = d["int8_dot"]["gops"]
    ai = d["intensity"]
    points = [("kernel (" + d["target"] + ")", d["kernel"]["gops"], "o", "tab:red")]
    if "gops" in d["reference"]:
        points.append(("reference", d["reference"]["gops"], "s", "tab:gray"))
    ridge = peak / bw
    lo = min([ridge] + ([ai] if ai > 0 else [])) / 10
    hi = max([ridge] + ([ai] if ai > 0 else [])) * 10
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.plot(xs, [min(x * bw, peak) for x in xs], color="black", linewidth=2, label="roof")
    ax.plot(xs, [x * bw for x in xs], color="tab:blue", linestyle="--", linewidth=1,
            label=f"read bandwidth {bw:.1f} GB/s")
    ax.axhline(peak, color="tab:green", linestyle="--", linewidth=1,
               label=f"int8 dot {peak:.0f} GOPS ({d['int8_dot']['isa']})")
    for name, gops, marker, color in points:
        if ai > 0 and gops > 0:
            ax.plot([ai], [gops], marker=marker, markersize=9, linestyle="none", color=color,
                    label=f"{name}: {gops:.3g} GOPS")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (ops / weight byte)")
    ax.set_ylabel("GOPS")
    ax.set_title(f"{d['function']} {d['shape_text']}, {d['threads']} thread(s), {d['mode']}\n{d['machine']['cpu']}",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

# SPDX-License-Identifier: Apache-2.0
# test_torch2.py - torch.compile (no graph break) and torch.export of a model using ternjit::bitlinear.
"""These entry points exist from torch 2.0 (torch.export from 2.1); with an older torch
(Debian 12 ships 1.13) the test exits 77 and ctest reports it SKIPPED with the reason.

- torch.compile(fullgraph=True) fails on any graph break, so passing means the op was
  traced into the graph through its Meta kernel; the result must equal eager mode.
- torch.export.export must produce a program whose graph calls ternjit.bitlinear and
  whose module gives the eager result.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

torch = harness.require("torch", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()
import ternjit.torch  # noqa: E402

missing = [name for name, ok in (("torch.compile", hasattr(torch, "compile")),
                                 ("torch.export", hasattr(torch, "export"))) if not ok]
if missing:
    print("SKIP: torch %s has no %s (torch 2.1 or later is needed)" % (torch.__version__, " or ".join(missing)))
    sys.exit(harness.SKIP)


def model():
    torch.manual_seed(21)
    m = torch.nn.Sequential(torch.nn.Linear(37, 45), torch.nn.GELU(), torch.nn.Linear(45, 29, bias=False)).eval()
    return ternjit.torch.convert(m, engine=ternjit.Engine(target="reference"))


def test_compile_fullgraph():
    m = model()
    x = torch.randn(5, 37)
    compiled = torch.compile(m, fullgraph=True, backend="eager")
    check(torch.equal(compiled(x), m(x)), "torch.compile result differs from eager")


def test_export():
    m = model()
    x = torch.randn(5, 37)
    exported = torch.export.export(m, (x,))
    check("ternjit.bitlinear" in str(exported.graph), "the op is not in the exported graph")
    check(torch.equal(exported.module()(x), m(x)), "the exported program differs from eager")


if __name__ == "__main__":
    torch.set_num_threads(1)
    harness.run([test_compile_fullgraph, test_export])

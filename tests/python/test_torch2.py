# SPDX-License-Identifier: Apache-2.0
# test_torch2.py - the ternjit ops under torch 2: opcheck, torch.compile, torch.export, QAT under compile.
"""The ops come from the C++ extension (python/torch_ext) that ternjit.torch loads.

- torch.library.opcheck on every op the extension registers (schema, autograd
  registration, fake tensors, AOT dispatch with dynamic shapes);
- torch.compile(fullgraph=True) fails on any graph break, so passing means the ops were
  traced into the graph through their Meta kernels; the result must equal eager mode;
- torch.export -> save -> load -> run must give the eager result;
- QATLinear trains under torch.compile: the first step's gradients equal eager's and the
  loss goes down.

torch.compile's default backend (inductor) compiles C++ with g++ on CPU: a few graphs only.
"""
import copy
import ctypes
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

torch = harness.require("torch", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()
harness.import_ternjit_torch()
import test_qat  # noqa: E402

missing = [name for name, ok in (("torch.compile", hasattr(torch, "compile")),
                                 ("torch.export", hasattr(torch, "export")),
                                 ("torch.library.opcheck", hasattr(torch.library, "opcheck"))) if not ok]
if missing:
    print("SKIP: torch %s has no %s (torch 2.4 or later is needed)" % (torch.__version__, " or ".join(missing)))
    sys.exit(harness.SKIP)

OPS = ("bitlinear", "qat_linear", "qat_linear_fwd", "qat_linear_bwd")


def engine_key():
    return ternjit.torch.engine_key(ternjit.Engine(target="auto", threads=1))


def model():
    """BitLinear layers (converted nn.Linear) and a QATLinear layer, in eval mode. The torch
    op between them is a ReLU, which inductor's code computes exactly as eager mode does
    (its GELU may differ by an ulp with a symbolic row count, and a quantizer can turn
    that into one int8 step): the compiled results must equal eager's bit for bit."""
    torch.manual_seed(21)
    m = torch.nn.Sequential(torch.nn.Linear(37, 45), torch.nn.ReLU(), torch.nn.Linear(45, 29, bias=False))
    m = ternjit.torch.convert(m, engine=ternjit.Engine(target="auto", threads=1))
    m.append(ternjit.torch.QATLinear(29, 11, activation="relu", engine=ternjit.Engine(target="auto", threads=1)))
    return m.eval()


def test_extension_shares_the_library():
    """The extension calls the libternjit instance the ctypes package loaded (one file)."""
    path, library = ternjit.torch.EXTENSION
    ext = ctypes.CDLL(path)
    ext.ternjit_torch_libternjit_symbol.restype = ctypes.c_void_p
    mine = ctypes.cast(ternjit._capi.library().ternjit_version, ctypes.c_void_p).value
    check(ext.ternjit_torch_libternjit_symbol() == mine, "two libternjit instances")
    check(os.path.realpath(library) == os.path.realpath(ternjit.library_path()),
          "%s is not %s" % (library, ternjit.library_path()))
    for op in OPS:
        check(hasattr(torch.ops.ternjit, op), "op %s is not registered" % op)


def qat_args(gen, m, k, n, bias, grad):
    x = torch.randn(m, k, generator=gen).requires_grad_(grad)
    w = torch.randn(n, k, generator=gen).requires_grad_(grad)
    b = torch.randn(n, generator=gen).requires_grad_(grad) if bias else None
    return x, w, b


def test_opcheck_every_op():
    key = engine_key()
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 37, generator=gen)
    weight = torch.randint(-1, 2, (19, 37), generator=gen, dtype=torch.int8)
    scale = torch.rand(19, generator=gen) + 0.1
    bias = torch.randn(19, generator=gen)
    gamma = torch.rand(37, generator=gen) + 0.5
    op = torch.ops.ternjit.bitlinear.default
    for args in [(x, weight, scale, bias, gamma, 1e-5, "relu", key), (x[0], weight, scale[:1], None, None, 1e-6,
                                                                      "none", key)]:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
        # Inference only: its Autograd kernel is registered (and refuses a backward).
        grad_args = (args[0].clone().requires_grad_(True),) + args[1:]
        torch.library.opcheck(op, grad_args, test_utils=("test_autograd_registration",))
    for bias_on, activation in ((True, "gelu"), (False, "none")):
        config = (activation, False, False, False, key)
        xq, wq, bq = qat_args(gen, 5, 21, 11, bias_on, True)
        torch.library.opcheck(torch.ops.ternjit.qat_linear.default, (xq, wq, bq) + config)
        torch.library.opcheck(torch.ops.ternjit.qat_linear_fwd.default, (xq, wq, bq) + config)
        with torch.no_grad():
            saved = torch.ops.ternjit.qat_linear_fwd(xq, wq, bq, *config)[1:]
        dy = torch.randn(5, 11, generator=gen)
        torch.library.opcheck(torch.ops.ternjit.qat_linear_bwd.default,
                              (dy, xq.detach(), wq.detach(), None if bq is None else bq.detach(), saved) + config)


def test_compile_fullgraph():
    m = model()
    compiled = torch.compile(m, fullgraph=True)
    with torch.no_grad():
        # 7 rows recompiles with a symbolic row count (the Meta kernels take SymInts); 9 reuses it.
        for rows in (5, 7, 9):
            x = torch.randn(rows, 37)
            check(torch.equal(compiled(x), m(x)), "torch.compile result differs from eager (%d rows)" % rows)


def test_export_save_load():
    m = model()
    x = torch.randn(5, 37)
    with torch.no_grad():
        eager = m(x)
    exported = torch.export.export(m, (x,))
    graph = str(exported.graph)
    check("ternjit.bitlinear" in graph and "ternjit.qat_linear" in graph, "the ops are not in the exported graph")
    blob = io.BytesIO()
    torch.export.save(exported, blob)
    blob.seek(0)
    loaded = torch.export.load(blob)
    with torch.no_grad():
        check(torch.equal(exported.module()(x), eager), "the exported program differs from eager")
        check(torch.equal(loaded.module()(x), eager), "the saved and loaded program differs from eager")


def compiled_with_eager_gradients(net):
    """torch.compile(net, fullgraph=True), after checking that one step's gradients through
    it equal eager mode's (the same kernels in the same order)."""
    compiled = torch.compile(net, fullgraph=True)
    eager = copy.deepcopy(net)
    batch, target = torch.randn(32, 16), torch.randn(32, 4)
    for model in (eager, compiled):
        torch.nn.functional.mse_loss(model(batch), target).backward()
    for (name, a), b in zip(eager.named_parameters(), net.parameters()):
        check(b.grad is not None and torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-6),
              "gradient of %s differs under torch.compile" % name)
    net.zero_grad()
    return compiled


def test_qat_trains_under_compile():
    # test_qat's training run (200 steps, the loss must halve) through torch.compile.
    test_qat.train_mlp(ternjit.Engine(target="auto", threads=1), False, wrap=compiled_with_eager_gradients)


def test_bitlinear_refuses_backward_under_compile():
    """Inference only: compiling a graph that would need BitLinear's gradient fails saying so."""
    layer = ternjit.torch.BitLinear(torch.randint(-1, 2, (8, 16), dtype=torch.int8), torch.ones(1),
                                    engine=ternjit.Engine(target="auto", threads=1))
    x = torch.randn(3, 16, requires_grad=True)
    try:
        torch.compile(layer, fullgraph=True, backend="aot_eager")(x).sum().backward()
        check(False, "no error")
    except Exception as e:  # torch wraps it (BackendCompilerFailed) or raises it at backward
        check("inference only" in str(e), "unexpected error: %s" % e)


def test_threads():
    """Several threads calling one layer (and compiling its kernels for new row counts at
    the same time) get what one thread gets."""
    import threading
    layer = model()[0]
    xs = [torch.randn(rows, 37) for rows in (1, 2, 3, 4, 5, 6, 7, 8)]
    with torch.no_grad():
        want = [layer(x) for x in xs[:4]]  # rows 5-8 are first compiled by the threads
        results, errors = {}, []

        def work(t):
            try:
                for i in range(len(xs)):
                    results[(t, i)] = layer(xs[(i + t) % len(xs)])
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        check(not errors, "a thread failed: %r" % errors[:1])
        for (t, i), y in results.items():
            x = xs[(i + t) % len(xs)]
            check(torch.equal(y, layer(x)), "thread %d differs on %d rows" % (t, x.shape[0]))
        for x, y in zip(xs, want):
            check(torch.equal(layer(x), y), "a result changed after the threads ran")


def test_op_errors():
    """Bad arguments are torch exceptions naming the problem, never a crash."""
    key = engine_key()
    x, w, scale = torch.randn(2, 8), torch.randint(-1, 2, (4, 8), dtype=torch.int8), torch.ones(1)
    xq, wq = torch.randn(2, 8), torch.randn(4, 8)
    saved = torch.ops.ternjit.qat_linear_fwd(xq, wq, None, "none", False, False, False, key)[1:]
    bitlinear, qat = torch.ops.ternjit.bitlinear, torch.ops.ternjit.qat_linear
    cases = [
        (lambda: bitlinear(x, w, scale, None, None, 1e-5, "none", "{bad"), ValueError, "bad ternjit engine string"),
        (lambda: bitlinear(x, w, scale, None, None, 1e-5, "none", '{"target": 3}'), ValueError, "must be a string"),
        (lambda: bitlinear(x, w, scale, None, None, 1e-5, "none", '{"colour": "red"}'), ValueError,
         "unknown engine option 'colour'"),
        (lambda: bitlinear(x, w, scale, None, None, 1e-5, "none", '{"target": "nosuch"}'), RuntimeError,
         "cannot create the engine"),
        (lambda: bitlinear(x, w, scale, None, None, 1e-5, "swish", key), ValueError, "unknown activation 'swish'"),
        (lambda: bitlinear(x, w, torch.ones(3), None, None, 1e-5, "none", key), ValueError, "1 or 4 (out_features)"),
        (lambda: bitlinear(x, w, scale, torch.ones(3), None, 1e-5, "none", key), ValueError, "bias must have 4"),
        (lambda: bitlinear(x, w, scale, None, torch.ones(3), 1e-5, "none", key), ValueError,
         "norm_weight must have 8"),
        (lambda: bitlinear(x.reshape(-1), w, scale, None, None, 1e-5, "none", key), ValueError, "got x[..., 16]"),
        (lambda: qat(xq, wq[:, :5], None, "none", False, False, False, key), ValueError, "x[..., 5], got x[..., 8]"),
        (lambda: qat(xq, wq, torch.ones(3), "none", False, False, False, key), ValueError, "bias must have 4"),
        (lambda: qat(xq, wq, None, "swish", False, False, False, key), ValueError, "unknown activation"),
        (lambda: qat(xq[:0], wq, None, "none", False, False, False, key), ValueError, "no rows"),
        (lambda: torch.ops.ternjit.qat_linear_bwd(torch.ones(2, 4), xq, wq, None, saved[1:], "none", False, False,
                                                  False, key), ValueError, "saved tensors"),
    ]
    for fn, kind, fragment in cases:
        try:
            fn()
            check(False, "no error for %r" % fragment)
        except kind as e:
            check(fragment in str(e), "message %r lacks %r" % (str(e), fragment))


if __name__ == "__main__":
    torch.set_num_threads(1)
    harness.run([test_extension_shares_the_library, test_opcheck_every_op, test_compile_fullgraph,
                 test_export_save_load, test_qat_trains_under_compile, test_bitlinear_refuses_backward_under_compile, test_threads, test_op_errors])

# SPDX-License-Identifier: Apache-2.0
# test_jax.py - ternjit.jax.bitlinear (XLA FFI handlers, custom_vjp, vmap) against the same math in jax.numpy.
"""The reference (`reference`) is BitLinear written with jax.numpy only, with the usual
straight-through trick ``x + stop_gradient(q(x) - x)``: per-row absmax int8 quantization
(jnp.round: half to even), per-tensor absmean ternarization, a float matmul, the bias
and the activation. jax.grad of it gives the straight-through gradients ternjit's
backward computes.

Tolerance, derived per element (`forward_bound`, `gradient_bounds`), u = 2^-24:
- codes: both sides round x/s and w/g to the same int8 and ternary codes unless a
  value lies near a rounding tie; `inputs` draws inputs clear of them (x/s more than
  4 u 127 = 3.0e-5 from a tie: s = max|x|/127 or 127/max|x| is one rounding, x/s or
  x * (127/max) one more, so the sides' x/s differ by at most 4 u |x/s|; w/g more than
  (K N + 4) u from 0.5 and from the clipping edge 1, since g = mean|w| is a sum whose
  order differs: relative difference <= K N u).
- then the pre-activation z: ternjit's integer sum is exact and scaled by s and g,
  jnp's float products are summed: |dz| <= ((K + 4) u + (K N + 2) u) S + 2 u (S + |b|)
  with S = sum_k |q_mk| |t_kn|, the K N u for the two g's.
- the activation: Lipschitz L (<= 1.13, gelu) times that, plus the two float
  implementations' own difference (erf, exp, tanh approximations), taken as 8 ulps of
  the result plus 1e-6 absolute; relu and none are exact.
- gradients: dz = dy act'(z) differs by |dy| (act'' max |dz| + 1e-6) (relu: an element
  within the z bound of its kink may take either side); dx = dz T^T, dw = q^T dz and
  db = sum dz add their summation error ((N + 4 + K N) u, (M + 4) u, (M + 2) u of the sums
  of |terms|) and carry the dz difference through |T| and |q|.
Where no activation is applied the forward is compared within the same bound; under jit
and vmap the results must equal the eager, per-member ones exactly (the same kernels).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402

os.environ.setdefault("JAX_PLATFORMS", "cpu")
np = harness.require("numpy", "the pinned environment, tools/setup-python")
jax = harness.require("jax", "the pinned environment, tools/setup-python")
ternjit = harness.import_ternjit()
if not os.environ.get("TERNJIT_JAX_LIBRARY"):
    print("SKIP: TERNJIT_JAX_LIBRARY is not set (the build has no libternjit_jax.so: its Python has no jaxlib)")
    sys.exit(harness.SKIP)
import jax.numpy as jnp  # noqa: E402
import ternjit.jax as tj  # noqa: E402

U = 2.0 ** -24
# Lipschitz constants of the activations and bounds of their second derivatives.
LIPSCHITZ = {"none": 1.0, "relu": 1.0, "gelu": 1.13, "silu": 1.1, "sigmoid": 0.25, "tanh": 1.0}
SECOND = {"none": 0.0, "relu": 0.0, "gelu": 0.8, "silu": 0.5, "sigmoid": 0.1, "tanh": 0.77}
ACT = {"none": lambda z: z, "relu": jax.nn.relu, "gelu": lambda z: jax.nn.gelu(z, approximate=False),
       "silu": jax.nn.silu, "sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh}


def ste(v, q):
    return v + jax.lax.stop_gradient(q - v)


def reference(x, w, b, activation, ste_clip=False):
    s = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / 127
    xq = ste(x, jnp.clip(jnp.round(x / s), -127, 127) * s)
    g = jnp.mean(jnp.abs(w))
    wt = jnp.clip(jnp.round(w / g), -1, 1) * g
    if ste_clip:  # the gradient passes only where |w| <= mean|w|
        masked = w * (jnp.abs(w) <= g)
        wq = jax.lax.stop_gradient(wt) + masked - jax.lax.stop_gradient(masked)
    else:
        wq = ste(w, wt)
    z = xq @ wq
    if b is not None:
        z = z + b
    return ACT[activation](z)


def codes(x, w):
    """float64 numpy: q (dequantized x, [M, K]), t (g times the ternary codes, [K, N]), x/s, w/g."""
    x = np.asarray(x, np.float64).reshape(-1, np.shape(x)[-1])
    w = np.asarray(w, np.float64)
    s = np.abs(x).max(axis=1, keepdims=True) / 127
    g = np.abs(w).mean()
    return np.clip(np.round(x / s), -127, 127) * s, np.clip(np.round(w / g), -1, 1) * g, x / s, w / g


def near_tie(x, w):
    """Whether some x/s lies within 4 u 127 of a rounding tie (the two sides' x/s may differ by
    that much), or some w/g within (K N + 4) u of 0.5 or of 1 (the clipping edge)."""
    _, _, xs, wg = codes(x, w)
    k, n = np.shape(w)
    xmargin = np.abs(np.abs(xs) - np.floor(np.abs(xs)) - 0.5).min()
    wmargin = np.abs(np.abs(wg) - 0.5).min()
    if k * n > 1:  # one weight is its own mean on both sides
        wmargin = min(wmargin, np.abs(np.abs(wg) - 1).min())
    return not (xmargin > 4 * U * 127 and wmargin > (k * n + 4) * U)


def forward_bound(x, w, b, activation):
    """The derived bound on |y - y_reference| per element, and the bound on the pre-activation."""
    q, t, _, _ = codes(x, w)
    k, n = np.shape(w)
    s_abs = np.abs(q) @ np.abs(t)
    b_abs = 0.0 if b is None else np.abs(np.asarray(b, np.float64))
    z_bound = ((k + 4) * U + (k * n + 2) * U) * s_abs + 2 * U * (s_abs + b_abs)
    z_bound = z_bound * 1.01  # the bound itself computed in float64
    if activation in ("none", "relu"):
        return z_bound, z_bound
    z = q @ t + (0 if b is None else np.asarray(b, np.float64))
    y = np.asarray(ACT[activation](jnp.asarray(z, jnp.float32)), np.float64)
    return LIPSCHITZ[activation] * z_bound + 8 * U * np.abs(y) + 1e-6, z_bound


def close(a, b, bound, what):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    check(a.shape == b.shape, "%s: shape %s, expected %s" % (what, a.shape, b.shape))
    err = np.abs(a - b)
    check(bool(np.all(np.isfinite(a))), "%s: non-finite values" % what)
    over = err - np.broadcast_to(bound, err.shape)
    check(bool(np.all(over <= 0)), "%s: differs by %g, over its bound by %g" % (what, err.max(), over.max()))


def inputs(m, k, n, seed, bias=True, lead=None):
    """Random x, w, b; the first seed from `seed` on (in steps of 1000) whose x/s and w/g lie
    clear of rounding ties (`near_tie`), so both sides' codes are the same."""
    for attempt in range(20):
        kx, kw, kb = jax.random.split(jax.random.key(seed + 1000 * attempt), 3)
        x = jax.random.normal(kx, (lead or ()) + (m, k), jnp.float32)
        w = jax.random.normal(kw, (k, n), jnp.float32)
        b = jax.random.normal(kb, (n,), jnp.float32) if bias else None
        if not near_tie(x, w):
            return x, w, b
    raise harness.Failure("no seed from %d gives inputs clear of rounding ties" % seed)


SHAPES = [(1, 1, 1), (1, 13, 7), (5, 37, 19), (16, 64, 9), (3, 8, 33), (7, 17, 1)]


def test_forward_matches_jnp():
    # Every shape with none and gelu, every activation with and without bias on one shape each.
    cases = [(shape, activation, True) for shape in SHAPES for activation in ("none", "gelu")]
    cases += [(SHAPES[(i + j) % len(SHAPES)], activation, bias) for i, activation in enumerate(tj.ACTIVATIONS)
              for j, bias in enumerate((True, False))]
    for i, ((m, k, n), activation, bias) in enumerate(cases):
        x, w, b = inputs(m, k, n, 100 + i, bias)
        y = tj.bitlinear(x, w, b, activation)
        bound, _ = forward_bound(x, w, b, activation)
        close(y, reference(x, w, b, activation), bound, "forward %s bias=%s M=%d K=%d N=%d" % (activation, bias, m, k, n))


def test_leading_dims_fold_into_rows():
    x, w, b = inputs(5, 12, 10, 3, lead=(2, 3))
    y = tj.bitlinear(x, w, b, "gelu")
    check(y.shape == (2, 3, 5, 10), "y has x's leading dims: %s" % (y.shape,))
    rows = tj.bitlinear(x.reshape(30, 12), w, b, "gelu")
    check(bool(jnp.array_equal(y.reshape(30, 10), rows)), "leading dims are rows of one call")
    check(tj.bitlinear(x[0, 0, 0], w, b).shape == (10,), "a vector x gives a vector")
    empty = tj.bitlinear(jnp.zeros((0, 4, 12), jnp.float32), w, b)
    check(empty.shape == (0, 4, 10), "no rows: an empty result")
    grads = jax.grad(lambda w: jnp.sum(tj.bitlinear(jnp.zeros((0, 12), jnp.float32), w, b)))(w)
    check(bool(jnp.all(grads == 0)), "no rows: a zero gradient")


def gradient_bounds(x, w, b, activation, dy, ste_clip):
    """Derived bounds on |dx|, |dw|, |db| against the reference (see the module docstring)."""
    q, t, _, _ = codes(x, w)
    m, k = q.shape
    n = t.shape[1]
    _, z_bound = forward_bound(x, w, b, activation)
    z = q @ t + (0 if b is None else np.asarray(b, np.float64))
    dy = np.asarray(dy, np.float64)
    d_act = np.asarray(jax.vmap(jax.grad(lambda v: ACT[activation](v)))(jnp.asarray(z.ravel(), jnp.float32)),
                       np.float64).reshape(z.shape)
    dz = dy * d_act
    dz_err = np.abs(dy) * (SECOND[activation] * z_bound + (1e-6 if activation not in ("none", "relu") else 0))
    if activation == "relu":  # within the bound of the kink, either side
        dz_err = np.where(np.abs(z) <= z_bound, np.abs(dy), dz_err)
    dz_abs = np.abs(dz) + dz_err
    dx = ((n + 4 + k * n) * U) * (dz_abs @ np.abs(t).T) + dz_err @ np.abs(t).T
    dw = ((m + 4) * U) * (np.abs(q).T @ dz_abs) + np.abs(q).T @ dz_err
    db = ((m + 2) * U) * dz_abs.sum(axis=0) + dz_err.sum(axis=0)
    return [v * 1.01 + 1e-30 for v in (dx, dw, db)]


def test_gradients_match_jax_grad_of_ste():
    cases = [((1, 13, 7), "none", True, False), ((5, 37, 19), "gelu", True, False), ((16, 64, 9), "relu", False, True),
             ((3, 8, 33), "tanh", True, True), ((4, 20, 6), "silu", True, False), ((2, 9, 3), "sigmoid", False, False),
             ((1, 1, 1), "none", True, False)]
    for i, ((m, k, n), activation, bias, clip) in enumerate(cases):
        x, w, b = inputs(m, k, n, 200 + i, bias)
        dy = jax.random.normal(jax.random.key(300 + i), (m, n), jnp.float32)
        argnums = (0, 1, 2) if bias else (0, 1)

        def loss(fn):
            return lambda x, w, b=None: jnp.sum(fn(x, w, b, activation, ste_clip=clip) * dy)

        got = jax.grad(loss(tj.bitlinear), argnums)(x, w, b) if bias else jax.grad(loss(tj.bitlinear), argnums)(x, w)
        want = jax.grad(loss(reference), argnums)(x, w, b) if bias else jax.grad(loss(reference), argnums)(x, w)
        bounds = gradient_bounds(x, w, b, activation, dy, clip)
        what = "%s bias=%s clip=%s M=%d K=%d N=%d" % (activation, bias, clip, m, k, n)
        for name, g, r, bound in zip(("dx", "dw", "db"), got, want, bounds):
            close(g, r, bound, name + " " + what)
        if clip:
            outside = np.abs(np.asarray(w)) > np.abs(np.asarray(w)).mean()
            check(bool(outside.any()) and bool(np.all(np.asarray(got[1])[outside] == 0)),
                  "ste_clip: dw is zero where |w| > mean|w| (%s)" % what)


def test_jit_equals_eager():
    x, w, b = inputs(6, 24, 11, 7, lead=(2,))
    y = tj.bitlinear(x, w, b, "silu")
    check(bool(jnp.array_equal(jax.jit(lambda x, w, b: tj.bitlinear(x, w, b, "silu"))(x, w, b), y)), "jit forward")

    def loss(x, w, b):
        return jnp.sum(jnp.sin(tj.bitlinear(x, w, b, "silu")))

    eager = jax.grad(loss, (0, 1, 2))(x, w, b)
    jitted = jax.jit(jax.grad(loss, (0, 1, 2)))(x, w, b)
    for name, e, j in zip(("dx", "dw", "db"), eager, jitted):
        check(bool(jnp.array_equal(e, j)), "jit gradient %s equals eager" % name)
    value, grads = jax.jit(jax.value_and_grad(loss))(x, w, b)
    check(bool(jnp.array_equal(value, loss(x, w, b))) and bool(jnp.array_equal(grads, eager[0])), "value_and_grad")
    text = jax.jit(loss).lower(x, w, b).as_text()
    check("ternjit_bitlinear_forward" in text, "the jitted program calls the FFI target")


def test_vmap():
    x, w, b = inputs(4, 19, 6, 11, lead=(3,))
    f = lambda x, w, b: tj.bitlinear(x, w, b, "relu")  # noqa: E731
    # x batched: folded into rows (one call, checked in the jaxpr), equal to each member alone.
    batched = jax.vmap(f, (0, None, None))(x, w, b)
    for i in range(3):
        check(bool(jnp.array_equal(batched[i], f(x[i], w, b))), "vmap over x, member %d" % i)
    jaxpr = str(jax.make_jaxpr(jax.vmap(f, (0, None, None)))(x, w, b))
    check("scan" not in jaxpr and "while" not in jaxpr, "vmap over x runs one call:\n" + jaxpr)
    check(bool(jnp.array_equal(jax.jit(jax.vmap(f, (0, None, None)))(x, w, b), batched)), "jit of vmap")
    # w and b batched: one call per member.
    ws = jnp.stack([w, -2 * w, w[::-1]])
    bs = jnp.stack([b, b + 1, -b])
    per_w = jax.vmap(f, (None, 0, 0))(x[0], ws, bs)
    for i in range(3):
        check(bool(jnp.array_equal(per_w[i], f(x[0], ws[i], bs[i]))), "vmap over w and b, member %d" % i)
    both = jax.vmap(f)(x, ws, bs)
    for i in range(3):
        check(bool(jnp.array_equal(both[i], f(x[i], ws[i], bs[i]))), "vmap over all, member %d" % i)
    nested = jax.vmap(jax.vmap(f, (0, None, None)), (0, None, None))(x.reshape(3, 2, 2, 19), w, b)
    check(bool(jnp.array_equal(nested.reshape(3, 4, 6), batched)), "nested vmap")

    def loss(x, w, b):
        return jnp.sum(jnp.cos(f(x, w, b)))

    # Per-example gradients: vmap of grad, each member's dw and db over its own rows.
    per_example = jax.jit(jax.vmap(jax.grad(loss, (0, 1, 2)), (0, None, None)))(x, w, b)
    for i in range(3):
        alone = jax.grad(loss, (0, 1, 2))(x[i], w, b)
        for name, p, a in zip(("dx", "dw", "db"), per_example, alone):
            check(bool(jnp.allclose(p[i], a, rtol=0, atol=0)), "per-example %s, member %d" % (name, i))
    # Per-member weights: each member's gradients alone.
    per_member = jax.vmap(jax.grad(loss, (0, 1, 2)))(x, ws, bs)
    for i in range(3):
        alone = jax.grad(loss, (0, 1, 2))(x[i], ws[i], bs[i])
        for name, p, a in zip(("dx", "dw", "db"), per_member, alone):
            check(bool(jnp.array_equal(p[i], a)), "per-member weights: %s, member %d" % (name, i))
    # grad of a vmapped loss: the members' dw summed.
    total = jax.grad(lambda x, w, b: jnp.sum(jax.vmap(loss, (0, None, None))(x, w, b)), (1, 2))(x, w, b)
    check(bool(jnp.allclose(total[0], per_example[1].sum(axis=0), rtol=1e-6, atol=1e-6)), "grad of vmap: dw")
    check(bool(jnp.allclose(total[1], per_example[2].sum(axis=0), rtol=1e-6, atol=1e-6)), "grad of vmap: db")


def test_concurrent_calls():
    # Calls from several threads at once, of configurations not compiled before (the handler
    # library compiles each once, under its lock), equal the same calls made one at a time.
    import threading
    cases = [(inputs(3 + i, 11 + 3 * i, 5 + i, 60 + i, bias=i % 2 == 0), activation, dict(ste_clip=True) if i < 2 else
              dict(int8_dx=True)) for i, activation in enumerate(("silu", "sigmoid", "tanh", "relu"))]

    def run(case):
        (x, w, b), activation, options = case
        return jax.jit(jax.value_and_grad(lambda x, w: jnp.sum(tj.bitlinear(x, w, b, activation, **options) ** 2),
                                          (0, 1)))(x, w)

    results = [None] * len(cases)
    errors = []

    def worker(i):
        try:
            results[i] = jax.block_until_ready(run(cases[i]))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "no thread failed: %r" % errors)
    for i, case in enumerate(cases):
        value, grads = run(case)
        check(bool(jnp.array_equal(value, results[i][0])), "case %d: the same value" % i)
        for g, r in zip(grads, results[i][1]):
            check(bool(jnp.array_equal(g, r)), "case %d: the same gradients" % i)


def test_export():
    # jax.export of a jitted forward and gradient (the FFI targets are not in its list of
    # stable custom calls: allowed explicitly) runs where register() made the targets known,
    # as it is and after a serialization round trip.
    x, w, b = inputs(3, 10, 4, 51)

    def fn(x, w, b):
        return jax.value_and_grad(lambda w: jnp.sum(tj.bitlinear(x, w, b, "tanh") ** 2))(w)

    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in tj.TARGETS.values()]
    exported = jax.export.export(jax.jit(fn), disabled_checks=checks)(x, w, b)
    check(tj.register().endswith("libternjit_jax.so"), "register() returns the library's path")
    # Serialized and back (jax's flatbuffers serialization, pinned in the environment).
    programs = [exported, jax.export.deserialize(exported.serialize())]
    for program in programs:
        for got, want in zip(program.call(x, w, b), fn(x, w, b)):
            check(bool(jnp.array_equal(got, want)), "the exported program gives the same results")


def test_saved_tensors_without_rows_come_from_the_weights():
    # The vmap rule folds x's batch into rows and shares the .fwd outputs that have no row
    # dim (the ternary codes, the weight scale): they must not depend on x.
    x1, w, b = inputs(5, 16, 8, 21)
    x2 = x1 * 3 + 1
    config = tj._Config("gelu", True, False, False, False)
    specs = tj._fwd_specs(config, 5, 16, 8)
    check(specs[0].per_row and any(not s.per_row for s in specs[1:]), "y is per row and some saved are not")
    out1 = tj._forward_op(config, "fwd")(x1, w, b)
    out2 = tj._forward_op(config, "fwd")(x2, w, b)
    for spec, a, c in zip(specs, out1, out2):
        check(a.shape == spec.shape and a.dtype == spec.dtype, "a .fwd output has its described shape")
        if not spec.per_row:
            check(bool(jnp.array_equal(a, c)), "a saved tensor without rows does not depend on x")


def test_int8_gradients_within_their_bounds():
    # int8_dx: |dx - dx_exact|[m, k] <= g sum_n |T[k, n]| max_n |dy[m, n]| / 254 (test_qat.py
    # derives it); dw and db stay exact.
    x, w, b = inputs(9, 40, 33, 31)
    dy = jax.random.normal(jax.random.key(32), (9, 33), jnp.float32)

    def grads(**options):
        return jax.grad(lambda x, w, b: jnp.sum(tj.bitlinear(x, w, b, **options) * dy), (0, 1, 2))(x, w, b)

    exact = grads()
    low = grads(int8_dx=True)
    g = float(jnp.mean(jnp.abs(w)))
    tcount = np.abs(np.clip(np.round(np.asarray(w) / g), -1, 1)).sum(axis=1)  # [K]
    bound = g * (np.abs(np.asarray(dy)).max(axis=1, keepdims=True) / 254) * tcount[None, :] * (1 + 1e-5) + 1e-5
    err = np.abs(np.asarray(low[0]) - np.asarray(exact[0]))
    check(bool(np.all(err <= bound)), "int8 dx over its bound by %g" % (err - bound).max())
    check(err.max() > 0, "int8_dx changes dx")
    check(bool(jnp.array_equal(low[1], exact[1])) and bool(jnp.array_equal(low[2], exact[2])), "int8_dx: dw, db exact")
    both = grads(int8_dx=True, int8_dw=True)
    check(float(jnp.max(jnp.abs(both[1] - exact[1]))) > 0, "int8_dw changes dw")
    check(bool(jnp.allclose(both[1], exact[1], rtol=0.05, atol=0.05 * float(jnp.max(jnp.abs(exact[1]))))),
          "int8_dw stays near the exact dw")


def test_training_loss_goes_down():
    kx, k1, k2, kt = jax.random.split(jax.random.key(5), 4)
    data = jax.random.normal(kx, (128, 16), jnp.float32)
    target = jnp.tanh(data @ jax.random.normal(kt, (16, 4), jnp.float32) * 0.5)
    params = {"w1": jax.random.normal(k1, (16, 32), jnp.float32) * 0.25, "b1": jnp.zeros(32, jnp.float32),
              "w2": jax.random.normal(k2, (32, 4), jnp.float32) * 0.18, "b2": jnp.zeros(4, jnp.float32)}

    def loss(p):
        h = tj.bitlinear(data, p["w1"], p["b1"], "relu")
        return jnp.mean((tj.bitlinear(h, p["w2"], p["b2"]) - target) ** 2)

    @jax.jit
    def step(p):
        value, grads = jax.value_and_grad(loss)(p)
        return value, jax.tree.map(lambda a, g: a - 0.05 * g, p, grads)

    first = None
    for _ in range(150):
        value, params = step(params)
        first = float(value) if first is None else first
    last = float(loss(params))
    print("    training loss %.4f -> %.4f" % (first, last))
    check(last < 0.5 * first, "the loss halves in 150 steps (%g -> %g)" % (first, last))


def expect_error(fn, *needles):
    try:
        fn()
    except Exception as e:  # ternjit.Error at trace time, XLA's runtime error from a handler
        text = str(e)
        for needle in needles:
            check(needle in text, "the error %r names %r" % (text, needle))
        return e
    raise harness.Failure("no error (expected one naming %s)" % (needles,))


def test_bad_input_is_a_clear_error():
    x, w, b = inputs(3, 8, 5, 41)
    for e in [expect_error(lambda: tj.bitlinear(x.astype(jnp.bfloat16), w, b), "x must be a float32", "bfloat16"),
              expect_error(lambda: tj.bitlinear(np.ones((3, 8), np.float64), w), "x must be a float32", "float64"),
              expect_error(lambda: tj.bitlinear(x, w.astype(jnp.int32)), "w must be a float32", "int32"),
              expect_error(lambda: tj.bitlinear(x, w, b.astype(jnp.float16)), "b must be a float32"),
              expect_error(lambda: tj.bitlinear(x, w[:7]), "x [..., K] and w [K, N]", "[3, 8]", "[7, 5]"),
              expect_error(lambda: tj.bitlinear(x, w[None]), "w [K, N]"),
              expect_error(lambda: tj.bitlinear(x, w, b[:4]), "b must be [5]"),
              expect_error(lambda: tj.bitlinear(x, w[:, :0]), "K and N must be positive"),
              expect_error(lambda: tj.bitlinear(x, w, activation="softplus"), "unknown activation", "gelu")]:
        check(isinstance(e, ternjit.Error) and e.status == ternjit.INVALID_ARGUMENT, "a ternjit.Error: %r" % e)
    # Under jit the same checks run when tracing.
    expect_error(lambda: jax.jit(lambda x: tj.bitlinear(x, w))(x[:, :7]), "x [..., K] and w [K, N]")


def test_handler_errors_are_xla_errors_not_crashes():
    # The FFI targets called directly with what the Python checks would refuse: each
    # handler returns an error carrying ternjit's message; the process carries on.
    tj._handlers()
    x, w, b = inputs(3, 8, 5, 43)
    attrs = tj._Config("none", False, False, False, False).attributes()

    def call(target, args, results, **override):
        call_attrs = dict(attrs, **override)
        out = jax.ffi.ffi_call(target, [jax.ShapeDtypeStruct(s, d) for s, d in results], vmap_method="sequential")
        return jax.block_until_ready(out(*args, **call_attrs))

    fwd = "ternjit_bitlinear_forward"
    expect_error(lambda: call(fwd, (x, w[:7]), [((3, 5), jnp.float32)]), "ternjit.jax.bitlinear", "specializing")
    expect_error(lambda: call(fwd, (x.astype(jnp.float16), w), [((3, 5), jnp.float32)]), "must be f32")
    expect_error(lambda: call(fwd, (x, w), [((3, 6), jnp.float32)]), "must be f32[3, 5]", "XLA allocated [3, 6]")
    expect_error(lambda: call(fwd, (x, w, b), [((3, 5), jnp.float32)]), "takes 2 arguments", "got 3")
    expect_error(lambda: call(fwd, (x, w), [((3, 5), jnp.float32)], activation="swish"), "unknown activation 'swish'")
    expect_error(lambda: call("ternjit_bitlinear_bwd", (x, w, x), [((3, 8), jnp.float32), ((8, 5), jnp.float32)]),
                 "ternjit.jax.bitlinear", "bwd")
    # Still working afterwards.
    check(bool(jnp.array_equal(tj.bitlinear(x, w), call(fwd, (x, w), [((3, 5), jnp.float32)])[0])),
          "the FFI target called directly equals bitlinear")


def test_missing_library_says_why():
    env = dict(os.environ, TERNJIT_JAX_LIBRARY=os.path.join(harness.HERE, "no-such-dir", "libternjit_jax.so"))
    code = ("import ternjit, ternjit.jax as tj, jax.numpy as jnp\n"
            "try:\n    tj.bitlinear(jnp.ones((2, 3)), jnp.ones((3, 4)))\n"
            "except ternjit.Error as e:\n    print('ERROR', e.status_name, e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, "the subprocess ran: %s" % out.stderr[-2000:])
    check("ERROR" in out.stdout and "no-such-dir" in out.stdout and "ternjit_jax" in out.stdout
          and "TERNJIT_JAX_LIBRARY" in out.stdout, "the error says why: %r" % out.stdout)


if __name__ == "__main__":
    harness.run([test_forward_matches_jnp, test_leading_dims_fold_into_rows, test_gradients_match_jax_grad_of_ste,
                 test_jit_equals_eager, test_vmap, test_concurrent_calls, test_export, test_saved_tensors_without_rows_come_from_the_weights,
                 test_int8_gradients_within_their_bounds, test_training_loss_goes_down,
                 test_bad_input_is_a_clear_error, test_handler_errors_are_xla_errors_not_crashes,
                 test_missing_library_says_why])

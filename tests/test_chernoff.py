"""Chernoff information: values vs mpmath, identities of DESIGN.md §4, solver edge cases,
gradients (envelope theorem and implicit function theorem) vs finite differences."""

import functools
import importlib
import math
import warnings

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import mp_refs
import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from jax.test_util import check_grads

import jaxdp as jd

CASES = [
    (0.0, 1.0, 1.0, 1.0),
    (0.0, 1.0, 1.0, 2.0),
    (0.0, 2.0, 3.0, 0.5),
    (-1.0, 0.7, 4.0, 1.3),
    (0.0, 1.0, 0.0, 1.5),
    (0.0, 1.0, 1e-10, 1.0),
    (0.0, 1.0, 2e-10, 1.0 + 1e-10),
    (0.0, 1.0, 30.0, 1.3),
    (0.0, 1e-3, 1.0, 1.0),
    (0.0, 1.0, 1e6, 1.0),
    (0.0, 1.0, 1.0, 1e6),
]


@functools.cache
def chernoff_jit():
    return jax.jit(jd.chernoff)


def _batch(cls, cases):
    arr = np.asarray(cases, dtype=np.float64)
    return cls(arr[:, 0], arr[:, 1]), cls(arr[:, 2], arr[:, 3])


def _rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.abs(got - want) / np.where(want == 0, 1.0, np.abs(want))


@pytest.mark.parametrize(
    "cls, ref",
    [(jd.Laplace, mp_refs.lap_log_bc_cf), (jd.Gaussian, mp_refs.gau_log_bc_cf)],
    ids=["laplace", "gaussian"],
)
def test_information_and_alpha_vs_mpmath(cls, ref):
    P, Q = _batch(cls, CASES)
    r = chernoff_jit()(P, Q)
    assert bool(jnp.all(r.converged))
    for i, c in enumerate(CASES):
        info, a = mp_refs.chernoff(ref, *c)
        assert _rel(r.information[i], float(info)) < 1e-10, (c, r.information[i], info)
        assert abs(float(r.alpha[i]) - float(a)) < 1e-8, (c, r.alpha[i], a)
        assert abs(float(r.derivative[i])) <= 1e-9 * max(float(info), 1e-300) ** 0.5 + 1e-15


def test_equal_scale_closed_forms_over_decades():
    t = jnp.asarray(np.logspace(-10, 6, 33))
    r = jd.chernoff(jd.Laplace(0.0, 1.0), jd.Laplace(t, 1.0))
    with mp.workdps(60):
        want = [float(x / 2 - mp.log1p(x / 2)) for x in map(mp.mpf, np.asarray(t))]
    assert _rel(r.information, want).max() < 1e-12
    np.testing.assert_allclose(r.alpha, 0.5, atol=1e-14)
    g = jd.chernoff(jd.Gaussian(0.0, 1.0), jd.Gaussian(t, 1.0))
    assert _rel(g.information, np.asarray(t) ** 2 / 8).max() < 1e-13


def test_discrete_pairs_vs_mpmath():
    cases = [(0, 1.0, 1, 1.0), (0, 1.0, 1, 2.0), (0, 3.0, 5, 0.5), (0, 1e8, 1, 1e8)]
    P, Q = _batch(jd.DiscreteLaplace, cases)
    r = jd.chernoff(P, Q)
    for i, c in enumerate(cases):
        info, a = mp_refs.chernoff(mp_refs.dl_log_bc, *c)
        assert _rel(r.information[i], float(info)) < 1e-10
        assert abs(float(r.alpha[i]) - float(a)) < 1e-8
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(6), size=5)
    q = rng.dirichlet(np.ones(6), size=5)
    r = jd.chernoff(jd.Categorical(p), jd.Categorical(q))
    for i in range(5):
        info, a = mp_refs.chernoff(mp_refs.cat_log_bc, p[i], q[i])
        assert _rel(r.information[i], float(info)) < 1e-10
        assert abs(float(r.alpha[i]) - float(a)) < 1e-8


def test_kinked_pairs_far_apart_are_solved_to_rounding():
    # Shifts of ~1e7 scales make f nearly piecewise linear with a kink of width ~1e-8 in
    # alpha: the closed-form start was followed by one step that passed the small-step
    # test while leaving ~1e-8 of alpha (information 1.8e-9 and 6.4e-13 off, converged)
    dl = (-14949461.0, 0.481254890098442, 42.0, 0.013248056312225127)
    lap = (-3553962.077774301, 5.842356108741072e-05, 0.011767674830760655, 2.4779991199527177e-09)
    for d in (3, 0):  # (at d = 0 the two outer sums counted k = 0 twice; QA pass)
        assert mp_refs.dl_log_bc_geometric(0, 1.0, d, 2.0, 0.3) == pytest.approx(
            float(mp_refs.dl_log_bc(0, 1.0, d, 2.0, 0.3)), rel=1e-15
        )  # the geometric sums against the plain sum, where that is short
    for cls, ref, c in (
        (jd.DiscreteLaplace, mp_refs.dl_log_bc_geometric, dl),
        (jd.Laplace, mp_refs.lap_log_bc_cf, lap),
    ):
        r = jd.chernoff(cls(c[0], c[1]), cls(c[2], c[3]))
        info, a = mp_refs.chernoff(ref, *c)
        assert bool(r.converged)
        assert _rel(r.information, float(info)) < 1e-14, (cls, float(r.information), info)
        assert abs(float(r.alpha) - float(a)) < 1e-14


def test_randomized_response_attains_log_cosh():
    eps = jnp.asarray([1e-6, 0.1, 1.0, 5.0, 30.0])
    P, Q = jd.mechanisms.randomized_response(eps)
    r = jd.chernoff(P, Q)
    with mp.workdps(60):
        want = [float(mp.log(mp.cosh(mp.mpf(e) / 2))) for e in np.asarray(eps)]
    assert _rel(r.information, want).max() < 1e-10
    np.testing.assert_allclose(r.alpha, 0.5, atol=1e-12)


def test_identical_and_disjoint_pairs():
    r = jd.chernoff(jd.Laplace(1.0, 2.0), jd.Laplace(1.0, 2.0))
    assert float(r.information) == 0.0 and float(r.alpha) == 0.5 and bool(r.converged)
    # randomized response at eps = inf, the identity channel: disjoint one-hot rows (eagerly
    # refused before, while under jit it gave these; QA pass)
    P, Q = jd.mechanisms.randomized_response(np.inf)
    np.testing.assert_array_equal(np.asarray(P.probs), [1.0, 0.0])
    np.testing.assert_array_equal(np.asarray(Q.probs), [0.0, 1.0])
    r = jd.chernoff(P, Q)
    assert float(r.information) == np.inf and bool(r.converged)
    assert float(jd.tv(P, Q)) == 1.0 and float(jd.kl(P, Q)) == np.inf
    r = jd.chernoff(
        jd.Categorical(jnp.array([0.5, 0.5, 0, 0])), jd.Categorical(jnp.array([0, 0, 0.3, 0.7]))
    )
    assert float(r.information) == np.inf and bool(r.converged)
    assert (
        float(jd.tv(jd.Categorical(jnp.array([1.0, 0])), jd.Categorical(jnp.array([0, 1.0]))))
        == 1.0
    )


def test_differing_supports_put_alpha_at_an_end():
    p = jnp.array([0.5, 0.5, 0.0])
    q = jnp.array([0.4, 0.4, 0.2])
    r = jd.chernoff(jd.Categorical(p), jd.Categorical(q))
    # -log C_a = -log(0.8) - a log(1.25): decreasing, max at a = 0 with value log 1.25
    assert float(r.alpha) == 0.0
    np.testing.assert_allclose(r.information, np.log(1.25), rtol=1e-15)
    assert float(r.derivative) < 0  # certificate: f'(0) <= 0
    r2 = jd.chernoff(jd.Categorical(q), jd.Categorical(p))  # mirrored: a* = 1
    assert float(r2.alpha) == 1.0 and float(r2.derivative) > 0
    np.testing.assert_allclose(r2.information, r.information, rtol=1e-15)


def test_optax_method_agrees_with_newton():
    P, Q = _batch(jd.Laplace, CASES[:5] + CASES[7:9])
    a = jd.chernoff(P, Q)
    b = jd.chernoff(P, Q, method="optax")
    assert _rel(b.information, a.information).max() < 1e-10
    np.testing.assert_allclose(b.alpha, a.alpha, atol=1e-6)
    assert bool(jnp.all(b.converged))


pair_params = st.tuples(st.floats(-3, 3), st.floats(-2, 2), st.floats(-3, 3), st.floats(-2, 2)).map(
    lambda t: (t[0], float(np.exp(t[1])), t[2], float(np.exp(t[3])))
)


@settings(max_examples=20, deadline=None)
@given(pair_params, st.sampled_from([jd.Laplace, jd.Gaussian]))
def test_identities(params, cls):
    m1, b1, m2, b2 = params
    P, Q = cls(m1, b1), cls(m2, b2)
    r = chernoff_jit()(P, Q)
    rs = chernoff_jit()(Q, P)
    c = float(r.information)
    # symmetry with a* -> 1 - a*
    np.testing.assert_allclose(rs.information, c, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(rs.alpha, 1 - float(r.alpha), atol=1e-9)
    kpq, kqp = float(jd.kl(P, Q)), float(jd.kl(Q, P))
    harmonic = kpq * kqp / (kpq + kqp) if kpq + kqp > 0 else 0.0
    assert 0 <= c <= harmonic * (1 + 1e-12) + 1e-300
    tv = float(jd.tv(P, Q))
    assert -np.expm1(-c) <= tv * (1 + 1e-12) + 1e-300
    if c > 0:
        assert tv <= np.sqrt(-np.expm1(-2 * c)) * (1 + 1e-12) + 1e-300
    else:  # C ~ TV^2/2 underflowed (shift ~1e-198): consistent only if TV^2 is that small
        assert tv * tv < 1e-300
    # the maximum: no alpha on a grid beats it
    grid = jnp.linspace(0.0, 1.0, 101)
    assert float(jnp.max(-jd.log_bc(P, Q, grid))) <= c * (1 + 1e-12) + 1e-300


def test_products_iid_additive_and_heterogeneous_subadditive():
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 2.5)
    single = jd.chernoff(P, Q)
    n5 = jd.chernoff(jd.Product.iid(P, 5), jd.Product.iid(Q, 5))
    np.testing.assert_allclose(n5.information, 5 * single.information, rtol=1e-13)
    np.testing.assert_allclose(n5.alpha, single.alpha, atol=1e-12)
    G1, G2 = jd.Gaussian(0.0, 1.0), jd.Gaussian(0.0, 3.0)  # optimum far from P,Q's
    het = jd.chernoff(jd.Product(P, G1), jd.Product(Q, G2))
    parts = single.information + jd.chernoff(G1, G2).information
    assert float(het.information) < float(parts) * (1 - 1e-3)  # strictly below the sum


def test_data_processing_inequality():
    rng = np.random.default_rng(9)
    p = rng.dirichlet(np.ones(6), size=8)
    q = rng.dirichlet(np.ones(6), size=8)
    merge = np.array([[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1]]).T
    fine = jd.chernoff(jd.Categorical(p), jd.Categorical(q)).information
    coarse = jd.chernoff(jd.Categorical(p @ merge), jd.Categorical(q @ merge)).information
    assert bool(jnp.all(coarse <= fine * (1 + 1e-12)))


def test_eager_jit_vmap_agree():
    P, Q = _batch(jd.Laplace, CASES[:4])
    eager = jd.chernoff(P, Q)
    jitted = chernoff_jit()(P, Q)
    vmapped = jax.vmap(jd.chernoff)(P, Q)
    for name, x, y, z in zip(eager._fields, eager, jitted, vmapped, strict=True):
        # the certificate f'(a*) is rounding noise (~1e-16) whose digits depend on the
        # compiled code (nested in jit or vmap, jaxdp's CPU compiler options do not apply):
        # compare it absolutely
        atol = 1e-14 if name == "derivative" else 0.0
        for other in (y, z):
            np.testing.assert_allclose(
                np.asarray(other, np.float64), np.asarray(x, np.float64), rtol=1e-14, atol=atol
            )


def test_float32_runs_and_accuracy():
    P = jd.Laplace(jnp.zeros(3, jnp.float32), jnp.asarray([1.0, 0.5, 2.0], jnp.float32))
    Q = jd.Laplace(
        jnp.asarray([1.0, 3.0, 0.1], jnp.float32), jnp.asarray([1.5, 0.5, 1.0], jnp.float32)
    )
    r32 = jd.chernoff(P, Q)
    assert r32.information.dtype == jnp.float32
    r64 = jd.chernoff(
        jd.Laplace(np.zeros(3), np.asarray(P.scale, np.float64)),
        jd.Laplace(np.asarray(Q.loc, np.float64), np.asarray(Q.scale, np.float64)),
    )
    assert _rel(r32.information, r64.information).max() < 1e-5
    assert np.abs(np.asarray(r32.alpha) - np.asarray(r64.alpha)).max() < 1e-4


# -- gradients ------------------------------------------------------------------------------


def _info(params, cls):
    m1, b1, m2, b2 = params
    return jd.chernoff(cls(m1, b1), cls(m2, b2)).information


def _alpha(params, cls):
    m1, b1, m2, b2 = params
    return jd.chernoff(cls(m1, b1), cls(m2, b2)).alpha


@pytest.mark.parametrize("cls", [jd.Laplace, jd.Gaussian], ids=["laplace", "gaussian"])
def test_gradients_check_grads(cls):
    params = (0.3, 1.2, 1.7, 0.8)
    check_grads(
        lambda *p: _info(p, cls), params, order=1, modes=("fwd", "rev"), atol=1e-7, rtol=1e-7
    )
    check_grads(
        lambda *p: _alpha(p, cls), params, order=1, modes=("fwd", "rev"), atol=1e-7, rtol=1e-7
    )


@pytest.mark.parametrize(
    "cls, ref",
    [(jd.Laplace, mp_refs.lap_log_bc_cf), (jd.Gaussian, mp_refs.gau_log_bc_cf)],
    ids=["laplace", "gaussian"],
)
def test_envelope_and_ift_gradients_vs_high_precision(cls, ref):
    params = (0.0, 1.3, 2.0, 0.6)
    g_info = jax.jit(jax.grad(lambda p: _info(p, cls)))(params)
    g_alpha = jax.jit(jax.grad(lambda p: _alpha(p, cls)))(params)
    with mp.workdps(60):
        h = mp.mpf(10) ** -12
        for i in range(4):
            up = list(map(mp.mpf, params))
            dn = list(map(mp.mpf, params))
            up[i] += h
            dn[i] -= h
            iu, au = mp_refs.chernoff(ref, *up)
            idn, adn = mp_refs.chernoff(ref, *dn)
            want_i = (iu - idn) / (2 * h)
            want_a = (au - adn) / (2 * h)
            assert abs(float(g_info[i]) - float(want_i)) < 1e-9 * max(1.0, abs(float(want_i)))
            assert abs(float(g_alpha[i]) - float(want_a)) < 1e-7 * max(1.0, abs(float(want_a)))


@functools.cache
def _hessians(cls):
    """Jitted Hessians of (information, alpha) in x = (log b1, m2 / k) for the pair
    (cls(0, e^x0), cls(k x1, b2)); ``k`` and ``b2`` are arguments, so one compile serves
    ordinary and extreme pairs."""

    def res(x, k, b2):
        return jd.chernoff(cls(0.0, jnp.exp(x[0])), cls(x[1] * k, b2))

    return jax.jit(jax.hessian(lambda x, k, b2: (res(x, k, b2).information, res(x, k, b2).alpha)))


@pytest.mark.parametrize(
    "cls, ref, cases",
    [
        # (b1, k, b2, tol_alpha); the second case: scale ratio 1.5e100 or 6.5e169 (alpha*
        # within ~2e-3 of an end point), where the second derivative of alpha* keeps fewer
        # digits (measured 1.5e-8, 4.8e-7). Both cases of a family share one compile.
        (jd.Laplace, mp_refs.lap_log_bc_cf, [(1.3, 1.0, 0.6, 1e-10), (2e-170, 1e-170, 1.3, 2e-6)]),
        (jd.Gaussian, mp_refs.gau_log_bc_cf, [(1.3, 1.0, 0.6, 1e-10), (2e100, 1e100, 1.3, 1e-7)]),
    ],
    ids=["laplace", "gaussian"],
)
def test_second_derivatives_vs_high_precision(cls, ref, cases):
    # Second derivatives need d alpha*/d theta inside the envelope theorem's derivative
    # (d^2 C = f_tt + f_ta alpha*'): without it the Laplace Hessian was 4.5% off. And the
    # quotients and logarithms differentiate without squaring their divisors (at ratios
    # ~1e100 the Hessian was 10x off, or nan).
    for b1, k, b2, tol_alpha in cases:
        x0 = (math.log(b1), 2.0 if k == 1.0 else 0.7)
        h_info, h_alpha = _hessians(cls)(jnp.asarray(x0), k, b2)
        with mp.workdps(60):
            h = mp.mpf(10) ** -6
            x = [mp.log(mp.mpf(b1)), mp.mpf(x0[1])]
            vals = {}
            for i in (-1, 0, 1):
                for j in (-1, 0, 1):
                    args = (0, mp.exp(x[0] + i * h), (x[1] + j * h) * mp.mpf(k), b2)
                    vals[i, j] = mp_refs.chernoff(ref, *args)
            for got, n, tol in ((h_info, 0, 1e-10), (h_alpha, 1, tol_alpha)):

                def f(i, j, n=n, vals=vals):
                    return vals[i, j][n]

                want = np.array(
                    [
                        [
                            f(1, 0) - 2 * f(0, 0) + f(-1, 0),
                            (f(1, 1) - f(1, -1) - f(-1, 1) + f(-1, -1)) / 4,
                        ],
                        [0, f(0, 1) - 2 * f(0, 0) + f(0, -1)],
                    ],
                    dtype=object,
                )
                want[1, 0] = want[0, 1]
                want = np.array([[float(w / h**2) for w in row] for row in want])
                got = np.asarray(got)
                assert np.abs(got - want).max() <= tol * np.abs(want).max(), (b1, got, want)


def test_second_derivative_of_alpha_with_zero_masses():
    # A category of zero mass in both: log 0 differentiates as 0 * inf, and the root of a
    # zero tilted weight in f'' = sum (sqrt(pi) (l - f'))^2 as inf * 0; either made the
    # second derivative of alpha* nan (the same in the quadrature path's empty nodes)
    q = jnp.array([0.35, 0.35, 0.3, 0.0])

    def alpha(x):
        p = jnp.stack([0.6 - x, 0.3 + x, 0.1, 0.0])
        return jd.chernoff(jd.Categorical(p), jd.Categorical(q)).alpha

    # jitted, and the difference quotient's points in one batch: one compile each
    grad = jax.grad(alpha)
    second = float(jax.jit(jax.jacfwd(grad))(0.1))
    e = 1e-4
    g = np.asarray(jax.jit(jax.vmap(grad))(0.1 + jnp.asarray([e / 2, -e / 2, e, -e])))
    fd = (4 * (g[0] - g[1]) / e - (g[2] - g[3]) / (2 * e)) / 3
    assert 0 < float(alpha(0.1)) < 1
    np.testing.assert_allclose(second, float(fd), rtol=1e-8)


def test_gradient_at_boundary_optimum_is_envelope_only():
    # a* = 0 is locally constant: d alpha/d theta = 0, dC/dtheta = d(-log C_0)/dtheta
    def f(x):
        p = jnp.stack([0.5 - x, 0.5 + x, 0.0])
        q = jnp.array([0.4, 0.4, 0.2])
        r = jd.chernoff(jd.Categorical(p), jd.Categorical(q))
        return r.information, r.alpha

    (_, ca), (ti, ta) = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))(0.05, 1.0)
    assert float(ca) == 0.0 and float(ta) == 0.0
    # C = -log Q(supp P) - 0 = log 1.25 does not depend on x at a = 0
    np.testing.assert_allclose(float(ti), 0.0, atol=1e-14)


def test_alpha_gradient_of_near_identical_categorical_pairs():
    # d alpha*/d theta = -(d f'/d theta)/f'': for pairs delta apart the numerator is
    # ~delta^2. Reverse mode summed O(1) cotangents of log(p/q) that cancel (the zero of
    # z (l - ls)) and left ~eps: 2e-4 off at delta = 2^-20, the wrong sign and ~1e3 at
    # 2^-33. Two categories: a* = (log(q2|l2|) - log(q1|l1|))/(l1 - l2), l = log p/q.
    def alpha(t):
        p, q = (jd.Categorical(jnp.stack([x, 1 - x])) for x in (t[0], t[1]))
        return jd.chernoff(p, q).alpha

    def mp_alpha(t0, t1):
        l1, l2 = mp.log(t0 / t1), mp.log((1 - t0) / (1 - t1))
        return (mp.log((1 - t1) * abs(l2)) - mp.log(t1 * abs(l1))) / (l1 - l2)

    grad = jax.jit(jax.grad(alpha))
    for k in (20, 33):
        t = jnp.asarray([0.25, 0.25 + 2.0**-k])
        with mp.workdps(40):
            t0, t1 = mp.mpf(0.25), mp.mpf(0.25) + mp.mpf(2) ** -k
            want = [
                float(mp.diff(lambda x, t1=t1: mp_alpha(x, t1), t0)),
                float(mp.diff(lambda x, t0=t0: mp_alpha(t0, x), t1)),
            ]
        # measured 5.2e-10 (k = 20) and 6.7e-6 (k = 33): the input rounding of log(p/q),
        # eps/delta relative, ~8x below this bound
        assert _rel(grad(t), want).max() < 8 * 2.2e-16 * 2.0**k


def test_laplace_mechanism_at_huge_epsilon_converges():
    # f'' overflows beyond eps ~1e154 (its scale is eps^2); at eps = 1e300 the Newton step
    # -f'/f'' was 0 at the start 1/2 (f' rounded to 3.8e283), which ended the loop at once,
    # uncertified: converged=False. Bisection now collapses the bracket, which certifies.
    eps = jnp.asarray([1e200, 1e280, 1e300, 1e305])
    r = jd.chernoff(*jd.mechanisms.laplace(epsilon=eps))
    assert bool(jnp.all(r.converged))
    # C = eps/2 - log(1 + eps/2) (a* = 1/2); measured within 1.9e-15 (4 ulp of alpha off 1/2)
    assert _rel(r.information, np.asarray(eps) / 2).max() < 4e-15


def test_second_derivatives_through_the_looped_paths(monkeypatch):
    # Pairs solved inside a loop (the optax path's lax.map; CPU batches of 4 chunks and
    # more, a fori_loop) lost the implicit derivative of alpha* in reverse-then-forward
    # second derivatives: jax.hessian of the information was d2f/dtheta2 at fixed alpha,
    # 0.0575 instead of 0.1675 here. The loops now run without tangents (_reattach).
    monkeypatch.setattr(importlib.import_module("jaxdp.chernoff"), "CPU_CHUNK", 8)
    n = 37  # (a batch no other test traces: it takes the loop, 5 chunks of 8)

    def info(s, n=None):
        P = jd.Laplace(0.0, s if n is None else s * jnp.ones(n))
        return jd.chernoff(P, jd.Laplace(1.0, 2.0))

    # jitted: eager, each transformation's small programs compiled on their own (38)
    grad = jax.jit(jax.grad(lambda s: info(s).information))
    h = 1e-5
    want = (grad(1.5 + h) - grad(1.5 - h)) / (2 * h)  # one pair: no loop
    got = jax.jit(jax.hessian(lambda s: jnp.sum(info(s, n=n).information)))(1.5) / n
    np.testing.assert_allclose(got, want, rtol=1e-8)  # (central difference: ~1e-10)
    # (the optax path goes through the same _reattach; its hessian, 7 more seconds of
    # compile, was checked ad hoc: 0.16750322788930758)


def test_bad_arguments():
    P, Q = jd.Laplace(), jd.Laplace(1.0)
    with pytest.raises(ValueError, match="method"):
        jd.chernoff(P, Q, method="bogus")
    for bad in (0, -1, 5.0, True, np.float64(5.0)):
        with pytest.raises(ValueError, match="max_steps"):
            jd.chernoff(P, Q, max_steps=bad)
    # a numpy integer is an int (it was refused: "must be a positive int, got np.int64(100)")
    r, want = jd.chernoff(P, Q, max_steps=np.int64(100)), jd.chernoff(P, Q, max_steps=100)
    assert all(bool(x == y) for x, y in zip(r, want, strict=True))
    # XLA:CPU flushes subnormals to zero: a subnormal scale would act as 0 (nan results)
    for cls in (jd.Laplace, jd.Gaussian, jd.DiscreteLaplace):
        with pytest.raises(ValueError, match="scale must be at least"):
            cls(0.0, jnp.asarray([1.0, 2e-308]))
    with pytest.raises(ValueError, match="smallest normal float32"):
        jd.Laplace(jnp.float32(0.0), jnp.float32(1e-39))
    assert (
        float(jd.chernoff(jd.Laplace(0.0, 2.3e-308), jd.Laplace(4.6e-308, 2.3e-308)).information)
        > 0
    )


@pytest.mark.parametrize("family", ["Laplace", "DiscreteLaplace"])
def test_large_cpu_batches_are_chunked_without_changing_results(family):
    from jaxdp.chernoff import _cpu_chunk

    D = getattr(jd, family)
    chunk = _cpu_chunk(D(0.0, 1.0), D(0.0, 1.0))  # the family's chunk size (4096, 1024)
    n = 4 * chunk + 3  # the chunked path; the last chunk overlaps the one before it
    b = jnp.linspace(0.5, 2.0, n)
    loc = (
        jnp.round(jnp.linspace(0.0, 3.0, n))
        if family == "DiscreteLaplace"
        else jnp.linspace(0.0, 3.0, n)
    )
    big = jd.chernoff(D(0.0, b), D(loc, 1.3))
    # chunk starts and ends, and both sides of the overlap
    idx = np.array([0, 1, chunk - 1, chunk, n - chunk - 1, n - chunk, n - 4, n - 1])
    small = jd.chernoff(D(0.0, b[idx]), D(loc[idx], 1.3))
    np.testing.assert_allclose(big.information[idx], small.information, rtol=1e-14)
    np.testing.assert_allclose(big.alpha[idx], small.alpha, atol=1e-14)
    np.testing.assert_allclose(big.derivative[idx], small.derivative, atol=1e-14)
    np.testing.assert_array_equal(big.iterations[idx], small.iterations)
    assert bool(jnp.all(big.converged)) and big.information.shape == (n,)
    # every pair was solved: the results are those of the pair, not of a neighbour's
    assert bool(jnp.all(jnp.diff(big.information) != 0))


def test_float32_cpu_batches_are_chunked_without_changing_results():
    from jaxdp.chernoff import _cpu_chunk

    P = jd.Laplace(0.0, 1.0)
    chunk = _cpu_chunk(P, P)
    n = 4 * chunk + 3  # the chunked path in float32
    # neighbouring pairs far apart (Weyl sequences), so that a chunk off by one index fails
    i = np.arange(n)
    b = jnp.asarray(0.5 + 1.5 * ((i * 0.6180339887) % 1.0), jnp.float32)
    loc = jnp.asarray(3.0 * ((i * 0.4142135624) % 1.0), jnp.float32)
    big = jd.chernoff(jd.Laplace(jnp.float32(0.0), b), jd.Laplace(loc, jnp.float32(1.3)))
    idx = np.array([0, chunk - 1, chunk, n - chunk - 1, n - chunk, n - 1])
    small = jd.chernoff(
        jd.Laplace(jnp.float32(0.0), b[idx]), jd.Laplace(loc[idx], jnp.float32(1.3))
    )
    assert big.information.dtype == jnp.float32
    # a few float32 ulp: the two programs may vectorize differently
    np.testing.assert_allclose(big.information[idx], small.information, rtol=1e-6)
    np.testing.assert_allclose(big.alpha[idx], small.alpha, rtol=1e-6)
    assert bool(jnp.all(big.converged))
    # every pair was solved: the results are those of the pair, not of a neighbour's
    assert bool(jnp.all(jnp.diff(big.information) != 0))


def test_signed_step_takes_the_same_steps_as_the_plain_one(monkeypatch):
    # the loop reads the signs of f' from its step (jaxdp.chernoff signed_step); a kernel
    # module may opt out (SIGNED_STEP = False). Both must take the same steps: random pairs,
    # equal scales (a* = 1/2 exactly), P == Q (f' = 0 everywhere) and a nan parameter.
    from jaxdp.kernels import laplace

    rng = np.random.default_rng(11)
    n = 64
    m1, m2 = rng.normal(0, 2, n), rng.normal(0, 2, n)
    b1, b2 = np.exp(rng.uniform(-3, 3, n)), np.exp(rng.uniform(-3, 3, n))
    b2[:4] = b1[:4]
    m2[4:6], b2[4:6] = m1[4:6], b1[4:6]
    b1[6] = np.nan
    args = tuple(jnp.asarray(v) for v in (m1, b1, m2, b2))

    def solve(max_steps):  # under jit: nan gives nan, not an error; a trace of its own
        def run(a, b, c, d):
            return jd.chernoff(jd.Laplace(a, b), jd.Laplace(c, d), max_steps=max_steps)

        return jax.jit(run)(*args)

    signed = solve(97)  # Laplace's default
    monkeypatch.setattr(laplace, "SIGNED_STEP", False, raising=False)
    plain = solve(98)
    np.testing.assert_allclose(signed.information, plain.information, rtol=1e-14, atol=0)
    np.testing.assert_allclose(signed.alpha, plain.alpha, rtol=1e-14, atol=0)
    # the certificate f'(a*) is rounding noise (~1e-16) at an interior optimum
    np.testing.assert_allclose(signed.derivative, plain.derivative, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(signed.converged, plain.converged)
    np.testing.assert_array_equal(signed.iterations, plain.iterations)
    assert not bool(signed.converged[6]) and bool(jnp.all(signed.converged[:6]))
    np.testing.assert_array_equal(signed.information[4:6], 0.0)


def test_nested_in_user_transformations():
    # jaxdp's entry points carry CPU compiler options, which JAX refuses on a nested jit:
    # inside a user's jit (traced arguments or closed-over constants), vmap and grad the
    # plain jit is used, with the same numbers
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 2.0)
    want = float(jd.chernoff(P, Q).information)
    got = [
        jax.jit(lambda m: jd.chernoff(jd.Laplace(m, 1.0), Q).information)(0.0),
        jax.jit(lambda: jd.chernoff(P, Q).information)(),
        jax.vmap(lambda m: jd.chernoff(jd.Laplace(m, 1.0), Q).information)(jnp.zeros(2))[1],
    ]
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-14)
    assert isinstance(jd.CPU_COMPILER_OPTIONS, dict)


def test_cpu_compiler_options_follow_the_arguments_device(monkeypatch):
    # On a GPU host (default backend "gpu"), arrays put on a CPU device are compiled by
    # XLA:CPU: they get jaxdp's CPU options too (they did not; the benchmarks' same-process
    # CPU side of a GPU run would have been 1.2-1.6x slow). A one-line function: the
    # choice of variant is what is tested.
    from jaxdp import _jit

    f = _jit.jit(lambda x: x + 1.0)
    plain, cpu = f._jaxdp_variants["plain"], f._jaxdp_variants["cpu"]
    cpu0 = jax.devices("cpu")[0]
    f(jnp.ones(1))
    assert (plain._cache_size(), cpu._cache_size()) == (0, 1)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    f(jnp.ones(2))  # uncommitted: the default backend's
    assert (plain._cache_size(), cpu._cache_size()) == (1, 1)
    assert float(f(jax.device_put(jnp.ones(3), cpu0))[0]) == 2.0  # committed to a CPU
    assert (plain._cache_size(), cpu._cache_size()) == (1, 2)
    with jax.default_device(cpu0):
        f(jnp.ones(4))
    assert (plain._cache_size(), cpu._cache_size()) == (1, 3)


def test_gaussian_scale_ratios_beyond_float_range_of_their_square():
    # sigma2/sigma1 > ~1.3e154: e^rho = (sigma2/sigma1)^2 overflows; such pairs are solved
    # in the mirror orientation (Q, P). Before: inf reported as converged (both orders).
    cases = [
        (0.0, 1.0, 0.0, 1e160),
        (0.0, 1e-150, 0.0, 1e100),
        (3.0, 1.0, -2.0, 1e300),
        (1e200, 1e250, 0.0, 1e-50),
    ]
    arr = np.array(cases + [(m2, s2, m1, s1) for m1, s1, m2, s2 in cases])
    r = chernoff_jit()(jd.Gaussian(arr[:, 0], arr[:, 1]), jd.Gaussian(arr[:, 2], arr[:, 3]))
    assert bool(jnp.all(r.converged))
    for i, c in enumerate(arr):
        info, a = mp_refs.chernoff(mp_refs.gau_log_bc_cf, *c)
        assert _rel(r.information[i], float(info)) < 1e-13, (c, r.information[i], info)
        # alpha* ~ 1/rho sits ~1e-3 from an end: 1 - alpha of the mirror keeps ~1e-13
        assert _rel(r.alpha[i], float(a)) < 1e-12, (c, r.alpha[i], a)
    # float32 overflows e^rho from a ratio of ~1.8e19 (was inf there too)
    s = jnp.asarray([1e-10, 1e25], jnp.float32)
    r32 = jd.chernoff(jd.Gaussian(jnp.zeros(2, jnp.float32), s), jd.Gaussian(0.0, s[::-1]))
    assert bool(jnp.all(r32.converged))
    for i in range(2):
        c = (0.0, float(s[i]), 0.0, float(s[1 - i]))
        info, a = mp_refs.chernoff(mp_refs.gau_log_bc_cf, *c)
        assert _rel(r32.information[i], float(info)) < 1e-5, (c, r32.information[i], info)
        assert _rel(r32.alpha[i], float(a)) < 1e-4, (c, r32.alpha[i], a)


def test_mixed_float32_float64_pair_is_mirrored_like_float64():
    # The overflow test multiplied the float32 scale by float64's largest float, which
    # overflowed (a RuntimeWarning) in float32: no pair was mirrored and a ratio the float64
    # pair solves (e^rho = ratio^2 ~ 1e320) gave nan, not converged.
    s = jnp.float32(1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        mixed = jd.chernoff(jd.Gaussian(jnp.float32(0.0), s), jd.Gaussian(0.0, 1e150))
    ref = jd.chernoff(jd.Gaussian(0.0, float(s)), jd.Gaussian(0.0, 1e150))
    assert bool(mixed.converged) and mixed.information.dtype == jnp.float64
    assert float(mixed.information) == float(ref.information) > 0


def test_gaussian_large_scale_ratios_with_shifts_of_the_wide_scale():
    # sigma2/sigma1 from ~1e38 to ~1e153 with centres ~sigma2 apart: c = Delta^2/(2 sigma1^2)
    # times r^2 overflowed in f', and the closed-form start's B^2 ~ K^4 from a ratio of
    # ~1e38 on. At 1e100 and 1e150 the solver stopped at alpha = 1/2 with f' = -inf and
    # reported the wrong information (114.8 for 226.8) as *converged*; elsewhere it took
    # 13-14 bisection trips. Now the closed-form start is exact (no trip) and the
    # implicit-function tangent of alpha* is finite.
    cases = [(0.0, 1.0, sh * 10.0**e, 10.0**e) for e in (40, 100, 150) for sh in (0.5, 3.0)]
    arr = np.array(cases + [(m2, s2, m1, s1) for m1, s1, m2, s2 in cases])
    P, Q = jd.Gaussian(arr[:, 0], arr[:, 1]), jd.Gaussian(arr[:, 2], arr[:, 3])
    r = chernoff_jit()(P, Q)
    assert bool(jnp.all(r.converged)) and int(jnp.max(r.iterations)) <= 2, r
    for i, c in enumerate(arr):
        info, a = mp_refs.chernoff(mp_refs.gau_log_bc_cf, *c)
        assert _rel(r.information[i], float(info)) < 1e-13, (c, r.information[i], info)
        assert _rel(r.alpha[i], float(a)) < 1e-12, (c, r.alpha[i], a)

    # d alpha*/d log sigma2 and d alpha*/d mu2 (relative to sigma2) against central
    # differences of the solver itself, for one pair of each ratio
    @jax.jit
    def alpha(log_s, rel_shift):
        s = jnp.exp(log_s)
        return jd.chernoff(jd.Gaussian(0.0, 1.0), jd.Gaussian(rel_shift * s, s)).alpha

    for e in (40, 100, 150):
        x = (e * math.log(10.0), 0.5)
        grads = jax.jit(jax.grad(alpha, argnums=(0, 1)))(*x)
        h = 1e-4
        for k, g in enumerate(grads):
            up = tuple(v + h * (j == k) for j, v in enumerate(x))
            dn = tuple(v - h * (j == k) for j, v in enumerate(x))
            fd = (float(alpha(*up)) - float(alpha(*dn))) / (2 * h)
            np.testing.assert_allclose(float(g), fd, rtol=1e-6, err_msg=f"ratio 1e{e}, arg {k}")


def test_overflowing_information_is_not_converged():
    # Gaussians 1e300 standard deviations apart: C = (Delta/sigma)^2/8 overflows. Supports
    # coincide, so inf is not an exact answer (it was reported as converged, like disjoint
    # supports); disjoint supports stay converged at inf.
    r = jd.chernoff(jd.Gaussian(0.0, 1.0), jd.Gaussian(1e300, 1.0))
    assert float(r.information) == np.inf and not bool(r.converged)
    d = jd.chernoff(jd.Categorical(jnp.array([1.0, 0.0])), jd.Categorical(jnp.array([0.0, 1.0])))
    assert float(d.information) == np.inf and bool(d.converged)


def test_invalid_pairs_under_jit_leave_the_rest_of_the_batch_alone():
    # Under jit nothing is validated: a nan scale, an infinite location and a negative scale
    # are unconverged, and every other pair of their chunk still converges (the loop test
    # reduces a whole state array; one nan there must not end the loop for all)
    from jaxdp.chernoff import _cpu_chunk

    n = 4 * _cpu_chunk(jd.Laplace(0.0, 1.0), jd.Laplace(0.0, 1.0)) + 3
    rng = np.random.default_rng(3)
    b1, b2, m2 = rng.uniform(0.5, 2.0, n), rng.uniform(0.5, 2.0, n), rng.normal(size=n)
    bad = [5, 7, 9]
    b1[5], m2[7], b2[9] = np.nan, np.inf, -1.0
    r = jax.jit(lambda b1, m2, b2: jd.chernoff(jd.Laplace(0.0, b1), jd.Laplace(m2, b2)))(b1, m2, b2)
    conv = np.asarray(r.converged)
    assert not conv[bad].any() and conv.sum() == n - len(bad)
    assert np.isfinite(np.asarray(r.information)[conv]).all()


def test_optax_method_solves_each_pair_and_certifies_only_what_it_solved():
    # One L-BFGS over the sum of a batch shared its line search and stopping test, and
    # certified |f'| <= 1e-6 (absolute): the first pair (information 2.7e-13, gradients
    # ~1e-13) came back at alpha = 1/2, 0.8% off, marked converged. Each pair now has its
    # own L-BFGS, in units of its Bhattacharyya distance, and Newton's certificate.
    # (the last two pairs: optimum at an end point, alpha* = 0 and 1, information log 2)
    P = jd.Categorical(
        jnp.asarray([[1 - 1e-12, 1e-12], [0.5, 0.5], [0.9, 0.1], [0.3, 0.7], [1, 0], [0.5, 0.5]])
    )
    Q = jd.Categorical(
        jnp.asarray(
            [[1 - 3e-12, 3e-12], [1e-9, 1 - 1e-9], [0.2, 0.8], [0.3 + 1e-7, 0.7 - 1e-7]]
            + [[0.5, 0.5], [1, 0]]
        )
    )
    a, b = jd.chernoff(P, Q), jd.chernoff(P, Q, method="optax")
    assert bool(jnp.all(b.converged))
    assert _rel(b.information, a.information).max() < 1e-13
    # |alpha - alpha*| <= sqrt(eps)-ish by the certificate; measured 4e-10 (pair 1)
    np.testing.assert_allclose(b.alpha, a.alpha, rtol=0, atol=1e-8)
    # the end points, with certificates f'(0) <= 0 and f'(1) >= 0 (-log 2, log 2), come from
    # the end-point test: no L-BFGS iteration there (it ran all max_steps = 100 towards
    # z = -inf or inf, and reported them)
    np.testing.assert_array_equal(b.alpha[4:], [0.0, 1.0])
    np.testing.assert_allclose(b.information[4:], np.log(2), rtol=1e-15)
    np.testing.assert_allclose(b.derivative[4:], [-np.log(2), np.log(2)], rtol=1e-15)
    np.testing.assert_array_equal(b.iterations[4:], 0)
    assert int(jnp.min(b.iterations[:4])) > 0


def test_broadcast_batch_keeps_event_axes():
    # what the optax path flattens per pair: batch axes lead every leaf, event axes stay
    shape = (3, 2)
    cat = jd.Categorical(jnp.asarray([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
    dens = jd.Density(
        lambda x, p: -jnp.abs(x - p) - jnp.log(2.0),
        params=jnp.asarray([0.0, 0.5]),
        breakpoints=[jnp.asarray([0.0, 0.5])],
    )
    prod = jd.Product(jd.Laplace(0.0, jnp.asarray([1.0, 2.0])), jd.Gaussian(0.0, 1.0))
    b = cat._broadcast_batch(shape)
    assert b.log_probs.shape == (3, 2, 3) and b.batch_shape == shape
    np.testing.assert_array_equal(b.log_probs[2], cat.log_probs)
    b = dens._broadcast_batch(shape)
    assert b.params.shape == shape and b.breakpoints.shape == (3, 2, 1)
    assert b.centre.shape == shape and b.log_prob_fn is dens.log_prob_fn
    b = prod._broadcast_batch(shape)
    assert [c.scale.shape for c in b.components] == [shape, shape] and b.counts == (1, 1)
    np.testing.assert_array_equal(b.components[0].scale[1], [1.0, 2.0])


def test_optax_method_reports_unconverged_interior_pairs():
    # the L-BFGS path marked every pair whose supports coincide as at an end point (its
    # end-point derivatives are -inf and inf, whose sum is nan), so always converged
    # (one step, one compile: an equal-scale pair starts at its optimum 1/2, f' = 0, and is
    # converged; a narrow Q is not; test_optax_method_agrees_with_newton runs to the end)
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(3.0, jnp.asarray([1.0, 0.2]))
    cut = jd.chernoff(P, Q, method="optax", max_steps=1)
    assert bool(cut.converged[0]) and abs(float(cut.derivative[0])) <= 1e-6
    assert not bool(cut.converged[1]) and abs(float(cut.derivative[1])) > 1e-3


@pytest.mark.parametrize(
    "P, Q",
    [
        (jd.Laplace(jnp.zeros(0), 1.0), jd.Laplace(1.0, 1.0)),
        (jd.Gaussian(jnp.zeros(0), 1.0), jd.Gaussian(1.0, 1.0)),
        (jd.DiscreteLaplace(jnp.zeros((2, 0)), 1.0), jd.DiscreteLaplace(1.0, 1.0)),
        (jd.Categorical(jnp.full((0, 2), 0.5)), jd.Categorical(jnp.array([0.3, 0.7]))),
    ],
    ids=["laplace", "gaussian", "discrete-laplace", "categorical"],
)
def test_empty_batch(P, Q):
    # raised ZeroDivisionError / a reduction over an empty array
    res = jd.chernoff(P, Q)
    shape = jnp.broadcast_shapes(P.batch_shape, Q.batch_shape)
    for field in res:
        assert field.shape == shape
    assert res.information.dtype == jnp.float64 and res.converged.dtype == jnp.bool_

"""The discrete Laplace kernel's hand-written ``value_derivs`` (log C_a and its first three
alpha-derivatives) against ``log_bc``, autodiff of ``log_bc`` and a 60-digit mpmath sum over
the integers; the solver end to end against mpmath; float32; parameter derivatives.

Compile time dominates: every jitted function here is called on one batch (all cases
concatenated), once per dtype.
"""

import functools

import jax
import jax.numpy as jnp
import mp_refs
import mpmath as mp
import numpy as np
import pytest
from autodiff_refs import autodiff3

import jaxdp as jd
from jaxdp.coefficient import raw_log_bc
from jaxdp.kernels import discrete_laplace as dl

# (loc1, scale1, loc2, scale2): near-identical scales, the geometric mechanism at tiny
# epsilon, a huge shift, scale ratios 1e3 and 1e-3, small scales (tanh kappa ~ 1), and pairs
# that put the Bregman gaps on both sides of the series/closed-form switch
EDGE = [
    (0, 1.0, 0, 1.0 + 1e-9),
    (0, 1.0, 1, 1.0 + 1e-9),
    (0, 1e8, 1, 1e8),
    (0, 1e8, 1, 1e8 * (1 + 1e-9)),
    (0, 1.0, 1000, 1.0),
    (0, 1.0, 1000, 1.5),
    (0, 1.0, 0, 1e3),
    (0, 1.0, 3, 1e3),
    (0, 1.0, 0, 1e-3),
    (0, 1.0, 2, 1e-3),
    (0, 0.05, 3, 0.07),
    (0, 0.05, 0, 0.0505),
    (0, 100.0, 0, 130.0),
    (0, 3.0, 1, 3.9),
    (-2, 2.0, 3, 2.0),
    (0, 0.2, 1, 0.26),
]
EDGE_ALPHAS = (1e-6, 0.23, 0.61, 1 - 1e-6)
_RNG = np.random.default_rng(7)
N_RAND = 40
RAND = np.stack(
    [
        np.round(_RNG.normal(size=N_RAND) * 3),
        np.exp(_RNG.uniform(-3, 5, N_RAND)),
        np.round(_RNG.normal(size=N_RAND) * 3),
        np.exp(_RNG.uniform(-3, 5, N_RAND)),
    ],
    axis=1,
)
RAND_ALPHA = _RNG.uniform(0.01, 0.99, N_RAND)
# mpmath checks of value and derivatives: (pair, alpha)
MP_CASES = [
    ((0, 1.0, 0, 1.0 + 1e-9), 0.3),
    ((0, 1.0, 1, 1.0 + 1e-9), 0.7),
    ((0, 1e8, 1, 1e8), 0.37),
    ((0, 1.0, 1000, 1.5), 0.45),
    ((0, 1.0, 0, 1e3), 0.1),
    ((0, 1.0, 2, 1e-3), 0.9),
    ((0, 0.05, 3, 0.07), 0.6),
    ((0, 0.05, 0, 0.0505), 0.23),
    ((0, 100.0, 0, 130.0), 0.37),
    ((0, 3.0, 1, 3.9), 1e-6),
    ((-2, 2.0, 3, 2.0), 1 - 1e-6),
]
# Chernoff information and alpha* against a 50-digit maximisation
CHERNOFF_CASES = [
    (0, 1.0, 0, 1.0 + 1e-9),
    (0, 1.0, 1, 1.0 + 1e-9),
    (0, 1e8, 1, 1e8),
    (0, 1.0, 20, 1.5),
    (0, 1.0, 0, 1e3),
    (0, 1.0, 2, 1e-3),
    (0, 0.05, 3, 0.07),
    (0, 100.0, 0, 130.0),
    (-2, 2.0, 3, 2.0),
]
# the speed benchmark's distribution, with integer locations: scales in [0.5, 1.5]
_BRNG = np.random.default_rng(0)
BENCH = np.stack(
    [
        np.round(_BRNG.normal(size=N_RAND) * 3),
        _BRNG.uniform(0.5, 1.5, N_RAND),
        np.round(_BRNG.normal(size=N_RAND) * 3),
        _BRNG.uniform(0.5, 1.5, N_RAND),
    ],
    axis=1,
)
RAND32 = np.asarray(RAND, np.float32).astype(np.float64)  # float32-rounded parameters
# scales 1e150: log C ~ -1e-301 (equal scales, a shift of 1) and ~-1e-13 (a scale ratio
# 1 + 1e-6); at alpha = 0.37
HUGE_PAIRS = [(0, 1e150, 1, 1e150), (0, 1e150, 0, 1e150 * (1 + 1e-6))]

# one float64 batch for value_derivs: edge x alphas, random, mpmath cases, float32-rounded
PAIRS = np.concatenate(
    [
        np.repeat(np.asarray(EDGE), len(EDGE_ALPHAS), axis=0),
        RAND,
        np.asarray([p for p, _ in MP_CASES]),
        RAND32,
        HUGE_PAIRS,
    ]
)
ALPHA = np.concatenate(
    [
        np.tile(EDGE_ALPHAS, len(EDGE)),
        RAND_ALPHA,
        [a for _, a in MP_CASES],
        RAND_ALPHA,
        np.full(len(HUGE_PAIRS), 0.37),
    ]
)
_N_AUTODIFF = len(EDGE) * len(EDGE_ALPHAS) + N_RAND  # rows compared with autodiff
_MP_ROWS = slice(_N_AUTODIFF, _N_AUTODIFF + len(MP_CASES))
_RAND32_ROWS = slice(_N_AUTODIFF + len(MP_CASES), _N_AUTODIFF + len(MP_CASES) + N_RAND)
# one float64 batch for the solver
# equal scales 1e150 one apart: information ~1e-301 at alpha* = 1/2 (symmetry)
HUGE = (0, 1e150, 1, 1e150)
SOLVE = np.concatenate([np.asarray(CHERNOFF_CASES), BENCH, RAND32, [HUGE]])
_BENCH_ROWS = slice(len(CHERNOFF_CASES), len(CHERNOFF_CASES) + N_RAND)
_SOLVE32_ROWS = slice(len(CHERNOFF_CASES) + N_RAND, len(CHERNOFF_CASES) + 2 * N_RAND)


def _pq(pairs, dtype=jnp.float64):
    pairs = jnp.asarray(pairs, dtype)
    return jd.DiscreteLaplace(pairs[:, 0], pairs[:, 1]), jd.DiscreteLaplace(
        pairs[:, 2], pairs[:, 3]
    )


def _rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.abs(got - want) / np.abs(want)


@jax.jit
def _value_derivs(P, Q, a):
    return dl.value_derivs(dl.derivs_setup(P, Q), a)


@functools.cache
def _ours():
    return [np.asarray(x) for x in _value_derivs(*_pq(PAIRS), jnp.asarray(ALPHA))]


@functools.cache
def _solved():
    return jd.chernoff(*_pq(SOLVE))


def _mp_log_c(m1, b1, m2, b2, a):
    """log C_a by summing p^a q^(1-a) over the integers at the working precision: every
    term between the locations explicitly, the two tails beyond them (geometric) exactly;
    nothing of jaxdp's closed form."""
    b1, b2, a = mp.mpf(b1), mp.mpf(b2), mp.mpf(a)
    m1, m2 = int(m1), int(m2)
    lo, hi = min(m1, m2), max(m1, m2)
    log_c1 = -2 * mp.atanh(mp.exp(-1 / b1))  # log tanh(1/(2b)), exact for large 1/b too
    log_c2 = -2 * mp.atanh(mp.exp(-1 / b2))
    l1, l2 = a / b1, (1 - a) / b2

    def log_term(k):
        return a * log_c1 + (1 - a) * log_c2 - l1 * abs(k - m1) - l2 * abs(k - m2)

    # beyond the locations consecutive terms have the ratio r = e^{-(l1 + l2)}
    r, one_minus_r = mp.exp(-(l1 + l2)), -mp.expm1(-(l1 + l2))
    if lo == hi:  # one location: 1 + 2r/(1 - r) times its term
        return log_term(lo) + mp.log1p(2 * r / one_minus_r)
    logs = [log_term(k) for k in range(lo + 1, hi)]
    logs += [log_term(lo) - mp.log(one_minus_r), log_term(hi) - mp.log(one_minus_r)]
    top = max(logs)
    return top + mp.log(mp.fsum(mp.exp(x - top) for x in logs))


def _mp_chernoff(pair):
    """(information, alpha*) by golden-section search at 50 digits: 160 steps put alpha*
    within ~1e-16 of the maximiser even for information ~1e-19 (the objective is resolved to
    ~1e-50), and the information, quadratic in that error, to ~1e-32 relative."""
    with mp.workdps(50):
        f = lambda t: -_mp_log_c(*pair, t)  # noqa: E731
        lo, hi, fc, fd = mp_refs.golden_section(f, mp.mpf(0), mp.mpf(1), 160)
        return max(fc, fd), (lo + hi) / 2


def test_mp_reference_is_the_sum():
    # the test's mpmath reference against the project's (window plus geometric tails)
    for pair, a in (((0, 1.0, 3, 2.0), 0.3), ((0, 2.0, 0, 3.0), 0.6), ((1, 0.5, -4, 7.0), 0.9)):
        with mp.workdps(60):
            ours = _mp_log_c(*pair, a)
        assert abs(ours - mp_refs.dl_log_bc(*pair, a)) < mp.mpf(10) ** -50 * abs(ours)


@functools.cache
def _reference():
    rows = slice(0, _N_AUTODIFF)
    return [np.asarray(x) for x in autodiff3(*_pq(PAIRS[rows]), jnp.asarray(ALPHA[rows]))]


def test_value_derivs_match_log_bc_and_autodiff():
    out = [x[:_N_AUTODIFF] for x in _ours()]
    ref = [x[:_N_AUTODIFF] for x in _reference()]
    assert all(np.isfinite(x).all() for x in out)
    # value and first derivative: two independent cancellation-free forms of log C agree,
    # relative, also where log C ~ -1e-19 (no alpha here is a root of d1); the bound is
    # log_bc's own error (up to 2e-14 against mpmath, near its switch from Gauss-Legendre to
    # closed-form Bregman gaps; value_derivs is exact there: test_value_derivs_vs_mpmath)
    assert _rel(out[0], ref[0]).max() < 4e-14
    assert _rel(out[1], ref[1]).max() < 4e-14
    # higher derivatives: relative, plus the rounding that nested autodiff of log_bc's sums
    # of exponentials carries, ~eps d1^2 (resp. eps |d1|^3): where log C is nearly linear in
    # alpha (b2/b1 = 1e-3: d2 ~ 1e-160) that rounding is all of the reference's d2
    d1 = np.abs(ref[1])
    assert (np.abs(out[2] - ref[2]) <= 1e-12 * np.abs(ref[2]) + 1e-15 * d1**2).all()
    scale = np.maximum(np.abs(ref[3]), np.abs(ref[2]))  # d3 drives Halley steps only
    assert (np.abs(out[3] - ref[3]) <= 1e-12 * scale + 1e-15 * d1**3).all()


@pytest.mark.parametrize("case", range(len(MP_CASES)), ids=[str(c) for c in MP_CASES])
def test_value_derivs_vs_mpmath(case):
    pair, a = MP_CASES[case]
    out = [float(x[_MP_ROWS][case]) for x in _ours()]
    with mp.workdps(60):  # the value to 1e-19 and three numerical derivatives
        f = lambda t: _mp_log_c(*pair, t)  # noqa: E731
        want = [float(f(mp.mpf(a)))] + [float(mp.diff(f, mp.mpf(a), n)) for n in (1, 2, 3)]
    # a few ulp (measured: up to 9e-15, where a closed-form Bregman gap sits next to the
    # series switch and loses ~eps/tau^2 in the cancellation of its first-order terms)
    assert _rel(out[0], want[0]) < 2e-14, (out[0], want[0])
    assert _rel(out[1], want[1]) < 2e-14, (out[1], want[1])
    assert _rel(out[2], want[2]) < 2e-14, (out[2], want[2])
    assert abs(out[3] - want[3]) < 2e-14 * max(abs(want[3]), abs(want[2])), (out[3], want[3])


def test_chernoff_vs_mpmath():
    r = _solved()
    assert bool(jnp.all(r.converged))
    for i, c in enumerate(CHERNOFF_CASES):
        info, a = _mp_chernoff(c)
        # relative 1e-14 also for the near-identical pairs (information ~1e-19; measured
        # 1e-15 at most)
        assert _rel(r.information[i], float(info)) < 1e-14, (c, float(r.information[i]), info)
        assert abs(float(r.alpha[i]) - float(a)) < 1e-13, (c, float(r.alpha[i]), a)
    # relative accuracy down to information ~1e-301 (digits enough for 1 - 1e-301)
    with mp.workdps(700):
        info = -_mp_log_c(*HUGE, mp.mpf(1) / 2)
    assert _rel(r.information[-1], float(info)) < 1e-14, (float(r.information[-1]), info)
    assert float(r.alpha[-1]) == 0.5


def test_solver_trips_on_benchmark_pairs():
    # Halley steps from the blended start (measured: at most 2 on 1e5 such pairs)
    r = _solved()
    assert bool(jnp.all(r.converged[_BENCH_ROWS]))
    assert int(jnp.max(r.iterations[_BENCH_ROWS])) <= 3


def test_value_derivs_broadcasts():
    # batch shapes of locations and scales broadcast (the per-pair constants are full size)
    P, Q = (
        jd.DiscreteLaplace(jnp.arange(3.0), 2.0),
        jd.DiscreteLaplace(0.0, jnp.array([[1.5], [3]])),
    )
    out = _value_derivs(P, Q, jnp.full((2, 3), 0.4))
    pairs = [(m, 2.0, 0, s) for s in (1.5, 3.0) for m in (0, 1, 2)]
    want = _value_derivs(*_pq(pairs), jnp.full(6, 0.4))
    for x, y in zip(out, want, strict=True):
        assert x.shape == (2, 3)
        np.testing.assert_array_equal(np.asarray(x).ravel(), np.asarray(y))


def test_log_bc_near_identical_and_huge_scales():
    # log_bc's scale-mismatch term from b2 - b1, not from the rounded 1/(2 b_i); and its
    # Gauss-Legendre Bregman gaps in units of kappa (no under/overflow for scales ~1e150)
    near = [(0, 1.0, 0, 1.0 + 1e-9), (0, 2.0, 0, 2.0 * (1 + 1e-9)), (0, 0.3, 0, 0.3 + 1e-12)]
    got = np.asarray(jd.log_bc(*_pq(near + HUGE_PAIRS), 0.37))
    for i, pair in enumerate(near):
        with mp.workdps(50):
            want = _mp_log_c(*pair, 0.37)
        assert _rel(got[i], float(want)) < 1e-13, (pair, got[i], want)
    ours = _ours()[0][-len(HUGE_PAIRS) :]
    assert _rel(got[len(near) :], ours).max() < 1e-14, (got, ours)


def test_float32():
    # against float64 on the same (float32-rounded) parameters
    P32, Q32 = _pq(RAND, jnp.float32)
    r32 = jd.chernoff(P32, Q32)
    r64 = _solved()
    assert r32.information.dtype == jnp.float32
    assert bool(jnp.all(r32.converged))
    # measured: 2.5e-6 at most here (7e-6 over 4000 random pairs); the closed-form Bregman
    # gaps lose ~eps/tau^2 = 1e-6 next to the series switch, the shift a few ulp
    assert _rel(r32.information, r64.information[_SOLVE32_ROWS]).max() < 1e-5
    np.testing.assert_allclose(r32.alpha, r64.alpha[_SOLVE32_ROWS], atol=1e-5)
    out32 = _value_derivs(P32, Q32, jnp.asarray(RAND_ALPHA, jnp.float32))
    out64 = [x[_RAND32_ROWS] for x in _ours()]
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in out32)
    assert _rel(out32[0], out64[0]).max() < 1e-5
    assert _rel(out32[2], out64[2]).max() < 1e-5


@jax.jit
def _param_derivs(s):
    """d/ds at s = 1, scale2 -> s scale2: of d log C/da, hand-written (forward and reverse
    mode) and by autodiff of log_bc; and of the sum of log_bc in reverse mode (which must not
    meet a nan in a branch not taken)."""
    pairs = jnp.asarray(EDGE)
    a = jnp.full(len(EDGE), 0.37)

    def pq(s):
        P, Q = _pq(pairs)
        return P, jd.DiscreteLaplace(Q.loc, Q.scale * s)

    def ours(s):
        return dl.derivs(dl.derivs_setup(*pq(s)), a)[0]

    def autodiff(s):
        return jax.jvp(lambda t: raw_log_bc(*pq(s), t), (a,), (jnp.ones_like(a),))[1]

    ones = jnp.ones_like(s)
    d1, want = jax.jvp(autodiff, (s,), (ones,))
    fwd = jax.jvp(ours, (s,), (ones,))[1]
    rev = jax.grad(lambda s: jnp.sum(ours(s)))(s)
    log_bc_rev = jax.grad(lambda s: jnp.sum(raw_log_bc(*pq(s), a)))(s)
    return d1, want, fwd, rev, log_bc_rev


def test_derivs_differentiable_in_parameters():
    # the implicit-function theorem's input, d/d theta of d1, through the per-pair constants
    d1, want, fwd, rev, log_bc_rev = (np.asarray(x) for x in _param_derivs(jnp.ones(len(EDGE))))
    # relative, plus rounding at the size of d1 itself (b2/b1 = 1e-3 with a shift: the
    # derivative is ~1e-268, and both sides return rounding noise)
    tol = 1e-12 * np.abs(want) + 1e-14 * np.abs(d1)
    assert (np.abs(fwd - want) <= tol).all(), (fwd, want)
    assert (np.abs(rev - want) <= tol).all(), (rev, want)
    assert np.isfinite(log_bc_rev).all()


def test_renyi_orders_above_one_vs_mpmath():
    # log C_a for a > 1 (Rényi orders above 1): the stable form continued analytically, and
    # the direct log-sum where e^{2(a-1)/b2} would overflow (the last pair: (a-1)/b2 = 400),
    # and there, at equal locations, the scale mismatch alone: the direct form cancelled
    # (scales 1 and 1 + 1e-12 at order 1000: 2.7e5 relative; equal scales: -2.7e-17 for 0)
    near = [(0, 1.0, 0, 1 + 1e-12), (0, 0.3, 0, 0.3 * (1 - 1e-9)), (0, 1.0, 0, 1.0)]
    pairs = [*EDGE[:4], (0, 1.0, 3, 2.0), (0, 2.0, 0, 3.0), (1, 0.5, -4, 7.0), *near]
    pairs.append((0, 1e-3, 2, 1e-2))
    orders = [2.0, 1.5, 2.0, 3.0, 2.0, 5.0, 1.5, 1000.0, 1000.0, 1e4, 5.0]
    assert (orders[-1] - 1) / pairs[-1][3] > 0.4 * np.log(np.finfo(np.float64).max)
    got = np.asarray(jax.jit(raw_log_bc)(*_pq(pairs), jnp.asarray(orders)))
    for g, (m1, b1, m2, b2), a in zip(got, pairs, orders, strict=True):
        if a / b1 + (1 - a) / b2 <= 0:
            assert g == np.inf, (m1, b1, m2, b2, a)
            continue
        with mp.workdps(60):
            want = float(mp_refs.dl_log_bc(m1, b1, m2, b2, a))
        if want == 0:  # P == Q
            assert g == 0, (m1, b1, m2, b2, a, g)
            continue
        # the direct form had ~4e-15 absolute error on the near-identical pairs' tiny values;
        # at order a the scale mismatch sums two terms ~a times its size (~a eps relative)
        assert _rel(g, want) < max(1e-13, 2e-15 * a), (m1, b1, m2, b2, a, g, want)
    # the geometric mechanism at epsilon 1e-8: Rényi order 2 is epsilon^2 (1 + O(epsilon^2)),
    # never negative
    r2 = float(jd.renyi(jd.DiscreteLaplace(0, 1e8), jd.DiscreteLaplace(1, 1e8), 2.0))
    assert abs(r2 - 1e-16) <= 1e-13 * 1e-16
    # diverging sums stay +inf; the gradient at a converging order vs central differences
    assert float(jd.renyi(jd.DiscreteLaplace(0, 1.0), jd.DiscreteLaplace(0, 0.4), 2.0)) == np.inf
    g = jax.jit(
        jax.grad(lambda b: jd.renyi(jd.DiscreteLaplace(0, 1.0), jd.DiscreteLaplace(1, b), 2.0))
    )
    h = 1e-6
    fd = (
        float(jd.renyi(jd.DiscreteLaplace(0, 1.0), jd.DiscreteLaplace(1, 1.3 + h), 2.0))
        - float(jd.renyi(jd.DiscreteLaplace(0, 1.0), jd.DiscreteLaplace(1, 1.3 - h), 2.0))
    ) / (2 * h)
    assert abs(float(g(1.3)) - fd) <= 1e-8 * abs(fd)


def test_renyi_orders_above_one_at_huge_and_tiny_scales(monkeypatch):
    # whether the sum converges, a/b1 + (1 - a)/b2 > 0, was read from (b2 - b1)/b1/b2, which
    # XLA rewrites as (b2 - b1)/(b1 b2): that product over- or underflowed for scales beyond
    # ~1e154 or below ~1e-154, and diverging pairs there were nan (not inf), P = Q at scale
    # 1e-200 nan (1e200), and a converging order 1.5 at 1e-200 inf (2.5e200)
    monkeypatch.setattr(mp_refs, "DPS", 450)
    b1 = [1e200, 1e300, 1e200, 1e-200, 1e-200, 1e-200]
    b2 = [3e199, 5e299, 7e199, 1e-200, 1.5e-200, 4e-201]
    pairs = [(0.0, x, 1.0, y) for x, y in zip(b1, b2, strict=True)]
    for order in (2.0, 1.5):
        got = np.asarray(jd.renyi(*_pq(pairs), order))
        for g, x, y in zip(got, b1, b2, strict=True):
            if order / x + (1 - order) / y <= 0:
                assert g == np.inf, (order, x, y, g)
                continue
            want = mp_refs.dl_log_bc_geometric(0, x, 1, y, order) / (order - 1)
            # (the scale mismatch leaves ~0.1 of terms ~|log tanh(1/(2b))| ~ 460 at 1e200:
            # a few ulp of their ratio, as for KL in test_discrete_laplace_kl_at_huge_scales)
            assert _rel(g, float(want)) < 1e-12, (order, x, y, g, want)


def test_log_bc_where_the_shift_over_the_narrower_scale_overflows():
    # Delta/b1 = 1e310: |a/b1 - (1 - a)/b2| Delta overflowed, and 1 - psi of it was inf/inf
    # (nan, for its limit 1): log C_a nan at every a (QA pass; the Chernoff solver's own
    # derivatives there are still nan, README open limits)
    pairs = [(0.0, 1e-300, 1e10, 1e5), (1e10, 1e5, 0.0, 1e-300)]
    alphas = (0.01, 0.5, 0.99)
    got = np.asarray(jd.log_bc(*_pq(pairs), jnp.asarray(alphas)[:, None]))
    for i, a in enumerate(alphas):
        for j, (m1, b1, m2, b2) in enumerate(pairs):
            want = mp_refs.dl_log_bc_geometric(int(m1), b1, int(m2), b2, a)
            assert _rel(got[i, j], float(want)) < 1e-14, (a, pairs[j], got[i, j], want)


def test_log_bc_near_one_for_a_much_wider_p():
    # kappa_a = kappa_2 + a (kappa_1 - kappa_2) cancelled as a -> 1 where b1 >> b2: log C_a
    # was ~eps b1/b2 relative off (2.3e-10 at b1/b2 = 2e6, and Renyi order 1 - 1e-7 with
    # it), and at a = 1 kappa_a could round to <= 0: nan for b1/b2 = 3e16 (fuzz run)
    pairs = [(0.0, 92023.92958887352, 0.0, 0.0435526932182856), (42.0, 4.0e10, 45.0, 1.2e-6)]
    alphas = (1 - 1e-9, 1.0)
    got = np.asarray(jd.log_bc(*_pq(pairs), jnp.asarray(alphas)[:, None]))
    for j, (m1, b1, m2, b2) in enumerate(pairs):
        want = mp_refs.dl_log_bc_geometric(int(m1), b1, int(m2), b2, alphas[0])
        assert _rel(got[0, j], float(want)) < 1e-14, (pairs[j], got[0, j], want)
        assert got[1, j] == 0.0, (pairs[j], got[1, j])
    # the alpha-slope at 1 is KL(P || Q) (it was 5.8e-10 off at b1/b2 = 2e7)
    P, Q = jd.DiscreteLaplace(0.0, 2e7), jd.DiscreteLaplace(3.0, 1.0)
    slope = jax.grad(lambda a: jd.log_bc(P, Q, a))(1.0)
    assert _rel(slope, jd.kl(P, Q)) < 1e-14, (slope, jd.kl(P, Q))


def test_chernoff_converges_at_huge_epsilon():
    # eps = 1/b from 1e20 to 1e300: f' jumps from -1/b2 to 1/b1 within ~e^(-1/b) of alpha*
    # (a kink at float resolution), so f' is never small next to f'' there, and from
    # eps ~1e154 on f'' overflows. The solver's answer was right but converged=False
    # (distinct scales after 50 bisections; equal scales at the exact start 1/2, f' = 0).
    # Now the collapsed bracket certifies (f' changes sign within a few ulp and |f'| times
    # the width is ulp-sized relative to the value), and f' = 0 exactly does too.
    b = np.array([1e-20, 1e-100, 1e-160, 1e-300])
    b2 = np.concatenate([b, 2 * b])
    D = jd.DiscreteLaplace
    r = jd.chernoff(D(0.0, np.concatenate([b, b])), D(1.0, b2))
    assert bool(jnp.all(r.converged)), r
    for i, (s1, s2) in enumerate(zip(np.concatenate([b, b]), b2, strict=True)):
        with mp.workdps(50):
            info, a = mp_refs.chernoff(lambda t, s1=s1, s2=s2: _mp_log_c(0, s1, 1, s2, t))
        assert _rel(r.information[i], float(info)) < 1e-14, (s1, s2, r.information[i], info)
        assert abs(float(r.alpha[i]) - float(a)) < 4e-15, (s1, s2, r.alpha[i], a)

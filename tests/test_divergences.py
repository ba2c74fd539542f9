"""KL, Rényi, Bhattacharyya, Hellinger and TV against mpmath references."""

import math

import jax
import jax.numpy as jnp
import mp_refs
import mpmath as mp
import numpy as np
import pytest

import jaxdp as jd
from jaxdp import _special as sp

CASES = [
    (0.0, 1.0, 1.0, 1.0),
    (0.0, 1.0, 1.0, 2.0),
    (0.0, 2.0, 3.0, 0.5),
    (0.0, 1.0, 0.0, 1.5),
    (0.0, 1.0, 1e-10, 1.0),
    (0.0, 1.0, 2e-10, 1.0 + 1e-10),
    (0.0, 1.0, 30.0, 1.3),
]


def _batch(cls, cases):
    arr = np.asarray(cases, dtype=np.float64)
    return cls(arr[:, 0], arr[:, 1]), cls(arr[:, 2], arr[:, 3])


def _rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isinf(got) & np.isinf(want) & (np.sign(got) == np.sign(want)))
    finite = np.isfinite(got) & np.isfinite(want)
    diff = np.where(finite, got, 0.0) - np.where(finite, want, -np.inf)  # finite vs inf: wrong
    err = np.abs(diff) / np.where((want == 0) | ~finite, 1.0, np.abs(want))
    return np.where(same, 0.0, err)


@pytest.mark.parametrize(
    "cls, kl_ref, cf",
    [
        (jd.Laplace, mp_refs.lap_kl, mp_refs.lap_log_bc_cf),
        (jd.Gaussian, mp_refs.gau_kl, mp_refs.gau_log_bc_cf),
    ],
    ids=["laplace", "gaussian"],
)
def test_kl_renyi_bhattacharyya_hellinger(cls, kl_ref, cf):
    P, Q = _batch(cls, CASES)
    assert _rel(jd.kl(P, Q), [float(kl_ref(*c)) for c in CASES]).max() < 1e-12
    flipped = [(c[2], c[3], c[0], c[1]) for c in CASES]
    assert _rel(jd.kl(Q, P), [float(kl_ref(*c)) for c in flipped]).max() < 1e-12
    for order in (0.5, 2.0):
        with mp.workdps(60):
            want = []
            for c in CASES:
                v = cf(*c, order)  # complex where the integral diverges (order 2)
                want.append(float(v / (order - 1)) if mp.im(v) == 0 else np.inf)
        # order 2: (a-1) scaling and mild cancellation in the a > 1 continuation
        assert _rel(jd.renyi(P, Q, order), want).max() < 1e-10, order
    np.testing.assert_allclose(jd.renyi(P, Q, 1.0), jd.kl(P, Q), rtol=1e-15)
    with mp.workdps(60):
        bc = [cf(*c, 0.5) for c in CASES]
        assert _rel(jd.bhattacharyya(P, Q), [float(-b) for b in bc]).max() < 1e-12
        hel = [float(mp.sqrt(-mp.expm1(b))) for b in bc]
    assert _rel(jd.hellinger(P, Q), hel).max() < 1e-12


@pytest.mark.parametrize(
    "cls, cf",
    [(jd.Laplace, mp_refs.lap_log_bc_cf), (jd.Gaussian, mp_refs.gau_log_bc_cf)],
    ids=["laplace", "gaussian"],
)
def test_renyi_orders_above_one_vs_mpmath(cls, cf):
    # Orders up to 150 and scale ratios up to 5 (both ways): the series of the scale term
    # cancelled for order * |log ratio| > 1 (order 41.24 at ratio 2.2: 1% off; nan beyond).
    # Pairs within 10% of the divergence boundary are left out (ill-conditioned there);
    # divergent ones must give +inf.
    cases, want = [], []
    for r in (1 + 1e-6, 1.1, 2.2, 0.8, 5.0, 0.3):
        for shift in (0.0, 0.3, 3.0):
            for order in (1.0001, 1.5, 3.0, 10.0, 41.24, 150.0):
                if cls is jd.Laplace:
                    margin, size = order + (1 - order) / r, order
                else:
                    margin, size = order * r * r + (1 - order), order * r * r
                if 0 < margin < 0.1 * size:
                    continue
                with mp.workdps(60):
                    v = cf(0.0, 1.0, shift, r, order)
                    want.append(float(v / (order - 1)) if mp.im(v) == 0 else np.inf)
                cases.append((shift, r, order))
    arr = np.asarray(cases)
    got = jd.renyi(cls(0.0, 1.0), cls(arr[:, 0], arr[:, 1]), arr[:, 2])
    assert np.isinf(want).sum() > 20 and np.isfinite(want).sum() > 70
    assert _rel(got, want).max() < 1e-13


def test_mixed_pair_renyi_orders_above_one_vs_mpmath():
    # Quadrature path. For orders above 1, p^a q^(1-a) peaks out in the tails (Gaussian vs a
    # narrow Laplace: ~90 Laplace scales out at order 10), where the plain rule's nodes are
    # sparse (5e-4 off before its peaks became breakpoints); Laplace vs Gaussian diverges.
    from references import mp_reference as R

    pairs = [((0.0, 1.0), (0.0, 0.1)), ((0.0, 1.0), (0.0, 0.05)), ((0.3, 2.0), (-1.0, 0.3))]
    orders = np.asarray([1.5, 2.0, 10.0, 30.0])
    for (m1, s1), (m2, b2) in pairs:
        with mp.workdps(40):
            want = [float(R.renyi(R.Gaussian(m1, s1), R.Laplace(m2, b2), o)) for o in orders]
        got = jd.renyi(jd.Gaussian(m1, s1), jd.Laplace(m2, b2), orders)
        assert _rel(got, want).max() < 1e-13, (m1, s1, m2, b2)
        assert np.all(
            np.asarray(jd.renyi(jd.Laplace(m2, b2), jd.Gaussian(m1, s1), orders)) == np.inf
        )
    # order 1/2 with the centres 3000 scales apart: the single peak, far from both centres,
    # is a breakpoint too (the plain rule of log_bc_unit: 1.5e-13; README, Precision)
    with mp.workdps(40):
        want = float(R.renyi(R.Laplace(0.0, 1.0), R.Gaussian(3000.0, 1.0), 0.5))
    got = jd.renyi(jd.Laplace(0.0, 1.0), jd.Gaussian(3000.0, 1.0), 0.5)
    assert _rel(got, want) < 1e-13


def test_laplace_vs_gaussian_renyi_above_one_diverges_at_every_scale_ratio():
    # int L^a G^(1-a) grows like e^((a - 1) x^2/(2 s^2)) for every order a > 1; the rule's
    # tail test saw that only where it sets in before its last node: order 1 + 1e-7 came out
    # 8.4 for scales 1 and 1e4, order 2 22.6 for 1 and 1e10 (fuzz run against mpmath)
    P, Q = jd.Laplace(0.0, 1.0), jd.Gaussian(0.0, jnp.asarray([[1e4], [1e10]]))
    got = np.asarray(jd.renyi(P, Q, jnp.asarray([1 + 1e-7, 2.0])))
    assert np.all(got == np.inf), got


def test_renyi_diverges_where_the_integral_does():
    # Laplace: int p^2 q^-1 diverges when 2/b1 <= 1/b2
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(0.0, 0.4)
    assert float(jd.renyi(P, Q, 2.0)) == np.inf
    assert np.isfinite(float(jd.renyi(Q, P, 2.0)))
    # Gaussian: diverges when 2 s2^2 - s1^2 <= 0
    assert float(jd.renyi(jd.Gaussian(0.0, 1.0), jd.Gaussian(0.0, 0.7), 2.0)) == np.inf


@pytest.mark.parametrize(
    "dtype, orders, rtol", [(np.float64, [1e17, 1e300], 1e-14), (np.float32, [2.0**26, 1e30], 1e-6)]
)
def test_renyi_of_equal_scales_at_orders_where_one_minus_the_order_rounds(
    dtype, orders, rtol, monkeypatch
):
    # The convergence test a/b1 + (1 - a)/b2 > 0 (a b2 + (1 - a) b1, var_a for Gaussians)
    # cancelled to 0 for equal scales once 1 - a rounded to -a: inf, also for identical
    # pairs (QA pass). 350 digits: the references' 1 - a needs the order's 300.
    monkeypatch.setattr(mp_refs, "DPS", 350)
    o = np.asarray(orders, dtype)
    for cls, shift, ref in (
        (jd.Laplace, 1.0, mp_refs.lap_log_bc_cf),
        (jd.Gaussian, 1e-150 if dtype == np.float64 else 1e-15, mp_refs.gau_log_bc_cf),
        (jd.DiscreteLaplace, 1.0, mp_refs.dl_log_bc_geometric),
    ):
        P = cls(dtype(0.0), dtype(1.0))
        np.testing.assert_array_equal(jd.renyi(P, P, o), 0.0)
        Q = cls(dtype(shift), dtype(1.0))
        want = [float(ref(0, 1, float(Q.loc), 1, float(a)) / (mp.mpf(float(a)) - 1)) for a in o]
        assert _rel(jd.renyi(P, Q, o), want).max() < rtol, (cls, jd.renyi(P, Q, o), want)


@pytest.mark.parametrize(
    "dtype, s2, rtol", [(np.float64, 1 + 1e-7, 1e-14), (np.float32, 1.001, 1e-6)]
)
def test_gaussian_renyi_of_nearly_equal_scales_at_large_orders(dtype, s2, rtol):
    # var_a = r2^2 + (a - 1)(r2 - r1)(r2 + r1) took r2 - r1 from the rounded ratios
    # s_i / max(s1, s2): ~eps/|r2 - r1| relative (8e-11 and 1.4e-5 here; QA pass)
    o = np.asarray([1e4, 1e8], dtype)
    P, Q = jd.Gaussian(dtype(0.0), dtype(1.0)), jd.Gaussian(dtype(1.0), dtype(s2))
    want = [
        float(mp_refs.gau_log_bc_cf(0, 1, 1, float(Q.scale), float(a)) / (mp.mpf(float(a)) - 1))
        for a in o
    ]
    assert _rel(jd.renyi(P, Q, o), want).max() < rtol


@pytest.mark.parametrize(
    "dtype, orders, rtol", [(np.float64, [1e155, 1e300], 1e-14), (np.float32, [1e20, 1e30], 1e-6)]
)
def test_gaussian_renyi_with_a_shift_at_orders_beyond_the_square_root_of_the_float_range(
    dtype, orders, rtol, monkeypatch
):
    # a (1 - a) (delta/s)^2 overflowed past order ~1e154 (float32 ~1e19) although its quotient
    # by var_a ~ a (s2^2 - s1^2) and log C are finite: Rényi inf for ~0.8 (QA pass)
    monkeypatch.setattr(mp_refs, "DPS", 350)
    o = np.asarray(orders, dtype)
    cases = [(0.0, 1.0, 1.0, 1.5), (0.0, 2.0, -3.0, 3.0), (0.0, 1.0, 0.5, 1.001)]
    for m1, s1, m2, s2 in cases:
        P, Q = jd.Gaussian(dtype(m1), dtype(s1)), jd.Gaussian(dtype(m2), dtype(s2))
        args = [float(x) for x in (P.loc, P.scale, Q.loc, Q.scale)]
        want = [float(mp_refs.gau_log_bc_cf(*args, float(a)) / (mp.mpf(float(a)) - 1)) for a in o]
        got = jd.renyi(P, Q, o)
        assert _rel(got, want).max() < rtol, ((m1, s1, m2, s2), got, want)
    # and the gradient there (parameters and order) is finite
    g = jax.grad(lambda p: jd.renyi(jd.Gaussian(0.0, p[0]), jd.Gaussian(p[1], p[2]), p[3]))
    assert np.isfinite(g(jnp.asarray([1.0, 1.0, 1.5, 1e200]))).all()


@pytest.mark.parametrize(
    "cls, tv_ref",
    [(jd.Laplace, mp_refs.lap_tv), (jd.Gaussian, mp_refs.gau_tv)],
    ids=["laplace", "gaussian"],
)
def test_tv_vs_mpmath(cls, tv_ref):
    cases = [CASES[i] for i in (0, 1, 2, 3, 4, 6)]
    P, Q = _batch(cls, cases)
    want = [float(tv_ref(*c)) for c in cases]
    assert _rel(jd.tv(P, Q), want).max() < 1e-10
    # equal scales, closed forms
    t = jnp.asarray([1e-12, 1e-6, 0.3, 4.0])
    np.testing.assert_allclose(
        jd.tv(jd.Laplace(0.0, 1.0), jd.Laplace(t, 1.0)), -np.expm1(-np.asarray(t) / 2), rtol=1e-13
    )


def test_laplace_tv_with_nearly_equal_scales():
    # The slope 1/b2 - 1/b1 of log p/q below and above both locations was the difference of
    # the rounded reciprocals: the crossings moved by ~eps/|b2/b1 - 1| scales and TV by that
    # squared (found by a QA pass: 2.6e-11 relative off at b2 = b1 (1 + 1e-12), 1e-4 at
    # 1 + 1e-13, 1.5e-2 at 1 + 1e-15); Gaussian pairs were right to rounding
    from references import mp_reference as R

    cases = [
        (0.0, 1.7, 0.0, 1.7 * (1 + 1e-12)),
        (0.0, 1.3, 0.0, 1.3 * (1 + 1e-13)),
        (0.0, 3.1, 3.1e-14, 3.1 * (1 + 1e-14)),
        (0.0, 1e5, 0.0, 1e5 * (1 + 1e-15)),
    ]
    with mp.workdps(40):
        want = [float(R.tv(R.Laplace(*c[:2]), R.Laplace(*c[2:]))) for c in cases]
    P, Q = _batch(jd.Laplace, cases)
    assert _rel(jd.tv(P, Q), want).max() < 1e-13


@pytest.mark.parametrize("family", ["Laplace", "Gaussian"])
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-13)])
def test_tv_with_one_scale_far_narrower(family, dtype, rtol):
    # Scale ratios 1e-9..1e-2, locations ~1 apart: the crossings sit a few narrow scales from
    # the narrow location, where coordinates taken from the wide one lost the narrow scale's
    # digits: float32 Laplace TV of 1.0019 and 7.9 (> 1), Gaussian up to 100% off from ratio
    # ~1e-6; float64 Laplace ~1e-9 off.
    from references import mp_reference as R

    rng = np.random.default_rng(1)
    n = 40
    m1, b1 = rng.normal(size=n), rng.uniform(0.2, 2.0, n)
    m2, b2 = m1 + 0.3 * rng.normal(size=n), b1 * 10 ** rng.uniform(-9, -2, n)
    flip = rng.random(n) < 0.5  # the narrow one as P or as Q
    a = [np.where(flip, y, x).astype(dtype) for x, y in ((m1, m2), (b1, b2))]
    b = [np.where(flip, x, y).astype(dtype) for x, y in ((m1, m2), (b1, b2))]
    ref, cls = getattr(R, family), getattr(jd, family)
    with mp.workdps(40):
        want = [
            float(R.tv(ref(float(a[0][i]), float(a[1][i])), ref(float(b[0][i]), float(b[1][i]))))
            for i in range(n)
        ]
    got = jd.tv(
        cls(jnp.asarray(a[0]), jnp.asarray(a[1])), cls(jnp.asarray(b[0]), jnp.asarray(b[1]))
    )
    assert got.dtype == dtype and np.all(np.asarray(got) <= 1)
    assert _rel(got, want).max() < rtol


def test_discrete_laplace_kl_tv_vs_summation():
    cases = [
        (0, 1.0, 1, 1.0),
        (0, 1.0, 1, 2.0),
        (0, 3.0, 5, 0.5),
        (0, 2.0, 0, 3.0),
        (0, 50.0, 1, 50.0),
    ]
    P, Q = _batch(jd.DiscreteLaplace, cases)
    refs = [mp_refs.dl_kl_tv(*c) for c in cases]
    assert _rel(jd.kl(P, Q), [float(k) for k, _ in refs]).max() < 1e-11
    assert _rel(jd.tv(P, Q), [float(t) for _, t in refs]).max() < 1e-11
    # geometric mechanism with tiny epsilon: TV = tanh(eps/2) for Delta = 1
    eps = jnp.asarray([1e-9, 1e-4, 0.5, 3.0])
    Pg, Qg = jd.mechanisms.geometric(epsilon=eps)
    np.testing.assert_allclose(jd.tv(Pg, Qg), np.tanh(np.asarray(eps) / 2), rtol=1e-12)


def test_discrete_laplace_tv_near_identical():
    # Scales 1e-9..1e-12 apart (and one location step): the CDF difference subtracted the
    # logs of the two pmfs' tails, ~1e-4 relative of a TV of ~4e-13.
    from references import mp_reference as R

    cases = [
        (0, 60.0, 0, 60.0 * (1 + 1e-12)),
        (0, 1.0, 0, 1.0 + 1e-9),
        (0, 3.0, 1, 3.0 * (1 + 1e-10)),
        (2, 0.5, 2, 0.5 * (1 - 1e-11)),
        (-3, 1e3, -3, 1e3 * (1 + 1e-10)),
    ]
    with mp.workdps(40):
        want = [float(R.tv(R.DiscreteLaplace(*c[:2]), R.DiscreteLaplace(*c[2:]))) for c in cases]
    P, Q = _batch(jd.DiscreteLaplace, cases)
    assert _rel(jd.tv(P, Q), want).max() < 1e-13


def test_discrete_laplace_tv_near_identical_wide_or_far_from_the_origin():
    # The crossings of log p/q were solved from the difference of two log tanh and from
    # m_i/b_i: for nearly equal scales they came out ~eps (m/b + |log tanh|)/|1/b2 - 1/b1|
    # off, hundreds of integers from the extrema of F_P - F_Q (found by a QA pass): TV 2.8e-9
    # relative off at location 0, 2.8e-3 at 1e8, 1.5e-17 for 3.7e-13 at 1e12.
    from references import mp_reference as R

    b = 1e5 * (1 + 1e-12)
    cases = [(0, 1e5, 0, b), (10**8, 1e5, 10**8, b), (10**12, 1e5, 10**12 + 3, b)]
    with mp.workdps(40):
        want = [float(R.tv(R.DiscreteLaplace(*c[:2]), R.DiscreteLaplace(*c[2:]))) for c in cases]
    P, Q = _batch(jd.DiscreteLaplace, cases)
    assert _rel(jd.tv(P, Q), want).max() < 1e-13


def test_discrete_laplace_tv_far_apart():
    # Locations more than ~709 scales apart (~88 in float32): the CDF difference below or
    # above both locations was e^y * expm1(d) = 0 * inf = nan; the truth is 1 to rounding.
    shift = jnp.asarray([709.0, 710.0, 1000.0, 1e5, 1e15])
    assert np.all(
        np.asarray(jd.tv(jd.DiscreteLaplace(0.0, 1.0), jd.DiscreteLaplace(shift, 1.0))) == 1
    )
    assert np.all(
        np.asarray(jd.tv(jd.DiscreteLaplace(shift, 2.0), jd.DiscreteLaplace(0.0, 1.0))) == 1
    )
    Pg, Qg = jd.mechanisms.geometric(epsilon=jnp.asarray([100.0, 1000.0, 1e300]))
    assert np.all(np.asarray(jd.tv(Pg, Qg)) == 1)  # tanh(eps/2)
    f32 = jnp.float32
    far = jd.tv(
        jd.DiscreteLaplace(f32(0), f32(1)),
        jd.DiscreteLaplace(jnp.asarray([89.0, 500.0], f32), f32(1)),
    )
    assert far.dtype == jnp.float32 and np.all(np.asarray(far) == 1)


def test_discrete_laplace_tv_with_a_far_narrower_q():
    # 1/b2 - 1/b1 beyond ~709.78: log1p(q1) - log1p(q2) was e^{-1/b2} expm1(1/b2 - 1/b1) =
    # 0 * inf = nan (TV nan; 0 or 1 in batches, where the extrema's reductions met it).
    # Same locations: D = F_P - F_Q peaks at k = -1 and k = 0, TV = 1 - P(0) for a point-like
    # Q (q(0) = 1 to rounding), P(0) = tanh(1/(2 b1)); its b1-derivative sech^2(1/(2b1))/(2b1^2).
    b1 = jnp.asarray([1.0, 2.0, 0.5])
    b2 = jnp.asarray([1e-3, 1e-5, 1e-300])
    want = 1.0 - np.tanh(0.5 / np.asarray(b1))
    P, Q = jd.DiscreteLaplace(0.0, b1), jd.DiscreteLaplace(0.0, b2)
    np.testing.assert_allclose(jd.tv(P, Q), want, rtol=1e-15)
    np.testing.assert_allclose(jd.tv(Q, P), want, rtol=1e-15)
    grad = jax.jit(
        jax.grad(lambda b: jd.tv(jd.DiscreteLaplace(0.0, b), jd.DiscreteLaplace(0.0, 1e-3)))
    )
    np.testing.assert_allclose(grad(1.0), 0.5 / np.cosh(0.5) ** 2, rtol=1e-14)
    # one such pair in a batch of ordinary ones, a shift apart: disjoint to rounding (TV 1)
    P = jd.DiscreteLaplace(0.0, jnp.asarray([1.0, 1.0, 0.00145]))
    Q = jd.DiscreteLaplace(jnp.asarray([0.0, 0.0, -1.0]), jnp.asarray([1e-3, 1.0, 0.000454]))
    np.testing.assert_allclose(jd.tv(P, Q), [want[0], 0.0, 1.0], rtol=1e-15, atol=0)


def test_tv_far_apart_and_overflowing_offsets():
    # Gaussian: (delta/s2)^2 overflowed past ~1e154 (nan); Laplace: m2 - m1 overflowed to inf
    # for locations ~1e308 of opposite signs (TV 0; discrete Laplace: 0.731). All are 1.
    G, L, DL = jd.Gaussian, jd.Laplace, jd.DiscreteLaplace
    far = [
        (G(0.0, 1.0), G(1.4e154, 1.0)),
        (G(0.0, 1e-300), G(1.0, 1e-300)),
        (G(-1e307, 1.0), G(1e307, 1.0)),
        (G(0.0, 2.0), G(1e3, 0.5)),
        (L(-9e307, 1.0), L(9e307, 1.0)),
        (L(0.0, 1.0), L(1e300, 1.0)),
        # the crossings' offsets d/b2 overflowed: no valid piece, TV 0 (QA pass, via the CLI)
        (L(0.0, 1.0), L(1e304, 1e-5)),
        (DL(-1e308, 1.0), DL(1e308, 2.0)),
        (DL(-1e308, 1e-3), DL(1e308, 1e3)),
    ]
    for P, Q in far:
        assert float(jd.tv(P, Q)) == 1.0 and float(jd.tv(Q, P)) == 1.0
    # just inside the cut (40 (s1 + s2)): still the computed value, which rounds to 1 too
    assert float(jd.tv(G(0.0, 1.0), G(79.0, 1.0))) == 1.0


def test_tv_gradients_stay_finite_far_apart():
    # Off a crossing's own region, exp(-u) of the CDF tails overflowed inside branches that
    # jnp.where drops: the value was right, the gradient nan (Laplace with a narrow Q ~3000
    # of its scales away, discrete Laplace 1000 apart, overflowing offsets).
    cases = {
        jd.Laplace: ([0.3, 100.0, 1e200], [1e-4, 1.0, 1.0]),
        jd.Gaussian: ([100.0, 1e200], [1.0, 1.0]),
        jd.DiscreteLaplace: ([1000.0], [1.0]),
    }
    for cls, (loc, scale) in cases.items():

        def total(m, s, cls=cls):
            return jnp.sum(jd.tv(cls(0.0, 1.0), cls(m, s)))

        # jitted: one compile, where eager differentiation dispatches every operation
        grads = jax.jit(jax.grad(total, argnums=(0, 1)))(jnp.asarray(loc), jnp.asarray(scale))
        assert np.all(np.isfinite(np.asarray(grads))), cls
        if cls is jd.Laplace:
            # the narrow pair against central differences (TV ~ 1 - 7e-5: h = 1e-7 leaves
            # ~1e-9 absolute of rounding in the difference quotient)
            m = jnp.asarray([0.3 + 1e-7, 0.3 - 1e-7])
            up, down = np.asarray(jax.jit(jd.tv)(jd.Laplace(0.0, 1.0), jd.Laplace(m, 1e-4)))
            np.testing.assert_allclose(float(grads[0][0]), (up - down) / 2e-7, rtol=1e-5)


def test_laplace_tv_derivative_where_tv_nears_one():
    # TV(Lap(m, 1), Lap(d, 1)) = 1 - e^{-(d - m)/2}: d/dm = -e^{-d/2}/2 at m = 0. JAX
    # differentiates expm1(-u) as expm1(-u) + 1, which kept only ~u/e^{-u} of it: 3.8e-6
    # relative off at d = 50, 1.7e-4 at 60; from d ~ 73, where TV rounds to 1, the clamp
    # jnp.minimum(total, 1) halved it
    d = jnp.asarray([10.0, 50.0, 60.0, 75.0, 79.0])
    grad = jax.jit(
        jax.vmap(jax.grad(lambda m, d: jd.tv(jd.Laplace(m, 1.0), jd.Laplace(d, 1.0))), (None, 0))
    )
    np.testing.assert_allclose(grad(0.0, d), -np.exp(-np.asarray(d) / 2) / 2, rtol=1e-13)


def test_laplace_tv_derivative_beyond_80_scales():
    # Well apart (m1 = 0 < d = m2, bs <= bl the scales), 1 - TV = [B (bs + bl) - E (bl -
    # bs)]/(2 bs), B = e^{-(d + r bl)/(bs + bl)}, E = e^{-(d + r bl)/(bl - bs)}, r = log bl/bs.
    # The slope, ~e^{-d/(b1 + b2)}, was 0 beyond 80 of the larger scale (a cut-off for the
    # crossings' offsets) and where the two terms rounded above 1; now up to where the
    # exponentials underflow (~700 (b1 + b2))
    def overlap(m1, b1, d, b2):
        bs, bl = min(b1, b2), max(b1, b2)
        t = d - m1 + mp.log(bl / bs) * bl
        e = 0 if bs == bl else mp.exp(-t / (bl - bs)) * (bl - bs)
        return (mp.exp(-t / (bs + bl)) * (bs + bl) - e) / (2 * bs)

    cases = [(1.0, 85.0, 1.0), (1.0, 200.0, 1.0), (1.0, 1400.0, 1.0), (1.0, 100.0, 0.5),
             (1.0, 300.0, 1.5), (1e-3, 500.0, 1.0)]  # fmt: skip
    b1, d, b2 = (jnp.asarray(c) for c in zip(*cases, strict=True))
    tv = lambda m1, b1, d, b2: jd.tv(jd.Laplace(m1, b1), jd.Laplace(d, b2))  # noqa: E731
    got = jax.jit(jax.vmap(jax.grad(tv, (0, 1, 3)), (None, 0, 0, 0)))(0.0, b1, d, b2)
    with mp.workdps(50):
        for i, c in enumerate(cases):
            args = [mp.mpf(0.0)] + [mp.mpf(x) for x in c]
            for k, g in zip((0, 1, 3), got, strict=True):
                f = lambda t, k=k, a=args: overlap(*a[:k], t, *a[k + 1 :])  # noqa: E731
                want = -float(mp.diff(f, args[k]))
                # (the exponent, ~d/(b1 + b2), rounds to an ulp or two)
                tol = 4e-16 * (1.0 + c[1] / (c[0] + c[2]))
                np.testing.assert_allclose(float(g[i]), want, rtol=tol)


def _lap_cdf(x, m, b):
    return 0.5 * mp.exp((x - m) / b) if x < m else 1 - 0.5 * mp.exp(-(x - m) / b)


def test_laplace_tv_scale_derivatives_at_scale_ratios_beyond_1e100():
    # By the envelope theorem dTV/db_i is the sum over the crossings x (sign s of F_P - F_Q
    # there) of s dF_P/db1 (-s dF_Q/db2) at x fixed, dF/db = -e^{-|x - m|/b} (x - m)/(2 b^2).
    # Reverse mode: Laplace(0, 1) vs Laplace(1e300, 1e300) d/db1 -1.8e-17 (forward -1.8e-301,
    # JAX's expm1' = expm1 + 1 lost a term) for -2.5e-298: cotangents ~e^-rho underflowed
    # (log_ratio's, the slope's inner quotient's), a crossing's tangent cancelled ~1e300 terms;
    # d/db2 for Q 1e-100 and 1e-300 narrower -2.1e81 and 1.3e283 for -85 and -419.
    cases = [((0.0, 1.0, 1e300, 1e300), 1), ((0.0, 1.0, 1.0, 1e-100), 3),
             ((0.0, 1.0, 0.5, 1e-300), 3)]  # fmt: skip
    tv = lambda *a: jd.tv(jd.Laplace(a[0], a[1]), jd.Laplace(a[2], a[3]))  # noqa: E731
    rev = jax.jit(jax.grad(tv, (1, 3)))
    with mp.workdps(400):
        for c, k in cases:
            m1, b1, m2, b2 = (mp.mpf(x) for x in c)
            want = 0
            for s1, s2 in ((-1, -1), (1, -1), (-1, 1), (1, 1)):
                slope = s2 / b2 - s1 / b1
                x = -(mp.log(b2 / b1) + s1 * m1 / b1 - s2 * m2 / b2) / slope
                if (x > m1) != (s1 > 0) or (x > m2) != (s2 > 0):
                    continue
                sign = mp.sign(_lap_cdf(x, m1, b1) - _lap_cdf(x, m2, b2))
                m, b = (m1, b1) if k == 1 else (m2, b2)
                dcdf = -mp.exp(-abs(x - m) / b) * (x - m) / (2 * b**2)
                want += sign * dcdf * (1 if k == 1 else -1)
            got = rev(*(jnp.asarray(x) for x in c))[0 if k == 1 else 1]
            np.testing.assert_allclose(float(got), float(want), rtol=1e-12, err_msg=str(c))


def test_laplace_kl_where_the_standardized_pair_leaves_the_float_range():
    # D = log(b2/b1) + d/b2 + (b1/b2) e^{-d/b1} - 1 and its derivatives, 60 digits. Rows: a
    # narrow P ~1e309 of its scale from Q (KL ~1e304 was inf: the standardized offset
    # overflowed), scale ratios 1e300 and 1e600 (inf, nan: the moved scale overflowed), and
    # derivatives that overflowed, underflowed or cancelled as intermediates: d/db1 where
    # b1 >> b2 (1408 for -1: r phi(-t)'s two slopes ~1/b2), d/db2 of a far narrower Q
    # (-inf: the cotangent of its moved scale), d/db2 of a far wider Q (forward mode -inf:
    # the tangent of P.scale/c ~1e184), d/dm where phi(-d/b1) underflows (0)
    rows = [(1e304, 1e-5, 0.0, 1.0), (0.0, 1e-300, 1e10, 1.0), (0.0, 1e-300, 1e300, 1e300),
            (0.0, 1.0, 165.0, 3e-18), (1e35, 4e258, 1.5e88, 1e-20),
            (0.0, 1.3e-184, -1e60, 2e-84), (0.0, 1.5e103, -5e-93, 1.7e-129)]  # fmt: skip
    args = [jnp.asarray(c) for c in zip(*rows, strict=True)]
    kl = lambda m1, b1, m2, b2: jd.kl(jd.Laplace(m1, b1), jd.Laplace(m2, b2))  # noqa: E731
    value = jax.jit(jax.vmap(kl))(*args)
    rev = jax.jit(jax.vmap(jax.grad(kl, (0, 1, 2, 3))))(*args)
    fwd = jax.jit(jax.vmap(jax.jacfwd(kl, (0, 1, 2, 3))))(*args)
    for i, row in enumerate(rows):
        with mp.workdps(60):
            m1, b1, m2, b2 = map(mp.mpf, row)
            t, sign = abs(m2 - m1) / b1, 1 if m2 >= m1 else -1
            dm = sign * -mp.expm1(-t) / b2
            want = [-dm, -1 / b1 + mp.exp(-t) * (1 + t) / b2, dm]
            want.append(1 / b2 - b1 / b2**2 * mp.exp(-t) - abs(m2 - m1) / b2**2)
        np.testing.assert_allclose(float(value[i]), float(mp_refs.lap_kl(*row)), rtol=1e-15)
        for k in range(4):
            np.testing.assert_allclose(float(rev[k][i]), float(want[k]), rtol=1e-15)
            np.testing.assert_allclose(float(fwd[k][i]), float(want[k]), rtol=1e-15)


def test_laplace_forward_mode_slopes_of_pairs_standardized_by_1e200():
    # Laplace(0, 1e200) vs Laplace(5e292, 1e293), and the mirror image: in forward mode, the
    # tangent of (1 - a)/b2 (b2 ~1e93 once standardized, its tangent ~1e-200) underflowed
    # before the product with Delta ~1e92, so d/db2 of log C_1/2 was 1e-293 for 5e-294 (in
    # Rényi, Bhattacharyya and the Chernoff information; reverse mode was right). The slope
    # in the narrower scale of each pair, against 60-digit central differences (steps 1e-25
    # of the scale) of the closed form
    rows = [(0.0, 1e200, 5e292, 1e293), (5e292, 1e293, 0.0, 1e200)]
    args = [jnp.asarray(c) for c in zip(*rows, strict=True)]
    tangents = [jnp.zeros(2), jnp.asarray([0.0, 1.0]), jnp.zeros(2), jnp.asarray([1.0, 0.0])]
    bc = lambda m1, b1, m2, b2: jd.bhattacharyya(jd.Laplace(m1, b1), jd.Laplace(m2, b2))  # noqa: E731
    got = jax.jvp(bc, args, tangents)[1]
    for i, k in enumerate((3, 1)):
        with mp.workdps(60):

            def g(t, i=i, k=k):
                r = list(map(mp.mpf, rows[i]))
                r[k] = t
                return -mp_refs.lap_log_bc_cf(*r, mp.mpf(0.5))

            want = float(mp.diff(g, mp.mpf(rows[i][k]), h=mp.mpf(1e-25) * rows[i][k]))
        np.testing.assert_allclose(float(got[i]), want, rtol=1e-14)


def test_laplace_renyi_where_the_offset_over_the_narrower_q_overflows():
    # Q ~1e309 and ~1e310 of its own scale from P (Delta/b2 leaves the float range, Delta/b1
    # does not): Rényi, Bhattacharyya and Hellinger were nan (1 - psi(d) = inf/inf at
    # d = |l1 - l2| = inf). Order 2 diverges there (2/b1 < 1/b2): inf, gradient 0
    rows = [(0.0, 1.0, 1e304, 1e-5), (0.0, 1.0, 1e10, 1e-300)]
    args = [jnp.asarray(c) for c in zip(*rows, strict=True)]

    def lap(f):
        return lambda m1, b1, m2, b2: f(jd.Laplace(m1, b1), jd.Laplace(m2, b2))

    bc = lap(jd.bhattacharyya)
    value = bc(*args)
    np.testing.assert_array_equal(sp.one_minus_exp(value), 1.0)  # Hellinger^2
    orders = lap(lambda P, Q: jd.renyi(P, Q, jnp.asarray([[0.1], [2.0]])))(*args)
    np.testing.assert_array_equal(orders[1], np.inf)
    grads = jax.grad(lambda *x: jnp.sum(bc(*x)), (0, 1, 2, 3))(*args)  # elementwise
    for i, row in enumerate(rows):
        tenth = mp.mpf("0.1")
        want = -mp_refs.lap_log_bc_cf(*row, tenth) / (1 - tenth)
        np.testing.assert_allclose(float(orders[0, i]), float(want), rtol=1e-15)
        want = -mp_refs.lap_log_bc_cf(*row, mp.mpf(0.5))
        np.testing.assert_allclose(float(value[i]), float(want), rtol=1e-15)
        with mp.workdps(60):
            # -log C_1/2 = log(2 b1)/2 + log(2 b2)/2 + l1 D - log(2 l2) + log(l2^2 - l1^2),
            # l_i = 1/(2 b_i), to e^(-(l2 - l1) D) ~ e^(-1e309) (the pieces' closed form)
            m1, b1, m2, b2 = map(mp.mpf, row)
            l1, l2 = 1 / (2 * b1), 1 / (2 * b2)
            den = l2**2 - l1**2
            want = [-l1, l1 - (m2 - m1) / (2 * b1**2) - 2 * l1**2 / (b1 * den), l1]
            want.append(1 / (2 * b2) + 1 / b2 - 2 * l2**2 / (b2 * den))
        for k in range(4):  # d/db2 was -49999.00001 for -50000.00002 with x psi(d) = 0
            np.testing.assert_allclose(float(grads[k][i]), float(want[k]), rtol=1e-15)


def test_laplace_slopes_where_the_offset_over_the_narrower_q_nears_the_float_range():
    # d = |l1 - l2| Delta finite but beyond ~1e300: the slope of x psi(d) through psi'(d) ~
    # -1/d^2 went subnormal (flushed), d/db2 of Bhattacharyya of Laplace(0, 1) vs
    # Laplace(1e300, 1e-5) -49999.00001 for -50000.00002, order 0.9 of Laplace(1e304, 1e-5) 1e-4
    # off. Reference: log C_a = -a log 2b1 - (1 - a) log 2b2 - l1 Delta + log(2 l2/(l2^2 - l1^2)),
    # l1 = a/b1, l2 = (1 - a)/b2, to e^(-(l2 - l1) Delta) (the pieces' closed form)
    rows = [(0.0, 1.0, 1e300, 1e-5, 0.5), (0.0, 1.0, 1e304, 1e-5, 0.9)]
    m1, b1, m2, b2, a = (jnp.asarray(c) for c in zip(*rows, strict=True))
    f = lambda b2: jnp.sum(jd.renyi(jd.Laplace(m1, b1), jd.Laplace(m2, b2), a))  # noqa: E731
    got = jax.grad(f)(b2)
    for i, row in enumerate(rows):
        with mp.workdps(60):
            _, b1_, _, b2_, a_ = map(mp.mpf, row)
            l1, l2 = a_ / b1_, (1 - a_) / b2_
            dlog_c = -(1 - a_) / b2_ - (l2 / b2_) * (1 / l2 - 2 * l2 / (l2**2 - l1**2))
            want = dlog_c / (a_ - 1)
        np.testing.assert_allclose(float(got[i]), float(want), rtol=1e-15)


def test_laplace_renyi_where_the_offset_over_the_narrower_p_overflows():
    # The mirror image of the test above: P the narrower, ~1e309 of its scale from Q. Its
    # standardized offset (by P's scale) overflowed: Rényi, Bhattacharyya, Hellinger were
    # nan, and log C (jd.log_bc, also of Products of Laplace pairs: their components are
    # stacked, and were standardized by P's scale in group_product). The last row is ~2e309
    # of both scales apart: Bhattacharyya inf (Hellinger 1), log C -inf inside (0, 1) and 0
    # at the ends (C_0 = Q(supp P) = 1), gradients 0. Gradients against central differences
    # at 500 digits
    rows = [(1e304, 1e-5, 0.0, 1.0), (1e10, 1e-300, 0.0, 1.0), (1e307, 1e-3, -1e307, 1e-2)]
    args = [jnp.asarray(c) for c in zip(*rows, strict=True)]
    other = (jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 2.0))

    def lap(f):
        return lambda m1, b1, m2, b2: f(jd.Laplace(m1, b1), jd.Laplace(m2, b2))

    def product(f):  # the row's pair times another (two Laplace components: stacked)
        return lambda m1, b1, m2, b2: f(
            jd.Product(jd.Laplace(m1, b1), other[0]), jd.Product(jd.Laplace(m2, b2), other[1])
        )

    def grad_ok(grads, a, sign=1):
        for i, row in enumerate(rows):
            want = mp_refs.lap_log_bc_cf_grad(*row, a) if i < 2 else [0.0] * 4
            for k in range(4):
                np.testing.assert_allclose(grads[k][i], sign * float(want[k]), rtol=1e-15)

    bc = lap(jd.bhattacharyya)
    half = mp.mpf(1) / 2
    value = bc(*args)
    want = [-float(mp_refs.lap_log_bc_cf(*row, half)) for row in rows[:2]]
    np.testing.assert_allclose(value, [*want, np.inf], rtol=1e-15)
    grad_ok(jax.grad(lambda *x: jnp.sum(bc(*x)), (0, 1, 2, 3))(*args), half, -1)
    np.testing.assert_array_equal(
        jd.hellinger(*(jd.Laplace(*args[:2]), jd.Laplace(*args[2:]))), 1.0
    )
    orders = lap(lambda P, Q: jd.renyi(P, Q, jnp.asarray([[0.1], [2.5]])))(*args)
    np.testing.assert_array_equal(orders[:, 2], np.inf)
    for i, row in enumerate(rows[:2]):
        for o, order in enumerate((mp.mpf("0.1"), mp.mpf("2.5"))):
            want = mp_refs.lap_log_bc_cf(*row, order) / (order - 1)
            np.testing.assert_allclose(float(orders[o, i]), float(want), rtol=1e-15)
    # log C, and that of the product (the sum of its components' by additivity; the same
    # gradient), in one compiled program; with the product's KL (KL ~1e304 of the first row
    # was inf: group_product standardized its stacked components by P's scale), whose
    # gradient adds to log C's (the last row's KL 2e309 is inf, its slope in b2 -2e311)
    alphas = [mp.mpf(0), mp.mpf("0.3"), mp.mpf(1)]

    def log_c(*x):
        a = jnp.asarray([[0.0], [0.3], [1.0]])
        logc, logc_p = (f(lambda P, Q: jd.log_bc(P, Q, a))(*x) for f in (lap, product))
        kl_p = product(jd.kl)(*x)
        return jnp.sum(logc_p[1]) + jnp.sum(kl_p), (logc, logc_p, kl_p)

    grads, (logc, logc_p, kl_p) = jax.jit(jax.grad(log_c, (0, 1, 2, 3), has_aux=True))(*args)
    for j, a in enumerate(alphas):
        want = [mp_refs.lap_log_bc_cf(*row, a) for row in rows[:2]]
        want = [float(w) for w in want] + [-np.inf if 0 < a < 1 else 0.0]
        np.testing.assert_allclose(logc[j], want, rtol=1e-15, atol=1e-300)
        want_p = np.asarray(want) + float(mp_refs.lap_log_bc_cf(0, 1, 1, 2, a))
        np.testing.assert_allclose(logc_p[j], want_p, rtol=1e-15)
    want = [float(mp_refs.lap_kl(*row) + mp_refs.lap_kl(0, 1, 1, 2)) for row in rows]
    np.testing.assert_allclose(kl_p, want, rtol=1e-15)
    for i, row in enumerate(rows):
        want = mp_refs.lap_log_bc_cf_grad(*row, alphas[1]) if i < 2 else [0.0] * 4
        kl_grads = mp_refs.lap_kl_grad(*row)
        for k in range(4):
            np.testing.assert_allclose(grads[k][i], float(want[k] + kl_grads[k]), rtol=1e-15)


def test_laplace_tv_at_scale_ratios_beyond_the_float_range():
    # 1 - TV < 1e-300 (a point mass against a flat density): TV was 0, the standardized
    # wider scale having overflowed (or the narrower flushed), and its gradient nan
    tv = lambda m1, b1, m2, b2: jd.tv(jd.Laplace(m1, b1), jd.Laplace(m2, b2))  # noqa: E731
    for dtype, rows in (
        (jnp.float64, [(0.0, 1e-300, 1.0, 1e300), (0.0, 1e300, 1e-300, 1e-300)]),
        (jnp.float32, [(0.0, 1e-30, 1.0, 1e30), (0.0, 1e30, 1e-30, 1e-30)]),
    ):
        args = [jnp.asarray(c, dtype) for c in zip(*rows, strict=True)]
        np.testing.assert_array_equal(jax.jit(jax.vmap(tv))(*args), 1.0)
        grads = jax.jit(jax.vmap(jax.grad(tv, (0, 1, 2, 3))))(*args)
        np.testing.assert_array_equal(np.isfinite(np.asarray(grads)), True)


def test_laplace_tv_gradient_where_the_crossings_offsets_overflow():
    # ~1e309 of the narrower scale apart: TV 1, slope ~e^{-1e304} = 0 (reverse mode was nan)
    tv = lambda m1, b1, m2, b2: jd.tv(jd.Laplace(m1, b1), jd.Laplace(m2, b2))  # noqa: E731
    rows = [(0.0, 1.0, 1e304, 1e-5), (1e304, 1e-5, 0.0, 1.0), (0.0, 1e-5, 1e304, 1.0)]
    args = [jnp.asarray(c) for c in zip(*rows, strict=True)]
    np.testing.assert_array_equal(jax.jit(jax.vmap(tv))(*args), 1.0)
    grads = jax.jit(jax.vmap(jax.grad(tv, (0, 1, 2, 3))))(*args)
    np.testing.assert_array_equal(np.asarray(grads), 0.0)


def test_discrete_laplace_tv_derivative_where_tv_nears_one():
    # TV(DLap(0, b), DLap(d, b)) = 1 - e^{-d/(2b)} (d even): d/db = -d e^{-d/(2b)}/(2b^2).
    # Differentiated term by term, 1 - 2 e^{-u}/(1 + q) kept only ~eps/e^{-u} of it (JAX's
    # expm1(-u) + 1, and q-terms of numerator and denominator that cancel): 1.4e-8 relative
    # off at d = 40, 3.3e-5 at 60
    d = jnp.asarray([10.0, 40.0, 60.0])
    grad = jax.jit(
        jax.vmap(
            jax.grad(lambda b, d: jd.tv(jd.DiscreteLaplace(0.0, b), jd.DiscreteLaplace(d, b))),
            (None, 0),
        )
    )
    want = -np.asarray(d) / 2 * np.exp(-np.asarray(d) / 2)
    np.testing.assert_allclose(grad(1.0, d), want, rtol=1e-13)


def test_hellinger_derivative_far_apart():
    # H = sqrt(1 - BC), BC(Lap(m, 1), Lap(d, 1)) = (1 + d/2) e^{-d/2}: dH/dm = -(d/4)
    # e^{-d/2}/(2H) at m = 0. JAX's derivative of expm1 (expm1 + 1) kept ~eps/BC of it:
    # 1.3e-5 relative off at d = 60
    d = np.asarray([10.0, 40.0, 60.0])
    grad = jax.jit(
        jax.vmap(
            jax.grad(lambda m, d: jd.hellinger(jd.Laplace(m, 1.0), jd.Laplace(d, 1.0))),
            (None, 0),
        )
    )
    h = np.sqrt(-np.expm1(np.log1p(d / 2) - d / 2))
    np.testing.assert_allclose(grad(0.0, d), -(d / 4) * np.exp(-d / 2) / (2 * h), rtol=1e-13)


def test_discrete_laplace_kl_at_tiny_scales():
    # eps = 1/b up to 1e300: P is a point mass to rounding, KL = -log q(0) = 1/b2 (Delta = 1,
    # equal scales) or 1/(2b) (Q twice as wide). The scaled log tanh curvature was 0 * inf
    # (nan) from b ~ 1e-154 on.
    b = jnp.asarray([1e-100, 1e-160, 1e-200, 1e-300])
    D = jd.DiscreteLaplace
    np.testing.assert_allclose(jd.kl(D(0.0, b), D(1.0, b)), 1 / np.asarray(b), rtol=1e-14)
    np.testing.assert_allclose(jd.kl(D(0.0, b), D(1.0, 2 * b)), 0.5 / np.asarray(b), rtol=1e-14)


@pytest.mark.parametrize(
    "dtype, epsilons",
    [(jnp.float64, [1e150, 1e160, 1e200, 1e300]), (jnp.float32, [1e18, 1e20, 1e30])],
    ids=["float64", "float32"],
)
def test_geometric_mechanism_at_huge_epsilon(dtype, epsilons):
    # b1 b2 underflowed (to 0: XLA:CPU flushes subnormals) beyond eps ~1e154 (float64; 1e19
    # in float32), and log C_a was nan at every a. Equal scales, Delta = 1, summing the two
    # geometric pieces: C_a = (e^{-(1-a) eps} + e^{-a eps}) / (1 + e^{-eps}).
    P, Q = jd.mechanisms.geometric(epsilon=jnp.asarray(epsilons, dtype))
    alphas = [0.0, 0.25, 0.5, 1.0]
    got = jd.log_bc(P, Q, jnp.asarray(alphas, dtype)[:, None])
    with mp.workdps(40):
        want = [
            [
                float(mp.log(mp.e ** (-(1 - a) * e) + mp.e ** (-a * e)) - mp.log1p(mp.e ** (-e)))
                for e in map(mp.mpf, np.asarray(epsilons, np.float64).tolist())
            ]
            for a in map(mp.mpf, alphas)
        ]
    tol = 1e-15 if dtype == jnp.float64 else 1e-7
    assert _rel(got, want).max() < tol
    assert _rel(jd.bhattacharyya(P, Q), [-w for w in want[2]]).max() < tol
    np.testing.assert_array_equal(jd.hellinger(P, Q), 1.0)


def test_forward_derivatives_in_epsilon_at_huge_epsilon():
    # The scale Delta/eps was differentiated as -Delta/eps^2, which underflows to 0 beyond
    # eps ~1e154: jax.jvp in epsilon (what calibrate steps on) was 0 there. For Delta = 1,
    # KL = eps + e^-eps - 1 and C = eps/2 - log(1 + eps/2): slopes in log eps are eps - ...
    eps = jnp.asarray([1e10, 1e160, 1e300])

    def in_log_eps(fn):
        def f(x):
            return fn(*jd.mechanisms.laplace(epsilon=jnp.exp(x)))

        # jitted: eager, each nested jit's jvp compiles on its own
        return jax.jit(lambda x: jax.jvp(f, (x,), (jnp.ones(3),))[1])(jnp.log(eps))

    e = np.asarray(eps)
    np.testing.assert_allclose(in_log_eps(jd.kl), e, rtol=1e-13)
    got = in_log_eps(lambda P, Q: jd.chernoff(P, Q).information)
    np.testing.assert_allclose(got, e / 2 - e / (2 + e), rtol=1e-13)


@pytest.mark.parametrize(("epsilon", "theta"), [(1e-10, 1e300), (1e10, 1e-300)])
def test_adversarial_laplace_names_an_overflowing_neighbour_scale(epsilon, theta):
    # theta * b overflowed (underflowed) inside the pair: "Laplace: scale must be positive
    # and finite, got inf", a value the caller never gave (QA pass, via the CLI)
    with pytest.raises(ValueError, match=r"theta\*sensitivity/epsilon is outside the float"):
        jd.mechanisms.adversarial_laplace(epsilon, shift=1.0, theta=theta)


def test_randomized_response_at_epsilon_zero():
    # legal (both rows uniform) but refused, while calibrate returned 0 for a zero budget
    P, Q = jd.mechanisms.randomized_response(0.0, 3)
    np.testing.assert_array_equal(P.log_probs, Q.log_probs)
    np.testing.assert_allclose(P.probs, 1 / 3, rtol=1e-15)
    assert float(jd.kl(P, Q)) == 0.0
    with pytest.raises(ValueError, match=r"^epsilon must be non-negative, got -1"):
        jd.mechanisms.randomized_response(-1.0)
    # Regression: traced (unchecked), epsilon = -1 gave RR(1) with its rows swapped (Chernoff
    # information 0.1201, as at +1), and a Gaussian sensitivity of -1 the pair of +1 (TV 0.3829)
    rr = jax.jit(lambda e: jd.mechanisms.randomized_response(e)[0].log_probs)
    assert np.all(np.isnan(rr(-1.0))) and not np.any(np.isnan(rr(1.0)))
    assert np.isnan(jax.jit(lambda s: jd.mechanisms.gaussian(s, sigma=1.0)[1].loc)(-1.0))


def test_mechanisms_keep_float32_under_x64():
    # the default sensitivity (a Python float) was promoted on its own, to float64, and made
    # a float32 epsilon's pair float64
    m, f = jd.mechanisms, jnp.float32(2.0)
    pairs = [
        m.laplace(epsilon=f),
        m.laplace(scale=f),
        m.gaussian(sigma=f),
        m.geometric(epsilon=f),
        m.adversarial_laplace(f, shift=f, theta=f),
        m.randomized_response(f),
    ]
    for pair in pairs:
        for leaf in jax.tree_util.tree_leaves(pair):
            assert leaf.dtype == jnp.float32, pair
    assert m.laplace(epsilon=2.0)[0].scale.dtype == jnp.float64


def test_discrete_laplace_kl_at_huge_scales():
    # epsilon = 1/b down to 1e-300: the continuum limit, KL -> phi(-rho) = b1/b2 - 1 +
    # log(b2/b1) (the shift and discretisation terms are ~1/b); the product of the inverse
    # scales in the scale term used to underflow to 0 beyond b ~ 1e154 (KL = 0 there)
    s = jnp.asarray([1e100, 1e200, 1e300])
    r = mp.mpf(3) / 2
    for b1, b2, ratio in ((s, 1.5 * s, r), (1.5 * s, s, 1 / r)):
        want = float(1 / ratio - 1 + mp.log(ratio))
        got = jd.kl(jd.DiscreteLaplace(0.0, b1), jd.DiscreteLaplace(1.0, b2))
        # the Bregman gap of log tanh is a difference of terms ~|log tanh(1/(2b))| (up to
        # 690) that leaves ~0.07: a few ulp of 690/0.07 ~ 1e-12 relative (measured 6e-14)
        assert _rel(got, [want] * 3).max() < 1e-12, (got, want)


def test_categorical_divergences():
    p = np.array([[0.2, 0.3, 0.5], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]])
    q = np.array([[0.3, 0.3, 0.4], [0.4, 0.4, 0.2], [0.25, 0.25 + 1e-9, 0.5 - 1e-9]])
    P, Q = jd.Categorical(p), jd.Categorical(q)
    with mp.workdps(60):
        want_kl, want_tv = [], []
        for pi, qi in zip(p, q, strict=True):
            # the distributions are the normalised vectors
            pm, qm = [mp.mpf(x) for x in pi], [mp.mpf(x) for x in qi]
            pm = [x / mp.fsum(pm) for x in pm]
            qm = [x / mp.fsum(qm) for x in qm]
            want_kl.append(
                float(mp.fsum(a * mp.log(a / b) for a, b in zip(pm, qm, strict=True) if a > 0))
            )
            want_tv.append(float(mp.fsum(abs(a - b) for a, b in zip(pm, qm, strict=True)) / 2))
    assert _rel(jd.kl(P, Q), want_kl)[:2].max() < 1e-13
    assert _rel(jd.kl(P, Q), want_kl)[2] < 1e-6  # input rounding of the 1e-9 perturbation
    assert _rel(jd.tv(P, Q), want_tv).max() < 1e-7
    assert _rel(jd.tv(P, Q), want_tv)[:2].max() < 1e-15
    # P not << Q: KL infinite
    assert float(jd.kl(Q, P)[1]) == np.inf


def test_categorical_tv_where_rounding_hides_a_difference_under_a_mass_near_one():
    # [x, 1 - x] stored as [x, 1]: the half-sum of |p - q| was x/2 (it lost the second
    # category's difference to rounding), below 1 - e^{-C} for the Chernoff information x
    for x, y in ((1e-17, 0.0), (1e-300, 1e-200), (3e-17, 1e-17)):
        P, Q = jd.Categorical(jnp.asarray([x, 1.0])), jd.Categorical(jnp.asarray([y, 1.0]))
        # (masses are stored as logs: exp(log x) carries ~|log x| eps, 5e-14 at 1e-200)
        np.testing.assert_allclose(jd.tv(P, Q), abs(x - y), rtol=1e-13)
        np.testing.assert_allclose(jd.tv(Q, P), abs(x - y), rtol=1e-13)
        c = float(jd.chernoff(P, Q).information)
        assert -math.expm1(-c) <= float(jd.tv(P, Q)) * (1 + 1e-15)
    # the gradient stays the half-sum's: d/dp_k of TV = sign(p_k - q_k)/2
    q = jnp.asarray([0.3, 0.25, 0.45])
    grad = jax.jit(jax.grad(lambda p: jd.tv(jd.Categorical(p), jd.Categorical(q))))(
        jnp.asarray([0.2, 0.3, 0.5])
    )
    np.testing.assert_allclose(grad, [-0.5, 0.5, 0.5], rtol=1e-15)


def _categorical_renyi_error(pi, qi, orders):
    """Max relative error of ``jd.renyi`` against 60-digit sums (exactly normalised input)."""
    with mp.workdps(60):
        want = []
        for o in orders:
            terms = [mp.mpf(x) ** o * mp.mpf(y) ** (1 - o) for x, y in zip(pi, qi, strict=True)]
            want.append(float(mp.log(mp.fsum(terms)) / (o - 1)))
    got = jd.renyi(jd.Categorical(np.asarray(pi)), jd.Categorical(np.asarray(qi)), orders)
    return _rel(got, want).max()


def test_categorical_renyi_orders_above_one_vs_mpmath():
    # Dyadic probabilities (exact sums), near-identical pairs with a light point whose
    # |log p/q| is 0.4-0.7: order * |log p/q| > 1 there, where the deficit series stopped
    # converging (order 20: 8% off; order 10: 2e-7), while C_a is still near 1.
    u = 2.0**-10
    pairs = [
        ([1 - u, u], [1 - 1.5 * u, 1.5 * u]),
        ([1 - u / 16, u / 16], [1 - u / 8, u / 8]),
        ([0.5, 0.5], [0.375, 0.625]),
    ]
    orders = np.asarray([1.0001, 1.5, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0, 300.0])
    for pi, qi in pairs:
        assert _categorical_renyi_error(pi, qi, orders) < 1e-13, (pi, qi)
    # A 2^-20 perturbation: log p - log q, from stored log-probabilities, carries ~1e-11
    # relative rounding (as for orders in [0, 1]: benchmarks/bench_accuracy.py, 9.7e-12).
    pi, qi = [0.25, 0.25, 0.5], [0.25 + 2.0**-20, 0.25 - 2.0**-20, 0.5]
    assert _categorical_renyi_error(pi, qi, orders) < 2e-11
    # A light point far apart (|log p/q| = log 4 > 1), the rest nearly equal: C_a - 1 is
    # ~1e-16, and the direct form, used wherever some |log p/q| > 1, was 11% off at order 2
    for u in (2.0**-53, 2.0**-50):
        pi, qi = [u, 0.5 - u, 0.5], [4 * u, 0.5 - 4 * u, 0.5]  # sums exactly 1
        assert _categorical_renyi_error(pi, qi, orders[:7]) < 1e-13, u
    # p = 0 < q at one point (its term in C_a - 1 is (a - 1) q): such pairs took the direct
    # form, ~1e-16 absolute (order 1 + 1e-9: 0 for 9.3e-10; 1.0001: 1e-4 relative)
    e = 2.0**-30
    assert _categorical_renyi_error([0.0, 0.5, 0.5], [e, 0.5, 0.5 - e], orders) < 1e-13


@pytest.mark.parametrize(
    "dtype, epsilons",
    [(jnp.float64, [30.0, 3e16, 1e17, 1e300]), (jnp.float32, [30.0, 1e8, 1e30])],
    ids=["float64", "float32"],
)
@pytest.mark.parametrize("k", [2, 3])
def test_randomized_response_at_huge_epsilon(dtype, epsilons, k):
    # The AM-GM deficit a phi(l) - phi(a l) cancelled to 0 once |log p/q| passed 2**54
    # (float64; 2**25 in float32), so C_a read as 1: information 0, converged, at eps >= 3e16.
    # Closed form: C_a at a = 1/2 is (2 e^{eps/2} + k - 2)/(e^eps + k - 1), the optimum.
    eps = jnp.asarray(epsilons, dtype)
    P, Q = jd.mechanisms.randomized_response(eps, k)
    r = jd.chernoff(P, Q)
    with mp.workdps(40):
        want = [
            float(mp.log(mp.e**e + k - 1) - mp.log(2 * mp.e ** (e / 2) + k - 2))
            for e in map(mp.mpf, np.asarray(eps, np.float64).tolist())
        ]
    tol = 1e-14 if dtype == jnp.float64 else 3e-7
    assert _rel(r.information, want).max() < tol
    assert bool(np.all(r.converged))
    np.testing.assert_array_equal(np.asarray(r.alpha), 0.5)
    assert _rel(jd.bhattacharyya(P, Q), want).max() < tol
    # the deficit itself, against 40 digits, where |l| is huge and a near 1/2
    a = np.asarray([0.5, 0.5, 0.25, 1e-20, 0.4999])
    l = -np.asarray([3e16, 1e300, 1e20, 7.5, 1e5])
    with mp.workdps(40):
        g = []
        for x, y in zip(map(mp.mpf, a.tolist()), l.tolist(), strict=True):
            g.append(float(x * mp.exp(y) + 1 - x - mp.exp(x * y)))
    assert _rel(sp.amgm_gap(jnp.asarray(a), jnp.asarray(l)), g).max() < 1e-15


def test_kl_slope_of_randomized_response_at_infinite_epsilon():
    # KL of k-ary randomized response = eps (e^eps - 1)/(e^eps + k - 1): its slope tends to
    # 1 as eps -> inf (exactly 1 in float64 from eps ~40). At eps = inf (disjoint rows) it
    # was 0, forward and reverse; n-fold products add.
    def f(e):
        P, Q = jd.mechanisms.randomized_response(e, 3)
        return jnp.stack([jd.kl(P, Q), jd.kl(jd.Product.iid(P, 2), jd.Product.iid(Q, 2))])

    slopes = jax.jit(lambda e: (jax.vmap(jax.jacrev(f))(e), jax.jacfwd(f)(e[0])))
    rev, fwd = slopes(jnp.asarray([np.inf, 50.0]))  # (one compilation)
    np.testing.assert_array_equal(np.asarray(rev), [[1.0, 2.0]] * 2)
    np.testing.assert_array_equal(np.asarray(fwd), [1.0, 2.0])


def test_rate_slopes_of_randomized_response_at_infinite_epsilon():
    # At eps = inf (disjoint rows) the slopes were 0, forward and reverse; their limits as
    # eps -> inf (mpmath, 200 digits, at eps = 200 and 600): Chernoff information (and
    # Bhattacharyya) 1/2, log C_a -min(a, 1 - a), so Renyi min(l, 1 - l)/(1 - l) below
    # order 1 (1 from 1/2) and 1 above (log C_l = +inf there: a blow-up, not an empty sum).
    def f(e):
        P, Q = jd.mechanisms.randomized_response(e, 3)
        info = jd.chernoff(P, Q).information[None]
        return jnp.concatenate([info, jd.renyi(P, Q, jnp.asarray([0.3, 0.7, 2.0]))])

    want = [0.5, 3 / 7, 1.0, 1.0]
    slopes = jax.jit(lambda e: (jax.jacrev(f)(e), jax.jacfwd(f)(e)))
    for got in slopes(jnp.inf):  # (one compilation)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-15, atol=0)


def test_forward_derivatives_of_disjoint_categoricals_are_zero():
    # disjoint supports whose zero masses do not move: C_a = 0 for every parameter nearby,
    # so the coefficient, Hellinger distance, Chernoff information and log C_a are constant
    # (inf, 1, inf, -inf). Forward mode gave nan (log of the empty sum: tangent 0/0); reverse
    # mode gave 0. A zero mass whose log moves (-inf - log1p(t)) is read as vanishing at that
    # rate, as kl reads it (kernels.categorical._at_rate): log C_a then has the slope of its
    # leading term, a d log p_1 = -0.3/(1 + t), the limit of the slopes with -inf -> -R.
    def f(t, moving):
        lp = jnp.stack([-jnp.log1p(t), -jnp.inf, jnp.log(t) - jnp.log1p(t)])
        lp = lp.at[1].set(-jnp.inf - jnp.log1p(t) * moving)
        P = jd.Categorical.from_log_probs(lp)
        Q = jd.Categorical.from_log_probs(jnp.asarray([-jnp.inf, 0.0, -jnp.inf]))
        return jnp.stack([jd.hellinger(P, Q), jd.log_bc(P, Q, 0.3)])

    slopes = jax.jit(jax.vmap(jax.jacfwd(f), (None, 0)))
    got = np.asarray(slopes(0.5, jnp.asarray([0.0, 1.0])))
    np.testing.assert_allclose(got, [[0, 0], [0, -0.2]])


def test_amgm_deficit_outside_the_unit_interval_vs_mpmath():
    # G(a, l) = a e^l + 1 - a - e^{al} for Renyi orders above 1 (and a = 1 - order < 0, the
    # mirrored points): a expm1(l) - expm1(a l) cancelled as a -> 1+ (2e-4 relative at
    # a = 1 + 1e-12)
    a = np.repeat([1 + 1e-12, 1 + 1e-6, 1.0001, 1.5, 10.0, -1e-9, -0.5, -5.0], 4)
    l = np.tile([-1.05, -1.9, -30.0, -100.0], 8)
    keep = np.abs(a * l) < 600
    a, l = a[keep], l[keep]
    with mp.workdps(80):
        want = []
        for x, y in zip(map(mp.mpf, a.tolist()), l.tolist(), strict=True):
            want.append(float(x * mp.exp(y) + 1 - x - mp.exp(x * y)))
    # (|a l| up to 500: exp of a rounded product carries |a l| eps)
    tol = np.maximum(4e-16, 2e-16 * np.abs(a * l))
    got = np.asarray(sp.amgm_gap(jnp.asarray(a), jnp.asarray(l)))
    assert np.all(_rel(got, want) < tol), (_rel(got, want) / tol).max()


def test_categorical_renyi_of_large_orders_for_near_identical_masses():
    # the AM-GM deficit's series formed S_m(a) = 1 + a + ... + a^(m-1) up to a^17, which
    # overflowed for orders above ~137 in float32: identical pairs then gave ~1e-8, masses
    # 1e-5 apart at order 1e4 1.4e-3 relative off (the direct form; QA pass)
    P, Q = jd.mechanisms.randomized_response(np.float32(4e-5))
    o = np.asarray([200.0, 1e4], np.float32)
    np.testing.assert_array_equal(jd.renyi(P, P, o), 0.0)
    with mp.workdps(60):
        p, q = ([mp.exp(x) for x in np.asarray(d.log_probs, np.float64).tolist()] for d in (P, Q))
        want = [float(mp_refs.cat_log_bc(p, q, x) / (x - 1)) for x in o.tolist()]
    assert _rel(jd.renyi(P, Q, o), want).max() < 1e-6


def test_categorical_subnormal_probabilities():
    # XLA:CPU flushes subnormals to zero, so jnp.log(5e-324) is -inf (a zero mass: C = inf);
    # the probabilities are read from their bits instead (float64).
    P = jd.Categorical(jnp.asarray([5e-324, 1.0]))
    Q = jd.Categorical(jnp.asarray([1.0, 5e-324]))
    np.testing.assert_allclose(P.log_probs[0], math.log(5e-324), rtol=1e-15)
    want = -math.log(2 * math.sqrt(5e-324))  # symmetric pair: a* = 1/2
    np.testing.assert_allclose(jd.chernoff(P, Q).information, want, rtol=1e-14)


def test_categorical_built_eagerly_compiles_nothing_of_its_own():
    # Its log-masses were taken by ~30 single-op XLA programs, each compiled for every new
    # shape (~1 s per categorical of a new shape); now by numpy, in float64
    compiles = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        rng = np.random.default_rng(3)
        for dtype in (np.float64, np.float32):
            p = rng.dirichlet(np.ones(13), size=(3, 2)).astype(dtype)
            P = jd.Categorical(p)
            with np.errstate(divide="ignore"):
                want = np.log(p.astype(np.float64)).astype(dtype)  # correctly rounded here
            np.testing.assert_array_equal(np.asarray(P.log_probs), want)
            assert P.log_probs.dtype == dtype
    finally:  # (older JAX cannot unregister: the listener then only fills a dead list)
        getattr(jax.monitoring, "unregister_event_duration_listener", lambda f: None)(listen)
    assert len(compiles) <= 2, compiles  # (moving each array to the device: one each)


def test_product_divergences():
    P = jd.Product.iid(jd.Categorical(jnp.array([0.7, 0.3])), 3)
    Q = jd.Product.iid(jd.Categorical(jnp.array([0.3, 0.7])), 3)
    np.testing.assert_allclose(jd.kl(P, Q), 3 * 0.4 * np.log(0.7 / 0.3), rtol=1e-14)
    # TV of 3-fold binary RR: exact enumeration against a binomial sum
    from math import comb

    want = sum(
        max(0.0, comb(3, k) * (0.7**k * 0.3 ** (3 - k) - 0.3**k * 0.7 ** (3 - k))) for k in range(4)
    )
    np.testing.assert_allclose(jd.tv(P, Q), want, rtol=1e-14)
    with pytest.raises(NotImplementedError):
        jd.tv(jd.Product.iid(jd.Laplace(), 2), jd.Product.iid(jd.Laplace(1.0), 2))
    # a huge count: the joint size 2**(2**62) was computed (it never ended), and a
    # one-category component was repeated 2**62 times (QA pass)
    with pytest.raises(NotImplementedError):
        jd.tv(jd.Product.iid(P.components[0], 2**62), jd.Product.iid(Q.components[0], 2**62))
    one = jd.Product.iid(jd.Categorical(jnp.array([1.0])), 2**62)
    assert float(jd.tv(one, one)) == 0.0


def test_renyi_rejects_bad_order():
    with pytest.raises(ValueError, match="order"):
        jd.renyi(jd.Laplace(), jd.Laplace(1.0), 0.0)
    with pytest.raises(ValueError, match="order"):
        jd.renyi(jd.Laplace(), jd.Laplace(1.0), -1.0)
    # a Python order takes the pair's precision: in float32, 1e300 became inf (nan; QA pass)
    p32 = jd.Laplace(np.float32(0.0), np.float32(1.0))
    with pytest.raises(ValueError, match=r"order 1e\+300 overflows the pair's float32"):
        jd.renyi(p32, p32, 1e300)
    # subnormal orders (XLA flushes them to 0): a Python 1e-320 was refused as "got 0.0", an
    # array's gave nan (QA pass)
    for order, pair in ((1e-320, jd.Laplace()), (np.asarray([1e-320]), jd.Laplace()), (1e-40, p32)):
        with pytest.raises(ValueError, match=r"^order must be at least .* got 1e-(320|40)$"):
            jd.renyi(pair, pair, order)
    # traced (no eager check): nan, as log_bc's alpha outside [0, 1] (a negative order gave
    # inf, order 0 gave 0)
    got = jax.jit(jd.renyi)(jd.Laplace(), jd.Laplace(1.0), jnp.asarray([-1.0, 0.0, 2.0]))
    assert np.isnan(got[:2]).all() and np.isfinite(got[2])


def test_invalid_traced_order_skew_or_mechanism_argument_gives_nan_gradients():
    # nan in the derivatives too (the rule of nan_where_invalid): jnp.where(bad, nan, value),
    # and log_bc's stand-in alpha, had derivative 0 there, a silent 0 gradient; in the
    # arguments themselves and in a pair's parameters
    from jaxdp import mechanisms

    def grads(a, order, s, e):
        b = jnp.asarray(1.3)
        return (
            jax.grad(lambda a, b: jd.log_bc(jd.Laplace(0.0, b), jd.Laplace(1.0, b), a), (0, 1))(
                a, b
            ),
            jax.grad(lambda o, b: jd.renyi(jd.Laplace(0.0, b), jd.Laplace(1.0, b), o), (0, 1))(
                order, b
            ),
            jax.grad(lambda s: jd.kl(*mechanisms.gaussian(s, sigma=1.3)))(s),
            jax.grad(lambda e: jd.kl(*mechanisms.randomized_response(e, 3)))(e),
        )

    f = jax.jit(grads)
    for bad in [(-0.2, -0.5, -1.0, -0.5), (1.5, 0.0, 0.0, -jnp.inf)]:
        assert all(np.isnan(g) for g in jax.tree.leaves(f(*bad))), (bad, f(*bad))
    # valid arguments: finite (their values: the gradient tests of each function)
    assert all(np.isfinite(g) for g in jax.tree.leaves(f(0.3, 2.0, 0.5, 0.7)))


def test_density_with_smaller_support():
    # Exp(1) on [0, inf) vs Laplace(0, 1): C_a = 2^(a-1), so C = log 2 at a* = 0,
    # KL(E||L) = log 2, KL(L||E) = inf
    E = jd.Density(lambda x: jnp.where(x >= 0, -x, -jnp.inf), lower=0.0)
    L = jd.Laplace(0.0, 1.0)
    for a in (0.0, 0.3, 1.0):
        np.testing.assert_allclose(jd.log_bc(E, L, a), (a - 1) * np.log(2), rtol=1e-12)
    np.testing.assert_allclose(jd.kl(E, L), np.log(2), rtol=1e-12)
    assert float(jd.kl(L, E)) == np.inf
    r = jd.chernoff(E, L)
    assert float(r.alpha) == 0.0 and float(r.derivative) < 0
    np.testing.assert_allclose(r.information, np.log(2), rtol=1e-12)
    np.testing.assert_allclose(jd.tv(E, L), 0.5, rtol=1e-9)
    # Renyi orders above 1 of E against L: 2^(a-1)/(a-1), finite; of L against E: +inf
    # (L has mass where E has none: p^a q^(1-a) = inf there)
    orders = jnp.asarray([0.5, 2.0, 3.0])
    np.testing.assert_allclose(jd.renyi(E, L, orders), np.log(2.0), rtol=1e-12)
    np.testing.assert_allclose(jd.renyi(L, E, orders[0]), np.log(2.0), rtol=1e-12)
    np.testing.assert_array_equal(jd.renyi(L, E, orders[1:]), np.inf)


def _uniform(lo, hi):
    return jd.Density(lambda x: jnp.full_like(x, -math.log(hi - lo)), lower=lo, upper=hi)


def test_renyi_above_one_is_infinite_where_q_vanishes_under_p():
    # It came out finite and negative (the nodes cover only the common support, where the
    # integral is finite): log C_a/(a - 1) with C_a < 1
    orders = jnp.asarray([0.5, 1.5, 2.0, 5.0])
    inf = np.inf
    cases = [
        (_uniform(0.0, 2.0), _uniform(0.0, 1.0), [math.log(2.0), inf, inf, inf]),
        (_uniform(0.0, 1.0), _uniform(0.5, 1.5), [2 * math.log(2.0), inf, inf, inf]),
        (_uniform(0.0, 1.0), _uniform(2.0, 3.0), [inf, inf, inf, inf]),
        (_uniform(0.0, 1.0), _uniform(0.0, 2.0), [math.log(2.0)] * 4),
    ]
    for P, Q, want in cases:
        assert _rel(jd.renyi(P, Q, orders), want).max() < 1e-12, (P, Q)
    assert float(jd.renyi(jd.Gaussian(0.0, 1.0), _uniform(0.0, 1.0), 2.0)) == inf
    assert float(jd.renyi(jd.Laplace(0.0, 1.0), _uniform(-1.0, 1.0), 3.0)) == inf


def test_renyi_of_densities_vanishing_at_a_support_bound():
    # p^a q^(1-a) ~ d^-(a-1)k next to a bound where q ~ d^k and p does not vanish: it
    # diverges once (a - 1) k >= 1. U(0, 1) vs 2x: int (2x)^(1-a) dx = 2^(1-a)/(2-a) for
    # a < 2; Exp(1) vs Gamma(2): int x^(1-a) e^-x dx = Gamma(2-a). Was nan below (the empty
    # pieces on the bound: weight 0 times +inf) and finite above (2.99 at U vs 2x, order 2).
    U = jd.Density(lambda x: jnp.zeros_like(x), lower=0.0, upper=1.0)
    T = jd.Density(lambda x: jnp.log(2.0 * x), lower=0.0, upper=1.0)
    E = jd.Density(lambda x: -x, lower=0.0)
    G = jd.Density(lambda x: jnp.log(x) - x, lower=0.0)
    orders = np.asarray([1.1, 1.5, 2.0, 3.0])
    ut, eg = np.asarray(jd.renyi(U, T, orders)), np.asarray(jd.renyi(E, G, orders))
    assert np.all(ut[2:] == np.inf) and np.all(eg[2:] == np.inf)
    with mp.workdps(30):
        want_ut = [float(mp.log(mp.mpf(2) ** (1 - a) / (2 - a)) / (a - 1)) for a in orders[:2]]
        want_eg = [float(mp.log(mp.gamma(2 - a)) / (a - 1)) for a in orders[:2]]
    # U vs 2x: tanh-sinh's nodes stop ~1e-17 (of the piece) short of the singular end and
    # miss int_0^d x^-s dx = d^(1-s)/(1-s): measured 2.5e-14 at s = 0.1, 9.3e-9 at s = 1/2
    # (README, Precision). Exp vs Gamma(2) starts on an exp-sinh tail whose first node is
    # ~1e-31 out: 1e-15 at both.
    assert _rel(ut[0], want_ut[0]) < 1e-13 and _rel(ut[1], want_ut[1]) < 2e-8, ut
    assert _rel(eg[:2], want_eg).max() < 1e-14, eg
    # the mirrored pairs converge at every order: int (2x)^a = 2^a/(a+1), Gamma(a+1)
    tu, ge = np.asarray(jd.renyi(T, U, orders)), np.asarray(jd.renyi(G, E, orders))
    want_tu = [math.log(2.0**a / (a + 1)) / (a - 1) for a in orders]
    want_ge = [math.lgamma(a + 1) / (a - 1) for a in orders]
    assert _rel(tu, want_tu).max() < 1e-13 and _rel(ge, want_ge).max() < 1e-13, (tu, ge)


def test_density_renyi_above_one_of_near_identical_pairs():
    # Two formulas of one density differ by their rounding far out in a tail (log p ~
    # -1e19; |log p/q| ~ 2e3 under jit), where every term underflows: the deficit form
    # refused orders above 1 there, and the direct form is ~1e-15 absolute: a Density
    # N(0, 1e-100) vs the Gaussian gave -8e-15 at order 2 (two N(0, 3) as densities 3e-9
    # apart: 0 for 1e-18)
    orders = np.asarray([2.0, 10.0])
    tiny = jd.Density(lambda x: _log_normal(x, 0.0, 1e-100), scale=1e-100)
    r = np.asarray(jd.renyi(tiny, jd.Gaussian(0.0, 1e-100), orders))
    assert np.all(r >= 0.0) and r.max() < 1e-40, r


def test_renyi_at_support_bounds_other_than_zero_and_parameter_gradients():
    # Near a bound other than 0 the rule's outermost nodes round onto it (5 + 1e-17 == 5),
    # where 2(x - 5) vanishes: every order above 1 was +inf. They now sit one float inside
    # (missing ~ulp(5)^(1-s) of the integral) and the exponent comes from the nodes nearest
    # the bound; the same at an upper bound (even 1: 1 - 1e-17 == 1).
    orders = np.asarray([1.1, 1.5, 2.0, 3.0])
    want = [math.log(2.0 ** (1 - a) / (2 - a)) / (a - 1) for a in orders[:2]]
    U = jd.Density(lambda x: jnp.zeros_like(x), lower=5.0, upper=6.0)
    T = jd.Density(lambda x: jnp.log(2.0 * (x - 5.0)), lower=5.0, upper=6.0)
    U1 = jd.Density(lambda x: jnp.zeros_like(x), lower=0.0, upper=1.0)
    R = jd.Density(lambda x: jnp.log(2.0 * (1.0 - x)), lower=0.0, upper=1.0)
    for got in (np.asarray(jd.renyi(U, T, orders)), np.asarray(jd.renyi(U1, R, orders))):
        assert np.all(got[2:] == np.inf), got
        # measured: 6e-14 and 1.2e-13 (order 1.1: D = log C/(a - 1) is 10x log C's error),
        # 4.4e-8 and 2.9e-8 (s = 1/2: ~ulp(5)^(1/2) ~ 3e-8 of the integral missing)
        assert _rel(got[0], want[0]) < 1e-12 and _rel(got[1], want[1]) < 1e-7, got

    # a parametrized density whose log vanishes at the bound: (k + 1) x^k on (0, 1).
    # The empty pieces' nodes sat on x = 0, where k log x = -inf: its gradient in k came
    # back through the mask as 0 * inf = nan. KL(U || Q_k) = k - log(k + 1); Rényi of order
    # a: log((k + 1)^(1-a) / (1 - k(a - 1))) / (a - 1) for k(a - 1) < 1.
    def Qk(k):
        return jd.Density(
            lambda x, k: jnp.log(k + 1.0) + k * jnp.log(x), params=k, lower=0.0, upper=1.0
        )

    def renyi_k(k, a=1.5):
        return jd.renyi(U1, Qk(k), a)

    k = 0.5

    @jax.jit  # one program (eager grads compile each nested jit on its own)
    def grads(k):
        return (
            jax.grad(lambda k: jd.kl(U1, Qk(k)))(k),
            jax.grad(renyi_k)(k),
            jax.grad(lambda k: jd.chernoff(U1, Qk(k)).information)(k),
        )

    g_kl, g_r, g_c = grads(k)
    assert _rel(float(g_kl), 1.0 - 1.0 / (k + 1.0)) < 1e-12, g_kl
    # d/dk [(1 - a) log(k + 1) - log(1 - k(a - 1))] / (a - 1) at a = 3/2
    want_r = (-0.5 / (k + 1.0) + 0.5 / (1.0 - 0.5 * k)) / 0.5
    # (measured 1.1e-11: the value's own truncation, 9e-9 at s = 1/2, is nearly constant in k)
    assert _rel(float(g_r), want_r) < 1e-9, (g_r, want_r)
    assert np.isfinite(float(g_c)), g_c


def test_renyi_of_mixed_pairs_far_apart_is_finite():
    # Gaussian vs a Laplace far from it, order 2: the log-integrand at the pieces' ends there
    # is ~-1e14 (float64) or ~-1e5 (float32), where its rounding exceeds any exponent the
    # end test could read; it read one and gave +inf (its first version)
    from references import mp_reference as R

    cases = [
        (np.float64, 0.0, 1.0, 1e7, 1.0, 2.0, 1e-10),
        (np.float32, 0.0, 1.0, 300.0, 1.0, 2.0, 1e-6),
    ]
    for dtype, m1, s1, m2, b2, a, tol in cases:
        got = jd.renyi(
            jd.Gaussian(dtype(m1), dtype(s1)), jd.Laplace(dtype(m2), dtype(b2)), dtype(a)
        )
        with mp.workdps(40):
            want = float(R.renyi(R.Gaussian(m1, s1), R.Laplace(m2, b2), a))
        assert _rel(float(got), want) < tol, (dtype, got, want)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_gaussian_divergences_at_scale_ratios_beyond_float_range_of_their_square(dtype, rtol):
    # Scale ratios past ~1e154 (float32 ~1.8e19), the narrow law as P and as Q, centres 0,
    # 0.5 and 3 of the wide scale apart: s^2 overflowed (inf/inf, 0/0) and e^rho in the
    # scale term of log C_a too. KL(wide || narrow) was nan (is inf: its true value ~r^2/2
    # leaves the float range), TV nan (is 1 to rounding), Bhattacharyya inf, Rényi and
    # Hellinger nan.
    exps = (20, 25, 37) if dtype == np.float32 else (153, 155, 200, 300, 307)
    cases = []
    for e in exps:
        for shift in (0.0, 0.5, 3.0):
            cases += [(0.0, 1.0, shift * 10.0**e, 10.0**e), (shift * 10.0**e, 10.0**e, 0.0, 1.0)]
    arr = np.asarray(cases, dtype)
    P, Q = jd.Gaussian(arr[:, 0], arr[:, 1]), jd.Gaussian(arr[:, 2], arr[:, 3])
    big = float(np.finfo(dtype).max)
    with mp.workdps(60):
        cf = [[mp_refs.gau_log_bc_cf(*map(float, c), a) for a in (0.5, 2.0)] for c in arr]
        kl = [mp_refs.gau_kl(*map(float, c)) for c in arr]
        want_kl = [float(k) if k < big else np.inf for k in kl]
        want_bh = [float(-v[0]) for v in cf]
        want_r2 = [float(v[1]) if mp.im(v[1]) == 0 else np.inf for v in cf]
        want_h = [float(mp.sqrt(-mp.expm1(v[0]))) for v in cf]
    assert np.isinf(want_kl).sum() > 5 and np.isinf(want_r2).sum() > 5
    for name, got, want in (
        ("kl", jd.kl(P, Q), want_kl),
        ("bhattacharyya", jd.bhattacharyya(P, Q), want_bh),
        ("renyi 1/2", jd.renyi(P, Q, 0.5), [2 * w for w in want_bh]),
        ("renyi 2", jd.renyi(P, Q, 2.0), want_r2),
        ("hellinger", jd.hellinger(P, Q), want_h),
    ):
        assert got.dtype == dtype, name
        assert _rel(got, want).max() < rtol, (name, got, want)
    tv = np.asarray(jd.tv(P, Q))
    assert tv.dtype == dtype and np.all(tv == 1.0), tv  # 1 - TV < 1e-8 for every pair


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 3e-7), (np.float64, 1e-15)])
def test_gaussian_kl_at_large_scale_ratios_keeps_its_precision(dtype, rtol):
    # KL(wide || narrow) ~ r^2/2: its e^-rho was recomputed from the rounded rho = 2 log(s2/s1),
    # ~|rho| ulp off (float32 1.1-3.7e-6 from ratio ~1e4, float64 1.4e-14 at 1e29); and inf
    # for float32 ratios from ~1.8e19, where r^2 overflows but r^2/2 does not. Both
    # directions, centres 0 and 1 (of Q's scale) apart, ratios near the form's switch (2.1).
    ratios = (2.0, 2.2, 3.0, 1e4, 3e6, 1e10, 1e15, 2e19) + (
        (1e29, 1e100) if dtype == np.float64 else ()
    )
    cases = []
    for r in ratios:
        for shift in (0.0, 1.0):
            cases += [(0.0, r, shift, 1.0), (0.0, 1.0, shift * r, r)]
    arr = np.asarray(cases, dtype)
    P, Q = jd.Gaussian(arr[:, 0], arr[:, 1]), jd.Gaussian(arr[:, 2], arr[:, 3])
    want = [float(mp_refs.gau_kl(*map(float, c))) for c in arr]
    got = jd.kl(P, Q)
    assert got.dtype == dtype
    assert _rel(got, want).max() < rtol, (got, want)


def test_gaussian_kl_gradients_at_scale_ratios_near_the_float32_limit():
    # KL(wide P || narrow Q) ~ r^2/2 with d/ds1 = s1/s2^2 - 1/s1: in the standardized pair
    # (P's scale ~1, Q's ~1/r) d/ds1' ~ r^2 overflowed for r ~1.8e19+ (float32) while KL
    # and d/ds1 ~ r do not (inf, the forward mode right); so did d/ds2 (-1e9 here) at P's
    # scale 1e30. Reverse and forward, centres 0 and 1 (of Q's scale) apart.
    cases = np.asarray(
        [(0.0, 2e19, 0.0, 1.0), (0.0, 2e19, 1.0, 1.0), (0.0, 1e30, 0.0, 1e17)], np.float32
    )

    def f(x):
        return jd.kl(jd.Gaussian(x[0], x[1]), jd.Gaussian(x[2], x[3]))

    rev, fwd = jax.jit(jax.grad(f)), jax.jit(jax.jacfwd(f))
    for c in cases:
        m1, s1, m2, s2 = (mp.mpf(float(v)) for v in c)
        d = m2 - m1
        want = [-d / s2**2, s1 / s2**2 - 1 / s1, d / s2**2, 1 / s2 - (s1**2 + d**2) / s2**3]
        for got in (rev(c), fwd(c)):
            assert got.dtype == np.float32
            for g, w in zip(np.asarray(got, np.float64), want, strict=True):
                if abs(w) > np.finfo(np.float32).max:  # d/ds2 = -4e38: overflows
                    assert g == math.copysign(math.inf, w), (c, got, want)
                else:
                    assert abs(g - w) <= 1e-6 * abs(w), (c, got, want)


def test_gaussian_kl_at_scale_ratios_beyond_the_float_range():
    # s2/s1 beyond ~1.8e308 (float32 ~3.4e38): log_ratio overflowed, so KL was inf for a
    # narrow P (finite: log(s2/s1) - 1/2 + ...) and nan for a wide one (inf); and its
    # forward-mode tangent formed s2/s1^2, so d/ds1 was nan for a tiny s1 against a much
    # wider Q also within the range (1e-300 vs 1e-100). Values and both modes' derivatives
    # against the closed form (50 digits); values and reverse-mode derivatives of the pair
    # times another Gaussian pair, stacked with it (nan but in the fourth row: the stack
    # was standardized by P's scale, Q's moved scale or offset overflowing).
    cases = np.array(
        [
            (0.0, 1e-300, 0.0, 1e10),
            (0.0, 1e-300, 5e9, 1e10),
            (0.0, 1e-200, 0.0, 1e200),
            (0.0, 1e-300, 0.0, 1e-100),
            (0.0, 1e10, 0.0, 1e-300),
        ]
    )

    def f(x):
        return jd.kl(jd.Gaussian(x[0], x[1]), jd.Gaussian(x[2], x[3]))

    def g(x):
        P, Q = jd.Gaussian(x[0], x[1]), jd.Gaussian(x[2], x[3])
        return jd.kl(jd.Product(P, jd.Gaussian(0.0, 1.0)), jd.Product(Q, jd.Gaussian(1.0, 2.0)))

    fns = jax.jit(
        lambda x: tuple(jax.vmap(h)(x) for h in (f, jax.grad(f), jax.jacfwd(f), g, jax.grad(g)))
    )
    other = float(mp_refs.gau_kl(0, 1, 1, 2))
    for c, v, r, fw, vp, rp in zip(cases, *fns(cases), strict=True):
        with mp.workdps(50):
            m1, s1, m2, s2 = (mp.mpf(float(t)) for t in c)
            d = m2 - m1
            want = [mp_refs.gau_kl(*c), -d / s2**2, s1 / s2**2 - 1 / s1, d / s2**2]
            want += [1 / s2 - (s1**2 + d**2) / s2**3]
        got, want = [v, *r, vp - other, *rp], want + want
        # forward mode where KL is inf (a wide P) is nan: 0 * inf in the tangent of s1/s2
        # along the explicit zero ds2, JAX's limit for infinite slopes
        if want[0] < np.finfo(np.float64).max:
            got, want = got + list(fw), want + want[1:5]
        for g, w in zip(got, want, strict=True):
            if abs(w) > np.finfo(np.float64).max:
                assert float(g) == math.copysign(math.inf, w), (c, got, want)
            else:
                assert abs(float(g) - w) <= 1e-15 * abs(w), (c, got, want)
    # float32 scales 1e-30 and 1e17: was inf
    x = np.float32([0.0, 1e-30, 1e16, 1e17])
    want = mp_refs.gau_kl(*map(float, x))
    got = jd.kl(jd.Gaussian(x[0], x[1]), jd.Gaussian(x[2], x[3]))
    assert got.dtype == np.float32 and abs(float(got) - want) <= 3e-7 * want, (got, want)


@pytest.mark.parametrize("family", ["Laplace", "Gaussian"])
def test_parameter_gradients_at_extreme_scale_ratios(family):
    # Q 1e160 and 1e200 times wider or narrower than P, centred 0 or half its own scale
    # away. JAX differentiates x/y as -x dy/y^2, and y^2 overflows (gradient 0, or 0 * inf
    # = nan) for such scales although the derivative itself is ordinary: Laplace log C_a
    # had d/d log mu2 0.45 for 0.25 (so Bhattacharyya, Rényi and the Chernoff information
    # too), Laplace TV and every gradient at a narrow Q were nan, and so were Gaussian
    # Rényi gradients (through the unused order-1 branch) and d alpha*/d theta.
    cls = getattr(jd, family)
    e = np.array([160.0, -160.0, 200.0, -200.0] * 2) * math.log(10.0)
    rel = np.repeat([0.0, 0.5], 4)

    def pair(log_s, log_shift):
        s = jnp.exp(log_s)
        return cls(0.0, 1.0), cls(rel * jnp.exp(log_shift) * s, s)

    fns = {
        "bhattacharyya": jd.bhattacharyya,
        "renyi 1/2": lambda P, Q: jd.renyi(P, Q, 0.5),
        "renyi 2": lambda P, Q: jd.renyi(P, Q, 2.0),
        "tv": jd.tv,
        "kl(Q, P)": lambda P, Q: jd.kl(Q, P),
        "chernoff": lambda P, Q: jd.chernoff(P, Q).information,
        "alpha*": lambda P, Q: jd.chernoff(P, Q).alpha,
    }
    h = 1e-5
    x = (jnp.asarray(e), jnp.zeros_like(e))
    # every value in one jitted program and every gradient in another: two compiles
    values = jax.jit(lambda *x: {name: f(*pair(*x)) for name, f in fns.items()})
    grads = jax.jit(
        lambda *x: {
            name: jax.grad(lambda *x, f=f: jnp.sum(f(*pair(*x))), argnums=(0, 1))(*x)
            for name, f in fns.items()
        }
    )(*x)
    for k in range(2):
        dx = [jnp.zeros_like(e), jnp.zeros_like(e)]
        dx[k] = jnp.full_like(e, h)
        up = values(x[0] + dx[0], x[1] + dx[1])
        dn = values(x[0] - dx[0], x[1] - dx[1])
        for name in fns:
            with np.errstate(invalid="ignore"):  # inf - inf: Rényi 2 beyond convergence
                fd = (np.asarray(up[name]) - np.asarray(dn[name])) / (2 * h)
            got = np.asarray(grads[name][k])
            # where the value itself is inf (Rényi 2 beyond its convergence), no check
            ok = np.isfinite(fd)
            assert np.all(np.isfinite(got[ok])), (name, k, got)
            # central differences of values ~400 in log parameters: ~1e-9 absolute
            np.testing.assert_allclose(got[ok], fd[ok], rtol=1e-6, atol=1e-8, err_msg=f"{name} {k}")


def _exponential(rate):
    return jd.Density(lambda x, r: jnp.log(r) - r * x, params=rate, lower=0.0)


def test_renyi_diverges_on_a_flat_tail():
    # int p^l q^(1-l) of Exp(1), Exp(r) has exponent -(l + (1 - l) r) x: zero for l = r/(r-1),
    # where the integrand is flat and the integral infinite (was finite: 28.4, 56.8)
    for r, order in ((2.0, 2.0), (3.0, 1.5)):
        assert float(jd.renyi(_exponential(1.0), _exponential(r), order)) == math.inf
    # just below: log(1/(l + (1 - l) r)) + (1 - l) log r, over l - 1
    order, r = 1.9, 2.0
    want = (math.log(1 / (order + (1 - order) * r)) + (1 - order) * math.log(r)) / (order - 1)
    got = float(jd.renyi(_exponential(1.0), _exponential(r), order))
    assert abs(got - want) <= 1e-12 * abs(want)


def test_float32_density_pairs_keep_float32_under_x64():
    def uniform(lo):
        return jd.Density(
            lambda x: jnp.where((x >= lo) & (x <= lo + 1), 0.0, -jnp.inf).astype(jnp.float32),
            lower=lo,
            upper=lo + 1,
            centre=jnp.float32(lo + 0.5),
            scale=jnp.float32(0.25),
        )

    P, Q = uniform(0.0), uniform(2.0)  # disjoint: the constant branches returned float64
    assert jd.kl(P, Q).dtype == jnp.float32 and float(jd.kl(P, Q)) == math.inf
    assert jd.tv(P, Q).dtype == jnp.float32 and float(jd.tv(P, Q)) == 1.0


def test_complex_parameters_and_unbroadcastable_products_are_rejected():
    with pytest.raises(TypeError, match="Laplace: loc must be real"):
        jd.Laplace(1j, 1.0)
    with pytest.raises(TypeError, match="Categorical: probs must be real"):
        jd.Categorical(jnp.array([0.5 + 0j, 0.5]))
    with pytest.raises(
        ValueError, match=r"Product: the components' batch shapes \[\(3,\), \(4,\)\]"
    ):
        jd.Product(jd.Laplace(jnp.zeros(3), 1.0), jd.Laplace(jnp.zeros(4), 1.0))


_NAN = float("nan")


def test_non_numeric_arguments_raise_errors_that_name_them():
    # strings, None and arbitrary objects failed inside jnp with JAX's own message
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0)
    cases = [
        (lambda: jd.Laplace(0.0, "a"), "Laplace: scale"),
        (lambda: jd.Gaussian(object(), 1.0), "Gaussian: loc"),
        (lambda: jd.Categorical("ab"), "Categorical: probs"),
        (lambda: jd.Laplace(0.0, None), "Laplace: scale"),
        (lambda: jd.log_bc(P, Q, "x"), "alpha"),
        (lambda: jd.log_bc(P, Q, None), "alpha"),
        (lambda: jd.renyi(P, Q, "2"), "order"),
        (lambda: jd.calibrate("laplace", None), "budget"),
        (lambda: jd.mechanisms.laplace(epsilon="1"), "epsilon"),
        (lambda: jd.mechanisms.randomized_response(None), "epsilon"),
        (lambda: jd.Density(lambda x: -jnp.abs(x), breakpoints=["k"]), "Density: breakpoints"),
    ]
    for make, name in cases:
        with pytest.raises(TypeError, match=f"^{name} must be a real number or array"):
            make()
    # Python ints beyond int64: JAX's OverflowError, which named no argument (QA pass)
    for make, name in (
        (lambda: jd.Laplace(0.0, 10**40), "Laplace: scale"),
        (lambda: jd.best_advantage_geometric(1.0, 2, sensitivity=2**63), "sensitivity"),
    ):
        with pytest.raises(ValueError, match=f"^{name} holds an integer outside the range"):
            make()
    with pytest.raises(ValueError, match="shift and theta: batch shapes"):
        jd.mechanisms.adversarial_laplace(jnp.ones(3), shift=jnp.ones(2), theta=1.0)
    with pytest.raises(ValueError, match="Density: breakpoints contains NaN"):
        jd.Density(lambda x: -jnp.abs(x) - math.log(2.0), breakpoints=[math.nan])
    # a log_prob that is nan inside the support (read as a zero density by the quadrature:
    # against Gaussian(), KL 1.0, TV 0.5 and Chernoff inf, converged)
    with pytest.raises(ValueError, match="Density: log_prob returned nan at x = -1"):
        jd.Density(lambda x: jnp.full_like(x, jnp.nan))
    # nan only on the support bound (0 log 0) is legal
    jd.Density(lambda x: 0.0 * jnp.log(x) - x, lower=0.0)


def _log_normal(x, m, s):
    return -0.5 * ((x - m) / s) ** 2 - jnp.log(s) - 0.5 * math.log(2 * math.pi)


def test_density_the_rule_does_not_integrate_to_one_is_rejected():
    # Each gave wrong numbers silently before (the README's quadrature limits): N(30, 1)
    # left at centre 0 integrates to 0.596 on its rule (Chernoff information against
    # N(30.25, 1): 0.058 for 0.03125); N(0, 1e-6) at scale 1 to 1 + 5e-6; a Laplace with its
    # kink at 1 and no breakpoint there to 1 + 2e-4; an unnormalised log_prob to 2.
    bad = [
        (lambda: jd.Density(lambda x: _log_normal(x, 30.0, 1.0)), r"to 0\.596"),
        (lambda: jd.Density(lambda x: _log_normal(x, 0.0, 1e-6)), r"to 1\.00000"),
        (lambda: jd.Density(lambda x: -jnp.abs(x - 1.0) - math.log(2.0)), r"to 1\.000"),
        (lambda: jd.Density(lambda x: _log_normal(x, 0.0, 1.0) + math.log(2.0)), r"to 2, not 1"),
        (  # a batch: the worst element is named
            lambda: jd.Density(
                lambda x, m: _log_normal(x, m, 1.0), params=jnp.asarray([0.0, 30.0, 1.0])
            ),
            r"to 0\.596.*\(batch index \(1,\)\)",
        ),
    ]
    for make, where in bad:
        with pytest.raises(
            ValueError, match=rf"^Density: the quadrature rule integrates exp\(log_prob\) {where}"
        ):
            make()
    # the same densities, described to the rule, are accepted
    jd.Density(lambda x: _log_normal(x, 30.0, 1.0), centre=30.0)
    jd.Density(lambda x: _log_normal(x, 0.0, 1e-6), scale=1e-6)
    jd.Density(lambda x: -jnp.abs(x - 1.0) - math.log(2.0), breakpoints=[1.0])
    jd.Density(
        lambda x, m: _log_normal(x, m, 1.0),
        params=jnp.asarray([0.0, 30.0]),
        centre=jnp.asarray([0.0, 30.0]),
    )
    # under jit the parameters are traced: no check (nothing to evaluate)
    jax.jit(lambda m: jd.Density(lambda x, m: _log_normal(x, m, 1.0), params=m).centre)(30.0)


def test_density_log_prob_of_the_wrong_shape_or_type_is_named():
    # (n, 1) for x of shape (n,): the constructor's mass check reported "integrates
    # exp(log_prob) to 3e12"; under jit (no check) JAX's unnamed shape errors, and a while
    # loop's carry TypeError from jd.chernoff
    def column(x, m):
        return _log_normal(x, m, 1.0)[..., None]

    shape = r"^Density: log_prob returned shape \(\d+, 1\) for x of shape \(\d+,\)"
    with pytest.raises(ValueError, match=shape):
        jd.Density(lambda x: column(x, 0.0))
    with pytest.raises(ValueError, match=shape):  # (raised while tracing: no compile)
        jax.jit(lambda m: jd.kl(jd.Density(column, params=m), jd.Gaussian(0.0, 1.0)))(0.2)
    for out, what in ((None, "NoneType"), (object(), "object"), (1j, "dtype complex")):
        with pytest.raises(
            TypeError, match=f"^Density: log_prob must return a real array, got {what}"
        ):
            jd.Density(lambda x, out=out: out)
    # a constant (a uniform density) broadcasts: accepted
    jd.Density(lambda x: -math.log(2.0), lower=-1.0, upper=1.0)


def test_density_log_prob_reduced_over_x_is_named():
    # a reduction over x broadcasts, (n,) -> (1,) or (): under jit and vmap KL of the
    # density vs N(0, 1) was 1 or inf (jd.chernoff 0, "converged"); the constructor said
    # "integrates exp(log_prob) to 0" or "to 3e12"
    reduced = (
        lambda x: jnp.sum(_log_normal(x, 0.0, 1.0), -1, keepdims=True),
        lambda x: jnp.sum(_log_normal(x, 0.0, 1.0), -1),
        lambda x: _log_normal(x, 0.0, 1.0)[..., :1],
    )
    shape = r"^Density: log_prob returned shape \((1,)?\) for x of shape \(\d+,\), computed from x"
    for f in reduced:
        with pytest.raises(ValueError, match=shape):
            jd.Density(f)
        with pytest.raises(ValueError, match=shape):  # (raised while tracing: no compile)
            jax.eval_shape(lambda m, f=f: jd.kl(jd.Density(lambda x: f(x) + m), jd.Gaussian()), 0.0)
    # constant in x, from batched params or a closure: accepted under jit, vmap and grad
    tri = jd.Density(lambda x: jnp.log(2.0 * x), lower=0.0, upper=1.0)

    def uniform(w):
        return jd.Density(lambda x, w: -jnp.log(w), params=w, lower=0.0, upper=1.0)

    jax.eval_shape(lambda w: jd.kl(tri, uniform(w)), jnp.ones(2))
    jax.eval_shape(jax.vmap(lambda w: jd.tv(tri, uniform(w))), jnp.ones(2))
    jax.eval_shape(jax.grad(lambda w: jd.chernoff(tri, uniform(w)).information), 1.0)
    closure = jax.grad(
        lambda w: (
            jd.chernoff(tri, jd.Density(lambda x: -jnp.log(w), lower=0.0, upper=1.0)).information
        )
    )
    jax.eval_shape(closure, 1.0)


def test_density_infinite_at_its_centre_is_accepted():
    # Gamma(1/2) on [0, inf), its centre left at the bound 0, and |x|^(-1/2)/4 on [-1, 1]:
    # both normalised and resolved by the rule, both refused ("integrates exp(log_prob) to
    # nan": the empty piece between the rule's two copies of the centre summed -inf + inf)
    from jaxdp.kernels import quadrature

    gamma_half = jd.Density(lambda x: -0.5 * jnp.log(x) - x - 0.5 * math.log(math.pi), lower=0.0)
    spike = jd.Density(lambda x: -0.5 * jnp.log(jnp.abs(x)) - math.log(4.0), lower=-1.0, upper=1.0)
    # what the constructor checked (no new compile): measured 0 and -3e-9 (the rule's
    # tanh-sinh nodes stop ~1e-17 short of the singular end: sqrt(1e-17) of the mass)
    assert abs(float(quadrature.log_mass(gamma_half))) < 1e-14
    assert abs(float(quadrature.log_mass(spike))) < 1e-8


@pytest.mark.parametrize(
    "make, good, bad",
    [
        (lambda x: (jd.Laplace(0.0, x), jd.Laplace(1.0, 2.0)), 1.0, (-1.0, 0.0, _NAN, math.inf)),
        (lambda x: (jd.Gaussian(0.0, x), jd.Gaussian(1.0, 2.0)), 1.0, (-1.0, 0.0, _NAN, math.inf)),
        (
            lambda x: (jd.DiscreteLaplace(0.0, x), jd.DiscreteLaplace(1.0, 2.0)),
            1.0,
            (-1.0, 0.0, _NAN, math.inf),
        ),
        (lambda x: (jd.Laplace(x, 1.0), jd.Laplace(1.0, 2.0)), 0.0, (_NAN, math.inf)),
        (lambda x: (jd.DiscreteLaplace(x, 1.0), jd.DiscreteLaplace(1.0, 2.0)), 0.0, (0.5,)),
        (
            lambda x: (jd.Categorical(jnp.stack([x, 0.5])), jd.Categorical(jnp.array([0.4, 0.6]))),
            0.5,
            (_NAN, -0.5, 0.2, 1.5),  # NaN, a negative mass, sums 0.7 and 2
        ),
        (
            lambda x: (
                jd.Product(jd.Laplace(0.0, 1.0), jd.Categorical(jnp.stack([x, 0.5]))),
                jd.Product(jd.Laplace(1.0, 1.0), jd.Categorical(jnp.array([0.4, 0.6]))),
            ),
            0.5,
            (_NAN, 0.2),
        ),
    ],
    ids=["laplace", "gaussian", "discrete-laplace", "loc", "discrete-loc", "cat", "product"],
)
def test_invalid_parameters_under_jit_give_nan(make, good, bad):
    # the constructors' checks cannot run on traced values; the kernels returned finite
    # numbers for some invalid pairs (Laplace TV 0 at a negative scale, discrete Laplace TV
    # 5.67, categorical KL 0.5 with a NaN mass, chernoff 0.29 "converged")
    fns = {
        "kl": jd.kl,
        "tv": jd.tv,
        "hellinger": jd.hellinger,
        "bhattacharyya": jd.bhattacharyya,
        "renyi": lambda P, Q: jd.renyi(P, Q, 2.0),
        "log_bc": lambda P, Q: jd.log_bc(P, Q, 0.3),
        "chernoff": lambda P, Q: jd.chernoff(P, Q).information,
        "converged": lambda P, Q: jd.chernoff(P, Q).converged,
        # (alpha and the certificate were finite; gradients were 0: QA pass)
        "alpha": lambda P, Q: jd.chernoff(P, Q).alpha,
        "derivative": lambda P, Q: jd.chernoff(P, Q).derivative,
    }
    if isinstance(make(good)[0], jd.Product):
        del fns["tv"]  # no TV kernel for this product

    def values(x):
        out = {name: fn(*make(x)) for name, fn in fns.items()}
        out["gradient"] = jax.grad(lambda x: jd.chernoff(*make(x)).information + jd.kl(*make(x)))(x)
        return out

    # every function in one compiled program (one compile per case)
    f = jax.jit(values)
    at_good = f(good)
    at_bad = [f(x) for x in bad]
    for name in [*fns, "gradient"]:
        if name == "converged":
            assert bool(at_good[name]) and not any(bool(r[name]) for r in at_bad)
            continue
        assert np.isfinite(float(at_good[name])), name
        assert all(math.isnan(float(r[name])) for r in at_bad), (name, at_bad)


def test_tv_derivative_of_very_wide_gaussians():
    # TV(N(0, s), N(1, s)) = 2 Phi(1/(2s)) - 1 ~ 1/(sqrt(2 pi) s); d/dlog s = -TV there. For
    # s ~1e154+ the derivative was nan (squares of 1/s underflowed inside jnp.hypot, c/q, r)
    def f(x):
        return jd.tv(jd.Gaussian(0.0, jnp.exp(x)), jd.Gaussian(1.0, jnp.exp(x)))

    jvp = jax.jit(lambda x: jax.jvp(f, (x,), (1.0,)))
    for s in (1e154, 1e160, 1e200):
        value, slope = jvp(math.log(s))
        assert abs(float(slope) + float(value)) <= 1e-12 * float(value)


@pytest.mark.parametrize(
    "make",
    [
        lambda s: (jd.Gaussian(0.0, s), jd.Gaussian(0.0, 1.0)),
        lambda s: (jd.Laplace(0.0, s), jd.Laplace(0.0, 1.0)),
        lambda s: (jd.DiscreteLaplace(0.0, s), jd.DiscreteLaplace(0.0, 1.0)),
        lambda s: (
            jd.Categorical(jnp.stack([0.5 * s, 1.0 - 0.5 * s])),
            jd.Categorical(jnp.array([0.5, 0.5])),
        ),
    ],
    ids=["gaussian", "laplace", "discrete-laplace", "categorical"],
)
def test_gradients_at_identical_pairs_are_zero_not_nan(make):
    # Hellinger and TV are not differentiable at P == Q (|theta - theta0| like); their
    # derivative was nan there (sqrt'(0) * 0; Gaussian TV's root of a zero discriminant).
    # Both are minimal at P == Q, so 0 is the subgradient to report.
    def both(s):
        P, Q = make(s)
        return jnp.stack([jd.hellinger(P, Q), jd.tv(P, Q)])

    np.testing.assert_array_equal(jax.jit(jax.jacrev(both))(1.0), [0.0, 0.0])


def _mp_log_ratio_variance(logp, logq, points):
    """Var_P[log p/q] by 40-digit quadrature (``points``: breakpoints) or summation
    (``points`` None: ``logp``/``logq`` are lists of log masses)."""
    with mp.workdps(40):
        if points is None:
            ps = [mp.exp(lp) for lp in logp]
            m1 = mp.fsum(p * (lp - lq) for p, lp, lq in zip(ps, logp, logq, strict=True))
            m2 = mp.fsum(p * (lp - lq) ** 2 for p, lp, lq in zip(ps, logp, logq, strict=True))
        else:

            def moment(k):
                return mp.quad(lambda x: mp.exp(logp(x)) * (logp(x) - logq(x)) ** k, points)

            m1, m2 = moment(1), moment(2)
        return m2 - m1 * m1


def test_renyi_order_derivative_at_one_is_half_the_log_ratio_variance():
    # D_l = log C_l/(l - 1) = KL + Var_P[log p/q] (l - 1)/2 + ...: at order 1 the value is
    # the KL branch, whose derivative in the order was 0 (every family). Hand-written
    # second derivatives (Laplace, Gaussian; discrete Laplace's are tested equal to
    # autodiff in test_discrete_laplace_kernel.py) and autodiff (categorical, quadrature).
    lap, gau = mp_refs._lap_logpdf, mp_refs._gau_logpdf
    pts = [-mp.inf, *mp_refs._split_points(0, 1, 1, 1.5), mp.inf]
    p, q = [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]
    cases = [
        (
            jd.Laplace(0.0, 1.0),
            jd.Laplace(1.0, 1.5),
            lambda x: lap(x, 0, 1),
            lambda x: lap(x, 1, 1.5),
        ),
        (
            jd.Gaussian(0.0, 1.0),
            jd.Gaussian(1.0, 1.5),
            lambda x: gau(x, 0, 1),
            lambda x: gau(x, 1, 1.5),
        ),
        # quadrature path: orders above 1 diverge here (a Gaussian Q's tails), so this is
        # the derivative from below
        (
            jd.Laplace(0.0, 1.0),
            jd.Gaussian(1.0, 1.5),
            lambda x: lap(x, 0, 1),
            lambda x: gau(x, 1, 1.5),
        ),
        (
            jd.Categorical(jnp.asarray(p)),
            jd.Categorical(jnp.asarray(q)),
            [mp.log(v) for v in p],
            [mp.log(v) for v in q],
        ),
    ]
    for P, Q, logp, logq in cases:
        var = _mp_log_ratio_variance(logp, logq, None if isinstance(logp, list) else pts)
        # (jitted: eager grad compiles every nested jit on its own, ~50 programs here)
        d_order = jax.jit(jax.grad(lambda o, P=P, Q=Q: jd.renyi(P, Q, o)))(1.0)
        assert _rel(d_order, float(var) / 2) < 1e-12, (type(P).__name__, d_order, var)
        if isinstance(P, jd.Gaussian):  # the parameter gradients are the KL branch's
            d_q = jax.jit(jax.grad(lambda Q, P=P: jd.renyi(P, Q, 1.0)))(Q)
            want = jax.jit(jax.grad(lambda Q, P=P: jd.kl(P, Q)))(Q)
            assert _rel(d_q.loc, want.loc) < 1e-14 and _rel(d_q.scale, want.scale) < 1e-14


def test_renyi_order_derivative_at_one_at_extreme_scale_ratios():
    # The curvature at 1 overflowed for Gaussian scale ratios ~1e155+ (nan in the value's
    # own parameter gradient, also at other orders once the order-1 branch is traced in,
    # and a slope of 0); it is now taken from the mirrored pair, as the solver does, and
    # is a constant to the parameter gradient. Where KL or Var_P[log p/q] is infinite, the
    # slope is +inf, not 0.
    def f(s, order):
        return jd.renyi(jd.Gaussian(0.0, s[0]), jd.Gaussian(0.0, s[1]), order)

    s = jnp.asarray([1.0, 1e160])
    kl_grad = np.asarray(
        jax.jit(jax.grad(lambda s: jd.kl(jd.Gaussian(0.0, s[0]), jd.Gaussian(0.0, s[1]))))(s)
    )
    for order in (0.5, 1.0):  # traced: the order-1 branch is compiled in
        got = np.asarray(jax.jit(jax.grad(f))(s, order))
        want = kl_grad if order == 1.0 else np.array([-1.0, 1e-160])
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # (1 - s1^2/s2^2)^2/4 for equal centres
    slope = jax.jit(jax.grad(lambda o, s: f(s, o)))
    assert _rel(slope(1.0, s), 0.25) < 1e-12
    assert slope(1.0, jnp.asarray([1.0, 1e-100])) == np.inf
    P, Q = (
        jd.Categorical(jnp.asarray([0.5, 0.5, 0.0])),
        jd.Categorical(jnp.asarray([0.0, 0.4, 0.6])),
    )
    assert jax.jit(jax.grad(lambda o: jd.renyi(P, Q, o)))(1.0) == np.inf  # KL = inf


def test_kl_of_heavy_tails_diverges_where_the_integral_does():
    # KL(P || Q) with P's tails heavier than log q can pay for: the integrand does not decay
    # (Cauchy vs Laplace ~ 1/(pi x), vs Gaussian ~ 1/(2 pi), Student t(1.5) vs Gaussian ~
    # x^-0.5); the quadrature summed it up to ~1e12 scales out (16.6 and 1.2e12, not inf)
    def cauchy(g):
        return jd.Density(lambda x, g: -jnp.log(jnp.pi * g) - jnp.log1p((x / g) ** 2), params=g)

    def student(nu):
        return jd.Density(lambda x, nu: jax.scipy.stats.t.logpdf(x, nu), params=nu)

    @jax.jit
    def kls(nu):
        c1, t, g, lap = cauchy(1.0), student(nu), jd.Gaussian(0.0, 1.0), jd.Laplace(0.0, 1.0)
        return jnp.stack([jd.kl(c1, lap), jd.kl(c1, g), jd.kl(t, g), jd.kl(c1, cauchy(2.0))])

    assert np.all(np.isinf(np.asarray(kls(1.5))[:3]))
    finite = np.asarray(kls(3.0))
    # convergent heavy tails stay finite: t(3) has variance 3, and KL(Cauchy(1) || Cauchy(2))
    # = log(9/8)
    assert np.all(np.isinf(finite[:2]))
    with mp.workdps(30):
        nu = mp.mpf(3)

        def logp(x):
            c = mp.loggamma((nu + 1) / 2) - mp.loggamma(nu / 2) - mp.log(nu * mp.pi) / 2
            return c - (nu + 1) / 2 * mp.log1p(x * x / nu)

        want = mp.quad(
            lambda x: mp.exp(logp(x)) * (logp(x) - mp_refs._gau_logpdf(x, 0, 1)),
            [-mp.inf, 0, mp.inf],
        )
    # (measured 1.3e-12 and 4e-13: both integrands fall off like x^-2, and the rule stops
    # ~1e12 scales out)
    assert _rel(finite[2], float(want)) < 1e-11
    assert _rel(finite[3], math.log(9 / 8)) < 1e-11


def test_kl_and_tv_of_bounded_densities_that_vanish_at_a_bound():
    # Pieces of zero width (ends clipped to a bound) put nodes on the bound with weight 0,
    # where Q's density vanishes: 0 * inf was nan. KL(U(0, 1) || 2x) = 1 - log 2,
    # KL(Exp(1) || Gamma(2, 1)) = Euler's gamma, TV(Exp(1), Gamma(2, 1)) = 1/e.
    uniform = jd.Density(lambda x: jnp.zeros_like(x), lower=0.0, upper=1.0, centre=0.5, scale=0.25)
    ramp = jd.Density(lambda x: jnp.log(2 * x), lower=0.0, upper=1.0, centre=0.5, scale=0.25)
    expo = jd.Density(lambda x: -x, lower=0.0)
    gamma2 = jd.Density(lambda x: jnp.log(x) - x, lower=0.0)
    # (measured 5e-16, 8e-15: the log singularity of Gamma(2)'s density at 0)
    assert _rel(jd.kl(uniform, ramp), 1 - math.log(2)) < 1e-13
    assert _rel(jd.kl(expo, gamma2), float(mp.euler)) < 1e-13
    assert _rel(jd.tv(expo, gamma2), math.exp(-1)) < 1e-13
    assert _rel(jd.tv(uniform, ramp), 0.25) < 1e-13


def test_order_derivative_where_the_divergence_is_infinite():
    # D_5 of Lap(0, 1) vs Lap(0, 0.3) diverges (5/1 <= 4/0.3), as does every order up to the
    # next finite one: the order derivative was -inf (quotient rule on inf); it is 0, as the
    # parameter derivative is there (found by a QA pass)
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(0.0, 0.3)
    assert float(jd.renyi(P, Q, 5.0)) == np.inf
    assert float(jax.grad(lambda o: jd.renyi(P, Q, o))(5.0)) == 0.0
    A, B = jd.Categorical(jnp.array([1.0, 0.0])), jd.Categorical(jnp.array([0.0, 1.0]))
    assert float(jd.renyi(A, B, 0.5)) == np.inf  # disjoint supports, below 1
    assert float(jax.grad(lambda o: jd.renyi(A, B, o))(0.5)) == 0.0
    # finite orders keep their derivative: d/dl [L(l)/(l - 1)] by central differences
    h = 1e-6
    fd = (jd.renyi(P, Q, 1.3 + h) - jd.renyi(P, Q, 1.3 - h)) / (2 * h)
    np.testing.assert_allclose(jax.grad(lambda o: jd.renyi(P, Q, o))(1.3), fd, rtol=1e-8)


def test_quadrature_path_empty_batch():
    # the rule's nodes were reshaped with a -1 that JAX cannot infer for an empty batch:
    # every divergence and log_bc of a Laplace-vs-Gaussian pair raised ZeroDivisionError
    P, Q = jd.Laplace(jnp.zeros(0), 1.0), jd.Gaussian(0.0, 1.0)
    for value in (
        jd.kl(P, Q),
        jd.tv(P, Q),
        jd.log_bc(P, Q, 0.3),
        jd.renyi(P, Q, 2.0),
        jd.hellinger(P, Q),
    ):
        assert value.shape == (0,) and value.dtype == jnp.float64


def test_density_empty_batch():
    # the constructor's mass check took the argmax of no masses (ValueError from numpy)
    D = jd.Density(lambda x, m: _log_normal(x, m, 1.0), params=jnp.zeros(0))
    assert D.batch_shape == (0,)
    assert jd.kl(D, jd.Gaussian(0.0, 1.0)).shape == (0,)
    assert jd.chernoff(D, jd.Gaussian(0.0, 1.0)).information.shape == (0,)


def test_density_breakpoints_of_different_shapes_broadcast():
    # documented as "broadcastable to the batch", but stacked as given: a float next to an
    # array raised jnp.stack's "All input arrays must have the same shape"
    D = jd.Density(
        lambda x, m: -jnp.abs(x - m) - math.log(2.0),
        params=jnp.asarray([0.0, 1.0]),
        breakpoints=[jnp.asarray([0.0, 1.0]), 0.5],
        centre=jnp.asarray([0.0, 1.0]),
    )
    np.testing.assert_array_equal(D.breakpoints, [[0.0, 0.5], [1.0, 0.5]])
    with pytest.raises(ValueError, match=r"^Density: breakpoints: batch shapes \(2,\), \(3,\)"):
        jd.Density(lambda x: -jnp.abs(x) - math.log(2.0), breakpoints=[jnp.zeros(2), jnp.ones(3)])


def test_density_mismatched_batch_shapes_name_the_arguments():
    # raised numpy's unnamed "shape mismatch: objects cannot be broadcast to a single shape"
    def log_prob(x, m):
        return _log_normal(x, m, 1.0)

    for kwargs in (
        {"centre": jnp.zeros(2)},
        {"scale": jnp.ones(2)},
        {"breakpoints": [jnp.zeros(2)]},
    ):
        with pytest.raises(
            ValueError, match=r"^Density: params, breakpoints, centre and scale: batch shapes"
        ):
            jd.Density(log_prob, params=jnp.zeros(3), **kwargs)


def test_categorical_repr_of_non_array_leaves():
    # jax.tree_util.tree_map(jnp.shape, ...) and jax.eval_shape give distributions whose
    # leaves are not arrays: Categorical's repr took their exp and raised TypeError
    shapes = jax.tree_util.tree_map(jnp.shape, jd.Product(jd.Laplace(), jd.Categorical([0.5, 0.5])))
    assert repr(shapes) == "Product(Laplace(loc=(), scale=()), Categorical(log_probs=(2,)))"
    abstract = jax.eval_shape(lambda: jd.Categorical(jnp.asarray([0.5, 0.5])))
    assert repr(abstract).startswith("Categorical(log_probs=ShapeDtypeStruct(shape=(2,)")
    assert repr(jd.Categorical([0.5, 0.5])).startswith("Categorical(probs=Array([0.5, 0.5]")


def test_density_breakpoints_zero_dimensional_array_is_named():
    # a 0-d array has __len__ (raising) and got past the sequence check: numpy's or JAX's
    # unnamed "iteration over a 0-d array"
    for bp in (jnp.asarray(0.5), np.asarray(0.5)):
        with pytest.raises(TypeError, match=r"^Density: breakpoints must be a sequence"):
            jd.Density(lambda x: -jnp.abs(x - 0.5) - math.log(2.0), breakpoints=bp)


def test_invalid_stacked_product_components_under_jit_give_nan():
    # chernoff masked invalid parameters by the grouped pair, whose stacks of same-family
    # components (jaxdp.kernels.stacked) have no checks: a NaN or negative categorical mass,
    # or a fractional discrete-Laplace location, in a product with another component of
    # its family gave a finite information, "converged" (0.357 at p = -0.5; 0.162)
    def solve(p, m):
        cat = jd.chernoff(
            jd.Product(jd.Categorical(jnp.stack([p, 1 - p])), jd.Categorical([0.5, 0.5])),
            jd.Product(jd.Categorical([0.3, 0.7]), jd.Categorical([0.4, 0.6])),
        )
        dl = jd.chernoff(
            jd.Product(jd.DiscreteLaplace(m, 1.0), jd.DiscreteLaplace(0.0, 1.0)),
            jd.Product(jd.DiscreteLaplace(1.0, 1.0), jd.DiscreteLaplace(1.0, 1.0)),
        )
        return cat, dl

    f = jax.jit(solve)
    for res in f(0.2, 0.0):
        assert np.isfinite(float(res.information)) and bool(res.converged)
    for p, m in ((-0.5, 0.5), (_NAN, 0.5)):
        for res in f(p, m):
            assert not bool(res.converged)
            for x in (res.information, res.alpha, res.derivative):
                assert math.isnan(float(x))


def test_float32_density_whose_log_prob_promotes():
    # np.log(2 * np.pi) is a strong float64 under x64: the log-density of a float32 density
    # came out float64, and chernoff's loop raised a while_loop TypeError (float32 state,
    # float64 update); the divergences returned float64 (one compile: chernoff only)
    P = jd.Density(
        lambda x, m: -0.5 * (x - m) ** 2 - 0.5 * np.log(2 * np.pi), params=np.float32(0.0)
    )
    Q = jd.Gaussian(np.float32(0.5), np.float32(1.0))
    res = jd.chernoff(P, Q)
    assert res.information.dtype == jnp.float32 and bool(res.converged)
    np.testing.assert_allclose(res.information, 0.03125, rtol=1e-5)
    # (integer points are not truncated to integers)
    np.testing.assert_allclose(P.log_prob(np.arange(2)), [-0.9189385, -1.4189385], rtol=1e-6)

"""Tests for :mod:`jaxdp.conversions`.

Two kinds of evidence: (1) each closed form against mpmath at 40 digits (the n-fold TV against a
literal binomial sum); (2) the extremal facts are *shown*, not assumed: random eps-DP pairs
(generated in numpy, with an independent numpy Chernoff solver) never exceed the bounds, and
binary randomized response attains them.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from autodiff_refs import assert_nan_gradients_exactly_where_invalid
from jax.test_util import check_grads
from scipy.special import logsumexp

import jaxdp as jd
from jaxdp import conversions as cv
from jaxdp import paper
from jaxdp.membership import membership_bounds

DPS = 40
EPS = np.logspace(-10, 4, 57)  # the documented range of the closed forms


def ev(f, *args, dtype=np.float64, **kwargs):
    """Call ``f`` on broadcast, flattened args padded to length 64 (one compile per dtype).

    The padding value 1.0 is legal for every argument (eps, c, delta, alpha, n).
    """
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype) for a in args])
    shape, size = arrays[0].shape, arrays[0].size
    assert size <= 64
    flat = [np.pad(a.ravel(), (0, 64 - size), constant_values=1.0) for a in arrays]
    out = f(*flat, **kwargs)
    assert out.dtype == dtype
    return np.asarray(out)[:size].reshape(shape)


def mp_map(fn, *arrays):
    arrays = np.broadcast_arrays(*[np.asarray(a, float) for a in arrays])
    out = np.empty(arrays[0].shape)
    with mp.workdps(DPS):
        for idx in np.ndindex(out.shape):
            out[idx] = float(fn(*[mp.mpf(float(a[idx])) for a in arrays]))
    return out


def mp_logcosh(e):
    return mp.log(mp.cosh(e / 2))


# -- closed forms against mpmath ---------------------------------------------------------------

# (function, reference, float64 rtol, measured float32 rtol documented in the docstring)
CLOSED = {
    "max_chernoff_eps_dp": (cv.max_chernoff_eps_dp, mp_logcosh, 1e-15, 3e-7),
    "max_kl_eps_dp": (cv.max_kl_eps_dp, lambda e: e * mp.tanh(e / 2), 1e-15, 3e-7),
    "max_tv_chernoff": (cv.max_tv_chernoff, lambda c: mp.sqrt(1 - mp.exp(-2 * c)), 1e-15, 3e-7),
}


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_closed_forms_match_mpmath(name):
    f, ref, rtol64, rtol32 = CLOSED[name]
    expected = mp_map(ref, EPS)
    np.testing.assert_allclose(ev(f, EPS), expected, rtol=rtol64, atol=0)
    np.testing.assert_allclose(ev(f, EPS, dtype=np.float32), expected, rtol=rtol32, atol=0)


@pytest.mark.parametrize("n", [1, 7, 10**6])
def test_chernoff_bound_matches_mpmath(n):
    expected = mp_map(lambda e: mp.sqrt(1 - mp.sech(e / 2) ** (2 * n)), EPS)
    f = cv.max_tv_eps_dp_chernoff_bound
    np.testing.assert_allclose(ev(f, EPS, n=n), expected, rtol=1e-15, atol=0)
    np.testing.assert_allclose(ev(f, EPS, n=n, dtype=np.float32), expected, rtol=1e-6, atol=0)


def test_max_neg_log_bc_and_eps_delta_match_mpmath():
    e, a = np.logspace(-6, math.log10(50), 12)[:, None], np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    ref = mp_map(lambda x, s: mp.log((1 + mp.exp(x)) / (mp.exp(s * x) + mp.exp((1 - s) * x))), e, a)
    # absolute accuracy a few ulp of log cosh(eps/2) (documented); relative where not near 0/1
    scale = mp_map(mp_logcosh, e)
    np.testing.assert_allclose(ev(cv.max_neg_log_bc_eps_dp, e, a), ref, rtol=1e-13, atol=0)
    assert np.all(np.abs(ev(cv.max_neg_log_bc_eps_dp, e, a) - ref) <= 1e-15 * scale)
    d = np.array([0.0, 1e-9, 0.1, 1.0])
    ref = mp_map(lambda x, s: s + (1 - s) * mp.tanh(x / 2), e, d)
    np.testing.assert_allclose(ev(cv.max_tv_eps_delta_dp, e, d), ref, rtol=1e-15, atol=0)


def _mp_tv_rr(eps, n):
    """Literal TV of Bin(n, p) vs Bin(n, 1 - p): sum_k max(0, difference) (40 digits).

    For n = 1e4 only k > n/2 is summed: there the pmf ratio e^{(2k - n) eps} exceeds 1, and
    elsewhere the positive part is 0 (checked literally for the smaller n).
    """
    with mp.workdps(DPS):
        e = mp.mpf(eps)
        p = mp.exp(e) / (1 + mp.exp(e))
        q = 1 - p
        k0 = n // 2 + 1 if n > 1000 else 0
        b = mp.binomial(n, k0)
        total = mp.mpf(0)
        for k in range(k0, n + 1):
            total += max(0, b * (p**k * q ** (n - k) - q**k * p ** (n - k)))
            b = b * (n - k) / (k + 1)
        return float(total)


TV_EPS = np.array([1e-8, 1e-3, 0.5, 1.0, 5.0, 50.0])


def test_max_neg_log_bc_keeps_relative_accuracy_near_the_ends():
    # log cosh(eps/2) - log cosh((alpha - 1/2) eps) cancels as alpha -> 0 or 1: relative
    # error 5.9e-7 at (1, 1e-10), 1.0 (value 0) at (0.3, 1e-300); found by a QA pass
    eps = np.array([1.0, 2.0, 1e-10, 0.3, 40.0, 1e3, 1e-10])
    alpha = np.array([1e-10, 1 - 2**-30, 1e-30, 1e-300, 1e-12, 0.2, 1 - 2**-20])

    def ref(e, a):  # (700 digits: the terms are ~1 apart from values down to 1e-302)
        return mp.log((1 + mp.exp(e)) / (mp.exp(a * e) + mp.exp((1 - a) * e)))

    with mp.workdps(700):
        want = [float(ref(mp.mpf(e), mp.mpf(a))) for e, a in zip(eps, alpha, strict=True)]
    np.testing.assert_allclose(ev(cv.max_neg_log_bc_eps_dp, eps, alpha), want, rtol=1e-15)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000, 10_000])
def test_max_tv_eps_dp_matches_binomial_sum(n):
    eps = TV_EPS if n < 10_000 else TV_EPS[[0, 1, 5]]
    expected = np.array([_mp_tv_rr(e, n) for e in eps])
    np.testing.assert_allclose(ev(cv.max_tv_eps_dp, eps, n=n), expected, rtol=1e-14, atol=0)
    if n in (3, 10_000):  # float32: documented < 5e-7 for n <= 3, < 1e-6 for n <= 1e4
        got32 = ev(cv.max_tv_eps_dp, eps, n=n, dtype=np.float32)
        np.testing.assert_allclose(got32, expected, rtol=5e-7 if n == 3 else 1e-6, atol=0)


def test_float32_accuracy_on_a_dense_grid():
    # The documented float32 bounds, on 20001 float32 eps against float64 at the same
    # inputs (float64 is within 1e-14 of mpmath above). A QA pass found 7.6e-7 for
    # max_chernoff_eps_dp (documented < 3e-7: XLA's float32 sinh, squared) and 4.1e-7 for
    # max_tv_eps_dp at n = 2, 3 (documented < 3e-7 then).
    e32 = np.geomspace(1e-10, 1e4, 20001).astype(np.float32)
    e64 = e32.astype(np.float64)
    for f, rtol in (
        (cv.max_chernoff_eps_dp, 3e-7),
        (cv.max_kl_eps_dp, 3e-7),
        (cv.max_tv_chernoff, 3e-7),
        (lambda e: cv.max_tv_eps_dp(e, 2), 5e-7),
        (lambda e: cv.max_tv_eps_dp(e, 3), 5e-7),
    ):
        inr = slice(None) if rtol == 3e-7 else (e64 >= 1e-8) & (e64 <= 50)
        got, want = np.asarray(f(e32)), np.asarray(f(e64))
        np.testing.assert_allclose(got[inr], want[inr], rtol=rtol, atol=0)


@pytest.mark.parametrize("n", [1000, 10_000])
def test_max_tv_eps_dp_float32_on_a_dense_grid(n):
    # float64 is checked against mpmath above (1e-14); float32 documented < 1e-6 for n <= 1e4.
    # Regression (QA21 A4): x - fl(n p) in the pmf carried the rounding of p ~ 1/2, 1.36e-5
    # at n = 1e4, eps = 1.0857671e-4 (4.2e-6 at n = 1000); measured now 6.6e-7, 4.8e-7.
    eps = np.append(np.logspace(-8, math.log10(50), 63), 1.0857671e-4)
    eps = eps.astype(np.float32).astype(float)  # the same inputs in both dtypes
    want = ev(cv.max_tv_eps_dp, eps, n=n)
    np.testing.assert_allclose(ev(cv.max_tv_eps_dp, eps, n=n, dtype=np.float32), want, rtol=1e-6)


def test_subnormal_arguments_are_not_flushed_to_zero():
    # Regression (QA21 A6): XLA:CPU flushes subnormal operands to zero, so these returned 0
    # where the true value is a normal number; now the leading terms come from the exactly
    # rescaled bits. References: sqrt(2c) and sqrt(n) eps/2 (the next terms are ~c, eps^2
    # relative), and for n-fold RR eps * E[(2K - n)_+], K ~ Bin(n, 1/2) (mpmath).
    with mp.workdps(DPS):
        mean = sum(mp.binomial(100, k) * (2 * k - 100) for k in range(51, 101)) / mp.mpf(2) ** 100
    cases = {  # dtype: (c for max_tv_chernoff, eps for the n = 1e6 bound, eps for n = 100 RR)
        np.float32: ([1e-40, 1e-38, 1.4e-45], 1e-40, 5e-39),
        np.float64: ([1e-310, 5e-324, 2e-308], 1e-310, 2e-308),
    }
    for dtype, (cs, eps_bound, eps_rr) in cases.items():
        rtol = 3e-7 if dtype == np.float32 else 1e-15
        cs = np.array(cs, dtype)
        got = ev(cv.max_tv_chernoff, cs, dtype=dtype)  # (ev: the compiled shapes of the module)
        np.testing.assert_allclose(got, np.sqrt(2 * cs.astype(float)), rtol=rtol)
        slope = jax.grad(cv.max_tv_chernoff)(cs[0])  # d sqrt(2c)/dc = 1/sqrt(2c)
        np.testing.assert_allclose(slope, 1 / np.sqrt(2 * float(cs[0])), rtol=rtol)
        e = np.array([eps_bound], dtype)
        got = ev(cv.max_tv_eps_dp_chernoff_bound, e, dtype=dtype, n=10**6)
        np.testing.assert_allclose(got, e.astype(float) * 1e3 / 2, rtol=rtol)
        e = np.array([eps_rr], dtype)
        got = ev(cv.max_tv_eps_dp, e, dtype=dtype, n=100)
        np.testing.assert_allclose(got, e.astype(float) * float(mean), rtol=2 * rtol)


def test_max_tv_eps_dp_array_n_and_limits():
    n = np.array([1, 2, 10, 101])
    got = np.asarray(cv.max_tv_eps_dp(TV_EPS[:, None], n=n))
    assert got.shape == (TV_EPS.size, n.size)
    for j, nj in enumerate(n):
        np.testing.assert_allclose(got[:, j], ev(cv.max_tv_eps_dp, TV_EPS, n=int(nj)), rtol=1e-14)
    assert np.array_equal(ev(cv.max_tv_eps_dp, [0.0, np.inf], n=5), [0.0, 1.0])
    np.testing.assert_allclose(ev(cv.max_tv_eps_dp, TV_EPS, n=1), np.tanh(TV_EPS / 2), rtol=1e-15)
    # an empty n raised numpy's "zero-size array to reduction operation minimum" (QA pass)
    empty = cv.max_tv_eps_dp(np.ones((2, 1)), n=np.zeros((0,), int))
    assert empty.shape == (2, 0) and empty.dtype == np.float64
    # a tuple of eps, as the other conversions take (was "Cannot determine dtype")
    np.testing.assert_array_equal(cv.max_tv_eps_dp((0.0, math.inf), n=5), [0.0, 1.0])


# -- extremal facts, shown on random pairs -------------------------------------------------------


def np_chernoff(p, q, iters=90):
    """Chernoff information of rows of (p, q) by golden section on the concave -log C_a."""
    lp, lq = np.log(p), np.log(q)

    def f(a):
        return -logsumexp(a[:, None] * lp + (1 - a[:, None]) * lq, axis=-1)

    lo, hi = np.zeros(len(p)), np.ones(len(p))
    g = (math.sqrt(5) - 1) / 2
    for _ in range(iters):
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
        left = f(c) > f(d)
        hi, lo = np.where(left, d, hi), np.where(left, lo, c)
    return np.maximum(f((lo + hi) / 2), 0.0)


def np_kl(p, q):
    return np.sum(p * np.log(p / q), axis=-1)


def np_tv(p, q):
    return 0.5 * np.sum(np.abs(p - q), axis=-1)


def random_dp_pairs(rng, eps, num, k):
    """Random pairs with max |log p/q| <= eps, most of them *on* the boundary.

    Draw two random probability vectors and mix both with the uniform law, with the smallest
    weight (bisection) that makes the pair eps-DP; a third of the pairs get a random larger
    weight (strictly inside).
    """
    p, q = rng.dirichlet(np.full(k, 0.3), size=(2, num))
    p, q = np.maximum(p, 1e-300), np.maximum(q, 1e-300)

    def mix(w):
        w = w[:, None]
        return (1 - w) * p + w / k, (1 - w) * q + w / k

    def ok(w):
        a, b = mix(w)
        return np.max(np.abs(np.log(a / b)), axis=-1) <= eps

    lo, hi = np.zeros(num), np.ones(num)
    for _ in range(60):
        mid = (lo + hi) / 2
        good = ok(mid)
        hi, lo = np.where(good, mid, hi), np.where(good, lo, mid)
    w = np.where(np.arange(num) % 3 == 0, hi + (1 - hi) * rng.random(num), hi)
    assert np.all(ok(w))
    return mix(w)


def randomized_response(eps):
    p = math.exp(eps) / (1 + math.exp(eps))
    return np.array([[p, 1 - p]]), np.array([[1 - p, p]])


DP_EPS = [0.01, 0.1, 0.5, 1.0, 3.0, 10.0]
TOL = 1e-15  # absolute rounding of the numpy references (logsumexp of O(1) terms)


@pytest.mark.parametrize("eps", DP_EPS)
def test_random_dp_pairs_never_exceed_and_rr_attains(eps):
    rng = np.random.default_rng(int(eps * 1000))
    lc, kl, tv = (
        float(ev(f, eps)) for f in (cv.max_chernoff_eps_dp, cv.max_kl_eps_dp, cv.max_tv_eps_dp)
    )
    alphas = np.array([0.1, 0.5, 0.9])
    worst_bc = ev(cv.max_neg_log_bc_eps_dp, eps, alphas)
    for k in (2, 3, 6):
        p, q = random_dp_pairs(rng, eps, 300, k)
        assert np.all(np_chernoff(p, q) <= lc * (1 + 1e-9) + TOL)
        assert np.all(np_kl(p, q) <= kl * (1 + 1e-12) + TOL)
        assert np.all(np_kl(q, p) <= kl * (1 + 1e-12) + TOL)
        assert np.all(np_tv(p, q) <= tv * (1 + 1e-12) + TOL)
        neg_log_bc = -logsumexp(
            alphas[:, None, None] * np.log(p) + (1 - alphas[:, None, None]) * np.log(q), axis=-1
        )
        assert np.all(neg_log_bc <= worst_bc[:, None] * (1 + 1e-12) + TOL)
    p, q = randomized_response(eps)  # attained
    np.testing.assert_allclose(np_chernoff(p, q), lc, rtol=1e-9, atol=TOL)
    np.testing.assert_allclose(np_kl(p, q), kl, rtol=1e-12, atol=TOL)
    np.testing.assert_allclose(np_tv(p, q), tv, rtol=1e-12)
    neg_log_bc = -logsumexp(
        alphas[:, None] * np.log(p) + (1 - alphas[:, None]) * np.log(q), axis=-1
    )
    np.testing.assert_allclose(neg_log_bc, worst_bc, rtol=1e-12, atol=TOL)
    # ... and the eps-DP constraint is what makes the bound hold: RR at 1.1 eps exceeds it.
    p, q = randomized_response(1.1 * eps)
    assert np_chernoff(p, q)[0] > lc and np_tv(p, q)[0] > tv


def test_tv_from_chernoff_is_sharp_on_random_pairs():
    rng = np.random.default_rng(7)
    p, q = np.maximum(rng.dirichlet(np.full(4, 0.5), size=(2, 2000)), 1e-300)
    c = np_chernoff(p, q)
    tv = np_tv(p, q)
    assert np.all(tv <= np.sqrt(-np.expm1(-2 * c)) + 1e-12)
    assert np.all(tv >= -np.expm1(-c) - 1e-12)  # so 1 - e^{-C} (paper's (41)) is a lower bound
    np.testing.assert_allclose(
        cv.max_tv_chernoff(c[:64]), np.sqrt(-np.expm1(-2 * c[:64])), rtol=1e-15
    )
    for eps in (0.1, 1.0, 5.0):  # RR attains
        p1, q1 = randomized_response(eps)
        bound = float(cv.max_tv_chernoff(np_chernoff(p1, q1)[0]))
        assert abs(np_tv(p1, q1)[0] - bound) < 1e-9


def _product(pairs):
    """Joint pmf of independent factors: list of (p, q) arrays of shape (num, k) -> (num, k^n)."""
    p, q = pairs[0]
    for a, b in pairs[1:]:
        p = (p[:, :, None] * a[:, None, :]).reshape(len(p), -1)
        q = (q[:, :, None] * b[:, None, :]).reshape(len(q), -1)
    return p, q


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_n_fold_composition_exact_tv(eps):
    rng = np.random.default_rng(11)
    for n in (2, 3):  # different random eps-DP factors, composed
        p, q = _product([random_dp_pairs(rng, eps, 200, 3) for _ in range(n)])
        assert np.all(np_tv(p, q) <= float(ev(cv.max_tv_eps_dp, eps, n=n)) * (1 + 1e-12))
    ns = list(range(1, 9))
    exact = np.array([ev(cv.max_tv_eps_dp, eps, n=n) for n in ns])
    bound = ev(cv.max_tv_eps_dp_chernoff_bound, eps, ns)
    for n, tv in zip(ns, exact, strict=True):  # n-fold RR by brute-force enumeration attains it
        p, q = _product([randomized_response(eps)] * n)
        np.testing.assert_allclose(np_tv(p, q), tv, rtol=1e-12)
        np.testing.assert_allclose(np_chernoff(p, q), n * math.log(math.cosh(eps / 2)), rtol=1e-9)
    assert bound[0] == pytest.approx(exact[0], rel=1e-14)  # sharp at n = 1 ...
    assert np.all(bound[1:] > exact[1:])  # ... a strict bound beyond


def test_eps_delta_tv_on_random_pairs():
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.full(5, 0.5), size=(2, 3000))
    for eps in (0.1, 1.0, 4.0):
        delta = np.maximum(
            np.sum(np.maximum(p - math.exp(eps) * q, 0), -1),
            np.sum(np.maximum(q - math.exp(eps) * p, 0), -1),
        )
        bound = np.asarray(cv.max_tv_eps_delta_dp(eps, delta))
        assert np.all(np_tv(p, q) <= bound + 1e-12)
        d = 0.05  # Kairouz et al.'s extremal 4-point (eps, delta) pair attains it
        r = math.exp(eps) / (1 + math.exp(eps))
        p4 = np.array([d, (1 - d) * r, (1 - d) * (1 - r), 0.0])
        assert abs(np_tv(p4, p4[::-1]) - float(cv.max_tv_eps_delta_dp(eps, d))) < 1e-15


# -- transformations, gradients, bad input -----------------------------------------------------

GRID = np.linspace(0.2, 6.0, 64)  # the ev() length: eager calls reuse compiled kernels
SMOOTH = {
    "max_chernoff_eps_dp": cv.max_chernoff_eps_dp,
    "max_kl_eps_dp": cv.max_kl_eps_dp,
    "max_tv_chernoff": cv.max_tv_chernoff,
    "max_neg_log_bc_eps_dp": lambda e: cv.max_neg_log_bc_eps_dp(e, 0.3),
    "max_tv_eps_delta_dp": lambda e: cv.max_tv_eps_delta_dp(e, 0.01),
    "max_tv_eps_dp_chernoff_bound": lambda e: cv.max_tv_eps_dp_chernoff_bound(e, 3),
    "max_tv_eps_dp": lambda e: cv.max_tv_eps_dp(e, n=5),
}


def test_every_public_function_is_covered():
    assert set(SMOOTH) == set(cv.__all__)


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_jit_of_vmap_equals_eager(name):
    f = SMOOTH[name]
    np.testing.assert_allclose(jax.jit(jax.vmap(f))(GRID), f(GRID), rtol=1e-14)


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_gradients_match_finite_differences(name):
    # First order (second order costs ~3x the compile time); for the costly binomial sum only
    # reverse mode (what jax.grad uses), forward mode would be one more large compile.
    modes = ("rev",) if name == "max_tv_eps_dp" else ("fwd", "rev")
    check_grads(SMOOTH[name], (GRID,), order=1, modes=modes)


def test_out_of_range_traced_arguments_give_nan():
    # the checks skip traced values; the formulas, even or odd in eps, gave values there
    # (max_tv_eps_dp(-1, 3) = -0.64 under jit, max_kl_eps_dp(-1) = 0.46; found by a QA pass)
    values = jax.jit(lambda e: {k: f(e) for k, f in SMOOTH.items()})(-1.0)
    assert all(np.isnan(v) for v in values.values()), values
    more = jax.jit(
        lambda a, d, n: (
            cv.max_neg_log_bc_eps_dp(1.0, a),
            cv.max_tv_eps_delta_dp(1.0, d),
            cv.max_tv_eps_dp_chernoff_bound(1.0, n),
        )
    )
    assert np.isnan(more(1.5, 0.5, 2.0)[0]) and np.isnan(more(0.5, -0.1, 2.0)[1])
    assert np.isnan(more(0.5, 0.5, 2.5)[2]) and not np.isnan(more(0.5, 0.5, 2.0)).any()


# every SMOOTH gradient of 8 arguments, compiled once for the tests below
_GRADS = jax.jit(lambda e: {k: jax.vmap(jax.grad(f))(e) for k, f in SMOOTH.items()})


def test_gradients_at_infinite_eps_are_the_limits():
    # max_kl_eps_dp's was nan (the product rule's inf * 0), max_neg_log_bc_eps_dp's 0; the
    # limits of the derivatives as eps -> inf: 1 (eps tanh(eps/2) ~ eps), min(alpha, 1 - alpha)
    # (~ min(alpha, 1 - alpha) eps), 1/2 (log cosh(eps/2) ~ eps/2), 0 for the bounded ones
    x = np.array([np.inf, 0.5, 3.0, 20.0, np.inf, 1.0, 8.0, 40.0])
    grads = {k: np.asarray(g) for k, g in _GRADS(x).items()}
    limits = {"max_kl_eps_dp": 1.0, "max_neg_log_bc_eps_dp": 0.3, "max_chernoff_eps_dp": 0.5}
    for name, g in grads.items():
        np.testing.assert_array_equal(g[[0, 4]], limits.get(name, 0.0), err_msg=name)
    for name in ("max_kl_eps_dp", "max_neg_log_bc_eps_dp"):  # and finite differences elsewhere
        e, f = x[[1, 2, 3, 5, 6, 7]], SMOOTH[name]
        fd = (np.asarray(f(e * (1 + 1e-6))) - np.asarray(f(e * (1 - 1e-6)))) / (2e-6 * e)
        np.testing.assert_allclose(grads[name][[1, 2, 3, 5, 6, 7]], fd, rtol=1e-8, err_msg=name)
    # the skew's other values; 0 and 1 are 0 for every eps
    grad_a = jax.jit(jax.vmap(jax.grad(cv.max_neg_log_bc_eps_dp), (None, 0)))
    np.testing.assert_array_equal(grad_a(np.inf, np.array([0.0, 0.2, 0.5, 1.0])), [0, 0.2, 0.5, 0])
    assert cv.max_kl_eps_dp(np.inf) == np.inf  # the values, unchanged
    limit = cv.max_neg_log_bc_eps_dp(np.inf, np.array([0.0, 0.2, 1.0]))
    np.testing.assert_array_equal(limit, [0.0, np.inf, 0.0])


def test_out_of_range_traced_arguments_give_nan_gradients():
    # nan in the derivative too, as in nan_where_invalid: jnp.where(bad, nan, value) has
    # derivative 0 there (a silent 0 gradient at a negative traced eps); valid elements of the
    # same batch keep their gradients (those of a batch without invalid elements, finite)
    x = np.array([-1.0, 0.7, -1e-300, 3.0, -np.inf, 0.2, np.nan, 5.0])
    assert_nan_gradients_exactly_where_invalid(_GRADS, x, 1.0)
    more = jax.jit(
        jax.grad(
            lambda a, d: cv.max_neg_log_bc_eps_dp(1.0, a) + cv.max_tv_eps_delta_dp(1.0, d),
            argnums=(0, 1),
        )
    )
    assert np.isnan(more(1.5, 0.5)[0]) and np.isnan(more(0.5, -0.1)[1])
    assert np.all(np.isfinite(more(0.3, 0.5)))


def test_gradients_at_zero_are_finite_and_exact():
    @jax.jit
    def grads(e):
        fs = [
            cv.max_chernoff_eps_dp,
            cv.max_kl_eps_dp,
            lambda x: cv.max_tv_eps_dp_chernoff_bound(x, 4),
            lambda x: cv.max_tv_eps_dp(x, n=4),
        ]
        return jnp.stack([jax.grad(f)(e) for f in fs])

    # 0, 0, sqrt(n)/2 for the Chernoff bound, and d/deps TV(n-fold RR) at 0 = E[(2K - n)_+]
    # for K ~ Bin(n, 1/2): 3/4 for n = 4.
    np.testing.assert_allclose(grads(0.0), [0.0, 0.0, 1.0, 0.75], rtol=1e-14, atol=0)


def test_chernoff_bound_gradient_at_tiny_eps():
    # d/deps sqrt(1 - sech(eps/2)^8) = sqrt(4)/2 = 1 to rounding for eps << 1. The derivative
    # of log1p(u)/u (u ~ eps^2/8) divided by u^2, which underflowed: -inf for eps in
    # [5e-154, 3e-77] (float32: [3e-19, 9e-10]); found by a QA pass.
    grad = jax.jit(jax.vmap(jax.grad(lambda e: cv.max_tv_eps_dp_chernoff_bound(e, 4))))
    e64 = np.array([1e-160, 5e-154, 1e-120, 3e-77, 1e-60, 1e-20])
    np.testing.assert_allclose(grad(e64), 1.0, rtol=1e-15, atol=0)
    e32 = np.array([1e-20, 3e-19, 1e-15, 1e-10, 9e-10, 1e-8], np.float32)
    np.testing.assert_allclose(grad(e32), 1.0, rtol=1e-6, atol=0)


def test_traced_n_is_allowed_only_where_documented():
    f = jax.jit(cv.max_tv_eps_dp_chernoff_bound)
    np.testing.assert_allclose(f(GRID, 3), cv.max_tv_eps_dp_chernoff_bound(GRID, 3), rtol=1e-14)
    with pytest.raises(TypeError, match=r"^n must be concrete"):
        jax.jit(cv.max_tv_eps_dp)(GRID, 3)
    static = jax.jit(cv.max_tv_eps_dp, static_argnames="n")
    np.testing.assert_allclose(static(GRID, n=3), cv.max_tv_eps_dp(GRID, n=3), rtol=1e-14)


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda: cv.max_chernoff_eps_dp(-1.0), "eps"),
        (lambda: cv.max_kl_eps_dp(np.array([1.0, -1e-9])), "eps"),
        (lambda: cv.max_tv_eps_dp(-0.5), "eps"),
        (lambda: cv.max_tv_eps_dp_chernoff_bound(-0.5), "eps"),
        (lambda: cv.max_tv_chernoff(-0.1), "c"),
        (lambda: cv.max_tv_eps_delta_dp(1.0, 1.1), "delta"),
        (lambda: cv.max_neg_log_bc_eps_dp(1.0, -0.1), "alpha"),
        *[(lambda n=n: cv.max_tv_eps_dp(1.0, n=n), "n") for n in (0, -3, 2.5, np.array([1, 0]))],
        *[(lambda n=n: cv.max_tv_eps_dp_chernoff_bound(1.0, n), "n") for n in (0, 1.5)],
    ],
)
def test_bad_input_names_the_argument(call, arg):
    with pytest.raises(ValueError, match=rf"^{arg} ") as err:
        call()
    # the value as written, not numpy 2's repr ("eps must be >= 0.0, got np.float64(-1.0)")
    assert "np." not in str(err.value), str(err.value)


def test_float32_values_are_named_as_written():
    # an f-string formats a float32 scalar through float64: "got -0.10000000149011612" for
    # a float32 -0.1, here and in the boundary checks of the distributions and calibrate
    # (no compile: every check runs before the kernels)
    f32 = np.float32
    calls = [
        (lambda: cv.max_kl_eps_dp(f32(-0.1)), "eps must be >= 0.0, got -0.1"),
        (lambda: cv.max_tv_eps_dp(1.0, f32(2.5)), "n must be an integer >= 1, got 2.5"),
        (
            lambda: jd.Laplace(0.0, f32(-0.1)),
            "Laplace: scale must be positive and finite, got -0.1",
        ),
        (lambda: jd.calibrate("laplace", f32(-0.1)), "budget must be >= 0, got -0.1"),
        (
            lambda: jd.DiscreteLaplace(f32(0.1), 1.0),
            "DiscreteLaplace: loc must hold integer values, got 0.1",
        ),
        (
            lambda: jd.log_bc(jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0), f32(1.1)),
            "alpha must lie in [0, 1], got 1.1",
        ),
    ]
    for call, message in calls:
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == message


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_half_precision_is_refused_as_elsewhere(dtype):
    # bfloat16 was refused as "must be real", float16 computed in (QA pass)
    with pytest.raises(TypeError, match=r"^eps must be float32 or float64, got dtype"):
        cv.max_kl_eps_dp(jnp.asarray([1.0], dtype))


def test_float32_stays_float32_and_ints_promote():
    x32 = jnp.asarray(GRID, jnp.float32)
    for name, f in SMOOTH.items():
        assert f(x32).dtype == jnp.float32, name
    assert cv.max_chernoff_eps_dp(2).dtype == jnp.result_type(float)
    assert cv.max_tv_eps_dp_chernoff_bound(np.array([1, 2]), n=3).dtype == jnp.result_type(float)


def test_itertools_product_matches_pairwise_product():  # guards the helper used above
    (p1, q1), (p2, q2) = randomized_response(0.3), randomized_response(0.7)
    p, q = _product([(p1, q1), (p2, q2)])
    want = [a * b for a, b in itertools.product(p1[0], p2[0])]
    np.testing.assert_allclose(p[0], want, rtol=1e-15)
    np.testing.assert_allclose(q.sum(), 1.0, rtol=1e-15)


def test_chernoff_tv_bound_and_skewed_distance_at_extreme_eps():
    # sqrt(1 - sech(eps/2)^(2n)) ~ (eps/2) sqrt(n): u = 2 sinh(eps/4)^2 underflowed to 0 below
    # eps ~1e-154 (log1p(u)/u = 0/0: nan), and the quotient's derivative divided 0 by h^2.
    eps = jnp.asarray([1e-200, 1e-160, 1e-150])
    for n in (1, 4, 1e100):  # n eps^2 tiny: the leading term is exact to rounding
        np.testing.assert_allclose(
            cv.max_tv_eps_dp_chernoff_bound(eps, n), eps / 2 * np.sqrt(n), rtol=1e-14
        )
    slope = jax.grad(lambda e: cv.max_tv_eps_dp_chernoff_bound(e, 4))(1e-200)
    np.testing.assert_allclose(slope, 1.0, rtol=1e-14)
    np.testing.assert_allclose(membership_bounds(1e-200, 3).chernoff_tight, 0.5e-200 * np.sqrt(3))
    # eps = inf: inf - inf in the closed form; the limit is inf * min(alpha, 1 - alpha)
    got = cv.max_neg_log_bc_eps_dp(jnp.inf, jnp.asarray([0.0, 0.3, 0.5, 1.0]))
    np.testing.assert_array_equal(got, [0.0, np.inf, np.inf, 0.0])


def test_lists_are_arrays_and_eq35_at_infinite_shift():
    from jaxdp import paper

    # a list went into jax.jit as a pytree of scalars (TypeError)
    np.testing.assert_array_equal(
        cv.max_chernoff_eps_dp([0.5, 1.0]), cv.max_chernoff_eps_dp(np.array([0.5, 1.0]))
    )
    np.testing.assert_array_equal(
        cv.max_tv_eps_dp([0.5, 1.0], 3), cv.max_tv_eps_dp(np.array([0.5, 1.0]), 3)
    )
    np.testing.assert_array_equal(paper.eq22([1.0, 2.0]), paper.eq22(np.array([1.0, 2.0])))
    # t - log(1 + t) -> inf, not inf - inf
    assert float(paper.eq35(math.inf, 1.0, 1.0)) == math.inf


def test_nan_and_out_of_range_arguments_raise_naming_them():
    from jaxdp import mechanisms, paper

    for call, name in (
        (lambda: cv.max_chernoff_eps_dp(math.nan), "eps"),
        (lambda: cv.max_tv_eps_dp(math.nan, 2), "eps"),
        (lambda: cv.max_tv_eps_delta_dp(1.0, delta=math.nan), "delta"),
        (lambda: paper.eq35(math.nan, 1.0, 1.0), "shift"),
        (lambda: paper.eq56(1.0, 1.5), "alpha"),  # was accepted: 0.95
    ):
        with pytest.raises(ValueError, match=rf"^{name} "):
            call()
    # a numpy integer is an integer (was: "k must be an integer >= 2, got np.int64(3)")
    P, _ = mechanisms.randomized_response(1.0, k=np.int64(3))
    assert P.log_probs.shape[-1] == 3
    # and a numpy non-integer is shown as written (was "got np.float64(2.5)")
    with pytest.raises(ValueError, match=r"^k must be an integer >= 2, got 2\.5$"):
        mechanisms.randomized_response(1.0, k=np.float64(2.5))


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: jd.max_tv_eps_delta_dp(np.ones(3), np.full(2, 0.1)), "eps, delta"),
        (lambda: jd.max_tv_eps_dp_chernoff_bound(np.ones(3), np.ones(2)), "eps, n"),
        (lambda: jd.max_tv_eps_dp([1.0, 2.0], [1, 2, 3]), "eps, n"),  # (QA21 B3: JAX's message)
        (lambda: jd.paper.eq40(np.ones(3), np.full(2, 0.1)), "eps, delta"),
        (lambda: jd.paper.eq34(np.ones(3), np.ones(2), 1.0), "shift, b, theta"),
        (lambda: jd.membership_bounds(np.ones(3), delta=np.full(2, 0.1)), "epsilon, delta"),
        (
            lambda: jd.best_advantage_laplace(np.ones(3), sensitivity=np.ones(2)),
            "epsilon, sensitivity",
        ),
        (
            lambda: jd.best_advantage_gaussian(np.ones(3), sensitivity=np.ones(2)),
            "sigma, sensitivity",
        ),
    ],
)
def test_unbroadcastable_arguments_are_named(call, names):
    # numpy's or JAX's own message ("mul got incompatible shapes") named no argument
    with pytest.raises(ValueError, match=f"^{names}: batch shapes .* do not broadcast"):
        call()


def test_oversized_n_is_refused_before_allocating():
    # Regression (QA21 B4): n = 1e9 built a 35 GB array and failed with RESOURCE_EXHAUSTED
    # only when the result was read. The limit is shared with best_advantage_laplace.
    for eps, n in ((1.0, 10**9), (np.ones(100), 10**7), (np.ones(2), np.array([1, 10**9]))):
        with pytest.raises(ValueError, match=r"^n=1000.* GiB \(limit 4 GiB\); use max_tv_eps_dp_"):
            cv.max_tv_eps_dp(eps, n)


def _mp_slope(f, x, dps=200):
    """Central difference of an mpmath function at ``dps`` digits (step 1e-40): the slopes
    below are down to ~1e-87 next to values ~1, beyond mp.diff at the default precision."""
    with mp.workdps(dps):
        h = mp.mpf(10) ** -40
        return (f(mp.mpf(x) + h) - f(mp.mpf(x) - h)) / (2 * h)


def test_float32_gradients_of_the_n_fold_advantage_near_one():
    # float32: the binomial pmf's deviance divided by n q = n/(1 + e^eps) in reverse mode,
    # which squares it: flushed to 0 beyond eps ~44, the slope came out nan for eps 44..87
    # (found by a QA pass), and half the true value for n = 3 at eps = 40 and 44. The slope of
    # TV = 1 - (1 - TV) is that of 1 - TV, a sum of the binomial terms below.
    def rr(e, n):  # TV of n-fold randomized response
        p = mp.exp(e) / (1 + mp.exp(e))
        q = 1 - p
        return mp.fsum(
            mp.binomial(n, k) * (p**k * q ** (n - k) - q**k * p ** (n - k))
            for k in range(n // 2 + 1, n + 1)
        )

    tiny = float(np.finfo(np.float32).tiny)
    for n in (1, 2, 3):
        grad = jax.jit(jax.grad(lambda x, n=n: cv.max_tv_eps_dp(x, n)))
        for x in (30.0, 40.0, 44.0, 50.0, 60.0, 87.0, 88.0, 100.0):
            got = float(grad(np.float32(x)))
            want = float(_mp_slope(lambda e, n=n: rr(e, n), x, dps=120))
            if want > 8 * tiny:  # measured <= 5.3e-6 relative (n = 3, eps = 40)
                assert abs(got - want) <= 1e-5 * want, (n, x, got, want)
            else:  # at or below float32's smallest normal number: 0 or as small
                assert 0.0 <= got <= 8 * tiny, (n, x, got, want)


def test_gradients_where_the_advantage_is_within_an_ulp_of_one():
    # JAX differentiates expm1 as expm1 + 1 and tanh as 1 - tanh^2, which cancel to 0 near 1;
    # max_tv_eps_dp's sum of O(1) terms did too: its slope at eps = 30, n = 3 came out
    # -3.5e-18 (true +1.05e-25), 0 at 25, 39% off at 20, and nan at eps = inf (found by a QA
    # pass). Each is now formed from non-negative terms: relative accuracy throughout.
    def rr3(e):  # TV of 3-fold randomized response
        p = mp.exp(e) / (1 + mp.exp(e))
        q = 1 - p
        return mp.fsum(
            mp.binomial(3, k) * (p**k * q ** (3 - k) - q**k * p ** (3 - k)) for k in (2, 3)
        )

    cases = [
        (lambda x: cv.max_tv_eps_dp(x, 3), rr3, (5.0, 20.0, 30.0)),
        (cv.max_tv_chernoff, lambda c: mp.sqrt(1 - mp.exp(-2 * c)), (15.0, 20.0, 100.0)),
        (
            lambda x: cv.max_tv_eps_dp_chernoff_bound(x, 3),
            lambda e: mp.sqrt(1 - mp.sech(e / 2) ** 6),
            (20.0, 40.0),
        ),
        (lambda x: cv.max_tv_eps_delta_dp(x, 0.1), lambda e: 0.1 + 0.9 * mp.tanh(e / 2), (40.0,)),
        (paper.eq41, lambda e: -mp.expm1(-e), (40.0, 100.0)),
        (paper.eq42, lambda e: mp.tanh(e / 2), (40.0, 100.0)),
    ]
    for f, ref, xs in cases:
        grad = jax.grad(f)
        for x in xs:
            want = _mp_slope(ref, x)
            assert abs(float(grad(x)) - want) < 1e-12 * want, x
        assert float(grad(float("inf"))) == 0.0
    # the delta-slope 1 - tanh(eps/2) = 2/(1 + e^eps) cancelled to 0 from eps ~37
    grad = jax.grad(cv.max_tv_eps_delta_dp, argnums=1)
    for x in (20.0, 40.0, 100.0):
        want = float(2 / (1 + mp.exp(x)))
        assert abs(float(grad(x, 0.1)) - want) < 1e-12 * want, x

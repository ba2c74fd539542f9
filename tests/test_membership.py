"""Tests for jaxdp.membership: exact best membership advantage and the paper's (39)-(42).

References are independent of the library's method: the n-fold Laplace advantage is computed
in mpmath (50 digits) from the privacy-loss distribution in *loss* space — atoms at
+-eps, an exponentially tilted Irwin-Hall density (alternating-sum formula) for the
continuous part, integrated exactly piece by piece — while the library convolves clipped
outputs with Bernstein polynomials and Gauss-Legendre quadrature.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import mp_refs
import mpmath as mp
import numpy as np
import pytest
from autodiff_refs import assert_nan_gradients_exactly_where_invalid

import jaxdp as jd
from jaxdp import membership as mb
from jaxdp import paper
from jaxdp.conversions import max_tv_eps_dp, max_tv_eps_dp_chernoff_bound

DPS = 50


# --------------------------------------------------------------------------------------------
# mpmath references
# --------------------------------------------------------------------------------------------


def _poly_mul(a, b):
    out = [mp.mpf(0)] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def _int_poly_exp(coef, beta, a, b):
    """Exact integral of ``sum_p coef[p] s^p e^(beta s)`` over ``[a, b]``."""

    def antiderivative(s):
        # int s^p e^{bs} ds = e^{bs} sum_k (-1)^k p!/(p-k)! s^(p-k) / b^(k+1)
        total = mp.mpf(0)
        for p, c in enumerate(coef):
            total += c * sum(
                (-1) ** k * mp.factorial(p) / mp.factorial(p - k) * s ** (p - k) / beta ** (k + 1)
                for k in range(p + 1)
            )
        return mp.exp(beta * s) * total

    return antiderivative(b) - antiderivative(a)


@functools.cache
def laplace_tv_mp(eps: str, n: int, dps: int = DPS):
    r"""TV(Lap(0, 1)^n, Lap(eps, 1)^n) = E_P[(1 - e^{-L_n})_+] from the privacy-loss law.

    One release: L = +eps w.p. 1/2, -eps w.p. e^{-eps}/2, else density e^{(l - eps)/2}/4 on
    (-eps, eps). Conditioning on k atoms at +eps, j at -eps and m continuous parts, the
    continuous sum has density 4^{-m} e^{(s - m eps)/2} (2 eps)^{m-1} IH_m((s + m eps)/(2 eps))
    on (-m eps, m eps), IH_m the Irwin-Hall density (alternating sum, harmless at 50 digits);
    (1 - e^{-(s + (k - j) eps)})_+ is integrated against it exactly on each polynomial piece.
    """
    with mp.workdps(dps):
        e = mp.mpf(eps)
        total = mp.mpf(0)
        for m in range(n + 1):
            for k in range(n - m + 1):
                j = n - m - k
                w = mp.factorial(n) / (mp.factorial(k) * mp.factorial(j) * mp.factorial(m))
                w *= mp.mpf(2) ** (-k) * (mp.exp(-e) / 2) ** j
                c = (k - j) * e
                if m == 0:
                    total += w * max(mp.mpf(0), -mp.expm1(-c))
                    continue
                pref = mp.mpf(4) ** (-m) * mp.exp(-m * e / 2) * (2 * e) ** (m - 1)
                pref /= mp.factorial(m - 1)
                for i in range(m):  # Irwin-Hall piece x in [i, i + 1), s = -m e + 2 e x
                    a = max(-m * e + 2 * i * e, -c)
                    b = -m * e + 2 * (i + 1) * e
                    if a >= b:
                        continue
                    poly = [mp.mpf(0)] * m
                    for ll in range(i + 1):
                        # (x - l) = (s + (m - 2l) e) / (2 e)
                        lin = [mp.mpf(m - 2 * ll) / 2, 1 / (2 * e)]
                        term = [mp.mpf(1)]
                        for _ in range(m - 1):
                            term = _poly_mul(term, lin)
                        for p, t in enumerate(term):
                            poly[p] += (-1) ** ll * mp.binomial(m, ll) * t
                    half = mp.mpf(1) / 2
                    val = _int_poly_exp(poly, half, a, b) - mp.exp(-c) * _int_poly_exp(
                        poly, -half, a, b
                    )
                    total += w * pref * val
        return total


def rr_tv_mp(eps, n: int):
    """TV of n-fold binary randomized response: a binomial sum."""
    with mp.workdps(DPS):
        e = mp.mpf(eps)
        p = mp.exp(e) / (1 + mp.exp(e))
        q = 1 - p
        return sum(
            mp.binomial(n, k) * max(mp.mpf(0), p**k * q ** (n - k) - q**k * p ** (n - k))
            for k in range(n + 1)
        )


def rel(a, b):
    a, b = mp.mpf(float(a)), mp.mpf(b)
    return abs(a - b) / abs(b) if b != 0 else abs(a)


WIDTH = 8  # every Laplace call below uses one batch width, so each (n, nodes, dtype) compiles once


def lap(eps, n, *, nodes=None, dtype=jnp.float64):
    """``best_advantage_laplace`` on ``eps`` (at most ``WIDTH`` values), padded to ``WIDTH``."""
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    padded = np.ones(WIDTH)
    padded[: e.size] = e
    r = mb.best_advantage_laplace(jnp.asarray(padded, dtype), n, quadrature_nodes=nodes)
    return mb.LaplaceAdvantage(r.value[: e.size], r.error_bound[: e.size])


# --------------------------------------------------------------------------------------------
# Laplace
# --------------------------------------------------------------------------------------------

EPS_GRID = ("1e-6", "0.01", "0.5", "1", "4", "20")


def test_laplace_n1_closed_form_and_recursion():
    # n = 1: Adv = 1 - e^{-eps/2}; the public function uses it, the recursion must agree.
    eps = np.array([0.0, 1e-10, 1e-4, 0.1, 1.0, 3.0, 10.0, 40.0])
    v = lap(eps, 1).value
    dp, _ = mb._laplace_tv_dp(jnp.asarray(eps), 1, 40)
    for e, a, b in zip(eps, v, dp, strict=True):
        ref = -mp.expm1(-mp.mpf(e) / 2)
        assert rel(a, ref) <= 2e-16
        assert rel(b, ref) <= 4e-16


def test_laplace_n2_closed_form():
    # Hand-derived: with Z = clip(X, 0, b eps)/(b eps), Adv_2 = sum over the atom/continuous
    # cases of int_{u<1} (1 - e^{-2 eps (1 - u)}) dpi(u) = 1/4 (1 - e^{-2 eps})
    # + 1/2 (1 - e^{-eps})^2 + 1/4 (1 - 2 eps e^{-eps} - e^{-2 eps}) = 1 - (1 + eps/2) e^{-eps}.
    eps = np.array([1e-8, 1e-4, 0.01, 0.3, 1.0, 2.5, 7.0, 35.0])
    r = lap(eps, 2)
    for e, v, b in zip(eps, r.value, r.error_bound, strict=True):
        with mp.workdps(DPS):
            ref = -mp.expm1(-mp.mpf(e)) - mp.mpf(e) / 2 * mp.exp(-mp.mpf(e))
        assert rel(v, ref) <= 1e-15
        assert abs(mp.mpf(float(v)) - ref) <= mp.mpf(float(b))
    # the loss-space mpmath reference agrees with the closed form (validates the reference)
    for e in ("1e-6", "0.5", "20"):
        with mp.workdps(DPS):
            ref = -mp.expm1(-mp.mpf(e)) - mp.mpf(e) / 2 * mp.exp(-mp.mpf(e))
            assert abs(laplace_tv_mp(e, 2) - ref) < mp.mpf(10) ** (-40)


@pytest.mark.parametrize(
    ("n", "grid"), [(2, EPS_GRID), (3, EPS_GRID), (4, EPS_GRID), (6, ("1e-3", "0.7", "3"))]
)
def test_laplace_matches_mpmath_pld(n, grid):
    r = lap([float(e) for e in grid], n)
    for e, v, b in zip(grid, r.value, r.error_bound, strict=True):
        ref = laplace_tv_mp(e, n)
        assert rel(v, ref) <= 1e-15 * n, (n, e)
        assert abs(mp.mpf(float(v)) - ref) <= mp.mpf(float(b)), (n, e)


@pytest.mark.parametrize(("n", "nodes"), [(3, 2), (4, 2), (6, 5)])
def test_laplace_error_bound_holds_with_few_nodes(n, nodes):
    # Starved quadrature: the returned bound must still cover the true error.
    grid = ("0.3", "1", "3", "8")
    r = lap([float(e) for e in grid], n, nodes=nodes)
    errs = [abs(mp.mpf(float(v)) - laplace_tv_mp(e, n)) for e, v in zip(grid, r.value, strict=True)]
    assert max(errs) > 1e-12  # the check is not vacuous
    for err, b in zip(errs, r.error_bound, strict=True):
        assert err <= mp.mpf(float(b))


def test_laplace_large_n_consistency():
    # n = 50: no mpmath reference is cheap, so check the a-priori facts: more quadrature
    # nodes change nothing beyond the bound; Chernoff sandwich 1 - e^{-nC} <= TV <=
    # sqrt(1 - e^{-2nC}) (C = eps/2 - log(1 + eps/2)); TV <= n-fold RR (worst eps-DP pair).
    n = 50
    eps = jnp.asarray([1e-6, 1e-3, 0.05, 0.2, 1.0, 3.0, 10.0, 40.0])
    r = lap(eps, n)
    r2 = lap(eps, n, nodes=120)
    assert np.all(np.abs(r.value - r2.value) <= r.error_bound + r2.error_bound)
    assert np.all(r.error_bound <= 1e-12)
    c = eps / 2 - jnp.log1p(eps / 2)
    assert np.all(r.value >= -jnp.expm1(-n * c) * (1 - 1e-14))
    assert np.all(r.value <= jnp.sqrt(-jnp.expm1(-2 * n * c)) * (1 + 1e-14))
    assert np.all(r.value <= max_tv_eps_dp(eps, n) * (1 + 1e-12))


def test_laplace_monotone_in_n_and_eps():
    eps = [1e-4, 0.05, 0.3, 1.0, 2.0, 5.0]
    values = np.stack([lap(eps, n).value for n in (1, 2, 3, 4, 6)])
    assert np.all(np.diff(values, axis=0) > 0)  # strictly more leakage with more releases
    assert np.all(np.diff(values, axis=1) > 0)


def test_laplace_gradient():
    # d/deps [1 - (1 + eps/2) e^{-eps}] = (1 + eps) e^{-eps} / 2
    grad = jax.jit(jax.vmap(jax.grad(lambda e: mb.best_advantage_laplace(e, 2).value)))
    eps = jnp.linspace(1e-3, 6.0, WIDTH)
    np.testing.assert_allclose(grad(eps), (1 + eps) * jnp.exp(-eps) / 2, rtol=1e-12)
    # the slope is 0 beyond eps = 2 log(1/u) + 2 = 75.5 (docstring); the README said ~77
    eps = jnp.asarray([1.0, 40.0, 75.0, 75.4, 75.6, 76.0, 77.0, 78.0])
    want = np.where(eps < 75.5, (1 + eps) * jnp.exp(-eps) / 2, 0.0)
    np.testing.assert_allclose(grad(eps), want, rtol=1e-12, atol=0)
    readme = Path(__file__).resolve().parent.parent / "README.md"
    if readme.exists():
        assert "0 beyond eps = 75.5 (float64" in " ".join(readme.read_text().split())


def test_laplace_float32():
    # float32: measured error ~1e-6 relative, always within the returned (worst-case) bound.
    eps = [1e-3, 0.1, 1.0, 5.0, 20.0, 40.0]
    for n in (3, 50):
        r64 = lap(eps, n)
        r32 = lap(eps, n, dtype=jnp.float32)
        assert r32.value.dtype == jnp.float32
        assert r32.error_bound.dtype == jnp.float32
        np.testing.assert_allclose(r32.value, r64.value, rtol=2e-6)
        assert np.all(np.abs(r32.value - r64.value) <= r32.error_bound)


# eps where the value was clipped to a float below 1 - e^{-eps/2} before the fix (some of
# each list, in lap()'s width-8 batch: the recursion's rounding depends on the batch)
BELOW_LOWER_END = {
    (jnp.float32, 3): [32.275345, 33.41677, 33.65707, 33.867332, 34.220276, 34.475594, 34.603252],
    (jnp.float32, 50): [30.052567, 31.314142, 32.22278, 33.446808, 33.844807, 34.235294, 34.636593],
    (jnp.float64, 3): [70.89305816135085, 70.96060037523452, 71.39587242026266, 72.14634146341463],
    (jnp.float64, 50): [69.63454317897371, 72.15769712140175, 73.68961201501877, 74.84605757196496],
}


@pytest.mark.parametrize(("dtype", "n"), list(BELOW_LOWER_END))
def test_laplace_value_stays_in_the_exact_a_priori_interval(dtype, n):
    # Regression (QA21 A2): the value was clipped into [fl(1 - e^{-eps/2}), 1], whose rounded
    # lower end can lie 1/2 ulp below the exact one, and the error bound is capped at the
    # interval length: float32 eps = 34.636593, n = 10 gave 0.99999994 (below the exact
    # 0.99999996989) with error bound 3.0e-8 and real error 6e-8 (float64: 1.0).
    eps = np.array(BELOW_LOWER_END[dtype, n], dtype)
    r = lap(eps, n, dtype=dtype)
    with mp.workdps(DPS):
        for e, v in zip(eps, r.value, strict=True):
            assert mp.mpf(float(v)) >= -mp.expm1(-mp.mpf(float(e)) / 2) and v <= 1
    if dtype == jnp.float32:  # float64 is exact to its bound (< 1e-13 here)
        r64 = lap(eps, n)
        assert np.all(np.abs(r.value - r64.value) <= r.error_bound + r64.error_bound)
    else:  # both ends of the interval are within 2 ulp: the bound is its length
        np.testing.assert_allclose(r.error_bound, np.exp(-eps / 2), rtol=1e-15)


def test_laplace_edges_and_validation():
    r = lap([0.0, 1e4, np.inf], 3)
    np.testing.assert_array_equal(r.value, [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(r.error_bound, [0.0, 0.0, 0.0])
    # scale invariance: sensitivity only has to be positive and broadcast
    a = mb.best_advantage_laplace(0.7, 3, sensitivity=jnp.asarray([0.1, 7.0]))
    assert a.value.shape == (2,)
    np.testing.assert_array_equal(a.value, lap([0.7, 0.7], 3).value)
    # a positive subnormal sensitivity too: it gave nan (XLA flushes it, so `s > 0` failed)
    a = mb.best_advantage_laplace(0.7, 3, sensitivity=jnp.asarray([0.1, 1e-310]))
    np.testing.assert_array_equal(a.value, lap([0.7, 0.7], 3).value)
    with pytest.raises(ValueError, match="epsilon"):
        mb.best_advantage_laplace(-0.1, 2)
    with pytest.raises(ValueError, match="sensitivity"):
        mb.best_advantage_laplace(1.0, 2, sensitivity=0.0)
    with pytest.raises(ValueError, match="n must be"):
        mb.best_advantage_laplace(1.0, 0)
    with pytest.raises(TypeError, match="n must be"):
        mb.best_advantage_laplace(1.0, 2.0)
    with pytest.raises(ValueError, match="quadrature_nodes"):
        mb.best_advantage_laplace(1.0, 6, quadrature_nodes=2)


@pytest.mark.parametrize("n", [3, 10, 50])
def test_laplace_at_tiny_epsilon(n):
    # Adv_n = c_n eps (1 + O(eps)), c_n = E[(n - 2 Bin(n, 1/2))_+] (the slope at 0). Below
    # eps ~1e-300 the recursion's products went subnormal and were flushed: n = 50 was
    # 4.6e-4 low at 1e-305 and n = 10 7% low at 1e-307, with error_bound 0.
    c = sum(mp.binomial(n, k) * max(n - 2 * k, 0) for k in range(n + 1)) / mp.mpf(2) ** n
    eps = [1e-200, 1e-290, 1e-300, 1e-305, 1e-307, 3e-308]
    for e, v in zip(eps, lap(eps, n).value, strict=True):
        assert rel(v, c * mp.mpf(e)) <= 1e-15 * n, (e, v)


def test_laplace_traced_bad_sensitivity_is_nan():
    # Refused when concrete; traced, a non-positive sensitivity gave the advantage of
    # |sensitivity| (0.448 at eps = 1, n = 2), where best_advantage_gaussian gives NaN.
    s = jnp.asarray([-1.0, 0.0, jnp.nan, 2.0])
    r = jax.jit(lambda s: mb.best_advantage_laplace(1.0, 2, sensitivity=s))(s)
    assert np.isnan(r.value[:3]).all() and np.isnan(r.error_bound[:3]).all(), r
    np.testing.assert_array_equal(r.value[3], mb.best_advantage_laplace(1.0, 2).value)


# --------------------------------------------------------------------------------------------
# Gaussian and randomized response
# --------------------------------------------------------------------------------------------


def test_gaussian_matches_mpmath_erf():
    sigma = np.array([1e-12, 1e-3, 0.3, 1.0, 3.0, 10.0, 1e3, 1e12])
    for n in (1, 4, 50):
        for s_ in (1.0, 2.5):
            v = mb.best_advantage_gaussian(jnp.asarray(sigma), n, sensitivity=s_)
            for sg, x in zip(sigma, v, strict=True):
                with mp.workdps(DPS):
                    ref = mp.erf(mp.sqrt(n) * mp.mpf(s_) / (2 * mp.sqrt(2) * mp.mpf(sg)))
                assert rel(x, ref) <= 4e-16, (n, sg)
    # composition of n Gaussian releases = one release with sigma / sqrt(n)
    np.testing.assert_allclose(
        mb.best_advantage_gaussian(2.0, 9), mb.best_advantage_gaussian(2.0 / 3.0, 1), rtol=1e-15
    )
    with pytest.raises(ValueError, match="sigma"):
        mb.best_advantage_gaussian(0.0)
    # subnormal arguments, which XLA flushes to 0, gave nan silently (as mechanisms.gaussian)
    with pytest.raises(ValueError, match=r"^sigma must be at least"):
        mb.best_advantage_gaussian(1e-310)
    with pytest.raises(ValueError, match=r"^sensitivity must be at least"):
        mb.best_advantage_gaussian(1.0, sensitivity=1e-310)


def test_gaussian_at_infinite_sigma_or_sensitivity():
    # The limits 0 (sigma = inf) and 1 (sensitivity = inf), eagerly as under jit (they were
    # refused eagerly: "must be positive and finite"); both infinite has no limit
    inf = np.inf
    for sg, s_, want in ((inf, 1.0, 0.0), (1.0, inf, 1.0), (inf, 1e300, 0.0), (1e-300, inf, 1.0)):
        assert float(mb.best_advantage_gaussian(sg, 3, sensitivity=s_)) == want, (sg, s_)
        for d in (0, 1):
            g = jax.grad(lambda a, b: mb.best_advantage_gaussian(a, 3, sensitivity=b), d)
            assert float(g(sg, s_)) == 0.0, (sg, s_, d)
    with pytest.raises(ValueError, match="sigma and sensitivity"):
        mb.best_advantage_gaussian(inf, sensitivity=inf)
    with pytest.raises(ValueError, match=r"^sigma must be positive"):
        mb.best_advantage_gaussian(-inf)


def test_gaussian_gradient_at_tiny_sigma():
    # Regression: d/dsigma was nan for sigma below ~1e-154 (z = sqrt(n) s / (2 sqrt(2) sigma)
    # has derivative -s/sigma^2 = -inf there, times erfc' = 0) and -inf for sigma ~1e-160 at
    # s = sigma, where it is finite. Reference: d/dsigma erf(z) = -(2/sqrt(pi)) e^{-z^2} z/sigma.
    def ref(sg, s_, n):
        with mp.workdps(DPS):
            sg, s_ = mp.mpf(sg), mp.mpf(s_)
            z = mp.sqrt(n) * s_ / (2 * mp.sqrt(2) * sg)
            return -2 / mp.sqrt(mp.pi) * mp.exp(-z * z) * z / sg

    grad = jax.jit(
        jax.vmap(jax.grad(lambda sg, s_: mb.best_advantage_gaussian(sg, 3, sensitivity=s_)))
    )
    sigma = np.array([1e-160, 1e-300, 1e-160, 1e-300, 0.5, 1e-200])
    sens = np.array([1.0, 1.0, 1e-160, 1e-300, 1.0, 1e300])
    got = grad(jnp.asarray(sigma), jnp.asarray(sens))
    for g, sg, s_ in zip(got, sigma, sens, strict=True):
        want = ref(sg, s_, 3)  # (0 to float64 at z = 6e159 and beyond: e^{-z^2})
        assert (g == 0.0) if abs(want) < 1e-320 else (rel(g, want) <= 1e-15), (sg, s_, g)
    assert float(jax.grad(mb.best_advantage_gaussian)(jnp.float32(1e-20))) == 0.0


@pytest.mark.parametrize("n", [1, 3, 10])
def test_randomized_response_matches_binomial_sum(n):
    eps = np.array([1e-6, 0.01, 0.3, 0.5, 1.0, 3.0, 7.0, 10.0])
    v = mb.best_advantage_randomized_response(jnp.asarray(eps), n)
    for e, x in zip(eps, v, strict=True):
        assert rel(x, rr_tv_mp(e, n)) <= 1e-12, (n, e)


def test_laplace_below_randomized_response():
    # RR is the worst eps-DP pair, also under composition (Kairouz-Oh-Viswanath).
    eps = jnp.asarray([1e-4, 0.05, 0.3, 1.0, 2.0, 5.0, 8.0, 12.0])
    for n in (1, 3, 10):
        v, rr = lap(eps, n).value, mb.best_advantage_randomized_response(eps, n)
        # (strictly, until both round to 1: n = 10 from eps ~8, where 1 - TV < 1e-16)
        assert np.all((v < rr) | ((v == 1.0) & (rr == 1.0)))


# --------------------------------------------------------------------------------------------
# Geometric (discrete Laplace)
# --------------------------------------------------------------------------------------------

GEO_EPS = np.array([1e-8, 1e-3, 0.1, 1.0, 3.0, 10.0, 40.0])
GEO_CASES = [(1, 3), (2, 2), (3, 4), (5, 3), (4, 6)]  # (n, sensitivity)


def geo(eps, n, s):
    return np.asarray(mb.best_advantage_geometric(jnp.asarray(eps), n, sensitivity=s))


@pytest.mark.parametrize(("n", "s"), GEO_CASES)
def test_geometric_matches_mpmath_from_the_pmfs(n, s):
    # mp_refs.dl_n_fold_tv works from the pmfs (losses computed, tails by nsum), not from the
    # law of Z the library derives; the bound is the documented n (s + 1) roundings
    got = geo(GEO_EPS, n, s)
    for e, v in zip(GEO_EPS, got, strict=True):
        assert rel(v, mp_refs.dl_n_fold_tv(float(e), n, s)) <= n * (s + 1) * 2.0**-53, (e, v)


@pytest.mark.parametrize(("n", "s"), [(5, 3), (4, 6)])
def test_geometric_at_tiny_epsilon(n, s):
    # Adv_n = c_n eps (1 + O(eps)), c_n = E[(n - 2 Bin(n, 1/2))_+] (each Z is 0 or s with
    # probability ~1/2). The convolution's products went subnormal and were flushed: n = 4,
    # s = 6 gave 0 at eps = 1e-307, n = 5, s = 3 was 17% low there.
    c = sum(mp.binomial(n, k) * max(n - 2 * k, 0) for k in range(n + 1)) / mp.mpf(2) ** n
    eps = np.array([1e-200, 1e-300, 1e-305, 1e-306, 1e-307, 5e-308, 3e-308])  # (GEO_EPS's size)
    for e, v in zip(eps, geo(eps, n, s), strict=True):
        assert rel(v, c * mp.mpf(e)) <= n * (s + 1) * 2.0**-53, (e, v)


@pytest.mark.parametrize(("n", "s"), [(2, 2), (2, 3), (3, 2)])
def test_geometric_matches_enumeration_of_the_product_lattice(n, s):
    # sum over the n-fold product of (p - q)_+, in float64: every outcome within 46/t of the
    # two locations (truncated mass below e^-40); each term's rounding is ~1e-16 of p^n, so
    # the sum is good to ~1e-15 of TV ~ 0.5 here
    for eps in (1.0, 2.5):
        t = eps / s
        k = np.arange(-int(46 / t), s + int(46 / t) + 1)
        c = np.tanh(t / 2)
        p1, q1 = c * np.exp(-t * np.abs(k)), c * np.exp(-t * np.abs(k - s))
        p, q = p1, q1
        for _ in range(n - 1):
            p, q = np.multiply.outer(p, p1), np.multiply.outer(q, q1)
        want = np.sum(np.maximum(p - q, 0.0))
        np.testing.assert_allclose(geo(eps, n, s), want, rtol=1e-13)


@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_geometric_sensitivity_one_is_randomized_response(n):
    # sensitivity 1 takes the binomial sum; the convolution, asked for the same pair, must
    # agree with it (two independent methods)
    eps = jnp.asarray(GEO_EPS)
    conv = mb._geometric_tv(eps, jnp.ones_like(eps), n, 1)
    np.testing.assert_allclose(conv, max_tv_eps_dp(eps, n), rtol=1e-13)
    np.testing.assert_array_equal(geo(eps, n, 1), max_tv_eps_dp(eps, n))


def test_geometric_single_release_is_the_tv_of_the_pair():
    for s in (2, 5):
        pairs = jd.mechanisms.geometric(s, epsilon=jnp.asarray(GEO_EPS))
        np.testing.assert_allclose(geo(GEO_EPS, 1, s), jd.tv(*pairs), rtol=1e-14)


def test_geometric_sensitivities_per_element_and_order():
    s = np.array([2, 5, 3, 1])
    eps = np.array([0.3, 0.3, 2.0, 0.7])
    got = geo(eps, 3, s)
    one = [geo(e, 3, int(si)) for e, si in zip(eps, s, strict=True)]
    np.testing.assert_allclose(got, one, rtol=1e-14)
    # more releases, more epsilon: more leakage; geometric noise is eps-DP, so below the
    # eps-DP worst case (randomized response) for sensitivity > 1
    grid = np.array([1e-4, 0.05, 0.3, 1.0, 2.0, 5.0])
    values = np.stack([geo(grid, n, 3) for n in (1, 2, 3, 5)])
    assert np.all(np.diff(values, axis=0) > 0) and np.all(np.diff(values, axis=1) > 0)
    for i, n in enumerate((1, 2, 3, 5)):
        assert np.all(values[i] < max_tv_eps_dp(jnp.asarray(grid), n))


def test_geometric_gradient():
    f = jax.jit(jax.vmap(jax.grad(lambda e: mb.best_advantage_geometric(e, 3, sensitivity=2))))
    eps = np.array([0.05, 0.7, 3.0])
    h = 1e-6
    fd = (geo(eps + h, 3, 2) - geo(eps - h, 3, 2)) / (2 * h)
    np.testing.assert_allclose(f(jnp.asarray(eps)), fd, rtol=1e-8)
    # at eps = 0 each Z is 0 or s with probability 1/2: TV ~ eps E[(n - 2 Bin(n, 1/2))_+],
    # 3/4 for n = 3
    np.testing.assert_allclose(f(jnp.zeros(3)), 0.75, rtol=1e-15)


def test_gradients_where_the_advantage_is_within_an_ulp_of_one():
    # Slopes down to ~1e-48 next to values ~1 (found by a QA pass): JAX's expm1 and tanh
    # rules and sums of O(1) terms cancelled them to 0 or the wrong sign (Laplace n = 3: 3e-6
    # off at eps = 20, -2.3e-17 for 7.9e-18 at 30). The n-fold sums are now taken as
    # 1 - (1 - TV), the rest a sum of non-negative terms. References: central differences
    # at 200 digits (step 1e-40).
    def slope(f, x):
        with mp.workdps(200):
            h = mp.mpf(10) ** -40
            return (f(mp.mpf(x) + h) - f(mp.mpf(x) - h)) / (2 * h)

    geo3 = jax.grad(lambda e: mb.best_advantage_geometric(e, 3, sensitivity=2))
    for e in (20.0, 30.0):
        want = slope(lambda x: mp_refs.dl_n_fold_tv(x, 3, 2, dps=200), e)
        assert abs(float(geo3(e)) - want) < 1e-13 * want, e
    assert float(geo3(np.inf)) == 0.0
    lap3 = jax.grad(lambda e: mb.best_advantage_laplace(e, 3).value)
    for e in (20.0, 30.0, 60.0):
        want = slope(lambda x: laplace_tv_mp(mp.nstr(x, 150), 3, dps=200), e)
        assert abs(float(lap3(e)) - want) < 1e-13 * want, e
    lap1 = jax.grad(lambda e: mb.best_advantage_laplace(e, 1).value)
    bounds = jax.jacrev(lambda e: mb.membership_bounds(e, 2)[2:4])  # (41), (42) at 2 eps
    for e in (40.0, 80.0):
        want = slope(lambda x: -mp.expm1(-x / 2), e)
        assert abs(float(lap1(e)) - want) < 1e-14 * want, e
        got = bounds(e / 2)
        for g, f in zip(got, (lambda x: -mp.expm1(-2 * x), lambda x: mp.tanh(x)), strict=True):
            want = slope(f, e / 2)
            assert abs(float(g) - want) < 1e-14 * want, e


def test_geometric_edges_float32_jit_and_validation():
    np.testing.assert_array_equal(geo([0.0, 1e4, np.inf], 3, 2), [0.0, 1.0, 1.0])
    # float32: measured relative error ~1e-7 n (see the docstring)
    eps = np.logspace(-6, 1.5, 24)
    v32 = geo(eps.astype(np.float32), 10, 3)
    assert v32.dtype == np.float32
    v64 = geo(eps.astype(np.float32).astype(np.float64), 10, 3)
    np.testing.assert_allclose(v32, v64, rtol=2e-6)
    f = jax.jit(lambda e: mb.best_advantage_geometric(e, 3, sensitivity=2))
    np.testing.assert_allclose(f(jnp.asarray(eps)), geo(eps, 3, 2), rtol=1e-15)
    assert np.all(np.isnan(f(-jnp.asarray(eps))))  # under jit: NaN (documented policy)
    # also through the sensitivity-1 path (max_tv_eps_dp), which gave -0.64 at eps = -1
    g = jax.jit(lambda e: mb.best_advantage_geometric(e, 3, sensitivity=1))
    assert np.all(np.isnan(g(-jnp.asarray(eps))))
    with pytest.raises(ValueError, match="epsilon"):
        mb.best_advantage_geometric(-0.1, 2, sensitivity=2)
    with pytest.raises(ValueError, match="epsilon"):
        mb.best_advantage_geometric(np.nan, 2, sensitivity=2)
    with pytest.raises(ValueError, match="sensitivity must hold integer"):
        mb.best_advantage_geometric(1.0, 2, sensitivity=1.5)
    with pytest.raises(ValueError, match="sensitivity"):
        mb.best_advantage_geometric(1.0, 2, sensitivity=0)
    with pytest.raises(TypeError, match="sensitivity must be concrete"):
        jax.jit(lambda s: mb.best_advantage_geometric(1.0, 2, sensitivity=s))(2.0)
    # a constant sensitivity under an outer jit is checked too: it became a tracer once
    # converted and the checks were skipped (1.5 gave 0.36 at eps = 0.5, 0 gave 0, -2 a JAX
    # error about broadcast_in_dim)
    for bad, what in ((1.5, "integer"), (0, "positive"), (-2, "positive"), ([2, 0], "positive")):
        with pytest.raises(ValueError, match=f"^sensitivity must .*{what}"):
            jax.jit(lambda e, bad=bad: mb.best_advantage_geometric(e, 3, sensitivity=bad))(eps)
    with pytest.raises(ValueError, match="n must be"):
        mb.best_advantage_geometric(1.0, 0, sensitivity=2)
    with pytest.raises(ValueError, match="multiply-adds"):
        mb.best_advantage_geometric(1.0, 100_000, sensitivity=30)


# --------------------------------------------------------------------------------------------
# The paper's bounds
# --------------------------------------------------------------------------------------------


def test_membership_bounds_facts():
    eps = jnp.asarray([1e-4, 0.05, 0.3, 1.0, 2.0, 4.5, 8.0, 12.0])
    for n in (1, 3, 10):
        b = mb.membership_bounds(eps, n)
        budget = n * eps
        # the four paper bounds at budget n*eps, as the paper's jaxdp.paper implements them
        np.testing.assert_allclose(b.yeom, paper.eq39(budget), rtol=1e-15)
        np.testing.assert_allclose(b.erlingsson, paper.eq40(budget, 0.0), rtol=1e-15)
        np.testing.assert_allclose(b.chernoff_paper, paper.eq41(budget), rtol=1e-15)
        np.testing.assert_allclose(b.bayes_security, paper.eq42(budget), rtol=1e-15)
        np.testing.assert_allclose(b.exact, max_tv_eps_dp(eps, n), rtol=1e-15)
        np.testing.assert_allclose(b.chernoff_tight, max_tv_eps_dp_chernoff_bound(eps, n))
        # (40) = (41) at delta = 0; (39) is the loosest; chain of valid bounds
        np.testing.assert_array_equal(b.erlingsson, b.chernoff_paper)
        assert np.all(b.yeom >= b.chernoff_paper)
        assert np.all(b.chernoff_paper >= b.bayes_security)
        assert np.all(b.bayes_security >= b.exact * (1 - 1e-15))
        assert np.all(b.chernoff_tight >= b.exact * (1 - 1e-15))
        v = lap(eps, n).value
        assert np.all((b.exact > v) | ((b.exact == 1.0) & (v == 1.0)))
        if n == 1:
            # (42) is exact for a single eps-DP release; the Chernoff bound is tight there
            np.testing.assert_allclose(b.bayes_security, b.exact, rtol=1e-14)
            np.testing.assert_allclose(b.chernoff_tight, b.exact, rtol=1e-14)
        else:
            # for n > 1, (42) at budget n*eps is strictly loose (until both round to 1)
            assert np.all((b.bayes_security > b.exact) | (b.exact == 1.0))
    d = mb.membership_bounds(eps, 3, delta=0.1)
    np.testing.assert_allclose(d.erlingsson, paper.eq40(3 * eps, 0.1), rtol=1e-15)


def test_membership_bounds_numbers_paper_figure5():
    # n = 3, eps = 1: the exact best advantage and the paper's bounds at budget 3.
    b = mb.membership_bounds(1.0, 3)
    with mp.workdps(DPS):
        e3 = mp.exp(3)
        assert rel(b.yeom, e3 - 1) < 1e-15
        assert rel(b.chernoff_paper, 1 - 1 / e3) < 1e-15
        assert rel(b.bayes_security, (e3 - 1) / (e3 + 1)) < 1e-15
        assert rel(b.exact, rr_tv_mp(1, 3)) < 1e-13
        assert rel(b.chernoff_tight, mp.sqrt(1 - mp.sech(mp.mpf(1) / 2) ** 6)) < 1e-14
    adv = lap([1.0], 3).value[0]
    assert rel(adv, laplace_tv_mp("1", 3)) < 1e-15
    assert adv < b.exact < b.chernoff_tight < b.bayes_security < b.chernoff_paper < b.yeom


def test_module_docstring_cites_the_advantage_right():
    # The module docstring cited eqs. (36)-(38) for Adv = TV; (38) is the paper's
    # 1 - 2^{-qC}, strictly below the exact advantage (jaxdp.paper.eq38: a lower bound).
    doc = " ".join(mb.__doc__.split())
    assert "(36)-(38)" not in doc and "(36)-(37)" in doc
    c = 0.5 - np.log(1.5)  # Chernoff information (nats) of the eps = 1 Laplace pair
    assert paper.eq38(c * np.log2(np.e), 3) < lap([1.0], 3).value[0]


def test_jit_equals_eager_and_float32():
    eps = jnp.linspace(0.01, 2.0, WIDTH)

    def rr(e):
        return mb.best_advantage_randomized_response(e, 3)

    def bounds(e, d=0.01):
        return mb.membership_bounds(e, 3, delta=d)

    for fn in (
        lambda e: mb.best_advantage_laplace(e, 3),
        lambda e: mb.best_advantage_gaussian(e + 0.1, 3),
        rr,
        bounds,
    ):
        eager = fn(eps)
        jitted = jax.jit(fn)(eps)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-15), eager, jitted)
        if isinstance(eager, mb.LaplaceAdvantage) or fn is rr:
            continue  # float32: test_laplace_float32; RR is covered by membership_bounds
        f32 = fn(eps.astype(jnp.float32))
        for a, b in zip(jax.tree.leaves(f32), jax.tree.leaves(eager), strict=True):
            assert a.dtype == jnp.float32
            np.testing.assert_allclose(a, b, rtol=5e-6)
    # under jit, value checks are skipped: negative epsilon gives NaN (documented policy)
    bad = jax.jit(lambda e: mb.best_advantage_laplace(e, 3))(-eps)
    assert np.all(np.isnan(bad.value)) and np.all(np.isnan(bad.error_bound))
    # Regression: negative traced sigma gave a negative advantage (-0.38 at sigma = -1),
    # and negative epsilon (delta = 2) finite, negative (> 1) bounds beside NaN exact values
    assert np.all(np.isnan(jax.jit(lambda s: mb.best_advantage_gaussian(s, 3))(-eps)))
    assert all(np.all(np.isnan(f)) for f in jax.jit(bounds)(-eps))  # (compiled above)
    by_delta = jax.jit(bounds)(eps, 2.0)
    assert np.all(np.isnan(by_delta.erlingsson))
    assert not np.any(np.isnan(jnp.stack(by_delta[:1] + by_delta[2:])))


def test_invalid_traced_arguments_give_nan_gradients():
    # nan in the derivative too (the rule of nan_where_invalid): jnp.where(bad, nan, value)
    # and the kernels' stand-ins for invalid arguments had derivative 0 there, a silent 0
    # gradient at a negative traced epsilon or sigma; valid elements of the same batch keep
    # their gradients (those of a batch without invalid elements, finite)
    fns = {
        "laplace": lambda e: mb.best_advantage_laplace(e, 2).value,
        "laplace_1": lambda e: mb.best_advantage_laplace(e, 1).value,
        "geometric": lambda e: mb.best_advantage_geometric(e, 1, sensitivity=2),
        "gaussian_sigma": lambda s: mb.best_advantage_gaussian(s, 2),
        "gaussian_sensitivity": lambda s: mb.best_advantage_gaussian(1.3, 2, sensitivity=s),
        "erlingsson_delta": lambda d: mb.membership_bounds(0.4, 2, delta=d).erlingsson,
    }
    for field in ("yeom", "erlingsson", "chernoff_paper", "bayes_security"):  # (the others:
        # jaxdp.conversions, tested there)
        fns[field] = lambda e, field=field: getattr(mb.membership_bounds(e, 2, delta=0.1), field)
    grad = jax.jit(lambda x: {k: jax.vmap(jax.grad(f))(x) for k, f in fns.items()})
    x = np.array([-1.0, 0.7, -1e-300, 0.3, -np.inf, 0.9, np.nan, 0.05])
    assert_nan_gradients_exactly_where_invalid(grad, x, 0.5)
    # delta outside [0, 1]: nan in the Erlingsson bound's delta-derivative
    assert np.isnan(jax.jit(jax.grad(fns["erlingsson_delta"]))(1.5))


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda x: mb.best_advantage_laplace(x, 2), "epsilon"),
        (lambda x: mb.best_advantage_laplace(1.0, 2, sensitivity=x), "sensitivity"),
        (mb.best_advantage_gaussian, "sigma"),
        (lambda x: mb.best_advantage_gaussian(1.0, sensitivity=x), "sensitivity"),
        (mb.best_advantage_randomized_response, "epsilon"),
        (mb.membership_bounds, "epsilon"),
        (lambda x: mb.membership_bounds(1.0, delta=x), "delta"),
    ],
)
def test_wrong_types_name_the_argument(call, arg):
    # Regression (QA21 B5): the value check ran before the conversion and raised numpy's
    # "ufunc 'isnan' not supported for the input types" without the argument's name.
    for bad in ("a", None, 1j):
        with pytest.raises(TypeError, match=rf"^{arg} must be (a )?real"):
            call(bad)


def test_argument_ranges_of_the_bounds():
    with pytest.raises(ValueError, match="delta must lie in"):
        mb.membership_bounds(1.0, 1, delta=2.0)
    # the exact n-fold Laplace recursion's setup (~n^4 work; 2.2 GB table at n = 1000, and
    # ~20 minutes): refused at once past 400, before anything is built
    for n in (401, 1000, 100_000):
        with pytest.raises(ValueError, match="supports n <= 400"):
            mb.best_advantage_laplace(1.0, n)
    # the table's size still bounds quadrature_nodes
    with pytest.raises(ValueError, match="GiB"):
        mb.best_advantage_laplace(1.0, 400, quadrature_nodes=10**6)


def test_refusals_point_to_what_accepts_that_n():
    # Regression: best_advantage_laplace sent every n it refuses to "membership_bounds(epsilon,
    # n) for bounds at any n", which itself refuses n = 1e8 (its exact binomial sum needs
    # 6 GiB); the hint now names the bound that takes any n
    n = 10**8
    with pytest.raises(ValueError, match="max_tv_eps_dp_chernoff_bound") as refused:
        mb.best_advantage_laplace(1.0, n)
    assert "n up to ~6.7e7" in str(refused.value)
    with pytest.raises(ValueError, match="GiB"):
        mb.membership_bounds(1.0, n)
    assert 0.0 < float(max_tv_eps_dp_chernoff_bound(1e-5, n)) < 1.0

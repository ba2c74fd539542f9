"""Chernoff information on the quadrature path for widely separated Laplace/Gaussian pairs.

Laplace(0, 1) against a Gaussian 30 to 300 scales away (the benchmark's "huge shift (30
scales)" edge case, a narrower and a wider Gaussian, and 300 scales), in both orders. Here
:math:`C_a` is :math:`e^{-22}` to :math:`e^{-275}`: a first derivative that divides the
rounding of the quadrature's mass terms by :math:`C_a` was wrong by far more than
:math:`f'` itself, and the float32 solve ended 10-70% off (``converged=False`` at 30
scales); float64 failed the same way from 100 scales.

The reference is independent of jaxdp: ``mpmath.quad`` of :math:`p^a q^{1-a}` and of its
:math:`a`-derivatives, split at the kink and around the integrand's peak, and Newton's
method on :math:`a` (at 20 digits, then at 50). At the maximiser the value follows from the
last evaluation by Taylor's formula.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mpmath import mp

import jaxdp as jd
from jaxdp.kernels import quadrature

#: Gaussian (loc, scale) against Laplace(0, 1)
CASES = ((30.0, 1.0), (30.0, 0.1), (100.0, 10.0), (300.0, 1.0))
#: ``benchmarks/bench_accuracy.py``'s 50-digit value for (30, 1) (closed form, golden search)
BENCH_30 = "21.983120123953488772"


def _moments(m, s, a):
    """``log C_a`` and its first two ``a``-derivatives by ``mp.quad`` (Laplace(0, 1) vs
    Gaussian(m, s), m > 0)."""
    lpn, lqn = -mp.log(2), -mp.log(s) - mp.log(2 * mp.pi) / 2
    # on x > 0 the log-integrand is a concave parabola: peak x0, width s / sqrt(1 - a)
    x0 = max(m - a * s * s / (1 - a), mp.zero)
    width = s / mp.sqrt(1 - a)
    top = a * (lpn - x0) + (1 - a) * (lqn - (x0 - m) ** 2 / (2 * s * s))
    pts = sorted({mp.zero, *(x0 + k * width for k in (-8, 0, 8) if x0 + k * width > 0)})
    pts = [-mp.inf, *pts, mp.inf]

    def terms(x):
        lp, lq = lpn - abs(x), lqn - (x - m) ** 2 / (2 * s * s)
        return lp - lq, mp.exp(a * lp + (1 - a) * lq - top)  # scaled: quad's tolerance is absolute

    def f01(x):  # integrand and l * integrand, as one complex quadrature
        l, e = terms(x)
        return mp.mpc(e, l * e)

    def f2(x):
        l, e = terms(x)
        return l * l * e

    i01 = mp.quad(f01, pts)
    i0, i1, i2 = i01.real, i01.imag, mp.quad(f2, pts)
    d1 = i1 / i0
    return top + mp.log(i0), d1, i2 / i0 - d1 * d1


@functools.cache
def _reference(m, s):
    """``(C, a*)`` at 50 digits: safeguarded Newton on ``d/da log C_a`` (increasing in a)."""
    lo, hi, a = mp.zero, mp.one, mp.mpf(0.5)
    for dps, stop in ((20, 1e-8), (50, 1e-20)):
        with mp.workdps(dps):
            m_, s_ = mp.mpf(m), mp.mpf(s)
            for _ in range(60):
                v, d1, d2 = _moments(m_, s_, a)
                lo, hi = (lo, a) if d1 > 0 else (a, hi)
                step = -d1 / d2
                if abs(step) < stop and dps == 50:
                    # log C at a + step = v + d1 step + d2 step^2 / 2, error O(step^3)
                    return -(v + d1 * step / 2), a + step
                a = a + step if lo < a + step < hi else (lo + hi) / 2
                if abs(step) < stop:
                    break
    raise AssertionError(f"reference Newton did not converge for {(m, s)}")


def _pairs(dtype, gaussian_first):
    locs, scales = (np.asarray(c, dtype) for c in zip(*CASES, strict=True))
    lap = jd.Laplace(jnp.zeros(len(CASES), dtype), jnp.ones(len(CASES), dtype))
    gau = jd.Gaussian(jnp.asarray(locs), jnp.asarray(scales))
    return (gau, lap) if gaussian_first else (lap, gau)


def _check(dtype, gaussian_first, rtol, atol_alpha):
    P, Q = _pairs(dtype, gaussian_first)
    r = jd.chernoff(P, Q)
    assert r.information.dtype == dtype and r.alpha.dtype == dtype
    assert bool(np.all(np.asarray(r.converged))), r
    for i, (m, s) in enumerate(CASES):
        want, a_star = _reference(m, s)
        if gaussian_first:  # C(Q, P) = C(P, Q), maximiser 1 - a*
            a_star = 1 - a_star
        got = float(r.information[i])
        rel = abs(got - float(want)) / float(want)
        assert rel <= rtol, (m, s, got, float(want), rel)
        assert abs(float(r.alpha[i]) - float(a_star)) <= atol_alpha, (m, s, r.alpha[i], a_star)


def test_reference_matches_benchmark_value():
    with mp.workdps(50):
        want = mp.mpf(BENCH_30)
        assert abs(_reference(30.0, 1.0)[0] - want) <= mp.mpf(10) ** -18 * want


@pytest.mark.parametrize("gaussian_first", [False, True], ids=["laplace-gauss", "gauss-laplace"])
def test_float32_huge_shift(gaussian_first):
    # float32 inputs keep the whole quadrature in float32 (nodes, weights, log-densities)
    P, Q = _pairs(np.float32, gaussian_first)
    consts = jax.eval_shape(quadrature.derivs_setup, P, Q)
    leaves = jax.tree_util.tree_leaves(consts)
    assert {x.dtype for x in leaves if jnp.issubdtype(x.dtype, jnp.floating)} == {
        np.dtype(np.float32)
    }
    # measured: <= 8e-8 relative (the old derivative: 0.12 to 0.68, converged=False at 30
    # scales); alpha <= 4e-8 away
    _check(np.float32, gaussian_first, rtol=5e-7, atol_alpha=1e-6)


def test_float64_huge_shift():
    # one order (the kernel is symmetric in its treatment of P and Q; float32 covers both)
    # measured: <= 2e-16 relative (the old derivative: 0.46 at 300 scales, converged=False
    # at 30 scales with the narrow Gaussian)
    _check(np.float64, False, rtol=1e-14, atol_alpha=1e-12)

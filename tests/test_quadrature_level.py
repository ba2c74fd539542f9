"""``Density(..., level=L)``: the quadrature rules' step, and the level-to-level change as
an error estimate, against mpmath on a density the default rule under-resolves."""

import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import jaxdp as jd
from jaxdp.kernels import quadrature

A = 0.3
# 0.3 N(-10, 0.5^2) + 0.7 N(10, 2^2): the log-density switches component within ~0.05 of
# x = -6, between the default rule's nodes (~0.25 apart there)
_W, _MU, _SD = (0.3, 0.7), (-10.0, 10.0), (0.5, 2.0)


def _log_mixture(x):
    terms = [
        np.log(w) - 0.5 * ((x - m) / s) ** 2 - np.log(s * np.sqrt(2 * np.pi))
        for w, m, s in zip(_W, _MU, _SD, strict=True)
    ]
    return jnp.logaddexp(*terms)


def _mixture(level):
    return jd.Density(_log_mixture, breakpoints=[-10.0, 10.0], scale=2.0, level=level)


Q = jd.Laplace(0.0, 3.0)


def _mp_log_bc(a):
    with mp.workdps(40):
        a = mp.mpf(a)

        def integrand(x):
            p = sum(w * mp.npdf(x, m, s) for w, m, s in zip(_W, _MU, _SD, strict=True))
            return p**a * (mp.exp(-abs(x) / 3) / 6) ** (1 - a)

        cuts = [-mp.inf, -20, -10, -6, 0, 10, 30, mp.inf]
        return mp.log(mp.quad(integrand, cuts))


def test_level_change_estimates_the_rules_error():
    want = _mp_log_bc(A)
    got = {L: float(jd.log_bc(_mixture(L), Q, A)) for L in (5, 6, 7)}
    err = {L: abs(float((mp.mpf(v) - want) / want)) for L, v in got.items()}
    # the default level misses the switch (README, Precision: limits of the quadrature
    # path); each level up squares the error roughly, so the change from 5 to 6 is the
    # error at 5 to within a few %
    assert err[5] > 1e-9
    assert err[6] < 1e-10
    assert err[7] < 1e-13
    estimate = abs(got[6] - got[5]) / abs(got[6])
    assert 0.9 * err[5] < estimate < 1.1 * err[5]


def test_chernoff_at_a_higher_level_vs_mpmath():
    res = jd.chernoff(_mixture(7), Q)
    assert bool(res.converged)
    a = float(res.alpha)
    # the value at the returned alpha, and alpha a stationary point of log C (mpmath's
    # central difference): the information is then right to second order in alpha's error
    np.testing.assert_allclose(float(res.information), float(-_mp_log_bc(a)), rtol=1e-13)
    h = 1e-6
    slope = (_mp_log_bc(a + h) - _mp_log_bc(a - h)) / (2 * h)
    assert abs(float(slope)) < 1e-8


def test_pair_level():
    fine, finer = _mixture(6), _mixture(7)
    assert fine.level == 6 and jd.Density(_log_mixture, scale=10.0).level == 5
    assert quadrature.pair_level(fine, finer) == 7
    assert quadrature.pair_level(jd.Laplace(0.0, 1.0), fine) == 6
    assert quadrature.pair_level(jd.Laplace(0.0, 1.0), jd.Gaussian(0.0, 1.0)) == 5
    # the built-in pair's second solve turns Q into a Density with no level of its own
    as_density = jd.Gaussian(0.0, 1.0)._as_density(jnp.zeros((1,)))
    assert as_density.level is None
    assert quadrature.pair_level(_mixture(4), as_density) == 4
    assert quadrature.pair_level(fine, finer, 3) == 3


@pytest.mark.parametrize(
    "level, error, match",
    [
        (2, ValueError, r"Density: level must be in 3\.\.10, got 2"),
        (11, ValueError, r"Density: level must be in 3\.\.10, got 11"),
        (5.0, TypeError, "Density: level must be an integer, got 5.0"),
        (True, TypeError, "Density: level must be an integer, got True"),
        (None, TypeError, "Density: level must be an integer, got None"),
    ],
)
def test_bad_level(level, error, match):
    with pytest.raises(error, match=match):
        jd.Density(_log_mixture, scale=10.0, level=level)

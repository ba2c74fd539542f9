"""Rényi divergences and KL of heavy-tailed densities on the quadrature path.

``p^a q^(1-a)`` of a Cauchy ``p`` against a Student-t(3) ``q`` decays like ``|x|^-(4 - 2a)``:
for orders ``a >= 3/2`` the integral diverges, below it converges slowly (``a = 1.45``:
``|x|^-1.1``). The rule ends ~3e12 scales out. Before, the orders that diverge came back
finite (3.67 and 17.3 at 1.5 and 1.75), and 1.4 and 1.45 were 3.8e-3 and 4.5e-2 off: the
tail beyond the last node was missing. References: mpmath at 40 digits, the tail mapped by
``x = z^-k`` (smooth in ``z``), two values of ``k`` agreeing; and the hand-derived Cauchy
closed form ``D_2(Cauchy(0, g1) || Cauchy(0, g2)) = log((g1^2 + g2^2)/(2 g1 g2))``. KL of a
t(nu) against a Laplace has the same slowly decaying tails (``p log(p/q) ~ |x|^-nu``).
"""

import math

import jax.numpy as jnp
import mpmath as mp
import numpy as np
from jax.scipy.special import gammaln

import jaxdp as jd


def _log_t(x, nu, scale=1.0):
    z = x / scale
    norm = gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * jnp.log(nu * jnp.pi) - math.log(scale)
    return norm - (nu + 1) / 2 * jnp.log1p(z * z / nu)


CAUCHY = jd.Density(lambda x: _log_t(x, 1.0))
T3 = jd.Density(lambda x: _log_t(x, 3.0))


def _mp_renyi_cauchy_t3(order, k):
    with mp.workdps(40):
        a = mp.mpf(order)

        def pdf(x, nu):
            c = mp.gamma((nu + 1) / 2) / (mp.gamma(mp.mpf(nu) / 2) * mp.sqrt(nu * mp.pi))
            return c * (1 + x * x / nu) ** (-(nu + 1) / mp.mpf(2))

        def f(x):
            return pdf(x, 1) ** a * pdf(x, 3) ** (1 - a)

        def tail(z):  # x = z^-k on (1, inf)
            return f(z ** (-k)) * k * z ** (-k - 1)

        total = 2 * (mp.quad(f, [0, 0.5, 1]) + mp.quad(tail, [0, 0.5, 1]))
        return float(mp.log(total) / (a - 1))


def test_cauchy_vs_t3_orders_above_one():
    orders = [1.2, 1.4, 1.45]
    want = [_mp_renyi_cauchy_t3(a, 20) for a in orders]
    check = [_mp_renyi_cauchy_t3(a, 30) for a in orders]
    np.testing.assert_allclose(check, want, rtol=1e-13)  # the reference's own agreement
    got = np.asarray(jd.renyi(CAUCHY, T3, jnp.asarray([*orders, 1.5, 1.75, 3.0])))
    # measured: 2.1e-12, 2.4e-9, 2.3e-9 (were 1.5e-7, 3.8e-3, 4.5e-2)
    np.testing.assert_allclose(got[:3], want, rtol=1e-8)
    assert np.all(got[3:] == np.inf), got  # |x|^-1, |x|^-0.5, |x|^2: divergent


def test_cauchy_scale_pair_closed_form():
    wide = jd.Density(lambda x: _log_t(x, 1.0, 2.0), scale=2.0)
    got = float(jd.renyi(CAUCHY, wide, 2.0))  # integrand ~ x^-2
    want = math.log((1.0 + 4.0) / (2.0 * 1.0 * 2.0))
    assert abs(got / want - 1.0) < 1e-13, got  # measured 1e-15


def _mp_kl_t_laplace(nu, k):
    with mp.workdps(40):
        nu = mp.mpf(nu)
        c = mp.gamma((nu + 1) / 2) / (mp.gamma(nu / 2) * mp.sqrt(nu * mp.pi))

        def f(x):  # p log(p/q), q = Laplace(0, 1)
            p = c * (1 + x * x / nu) ** (-(nu + 1) / 2)
            return p * (mp.log(p) + abs(x) + mp.log(2))

        def tail(z):
            return f(z ** (-k)) * k * z ** (-k - 1)

        return float(2 * (mp.quad(f, [0, 0.5, 1]) + mp.quad(tail, [0, 0.5, 1])))


def test_kl_of_a_heavy_tail_against_a_light_one():
    # p log(p/q) ~ x^-nu: converges slowly for nu = 1.2 (was 5.3e-3 short), 1.5 (1.9e-6)
    laplace = jd.Density(lambda x: -jnp.abs(x) - math.log(2.0), breakpoints=[0.0])
    for nu, tol in ((1.2, 1e-8), (1.5, 1e-10)):  # measured 3.3e-9, 2.5e-11
        want = _mp_kl_t_laplace(nu, 20)
        assert abs(_mp_kl_t_laplace(nu, 30) / want - 1.0) < 1e-13
        got = float(jd.kl(jd.Density(lambda x, nu=nu: _log_t(x, nu)), laplace))
        assert abs(got / want - 1.0) < tol, (nu, got, want)


def _lap_gauss(k):
    """A Laplace and a Gaussian as Densities of scale ``2**k`` (``x / 2**k`` exact)."""
    inv, log_c = 2.0**-k, k * math.log(2.0)
    lap = jd.Density(lambda x: -jnp.abs(x * inv) - (math.log(2.0) + log_c), scale=2.0**k)
    gauss = jd.Density(
        lambda x: -0.5 * (x * inv - 0.5) ** 2 - (log_c + 0.5 * math.log(2 * math.pi)),
        scale=2.0**k,
    )
    return lap, gauss


def test_kl_tv_of_densities_at_a_huge_scale():
    """The outermost tail nodes (~2.5e12 scales out) of a Density of scale 2^984 (~4e296)
    overflow to inf, and so do their weights: KL and TV were nan (inf * 0); both are
    invariant under x -> 2^984 x. (Farther out the densities themselves underflow
    in the bulk, ~1e-300 there: see README, "Limits of the quadrature path".)"""
    one, huge = _lap_gauss(0), _lap_gauss(984)
    for f in (jd.kl, jd.tv):
        for P, Q in ((one[0], one[1]), (one[1], one[0])):
            ref = float(f(P, Q))
            got = float(f(*(huge[i] for i in ((0, 1) if P is one[0] else (1, 0)))))
            # (measured 3.6e-9 for KL: densities ~1e-296 lose their far bulk to underflow)
            assert abs(got - ref) <= 1e-8 * ref, (f, got, ref)

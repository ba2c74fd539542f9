"""Total variation on the quadrature path, whose pieces end at the crossings of p and q.

``|p - q|`` has a kink wherever the densities cross; with the crossings as piece ends the
double-exponential rules converge as for ``log C_a`` (on the plain nodes they left ~1e-4).
The references are independent of jaxdp: ``mpmath.quad`` of ``|p - q|`` at 40 digits, split
at the kinks of the densities and at crossings found by ``mpmath.findroot`` from the sign
changes of ``log p - log q`` on a fine grid.
"""

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np

import jaxdp as jd
from jaxdp.kernels import quadrature

DPS = 40
_crossings = jax.jit(quadrature._crossings, static_argnums=2)
#: Laplace (loc, scale) against Gaussian (loc, scale), exact in float32: 4, 2 and 2 crossings
#: (never an odd count: log p - log q is a parabola on each side of the Laplace location
#: and tends to +inf in both tails)
LAP_GAU = ((0.0, 1.0, 0.0, 1.0), (0.5, 2.0, -1.0, 0.5), (0.0, 1.0, 3.0, 0.25))


def _lap(m, b):
    return lambda x: -abs(x - m) / b - mp.log(2 * b)


def _gau(m, s):
    return lambda x: -((x - m) ** 2) / (2 * s * s) - mp.log(s) - mp.log(2 * mp.pi) / 2


def _mixture(x):
    """0.5 N(-2, 1) + 0.5 N(2, 1)."""
    g = _gau(0, 1)
    return mp.log((mp.exp(g(x + 2)) + mp.exp(g(x - 2))) / 2)


def _mp_tv(logp, logq, kinks, lo, hi, n=2000):
    """0.5 int |p - q| with every crossing in [lo, hi] (and every kink) a breakpoint; also
    returns the crossings."""
    with mp.workdps(DPS):

        def ell(x):
            return logp(x) - logq(x)

        xs = [mp.mpf(lo) + (mp.mpf(hi) - lo) * k / n for k in range(n + 1)]
        vals = [ell(x) for x in xs]
        roots = [
            mp.findroot(ell, (a, b), solver="anderson")
            for a, b, fa, fb in zip(xs[:-1], xs[1:], vals[:-1], vals[1:], strict=True)
            if fa * fb < 0
        ]
        pts = sorted({mp.mpf(k) for k in kinks} | set(roots))

        def f(x):
            return abs(mp.exp(logp(x)) - mp.exp(logq(x)))

        return mp.quad(f, [-mp.inf, *pts, mp.inf]) / 2, roots


def _rel(got, want):
    return np.abs(np.asarray(got, np.float64) - want) / np.abs(want)


def test_laplace_gaussian_tv_vs_mpmath():
    refs = [_mp_tv(_lap(m1, b), _gau(m2, s), (m1,), -12, 12) for m1, b, m2, s in LAP_GAU]
    assert [len(r[1]) for r in refs] == [4, 2, 2]  # the cases cover what they claim
    want = np.array([float(r[0]) for r in refs])
    c = np.asarray(LAP_GAU)
    P, Q = jd.Laplace(c[:, 0], c[:, 1]), jd.Gaussian(c[:, 2], c[:, 3])
    assert _rel(jd.tv(P, Q), want).max() < 1e-13
    assert _rel(jd.tv(Q, P), want).max() < 1e-13
    P32, Q32 = (
        jd.Laplace(*c[:, :2].T.astype(np.float32)),
        jd.Gaussian(*c[:, 2:].T.astype(np.float32)),
    )
    assert _rel(jd.tv(P32, Q32), want).max() < 3e-7  # float32: ~1e-7 (README "Precision")
    # every crossing is found, to rounding; the unused slots hold P's location
    cross = np.sort(np.asarray(_crossings(P, Q, quadrature.DEFAULT_LEVEL)), -1)
    for row, (m1, _, _, _), (_, roots) in zip(cross, LAP_GAU, refs, strict=True):
        spare = row == m1
        assert spare.sum() == quadrature.MAX_CROSSINGS - len(roots)
        np.testing.assert_allclose(row[~spare], [float(r) for r in roots], rtol=0, atol=1e-14)


def test_user_density_tv_vs_mpmath():
    # a bimodal mixture against one Gaussian: not a family with a closed form
    mix = jd.Density(
        lambda x: (
            jnp.logaddexp(-0.5 * (x + 2) ** 2, -0.5 * (x - 2) ** 2)
            - 0.5 * jnp.log(2 * jnp.pi)
            - jnp.log(2.0)
        ),
        breakpoints=(-2.0, 2.0),
    )
    want, roots = _mp_tv(_mixture, _gau(0, 1.5), (-2, 0, 2), -12, 12)
    assert len(roots) == 4
    assert _rel(jd.tv(mix, jd.Gaussian(0.0, 1.5)), float(want)) < 1e-13


def test_crossings_beyond_the_slots_are_the_least_dense():
    # q = p (1 + sin(3x)/10) for the standard normal p (normalised: the sine is odd) crosses
    # p at every multiple of pi/3, more often than there are slots: the 8 kept are those
    # where the density is largest, and the ones left out, from 4 pi/3 on, cost 1e-7
    assert quadrature.MAX_CROSSINGS == 8
    wavy = jd.Density(
        lambda x: -0.5 * x**2 - 0.5 * jnp.log(2 * jnp.pi) + jnp.log1p(0.1 * jnp.sin(3 * x))
    )
    G = jd.Gaussian(0.0, 1.0)
    with mp.workdps(DPS):
        pts = [k * mp.pi / 3 for k in range(-15, 16)]  # npdf < 1e-47 beyond
        want = mp.quad(lambda x: mp.npdf(x) * abs(mp.sin(3 * x)) / 10, [-mp.inf, *pts, mp.inf])
    err = _rel(jd.tv(wavy, G), float(want / 2))
    assert 1e-9 < err < 3e-7  # the kinks left out show, and only at this size
    cross = np.sort(np.asarray(_crossings(wavy, G, quadrature.DEFAULT_LEVEL)))
    k = np.round(cross / (np.pi / 3))
    assert sorted(np.abs(k)) == [0, 1, 1, 2, 2, 3, 3, 4]
    np.testing.assert_allclose(cross, k * np.pi / 3, rtol=0, atol=1e-14)


def test_tv_gradient_matches_finite_differences():
    # the crossings move with the parameters, but |p - q| vanishes there (Leibniz rule)
    @jax.jit
    def f(loc, scale):
        return jd.tv(jd.Laplace(0.2, 1.1), jd.Gaussian(loc, scale))

    x0 = (-0.3, 0.9)
    grads = jax.jit(jax.grad(f, argnums=(0, 1)))(*map(jnp.float64, x0))
    h = 1e-5
    for i, g in enumerate(grads):
        up, down = list(x0), list(x0)
        up[i] += h
        down[i] -= h
        fd = (float(f(*up)) - float(f(*down))) / (2 * h)
        assert abs(float(g) - fd) <= 1e-8 * abs(fd), (i, float(g), fd)


def test_tv_hessian():
    # The crossings were held fixed: right first derivatives (the integrand vanishes
    # there), but the second derivatives missed the moving kink's term (N(m, 1) as a Density
    # vs N(1, 1.5): d2/dm2 -0.283 for 0.0607; Laplace vs Gaussian: d2/dmu2 -0.235 for
    # -0.1025, d2/(dmu dsigma) 0 for 0.132). Found by an ad hoc gradient sweep. Reference:
    # the Gaussian pair's closed-form TV (its own kernel), mean and scale.
    def tv(t, make):
        return jd.tv(make(t[0], t[1]), jd.Gaussian(1.0, 1.5))

    def normal(m, s):
        return jd.Density(
            lambda x, p: -0.5 * ((x - p[0]) / p[1]) ** 2 - jnp.log(p[1]) - 0.5 * np.log(2 * np.pi),
            params=(m, s),
            centre=m,
            scale=s,
        )

    hessians = jax.jit(lambda t: [jax.hessian(tv)(t, make) for make in (normal, jd.Gaussian)])
    got, want = (np.asarray(h) for h in hessians(jnp.asarray([0.0, 1.0])))
    assert np.all(np.abs(want) > 1e-2)
    np.testing.assert_allclose(got, want, rtol=1e-9)  # measured 6e-16

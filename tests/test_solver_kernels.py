"""The solver's fast paths: kernels' one-pass ``value_derivs`` (value, first three
derivatives) against ``log_bc`` and autodiff, the closed-form starting points, and the
precomputed scale-mismatch helpers against mpmath."""

import jax
import jax.numpy as jnp
import mp_refs
import mpmath as mp
import numpy as np
import pytest
from autodiff_refs import autodiff3

import jaxdp as jd
from jaxdp import _special as sp
from jaxdp.kernels import categorical, gaussian, laplace

RNG = np.random.default_rng(11)
N = 48
# random pairs plus edge cases: near-identical, extreme scale ratios, big shifts, a near 0/1
_EDGE = np.array(
    [
        [0.0, 1.0, 1e-9, 1.0 + 1e-9],
        [0.0, 1.0, 2.0, 1e-6],
        [0.0, 1.0, 1.0, 1e6],
        [0.0, 1.0, 30.0, 1.3],
        [0.0, 1e-3, 1.0, 1.0],
        [0.0, 1.0, 0.0, 1.5],
        [0.0, 1.0, 1.0, 1.0],
        [0.0, 3.0, 0.0, 3.0 * (1 + 1e-10)],
    ]
)
_RAND = np.stack(
    [
        RNG.normal(size=N),
        np.exp(RNG.uniform(-3, 3, N)),
        RNG.normal(size=N) * 3,
        np.exp(RNG.uniform(-3, 3, N)),
    ],
    axis=1,
)
PAIRS = np.concatenate([_EDGE, _RAND])
ALPHA = np.concatenate([np.full(len(_EDGE), 0.37), RNG.uniform(0.001, 0.999, N)])
KERNELS = [(jd.Laplace, laplace), (jd.Gaussian, gaussian)]


def _pq(cls):
    return cls(PAIRS[:, 0], PAIRS[:, 1]), cls(PAIRS[:, 2], PAIRS[:, 3])


def _rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.abs(got - want) / np.maximum(np.abs(want), 1e-300)


@jax.jit
def _laplace_value_derivs(P, Q, a):
    return laplace.value_derivs(laplace.derivs_setup(P, Q), a)


@jax.jit
def _gaussian_value_derivs(P, Q, a):
    return gaussian.value_derivs(gaussian.derivs_setup(P, Q), a)


_VALUE_DERIVS = {jd.Laplace: _laplace_value_derivs, jd.Gaussian: _gaussian_value_derivs}


@pytest.mark.parametrize("cls", [jd.Laplace, jd.Gaussian], ids=["laplace", "gaussian"])
def test_value_derivs_match_log_bc_and_autodiff(cls):
    P, Q = _pq(cls)
    a = jnp.asarray(ALPHA)
    out = _VALUE_DERIVS[cls](P, Q, a)
    ref = autodiff3(P, Q, a)
    # the value: two independent stable forms of the same closed form agree to rounding
    assert _rel(out[0], ref[0]).max() < 5e-14
    # first two derivatives: the hand-written forms keep relative accuracy where autodiff
    # of log_bc also does (the pairs here are at least 1e-9 apart)
    assert _rel(out[1], ref[1]).max() < 1e-7
    assert _rel(out[2], ref[2]).max() < 1e-7
    if len(out) == 4:  # Laplace's third derivative drives Halley steps only
        scale = np.maximum(np.abs(np.asarray(ref[3])), np.abs(np.asarray(ref[2])))
        assert (np.abs(np.asarray(out[3]) - np.asarray(ref[3])) / scale).max() < 1e-6


def test_value_vs_mpmath_at_random_alphas():
    P, Q = _pq(jd.Laplace)
    out = np.asarray(_laplace_value_derivs(P, Q, jnp.asarray(ALPHA))[0])
    for i in range(0, len(PAIRS), 7):
        want = mp_refs.lap_log_bc(*PAIRS[i], ALPHA[i])
        assert _rel(out[i], float(want)) < 1e-13, (PAIRS[i], ALPHA[i])
    P, Q = _pq(jd.Gaussian)
    out = np.asarray(_gaussian_value_derivs(P, Q, jnp.asarray(ALPHA))[0])
    for i in range(0, len(PAIRS), 7):
        want = mp_refs.gau_log_bc(*PAIRS[i], ALPHA[i])
        assert _rel(out[i], float(want)) < 1e-13, (PAIRS[i], ALPHA[i])


def _gaussian_alpha_star(m1, s1, m2, s2):
    """The root in (0, 1) of the stationarity quadratic, solved in mpmath from scratch."""
    with mp.workdps(50):
        m1, s1, m2, s2 = map(mp.mpf, (m1, s1, m2, s2))

        def dlog_c(a):
            va = a * s2**2 + (1 - a) * s1**2
            g = mp.log(va) - a * mp.log(s2**2) - (1 - a) * mp.log(s1**2)
            return -g / 2 - a * (1 - a) * (m2 - m1) ** 2 / (2 * va)

        return mp.findroot(
            lambda a: mp.diff(dlog_c, a), (mp.mpf("1e-30"), 1 - mp.mpf("1e-30")), solver="anderson"
        )


def test_gaussian_closed_form_start_is_the_maximiser():
    # away from sigma2 << sigma1 (where the two roots merge) the quadratic's root is the
    # answer to rounding; the solver then stops without a Newton step
    cases = PAIRS[[0, 3, 5, 6, 8, 9, 10, 11]]
    P, Q = jd.Gaussian(cases[:, 0], cases[:, 1]), jd.Gaussian(cases[:, 2], cases[:, 3])
    a0 = np.asarray(gaussian.initial_alpha(gaussian.derivs_setup(P, Q)))
    for i, c in enumerate(cases):
        want = float(_gaussian_alpha_star(*c))
        assert abs(a0[i] - want) <= 1e-13 * min(want, 1 - want), (c, a0[i], want)
    r = jd.chernoff(P, Q)
    assert int(jnp.max(r.iterations)) == 0 and bool(jnp.all(r.converged))


def test_laplace_start_is_the_pure_scale_optimum():
    # Delta = 0: log C = -g(a, rho), maximiser 1/rho - 1/K exactly
    b2 = np.array([1e-3, 0.5, 1.0 - 1e-4, 1.0 + 1e-6, 2.0, 1e3])
    P, Q = jd.Laplace(np.zeros(6), np.ones(6)), jd.Laplace(np.zeros(6), b2)
    a0 = np.asarray(laplace.initial_alpha(laplace.derivs_setup(P, Q)))
    r = jd.chernoff(P, Q)
    np.testing.assert_allclose(a0, r.alpha, rtol=0, atol=1e-10)


def test_laplace_blended_start_bounds_the_steps():
    # The blended start (initial_alpha) leaves at most one Halley step in float32 and two
    # in float64 on wide random pairs; the pure-scale start took up to 16 on such pairs.
    rng = np.random.default_rng(3)
    n = 2000
    locs = rng.normal(size=(2, n)) * 3
    scales = np.exp(rng.uniform(-6, 6, (2, n)))
    for dtype, most in ((jnp.float64, 2), (jnp.float32, 1)):
        c = lambda x: jnp.asarray(x, dtype)  # noqa: E731, B023
        r = jd.chernoff(jd.Laplace(c(locs[0]), c(scales[0])), jd.Laplace(c(locs[1]), c(scales[1])))
        assert bool(jnp.all(r.converged)), dtype
        assert int(jnp.max(r.iterations)) <= most, (dtype, np.bincount(r.iterations))


def test_categorical_two_point_start_is_the_maximiser():
    # For two categories initial_alpha is the closed-form maximiser: it agrees with an
    # independent high-precision maximisation (mp_refs.maximise), and the solver then needs at most
    # one derivative evaluation after the start, then a polishing step (up to 7 from 1/2).
    rng = np.random.default_rng(5)
    n = 2000
    p1, q1 = rng.uniform(0.01, 0.99, (2, n))
    P = jd.Categorical(jnp.asarray(np.stack([p1, 1 - p1], -1)))
    Q = jd.Categorical(jnp.asarray(np.stack([q1, 1 - q1], -1)))
    a0 = np.asarray(categorical.initial_alpha(categorical.derivs_setup(P, Q)))
    span = np.abs(np.log(p1 / q1) - np.log((1 - p1) / (1 - q1)))
    far = span >= np.finfo(float).eps ** (1 / 3)
    for i in np.flatnonzero(far)[:20]:
        # the masses as stored (1 - p1 rounded), not as meant
        pp, qq = [mp.mpf(float(x)) for x in P.probs[i]], [mp.mpf(float(x)) for x in Q.probs[i]]

        def neg_log_c(a, pp=pp, qq=qq):
            return -mp.log(pp[0] ** a * qq[0] ** (1 - a) + pp[1] ** a * qq[1] ** (1 - a))

        _, want = mp_refs.maximise(neg_log_c)
        assert abs(a0[i] - float(want)) <= 1e-12, (p1[i], q1[i], a0[i], want)
    r = jd.chernoff(P, Q)
    assert bool(jnp.all(r.converged))
    assert int(jnp.max(r.iterations)) <= 1, np.bincount(r.iterations)
    # the start carries the rounding of l = log p - log q (~eps absolute, so ~eps/|l| in
    # log |l|) divided by the span l1 - l2, plus a few ulp of alpha itself (~1e-16 each);
    # the solver polishes it away
    l1, l2 = np.log(p1 / q1), np.log((1 - p1) / (1 - q1))
    bound = 8 * np.finfo(float).eps / (np.minimum(np.abs(l1), np.abs(l2)) * span)
    err = np.abs(a0 - np.asarray(r.alpha))
    assert np.all(err[far] <= bound[far] + 1e-15), np.max(err[far] / bound[far])
    # more categories: 1/2, the solver's default
    P3 = jd.Categorical(jnp.asarray([0.2, 0.3, 0.5]))
    Q3 = jd.Categorical(jnp.asarray([0.5, 0.3, 0.2]))
    assert float(categorical.initial_alpha(categorical.derivs_setup(P3, Q3))) == 0.5


def test_mixture_gap_pre_vs_mpmath():
    rho = np.array([-30.0, -3.0, -1.0, -0.5, -1e-3, -1e-9, 0.0, 1e-9, 1e-3, 0.5, 1.0, 3.0, 30.0])
    num = np.exp(rho)
    sc = sp.scale_consts(jnp.asarray(num), jnp.ones_like(jnp.asarray(num)))
    # the precomputed phi(rho), exp(rho) - 1 and exp(-rho) - 1, within a few ulp (phi ~ rho^2
    # doubles the rounding of rho; exp(-rho) - 1 = -K/w adds one)
    with mp.workdps(50):
        for i, x in enumerate(num):
            r = mp.log(mp.mpf(x))
            for got, want in (
                (sc.phr, mp.expm1(r) - r),
                (sc.k, mp.expm1(r)),
                (sc.km, mp.expm1(-r)),
            ):
                assert abs(float(got[i]) - float(want)) <= 1e-15 * abs(float(want)), (x, got[i])
    for a in (1e-6, 0.2, 0.5, 0.7, 1 - 1e-6):
        got = np.asarray(sp.mixture_gap_pre(jnp.full(rho.shape, a), sc))
        with mp.workdps(50):
            for i, x in enumerate(num):
                r, am = mp.log(mp.mpf(x)), mp.mpf(a)
                want = mp.log(1 - am + am * mp.exp(r)) - am * r
                # relative accuracy down to g ~ 1e-25 (rho = 1e-9, a = 1e-6)
                assert abs(got[i] - float(want)) <= 4e-15 * float(want), (a, x, got[i])


def test_float32_quadrature_converges():
    # far quadrature nodes carry |log p/q| ~ 1e24, whose square overflows float32: the
    # second derivative must not become nan (it did: every float32 mixed pair bisected to
    # the iteration cap and reported converged=False)
    rng = np.random.default_rng(5)
    locs = rng.normal(size=(2, 6))
    scales = np.exp(rng.uniform(-1, 1, (2, 6)))
    r64 = jd.chernoff(jd.Laplace(locs[0], scales[0]), jd.Gaussian(locs[1], scales[1]))
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    r32 = jd.chernoff(
        jd.Laplace(f32(locs[0]), f32(scales[0])), jd.Gaussian(f32(locs[1]), f32(scales[1]))
    )
    assert bool(jnp.all(r32.converged)) and int(jnp.max(r32.iterations)) <= 8
    np.testing.assert_allclose(r32.information, r64.information, rtol=2e-5)


def test_packed_constants_unpack_exactly():
    # the solver stacks its per-pair constants into one array (compile time); unpacking must
    # give every leaf back bit for bit, with its shape and dtype, and leave the rest alone
    from jaxdp.chernoff import _pack

    n = 5
    x = jnp.linspace(-1e300, 1e-300, n)
    params = (jnp.arange(n, dtype=jnp.float64),)
    consts = (
        (x, jnp.exp(x[:2]).sum()),  # a scalar: not packed
        jnp.stack([x * 3.0, -x]).reshape(2, 1, n),  # leading axes
        x > 0,  # booleans travel as 0/1
        params[0],  # an input: packed would only add a copy
        jd.Laplace(x, jnp.full(n, 2.0)),  # a distribution stays whole
    )
    packed, unpack = _pack(consts, params, (n,), jnp.float64)
    assert packed.shape == (4, n)
    back = unpack(packed)
    for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(consts), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert back[3] is params[0] and back[4] is consts[4]
    # float32 and scalar pairs are left unpacked (slower packed; see _pack)
    for shape, dtype in (((n,), jnp.float32), ((), jnp.float64)):
        same, _ = _pack(consts, params, shape, dtype)
        assert same is consts


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-14), (np.float32, 4e-7)])
def test_mixture_gap_where_exp_rho_overflows(dtype, rtol):
    # |rho| beyond log(max float) - 5 (Gaussian scale ratios past ~1e153, float32 ~1e18):
    # a * expm1(rho) overflowed to inf (g = inf; 0 * inf = nan at a = 0). Weights 0 and 1,
    # tiny weights on either side, Rényi orders above 1 (finite only for rho > 0).
    lim = float(np.log(np.finfo(dtype).max))
    rhos = np.concatenate([lim + np.array([-8.0, -5.5, -4.5, 0.0, 30.0]), [2 * lim]])
    rhos = np.concatenate([rhos, -rhos])
    tiny = 1e-300 if dtype == np.float64 else 1e-30
    weights = (0.0, tiny, 1e-10, 0.3, 0.5, 0.7, 1 - 1e-7, 1.0, 1.5, 3.0)
    a, rho = (np.asarray(v, dtype) for v in np.meshgrid(weights, rhos))
    got = np.asarray(sp.mixture_gap(jnp.asarray(a), jnp.asarray(rho)))
    with mp.workdps(60):
        for g, ai, ri in zip(got.ravel(), a.ravel(), rho.ravel(), strict=True):
            am, rm = mp.mpf(float(ai)), mp.mpf(float(ri))
            if ai > 1 and ri < 0:  # 1 - a + a e^rho < 0: the Rényi integral diverges
                assert not g >= 0, (ai, ri, g)
                continue
            # 1 - a + a e^rho in the form that keeps a tiny a, or a tiny e^rho, at 60 digits
            inner = mp.log1p(am * mp.expm1(rm)) if ai <= 0.5 else mp.log((1 - am) + am * mp.exp(rm))
            want = inner - am * rm
            # relative, or absolute where the gap is ~0 (a in {0, 1} to rounding)
            err = abs(g - want) / max(abs(want), mp.mpf(1e-30))
            # the tiny weight with rho just past the cut leaves g ~ 14 from rho - 691 (cond ~50)
            assert err <= rtol * (50 if ai == tiny else 1), (ai, ri, g, float(want))

"""Tests for noise calibration (jaxdp.calibrate), budget allocation (jaxdp.allocation) and
the ``jaxdp calibrate`` command.

References: the single-release metrics of the built-in mechanisms in closed form, derived by
hand and cross-checked here against direct mpmath summation/quadrature of the raw densities
(60 digits); calibrations are the roots of ``n * metric(p) = budget`` found by
``mpmath.findroot`` at 40 digits.

Compile time dominates: every call uses the budget vector ``B`` (one shape), so each
(mechanism, metric, compositions) combination compiles once.
"""

from __future__ import annotations

import importlib
import json
import math

import jax
import jax.numpy as jnp
import mp_refs
import mpmath as mp
import numpy as np
import pytest

import jaxdp as jd
from jaxdp import mechanisms
from jaxdp.allocation import allocate_budget
from jaxdp.calibrate import calibrate
from jaxdp.cli import main

B = np.logspace(-6, np.log10(5.0), 12)  # the checker's range: 1e-6 .. 5
B_TV = np.array([1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.99])
RTOL = 1e-10  # the bound on the calibrated parameter (float64)

# --------------------------------------------------------------------------------------------
# mpmath references
# --------------------------------------------------------------------------------------------


def mp_metric(name, metric, p, s=1):
    """Single-release metric in closed form, at the exact binary values of p and s."""
    p, s = mp.mpf(p), mp.mpf(s)
    t = s / p if name in ("laplace", "gaussian") else p  # strength
    if metric == "chernoff":
        if name == "laplace":
            return t / 2 - mp.log(1 + t / 2)
        if name == "gaussian":
            return t**2 / 8
        if name == "randomized_response":
            return mp.log(mp.cosh(t / 2))
        return t / 2 - mp.log(1 + s * mp.tanh(t / (2 * s)))  # geometric, shift s
    if metric == "kl":
        if name == "laplace":
            return t - 1 + mp.exp(-t)
        if name == "gaussian":
            return t**2 / 2
        if name == "randomized_response":
            return t * mp.tanh(t / 2)
        return (t / s) * (s - (1 - mp.exp(-t)) / mp.sinh(t / s))
    if name == "laplace":
        return 1 - mp.exp(-t / 2)
    return mp.tanh(t / 2)  # randomized response


def mp_calibrate(name, metric, budget, guess, *, s=1, n=1):
    with mp.workdps(40):
        return mp.findroot(
            lambda q: n * mp_metric(name, metric, q, s) - mp.mpf(budget), mp.mpf(guess)
        )


def rel_err(x, ref):
    return float(abs((mp.mpf(x) - ref) / ref))


def _geometric_direct(eps, s, a):
    """-log sum_k p_k^a q_k^(1-a) for DiscreteLaplace(0, b) vs (s, b), b = s/eps."""
    b = mp.mpf(s) / eps
    lt = mp.log(mp.tanh(1 / (2 * b)))
    term = lambda k: mp.exp(lt - (a * abs(k) + (1 - a) * abs(k - s)) / b)  # noqa: E731
    return -mp.log(mp.nsum(term, [-mp.inf, mp.inf]))


def _geometric_kl_direct(eps, s):
    b = mp.mpf(s) / eps
    lt = mp.log(mp.tanh(1 / (2 * b)))
    term = lambda k: mp.exp(lt - abs(k) / b) * (abs(k - s) - abs(k)) / b  # noqa: E731
    return mp.nsum(term, [-mp.inf, mp.inf])


def test_mp_closed_forms_match_direct_evaluation():
    """The hand-derived closed forms above agree with direct sums/integrals (a* = 1/2)."""
    with mp.workdps(60):
        for eps, s in ((mp.mpf("0.3"), 1), (mp.mpf("2.5"), 1), (mp.mpf("0.7"), 3)):
            ref = _geometric_direct(eps, s, mp.mpf(1) / 2)
            assert abs(mp_metric("geometric", "chernoff", eps, s) / ref - 1) < mp.mpf(10) ** -40
            kl_ref = _geometric_kl_direct(eps, s)
            assert abs(mp_metric("geometric", "kl", eps, s) / kl_ref - 1) < mp.mpf(10) ** -40
            # symmetric pair: the maximiser is 1/2 (derivative of the objective vanishes)
            slope = mp.diff(lambda a, e=eps, s=s: _geometric_direct(e, s, a), mp.mpf(1) / 2)
            assert abs(slope) < 1e-30
        b = mp.mpf("0.8")
        lap = mp.quad(
            lambda x: mp.exp(-(abs(x) + abs(x - 1)) / (2 * b)) / (2 * b), [-mp.inf, 0, 1, mp.inf]
        )
        assert abs(-mp.log(lap) / mp_metric("laplace", "chernoff", b) - 1) < mp.mpf(10) ** -40
        e = mp.mpf("1.3")
        p = mp.exp(e) / (1 + mp.exp(e))
        assert (
            abs(-mp.log(2 * mp.sqrt(p * (1 - p))) - mp_metric("randomized_response", "chernoff", e))
            < 1e-50
        )
        pts = [-mp.inf, 0, mp.mpf(1) / 2, 1, mp.inf]
        lap_kl = mp.quad(lambda x: mp.exp(-abs(x) / b) / (2 * b) * (abs(x - 1) - abs(x)) / b, pts)
        assert abs(lap_kl / mp_metric("laplace", "kl", b) - 1) < mp.mpf(10) ** -40
        lap_tv = mp.quad(
            lambda x: (mp.exp(-abs(x) / b) - mp.exp(-abs(x - 1) / b)) / (2 * b), pts[:3]
        )
        assert abs(lap_tv / mp_metric("laplace", "tv", b) - 1) < mp.mpf(10) ** -40


# --------------------------------------------------------------------------------------------
# calibrate: accuracy against mpmath, achieved <= budget, monotonicity
# --------------------------------------------------------------------------------------------

CASES = [
    ("laplace", "chernoff", 1, 1.0),
    ("laplace", "chernoff", 10, 2.5),
    ("gaussian", "chernoff", 1, 1.0),
    ("gaussian", "chernoff", 10, 0.5),
    ("geometric", "chernoff", 1, 1.0),
    ("geometric", "chernoff", 1, 3.0),  # reuses the compiled solver (sensitivity is traced)
    ("randomized_response", "chernoff", 1, 1.0),
    ("laplace", "kl", 1, 1.0),
    ("geometric", "kl", 1, 2.0),
    ("randomized_response", "kl", 1, 1.0),
]


@pytest.mark.parametrize(("name", "metric", "n", "s"), CASES)
def test_matches_mpmath(name, metric, n, s):
    r = calibrate(name, B, sensitivity=s, compositions=n, metric=metric)
    p = np.asarray(r.parameter)
    assert p.dtype == np.float64 and p.shape == B.shape
    assert np.all(np.asarray(r.converged))
    assert np.all(np.asarray(r.achieved) <= B)  # never above the budget
    np.testing.assert_allclose(np.asarray(r.achieved), B, rtol=1e-12)
    errs = [
        rel_err(pi, mp_calibrate(name, metric, b, pi, s=s, n=n)) for b, pi in zip(B, p, strict=True)
    ]
    assert max(errs) < RTOL, max(errs)
    # monotone: more budget, less noise
    d = np.diff(p)
    assert np.all(d < 0) if name in ("laplace", "gaussian") else np.all(d > 0)


def test_tv_single_release_and_limits():
    budgets = B_TV.copy()
    budgets[-2:] = [1.0, 2.5]  # unreachable: TV < 1 for every scale -> the no-noise limit
    r = calibrate("laplace", budgets, metric="tv")
    p, ok = np.asarray(r.parameter), np.asarray(r.converged)
    assert ok.all()
    for b, pi in zip(budgets[:-2], p[:-2], strict=True):
        assert rel_err(pi, mp_calibrate("laplace", "tv", b, pi)) < RTOL
    assert np.all(np.asarray(r.achieved)[:-2] <= budgets[:-2])
    np.testing.assert_array_equal(p[-2:], [0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(r.achieved)[-2:], [1.0, 1.0])


def test_tv_composed_gaussian_closed_form():
    # TV(N(0,s^2)^n, N(D,s^2)^n) = erf(sqrt(n) D / (2 sqrt(2) sigma))
    n, s = 4, 1.5
    r = calibrate("gaussian", B_TV, metric="tv", compositions=n, sensitivity=s)
    for b, pi in zip(B_TV, np.asarray(r.parameter), strict=True):
        with mp.workdps(40):
            ref = mp.sqrt(n) * s / (2 * mp.sqrt(2) * mp.erfinv(mp.mpf(b)))
        assert rel_err(pi, ref) < RTOL
    assert np.all(np.asarray(r.achieved) <= B_TV)


def test_tv_composed_randomized_response_binomial():
    n = 5
    r = calibrate("randomized_response", B_TV, metric="tv", compositions=n)

    def tv_n(eps):  # TV of Bin(n, p) vs Bin(n, 1 - p)
        p = mp.exp(eps) / (1 + mp.exp(eps))
        terms = [
            mp.binomial(n, k) * (p**k * (1 - p) ** (n - k) - (1 - p) ** k * p ** (n - k))
            for k in range(n + 1)
        ]
        return mp.fsum(t for t in terms if t > 0)

    for b, pi in zip(B_TV, np.asarray(r.parameter), strict=True):
        with mp.workdps(40):
            ref = mp.findroot(lambda e, b=b: tv_n(e) - mp.mpf(b), mp.mpf(pi))
        assert rel_err(pi, ref) < 1e-9  # the engine's binomial kernel is ~1e-12 accurate
    assert np.all(np.asarray(r.achieved) <= B_TV)


def test_tv_composed_geometric_vs_mpmath():
    # it raised NotImplementedError (no exact n-fold TV kernel for the discrete Laplace pair)
    n = 3
    s = np.array([2, 3, 2, 5] * 3)
    r = calibrate("geometric", B_TV, metric="tv", compositions=n, sensitivity=s)
    p = np.asarray(r.parameter)
    assert np.asarray(r.converged).all()
    assert np.all(np.asarray(r.achieved) <= B_TV)
    np.testing.assert_array_equal(r.achieved, jd.best_advantage_geometric(p, n, sensitivity=s))
    for i in (0, 4, 7, 11):  # the root of the 40-digit TV from the pmfs (mp_refs)
        with mp.workdps(40):
            ref = mp.findroot(
                lambda e, i=i: mp_refs.dl_n_fold_tv(e, n, int(s[i])) - mp.mpf(B_TV[i]),
                mp.mpf(p[i]),
            )
        assert rel_err(p[i], ref) < RTOL, i
    # tiny budgets: each Z is 0 or s with probability 1/2 as eps -> 0, so TV ~ eps E[(n - 2
    # Bin(n, 1/2))_+] = 3 eps / 4 for n = 3, whatever the sensitivity
    # (under an outer jit: a constant sensitivity there was refused as traced)
    tiny = np.array([1e-300, 1e-200, 1e-100])
    r = jax.jit(lambda b: calibrate("geometric", b, metric="tv", compositions=n, sensitivity=2))(
        tiny
    )
    assert np.asarray(r.converged).all()
    np.testing.assert_allclose(r.parameter, tiny / 0.75, rtol=1e-12)
    with pytest.raises(TypeError, match="sensitivity must be concrete"):
        jax.jit(lambda s: calibrate("geometric", 0.1, metric="tv", compositions=2, sensitivity=s))(
            2.0
        )
    # constants under an outer jit are checked like eager values (they were skipped, and 2.5
    # sized the sum as 2)
    for s, match in (
        (2.5, "hold integer values, got 2.5"),
        (-1.0, "be positive and finite, got -1"),
    ):
        with pytest.raises(ValueError, match=f"sensitivity must {match}"):
            jax.jit(
                lambda b, s=s: calibrate("geometric", b, metric="tv", compositions=2, sensitivity=s)
            )(0.1)
    with pytest.raises(ValueError, match="budget must be >= 0"):
        jax.jit(lambda s: calibrate("laplace", -0.1, sensitivity=s))(1.0)


def test_round_trip_through_the_engine():
    """Rebuild the mechanisms at the calibrated parameters and evaluate the engine directly."""
    n, s = 10, 0.5  # shares the compiled solver with the (gaussian, 10, 0.5) case above
    r = calibrate("gaussian", B, sensitivity=s, compositions=n)
    P, Q = mechanisms.gaussian(s, sigma=r.parameter)
    c = np.asarray(jax.jit(jd.chernoff)(jd.Product.iid(P, n), jd.Product.iid(Q, n)).information)
    assert np.all(c <= B)  # never above the budget
    np.testing.assert_allclose(c, B, rtol=RTOL)
    # n-fold Chernoff information is additive: one release carries B / n
    c1 = np.asarray(jax.jit(jd.chernoff)(P, Q).information)
    np.testing.assert_allclose(c1, B / n, rtol=RTOL)


def test_budget_zero_and_infinity():
    budgets = B.copy()
    budgets[0], budgets[-1] = 0.0, np.inf
    r = calibrate("laplace", budgets)
    p = np.asarray(r.parameter)
    assert p[0] == np.inf and p[-1] == 0.0  # no release / no noise
    assert np.asarray(r.achieved)[0] == 0.0 and np.asarray(r.achieved)[-1] == np.inf
    assert np.asarray(r.converged).all()
    r = calibrate("randomized_response", budgets)
    p = np.asarray(r.parameter)
    assert p[0] == 0.0 and p[-1] == np.inf


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget": -0.1}, "budget must be >= 0"),
        ({"budget": [0.1, np.nan]}, "budget contains NaN"),
        ({"budget": 0.1, "sensitivity": 0.0}, "sensitivity"),
        # a subnormal sensitivity: XLA flushes it to 0 (was nan with converged=False)
        ({"budget": 0.5, "sensitivity": 1e-320}, "sensitivity must be at least"),
        ({"budget": 0.1, "compositions": 0}, "compositions"),
        ({"budget": 0.1, "compositions": 2.0}, "compositions"),
        ({"budget": 0.1, "metric": "renyi"}, "metric"),
        ({"budget": 0.1, "max_steps": 0}, "max_steps"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibrate("laplace", **kwargs)


def test_exact_tv_size_limits_name_compositions():
    # refused from jaxdp.membership as "n=401: ..." and "n=2, sensitivity ...": calibrate
    # has no argument n
    with pytest.raises(ValueError, match=r"^compositions must be <= 400 .*, got 401") as e:
        calibrate("laplace", 0.1, metric="tv", compositions=401)
    # (it pointed to membership_bounds "for any n", which refuses n above ~6.7e7)
    assert str(e.value).endswith("max_tv_eps_dp_chernoff_bound(epsilon, n) for a bound at any n")
    with pytest.raises(ValueError, match=r"^compositions and sensitivity too large: .*adds"):
        calibrate("geometric", 0.1, sensitivity=2.0**40, metric="tv", compositions=2)


def test_compositions_and_max_steps_numpy_and_beyond_the_integer_width():
    # JAX raised an OverflowError about an argument "x2" from inside the solver
    r = calibrate("randomized_response", 0.1, compositions=np.int64(2), max_steps=np.int64(64))
    assert bool(r.converged)  # (numpy integers: max_steps=np.int64(64) was refused)
    with pytest.raises(ValueError, match=r"compositions must be below 2\*\*63"):
        calibrate("laplace", 0.1, compositions=2**63)
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ValueError, match=r"compositions must be below 2\*\*31 without"):
            calibrate("laplace", 0.1, compositions=2**31)
    finally:
        jax.config.update("jax_enable_x64", True)


def test_bad_mechanism_and_sensitivity():
    with pytest.raises(ValueError, match="mechanism"):
        calibrate("exponential", 0.1)
    with pytest.raises(TypeError, match="mechanism"):
        calibrate(3, 0.1)
    with pytest.raises(ValueError, match="sensitivity does not apply"):
        calibrate("randomized_response", 0.1, sensitivity=2.0)
    with pytest.raises(ValueError, match="integer"):
        calibrate("geometric", 0.1, sensitivity=1.5)


# --------------------------------------------------------------------------------------------
# jit / dtypes / broadcasting / gradients (Gaussian: cheap to compile, exact closed forms)
# --------------------------------------------------------------------------------------------


def test_float32_under_jit():
    # dtypes follow the budgets; under jit an invalid budget gives nan, converged False
    b32 = B.astype(np.float32)
    b32[3] = -1.0
    r = jax.jit(lambda b: calibrate("gaussian", b))(b32)
    p = np.asarray(r.parameter)
    assert p.dtype == np.float32 and np.asarray(r.achieved).dtype == np.float32
    assert np.isnan(p[3]) and not bool(r.converged[3])
    ok = np.arange(B.size) != 3
    assert np.asarray(r.converged)[ok].all()
    assert np.all(np.asarray(r.achieved)[ok] <= b32[ok])
    ref = 1.0 / np.sqrt(8.0 * b32[ok].astype(np.float64))
    np.testing.assert_allclose(p[ok], ref, rtol=2e-6)


@pytest.mark.parametrize("mechanism", ["randomized_response", "laplace"])
def test_float32_tv_of_compositions_converges(mechanism):
    # Where log(metric) - log(target) rounded to 0 above the budget, the bracket was not
    # closed there: the Newton step from each nudged point led back to the same point until
    # the nudges ran out (5 of these 41 float32 budgets failed at n = 2)
    b = np.logspace(-12, -2, 41).astype(np.float32)
    r = calibrate(mechanism, b, metric="tv", compositions=2)
    assert np.asarray(r.parameter).dtype == np.float32
    assert np.asarray(r.converged).all(), b[~np.asarray(r.converged)]
    achieved = np.asarray(r.achieved)
    assert np.all(achieved <= b)
    assert np.all(achieved >= b * (1 - np.sqrt(np.finfo(np.float32).eps)))


def test_empty_batch():
    # an empty batch raised "zero-size array to reduction operation max" from the solver
    r = calibrate("gaussian", np.zeros((0, 1)), sensitivity=[1.0, 2.0])
    assert all(np.asarray(v).shape == (0, 2) for v in r)


# (c, dc) -> (sigma, d sigma), compiled once for three budgets
_GAUSSIAN_JVP = jax.jit(
    lambda c, dc: jax.jvp(lambda c: calibrate("gaussian", c).parameter, (c,), (dc,))
)


def test_traced_bad_budget_has_nan_derivatives():
    # under jit a negative or NaN budget gives a nan parameter, but its derivative was 0
    # (the implicit-function rule masked it out with a where), as plausible as a real one
    c = jnp.asarray([-0.1, jnp.nan, 0.5])
    p, dp = (np.asarray(v) for v in _GAUSSIAN_JVP(c, c))
    assert np.all(np.isnan(p[:2])) and np.all(np.isnan(dp[:2]))
    np.testing.assert_allclose(dp[2], -p[2] / 2, rtol=1e-12)  # sigma ~ c^(-1/2): c dp/dc


@pytest.mark.parametrize(
    ("mechanism", "metric", "n", "slope"),
    [
        ("randomized_response", "chernoff", 1, np.inf),  # C ~ eps^2 / 8
        ("randomized_response", "tv", 3, 4 / 3),  # TV ~ K_3 eps, K_3 = E|S_3| / 2 = 3/4
    ],
)
def test_derivative_at_budget_zero_is_the_one_sided_limit(mechanism, metric, n, slope):
    # d parameter / d budget at budget 0 (and subnormal budgets, the same limit) was 0; it is
    # the limit as c -> 0+. d achieved / d budget was 0 there too (achieved = budget).
    def f(c):
        r = calibrate(mechanism, c, metric=metric, compositions=n)
        return r.parameter, r.achieved

    dp, da = jax.vmap(jax.jacfwd(f))(jnp.asarray([0.0, 5e-324, 1e-12]))
    np.testing.assert_array_equal(np.asarray(dp)[:2], slope)
    np.testing.assert_array_equal(np.asarray(da), 1.0)
    if np.isfinite(slope):  # the slope just above 0
        np.testing.assert_allclose(np.asarray(dp)[2], slope, rtol=1e-10)
    if mechanism == "randomized_response" and metric == "chernoff":
        # a scale falls from inf: sigma = (8c)^(-1/2), so -inf (the compiled jvp above)
        _, dp = _GAUSSIAN_JVP(jnp.asarray([0.0, 5e-324, 0.5]), jnp.ones(3))
        np.testing.assert_array_equal(np.asarray(dp)[:2], -np.inf)


@pytest.mark.parametrize(
    ("mechanism", "bad", "good"),
    [
        ("laplace", [-1.0, 0.0, np.nan, np.inf], 2.0),
        ("geometric", [1.5], 2.0),
        ("randomized_response", [2.0], 1.0),
    ],
)
def test_traced_bad_sensitivity_is_nan(mechanism, bad, good):  # (tv: the cheapest to compile)
    # under jit the eager checks are skipped: sensitivity -1 gave scale inf at budget 0 and 0
    # at inf with converged=True, geometric 1.5 an epsilon of 0.967, randomized response
    # ignored a sensitivity of 2 (converged=True)
    c = jnp.asarray([0.0, 0.3, jnp.inf])
    s = jnp.asarray(bad + [good])[:, None]
    r = jax.jit(lambda s: calibrate(mechanism, c, sensitivity=s, metric="tv"))(s)
    p, achieved, converged = (np.asarray(v) for v in r[:3])
    assert np.all(np.isnan(p[:-1])) and np.all(np.isnan(achieved[:-1]))
    assert not converged[:-1].any() and converged[-1].all()
    assert not np.isnan(p[-1]).any()


def test_broadcasting_sensitivities():
    s = np.linspace(0.5, 3.0, B.size)
    r = calibrate("gaussian", B, sensitivity=s, compositions=3)
    np.testing.assert_allclose(np.asarray(r.parameter), s / np.sqrt(8.0 * B / 3), rtol=1e-13)


def test_gradients_gaussian_exact():
    # sigma = s sqrt(n / (8 c)): d sigma/dc = -sigma/(2c), d sigma/ds = sigma/s; reverse mode.
    n = 3
    b = jnp.asarray(B)
    s = jnp.asarray(1.7)

    def f(b, s):
        r = calibrate("gaussian", b, sensitivity=s, compositions=n)
        return r.parameter, r.achieved

    (sigma, _), vjp = jax.vjp(jax.jit(f), b, s)
    sigma = np.asarray(sigma)
    db, ds = vjp((jnp.ones_like(b), jnp.zeros_like(b)))
    np.testing.assert_allclose(np.asarray(db), -sigma / (2 * B), rtol=1e-10)
    np.testing.assert_allclose(float(ds), np.sum(sigma) / 1.7, rtol=1e-10)
    # achieved follows the budget: d achieved / d budget = 1, d achieved / d s = 0
    db, ds = vjp((jnp.zeros_like(b), jnp.ones_like(b)))
    np.testing.assert_allclose(np.asarray(db), 1.0, rtol=1e-12)
    assert abs(float(ds)) < 1e-12
    # Extreme sensitivities at extreme budgets (same shapes: no compile): the engine's dm/ds
    # was taken along a tangent ~1/slope, whose tangent of s/sigma, ~sigma/s^2, left the
    # float range: d sigma/ds 0 for sigma/s ~1e-51 (budget 1e100, sensitivity 1e300), inf
    # for 3.5e49 (1e-100, 1e-300); and from budgets ~4.5e307, where the slope 2C is beyond
    # 2^1023: d sigma/dc half its value (a mantissa scaled by the smallest normal, twice the
    # power of two), d sigma/ds 0 (the engine's tangent subnormal), and beyond ~9e307, where
    # 2C overflows, both 0. Cotangent s/sigma: each d sigma/ds counts 1, d sigma/dc -s/(2c)
    top = np.linspace(4e307, np.finfo(np.float64).max, B.size)
    for s, b in (
        (1e300, np.logspace(0, 300, B.size)),
        (1e-300, np.logspace(-300, 0, B.size)),
        (1e300, top),
        (1.0, top),
    ):
        (sigma, _), vjp = jax.vjp(jax.jit(f), jnp.asarray(b), jnp.asarray(s))
        db, ds = vjp((s / sigma, jnp.zeros_like(sigma)))
        np.testing.assert_allclose(float(ds), B.size, rtol=1e-13)
        if s == 1e300:
            np.testing.assert_allclose(np.asarray(db), -0.5 * s / b, rtol=1e-10)


def test_gradients_laplace_against_finite_differences():
    # forward mode, budget and sensitivity perturbed together, against central differences
    s, n = 2.5, 10
    b = jnp.asarray(B)
    db = jnp.asarray(B * np.linspace(0.5, 1.5, B.size))
    ds = jnp.asarray(0.3)

    @jax.jit
    def f(b, s):
        return calibrate("laplace", b, sensitivity=s, compositions=n).parameter

    jvp = jax.jit(lambda x, t: jax.jvp(f, x, t))
    p, tangent = jvp((b, jnp.asarray(s)), (db, ds))
    h = 1e-5
    fd = (np.asarray(f(b + h * db, s + h * ds)) - np.asarray(f(b - h * db, s - h * ds))) / (2 * h)
    np.testing.assert_allclose(np.asarray(tangent), fd, rtol=1e-7)
    # scale invariance b(c, s) = s b(c, 1) and the IFT: d b = b ds/s + d b/d c dc
    _, only_s = jvp((b, jnp.asarray(s)), (jnp.zeros_like(b), ds))
    np.testing.assert_allclose(np.asarray(only_s), np.asarray(p) * 0.3 / s, rtol=1e-10)
    # extreme sensitivities at extreme budgets (same shapes: no compile): 1e-10 relative off
    # at (1e10 n, 1e300) along a tangent of s ~1/slope (see test_gradients_gaussian_exact)
    for s, b in ((1e300, np.logspace(0, 300, B.size)), (1e-300, np.logspace(-300, 0, B.size))):
        p, only_s = jvp((jnp.asarray(b), jnp.asarray(s)), (jnp.zeros_like(b), ds))
        np.testing.assert_allclose(np.asarray(only_s), np.asarray(p) * 0.3 / s, rtol=1e-13)


def _mp_second_derivative(name, metric, n, c, s, t1, t2, guess):
    """``t1' H t2`` for the root ``p(c, s)`` of ``n m(p, s) = c``, ``t = (dc, ds)``: the
    implicit function theorem differentiated twice, on the closed form's derivatives."""
    with mp.workdps(40):
        F = lambda p, s: n * mp_metric(name, metric, p, s)  # noqa: E731
        p = mp_calibrate(name, metric, c, guess, s=s, n=n)
        s = mp.mpf(s)
        d = lambda i, j: mp.diff(F, (p, s), (i, j))  # noqa: E731
        fp, fs, fpp, fps, fss = d(1, 0), d(0, 1), d(2, 0), d(1, 1), d(0, 2)
        pc, ps = 1 / fp, -fs / fp
        pcc = -fpp * pc**2 / fp
        pcs = -(fpp * ps + fps) * pc / fp
        pss = -(fpp * ps**2 + 2 * fps * ps + fss) / fp
        h = [[pcc, pcs], [pcs, pss]]
        return sum(t1[i] * h[i][j] * t2[j] for i in range(2) for j in range(2))


@pytest.mark.parametrize(("name", "metric", "n", "s"), [("laplace", "kl", 1, 1.5)])
def test_second_derivatives_are_the_derivatives_of_the_first(name, metric, n, s):
    # The implicit-function JVP read the solver's parameter and slope as constants, so
    # jax.hessian / grad(grad) came out silently wrong (d^2 sigma/dc^2 = 0 for the Gaussian).
    # Forward over forward, two different directions in (budget, sensitivity).
    c = jnp.asarray([1e-3, 0.3, 4.0])
    t1, t2 = (1.0, 0.7), (0.5, -1.1)

    def f(c, s):
        return calibrate(name, c, sensitivity=s, compositions=n, metric=metric).parameter

    # one compiled program for every pair of directions here (eager jvps compiled pieces)
    @jax.jit
    def d2(c, t1, t2, s):
        def df(c, s):
            return jax.jvp(f, (c, s), (t1[0] * jnp.ones_like(c), t1[1]))[1]

        return jax.jvp(df, (c, s), (t2[0] * jnp.ones_like(c), t2[1]))[1]

    def d2_at(c, t1, t2, s=s):
        return np.asarray(d2(jnp.asarray(c), jnp.asarray(t1), jnp.asarray(t2), jnp.asarray(s)))

    got = d2_at(c, t1, t2)
    p = np.asarray(f(c, s))
    ref = [
        _mp_second_derivative(name, metric, n, ci, s, t1, t2, pi)
        for ci, pi in zip(np.asarray(c), p, strict=True)
    ]
    errs = [rel_err(g, r) for g, r in zip(got, ref, strict=True)]
    assert max(errs) < 1e-12, errs

    # Budgets below ~1e-154 (same shapes: no compile): p (x_c^2 + x_cc) was a sum of
    # overflowed terms, or p times rounding noise ~1e284 beside an infinite term, and the
    # slope squared underflowed: nan where d^2 b/dc^2 is inf and d^2 b/dc ds finite (QA
    # pass). Small-budget closed form of Laplace KL: b = s / sqrt(2c) (to ~1e-100 relative)
    c = np.array([1e-200, 1e-300, 1e-307])
    p = s / np.sqrt(2.0 * c)
    np.testing.assert_array_equal(d2_at(c, (1.0, 0.0), (1.0, 0.0)), np.inf)
    with np.errstate(over="ignore"):
        pcs = -0.5 / np.sqrt(2.0) * c**-1.5  # (d b/dc / s: -3.5e299, then -inf)
    np.testing.assert_allclose(d2_at(c, (1.0, 0.0), (0.0, 1.0)), pcs, rtol=1e-13)
    pss = d2_at(c, (0.0, 1.0), (0.0, 1.0))  # 0: b is linear in s
    assert np.all(np.abs(pss) <= 1e-14 * p / s**2), pss

    # b(c, s) = s b(c, 1) (Laplace and Gaussian): d^2 b/ds^2 = 0 exactly, and d^2 b/dc ds =
    # d b/dc at s = 1 whatever s. From the engine's dm/ds over the slope they were rounding
    # noise ~1e-15 b/s^2 (5.6e84 for the Gaussian at sensitivity 1e-100), -inf at 1e-300,
    # and forward over forward d^2 b/dc ds was nan there
    c = np.array([1e-3, 0.3, 4.0])
    unit = d2_at(c, (1.0, 0.0), (0.0, 1.0), s=1.0)
    for s in (1e-300, 1e-100, 1.0, 1e100, 1e300):
        np.testing.assert_array_equal(d2_at(c, (0.0, 1.0), (0.0, 1.0), s=s), 0.0)
        # (1.4e-12 and 1.6e-12 apart at s = 1e-300 and 1e300: the rule works in x = log b,
        # whose rounding at |log b| ~ 690 is ~6u |log b| of b, see the module doc; 5e-13
        # at 1e+-100). In that order the slope's derivative in s was 1.3e-7 off at 1e300
        np.testing.assert_allclose(d2_at(c, (1.0, 0.0), (0.0, 1.0), s=s), unit, rtol=3e-12)
        np.testing.assert_allclose(d2_at(c, (0.0, 1.0), (1.0, 0.0), s=s), unit, rtol=3e-12)
    # Large budgets and sensitivity: KL = theta - 1 + e^-theta, b = s/(c + 1), d^2 b/ds dc =
    # -1/(c + 1)^2; d/dc of d b/ds was 0: the rule's (p/e)(y dx + dy), y = dx/ds ~ 1/s
    # times dx/dc ~ 1/c underflowed
    c = np.array([1e50, 1e100, 1e150])
    got = d2_at(c, (0.0, 1.0), (1.0, 0.0), s=1e300)
    # (the calibration's own accuracy at |log b| ~ 460-580: ~6u |log b|, see the module doc)
    np.testing.assert_allclose(got, -1 / c / c, rtol=2e-12)


def test_second_derivatives_of_randomized_response_closed_form():
    # C of n binary randomized responses = n log cosh(eps/2): eps(c) = 2 acosh(e^(c/n)).
    # (Not at large c/n, where eps is nearly linear in c: the log-parameter rule's two terms
    # of d^2 eps/dc^2 cancel there, 4.6e-9 relative at c/n = 10; see the module doc.)
    n = 3
    c = jnp.asarray([1e-4, 0.05, 2.0, 6.0])
    hess = jax.vmap(
        jax.hessian(lambda c: calibrate("randomized_response", c, compositions=n).parameter)
    )
    got = np.asarray(hess(c))
    with mp.workdps(40):
        eps = lambda c: 2 * mp.acosh(mp.exp(c / n))  # noqa: E731
        ref = [mp.diff(eps, mp.mpf(float(ci)), 2) for ci in np.asarray(c)]
    errs = [rel_err(g, r) for g, r in zip(got, ref, strict=True)]
    assert max(errs) < 1e-12, errs


def test_second_derivatives_of_the_geometric_metric_at_tiny_epsilon():
    # The calibration's second derivatives read those of its metric: for the geometric
    # mechanism they were nan below eps ~1e-105 (jax.hessian of calibrate at budgets below
    # ~1e-210), where the engine's scales 1/eps have 1/b^3 below the float range; the
    # small-strength limit eps^2/8 is taken there now (the metric alone: a calibrate
    # hessian compiles for ~14 s)
    cal = importlib.import_module("jaxdp.calibrate")
    spec = cal._spec_for("geometric")

    def m(x):  # in x = log eps, as the implicit rule differentiates it
        return cal._metric(spec, "chernoff", 1, jnp.exp(x), jnp.ones_like(x))

    def d2(x):
        return jax.jvp(lambda x: jax.jvp(m, (x,), (jnp.ones_like(x),))[1], (x,), (x * 0 + 1,))

    eps = np.array([1e-90, 1e-110, 1e-150])
    d1, dd = jax.jit(d2)(jnp.log(jnp.asarray(eps)))
    np.testing.assert_allclose(np.asarray(d1), eps**2 / 4, rtol=1e-13)  # d m/dx = 2m
    np.testing.assert_allclose(np.asarray(dd), eps**2 / 2, rtol=1e-13)  # d^2 m/dx^2 = 4m


# --------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------
# callables
# --------------------------------------------------------------------------------------------


def _gaussian_pair(sigma):
    return jd.Gaussian(0.0, sigma), jd.Gaussian(1.0, sigma)


def _gaussian_by_precision(tau):  # metric increases with the parameter
    return jd.Gaussian(0.0, 1.0 / tau), jd.Gaussian(1.0, 1.0 / tau)


def test_callable_mechanisms():
    budgets = B.copy()
    budgets[0] = 0.0
    r = calibrate(_gaussian_pair, budgets)
    assert np.asarray(r.converged).all()
    np.testing.assert_allclose(np.asarray(r.parameter)[1:], 1 / np.sqrt(8 * B[1:]), rtol=1e-13)
    assert np.asarray(r.parameter)[0] == np.inf
    assert np.all(np.asarray(r.achieved) <= budgets)
    r = calibrate(_gaussian_by_precision, budgets)
    assert np.asarray(r.converged).all()
    np.testing.assert_allclose(np.asarray(r.parameter)[1:], np.sqrt(8 * B[1:]), rtol=1e-13)
    assert np.asarray(r.parameter)[0] == 0.0
    with pytest.raises(ValueError, match="sensitivity does not apply"):
        calibrate(_gaussian_pair, 0.1, sensitivity=2.0)
    # budgets that are all 0: the loop never ran, so the direction was never read (nan,
    # converged False; batched with a positive budget: inf, converged True)
    r = calibrate(_gaussian_pair, np.zeros(2))
    assert np.all(np.asarray(r.parameter) == np.inf) and np.asarray(r.converged).all()
    # a callable's limits are not evaluated: achieved was inf at budget inf (also for metrics
    # bounded above) and 0 at budget 0 beside a nan parameter (a constant metric)
    r = calibrate(_gaussian_pair, np.asarray([0.0, np.inf]))
    assert np.asarray(r.achieved)[0] == 0 and np.isnan(np.asarray(r.achieved)[1])
    r = calibrate(lambda p: _gaussian_pair(1.0 + 0.0 * p), np.zeros(2))
    assert np.all(np.isnan(np.asarray(r.achieved))) and not np.asarray(r.converged).any()


def test_callable_mechanism_that_returns_the_wrong_thing():
    # named mechanism (checked by shape, nothing computed); were "cannot unpack non-iterable
    # Gaussian object", "too many values to unpack" and JAX's "Incompatible types for
    # broadcasting" from inside the solver
    one = (lambda p: _gaussian_pair(p)[0], r"got Gaussian$")
    three = (lambda p: (*_gaussian_pair(p), p), r"got tuple \(Gaussian, Gaussian, array\)$")
    for fn, match in (one, three):
        with pytest.raises(TypeError, match=r"^mechanism must return a pair \(P, Q\).*" + match):
            calibrate(fn, 0.1)
    with pytest.raises(ValueError, match=r"^mechanism must return .* shape \(2, 3\), got \(4,\)"):
        calibrate(lambda p: _gaussian_pair(jnp.ones(4)), np.ones((2, 3)))


# --------------------------------------------------------------------------------------------
# allocation (optax)
# --------------------------------------------------------------------------------------------


def test_allocation_gaussian_closed_form_and_kkt():
    # Gaussian: C_j = s_j^2 / (8 sigma_j^2), alpha* = 1/2 for all, so the exact constraint is
    # sum_j C_j and the optimum is sigma_j^2 = K s_j / sqrt(w_j), K = sum_j s_j sqrt(w_j) / (8 eps).
    eps = 0.7
    s = np.array([1.0, 5.0])
    w = np.array([3.0, 0.5])
    r = allocate_budget(eps, s, w, mechanism="gaussian")
    k = np.sum(s * np.sqrt(w)) / (8 * eps)
    np.testing.assert_allclose(np.asarray(r.scales), np.sqrt(k * s / np.sqrt(w)), rtol=1e-9)
    np.testing.assert_allclose(float(r.objective), k * np.sum(s * np.sqrt(w)), rtol=1e-12)
    assert bool(r.converged)
    assert float(r.chernoff) <= eps and float(r.chernoff) >= eps * (1 - 1e-12)  # active
    assert float(r.kkt_residual) < 1e-8 and float(r.multiplier) > 0
    # equal split of Corollary 1.2: C_j = eps/m, sigma_j^2 = m s_j^2 / (8 eps)
    m = s.size
    np.testing.assert_allclose(np.asarray(r.equal_scales), s * np.sqrt(m / (8 * eps)), rtol=1e-12)
    saving = 1 - np.sum(s * np.sqrt(w)) ** 2 / (m * np.sum(w * s**2))
    np.testing.assert_allclose(float(r.saving), saving, rtol=1e-9)
    # far budgets (the same compiled programs): the KKT ratios (-1/mu, ~eps^2) were squared,
    # under- or overflowing beyond 1e-77 and 1e77 (float32: 1e-9 and 1e9), which gave the
    # right scales with multiplier inf or 0, residual inf or 1 and converged=False (QA pass);
    # beyond ~1e-205 and 1e205 the reverse-mode dC/dsigma ~ C/sigma under- or overflowed:
    # multiplier and residual nan (QA pass; the multiplier is then 0 or inf, as 8 k^2 is)
    for eps, dtype in (
        (1e-100, np.float64),
        (1e100, np.float64),
        (1e-300, np.float64),
        (1e300, np.float64),
        (1e-12, np.float32),
    ):
        r = allocate_budget(dtype(eps), s.astype(dtype), w.astype(dtype))
        k = np.sum(s * np.sqrt(w)) / (8 * eps)
        rtol = 1e-12 if dtype == np.float64 else 1e-5  # (measured 1e-13, 6.5e-6)
        np.testing.assert_allclose(np.asarray(r.scales, float), np.sqrt(k * s / np.sqrt(w)), rtol)
        with np.errstate(over="ignore"):  # (inf at 1e-300, as the multiplier is)
            mu = 8 * k * k
        np.testing.assert_allclose(float(r.multiplier), mu, rtol=1e2 * rtol)
        assert bool(r.converged) and float(r.kkt_residual) < 1e3 * np.finfo(dtype).eps, eps


def test_allocation_of_queries_of_very_different_sizes():
    # The optimiser stopped on its largest gradient component, which the large query
    # dominates: the small query's scale came out 50% off (sensitivities 1e-6 and 1e6;
    # 0.2% with a third query of 1) with converged=True and a norm-relative KKT residual of
    # 2e-12, while the objective was optimal to 1e-16. A second run preconditioned by each
    # query's share, and a per-query KKT residual, fix and expose it.
    eps, s, w = 0.7, np.array([1e-6, 1e6]), np.array([3.0, 0.5])
    r = allocate_budget(eps, s, w, mechanism="gaussian")
    k = np.sum(s * np.sqrt(w)) / (8 * eps)
    # measured 4e-15 (both scales) and 3e-15
    np.testing.assert_allclose(np.asarray(r.scales), np.sqrt(k * s / np.sqrt(w)), rtol=1e-13)
    assert bool(r.converged) and float(r.kkt_residual) < 1e-13
    # float32: beyond a variance ratio of ~1/u the total variance cannot see the small query
    # (flat to rounding in its scale), and whether the optimiser lands on its optimum is
    # rounding luck: sensitivities 1e-4 and 1e4 gave the small scale 9% off with KKT residual
    # 0.2 under the default compile options (reported converged before the per-query
    # residual), and right to 4e-6 at LLVM -O0. Converged must mean right, and every range
    # the variance resolves must converge. (measured: converged ones <= 8.5e-7 off)
    for lo in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5):
        s32 = np.float32([lo, 1 / lo])
        r = allocate_budget(np.float32(eps), s32, np.float32([1.0, 1.0]))
        want = np.sqrt(np.sum(s32.astype(float)) / (8 * eps) * s32.astype(float))
        err = np.max(np.abs(np.asarray(r.scales, float) / want - 1))
        if bool(r.converged):
            assert err < 1e-5 and float(r.kkt_residual) <= np.sqrt(np.finfo(np.float32).eps)
        else:
            assert lo < 1e-3, (lo, err)


def _asymmetric_gaussian(sigma, s):
    # the neighbour also changes the noise scale by theta: asymmetric pairs. (Their
    # information stays above C(N(0,1), N(0,theta^2)) as sigma -> inf: budgets must exceed it.)
    # (P's location a scalar, as a user writes it: broadcast to the queries; it failed with
    # "Too many indices: array is 0-dimensional", QA pass)
    theta = jnp.asarray([1.0, 1.6])
    return jd.Gaussian(0.0, sigma), jd.Gaussian(s, theta * sigma)


def _square(b):
    return b * b


def test_allocation_asymmetric_pairs():
    eps = 0.5
    s = np.array([1.0, 3.0])
    r = allocate_budget(eps, s, mechanism=_asymmetric_gaussian, variance=_square)
    assert bool(r.converged)
    # the constraint is met and active, and KKT holds: checked independently with the engine
    # (one jitted composed-Chernoff call; its gradient by central differences)

    @jax.jit
    def composed(x):
        P, Q = _asymmetric_gaussian(jnp.exp(x), jnp.asarray(s))
        comps = [
            (jd.Gaussian(P.loc, P.scale[j]), jd.Gaussian(Q.loc[j], Q.scale[j])) for j in range(2)
        ]
        return jd.chernoff(jd.Product(*[a for a, _ in comps]), jd.Product(*[b for _, b in comps]))

    x = np.log(np.asarray(r.scales))
    c = composed(x)
    assert float(c.information) <= eps
    np.testing.assert_allclose(float(c.information), eps, rtol=1e-12)
    assert abs(float(c.alpha) - 0.5) > 1e-3  # a genuinely asymmetric optimum
    h = 1e-6
    gc = np.array(
        [
            (float(composed(x + h * e).information) - float(composed(x - h * e).information))
            / (2 * h)
            for e in np.eye(2)
        ]
    )
    gv = 2 * np.exp(2 * x)  # d sigma^2 / d log sigma
    mu = -gv @ gc / (gc @ gc)
    assert mu > 0 and np.linalg.norm(gv + mu * gc) / np.linalg.norm(gv) < 1e-7
    assert float(r.kkt_residual) < 1e-9
    # the equal split of the bound is conservative here (its exact composed information is
    # below the budget), and the exact optimum needs less noise
    assert float(r.equal_chernoff) < eps * (1 - 1e-3)
    assert float(r.objective) < float(r.equal_objective)
    assert float(r.saving) > 0.05
    assert np.isnan(float(r.bound_objective))  # compare_bound=False (the default)


def test_allocation_projection_meets_the_budget_to_ulps():
    # allocate_budget's last step shifts the optimiser's log-scales onto the budget (_root):
    # its Newton tolerance 1e-4 sqrt(u) left the composed Laplace information up to 1.6e-12
    # below the budget (7300 ulps; the module doc says ~8 |log sigma| ulps)
    from jaxdp.allocation import _root

    s = jnp.array([1.0, 3.0, 0.5])
    pair = _laplace_pair_of_scales
    root = jax.jit(lambda x, b: _root("exact", pair, x, s, b, jnp.zeros(()))[1])
    rng = np.random.default_rng(1)
    for _ in range(10):
        x, b = rng.normal(size=3), 10 ** rng.uniform(-3, 2)
        info = float(root(x, b))
        assert b * (1 - 64 * np.finfo(float).eps) <= info <= b, (x, b, info / b - 1)


def test_allocation_projection_within_large_budgets():
    # above budgets ~e^4 an ulp of log(value) exceeds the projection's 4u margin: its g
    # rounded to <= 0 at a value above the budget, the bracket missed that point and Newton
    # stepped between two points either side until the nudges ran out: 1.6e-15 above a
    # budget of 1e8 (allocate_budget, Laplace sensitivities [1e-3, 1, 7]: converged=False)
    from jaxdp.allocation import _root

    s = jnp.array([1e-3, 1.0, 7.0])
    x = jnp.log(jnp.array([2.33465280e-11, 2.33465284e-10, 4.46603022e-10])) - 0.3963145898739
    info = float(_root("exact", _laplace_pair_of_scales, x, s, 1e8, jnp.zeros(()))[1])
    assert 1e8 * (1 - 1e-13) <= info <= 1e8


def _laplace_pair_of_scales(b, s):
    return mechanisms.laplace(s, scale=b)


def test_allocation_default_weights_keep_float32():
    # the default weights were float64 ones: float32 queries came back float64 under x64
    s32 = np.array([1.0, 2.0], np.float32)
    out = jax.eval_shape(lambda s: allocate_budget(np.float32(0.5), s), s32)
    assert out.scales.dtype == jnp.float32


def test_allocation_max_steps_may_be_a_numpy_integer():
    # np.int64(50) was refused as "max_steps must be a positive int" (calibrate takes it)
    out = jax.eval_shape(lambda s: allocate_budget(0.5, s, max_steps=np.int64(50)), np.ones(2))
    assert out.scales.shape == (2,)
    with pytest.raises(ValueError, match=r"^max_steps must be a positive int"):
        allocate_budget(0.5, [1.0, 2.0], max_steps=np.int64(0))


def test_allocation_bad_arguments():
    with pytest.raises(ValueError, match="budget"):
        allocate_budget(0.0, [1.0, 2.0])
    with pytest.raises(ValueError, match="weights"):
        allocate_budget(1.0, [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="variance"):
        allocate_budget(1.0, [1.0, 2.0], mechanism=_asymmetric_gaussian)
    with pytest.raises(ValueError, match="mechanism"):
        allocate_budget(1.0, [1.0, 2.0], mechanism="cauchy")
    # tol = nan or inf returned the equal split (the loop never ran), -1 ran to max_steps;
    # a non-callable variance failed as "'int' object is not callable" (found by a QA pass)
    for tol in (math.nan, math.inf, -1.0):
        with pytest.raises(ValueError, match=r"^tol must be non-negative and finite"):
            allocate_budget(1.0, [1.0, 2.0], tol=tol)
    with pytest.raises(TypeError, match=r"^tol must be a real number"):
        allocate_budget(1.0, [1.0, 2.0], tol="small")
    with pytest.raises(TypeError, match=r"^variance must be a callable"):
        allocate_budget(1.0, [1.0, 2.0], variance=3)
    # what the callables return (by shape, nothing computed): a scalar variance was broadcast
    # (a wrong optimum, converged=True); one distribution failed as "cannot unpack" (QA pass)
    with pytest.raises(ValueError, match=r"^variance must return shape \(2,\) .*got \(\)"):
        allocate_budget(1.0, [1.0, 2.0], variance=lambda b: jnp.sum(b * b))
    with pytest.raises(TypeError, match=r"^mechanism must return a pair \(P, Q\).*got Gaussian"):
        allocate_budget(
            1.0, [1.0, 2.0], mechanism=lambda b, s: jd.Gaussian(0.0, b), variance=_square
        )
    with pytest.raises(ValueError, match=r"^mechanism must return .* batch shape \(2,\)"):
        allocate_budget(
            1.0,
            [1.0, 2.0],
            mechanism=lambda b, s: _asymmetric_gaussian(b[:, None], s),
            variance=_square,
        )
    # subnormals (XLA flushes them): budget 1e-310 gave scales [0, 0], a sensitivity 1e-320
    # nan scales, a weight 1e-320 the scale 2e17 of a weight 0 (QA pass)
    for args in ((1e-310, [1.0, 2.0]), (1.0, [1e-320, 2.0]), (1.0, [1.0, 2.0], [1e-320, 1.0])):
        name = ("budget", "sensitivities", "weights")[len(args) - 1 if args[0] == 1.0 else 0]
        with pytest.raises(ValueError, match=rf"^{name} must be at least 2.225e-308"):
            allocate_budget(*args)


def test_allocation_of_traced_bad_arguments_is_nan():
    # under jit the eager checks are skipped: budget -0.1 gave scales [1.3e-7, 1.9e-7], a
    # negative weight [1.118, 1.118], flagged by converged=False only (QA pass); a subnormal
    # budget scales [0, 0] (a later QA pass)
    def run(budget, w0):
        return allocate_budget(budget, jnp.asarray([1.0, 2.0]), jnp.stack([w0, 1.0]))

    f = jax.jit(jax.vmap(run))
    res = f(jnp.asarray([1.0, -0.1, 1.0, 1e-310]), jnp.asarray([1.0, 1.0, -1.0, 1.0]))
    assert np.asarray(res.converged).tolist() == [True, False, False, False]
    for name in res._fields:
        v = np.asarray(getattr(res, name))
        if v.dtype.kind == "f":  # (bound_*: nan without compare_bound)
            assert name.startswith("bound") or np.all(np.isfinite(v[0])), name
            assert np.all(np.isnan(v[1:])), name


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def test_cli_json_and_table(capsys):
    # the budgets of B (first one 0) with n = 10, s = 0.5: reuses a compiled solver above
    budgets = B.copy()
    budgets[0] = 0.0
    args = ["calibrate", "gaussian", "--sensitivity", "0.5", "--compositions", "10"]
    args += [a for b in budgets for a in ("--budget", repr(float(b)))]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parameter"] == "sigma" and out["compositions"] == 10
    assert len(out["results"]) == B.size
    assert out["results"][0]["sigma"] == "inf" and out["results"][0]["converged"] is True
    sigma = [row["sigma"] for row in out["results"][1:]]
    np.testing.assert_allclose(sigma, 0.5 * np.sqrt(10 / (8 * B[1:])), rtol=1e-13)
    assert all(row["achieved"] <= b for row, b in zip(out["results"], budgets, strict=True))
    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert "sigma" in table[1] and "converged" in table[1] and len(table) == 3 + B.size


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["calibrate", "gaussian", "--budget", "-1"], "budget must be >= 0"),
        (["calibrate", "gaussian", "--budget", "abc"], "invalid float"),
        (["calibrate", "cauchy", "--budget", "1"], "invalid choice"),
        (["calibrate", "gaussian"], "--budget"),
        (["calibrate", "gaussian", "--budget", "1", "--compositions", "0"], "compositions"),
        (
            ["calibrate", "geometric", "--budget", "0.1", "--sensitivity", "1.5"],
            "sensitivity must hold integer values",
        ),
        (
            ["calibrate", "geometric", "--budget", "0.1", "--metric", "tv"]
            + ["--compositions", "100000", "--sensitivity", "30"],
            "multiply-adds",
        ),
    ],
)
def test_cli_errors(argv, match, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse errors exit through the parser
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("jaxdp: error:") and match in err


def test_randomized_response_at_extreme_budgets():
    # log cosh(eps/2) = b: eps = 2 acosh(e^b) ~ sqrt(8 b) for tiny b and 2 (b + log 2) for
    # huge b. Evaluated as a categorical pair the metric lost eps below ~1e-8 (budgets below
    # ~1e-17 gave eps ~5.6e-17, converged False) and failed above ~1e16 (inf or nan).
    tiny = jnp.asarray([1e-300, 1e-100, 1e-20])
    huge = jnp.asarray([1e17, 1e100, 1e300])
    r = jd.calibrate("randomized_response", jnp.concatenate([tiny, huge]))
    assert bool(jnp.all(r.converged))
    np.testing.assert_allclose(r.parameter[:3], np.sqrt(8 * np.asarray(tiny)), rtol=1e-12)
    np.testing.assert_allclose(r.parameter[3:], 2 * (np.asarray(huge) + np.log(2)), rtol=1e-12)
    assert bool(jnp.all(r.achieved <= jnp.concatenate([tiny, huge])))


@pytest.mark.parametrize(
    "mechanism, n", [("laplace", 2), ("randomized_response", 3), ("geometric", 3), ("gaussian", 2)]
)
def test_tv_budgets_within_ulps_of_one(mechanism, n):
    # log m is flat there: Newton on it crawled (17-27 steps at 1 - 1e-10), its steps below
    # rounding never met the tolerance, and its nudges could not move m: the last budgets
    # ran out of steps with achieved nan. (Same shape as the test below: shared compiles.)
    budget = np.array([1 - 1e-5, 1 - 1e-10, 1 - 1e-15, np.nextafter(1.0, 0.0)])
    r = jd.calibrate(mechanism, budget, metric="tv", compositions=n)
    assert np.asarray(r.converged).all()
    achieved = np.asarray(r.achieved)
    assert np.all(achieved <= budget) and np.all(achieved >= budget * (1 - 1.5e-8))
    assert np.asarray(r.iterations).max() <= 8, r.iterations
    if mechanism == "gaussian":  # sigma = sqrt(n) / (2 sqrt(2) erfinv(c)), as documented:
        # within 1e-4 sqrt(u) + 20 u / eta, eta = |d log TV / d log sigma|
        u = np.finfo(np.float64).eps
        for b, p in zip(budget, np.asarray(r.parameter), strict=True):
            with mp.workdps(40):
                t = mp.sqrt(2) * mp.erfinv(mp.mpf(b))  # = D sqrt(n) / (2 sigma)
                eta = 2 * mp.npdf(t) * t / mp.mpf(b)
                err = rel_err(p, mp.sqrt(n) / (2 * t))
            assert err <= 1e-4 * math.sqrt(u) + 20 * u / float(eta), (b, err)


@pytest.mark.parametrize(
    "mechanism, n, coef",
    [
        # tiny-budget asymptotes: Laplace n-fold TV ~ c_n / scale (c_2 = 1/2, c_3 = 3/4, by
        # jaxdp.best_advantage_laplace's small-eps slope), randomized response TV of n = 2, 3
        # releases ~ eps/2, 3 eps/4, Gaussian TV ~ sqrt(n) / (sqrt(2 pi) sigma)
        ("laplace", 2, 0.5),
        ("laplace", 3, 0.75),
        ("randomized_response", 2, 0.5),
        ("randomized_response", 3, 0.75),
        # geometric, sensitivity 1: randomized response in disguise
        ("geometric", 3, 0.75),
        ("gaussian", 2, math.sqrt(2.0 / (2.0 * math.pi))),
        ("gaussian", 3, math.sqrt(3.0 / (2.0 * math.pi))),
    ],
)
def test_tv_of_compositions_at_tiny_budgets(mechanism, n, coef):
    # The start squared the budget (underflow below ~1e-154: parameter 0 or inf, nan), and the
    # TV derivatives of Gaussian pairs (sigma ~1e154+) and of max_tv_eps_dp (eps ~1e-154-)
    # were nan: every budget below ~1e-154 failed.
    budget = np.array([1e-300, 1e-200, 1e-160, 1e-100])
    r = jd.calibrate(mechanism, budget, metric="tv", compositions=n)
    assert np.asarray(r.converged).all()
    want = coef / budget if mechanism in ("laplace", "gaussian") else budget / coef
    np.testing.assert_allclose(np.asarray(r.parameter), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(r.achieved), budget, rtol=1e-12)


def test_allocation_derivatives_gaussian_closed_form():
    # allocate_budget was not differentiable: its chernoff field had derivative 0 in the
    # budget (it is 1) and the other fields raised JAX's while-loop error. Now the optimum
    # carries the implicit derivative of its KKT system, the equal split that of each
    # query's calibration. Gaussian closed form (see above): sigma_j = sqrt(K s_j/sqrt(w_j)),
    # objective (sum_j s_j sqrt(w_j))^2/(8 eps), multiplier mu = 8 K^2 (grad V + mu grad C = 0
    # in log-scales, dV/dx_j = 2 w_j sigma_j^2, dC/dx_j = -s_j^2/(4 sigma_j^2)),
    # equal split sigma_j = s_j sqrt(m/(8 eps)).
    def closed(eps, s, w):  # (divided by eps last: its tangent's square overflowed at 1e300)
        k = jnp.sum(s * jnp.sqrt(w)) / 8 / eps
        equal = s * jnp.sqrt(s.shape[0] / 8 / eps)
        return jnp.sqrt(k * s / jnp.sqrt(w)), jnp.sum(s * jnp.sqrt(w)) * k, 8 * k * k, equal

    def fields(eps, s, w):
        r = allocate_budget(eps, s, w)
        return r.scales, r.objective, r.multiplier, r.equal_scales, r.chernoff

    args = (0.7, jnp.asarray([1.0, 5.0]), jnp.asarray([3.0, 0.5]))
    # (reverse mode: the rules transpose; jitted: eagerly, 48 programs compiled one by one)
    rev = jax.jit(jax.jacrev(fields, argnums=(0, 1, 2)))
    ref = jax.jit(jax.jacfwd(closed, argnums=(0, 1, 2)))
    got, want = rev(*args), ref(*args)
    for g, wnt in zip(got[:4], want, strict=True):  # measured <= 2.4e-15
        for a, b in zip(g, wnt, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-15)
    # the composed information stays on the budget: derivative 1 in eps, 0 in s and w
    np.testing.assert_allclose(float(got[4][0]), 1.0, rtol=1e-12)
    assert (
        np.abs(np.asarray(got[4][1])).max() < 1e-12 and np.abs(np.asarray(got[4][2])).max() < 1e-12
    )
    # a far budget (the same program): every derivative was nan (values right): the KKT
    # system's terms of V (~1e-300) beside those of C (~1e300), and in reverse mode the
    # constraint's tangents ~1e-150 divided by ~1e300 (QA pass). Now those of log V, the
    # coefficients scaled before they meet the tangents. (d/d eps ~1e-451 underflows in both)
    args = (1e300, *args[1:])
    got, want = rev(*args), ref(*args)
    for g, wnt in zip(got[:4], want, strict=True):  # measured <= 1e-15 (scales' derivatives)
        for a, b in zip(g, wnt, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=0)
    np.testing.assert_allclose(float(got[4][0]), 1.0, rtol=1e-12)
    assert np.abs(np.concatenate([got[4][1], got[4][2]])).max() < 1e-12 * args[0]


def test_allocation_derivatives_asymmetric_pairs():
    # Where alpha* = 1/2 for every pair (the Gaussian test above) the maximiser does not move
    # with the scales, and the Schur-complement term of the composed information's Hessian
    # (see jaxdp.allocation._kkt_point) is 0. Here it is not (alpha* ~0.39): the tangents,
    # along one direction in (eps, s), against central differences of the values.
    s = jnp.asarray([1.0, 3.0])
    ds = jnp.asarray([0.3, -0.2])

    def fields(eps, s):
        r = allocate_budget(eps, s, mechanism=_asymmetric_gaussian, variance=_square)
        return r.scales, r.multiplier, r.alpha, r.objective, r.equal_scales

    _, tangent = jax.jvp(fields, (0.5, s), (1.0, ds))
    h = 1e-5
    plus, minus = fields(0.5 + h, s + h * ds), fields(0.5 - h, s - h * ds)
    for t, p, m in zip(tangent, plus, minus, strict=True):
        fd = (np.asarray(p) - np.asarray(m)) / (2 * h)
        # measured <= 1.0e-9 (the differences' truncation and the solvers' rounding); leaving
        # out the Schur-complement term puts the scales 1.3e-3 off (the Gaussian test passes)
        np.testing.assert_allclose(np.asarray(t), fd, rtol=1e-8, atol=1e-12)


def test_subnormal_budgets_are_the_zero_budget_alone_or_batched():
    # XLA:CPU flushes subnormals in some kernels only: 1e-320 alone gave scale inf with
    # converged False, and converged True batched with 1.0 (found by a QA pass)
    # (one batch, one compile; tests/test_default_emitters.py runs 1e-320 alone with the
    # default emitters, where it failed)
    batch = np.array([1e-320, 1.0, 1e-310, 5e-324])
    r = calibrate("laplace", jnp.asarray(batch))
    sub = batch < 2.2e-308
    assert np.asarray(r.converged).all()
    assert np.all(np.asarray(r.parameter)[sub] == np.inf)
    assert np.all(np.asarray(r.achieved)[sub] == 0.0)


def test_gaussian_budgets_whose_sigma_squared_is_subnormal():
    # Chernoff information 1e307 needs sigma ~1.1e-154, whose square is subnormal: the
    # kernel's Delta^2/(2 sigma^2) was inf there (flushed), and calibrate ran 48 steps to
    # sigma 1.49e-154 with converged=False (found by a QA pass)
    budgets = np.array([1e307, 1e300, 1e-300])
    r = calibrate("gaussian", budgets)
    assert np.asarray(r.converged).all()
    # (the documented accuracy: 1e-4 sqrt(u) + 6u |log sigma|, here 2e-12; measured 2.6e-13)
    np.testing.assert_allclose(np.asarray(r.parameter), 1 / np.sqrt(8 * budgets), rtol=2e-12)
    assert np.all(np.asarray(r.achieved) <= budgets)
    # above ~4.5e307 the kernel's constant (Delta/sigma)^2/2 = 4 C overflowed, and from
    # ~2.2e307 the guess's 8 c: sigma 0 with achieved inf, converged=False (QA pass)
    budgets = np.array([3e307, 1e308, 1.7976931348623157e308])  # (same shape: no compile)
    r = calibrate("gaussian", budgets)
    assert np.asarray(r.converged).all()
    ref = 1 / (np.sqrt(8) * np.sqrt(budgets))
    np.testing.assert_allclose(np.asarray(r.parameter), ref, rtol=2e-12)
    assert np.all(np.asarray(r.achieved) <= budgets)
    s = 1.2e-154
    c = jd.chernoff(*mechanisms.gaussian(1.0, sigma=s)).information
    np.testing.assert_allclose(float(c), 1 / (8 * s) / s, rtol=1e-14)


def test_compositions_whose_per_release_budget_is_subnormal():
    # budget / compositions below the smallest normal float: the engine's one-release value
    # is flushed to 0, and calibrate gave scale inf with achieved nan (found by a QA pass);
    # now the small-strength limit n theta^2 / 8 (exact to ~1e-153 relative there). Alone,
    # as here, XLA once rewrote (k theta)^2 as k^2 theta^2 and flushed it (achieved 0).
    c, n = 2.3e-308, 1000
    theta = math.sqrt(c) / math.sqrt(n / 8)
    r = calibrate("gaussian", c, compositions=n)
    assert bool(r.converged)
    np.testing.assert_allclose(float(r.parameter), 1 / theta, rtol=2e-12)  # ~7.4e154
    assert c * (1 - 1e-12) <= float(r.achieved) <= c

    def sigma(s):
        return calibrate("gaussian", c, sensitivity=s, compositions=n).parameter

    dp = jax.jvp(sigma, (1.0,), (1.0,))[1]
    np.testing.assert_allclose(float(dp), 1 / theta, rtol=2e-12)  # p / s
    budgets = np.array([2.3e-308, 1e-306])
    r = calibrate("randomized_response", budgets, metric="kl", compositions=n)
    assert np.asarray(r.converged).all()
    eps = np.sqrt(budgets) / math.sqrt(n / 2)
    np.testing.assert_allclose(np.asarray(r.parameter), eps, rtol=2e-12)


def test_reverse_mode_sensitivity_derivative_at_extreme_budgets():
    # d scale / d sensitivity = scale / sensitivity (scale invariance); reverse mode formed
    # scale / slope first, which overflowed at budget 1e-300 (nan, Gaussian inf, for
    # 3.5e149) and underflowed at 1e300 (0 for 5e-301); forward mode was right (QA pass)
    budgets = jnp.asarray([1e-300, 1.0, 1e300])

    def scale(s, c):
        return calibrate("laplace", c, sensitivity=s).parameter

    p = np.asarray(calibrate("laplace", budgets).parameter)
    grad = np.asarray(jax.vmap(jax.grad(scale), (None, 0))(1.0, budgets))
    np.testing.assert_allclose(grad, p, rtol=1e-13)


def test_allocation_float32_at_extreme_budgets_converges():
    # the default tolerance 1e-3 sqrt(u) is ~2.9 ulps of the reduced gradient's terms:
    # float32 Laplace queries at budget 1e-8 stalled at 3-8 ulps of them, ran every step
    # and reported converged=False with scales within 1e-6 of float64's (QA pass)
    s = np.array([1.0, 3.0], np.float32)
    r = allocate_budget(np.float32(1e-8), s, mechanism="laplace", max_steps=20)
    assert bool(r.converged) and int(r.iterations) < 40
    ref = [7070.878271, 12246.96193743]  # float64's
    np.testing.assert_allclose(np.asarray(r.scales), ref, rtol=2e-6)
    # beyond budgets ~1e19 the variances 2 b^2 (b ~ s / (2 budget)) underflow float32: the
    # summed objective was 0, its log -inf, the scales nan with converged=False (QA pass).
    # The large-budget optimum (see test_allocation_laplace_where_the_variances_underflow)
    # b_j = s_j A / (2 a_j budget), a_j = s_j^(2/3) (unit weights), A = sum_j a_j.
    for eps in (1e20, 1e37):
        r = allocate_budget(np.float32(eps), s, mechanism="laplace", max_steps=20)
        a = s.astype(float) ** (2 / 3)
        assert bool(r.converged) and int(r.iterations) < 40, eps
        # within the projection's slack, 8 |log b| ulps (4.4e-5 at 1e20, 8.1e-5 at 1e37;
        # measured 2.3e-5, 3.7e-5), on the safe side of the budget
        want = s * np.sum(a) / (2 * a) / eps
        slack = 8 * np.abs(np.log(want)).max() * np.finfo(np.float32).eps
        np.testing.assert_allclose(np.asarray(r.scales, float), want, rtol=slack)
        assert float(r.chernoff) <= np.float32(eps)


def test_allocation_equal_split_reaches_the_smallest_scales():
    # allocate_budget's equal split calibrates each query from log s: its 60 Newton steps
    # capped at 8 in log-scale stopped short of scales below ~3e-209 s (Laplace budgets above
    # ~1e208): equal_scales 3.5e41 times too large at 1e250, with converged=True (QA pass).
    # Laplace C = t - log(1 + t), t = s / (2 b): b = s / (2 c) to rounding for c > 1e20.
    # (_root alone, as allocate_budget calls it: ~1 s of compiling, against ~8 s for a
    # float64 Laplace allocation)
    from jaxdp.allocation import _root

    s = jnp.array([1.0, 3.0])
    zeros = jnp.zeros(2)
    root = jax.jit(
        lambda c: _root(
            "each", _laplace_pair_of_scales, zeros, s, jnp.full(2, c), jnp.log(s), span=True
        )
    )
    for c in (1e250, 1e300):
        lam, value, _, found = root(c)
        # (measured 4.5e-13; the projection's slack is 8 |log b| ulps, 1.2e-12 at 1e300)
        np.testing.assert_allclose(np.exp(np.asarray(lam)), np.asarray(s) / (2 * c), rtol=2e-12)
        assert np.all(np.asarray(value) <= c) and np.all(np.asarray(value) >= c * (1 - 2e-12))
        assert np.asarray(found).all()
    # scales ~1e-308, subnormal (XLA flushes them): not found, which allocate_budget reports
    # as converged=False
    assert not np.asarray(root(1e308)[3]).any()


def test_forward_mode_sensitivity_derivative_at_budget_zero():
    # scale inf for every sensitivity at budget 0: d scale/d sensitivity is 0 (reverse mode
    # gave it); forward mode multiplied the infinite budget slope by the zero budget tangent
    # (nan; found by a QA pass)
    budgets = jnp.asarray([0.0, 1.0])

    def scale(s):
        return calibrate("laplace", budgets, sensitivity=s).parameter

    p, dp = jax.jvp(scale, (1.0,), (1.0,))
    np.testing.assert_array_equal(np.asarray(dp), [0.0, float(p[1])])


def test_parameters_beyond_the_float_range_are_the_limits():
    # Laplace, budget 1e-300, sensitivity 1e300: the scale ~3.5e449 is inf (right), but the
    # engine's nan there came back as achieved with converged=False (found by a QA pass).
    # Now the limits: scale inf carries no information, which meets the budget; scale 0
    # (budget 1e300, sensitivity 1e-300: ~5e-601) an infinite one, which does not
    budgets = jnp.asarray([1e-300, 1e300, 1.0])
    sens = jnp.asarray([1e300, 1e-300, 1.0])
    r = calibrate("laplace", budgets, sensitivity=sens)
    np.testing.assert_array_equal(np.asarray(r.parameter)[:2], [np.inf, 0.0])
    np.testing.assert_array_equal(np.asarray(r.achieved)[:2], [0.0, np.inf])
    np.testing.assert_array_equal(np.asarray(r.converged), [True, False, True])
    # scales ~1/(2c) below the smallest normal from ~2.2e307: the guess, 12 capped steps up
    # from the small-strength asymptote's root, fell short, and the solver stepped into
    # them: achieved nan (QA pass). Same shapes: no compile
    r = calibrate("laplace", jnp.asarray([4e307, 1.7e308, 1e307]), sensitivity=jnp.ones(3))
    np.testing.assert_array_equal(np.asarray(r.parameter)[:2], 0.0)
    np.testing.assert_array_equal(np.asarray(r.achieved)[:2], np.inf)
    np.testing.assert_array_equal(np.asarray(r.converged), [False, False, True])
    np.testing.assert_allclose(float(r.parameter[2]), 5e-308, rtol=1e-12)

    def scale(s):
        return calibrate("laplace", budgets, sensitivity=s).parameter

    # dp/ds = p/s: inf beyond the range (as dp/dc = -p/(2c) there is -inf)
    _, dp = jax.jvp(scale, (sens,), (jnp.asarray([1.0, 0.0, 0.0]),))
    assert float(dp[0]) == np.inf

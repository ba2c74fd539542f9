"""Tests for jaxdp.classification: the optimal test's error exponent measured (eq. (15)).

One batched simulation (three Laplace pairs, one compile) is shared by most tests. The
references are exact: at M = 1 the MAP error is (1 - TV)/2 with TV from mpmath (integral of
(p - q)_+ with the kinks and the crossings of the piecewise-linear log-ratio as breakpoints);
at M = 2 plain (un-tilted) Monte Carlo; as M grows the Chernoff information (closed form for
equal scales, jaxdp.chernoff otherwise).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import jaxdp as jd
from jaxdp.classification import _tilted_sampler, simulate_error_exponent

DPS = 40
MS = (1, 2, 25, 100, 400)
N_SAMPLES = 20_000
# (loc_P, scale_P, loc_Q, scale_Q): theta = 1 (Laplace mechanism, eps = 1), theta = 2 (the
# paper's Section V alteration: shift 1, scale ratio 2), pure scale change.
PAIRS = ((0.0, 1.0, 1.0, 1.0), (0.0, 1.0, 1.0, 2.0), (0.0, 1.0, 0.0, 2.0))


def _batch(dtype=jnp.float64):
    cols = np.asarray(PAIRS).T
    return (
        jd.Laplace(jnp.asarray(cols[0], dtype), jnp.asarray(cols[1], dtype)),
        jd.Laplace(jnp.asarray(cols[2], dtype), jnp.asarray(cols[3], dtype)),
    )


@pytest.fixture(scope="module")
def sim():
    P, Q = _batch()
    return simulate_error_exponent(P, Q, MS, key=jax.random.key(0), n_samples=N_SAMPLES)


def _log_ratio_pieces(m0, b0, m1, b1):
    """Kinks and crossings of log p/q (piecewise linear) for a Laplace pair, in mpmath."""

    def f(x):
        return mp.log(b1 / b0) - abs(x - m0) / b0 + abs(x - m1) / b1

    kinks = sorted({m0, m1})
    edges = [-mp.inf, *kinks, mp.inf]
    roots = []
    for a, b in itertools.pairwise(edges):
        if a == -mp.inf:
            x1, x2 = b - 2, b - 1
        elif b == mp.inf:
            x1, x2 = a + 1, a + 2
        else:
            x1, x2 = a + (b - a) / 3, a + 2 * (b - a) / 3
        slope = (f(x2) - f(x1)) / (x2 - x1)
        if slope != 0:
            r = x1 - f(x1) / slope
            if a < r < b:
                roots.append(r)
    return sorted([*kinks, *roots])


def laplace_tv_mp(m0, b0, m1, b1):
    with mp.workdps(DPS):
        m0, b0, m1, b1 = (mp.mpf(v) for v in (m0, b0, m1, b1))

        def p(x):
            return mp.exp(-abs(x - m0) / b0) / (2 * b0)

        def q(x):
            return mp.exp(-abs(x - m1) / b1) / (2 * b1)

        pts = [-mp.inf, *_log_ratio_pieces(m0, b0, m1, b1), mp.inf]
        return mp.quad(lambda x: max(p(x) - q(x), 0), pts)


def tilted_cdf_mp(m0, b0, m1, b1, a, xs):
    with mp.workdps(DPS):
        m0, b0, m1, b1, a = (mp.mpf(v) for v in (m0, b0, m1, b1, a))

        def g(x):
            return mp.exp(-a * abs(x - m0) / b0 - (1 - a) * abs(x - m1) / b1)

        kinks = sorted({m0, m1})
        total = mp.quad(g, [-mp.inf, *kinks, mp.inf])
        out = []
        for x in xs:
            x = mp.mpf(x)
            pts = [-mp.inf, *[k for k in kinks if k < x], x]
            out.append(float(mp.quad(g, pts) / total))
        return np.asarray(out)


# --------------------------------------------------------------------------------------------


def test_m1_matches_exact_error(sim):
    # M = 1: the MAP test errs with probability (1 - TV)/2 exactly.
    for i, pair in enumerate(PAIRS):
        tv = laplace_tv_mp(*pair)
        np.testing.assert_allclose(jd.tv(jd.Laplace(*pair[:2]), jd.Laplace(*pair[2:])), float(tv))
        exact = float((1 - tv) / 2)
        est, rse = float(sim.error_prob[i, 0]), float(sim.relative_se[i, 0])
        assert rse < 0.005
        assert abs(est - exact) <= 4 * rse * est, (pair, est, exact)


def test_m2_matches_plain_monte_carlo(sim):
    # M = 2 (P_e ~ 0.25): plain Monte Carlo from P and Q, no tilting, numpy's generator.
    # For theta = 1 the statistic has an atom at S = 0 (one draw in each tail; p^2 = q^2
    # there, so any tie rule gives the same P_e), which floating point scatters to +-1e-16
    # with a sign that depends on how the draws were generated: ties are detected and
    # counted as half an error (a randomised tie rule). The IS estimator needs no such care:
    # its ratio exp(min((1-a)S, -aS)) is continuous at S = 0.
    rng = np.random.default_rng(1)
    n = 200_000
    for i, (m0, b0, m1, b1) in enumerate(PAIRS):

        def llr(x, m0=m0, b0=b0, m1=m1, b1=b1):
            return (np.log(b1 / b0) - np.abs(x - m0) / b0 + np.abs(x - m1) / b1).sum(axis=1)

        def err(s, sign):
            return np.where(np.abs(s) < 1e-9, 0.5, sign * s > 0)

        miss = err(llr(rng.laplace(m0, b0, (n, 2))), -1.0)
        fa = err(llr(rng.laplace(m1, b1, (n, 2))), 1.0)
        plain = 0.5 * (miss.mean() + fa.mean())
        se_plain = 0.5 * np.sqrt(miss.var() / n + fa.var() / n)
        est = float(sim.error_prob[i, 1])
        se_is = float(sim.relative_se[i, 1]) * est
        assert abs(est - plain) <= 4 * np.hypot(se_plain, se_is), (i, est, plain)


def test_exponent_approaches_chernoff_information(sim):
    # eq. (15): -log P_e(M)/M -> C. Bahadur-Rao: -log P_e = C M + log(M)/2 + O(1), so
    # d(M) = -log P_e - C M - log(M)/2 must settle; |d(400) - d(100)| < 0.1 pins the slope
    # to C within 0.1/300 = 3.3e-4 nats (0.35% of C for theta = 1; a 1% error in C would
    # shift d(400) - d(100) by ~0.28).
    # Chernoff information and alpha*: closed forms for theta = 1 (eps = 1: C = 1/2 - log 1.5,
    # alpha* = 1/2) and for the pure scale change (C_a = 2^a/(1 + a): alpha* = 1/log 2 - 1,
    # C = log 2 - 1 - log log 2); jaxdp.chernoff (used by default) for theta = 2.
    with mp.workdps(DPS):
        ln2 = mp.log(2)
        exact = [
            (mp.mpf(1) / 2 - mp.log(mp.mpf(3) / 2), mp.mpf(1) / 2),
            (None, None),
            (ln2 - 1 - mp.log(ln2), 1 / ln2 - 1),
        ]
    for i, (c_ref, a_ref) in enumerate(exact):
        if c_ref is not None:
            assert abs(float(sim.information[i]) - float(c_ref)) <= 1e-15
            assert abs(float(sim.alpha[i]) - float(a_ref)) <= 1e-9
    ms = np.asarray(MS, float)
    for i in range(len(PAIRS)):
        cinf = float(sim.information[i])
        expo = np.asarray(sim.exponent[i])
        assert np.all(np.diff(expo) < 0), expo  # decreasing towards C ...
        assert np.all(expo > cinf)  # ... from above
        assert expo[-1] - cinf < 0.02  # M = 400: within 0.02 nats (~20% of C ~ 0.1)
        # the CI of the exponent is tight and ordered
        assert np.all(sim.exponent_low[i] < expo) and np.all(expo < sim.exponent_high[i])
        assert float(sim.exponent_high[i, -1] - sim.exponent_low[i, -1]) < 2e-4
        d = -np.asarray(sim.log_error_prob[i]) - cinf * ms - 0.5 * np.log(ms)
        assert abs(d[-1] - d[-2]) < 0.1, d
        assert np.all(sim.ci_low[i] < sim.error_prob[i])
        assert np.all(sim.error_prob[i] < sim.ci_high[i])


def test_any_tilt_is_unbiased_and_optimal_tilt_has_lower_variance(sim):
    P, Q = _batch()
    other = simulate_error_exponent(P, Q, MS, key=jax.random.key(1), n_samples=N_SAMPLES, alpha=0.3)
    np.testing.assert_array_equal(other.alpha, 0.3)
    # unbiased for every alpha: agreement at M = 25 within 4 combined standard errors
    gap = np.abs(np.asarray(other.log_error_prob[:, 2] - sim.log_error_prob[:, 2]))
    assert np.all(gap <= 4 * np.hypot(other.relative_se[:, 2], sim.relative_se[:, 2]))
    # the optimal tilt alpha* keeps the relative error small at large M; alpha = 0.3 does not
    assert np.all(other.relative_se[:, -1] > 2 * sim.relative_se[:, -1])


def test_tilted_sampler_is_exact():
    # Empirical CDF of the tilted draws vs the exact CDF of p^a q^(1-a)/C_a: middle piece
    # decreasing (first pair) and increasing (second pair) exercise both inversions.
    n = 100_000
    xs = (-2.0, 0.1, 0.4, 0.8, 3.0)
    for pair, a in (((0.0, 1.0, 1.0, 2.0), 0.46), ((0.0, 2.0, 1.0, 1.0), 0.4)):
        args = [jnp.asarray(v) for v in (*pair, a)]
        x = np.asarray(_tilted_sampler(*args)(jax.random.key(3), n))
        emp = (x[None, :] <= np.asarray(xs)[:, None]).mean(axis=1)
        exact = tilted_cdf_mp(*pair, a, xs)
        assert np.all(np.abs(emp - exact) <= 5 * np.sqrt(exact * (1 - exact) / n) + 1e-12)


def test_float32(sim):
    P, Q = _batch(jnp.float32)
    r = simulate_error_exponent(P, Q, MS, key=jax.random.key(0), n_samples=N_SAMPLES)
    assert r.error_prob.dtype == jnp.float32
    assert r.exponent.shape == (len(PAIRS), len(MS))
    for i, pair in enumerate(PAIRS):
        exact = float((1 - laplace_tv_mp(*pair)) / 2)
        assert abs(float(r.error_prob[i, 0]) - exact) <= 4 * float(r.relative_se[i, 0]) * exact
        assert 0 < float(r.exponent[i, -1] - r.information[i]) < 0.02
    # same draws (the sampler uses one uniform per draw in either dtype): close to float64
    np.testing.assert_allclose(r.log_error_prob, sim.log_error_prob, atol=0.02)


def test_reproducible(sim):
    P, Q = _batch()
    # (n_samples as a numpy integer, as Ms takes: was refused, "must be an int >= 2")
    again = simulate_error_exponent(P, Q, MS, key=jax.random.key(0), n_samples=np.int64(N_SAMPLES))
    np.testing.assert_array_equal(again.log_error_prob, sim.log_error_prob)
    np.testing.assert_array_equal(again.relative_se, sim.relative_se)


def test_memory_does_not_grow_with_the_path_length():
    # the per-step sums for every M = 1..max(Ms) were kept (and the scan's index array):
    # Ms = [2**31] compiled to ~52 GB of temporaries. Now only the requested Ms' sums: the
    # compiled program's temporaries, n_samples = 2 (not run: 2**31 steps)
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0)

    def f(key):
        return simulate_error_exponent(P, Q, [3, 2**31], key=key, n_samples=2, alpha=0.5)

    compiled = jax.jit(f).lower(jax.random.key(0)).compile()
    assert compiled.memory_analysis().temp_size_in_bytes < 2**16


def test_validation():
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0)
    key = jax.random.key(0)
    with pytest.raises(TypeError, match=r"P must be a jaxdp\.Laplace"):
        simulate_error_exponent(jd.Gaussian(0.0, 1.0), Q, (1,), key=key)
    with pytest.raises(TypeError, match="Ms"):
        simulate_error_exponent(P, Q, (), key=key)
    with pytest.raises(ValueError, match="Ms"):
        simulate_error_exponent(P, Q, (0, 3), key=key)
    with pytest.raises(ValueError, match="alpha"):
        simulate_error_exponent(P, Q, (1,), key=key, alpha=1.5)
    # (numpy scalars as written: numpy 2's repr read "got np.int64(1)")
    for n in (1, np.int64(1)):
        with pytest.raises(ValueError, match=r"^n_samples must be an int >= 2, got 1$"):
            simulate_error_exponent(P, Q, (1,), key=key, n_samples=n)
    for level in (1.0, np.float64(1.0)):
        with pytest.raises(ValueError, match=r"^confidence must lie in \(0, 1\), got 1\.0$"):
            simulate_error_exponent(P, Q, (1,), key=key, confidence=level)
    # these raised "'<' not supported between instances of 'float' and 'str'" (no name)
    for bad in ("0.9", None, [0.9], 1j):
        with pytest.raises(TypeError, match=r"^confidence must be"):
            simulate_error_exponent(P, Q, (1,), key=key, confidence=bad)
    # these named nothing: "'int' object is not iterable" and JAX PRNG internals
    with pytest.raises(TypeError, match=r"^Ms must be"):
        simulate_error_exponent(P, Q, 3, key=key)
    # a batch of keys gave JAX's "split accepts a single key" (one simulation takes one key)
    for bad in (None, 3, jax.numpy.zeros(3), jax.random.split(key, 3), jnp.zeros((3, 2), "uint32")):
        with pytest.raises(TypeError, match=r"^key must be a JAX PRNG key"):
            simulate_error_exponent(P, Q, (1,), key=bad)


def test_traced_alpha_outside_the_interval_is_nan_in_every_field():
    # under jit alpha cannot be checked: every field is nan (relative_se was finite)
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0)

    @jax.jit
    def run(a):
        return simulate_error_exponent(P, Q, (1, 2), key=jax.random.key(0), n_samples=8, alpha=a)

    r = run(jnp.asarray([1.5, -0.5, jnp.nan, 0.5]))  # one compile
    for name in ("error_prob", "ci_low", "ci_high", "exponent", "relative_se", "information"):
        field = np.asarray(getattr(r, name))
        assert np.all(np.isnan(field[:3])) and np.all(np.isfinite(field[3])), name

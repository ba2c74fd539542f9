"""The library as JAX runs by default: ``jax_enable_x64`` off (float32, int32).

The suite runs under x64 (``conftest.py``); these tests switch it off for their duration, as
``test_calibrate.py`` and ``test_sweep.py`` do for single checks.
"""

import jax
import numpy as np
import pytest

import jaxdp as jd


@pytest.fixture
def no_x64():
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


def test_numpy_integers_beyond_int32_are_refused_not_wrapped(no_x64):
    # JAX narrows numpy int64 to int32 without x64, silently: np.int64(2**32 + 3) was read
    # as 3 (a geometric mechanism of sensitivity 3, a Chernoff bound for n = 3, a Laplace
    # location 3), 2**32 as 0 (a probability vector [2**32, 1] read as [0, 1])
    big = np.int64(2**32 + 3)
    cases = [
        (lambda: jd.mechanisms.geometric(big, epsilon=1.0), "sensitivity"),
        (lambda: jd.Laplace(big, 1.0), "Laplace: loc"),
        (lambda: jd.Categorical(np.array([2**32, 1])), "Categorical: probs"),
        (lambda: jd.calibrate("geometric", 0.1, sensitivity=big), "sensitivity"),
        (lambda: jd.allocate_budget(0.5, [1.0, 2.0], np.array([2**32 + 1, 1])), "weights"),
        (lambda: jd.max_tv_eps_dp_chernoff_bound(1e-3, big), "n"),
        (lambda: jd.max_kl_eps_dp(np.array([1, 2**32 + 3])), "eps"),
        (lambda: jd.paper.eq38(0.1, big), "q"),
        (lambda: jd.mechanisms.geometric(np.uint64(2**32 + 3), epsilon=1.0), "sensitivity"),
        # Python ints there raised JAX's OverflowError about "args[1]"
        (lambda: jd.max_tv_eps_dp_chernoff_bound(1e-3, 2**31), "n"),
        (lambda: jd.max_tv_chernoff(2**40), "c"),
        # a list of them numpy's OverflowError, unnamed
        (lambda: jd.max_kl_eps_dp([1, 2**40]), "eps"),
    ]
    for make, name in cases:
        with pytest.raises(
            ValueError, match=f"^{name} holds an integer outside the range of u?int32"
        ):
            make()
    # in range, numpy integers are read as before
    np.testing.assert_allclose(
        jd.max_tv_eps_dp_chernoff_bound(1e-3, np.int64(3)), jd.max_tv_eps_dp_chernoff_bound(1e-3, 3)
    )
    assert jd.mechanisms.geometric(np.int64(2**31 - 1), epsilon=1.0)[1].loc == 2.0**31


def test_iteration_caps_beyond_int32_are_honoured(no_x64):
    # the solvers count iterations in int32: max_steps = 2**31 raised JAX's OverflowError
    # about an argument "y" (without x64), and under x64 calibrate wrapped it and ran no
    # iteration (achieved nan, converged False)
    P, Q = jd.mechanisms.laplace(epsilon=1.0)
    assert jd.chernoff(P, Q, max_steps=2**31).converged
    jax.config.update("jax_enable_x64", True)  # (the fixture turns it off again at the end)
    r = jd.calibrate("randomized_response", 0.1, metric="tv", max_steps=2**31)
    assert r.converged and 0.1 * (1 - 1e-9) < r.achieved <= 0.1


def test_membership_bounds_beyond_int32_releases(no_x64):
    # n * eps raised JAX's OverflowError about an argument "x" (under x64: the exact sum's
    # memory refusal, naming n, as now)
    with pytest.raises(ValueError, match=r"^n=2147483648: the binomial sum"):
        jd.membership_bounds(1e-3, 2**31)


def test_categorical_masses_below_the_float32_range_keep_their_logarithm(no_x64):
    # a float64 mass of 1e-50 was rounded to float32 (0) before its log was taken: log-prob
    # -inf, where -115.13 is a float32, and a KL of inf for one of 57.4 nats
    P = jd.Categorical(np.array([1e-50, 1 - 1e-50]))
    Q = jd.Categorical([0.5, 0.5])
    np.testing.assert_allclose(P.log_probs, [-50 * np.log(10), 0.0], rtol=1e-7)
    want = 0.5 * np.log(0.5e50) + 0.5 * np.log(0.5)  # KL(Q || P)
    np.testing.assert_allclose(jd.kl(Q, P), want, rtol=1e-6)


def test_values_beyond_the_float32_range_are_named_as_given(no_x64):
    # a Python float is float32 here, and the boundary checks saw it rounded: sigma=1e-310
    # was refused as "sigma must be positive and finite, got 0.0", 1e39 as "got inf"
    cases = [
        (lambda: jd.mechanisms.gaussian(1.0, sigma=1e-310), "sigma", "1e-310", "0.0"),
        (lambda: jd.mechanisms.gaussian(1.0, sigma=1e39), "sigma", "1e+39", "inf"),
        (lambda: jd.mechanisms.laplace(1.0, epsilon=1e-50), "epsilon", "1e-50", "0.0"),
        (lambda: jd.Laplace(0.0, np.array([1.0, 1e-300])), "Laplace: scale", "1e-300", "0.0"),
        (lambda: jd.Gaussian([0.0, 1e300], 1.0), "Gaussian: loc", "1e+300", "inf"),
        (lambda: jd.DiscreteLaplace(0, 1e-300), "DiscreteLaplace: scale", "1e-300", "0.0"),
        (lambda: jd.allocate_budget(1e-300, [1.0, 2.0]), "budget", "1e-300", "0.0"),
        (lambda: jd.calibrate("laplace", 0.1, sensitivity=1e-300), "sensitivity", "1e-300", "0.0"),
    ]
    for make, name, given, rounded in cases:
        # (numpy's cast of 1e39 or 1e300 to float32 warns of the overflow; the error says it)
        with pytest.raises(ValueError, match=f"^{name} must be") as e, np.errstate(over="ignore"):
            make()
        # (the bad value as given, then what float32 made of it)
        tail = f"got {given} ({rounded} as float32, outside its range; enable jax_enable_x64"
        assert tail in str(e.value), str(e.value)
    # subnormal in float32: named as given by the normal-range check, as before
    with pytest.raises(ValueError, match=r"smallest normal float32 .* got 1e-40$"):
        jd.mechanisms.gaussian(1.0, sigma=1e-40)

"""Exact composition vs the paper's Corollary 1.2 sum."""

import mp_refs
import mpmath as mp
import numpy as np
import pytest

import jaxdp as jd


def test_heterogeneous_composition_vs_mpmath():
    pairs = [
        jd.mechanisms.laplace(epsilon=1.0),
        jd.mechanisms.adversarial_laplace(1.0, shift=1.0, theta=3.0),
    ]
    r = jd.compose(pairs)

    def total(a):
        return mp_refs.lap_log_bc_cf(0, 1, 1, 1, a) + mp_refs.lap_log_bc_cf(0, 1, 1, 3, a)

    info, a = mp_refs.maximise(lambda t: -total(t))
    np.testing.assert_allclose(r.exact, float(info), rtol=1e-10)
    np.testing.assert_allclose(r.alpha, float(a), atol=1e-8)
    # Corollary 1.2's sum is an upper bound, strict here (the optima differ)
    assert float(r.gain) > 1e-3 and float(r.exact) < float(r.paper_sum)
    np.testing.assert_allclose(r.paper_sum, sum(r.individual), rtol=1e-15)


def test_symmetric_mechanisms_compose_additively():
    pairs = [jd.mechanisms.laplace(epsilon=0.5), jd.mechanisms.randomized_response(1.0)]
    r = jd.compose(pairs)
    with mp.workdps(50):
        want = 0.25 - mp.log1p(mp.mpf(0.25)) + mp.log(mp.cosh(mp.mpf(0.5)))
    np.testing.assert_allclose(r.exact, float(want), rtol=1e-12)
    np.testing.assert_allclose(r.gain, 0.0, atol=1e-15)


def test_bad_input():
    with pytest.raises(ValueError, match="pairs"):
        jd.compose([])
    with pytest.raises(TypeError, match="pairs\\[0\\]"):
        jd.compose([jd.Laplace()])

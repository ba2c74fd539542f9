"""Location-scale invariance over the whole float64 range.

Every quantity of a Laplace/Gaussian pair depends only on the shift and the scale ratio, so
scaling all parameters by ``s`` must change nothing, and a parameter gradient must scale as
``1/s``. Before ``jaxdp.coefficient.standardize`` the kernels formed products and squares of
the scales: at ``s`` = 1e-200 or 1e200 Gaussian quantities were ``nan``, Laplace TV ``nan``
and its order-2 Rényi divergence negative. The reference is the same pair at ``s = 1``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdp as jd

S = jnp.asarray([1.0, 1e-300, 1e-200, 1e-30, 1e30, 1e200, 1e300])
PAIRS = [(jd.Laplace, jd.Laplace), (jd.Gaussian, jd.Gaussian), (jd.Laplace, jd.Gaussian)]


def _pair(cp, cq, s):
    return cp(0.3 * s, s), cq(-0.4 * s, 1.5 * s)


@pytest.mark.parametrize("cp,cq", PAIRS, ids=["laplace", "gaussian", "laplace-gaussian"])
def test_values_do_not_depend_on_the_scale(cp, cq):
    P, Q = _pair(cp, cq, S)
    r = jd.chernoff(P, Q)
    assert bool(jnp.all(r.converged))
    got = {
        "information": r.information,
        "alpha": r.alpha,
        "kl": jd.kl(P, Q),
        "kl_qp": jd.kl(Q, P),
        "tv": jd.tv(P, Q),
        "renyi2": jd.renyi(P, Q, 2.0),
    }
    for name, v in got.items():
        v = np.asarray(v)
        # dividing by a power of two is exact: the same numbers to the last digit or two
        np.testing.assert_allclose(v, v[0], rtol=1e-13, atol=0, err_msg=name)


@pytest.mark.parametrize("cp,cq", PAIRS, ids=["laplace", "gaussian", "laplace-gaussian"])
def test_gradients_scale_as_one_over_s(cp, cq):
    def info(params, s):
        m1, b1, m2, b2 = params
        return jd.chernoff(cp(m1, b1), cq(m2, b2)).information

    params = jnp.stack([0.3 * S, S, -0.4 * S, 1.5 * S], axis=-1)
    g = np.asarray(jax.jit(jax.vmap(jax.grad(info)))(params, S)) * np.asarray(S)[:, None]
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, np.broadcast_to(g[0], g.shape), rtol=1e-12, atol=0)

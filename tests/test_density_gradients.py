"""Derivatives of quadrature-path results in what a ``jd.Density``'s log-density depends on.

A log-density may take its parameters as ``params=`` or close over them
(``jd.Density(lambda x: log_p(x, theta))``, the natural way to write it in JAX). Before,
``jd.chernoff`` gave a closed-over ``theta`` a derivative of exactly 0, silently; building the
density under ``jax.grad`` raised a ``TracerArrayConversionError`` (the constructor's nan check
of ``log_prob``) unless a traced ``centre`` skipped it; and differentiating ``params`` and a
closed-over value together raised JAX's "No constant handler" ``TypeError``. Separately, every
gradient of a Rényi divergence (and of ``log_bc`` off ``[0, 1]``) of a ``Density`` was ``nan``
(the tail remainder's ``expm1`` overflowing in its derivative).

Reference: the same quantities for ``jd.Gaussian`` pairs, whose kernel is closed-form
(itself checked against mpmath and finite differences in ``test_chernoff.py``), and a
central finite difference of the closure form.
"""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdp as jd

Q = jd.Gaussian(0.0, 1.5)
THETA = np.array([0.7, 1.2])  # (mean, standard deviation) of P


def _log_normal(x, m, s):
    return -0.5 * ((x - m) / s) ** 2 - jnp.log(s) - 0.5 * jnp.log(2 * jnp.pi)


def _p(kind, theta):
    m, s = theta[0], theta[1]
    if kind == "closure":
        return jd.Density(lambda x: _log_normal(x, m, s))
    if kind == "mixed":  # the mean as params, the scale closed over
        return jd.Density(lambda x, p: _log_normal(x, p, s), params=m)
    return jd.Gaussian(m, s)


def _chernoff(kind, theta):
    r = jd.chernoff(_p(kind, theta), Q)
    return jnp.stack([r.information, r.alpha])


# One program for all forms: the value, the Jacobian of (information, alpha) in (mean, scale)
# by reverse mode, and the Hessian of the information (forward over that reverse mode, whose
# primal outputs are the value and the Jacobian: one trace of each form, not three).
@jax.jit
def _derivatives(theta):
    out = {}
    for kind in ("gaussian", "closure", "mixed"):
        f = lambda t, kind=kind: _chernoff(kind, t)  # noqa: E731
        g = lambda t, f=f: (f(t), jax.jacrev(f)(t))  # noqa: E731
        if kind == "mixed":
            out[kind] = (*g(theta), None)
            continue
        (value, jac), (_, djac) = jax.vmap(
            lambda e, g=g: jax.jvp(g, (theta,), (e,)), out_axes=(None, 0)
        )(jnp.eye(2))
        out[kind] = (value, jac, djac[:, 0])  # djac[i, o, k] = d2 f_o / d theta_i d theta_k
    return out


@pytest.fixture(scope="module")
def derivatives():
    return jax.tree_util.tree_map(np.asarray, _derivatives(jnp.asarray(THETA)))


_closure_values = jax.jit(lambda t: _chernoff("closure", t))


@pytest.mark.parametrize("kind", ["closure", "mixed"])
def test_chernoff_differentiates_closed_over_values(derivatives, kind):
    value, jac, hess = derivatives[kind]
    value0, jac0, hess0 = derivatives["gaussian"]
    assert np.all(np.abs(jac0) > 1e-3)  # every entry is a real derivative (not 0 = 0)
    np.testing.assert_allclose(value, value0, rtol=1e-13)
    np.testing.assert_allclose(jac, jac0, rtol=1e-10)
    if hess is not None:
        np.testing.assert_allclose(hess, hess0, rtol=1e-9)


def test_closure_gradient_matches_finite_differences(derivatives):
    # central differences of the plain call (no derivative rule involved), step 1e-5:
    # truncation ~1e-10 relative, rounding ~1e-16/1e-5
    value, jac, _ = derivatives["closure"]
    # the added terms are t - stop_gradient(t): exactly 0 in the values
    np.testing.assert_array_equal(np.asarray(_closure_values(THETA)), value)
    h = 1e-5
    for i in range(2):
        e = np.zeros(2)
        e[i] = h
        fd = (np.asarray(_closure_values(THETA + e)) - np.asarray(_closure_values(THETA - e))) / (
            2 * h
        )
        np.testing.assert_allclose(jac[:, i], fd, rtol=1e-8)


def test_grad_of_jit_and_vmap_of_grad_with_a_closure():
    grad_closure = jax.grad(lambda m: jd.chernoff(_p("closure", (m, 1.2)), Q).information)
    grad_gauss = jax.grad(lambda m: jd.chernoff(_p("gaussian", (m, 1.2)), Q).information)
    ms = jnp.asarray([0.3, 0.7, 1.1])
    got = jax.vmap(jax.jit(grad_closure))(ms)  # grad inside the jit: the density is built there
    # the reference jitted: eagerly, the vmapped gradient compiled its pieces one by one
    np.testing.assert_allclose(got, jax.jit(jax.vmap(grad_gauss))(ms), rtol=1e-10)


def test_renyi_and_log_bc_gradients_of_a_density_are_finite_and_right():
    orders = (0.5, 2.0)

    def values(m):
        dens = jd.Density(lambda x, p: _log_normal(x, p, 1.0), params=m)
        rows = []
        for P in (dens, jd.Gaussian(m, 1.0)):
            terms = [jd.renyi(P, Q, o) for o in orders] + [jd.kl(P, Q)]
            rows.append(jnp.stack(terms))
        return jnp.stack(rows)

    got, want = np.asarray(jax.jit(jax.jacrev(values))(0.7))
    assert np.all(np.abs(want) > 1e-2)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_hessians_of_a_density_whose_centre_moves_with_its_parameter():
    # centre = m: at m = 0 the integrand's peak search found a spurious peak 2.4e-17 from
    # the centre, and the sliver between them (one end fixed, one moving) made the Hessians
    # O(1) off: d2C/dm2 0.169 for 0.160, d2 alpha/dm2 -0.0073 for 0.0246, d2 log C_0.3/dm2
    # 0.036 for -0.153 (first derivatives right). Found by an ad hoc gradient sweep.
    def values(m, make):
        P, Q = make(m), jd.Gaussian(1.0, 1.5)
        r = jd.chernoff(P, Q)
        return jnp.stack([r.information, r.alpha, jd.log_bc(P, Q, 0.3)])

    def centred(m):
        return jd.Density(lambda x, p: _log_normal(x, p, 1.0), params=m, centre=m)

    hessians = jax.jit(
        lambda m: [
            jax.hessian(values)(m, make) for make in (centred, lambda m: jd.Gaussian(m, 1.0))
        ]
    )
    got, want = (np.asarray(h) for h in hessians(0.0))
    assert np.all(np.abs(want) > 1e-2)
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_closure_test_is_skipped_outside_transformations():
    # the test traces log_prob (0.3 ms of a 0.7 ms eager call of a Density pair): it runs
    # only under a transformation, which jaxdp.chernoff._tracing detects
    module = importlib.import_module("jaxdp.chernoff")  # (jaxdp.chernoff is the function)
    seen = []
    assert not module._tracing()
    jax.jit(lambda x: seen.append(module._tracing()) or x)(1.0)
    jax.grad(lambda x: seen.append(module._tracing()) or x)(1.0)
    assert seen == [True, True]

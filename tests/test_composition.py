"""Exact composition vs the paper's Corollary 1.2 sum."""

import math

import jax
import jax.numpy as jnp
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
    with pytest.raises(TypeError, match=r"^pairs must be a sequence of"):  # (was "not iterable")
        jd.compose(None)
    # (was "Product: component 0 must be a jaxdp distribution", naming neither)
    with pytest.raises(TypeError, match=r"^pairs\[1\]: Q must be a jaxdp distribution, got float"):
        jd.compose([jd.mechanisms.laplace(1.0, epsilon=1.0), (jd.Laplace(), 2.0)])
    # batch shapes that do not broadcast, within a pair or across pairs, and a product
    # beside a non-product: named "Product: ..." or "Product component 0: ...", the composed
    # pair built inside (QA pass)
    L = jd.Laplace
    with pytest.raises(ValueError, match=r"^pairs\[1\]: P, Q: batch shapes \(2,\), \(3,\)"):
        jd.compose([(L(), L(1.0)), (L(jnp.zeros(2)), L(1.0, jnp.ones(3)))])
    with pytest.raises(ValueError, match=r"^pairs: the pairs' batch shapes \[\(2,\), \(3,\)\]"):
        jd.compose([(L(jnp.zeros(2)), L(1.0)), (L(jnp.zeros(3)), L(1.0))])
    with pytest.raises(TypeError, match=r"^pairs\[0\]: a Product can only be compared"):
        jd.compose([(jd.Product(L(), L()), L(1.0))])


def test_a_disjoint_pair_makes_the_composition_infinite_with_no_gain():
    # gain was inf - inf = nan
    disjoint = (jd.Categorical(jnp.asarray([1.0, 0.0])), jd.Categorical(jnp.asarray([0.0, 1.0])))
    r = jd.compose([disjoint, jd.mechanisms.randomized_response(1.0)])
    assert float(r.exact) == float(r.paper_sum) == math.inf and float(r.gain) == 0.0
    assert float(r.individual[0]) == math.inf
    np.testing.assert_allclose(r.individual[1], math.log(math.cosh(0.5)), rtol=1e-14)


def _mixed_product(batch):
    """Two products of three Laplace, two Gaussian, two discrete Laplace components and a
    categorical one; the first Laplace location is a batch of ``batch``."""
    L, G, D = jd.Laplace, jd.Gaussian, jd.DiscreteLaplace
    cat_p, cat_q = jd.Categorical(jnp.asarray([0.2, 0.8])), jd.Categorical(jnp.asarray([0.6, 0.4]))
    locs = jnp.linspace(0.0, 0.5, batch)
    P = jd.Product(L(locs, 1.0), L(0.0, 2.0), G(0.0, 1.0), L(-1.0, 1.0), G(0.0, 1.0))
    Q = jd.Product(L(1.0, 1.5), L(0.3, 0.5), G(1.0, 2.0), L(2.0, 1.0), G(0.5, 1.0))
    P = jd.Product(*P.components, D(0.0, 2.0), cat_p, D(0.0, 1.0))
    Q = jd.Product(*Q.components, D(1.0, 2.0), cat_q, D(2.0, 3.0))
    return P, Q


def _mixed_product_log_bc(loc, a):
    return (
        mp_refs.lap_log_bc_cf(loc, 1, 1, 1.5, a)
        + mp_refs.lap_log_bc_cf(0, 2, 0.3, 0.5, a)
        + mp_refs.gau_log_bc_cf(0, 1, 1, 2, a)
        + mp_refs.lap_log_bc_cf(-1, 1, 2, 1, a)
        + mp_refs.gau_log_bc_cf(0, 1, 0.5, 1, a)
        + mp_refs.dl_log_bc(0, 2, 1, 2, a)
        + mp_refs.cat_log_bc([0.2, 0.8], [0.6, 0.4], a)
        + mp_refs.dl_log_bc(0, 1, 2, 3, a)
    )


def test_products_with_several_components_of_a_family_vs_mpmath():
    # Components of one family are stacked and summed by one copy of its kernel
    # (jaxdp.kernels.stacked); broadcasting batch shapes across components, mixing families
    # and leaving a family of one (categorical) alone.
    P, Q = _mixed_product(2)
    r = jd.chernoff(P, Q)
    assert r.information.shape == (2,) and bool(jnp.all(r.converged))
    for i, loc in enumerate((0.0, 0.5)):
        info, a = mp_refs.chernoff(_mixed_product_log_bc, loc)
        np.testing.assert_allclose(r.information[i], float(info), rtol=1e-13)
        np.testing.assert_allclose(r.alpha[i], float(a), rtol=1e-11)

    # KL is additive too, and stacked the same way
    with mp.workdps(30):
        fixed = (
            mp_refs.lap_kl(0, 2, 0.3, 0.5)
            + mp_refs.gau_kl(0, 1, 1, 2)
            + mp_refs.lap_kl(-1, 1, 2, 1)
            + mp_refs.gau_kl(0, 1, 0.5, 1)
            + mp_refs.dl_kl_tv(0, 2, 1, 2)[0]
            + mp.mpf(0.2) * mp.log(mp.mpf(0.2) / mp.mpf(0.6))
            + mp.mpf(0.8) * mp.log(mp.mpf(0.8) / mp.mpf(0.4))
            + mp_refs.dl_kl_tv(0, 1, 2, 3)[0]
        )
        want = [float(fixed + mp_refs.lap_kl(loc, 1, 1, 1.5)) for loc in (0.0, 0.5)]
    np.testing.assert_allclose(jd.kl(P, Q), want, rtol=1e-13)

    # gradients flow back through the stacks to every component's parameters (Laplace and
    # Gaussian pairs only: a discrete Laplace gradient alone compiles for ~8 s)
    Pg, Qg = (jd.Product(*(d.components[i] for i in range(1, 5))) for d in (P, Q))

    @jax.jit
    def info(s_lap, s_gau):
        comps = list(Pg.components)
        comps[0], comps[3] = jd.Laplace(0.0, s_lap), jd.Gaussian(0.0, s_gau)
        return jd.chernoff(jd.Product(*comps), Qg).information

    x = (2.0, 1.0)
    grads = jax.jit(jax.grad(info, argnums=(0, 1)))(*x)
    for k, g in enumerate(grads):
        h = 1e-6
        up = [v + h * (j == k) for j, v in enumerate(x)]
        dn = [v - h * (j == k) for j, v in enumerate(x)]
        fd = (float(info(*up)) - float(info(*dn))) / (2 * h)
        np.testing.assert_allclose(float(g), fd, rtol=1e-7, err_msg=f"argument {k}")


def test_products_compile_one_kernel_per_family():
    # The compiled program of a product of 8 distinct Laplace pairs has as many kernels as
    # that of 2 (it had one copy of the Laplace kernel per component: ~0.2 s of XLA:CPU
    # compile time each)
    def n_kernels(k):
        P = jd.Product(*(jd.Laplace(0.0, 1.0 + i) for i in range(k)))
        Q = jd.Product(*(jd.Laplace(1.0, 2.0 + i) for i in range(k)))
        text = jax.jit(jd.chernoff).lower(P, Q).compile().as_text()
        return text.count(" fusion(")

    assert n_kernels(8) == n_kernels(2)


def test_stacked_products_broadcast_alpha_like_their_components():
    # a 2-D batch (components of shapes (2, 3) and (3,)) with alpha of fewer axes: the stack
    # axis was inserted at a negative position that did not exist (ValueError for a scalar)
    L = jd.Laplace
    P = jd.Product(L(jnp.zeros((2, 3)), 1.0), L(0.0, 2.0))
    Q = jd.Product(L(1.0, 1.5), L(0.3, jnp.full((3,), 0.5)))
    for a in (0.3, jnp.asarray([0.1, 0.2, 0.3])):
        want = sum(jd.log_bc(p, q, a) for p, q in zip(P.components, Q.components, strict=True))
        got = jd.log_bc(P, Q, a)
        assert got.shape == (2, 3)
        np.testing.assert_allclose(got, want, rtol=1e-15)


def test_categorical_components_stack_by_number_of_categories():
    # randomized response pairs (two categories) and three-category pairs in one product,
    # a batch of 2 on one component: two stacks, one per number of categories
    rr = [jd.mechanisms.randomized_response(e) for e in (0.5, 1.0, 2.0)]
    p3 = jnp.asarray([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    three = [
        (jd.Categorical(p3), jd.Categorical(jnp.asarray([0.5, 0.3, 0.2]))),
        (
            jd.Categorical(jnp.asarray([0.6, 0.3, 0.1])),
            jd.Categorical(jnp.asarray([0.3, 0.3, 0.4])),
        ),
    ]
    pairs = rr + three
    r = jd.compose(pairs)
    assert r.exact.shape == (2,)

    def total(i, a):
        t = mp.mpf(0)
        for P, Q in pairs:
            p, q = np.asarray(P.probs), np.asarray(Q.probs)
            p = p[i] if p.ndim == 2 else p
            t += mp_refs.cat_log_bc(list(p), list(q), a)
        return t

    for i in range(2):
        info, a = mp_refs.maximise(lambda t, i=i: -total(i, t))
        np.testing.assert_allclose(r.exact[i], float(info), rtol=1e-13)
        np.testing.assert_allclose(r.alpha[i], float(a), rtol=1e-11)

    def n_kernels(k):
        pairs = [jd.mechanisms.randomized_response(0.5 + 0.1 * i) for i in range(k)]
        ps, qs = zip(*pairs, strict=True)
        text = jax.jit(jd.chernoff).lower(jd.Product(*ps), jd.Product(*qs)).compile().as_text()
        return text.count(" fusion(")

    assert n_kernels(8) == n_kernels(2)


def test_gain_is_never_negative_in_float32():
    # symmetric mechanisms share alpha* = 1/2, so the gain is 0 exactly; float32 rounding
    # made it -9.3e-10 (-1 ulp of the sum) at one eps of this grid
    m = jd.mechanisms
    e = jnp.logspace(-3, 2, 10).astype(jnp.float32)
    r = jd.compose(
        [
            m.laplace(epsilon=e),
            m.gaussian(sigma=2 / e),
            m.randomized_response(e),
            m.geometric(epsilon=e),
        ]
    )
    assert r.gain.dtype == jnp.float32
    assert float(jnp.min(r.gain)) >= 0.0
    np.testing.assert_allclose(r.gain, 0.0, atol=2e-7 * float(jnp.max(r.paper_sum)))


def test_iid_counts_are_validated_at_construction():
    # n >= 2**63 was accepted and failed inside the first call with JAX's OverflowError
    P = jd.Laplace(0.0, 1.0)
    for n in (0, -3, 2**63, 10**19, 2.0, True):
        with pytest.raises(ValueError, match=r"Product\.iid: n must"):
            jd.Product.iid(P, n)
    Q = jd.Laplace(1.0, 1.0)
    n = 2**53  # exact in float64: n times the single-pair KL
    np.testing.assert_allclose(
        jd.kl(jd.Product.iid(P, n), jd.Product.iid(Q, n)), n * jd.kl(P, Q), rtol=1e-15
    )
    # without x64 the counts are int32: 2**31 failed in the first call (QA pass)
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ValueError, match=r"below 2\*\*31 without jax_enable_x64"):
            jd.Product.iid(P, 2**31)
    finally:
        jax.config.update("jax_enable_x64", True)

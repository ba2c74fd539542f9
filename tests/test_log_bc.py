"""log C_alpha against independent mpmath references, plus stability and API behaviour."""

import functools
import math

import jax
import jax.numpy as jnp
import mp_refs
import numpy as np
import pytest

import jaxdp as jd
from jaxdp.chernoff import _grad2, _setup
from jaxdp.coefficient import raw_log_bc

ALPHAS = (0.0, 1e-6, 0.25, 0.5, 0.75, 1 - 1e-6, 1.0)

# (loc1, scale1, loc2, scale2): equal scales, distinct scales, near-identical, extremes
LOCSCALE_CASES = [
    (0.0, 1.0, 1.0, 1.0),
    (0.0, 1.0, 1.0, 2.0),
    (0.0, 2.0, 3.0, 0.5),
    (-1.0, 0.7, 4.0, 1.3),
    (0.0, 1.0, 0.0, 1.5),
    (0.0, 1.0, 1e-5, 1.0),
    (0.0, 1.0, 1e-10, 1.0),
    (0.0, 3.0, 0.0, 3.0 * (1 + 1e-10)),
    (0.0, 1.0, 2e-10, 1.0 + 1e-10),
    (0.0, 1.0, 30.0, 1.3),
    (0.0, 1e-3, 1.0, 1.0),
    (2.0, 5.0, -3.0, 0.2),
]


@functools.cache
def _jit_log_bc():
    return jax.jit(raw_log_bc)


def _batch(cls, cases):
    arr = np.asarray(cases, dtype=np.float64)
    return cls(arr[:, 0], arr[:, 1]), cls(arr[:, 2], arr[:, 3])


def _rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    # references carry ~40 digits: below 1e-35 they are zero up to their own rounding
    want = np.where(np.abs(want) < 1e-35, 0.0, want)
    scale = np.where(want == 0, 1.0, np.abs(want))
    return np.abs(got - want) / scale


@pytest.mark.parametrize(
    "cls, ref, quad",
    [
        (jd.Laplace, mp_refs.lap_log_bc_cf, mp_refs.lap_log_bc),
        (jd.Gaussian, mp_refs.gau_log_bc_cf, mp_refs.gau_log_bc),
    ],
    ids=["laplace", "gaussian"],
)
def test_closed_forms_vs_mpmath(cls, ref, quad):
    # the 60-digit textbook closed form is itself checked against 60-digit quadrature
    for c in (LOCSCALE_CASES[1], LOCSCALE_CASES[6]):
        for a in (0.3, 0.5):
            assert abs(ref(*c, a) - quad(*c, a)) <= 1e-15 * abs(ref(*c, a))
    P, Q = _batch(cls, LOCSCALE_CASES)
    for a in ALPHAS:
        got = jd.log_bc(P, Q, a)
        want = [float(ref(*c, a)) for c in LOCSCALE_CASES]
        err = _rel_err(got, want)
        # relative 1e-12 even where log C ~ -1e-21 (near-identical pairs)
        assert err.max() < 1e-12, (a, err)


def test_laplace_textbook_form_many_random_pairs():
    rng = np.random.default_rng(1)
    n = 40
    cases = np.stack(
        [
            np.zeros(n),
            np.exp(rng.uniform(-3, 3, n)),
            rng.uniform(-5, 5, n),
            np.exp(rng.uniform(-3, 3, n)),
        ],
        -1,
    )
    P, Q = _batch(jd.Laplace, cases)
    a = rng.uniform(0, 1, n)
    got = _jit_log_bc()(P, Q, jnp.asarray(a))
    want = [float(mp_refs.lap_log_bc_cf(*c, ai)) for c, ai in zip(cases, a, strict=True)]
    assert _rel_err(got, want).max() < 1e-12


def test_extreme_parameters_are_finite_and_accurate():
    # shifts up to 1e6 scales, scale ratios 1e-12 .. 1e12
    cases = [
        (0.0, 1.0, 1e6, 1.0),
        (0.0, 1.0, 1.0, 1e12),
        (0.0, 1.0, 1.0, 1e-12),
        (0.0, 1e-12, 0.0, 1e12),
        (0.0, 1.0, 1e6, 1e3),
    ]
    for cls, ref in ((jd.Laplace, mp_refs.lap_log_bc_cf), (jd.Gaussian, mp_refs.gau_log_bc_cf)):
        P, Q = _batch(cls, cases)
        for a in (1e-9, 0.3, 0.5, 0.9):
            got = np.asarray(jd.log_bc(P, Q, a))
            want = [float(ref(*c, a)) for c in cases]
            assert np.isfinite(got).all()
            assert _rel_err(got, want).max() < 1e-11, (cls, a)


def test_discrete_laplace_vs_mpmath():
    cases = [
        (0, 1.0, 1, 1.0),
        (0, 1.0, 1, 2.0),
        (0, 3.0, 5, 0.5),
        (0, 1.0, 0, 1.5),
        (0, 100.0, 1, 100.0),
        (0, 1e8, 1, 1e8),
        (2, 0.05, -3, 0.3),
        (0, 2.0, 0, 2.0 * (1 + 1e-9)),
    ]
    P, Q = _batch(jd.DiscreteLaplace, cases)
    for a in ALPHAS:
        got = jd.log_bc(P, Q, a)
        want = [float(mp_refs.dl_log_bc(*c, a)) for c in cases]
        err = _rel_err(got, want)
        # the last case: relative scale mismatch 1e-9 limits the Bregman gap to ~1e-7 rel.
        assert err[:-1].max() < 1e-11, (a, err)
        assert err[-1] < 1e-6, (a, err)


def test_categorical_vs_mpmath_including_support_mismatch():
    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]])
    q = np.array([[0.4, 0.4, 0.2], [0.3, 0.3, 0.4], [0.1, 0.1 + 1e-12, 0.8 - 1e-12], p[3]])
    P, Q = jd.Categorical(p), jd.Categorical(q)
    for a in ALPHAS:
        got = np.asarray(jd.log_bc(P, Q, a))
        want = [float(mp_refs.cat_log_bc(pi, qi, a)) for pi, qi in zip(p, q, strict=True)]
        err = _rel_err(got, want)
        assert err[:2].max() < 1e-13, (a, err)
        if 0 < a < 1:
            # near-identical row: limited by the inputs' own rounding (1e-12 perturbation)
            assert err[2] < 1e-4, (a, err)
        else:  # log C_0 = log Q(supp P) = log(sum q): zero up to the inputs' rounding
            assert abs(got[2] - want[2]) < 1e-15
        assert got[3] == 0.0
    # one-sided limits: C_0 = Q(supp P) = 0.8 for the first row
    np.testing.assert_allclose(float(jd.log_bc(P, Q, 0.0)[0]), np.log(0.8), rtol=1e-15)


def test_quadrature_path_matches_closed_forms():
    cases = [(0.0, 1.0, 1.0, 2.0), (0.0, 0.3, 2.0, 1.0), (0.0, 1.0, 1e-4, 1.0)]
    arr = np.asarray(cases)
    for cls in (jd.Laplace, jd.Gaussian):
        P, Q = cls(arr[:, 0], arr[:, 1]), cls(arr[:, 2], arr[:, 3])
        dens = [
            jd.Density(
                lambda x, th, c=cls: c(th[0], th[1]).log_prob(x),
                params=(d.loc, d.scale),
                breakpoints=[d.loc] if cls is jd.Laplace else (),
                centre=d.loc,
                scale=d.scale,
            )
            for d in (P, Q)
        ]
        for a in (0.0, 0.3, 0.5, 0.9):
            exact = np.asarray(jd.log_bc(P, Q, a))
            quad = np.asarray(jd.log_bc(dens[0], dens[1], a))
            assert _rel_err(quad, exact).max() < 1e-9, (cls, a)


def test_mixed_pair_uses_quadrature():
    P, Q = jd.Laplace(0.0, 1.0), jd.Gaussian(0.5, 1.3)
    for a in (0.2, 0.5, 0.8):
        want = float(mp_refs.lap_gau_log_bc(0.0, 1.0, 0.5, 1.3, a))
        assert _rel_err(jd.log_bc(P, Q, a), want) < 1e-10


def test_product_is_sum_of_components():
    P = jd.Product(jd.Laplace(0.0, 1.0), jd.Gaussian(0.0, 2.0))
    Q = jd.Product(jd.Laplace(1.0, 1.5), jd.Gaussian(1.0, 1.0))
    for a in (0.0, 0.3, 1.0):
        want = jd.log_bc(P.components[0], Q.components[0], a) + jd.log_bc(
            P.components[1], Q.components[1], a
        )
        np.testing.assert_allclose(jd.log_bc(P, Q, a), want, rtol=1e-15)
    Pn, Qn = jd.Product.iid(jd.Laplace(0.0, 1.0), 7), jd.Product.iid(jd.Laplace(1.0, 2.0), 7)
    np.testing.assert_allclose(
        jd.log_bc(Pn, Qn, 0.4), 7 * jd.log_bc(jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 2.0), 0.4)
    )


def test_symmetric_optimum_has_no_singularity_at_half():
    # the textbook equal-scale formula divides by (2a - 1); ours must be smooth there
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(2.0, 1.0)
    a = 0.5 + jnp.array([-1e-9, -1e-15, 0.0, 1e-15, 1e-9])
    vals = np.asarray(jd.log_bc(P, Q, a))
    t = 2.0
    want = -(t / 2 - np.log1p(t / 2))
    np.testing.assert_allclose(vals, want, rtol=1e-14)


def test_hand_written_derivatives_equal_autodiff():
    rng = np.random.default_rng(3)
    n = 64
    for cls in (jd.Laplace, jd.Gaussian):
        P = cls(jnp.zeros(n), jnp.asarray(np.exp(rng.uniform(-2, 2, n))))
        Q = cls(jnp.asarray(rng.uniform(-3, 3, n)), jnp.asarray(np.exp(rng.uniform(-2, 2, n))))
        a = jnp.asarray(rng.uniform(0, 1, n))
        d1, d2 = _grad2(P, Q, _setup(P, Q), a)
        ones = jnp.ones_like(a)

        def first(t, P=P, Q=Q, ones=ones):
            return jax.jvp(lambda s: raw_log_bc(P, Q, s), (t,), (ones,))[1]

        e1, e2 = jax.jit(lambda t, first=first, ones=ones: jax.jvp(first, (t,), (ones,)))(a)
        assert _rel_err(d1, e1).max() < 1e-9
        assert _rel_err(d2, e2).max() < 1e-9


@pytest.mark.parametrize("cls", [jd.Laplace, jd.DiscreteLaplace], ids=["laplace", "discrete"])
def test_unit_interval_form_equals_full_form(cls):
    # log_bc_unit (alpha in [0, 1] only, used by jd.log_bc and the solver) drops the branch
    # for Renyi orders above 1: the same value, and the same parameter-derivatives up to the
    # rounding of a differently fused evaluation (scale tangents cancel to ~1e-4 of their
    # terms, hence the absolute floor of 1e-14 of the largest tangent).
    rng = np.random.default_rng(11)
    n = 48
    locs = rng.uniform(-4, 4, (2, n))
    if cls is jd.DiscreteLaplace:
        locs = np.round(locs)
    P = cls(jnp.asarray(locs[0]), jnp.asarray(np.exp(rng.uniform(-2, 2, n))))
    Q = cls(jnp.asarray(locs[1]), jnp.asarray(np.exp(rng.uniform(-2, 2, n))))
    a = jnp.asarray(np.concatenate([ALPHAS, rng.uniform(0, 1, n - len(ALPHAS))]))

    def both(P, Q):
        return raw_log_bc(P, Q, a), raw_log_bc(P, Q, a, unit=True)

    (full, unit), (t_full, t_unit) = jax.jit(
        lambda P, Q: jax.jvp(both, (P, Q), jax.tree_util.tree_map(jnp.ones_like, (P, Q)))
    )(P, Q)
    np.testing.assert_allclose(unit, full, rtol=2e-16, atol=0)
    scale = float(jnp.max(jnp.abs(t_full)))
    np.testing.assert_allclose(t_unit, t_full, rtol=1e-13, atol=1e-14 * scale)


def test_derivative_identities_at_the_ends():
    # d/da log C_a at 0 is -D(Q||P), at 1 is +D(P||Q) (eqs. (16)-(17), for f = -log C)
    P = jd.Laplace(jnp.array([0.0, 1.0]), jnp.array([1.0, 2.0]))
    Q = jd.Laplace(jnp.array([1.0, -1.0]), jnp.array([2.0, 0.5]))
    d1, _ = _grad2(P, Q, _setup(P, Q), jnp.zeros(2))
    np.testing.assert_allclose(-d1, jd.kl(Q, P), rtol=1e-12)
    d1, _ = _grad2(P, Q, _setup(P, Q), jnp.ones(2))
    np.testing.assert_allclose(d1, jd.kl(P, Q), rtol=1e-12)


def test_eager_jit_vmap_agree():
    P = jd.Gaussian(jnp.array([0.0, 1.0, 2.0]), jnp.array([1.0, 2.0, 0.5]))
    Q = jd.Gaussian(jnp.array([1.0, 1.0, 0.0]), jnp.array([1.5, 2.0, 0.7]))
    a = jnp.array([0.1, 0.5, 0.9])
    eager = jd.log_bc(P, Q, a)
    jitted = jax.jit(jd.log_bc)(P, Q, a)
    vmapped = jax.vmap(jd.log_bc)(P, Q, a)
    np.testing.assert_allclose(jitted, eager, rtol=1e-15)
    np.testing.assert_allclose(vmapped, eager, rtol=1e-15)


def test_broadcasting_between_pairs_and_alpha():
    P = jd.Laplace(0.0, jnp.array([1.0, 2.0]))  # batch (2,)
    Q = jd.Laplace(jnp.array([[1.0], [2.0], [3.0]]), 1.0)  # batch (3, 1)
    out = jd.log_bc(P, Q, 0.5)
    assert out.shape == (3, 2)
    np.testing.assert_allclose(
        out[2, 1], jd.log_bc(jd.Laplace(0.0, 2.0), jd.Laplace(3.0, 1.0), 0.5), rtol=1e-15
    )
    assert jd.log_bc(P, jd.Laplace(1.0, 1.0), jnp.array([[0.1], [0.5]])).shape == (2, 2)


def test_float32_accuracy():
    # float32 inputs give float32 outputs; accuracy measured against float64
    cases = np.asarray(LOCSCALE_CASES[:5] + LOCSCALE_CASES[9:], dtype=np.float32)
    for cls in (jd.Laplace, jd.Gaussian):
        P32 = cls(jnp.asarray(cases[:, 0]), jnp.asarray(cases[:, 1]))
        Q32 = cls(jnp.asarray(cases[:, 2]), jnp.asarray(cases[:, 3]))
        P64 = cls(cases[:, 0].astype(np.float64), cases[:, 1].astype(np.float64))
        Q64 = cls(cases[:, 2].astype(np.float64), cases[:, 3].astype(np.float64))
        for a in (0.25, 0.5):
            v32 = jd.log_bc(P32, Q32, jnp.float32(a))
            assert v32.dtype == jnp.float32
            assert _rel_err(v32, jd.log_bc(P64, Q64, a)).max() < 2e-6
            # a Python scalar takes the pair's precision (it was a strong float64 under x64,
            # which promoted the whole computation)
            np.testing.assert_array_equal(jd.log_bc(P32, Q32, a), v32)
        for order in (0.5, 2, 1):
            assert jd.renyi(P32, Q32, order).dtype == jnp.float32, order


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: jd.Laplace(0.0, -1.0), "scale"),
        (lambda: jd.Laplace(0.0, 0.0), "scale"),
        (lambda: jd.Gaussian(jnp.nan, 1.0), "loc"),
        (lambda: jd.Gaussian(0.0, jnp.inf), "scale"),
        (lambda: jd.DiscreteLaplace(0.5, 1.0), "loc"),
        (lambda: jd.Categorical(jnp.array([0.5, 0.6])), r"sum to 1 along the last axis, got 1\.1$"),
        (lambda: jd.Categorical(jnp.array([-0.5, 1.5])), "probs"),
        (lambda: jd.Categorical(jnp.array([0.5, jnp.nan])), "NaN"),
        # (were "log_probs must lie in [0, 1]" and "log_probs must sum to 1", QA pass)
        (lambda: jd.Categorical.from_log_probs([0.1, -5.0]), r"log_probs must be <= 0 .* 0\.1$"),
        (lambda: jd.Categorical.from_log_probs([0.0, 0.0]), r"exp\(log_probs\) must sum to 1"),
        (lambda: jd.Product.iid(jd.Laplace(), 0), "n"),
        (lambda: jd.Product(1.0), "component"),
        # (these three named no argument: a float() error, a len() error, a nan log_prob)
        (lambda: jd.Density(lambda x: -x, lower="a"), "^Density: lower and upper"),
        (lambda: jd.Density(lambda x: -x, breakpoints=3.0), "^Density: breakpoints"),
        (
            lambda: jd.Density(lambda x, m: -((x - m) ** 2), params=jnp.nan),
            "^Density: params contains NaN",
        ),
    ],
)
def test_bad_distribution_parameters_raise(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def _gauss_density(m):
    return jd.Density(lambda x, m: -0.5 * (x - m) ** 2 - 0.5 * math.log(2 * math.pi), params=m)


def test_density_nan_params_under_jit_and_float32_defaults():
    # A NaN parameter under jit (no constructor check) gave KL inf and a Chernoff information
    # of inf reported converged; now nan, not converged, as for the other families.
    f = jax.jit(
        lambda m: (
            jd.kl(_gauss_density(m), jd.Gaussian(0.0, 1.0)),
            jd.chernoff(_gauss_density(m), jd.Gaussian(0.0, 1.0)),
        )
    )
    kl, r = f(jnp.nan)
    assert math.isnan(float(kl)) and math.isnan(float(r.information)) and not bool(r.converged)
    kl, r = f(1.0)  # KL(N(1, 1) || N(0, 1)) = 1/2, C = 1/8
    assert abs(float(kl) - 0.5) < 1e-14 and abs(float(r.information) - 0.125) < 1e-14
    assert bool(r.converged)
    # float32 params keep a Density float32 under x64: the defaults (centre 0, scale 1) and
    # Python-float breakpoints were float64 and promoted every result
    D = jd.Density(
        lambda x, m: -jnp.abs(x - m) - jnp.log(jnp.asarray(2.0, x.dtype)),
        params=np.float32(0.3),
        breakpoints=[0.3],
    )
    assert D.dtype == D.centre.dtype == D.scale.dtype == D.breakpoints.dtype == jnp.float32
    out = jax.eval_shape(lambda D: jd.log_bc(D, jd.Laplace(np.float32(1), np.float32(2)), 0.5), D)
    assert out.dtype == jnp.float32


def test_bad_log_bc_arguments_raise():
    P, Q = jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0)
    with pytest.raises(ValueError, match="alpha"):
        jd.log_bc(P, Q, 1.5)
    with pytest.raises(ValueError, match="alpha"):
        jd.log_bc(P, Q, jnp.nan)
    with pytest.raises(ValueError, match="broadcast"):
        jd.log_bc(jd.Laplace(jnp.zeros(2), 1.0), jd.Laplace(jnp.zeros(3), 1.0), 0.5)
    with pytest.raises(ValueError, match="categories"):
        jd.log_bc(jd.Categorical(jnp.ones(2) / 2), jd.Categorical(jnp.ones(3) / 3), 0.5)
    with pytest.raises(TypeError, match="pair"):
        jd.log_bc(jd.Categorical(jnp.ones(2) / 2), jd.Laplace(), 0.5)
    with pytest.raises(ValueError, match="structure"):
        jd.log_bc(jd.Product.iid(P, 2), jd.Product(Q, Q), 0.5)
    with pytest.raises(TypeError, match="P must be"):
        jd.log_bc(1.0, Q, 0.5)
    # a Python complex is weakly typed: it skipped the complex check (complex128 results)
    with pytest.raises(TypeError, match=r"^alpha must be real numbers"):
        jd.log_bc(P, Q, 0.5 + 0.1j)
    with pytest.raises(TypeError, match=r"^order must be real numbers"):
        jd.renyi(P, Q, 2 + 0.5j)
    # the shape error names the Rényi order as order (it said alpha), and P, Q alone when
    # they are what does not broadcast
    with pytest.raises(ValueError, match=r"^P, Q: batch shapes \(2,\), \(3,\) do not"):
        jd.renyi(jd.Laplace(jnp.zeros(2), 1.0), jd.Laplace(jnp.zeros(3), 1.0), 0.5)
    with pytest.raises(ValueError, match=r"^P, Q, order: batch shapes \(2,\), \(\), \(3,\)"):
        jd.renyi(jd.Laplace(jnp.zeros(2), 1.0), Q, jnp.asarray([0.5, 2.0, 3.0]))
    # float16 / bfloat16 parameters were accepted, then failed deep in the kernels (a
    # float32 bit layout read from 16 bits)
    for dtype in (jnp.float16, jnp.bfloat16):
        with pytest.raises(TypeError, match=r"^Laplace: loc must be float32 or float64"):
            jd.Laplace(jnp.zeros(2, dtype), 1.0)
        with pytest.raises(TypeError, match=r"^Categorical: probs must be float32 or float64"):
            jd.Categorical(jnp.asarray([0.5, 0.5], dtype))


def test_under_jit_invalid_values_give_nan_not_garbage():
    f = jax.jit(jd.log_bc)
    out = f(jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0), jnp.asarray(1.5))
    assert np.isnan(out)
    r = jax.jit(lambda s: jd.chernoff(jd.Laplace(0.0, 1.0), jd.Laplace(1.0, s)))(jnp.nan)
    assert np.isnan(r.information) and not bool(r.converged)


@pytest.mark.parametrize(
    "P, Q",
    [
        (jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 2.0)),
        (jd.Laplace(0.0, 1.0), jd.Laplace(1.0, 1.0)),
        (jd.Gaussian(0.0, 1.0), jd.Gaussian(1.0, 2.0)),
        (
            jd.Product(jd.Laplace(0.0, 1.0), jd.Gaussian(0.0, 1.0)),
            jd.Product(jd.Laplace(1.0, 2.0), jd.Gaussian(1.0, 2.0)),
        ),
    ],
    ids=["laplace", "laplace-equal-scales", "gaussian", "product"],
)
def test_alpha_derivative_at_the_ends_is_kl_in_both_modes(P, Q):
    # DESIGN.md §4: d/da log C_a = -D(Q||P) at a = 0 and D(P||Q) at a = 1. Laplace gave
    # 0.76 D at a = 1 (max(x, 0) at the tie x = 0 halves the derivative) and reverse mode gave
    # nan at a = 0 (the unused branch of mixture_gap took log 0)
    def f(a):
        return jd.log_bc(P, Q, a)

    for a, want in ((0.0, -float(jd.kl(Q, P))), (1.0, float(jd.kl(P, Q)))):
        for mode in (jax.grad, jax.jacfwd):
            np.testing.assert_allclose(float(mode(f)(a)), want, rtol=1e-13)


def test_gaussian_alpha_derivative_at_the_ends_for_extreme_scale_ratios():
    # At a = 0 (a = 1) with sigma_2/sigma_1 ~1e77+ (~1e-77-), var_a ~1e-160: JAX's rule for
    # the quotient a(1-a) Delta^2/(2 var_a) formed 0 / var_a^2 = 0 * inf, and the derivative
    # was nan for a finite -D(Q||P) (D(P||Q)); in float32 from ratios ~1e10 (found by a QA pass)
    ratio = jnp.array([1e80, 1e-80, 1e10, 1e-10])
    a = jnp.array([0.0, 1.0, 0.0, 1.0])
    P, Q = jd.Gaussian(0.0, 1.0), jd.Gaussian(0.5, ratio)

    def d_da(s2, a):
        return jax.grad(lambda a: jd.log_bc(jd.Gaussian(0.0, 1.0), jd.Gaussian(0.5, s2), a))(a)

    got = jax.jit(jax.vmap(d_da))(ratio, a)
    want = jnp.where(a == 0, -jd.kl(Q, P), jd.kl(P, Q))
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_gaussian_log_bc_at_the_ends_for_extreme_scale_ratios_is_zero():
    # log C_0 = log Q(supp P) = 0 and log C_1 = 0. Where sigma_2/sigma_1 ~1e154+ (~1e-154-),
    # var_a = a r2^2 + (1 - a) r1^2 underflowed to 0 at a = 0 (1) and was taken for the
    # divergent integral of an order above 1: +inf (float32 from ratios ~1e19; found by a
    # QA pass)
    for dtype, ratio in (
        (jnp.float64, [1e160, 1e-160, 1e300, 1e-300]),
        (jnp.float32, [1e20, 1e-20]),
    ):
        ratio = jnp.asarray(ratio, dtype)
        P, Q = jd.Gaussian(jnp.asarray(0.0, dtype), 1.0), jd.Gaussian(0.5, ratio)
        a = jnp.asarray([[0.0], [1.0]], dtype)
        np.testing.assert_array_equal(jd.log_bc(P, Q, a), jnp.zeros((2, ratio.size), dtype))

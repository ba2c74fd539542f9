r"""The skewed Bhattacharyya coefficient :math:`\log C_\alpha(P, Q)` and pair dispatch.

.. math:: C_\alpha(P, Q) = \int p^\alpha q^{1-\alpha}\, d\mu,\qquad \alpha \in [0, 1]

(the paper's :math:`C_\alpha`, eq. (11)). At :math:`\alpha \in \{0, 1\}` the one-sided limits
are used: :math:`C_0 = Q(\mathrm{supp}\,P)`, :math:`C_1 = P(\mathrm{supp}\,Q)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxdp import _checks, _jit
from jaxdp import _special as sp
from jaxdp.distributions import (
    Categorical,
    DiscreteLaplace,
    Distribution,
    Gaussian,
    Laplace,
    Product,
)
from jaxdp.kernels import (
    categorical,
    discrete_laplace,
    gaussian,
    laplace,
    quadrature,
    stacked,
)

_CLOSED_FORMS = {
    (Laplace, Laplace): laplace,
    (Gaussian, Gaussian): gaussian,
    (DiscreteLaplace, DiscreteLaplace): discrete_laplace,
    (Categorical, Categorical): categorical,
}


def kernel_for(P: Distribution, Q: Distribution):
    """The kernel module for the pair ``(P, Q)`` (closed form, else quadrature)."""
    for name, d in (("P", P), ("Q", Q)):
        if not isinstance(d, Distribution):
            raise TypeError(f"{name} must be a jaxdp distribution, got {type(d).__name__}")
    key = (type(P), type(Q))
    if key in _CLOSED_FORMS:
        return _CLOSED_FORMS[key]
    if isinstance(P, stacked.Stack) and isinstance(Q, stacked.Stack):
        return stacked.kernel(kernel_for(P.base, Q.base), P.weights, len(P.batch_shape))
    if P.support_kind == "continuous" and Q.support_kind == "continuous":
        return quadrature
    raise TypeError(
        f"no kernel for the pair P={type(P).__name__}, Q={type(Q).__name__}: both must be "
        "continuous (closed form or quadrature), the same discrete family, or both Product"
    )


_LOC_SCALE = (Laplace, Gaussian)


def standardize(P: Distribution, Q: Distribution, wider=False):
    r"""The pair moved by the common affine map :math:`x \mapsto (x - \mu_1)/c`, where the
    pair is Laplace/Gaussian (any mix); other pairs are returned as they are.

    :math:`C_\alpha`, and every divergence built from it, is invariant under a bijection
    applied to both distributions, so the kernels may work at :math:`\mu_1 = 0` and
    :math:`b_1 \in [1, 2)`. ``c`` is the power of two below :math:`b_1`, so dividing by it is
    exact (no rounding: near-identical pairs keep their relative accuracy): scales near
    1e-200 or 1e200, whose products and squares inside the kernels would under- or
    overflow, then give the same numbers as scales near 1. ``c`` is held constant for
    autodiff (the value does not depend on it), so parameter gradients come out as
    :math:`\partial/\partial b = (\partial/\partial b')/c`, without squaring tiny tangents.

    With ``wider=True``, ``c`` is the power of two below the wider scale, so that the moved
    offset stays finite wherever it is within the float range of either scale (the same
    numbers otherwise: the map is exact either way); ``c`` is then computed once (a stored
    factor, see :func:`jaxdp._special.stored`), not in every kernel that reads the pair.
    """
    if not (isinstance(P, _LOC_SCALE) and isinstance(Q, _LOC_SCALE)):
        return P, Q
    if wider:
        inv_c = sp.inverse_power_of_two(lax.stop_gradient(jnp.maximum(P.scale, Q.scale)))
        (inv_c,) = sp.stored(inv_c, inv_c)
    else:
        inv_c = sp.inverse_power_of_two(lax.stop_gradient(P.scale))
    p_def = jax.tree_util.tree_structure(P)
    q_def = jax.tree_util.tree_structure(Q)
    Ps = jax.tree_util.tree_unflatten(p_def, [jnp.zeros_like(P.loc), P.scale * inv_c])
    Qs = jax.tree_util.tree_unflatten(q_def, [(Q.loc - P.loc) * inv_c, Q.scale * inv_c])
    return Ps, Qs


_STACKABLE = (Laplace, Gaussian, DiscreteLaplace, Categorical)


def _event_shapes(d: Distribution):
    """The shapes of ``d``'s parameters behind its batch axes (categories, or none)."""
    nb = len(d.batch_shape)
    return tuple(x.shape[nb:] for x in jax.tree_util.tree_leaves(d))


def group_product(P: Distribution, Q: Distribution, wider=False, move=None):
    """A Product pair with its components of one family (Laplace, Gaussian, discrete Laplace,
    categorical with one number of categories) stacked into one
    :class:`~jaxdp.kernels.stacked.Stack` each, standardized and broadcast to the pair's batch
    shape: one copy of each family's kernel in a compiled program instead of one per
    component (compile time flat in the number of components). Other pairs, and products
    without two components of a family, are returned as they are. ``wider=True`` (the
    :func:`raw_log_bc` path of the same name) standardizes Laplace components by their
    wider scale (:func:`standardize`). ``move(p, q)``, where given, maps each stacked
    component pair instead of :func:`standardize` (KL's: the pair as it is where its
    standardized offset or scale ratio would leave the float range).
    """
    if not isinstance(P, Product):
        return P, Q
    groups: dict = {}
    for i, (p, q) in enumerate(zip(P.components, Q.components, strict=True)):
        same = type(p) is type(q) and isinstance(p, _STACKABLE)
        key = (type(p), _event_shapes(p), _event_shapes(q)) if same else i
        groups.setdefault(key, []).append(i)
    if all(len(idx) == 1 for idx in groups.values()):
        return P, Q
    shape = tuple(jnp.broadcast_shapes(P.batch_shape, Q.batch_shape))

    def stack(ds):
        cols = zip(*(jax.tree_util.tree_leaves(d) for d in ds), strict=True)
        nbs = [len(d.batch_shape) for d in ds]
        leaves = [
            jnp.stack(
                [jnp.broadcast_to(x, shape + x.shape[n:]) for x, n in zip(xs, nbs, strict=True)]
            )
            for xs in cols
        ]
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(ds[0]), leaves)

    Pc, Qc, counts = [], [], []
    for idx in groups.values():
        if len(idx) == 1:
            (i,) = idx
            Pc.append(P.components[i])
            Qc.append(Q.components[i])
            counts.append(P.counts[i])
            continue
        wide = wider and isinstance(P.components[idx[0]], Laplace)
        pairs = (
            standardize(P.components[i], Q.components[i], wide)
            if move is None
            else move(P.components[i], Q.components[i])
            for i in idx
        )
        ps, qs = zip(*pairs, strict=True)
        weights = tuple(P.counts[i] for i in idx)
        Pc.append(stacked.Stack(stack(ps), weights))
        Qc.append(stacked.Stack(stack(qs), weights))
        counts.append(1)
    return Product._of(Pc, counts), Product._of(Qc, counts)


def check_pair(P: Distribution, Q: Distribution, *extra_shapes, extra_name="alpha") -> None:
    """Static compatibility of a pair (types, structure, batch shapes; ``extra_shapes``
    those of the argument named ``extra_name``)."""
    if isinstance(P, Product) or isinstance(Q, Product):
        if not (isinstance(P, Product) and isinstance(Q, Product)):
            raise TypeError("a Product can only be compared with a Product (P and Q)")
        if P.counts != Q.counts:
            raise ValueError(
                f"P and Q are Products of different structure: counts {P.counts} vs {Q.counts}"
            )
        for i, (p, q) in enumerate(zip(P.components, Q.components, strict=True)):
            try:
                check_pair(p, q)
            except (TypeError, ValueError) as e:
                raise type(e)(f"Product component {i}: {e}") from None
    else:
        kernel_for(P, Q)
        if isinstance(P, Categorical) and P.num_categories != Q.num_categories:
            raise ValueError(
                f"P and Q have different numbers of categories: "
                f"{P.num_categories} vs {Q.num_categories}"
            )
    _checks.check_broadcast("P, Q", P.batch_shape, Q.batch_shape)
    if extra_shapes:
        _checks.check_broadcast(f"P, Q, {extra_name}", P.batch_shape, Q.batch_shape, *extra_shapes)


def raw_log_bc(P, Q, alpha, *, unit=False, solver=False, wider=False):
    """``log C_alpha`` without validation (kernels; also ``alpha > 1`` for Rényi).

    ``unit=True`` promises ``alpha`` in [0, 1]: a kernel's ``log_bc_unit`` is then used where
    it has one (the same values, without the branch for Rényi orders above 1). With
    ``solver=True`` as well, its ``log_bc_solver`` (the quadrature path: the rule without the
    integrand's peaks as breakpoints, see ``jaxdp.chernoff``). ``wider=True`` (not the
    solver's path): Laplace pairs, also those stacked from a product's components, are then
    standardized by their wider scale (:func:`_log_bc_wider`).
    """
    if isinstance(P, Product):
        P, Q = group_product(P, Q, wider)
        total = 0.0
        for (p, n), q in zip(P._items(), Q.components, strict=True):
            total = total + n * raw_log_bc(p, q, alpha, unit=unit, solver=solver, wider=wider)
        return total
    kernel = kernel_for(P, Q)
    fn = kernel.log_bc
    if unit:
        fn = getattr(kernel, "log_bc_unit", fn)
        if solver:
            fn = getattr(kernel, "log_bc_solver", fn)
    if wider and getattr(kernel, "base", kernel) is laplace:
        return _log_bc_wider(fn, P, Q, alpha, unit)
    return fn(*standardize(P, Q), alpha)


def _log_bc_wider(fn, P, Q, alpha, unit):
    r"""A Laplace pair's ``fn(P, Q, alpha)``, standardized by its wider scale
    (a :class:`~jaxdp.kernels.stacked.Stack` of them, as :func:`group_product` standardized
    it): by ``P``'s, the offset overflowed where it exceeds ~1e308 of a narrower ``P``
    (``log_bc``, Rényi, Bhattacharyya, Hellinger of Laplace(1e304, 1e-5) vs Laplace(0, 1)
    were ``nan``). Where it exceeds ~1e308 of both scales, :math:`\log C` is ``-inf`` for
    orders in (0, 1), ``+inf`` above 1 (the integral diverges there or the value overflows)
    and 0 at 0 and 1 (:math:`C_0 = Q(\mathrm{supp}\,P)`; with ``unit``, ``alpha`` in
    [0, 1], else ``alpha > 0`` and not 1 are promised), with gradient 0: computed on an
    identical pair's offset, with the scales' derivatives cut. (Orders where
    :math:`\min(\alpha, 1 - \alpha)\Delta/b` is still finite there, an offset of 1.8e308 to
    ~3.6e308 wider scales at 1/2, are ``inf`` too.) The infinity is added to the value as a
    constant, not selected: a select's derivative, formed in every gradient, cost the
    location gradient of ``bhattacharyya`` ~12% (one core, 20,000 pairs). With ``unit``, one
    select on ``gone`` and ``0 < alpha < 1``: two nested ones (the sign, then the ends)
    cost ``log_bc`` ~4% (one core, 20,000 pairs: 61.3 -> 63.3 ns/pair)."""
    if isinstance(P, stacked.Stack):
        # (no stored offset: one cost products of two Laplace pairs ~2% in the location
        # gradient, one core, 20,000 pairs; the stack is already a stored array)
        gone, Ps, Qs = _far_apart(P.base, Q.base, store=False)
        gone = jnp.any(gone, axis=0)  # the stack's axis: any component infinite
        Ps, Qs = stacked.Stack(Ps, P.weights), stacked.Stack(Qs, Q.weights)
    else:
        gone, Ps, Qs = _far_apart(*standardize(P, Q, wider=True))
    if unit:
        inf = jnp.where(gone & (alpha > 0) & (alpha < 1), -jnp.inf, 0.0)
    else:
        inf = jnp.where(gone, jnp.where(alpha < 1, -jnp.inf, jnp.inf), 0.0)
    return fn(Ps, Qs, alpha) + lax.stop_gradient(inf)


def _far_apart(Ps, Qs, store=True):
    """Where a standardized Laplace pair's offset overflowed (``gone``), and the pair with an
    identical pair's offset there and its scales' derivatives cut (:func:`_log_bc_wider`)."""
    gone = jnp.isinf(Qs.loc)
    loc = jnp.where(gone, 0.0, Qs.loc)
    if store:
        loc = sp.stored_as_is(loc)  # read by several of the kernel's fused computations

    def cut(b):
        return jnp.where(gone, lax.stop_gradient(b), b)

    Ps = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(Ps), [Ps.loc, cut(Ps.scale)])
    Qs = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(Qs), [loc, cut(Qs.scale)])
    return gone, Ps, Qs


def log_bc(P: Distribution, Q: Distribution, alpha) -> jnp.ndarray:
    r"""Log of the :math:`\alpha`-skewed Bhattacharyya coefficient, :math:`\log C_\alpha(P,Q)`.

    .. math:: \log C_\alpha(P, Q) = \log \int p^\alpha q^{1-\alpha}\, d\mu \le 0.

    Closed forms for Laplace, Gaussian, DiscreteLaplace, Categorical and Product pairs, and
    quadrature for any other pair of continuous distributions (e.g. Laplace vs Gaussian,
    :class:`~jaxdp.Density`). Numerically stable over the whole range: no division by
    :math:`2\alpha - 1`, one-sided limits at :math:`\alpha \in \{0, 1\}`, relative accuracy
    for near-identical pairs.

    Args:
      P, Q: distributions; their batch shapes broadcast with each other and with ``alpha``.
      alpha: skew :math:`\alpha \in [0, 1]` (array).

    Returns:
      ``log C_alpha`` in nats, shaped by the broadcast batch shape; ``-inf`` for disjoint
      supports. Under ``jit`` an ``alpha`` outside ``[0, 1]`` gives ``nan``.
    """
    alpha = _checks.as_order(alpha, "alpha")
    _checks.check_unit_interval("alpha", alpha)
    check_pair(P, Q, alpha.shape)
    return _log_bc(P, Q, alpha)


@_jit.jit
def _log_bc(P, Q, alpha):
    # One compiled kernel per pair structure and shape, also when called eagerly.
    inside = (alpha >= 0) & (alpha <= 1)
    # nan in values and derivatives outside [0, 1] (a mask, and a stand-in that keeps the
    # derivative: a where's, 0 there, made the gradient a silent 0)
    out = raw_log_bc(P, Q, sp.stand_in(~inside, alpha, 0.5), unit=True, wider=True)
    return nan_where_invalid(P, Q, out * jnp.where(inside, 1.0, jnp.nan))


def nan_where_invalid(P: Distribution, Q: Distribution, value):
    """``value`` with ``nan`` where ``P`` or ``Q`` has parameters its constructor would have
    rejected (a negative or NaN scale, a probability vector off the simplex): under ``jit``
    the constructors cannot check, and a kernel may return a finite number for them (the
    TV of a Laplace pair with a negative scale was 0, a categorical KL with a NaN mass 0.5).
    Its derivatives are ``nan`` there too: a product with a mask, not a ``where`` (whose
    derivative there, 0, made the gradient at a negative scale a silent 0)."""
    bad = P._invalid() | Q._invalid()
    if bad is False:
        return value
    return value * jnp.where(bad, jnp.nan, 1.0)

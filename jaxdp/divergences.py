r"""KL, Rényi, Bhattacharyya, Hellinger and total variation for every supported pair.

All return arrays shaped by the pair's broadcast batch shape, in nats (Hellinger and TV are
unitless), with ``+inf`` where the math says so (e.g. KL when :math:`P \not\ll Q`).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxdp import _checks, _jit
from jaxdp import _special as sp
from jaxdp.chernoff import _grad2, _mirror, _setup, _swap_mask
from jaxdp.coefficient import (
    check_pair,
    group_product,
    kernel_for,
    nan_where_invalid,
    raw_log_bc,
    standardize,
)
from jaxdp.distributions import Categorical, Distribution, Product
from jaxdp.kernels import gaussian, laplace

__all__ = ["bhattacharyya", "hellinger", "kl", "renyi", "tv"]


def kl(P: Distribution, Q: Distribution) -> jnp.ndarray:
    r"""Kullback-Leibler divergence :math:`D(P\|Q) = \int p \log(p/q)` (eq. (10)).

    Closed forms for Laplace (eq. (34)), Gaussian, DiscreteLaplace, Categorical; additive
    over :class:`~jaxdp.Product` (Corollary 1.1); quadrature otherwise. Evaluated as a sum
    of non-negative terms, so tiny divergences keep relative accuracy.

    Args:
      P, Q: distributions: both continuous (closed form or quadrature), of the same discrete
        family, or products (:class:`~jaxdp.Product`) of matching structure; their batch
        shapes broadcast (``TypeError`` / ``ValueError`` otherwise).

    Returns:
      :math:`D(P\|Q) \ge 0` in nats, shaped by the broadcast batch shape; ``+inf`` where
      :math:`P \not\ll Q` or the integral diverges.
    """
    check_pair(P, Q)
    return _kl_checked(P, Q)


@_jit.jit
def _kl_checked(P, Q):
    return nan_where_invalid(P, Q, _kl(P, Q))


@_jit.jit
def _kl(P, Q):
    if isinstance(P, Product):
        # one kernel per family (jaxdp.kernels.stacked), its components moved as single
        # pairs' are (_kl_pair): standardized by P's scale, a narrow P's offset overflowed
        # (KL of Laplace(1e304, 1e-5) vs Laplace(0, 1) times another Laplace pair was inf)
        P, Q = group_product(P, Q, move=_kl_pair)
        return sum(n * _kl(p, q) for (p, n), q in zip(P._items(), Q.components, strict=True))
    return kernel_for(P, Q).kl(*_kl_pair(P, Q))


def _kl_pair(P, Q):
    """The pair as its KL kernel reads it: Laplace and Gaussian pairs standardized where
    that keeps them in range (:func:`_standardize_in_range`), others standardized."""
    if kernel_for(P, Q) in (laplace, gaussian):
        return _standardize_in_range(P, Q)
    return standardize(P, Q)


def _standardize_in_range(P, Q):
    """The standardized pair (:func:`~jaxdp.coefficient.standardize`) where the scales are
    within a factor ~2 (there the moved scales keep the digits of their difference, and of
    the derivatives' smallest terms, at tiny or huge scales), else the pair as it is: the
    Laplace and Gaussian KL formulas are made of ratios and read either. Moved, pairs leave
    the float range where the offset exceeds ~1e308 of ``P``'s scale (a narrow ``P`` far
    from ``Q``, whose KL ~ offset / ``Q.scale`` is finite) or the scale ratio does, and
    derivatives in scales far apart overflowed as intermediates (a reverse-mode cotangent
    of ``Q``'s moved scale below ~1e-154, forward-mode tangents of ``P.scale/c`` ~1e184)
    where they are finite: a gradient in the moved scales is ``c`` times the true one, and
    the Gaussian d/ds1 ~ r (``P`` r ~1.8e19+ times wider than ``Q``, float32) was inf."""
    Ps, Qs = standardize(P, Q)
    raw = ~(jnp.isfinite(Qs.loc) & (Qs.scale >= 0.5) & (Qs.scale <= 4.0))

    def pick(d, ds):
        return jax.tree.map(lambda x, y: jnp.where(raw, x, y), d, ds)

    return pick(P, Ps), pick(Q, Qs)


def renyi(P: Distribution, Q: Distribution, order) -> jnp.ndarray:
    r"""Rényi divergence of order :math:`\lambda > 0`.

    .. math:: D_\lambda(P\|Q) = \frac{1}{\lambda - 1}\log\int p^\lambda q^{1-\lambda},

    with :math:`D_1 = D(P\|Q)` (KL). For :math:`\lambda > 1` it is ``+inf`` where the
    integral diverges (e.g. Laplace with :math:`\lambda/b_1 \le (\lambda-1)/b_2`).

    Differentiable in the parameters and in ``order``; at ``order == 1``,
    :math:`dD_\lambda/d\lambda = \mathrm{Var}_P[\log(p/q)]/2` (the second
    :math:`\alpha`-derivative of :math:`\log C_\alpha` at 1, halved: from below, where the
    orders above 1 diverge). Not exact (0) at exactly 1: higher derivatives in ``order``, and
    mixed derivatives in ``order`` and the parameters (the gradient of that slope). Near 1,
    second derivatives in ``order`` lose digits to cancellation, ~1e-16
    :math:`\log C_\lambda/(\lambda - 1)^3` (2e-4 relative at :math:`1 - 10^{-6}`).
    Under ``jit`` an ``order`` that is not positive gives ``nan``. A Python number takes the
    pair's precision, so one beyond its range (``1e300`` for a float32 pair) is refused, as
    is an order below the smallest normal number of that precision (subnormal, which XLA
    flushes to zero: ``1e-320``; ``1e-40`` for a float32 pair).

    Args:
      P, Q: distributions: both continuous (closed form or quadrature), of the same discrete
        family, or products (:class:`~jaxdp.Product`) of matching structure; their batch
        shapes broadcast (``TypeError`` / ``ValueError`` otherwise).
      order: :math:`\lambda`, positive and finite (array; broadcasts with the batch).

    Returns:
      :math:`D_\lambda(P\|Q) \ge 0` in nats, shaped by the broadcast batch shape of ``P``,
      ``Q`` and ``order``; ``+inf`` where the integral diverges.
    """
    # KL only where some order is 1: its gradient may overflow (e.g. d/db2 of b1/b2 for a
    # narrow Q) and poison the other orders' gradients through jnp.where (inf * 0). Decided
    # on the argument as given: once converted, it is traced inside an outer jit.
    with_kl = not _checks.is_concrete(order) or bool(np.any(np.asarray(order) == 1))
    raw, order = order, _checks.as_order(order)
    # checked as given where concrete: the conversion flushed a subnormal Python number to 0
    # ("order must be positive and finite, got 0.0" for 1e-320)
    given = np.asarray(jax.device_get(raw), np.float64) if _checks.is_concrete(raw) else order
    _checks.check_positive("order", given)
    check_pair(P, Q, order.shape, extra_name="order")
    # a Python number takes the pair's precision: under x64, 1e300 passed the check above and
    # became inf in a float32 computation (nan)
    dtype = np.dtype(jnp.result_type(P.dtype, Q.dtype, order))
    if _checks.is_concrete(given):
        v = np.asarray(given)
        with np.errstate(over="ignore", under="ignore"):
            w = v.astype(dtype)
        if (over := np.isinf(w)).any():
            raise ValueError(f"order {v[over].flat[0]} overflows the pair's {dtype.name}")
        # (subnormal: XLA flushes it to 0 in the kernels, nan for an array's 1e-320)
        if (under := w < np.finfo(dtype).tiny).any():
            raise ValueError(
                f"order must be at least {np.finfo(dtype).tiny:.4g} (the smallest normal "
                f"{dtype.name} number; XLA flushes subnormals to zero), got {v[under].flat[0]:.4g}"
            )
    return _renyi(P, Q, order, with_kl=with_kl)


@functools.partial(_jit.jit, static_argnames="with_kl")
def _renyi(P, Q, order, with_kl=True):
    is_one = order == 1
    safe = jnp.where(is_one, 0.5, order)
    log_c = raw_log_bc(P, Q, safe, wider=True)
    # An infinite log C (the integral diverges above 1, or vanishes below) is an infinite
    # divergence on a whole range of orders, constant there: its order derivative is 0, not
    # the quotient rule's -inf/(l - 1)^2 (found by a QA pass). Its parameter derivatives are
    # log C's over l - 1: 0 where the kernel's infinite log C is constant, the rate where a
    # mass vanishes (categorical pairs: randomized response at eps = inf, 1 for l >= 1/2; it
    # was 0); |log C| over |l - 1|, which is +inf, as before.
    finite = jnp.isfinite(log_c)
    value = jnp.where(
        finite,
        jnp.where(finite, log_c, 0.0) / (safe - 1.0),
        jnp.abs(log_c) / lax.stop_gradient(jnp.abs(safe - 1.0)),
    )
    # (nan, not a number from the formula, for an order <= 0 that the eager check missed)
    # (a mask, not a where: nan in the derivatives too)
    value = value * jnp.where(jnp.isnan(log_c) | ~(order > 0), jnp.nan, 1.0)
    if with_kl:
        # D_l = L(l)/(l - 1) with L = log C, L(1) = 0, L'(1) = KL: D_l = KL + L''(1)(l - 1)/2
        # + O((l - 1)^2), so the order derivative at 1 is L''(1)/2 = Var_P[log p/q]/2. The
        # KL branch alone has none (it was 0): a term that is 0 and has that derivative.
        kl_ = _kl(P, Q)
        # (KL = inf: D_l grows without bound as l -> 1 from below, a slope of +inf)
        slope = jnp.where(kl_ == jnp.inf, jnp.inf, 0.5 * _curvature_at_one(P, Q))
        at_one = kl_ + _zero_with_slope(order, slope, is_one)
        value = jnp.where(is_one, at_one, value)
    return nan_where_invalid(P, Q, value)


def _curvature_at_one(P, Q):
    r""":math:`L''(1)`, :math:`L = \log C`, as a constant (no parameter gradient: at extreme
    scale ratios its own derivative overflows). Pairs whose constants overflow at
    :math:`\alpha = 1` are mirrored, as the solver does: :math:`L_{PQ}(a) = L_{QP}(1 - a)`."""
    P, Q = lax.stop_gradient((P, Q))
    a = jnp.ones(
        jnp.broadcast_shapes(P.batch_shape, Q.batch_shape), jnp.result_type(P.dtype, Q.dtype)
    )
    swap = _swap_mask(P, Q)
    if swap is not None:
        P, Q = _mirror(swap, P, Q)
        a = jnp.where(swap, 0.0, a)
    return _grad2(P, Q, _setup(P, Q), a)[1]


@jax.custom_jvp
def _zero_with_slope(order, slope, where):
    """0, shaped like ``order`` and ``slope``, with derivative ``slope`` in ``order`` where
    ``where`` (``slope`` may be inf, e.g. Var_P[log p/q]: the value never reads it)."""
    return jnp.zeros(jnp.broadcast_shapes(jnp.shape(order), jnp.shape(slope)), slope.dtype)


@_zero_with_slope.defjvp
def _zero_with_slope_jvp(primals, tangents):
    order, slope, where = primals
    out = _zero_with_slope(order, slope, where)
    # (0 elsewhere: an infinite slope times the zero cotangent of an unselected order is nan)
    return out, tangents[0] * jnp.where(where, slope, 0.0)


def bhattacharyya(P: Distribution, Q: Distribution) -> jnp.ndarray:
    r"""Bhattacharyya distance :math:`-\log C_{1/2}(P,Q)` (Chernoff's objective at 1/2).

    Args:
      P, Q: distributions: both continuous (closed form or quadrature), of the same discrete
        family, or products (:class:`~jaxdp.Product`) of matching structure; their batch
        shapes broadcast (``TypeError`` / ``ValueError`` otherwise).

    Returns:
      The distance (``>= 0``) in nats, shaped by the broadcast batch shape; ``+inf`` for
      disjoint supports.
    """
    check_pair(P, Q)
    return -_half(P, Q)


@_jit.jit
def _half(P, Q):
    half = jnp.asarray(0.5, jnp.result_type(P.dtype, Q.dtype))
    return nan_where_invalid(P, Q, raw_log_bc(P, Q, half, unit=True, wider=True))


def hellinger(P: Distribution, Q: Distribution) -> jnp.ndarray:
    r"""Hellinger distance :math:`H = \sqrt{1 - C_{1/2}}` (so :math:`H^2 = \tfrac12\int
    (\sqrt p - \sqrt q)^2`), in :math:`[0, 1]`.

    Args:
      P, Q: distributions: both continuous (closed form or quadrature), of the same discrete
        family, or products (:class:`~jaxdp.Product`) of matching structure; their batch
        shapes broadcast (``TypeError`` / ``ValueError`` otherwise).

    Returns:
      :math:`H \in [0, 1]` (unitless), shaped by the broadcast batch shape; 1 for disjoint
      supports.
    """
    check_pair(P, Q)
    # (at P == Q, where H is not differentiable, its derivative is 0, not sqrt'(0) * 0 = nan;
    # 1 - C as one_minus_exp, whose derivative C is formed directly: JAX's expm1 + 1 kept
    # ~eps/C of it, 1.3e-5 relative off for Laplace pairs 60 scales apart)
    return sp.sqrt_weight(sp.one_minus_exp(-_half(P, Q)))


def tv(P: Distribution, Q: Distribution) -> jnp.ndarray:
    r"""Total variation :math:`1 - \int \min(p, q) = \sup_A |P(A) - Q(A)|`.

    This is the best membership-inference advantage (TPR - FPR of the optimal test; the
    paper's eq. (37)). Closed forms for Laplace, Gaussian, DiscreteLaplace and Categorical
    pairs; a Product of Categoricals is enumerated exactly (up to 2**20 joint outcomes); a
    Product with one component of count 1 reduces to that component. For n-fold products
    of the Laplace, Gaussian, geometric and randomized-response mechanisms see
    :mod:`jaxdp.membership`.

    Args:
      P, Q: distributions: both continuous (closed form or quadrature), of the same discrete
        family, or products (:class:`~jaxdp.Product`) of matching structure; their batch
        shapes broadcast (``TypeError`` / ``ValueError`` otherwise).

    Returns:
      The total variation in :math:`[0, 1]` (unitless), shaped by the broadcast batch shape;
      1 for disjoint supports.

    Raises:
      NotImplementedError: any other :class:`~jaxdp.Product` pair (e.g. of Laplace
        components, or of more than 2**20 joint categorical outcomes): no exact kernel.
    """
    check_pair(P, Q)
    return _tv_jit(P, Q)


def _joint_categorical(P: Product) -> Categorical:
    lp = None
    for c, n in P._items():
        # (one category: a factor 1, whatever its count; range(2**40) did not end)
        for _ in range(n if c.num_categories > 1 else 1):
            lc = c.log_probs
            lp = (
                lc
                if lp is None
                else (lp[..., :, None] + lc[..., None, :]).reshape(
                    jnp.broadcast_shapes(lp.shape[:-1], lc.shape[:-1]) + (-1,)
                )
            )
    obj = object.__new__(Categorical)
    obj._set(log_probs=lp)
    return obj


@_jit.jit
def _tv_jit(P, Q):
    return nan_where_invalid(P, Q, _tv(P, Q))


def _tv(P, Q):
    if isinstance(P, Product):
        if len(P.components) == 1 and P.counts == (1,):
            return _tv(P.components[0], Q.components[0])
        if all(isinstance(c, Categorical) for c in P.components + Q.components):
            # (k**n only up to n = 21, which is past 2**20 for k >= 2: k**(2**40) itself did
            # not end, nor raise)
            size = math.prod(c.num_categories ** min(n, 21) for c, n in P._items())
            if size <= 2**20:
                return _tv(_joint_categorical(P), _joint_categorical(Q))
        raise NotImplementedError(
            "tv of this Product has no exact kernel; for n releases of a mechanism use "
            "jaxdp.best_advantage_laplace / _gaussian / _geometric / _randomized_response, "
            "or bound it via jaxdp.max_tv_chernoff(chernoff(P, Q).information)"
        )
    return kernel_for(P, Q).tv(*standardize(P, Q))

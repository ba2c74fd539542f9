r"""The paper's closed forms, *as printed*, named by equation number.

Paper: "Chernoff Information as a Privacy Constraint for Adversarial Classification and
Membership Advantage" (``shared/paper/chernoff-dp-paper.txt``). Every function evaluates the
printed expression; none is corrected. Algebraically identical rewrites are used only for
floating-point stability (e.g. ``log(e^{2u} - 1) = 2u + log(-expm1(-2u))``), and each docstring
says which. Where a printed expression is undefined (``log`` of a non-positive number, division
by zero) the function returns NaN. The exact quantity each formula aims at lives beside it in
:mod:`jaxdp.conversions` (or is computed by :func:`jaxdp.chernoff` / :func:`jaxdp.kl` /
:func:`jaxdp.tv`). Numbers below were checked with mpmath at 40+ digits
(``tests/test_paper.py``); :math:`L(\varepsilon) = \log\cosh(\varepsilon/2)` is the true supremum
of the Chernoff information over :math:`\varepsilon`-DP pairs
(:func:`jaxdp.max_chernoff_eps_dp`).

======================  ========================  ================================================
function                paper claims              what is true
======================  ========================  ================================================
``eq22``                sup KL of eps-DP pairs    **correct**: equals
                                                  :math:`\varepsilon\tanh(\varepsilon/2)` =
                                                  :func:`jaxdp.max_kl_eps_dp`
``eq30``, ``eq30_max``  C(P,Q) of eps-DP via      (50) is not a moment of any law of Z; the max is
                        (50)                      at alpha -> 0, :math:`-\log(2\sinh\varepsilon)`;
                                                  >= L only for eps <= 0.46915, < 0 for eps >
                                                  0.48121
``eq31``, ``eq31_max``  upper bound C_ubI         objective convex in alpha: max at alpha = 1 (eps
                                                  < 0.82400), else alpha -> 0; >= L only for eps
                                                  <= 0.54246, < 0 for eps > 0.55700
``eq32``, ``eq32_max``  upper bound C_ubII        decreasing in alpha, sup at alpha -> 0+:
                                                  :math:`-\log 2\varepsilon`; >= L only for eps <=
                                                  0.48561, < 0 for eps > 1/2
``alpha_ub1``           maximiser of (31), in     a stationary point of (31) but its *minimum*; in
                        (0, 1]                    (0, 1] only for eps <= 0.95750; NaN for eps >= 1
``eq69``                maximiser of the (68)     its minimum; > 1 for every eps in (0, 1); NaN
                        bound                     for eps >= 1
``eq43``                bound on alpha*_alt       in (0, 1] only for eps in [0.21385, 0.48848)
``eq56``                C(P,Q) <= ... (Jensen)    equals alpha eps tanh(alpha eps / 2); the
                                                  correct Jensen step gives alpha eps tanh(eps /
                                                  2); below the worst-case :math:`-\log C_\alpha`
                                                  (:func:`jaxdp.max_neg_log_bc_eps_dp`) for alpha
                                                  below ~1/2
``eq72``                optimal upper bound       < 0 for eps < 0.26987, >= L only on [0.27132,
                        C*_ub                     1), NaN for eps >= 1; its last log has the
                                                  opposite sign of the substitution it claims
                                                  (that is ``fig2_ub2``)
``fig2_ub1``            Fig. 2 'UB I'             (31) objective at eq43: >= L only for eps <=
                        (alpha_alt)               0.46832, < 0 for eps > 0.48080
``fig2_ub2``            Fig. 2 'UB II'            (31) objective at alpha_ub1: >= L only for eps
                        (alpha_ubI)               <= 0.46793, < 0 for eps > 0.47975
``fig2_kl_cuff``        Fig. 2 'KL-Cuff'          (1 - alpha) eq22: a valid bound on the worst-
                                                  case :math:`-\log C_\alpha`
``eq34``                KL(Lap(0,b) ||            **correct** for every shift, b, theta
                        Lap(shift, theta b))
``eq35``                Chernoff of the same      **wrong**: at theta = 1 the truth is :math:`t/2
                        pair                      - \log(1+t/2)`, t = |shift|/b, (35) gives
                                                  :math:`t - \log(1+t)` (4x too large as t -> 0,
                                                  2x as t -> inf); for theta != 1 it can be below
                                                  or above
``eq38``                best advantage from q     :math:`1 - e^{-qC}` (C in nats) is a *lower*
                        samples                   bound on the TV of q samples, not its value
``eq39``                Adv <= e^eps - 1          valid for eps-DP, loose (> 1 for eps > log 2)
``eq40``                Adv <= 1 - (1 - delta)    valid; above the sharp
                        e^-eps                    :func:`jaxdp.max_tv_eps_delta_dp` by up to
                                                  0.17157 (delta = 0, eps = 0.88137)
``eq41``                Adv <= 1 - e^-eps, eps a  valid for pure eps-DP (= eq40 at delta = 0);
                        Chernoff-DP budget        *false* for a Chernoff budget: RR with Chernoff
                                                  information c has TV :math:`\sqrt{1-e^{-2c}}`,
                                                  up to 0.41421 more (c = log(2)/2)
``eq42``                tightest Adv bound        **correct** and sharp:
                                                  :math:`\tanh(\varepsilon/2)` =
                                                  :func:`jaxdp.max_tv_eps_dp` (n = 1)
======================  ========================  ================================================

"Valid" means ">= the true supremum over all eps-DP pairs". All functions broadcast, ``jit``
and ``vmap``; the output dtype follows the inputs (ints promote to the default float).

Accuracy against mpmath on ``eps`` in ``[1e-6, 50]`` (``alpha`` in ``[1e-6, 1]``; for
``eq34`` also ``theta`` in ``[1e-300, 1e300]``, float32 ``[1e-37, 1e37]``): float64 relative
error < 5e-14, or absolute error < 2e-14 next to a zero crossing of the printed expression;
float32 relative error < 3e-6, or absolute error < 3e-7 next to a zero crossing (the printed
forms themselves cancel O(1) terms there, e.g. ``eq31`` at ``eps = alpha = 0.5``).

Negative ``eps`` (and ``b <= 0``, ``theta <= 0``, ``alpha <= 0`` in ``eq32``, ``alpha``
outside ``[0, 1]`` in ``eq56``, ``delta`` outside ``[0, 1]``, ``c < 0``, non-integer or
``q < 1``, NaN anywhere) raises ``ValueError`` naming the argument when the value is
concrete, and a non-real argument (a string, ``None``, a complex number) ``TypeError``; under
``jit`` (traced values) such an argument gives NaN (the formulas themselves, even in
``eps``, gave values there). Where the printed expression has a
limit at an infinite or zero argument (``eq43(inf) = -1``, ``fig2_ub1(0) = inf``, ``eq34`` at
``theta = inf``) the limit is returned.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from jaxdp import _special as sp
from jaxdp._quotient import quotient, scaled_divide
from jaxdp.conversions import (
    _check_count,
    _checked,
    _inexact,
    _nonnegative,
    _not_nan,
    _positive,
    _unit_interval,
    _x_tanh_half,
)

__all__ = [
    "alpha_ub1",
    "eq22",
    "eq30",
    "eq30_max",
    "eq31",
    "eq31_max",
    "eq32",
    "eq32_max",
    "eq34",
    "eq35",
    "eq38",
    "eq39",
    "eq40",
    "eq41",
    "eq42",
    "eq43",
    "eq56",
    "eq69",
    "eq72",
    "fig2_kl_cuff",
    "fig2_ub1",
    "fig2_ub2",
]

_LOG2 = math.log(2.0)

# ---------------------------------------------------------------------------------------------
# Stable kernels for the printed expressions.


@jax.custom_jvp
def _mul(x: jax.Array, y: jax.Array) -> jax.Array:
    """``x * y``, 0 (the limit of the callers) where one factor is 0 and the other infinite,
    with the product rule's derivative ``y dx + x dy`` less the term of a factor whose
    tangent is a symbolic zero (``jax.jacfwd``/``jax.grad`` in the other argument only: an
    infinite factor times that zero was ``nan``)."""
    value = x * y
    return jnp.where(((x == 0) & jnp.isinf(y)) | (jnp.isinf(x) & (y == 0)), 0.0, value)


def _mul_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    value = _mul(x, y)
    zero = jax.custom_derivatives.SymbolicZero
    terms = [a * b for a, b in ((y, dx), (x, dy)) if not isinstance(b, zero)]
    tangent = sum(terms[1:], terms[0]) if terms else jnp.zeros_like(value)
    return value, jnp.broadcast_to(tangent, value.shape).astype(value.dtype)


_mul.defjvp(_mul_jvp, symbolic_zeros=True)


@jax.custom_jvp
def _log_2sinh(u: jax.Array) -> jax.Array:
    r"""``log(e^u - e^-u) = u + log(1 - e^{-2u})``: exact for ``u > 0``, NaN for ``u < 0``.

    Its slope :math:`\coth u = 1 + 2e^{-2u}/(1 - e^{-2u})` times the tangent as one product:
    the sum rule's ``t + t 2e^{-2u}/(1 - e^{-2u})`` was ``inf + 0 * inf = nan`` for an
    infinite tangent at ``u = inf`` (``eq30``'s and ``eq31``'s alpha-slope in forward mode
    at ``eps = inf``, whose limit is ``-inf``)."""
    return u + jnp.log(-jnp.expm1(-2 * u))


@_log_2sinh.defjvp
def _log_2sinh_jvp(primals, tangents):
    (u,), (t,) = primals, tangents
    return _log_2sinh(u), t * (1 + 2 * jnp.exp(-2 * u) / -jnp.expm1(-2 * u))


def _at_zero(eps: jax.Array, stand_in: float = 1.0):
    """``(eps == 0, e, e0)``: ``e`` is ``eps`` with the finite ``stand_in`` at 0, ``e0`` is
    ``eps`` at 0 and 1 elsewhere, for formulas whose ``eps = 0`` limit (its leading term, in
    ``e0``) is taken apart from the rest (in ``e``): a branch not taken then has finite
    inputs, so its zero cotangent times an infinite slope cannot make the derivative nan."""
    zero = eps == 0
    return zero, jnp.where(zero, stand_in, eps), jnp.where(zero, eps, 1.0)


def _log_2sinh_at(eps: jax.Array, k: jax.Array) -> jax.Array:
    """``_log_2sinh(eps * k)``, at ``eps = 0`` as its leading term ``log(2 eps) + log|k|``
    (``-inf``) with the limit slopes ``1/eps = inf`` and ``1/k`` (the product rule's slope in
    ``k`` was ``eps coth(0) = 0 * inf = nan``), and at ``eps = inf`` as its leading term
    ``eps k`` (``inf`` for ``k > 0``, else NaN as before), whose second derivatives are the
    limits (0 in ``eps`` and in ``k``, 1 mixed; the derivative of ``coth u`` times the
    infinite tangent of ``u`` was ``nan``); finite stand-ins in the branches not taken.

    For ``0 < u = eps k <= 1``: ``log(2 eps) + log(k) + log(sinh(u)/u)``, whose second
    derivatives do not cancel (through ``u``, the mixed one ``coth u - u csch^2 u ~ 2u/3``
    was the difference of two terms ~``1/u``: 3.6e-7 for -6.7e-11 at ``eps = 1e-10``)."""
    zero, e, e0 = _at_zero(eps)
    inf = eps == jnp.inf
    e, ei = jnp.where(inf, 1.0, e), jnp.where(inf, eps, 1.0)
    k1 = jnp.where(zero | inf, 1.0, k)
    k0, ki = jnp.where(zero, k, 1.0), jnp.where(inf, k, 1.0)
    at_inf = ei * ki * jnp.where(ki > 0, 1.0, jnp.nan)
    at_zero = jnp.log(2 * e0) + jnp.log(jnp.abs(k0))
    small = ~zero & ~inf & (e * k1 <= 1)
    es, ks = jnp.where(small, e, 1.0), jnp.where(small, k1, 1.0)
    at_small = jnp.log(2 * es) + jnp.log(ks) + _log_sinhc(es * ks)
    regular = _log_2sinh(jnp.where(small, 1.0, e) * jnp.where(small, 2.0, k1))
    return jnp.where(zero, at_zero, jnp.where(inf, at_inf, jnp.where(small, at_small, regular)))


def _atanh(x: jax.Array) -> jax.Array:
    """``atanh(x) = log1p(2x/(1-x))/2`` for ``0 <= x < 1`` (XLA's ``log1p`` of a negative
    argument, used by ``jnp.arctanh``, is off by ~1e-14 relative at ``x ~ 0.4``)."""
    return 0.5 * jnp.log1p(2 * x / (1 - x))


def _atanh_over_x_minus_1(x: jax.Array) -> jax.Array:
    r"""``atanh(x)/x - 1 = sum_{j>=1} x^{2j}/(2j+1)`` for ``0 <= x < 1`` (series below 0.6).

    The direct form cancels ``1/(atanh(x)/x - 1)`` ulp (30 at ``x = 0.3``): float32 relative
    error 7e-6 on ``[0.3, 0.45)`` when the series stopped at 0.3; 1.1e-6 above 0.6.
    """
    small = x < 0.6
    x2 = jnp.where(small, x, 0.0) ** 2
    series = jnp.zeros_like(x2)
    for j in range(40, 0, -1):  # Horner; x^2 < 0.36 so 40 terms reach 1e-19 relative
        series = x2 * (1 / (2 * j + 1) + series)
    xl = jnp.where(small, 0.5, x)
    direct = _atanh(xl) / xl - 1
    return jnp.where(small, series, direct)


@jax.custom_jvp
def _x_minus_log1p(x: jax.Array) -> jax.Array:
    r"""``x - log(1 + x)`` for ``x > -1`` with relative accuracy near 0.

    Near 0, with :math:`v = x/(2+x)`: :math:`x - \log(1+x) = x^2/(2+x) - 2\sum_{j\ge1}
    v^{2j+1}/(2j+1)` (no cancellation: the sum is ``O(x^3)``).

    Its slope :math:`x/(1+x)` multiplies the tangent once (``1 - 1/(1+x)`` above 1, whose
    derivative :math:`1/(1+x)^2` does not cancel), the limit 1 at ``x = inf``: the sum rule's
    ``t - t/(1+x)`` was ``inf - inf = nan`` for an infinite tangent (``eq35``'s b-slope, and
    ``eq34``'s theta-slope for theta below ~1e-154, in forward mode, whose limit is
    ``-inf``), and the constant ``inf`` at ``x = inf`` had slope 0.
    """
    small = jnp.abs(x) < 0.1
    xs = jnp.where(small, x, 0.0)
    v = xs / (2 + xs)
    v2 = v * v
    tail = jnp.zeros_like(v)
    for j in range(8, 0, -1):  # v^2 < 0.003: 8 terms reach 1e-20 relative
        tail = 1 / (2 * j + 1) + v2 * tail
    series = xs * xs / (2 + xs) - 2 * v * v2 * tail
    xl = jnp.where(small, 1.0, x)
    # x = inf: inf - log1p(inf) is nan; the difference is +inf
    return jnp.where(small, series, jnp.where(xl == jnp.inf, jnp.inf, xl - jnp.log1p(xl)))


@_x_minus_log1p.defjvp
def _x_minus_log1p_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _x_minus_log1p(x), t * _x_over_1px(x)


@jax.custom_jvp
def _x_over_1px(x: jax.Array) -> jax.Array:
    """``x/(1 + x)`` (``1 - 1/(1 + x)`` above 1; 1 at ``x = inf``), with the slope
    ``1/(1 + x)^2`` as one factor: the quotient rule's ``t/(1 + x) - x t/(1 + x)^2`` was
    ``inf - inf`` for an overflowed tangent (``eq35``'s second b-derivative at ``b =
    1e-200``, whose limit is ``inf``)."""
    above = x > 1
    xs, xl = jnp.where(above, 0.0, x), jnp.where(above, x, 2.0)
    return jnp.where(above, 1 - 1 / (1 + xl), xs / (1 + xs))


@_x_over_1px.defjvp
def _x_over_1px_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    r = 1 / (1 + x)
    # (0 at x = inf, the limit, also for an infinite tangent: as before, not nan)
    return _x_over_1px(x), jnp.where(x == jnp.inf, 0.0, t * (r * r))


def _log_sinhc(v: jax.Array) -> jax.Array:
    r"""``log(sinh(v)/v) >= 0`` for ``v >= 0``, with relative accuracy near 0 (``~v^2/6``).

    ``log1p(sinh(v)/v - 1)`` (series) for ``v <= 1``; above, ``log(2 sinh v) - log(2v)``
    (the two logs are within a factor 10 of the difference there: ~10 ulp); ``+inf`` at
    ``v = inf``, with the limit slope 1 of :math:`\coth v - 1/v` (a constant ``inf`` had
    slope 0: :func:`eq32`'s eps-slope at ``eps = inf`` was 0, not ``-alpha``).
    """
    small = v <= 1
    vs = jnp.where(small, v, 0.0)
    vl = jnp.where(small | (v == jnp.inf), 2.0, v)
    large = _log_2sinh(vl) - jnp.log(2 * vl)
    return jnp.where(small, jnp.log1p(sp.sinhc_m1(vs)), jnp.where(v == jnp.inf, v, large))


def _kl_scale_term(theta: jax.Array) -> jax.Array:
    r"""``s - 1 - log s >= 0`` with ``s = 1/theta``, ``theta > 0``, without cancellation.

    With :math:`x = s - 1 = (1 - \theta)/\theta`: :func:`_x_minus_log1p` for ``x > -0.1``
    (``theta < 10/9``). For larger ``theta``, ``x`` approaches -1 and ``log1p(x)`` would
    take the log of the rounded ``1 + x`` (relative error ``u/(1 + x) ~ u theta``: inf from
    ``theta ~ 1/u``), so there the exact ``-log1p(x) = log(theta)`` is used:
    ``x + log(theta)``, two terms of opposite sign whose sizes add up to 38 times the value
    at ``theta = 10/9`` (as for ``x - log1p(x)`` at ``x = 0.1``), and ever less above.
    ``theta = inf`` gives ``+inf``.
    """
    # (theta = inf: a finite stand-in, x = -1/2, in the branches not taken: the zero cotangent
    # of x times (1 - theta)/theta's slope there, inf/inf, made eq34's theta-slope nan in
    # reverse mode; the limit is 0, as in forward mode)
    ti = jnp.where(theta == jnp.inf, 2.0, theta)
    x = (1 - ti) / ti
    near = x > -0.1
    xn = jnp.where(near, x, 0.0)
    tf = jnp.where(near | (theta == jnp.inf), 2.0, theta)  # (inf - inf: handled below)
    # (scaled: JAX's slope -1/theta - (1 - theta)/theta^2 was 0 + 0 beyond theta ~ 1e154, so
    # eq34's theta-slope 0 there, where it is ~1/theta)
    far = scaled_divide(1 - tf, tf) + jnp.log(tf)
    return jnp.where(near, _x_minus_log1p(xn), jnp.where(theta == jnp.inf, jnp.inf, far))


@jax.custom_jvp
def _log_eq43(eps: jax.Array) -> jax.Array:
    r"""``log((4 eps + 2)/(eps + 1)) = log 2 + log1p(eps/(1 + eps))`` for ``eps >= 0``.

    Relative accuracy for every eps (``log1p(2 eps) - log1p(eps)`` loses ``log(eps)`` ulp
    for large eps and is ``inf - inf`` at ``eps = inf``); ``log 4`` at ``eps = inf``.

    Its slope :math:`1/((1+\varepsilon)(1+2\varepsilon))` is formed directly: the quotient
    rule's :math:`1/(1+\varepsilon) - \varepsilon/(1+\varepsilon)^2` cancelled ~eps ulp
    (``fig2_ub1``'s slope, where it enters undivided, 1e-7 off at ``eps = 1e10``, wrong in
    every digit beyond 1e16), and in reverse mode its second term underflowed beyond
    ``eps ~ 2e102`` (``eq43``'s and ``fig2_ub1``'s slopes 36% off, ``+1/(4 eps^2)``).
    """
    finite = eps < jnp.inf
    e = jnp.where(finite, eps, 1.0)
    return jnp.where(finite, _LOG2 + jnp.log1p(e / (1 + e)), 2 * _LOG2)


@_log_eq43.defjvp
def _log_eq43_jvp(primals, tangents):
    (eps,), (t,) = primals, tangents
    return _log_eq43(eps), t / (1 + eps) / (1 + 2 * eps)  # 0 at eps = inf, the limit


def _expm1_minus_x(u: jax.Array) -> jax.Array:
    """``e^u - 1 - u = sum_{k>=2} u^k/k!`` with relative accuracy near 0."""
    # The series up to |u| = 1: beyond 0.1 only, expm1(u) - u cancelled ~2/|u| of its digits
    # (float32 eq34 4e-6 off at theta = 1, |shift|/b = 0.1; float64 5.6e-15)
    small = jnp.abs(u) < 1.0
    us = jnp.where(small, u, 0.0)
    acc = jnp.zeros_like(us)
    for k in range(21, 1, -1):  # Horner: u^2 (1/2! + u (1/3! + ...)), |u| < 1 -> 3e-21 rel.
        acc = 1 / math.factorial(k) + us * acc
    series = us * us * acc
    ul = jnp.where(small, 1.0, u)
    return jnp.where(small, series, jnp.expm1(ul) - ul)


def _shift_ratios(shift: jax.Array, b: jax.Array, theta: jax.Array, *, underflow=False):
    r"""``(over, t, x)`` for :func:`eq34`/:func:`eq35`: ``t = |shift|/b`` (JAX's b-slope
    ``-|shift| db/b^2`` was nan for shift = 0 and ``-inf`` for a finite one once ``b^2``
    underflows, so :func:`quotient`) and, where ``t`` overflows (``over``: ``b`` below
    ``|shift|/1.8e308``, or ``shift`` infinite), ``x = |shift|/(theta b)`` by
    :func:`_over_ratio` (``t/theta`` was ``inf`` also where ``x`` is finite: ``shift =
    1e10, b = 1e-300, theta = 1e300``), ``t`` then 0; stand-ins (``|shift|`` 0, ``b`` 1) in
    the branch not taken. With ``underflow`` (for :func:`eq35`, which needs only ``x``),
    ``over`` also where ``t`` underflows for ``shift != 0`` (``t/theta`` was 0 where ``x``
    is not: ``shift = 1e-10``, ``b = 1e300``, ``theta = 1e-300``, ``x = 1e-10``)."""
    a = jnp.abs(shift)
    over = a / b == jnp.inf  # (also shift = inf, whose slopes are then the limits)
    if underflow:  # (XLA flushes subnormal quotients to 0)
        over = over | ((a > 0) & (a / b < jnp.finfo(a.dtype).tiny))
    zero, one = jnp.zeros_like(a), jnp.ones_like(b)
    t = quotient(jnp.where(over, zero, a), jnp.where(over, one, b))
    return over, t, _over_ratio(jnp.where(over, a, zero), theta, jnp.where(over, b, one))


@jax.custom_jvp
def _over_ratio(a: jax.Array, theta: jax.Array, b: jax.Array) -> jax.Array:
    r""":math:`x = a/(\theta b)` as ``(a/theta)/b``, with the slope :math:`\dot a/(\theta b)
    - (x/\theta)\dot\theta - (x/b)\dot b` formed term by term, leaving out the term of a
    symbolic zero tangent: at an overflowed ``x``, whose shift-slope :math:`1/(\theta b)` is
    finite, ``x db/b`` was ``inf * 0 = nan`` in ``jax.jacfwd`` in ``shift``."""
    return scaled_divide(scaled_divide(a, theta), b)


def _over_ratio_jvp(primals, tangents):
    (a, theta, b), (da, dtheta, db) = primals, tangents
    x = _over_ratio(a, theta, b)
    zero = jax.custom_derivatives.SymbolicZero
    terms = []
    if not isinstance(da, zero):
        # the tangent times one coefficient 1/(theta b), by the smaller factor first (so in
        # the float range where it is): divided twice, its transpose divides the cotangent in
        # the other order, which underflowed (eq35's shift-slope 0 for 1e-10 at shift =
        # 1e-10, b = 1e300, theta = 1e-300). Where it overflows, divided twice as before
        # (0 * inf is nan)
        first = theta < b
        lo, hi = jnp.where(first, theta, b), jnp.where(first, b, theta)
        r = scaled_divide(scaled_divide(jnp.ones_like(b), lo), hi)
        finite = r < jnp.inf
        once = da * jnp.where(finite, r, 0.0)
        terms.append(jnp.where(finite, once, scaled_divide(scaled_divide(da, theta), b)))
    if not isinstance(dtheta, zero):
        # x/theta, as a/theta/theta/b where x overflows (x/theta >= 1 there, so a/theta^2 is
        # normal for a normal b): finite for theta beyond 1
        n = scaled_divide(scaled_divide(a, theta), theta)
        terms.append(
            -jnp.where(x == jnp.inf, scaled_divide(n, b), scaled_divide(x, theta)) * dtheta
        )
    if not isinstance(db, zero):
        terms.append(-scaled_divide(x, b) * db)
    tangent = sum(terms[1:], terms[0]) if terms else jnp.zeros_like(x)
    return x, jnp.broadcast_to(tangent, x.shape).astype(x.dtype)


_over_ratio.defjvp(_over_ratio_jvp, symbolic_zeros=True)


def _below_one(eps: jax.Array, value: jax.Array) -> jax.Array:
    """NaN where ``eps >= 1`` (the printed ``log((1+eps)/(1-eps))`` is undefined there), in
    the value and its derivative (a mask, not a where, whose derivative there was 0; the
    callers' stand-ins for such ``eps`` keep the derivative, :func:`jaxdp._special.stand_in`)."""
    return value * jnp.where(eps < 1, 1.0, jnp.nan)


# ---------------------------------------------------------------------------------------------
# Section IV: KL and Chernoff of eps-DP pairs.


@_checked(eps=_nonnegative)
def eq22(eps: ArrayLike) -> jax.Array:
    r"""Eq. (22): the KL-DP bound implied by eps-DP.

    .. math::

        D(P\|Q) \le \varepsilon \frac{(e^{\varepsilon}-1)(1-e^{-\varepsilon})}
        {e^{\varepsilon}-e^{-\varepsilon}}

    Claim: the KL divergence of any eps-DP pair is at most this. **True and sharp**: the
    expression equals :math:`\varepsilon\tanh(\varepsilon/2)` identically (numerator
    :math:`4\sinh^2(\varepsilon/2)`, denominator :math:`2\sinh\varepsilon`), the supremum of
    KL over eps-DP pairs, attained by randomized response (:func:`jaxdp.max_kl_eps_dp`).
    Evaluated through that identity (the printed form overflows to NaN for eps > 709);
    ``eps = 0`` (0/0 as printed) gives the limit 0, ``eps = inf`` inf with the limit slope 1.
    """
    (eps,) = _inexact(eps)
    return _x_tanh_half(eps)  # (max_kl_eps_dp's: the limit slope 1 at eps = inf too)


@_checked(eps=_nonnegative, alpha=_not_nan)
def eq30(eps: ArrayLike, alpha: ArrayLike) -> jax.Array:
    r"""Eq. (30)/(51): the objective inside the paper's "Chernoff-Cuff" max.

    .. math::

        \log(\alpha+1) - \log\left(e^{\varepsilon(\alpha+1)} - e^{-\varepsilon(\alpha+1)}\right)

    Claim: :math:`C(P,Q)` of an eps-DP pair is the max of this over alpha. It comes from (50),
    :math:`C_\alpha = \int_{e^{-\varepsilon}}^{e^{\varepsilon}} z^\alpha\,dz`, which integrates
    against Lebesgue measure (total mass :math:`2\sinh\varepsilon \ne 1`), so it is not
    :math:`\mathbb{E}[Z^\alpha]` for any law of :math:`Z = dP/dQ`; indeed every true
    :math:`-\log C_\alpha \ge 0`, while this goes negative. The true worst case of
    :math:`-\log C_\alpha` is :func:`jaxdp.max_neg_log_bc_eps_dp`.

    Evaluated with ``log(e^u - e^-u) = u + log(-expm1(-2u))``; ``u <= 0`` gives +inf/NaN.

    Args:
        eps: privacy parameter(s), ``>= 0``.
        alpha: any real(s) (the paper uses ``(0, 1)``); broadcasts with ``eps``.
    """
    eps, alpha = _inexact(eps, alpha)
    # (eps = 0: +inf, with the limit slopes -inf in eps and 0 in alpha; that was nan)
    return jnp.log1p(alpha) - _log_2sinh_at(eps, alpha + 1)


@_checked(eps=_nonnegative)
def eq30_max(eps: ArrayLike) -> jax.Array:
    r"""Eq. (30) maximised over alpha: what the paper plots as "Chernoff-Cuff".

    .. math::

        \sup_{\alpha\in(0,1)} \mathrm{eq30}(\varepsilon, \alpha)
        = -\log(2\sinh\varepsilon) \quad (\alpha \to 0).

    Range: the paper's :math:`\alpha \in (0, 1)` (Definition 6); the supremum over the open
    interval equals the maximum over ``[0, 1]`` by continuity. With :math:`u =
    \varepsilon(1+\alpha)` the derivative is :math:`(\varepsilon/u)(1 - u\coth u) < 0`, so the
    objective decreases and the sup sits at the boundary ``alpha -> 0`` (not attained in
    ``(0, 1)``). Verified against a dense-grid + golden-section mpmath maximisation.

    Claim: the Chernoff information of an eps-DP pair. Truth: the sharp value is
    :math:`\log\cosh(\varepsilon/2)` (:func:`jaxdp.max_chernoff_eps_dp`). This is far above it
    for small eps (vacuous: ~ :math:`-\log 2\varepsilon`), below it for
    ``eps > 0.4691513863`` (so not an upper bound there) and negative for
    ``eps > asinh(1/2) = 0.4812118251``.
    """
    (eps,) = _inexact(eps)
    return eq30(eps, jnp.zeros_like(eps))


@_checked(eps=_nonnegative, alpha=_not_nan)
def eq31(eps: ArrayLike, alpha: ArrayLike) -> jax.Array:
    r"""Eq. (31)/(62): the objective of the paper's upper bound :math:`C_{ubI}`.

    .. math::

        \alpha + \varepsilon(\alpha+1) - \log\left(e^{2\varepsilon(\alpha+1)} - 1\right)
        \;=\; \alpha - \log\left(2\sinh(\varepsilon(\alpha+1))\right)

    Obtained from (30) by :math:`\log(1+\alpha) \le \alpha`, so it is >= ``eq30`` pointwise.
    Evaluated through the identity on the right (no overflow). The objective is **convex** in
    alpha (second derivative :math:`\varepsilon^2/\sinh^2(\varepsilon(1+\alpha)) > 0`).

    Args:
        eps: privacy parameter(s), ``>= 0``.
        alpha: any real(s) (the paper uses ``(0, 1]``); broadcasts with ``eps``.
    """
    eps, alpha = _inexact(eps, alpha)
    # (eps = 0: +inf, with the limit slopes -inf in eps and alpha/(1 + alpha) in alpha; that
    # was nan)
    return alpha - _log_2sinh_at(eps, alpha + 1)


@_checked(eps=_nonnegative)
def eq31_max(eps: ArrayLike) -> jax.Array:
    r"""Eq. (31) maximised over alpha: the paper's :math:`C_{ubI}(P,Q)`.

    .. math::

        \max_{\alpha\in[0,1]} \mathrm{eq31}(\varepsilon,\alpha)
        = -\log(2\sinh\varepsilon) + \max\big(0,\, 1 - \log(2\cosh\varepsilon)\big).

    Range: the paper's :math:`\alpha \in (0, 1]` (Appendix IX-C); its supremum equals the max
    over the closure ``[0, 1]``. The objective is convex in alpha, so the max is at an end
    point: ``alpha = 1`` for ``eps < acosh(e/2) = 0.8240045394`` (attained), else
    ``alpha -> 0`` (a supremum, not attained in ``(0, 1]``). The paper's stationary point
    :func:`alpha_ub1` is the *minimum*. Verified against an mpmath maximisation.

    Claim: an upper bound on the Chernoff information of any eps-DP pair. Truth: vacuous for
    small eps, below :math:`\log\cosh(\varepsilon/2)` (:func:`jaxdp.max_chernoff_eps_dp`) for
    ``eps > 0.5424595944`` and negative for ``eps > asinh(e/2)/2 = 0.5570007484``.
    """
    (eps,) = _inexact(eps)
    # eps = 0: -log(2 eps), with the limit slope -inf of both ends (reverse mode gave nan:
    # the end not taken has a zero cotangent times its infinite slope); finite stand-ins in
    # the branch not taken
    zero, e, e0 = _at_zero(eps)
    at0, at1 = eq31(e, jnp.zeros_like(e)), eq31(e, jnp.ones_like(e))
    # (not jnp.maximum, whose derivative at a tie is the mean of the two: at eps = inf, where
    # both ends are -inf, -1.5 instead of the limit -1 of the alpha -> 0 end that wins above
    # acosh(e/2))
    return jnp.where(zero, -(_LOG2 + jnp.log(e0)), jnp.where(at0 >= at1, at0, at1))


@_checked(eps=_nonnegative, alpha=_positive)
def eq32(eps: ArrayLike, alpha: ArrayLike) -> jax.Array:
    r"""Eq. (32)/(68): the objective of the paper's upper bound :math:`C_{ubII}`.

    .. math::

        \log\alpha + \varepsilon\alpha - \log\left(e^{2\varepsilon\alpha} - 1\right)
        \;=\; \log\alpha - \log\left(2\sinh(\varepsilon\alpha)\right)

    From (66), :math:`C_\alpha = \int_{e^{-\varepsilon}}^{e^{\varepsilon}} z^{\alpha-1} dz`,
    the same Lebesgue-measure mistake as (50). Undefined at ``alpha = 0`` (``log 0 - log 0``):
    ``alpha <= 0`` raises ``ValueError`` when concrete, NaN under ``jit``.

    Evaluated as :math:`-\log(2\varepsilon) - \log(\sinh(v)/v)`, :math:`v =
    \varepsilon\alpha` (the identity :math:`\log\alpha - \log(2v) = -\log 2\varepsilon`):
    the right-hand form subtracts two logs of size :math:`|\log\alpha|` (14 at ``alpha =
    1e-6``), which cost float32 1.2e-6 absolute next to the zero crossing at
    ``eps = 1/2``; this form cancels only :math:`-\log 2\varepsilon` against the
    non-negative :math:`\log(\sinh v/v) \approx v^2/6`. For ``v > 1`` (finite alpha) the
    printed right-hand form, whose second derivatives stay right for huge eps. Limits:
    ``eps = 0`` gives ``+inf``, ``eps = inf`` or ``alpha = inf`` gives ``-inf``; ``eps = 0``
    with ``alpha = inf``, where the two limits disagree, gives ``nan``.

    Args:
        eps: privacy parameter(s), ``>= 0``.
        alpha: real(s) > 0 (the paper uses ``(0, 1]``); broadcasts with ``eps``.
    """
    eps, alpha = _inexact(eps, alpha)
    # v = eps alpha > 1 (alpha finite): log(alpha) - log(2 sinh v) as printed, through
    # _log_2sinh_at (its leading term eps alpha at eps = inf): the form below took the
    # alpha-curvature -1/alpha^2 of log(alpha) as eps^2 times that of -log(2v), 0 or nan
    # once (eps alpha)^2 leaves the float range (eps = 1e300, alpha = 0.5: 0, not -4), and
    # nan at eps = inf
    large = (eps * alpha > 1) & (alpha < jnp.inf)
    es, al = jnp.where(large, 1.0, eps), jnp.where(large, alpha, 2.0)
    small_value = -(_LOG2 + jnp.log(es)) - _log_sinhc(es * jnp.where(large, 0.5, alpha))
    el = jnp.where(large, eps, 1.0)
    value = jnp.where(large, jnp.log(al) - _log_2sinh_at(el, al), small_value)
    return jnp.where(alpha > 0, value, jnp.nan)  # log(alpha) is undefined (NaN) for alpha <= 0


@_checked(eps=_nonnegative)
def eq32_max(eps: ArrayLike) -> jax.Array:
    r"""Eq. (32) maximised over alpha: the paper's :math:`C_{ubII}(P,Q)`.

    .. math::

        \sup_{\alpha\in(0,1]} \mathrm{eq32}(\varepsilon,\alpha) = -\log(2\varepsilon)
        \quad (\alpha \to 0^+).

    Range: the paper's :math:`\alpha \in (0, 1]`. With :math:`v = \varepsilon\alpha` the
    derivative is :math:`(1 - v\coth v)/\alpha < 0`, so the objective decreases and the sup
    is the limit at ``alpha -> 0+`` (not attained; the expression is undefined at 0).
    Verified against an mpmath maximisation.

    Claim: an upper bound on the Chernoff information of any eps-DP pair. Truth: vacuous for
    small eps, below :math:`\log\cosh(\varepsilon/2)` (:func:`jaxdp.max_chernoff_eps_dp`) for
    ``eps > 0.4856147248`` and negative for ``eps > 1/2``.
    """
    (eps,) = _inexact(eps)
    return -(_LOG2 + jnp.log(eps))


@_checked(eps=_nonnegative)
def alpha_ub1(eps: ArrayLike) -> jax.Array:
    r"""The stationary point of (31)/(62) stated after eq. (63).

    .. math::

        \alpha^*_{ub,I} = \frac{1}{2\varepsilon}\log\frac{1+\varepsilon}{1-\varepsilon} - 1
        = \frac{\operatorname{atanh}\varepsilon}{\varepsilon} - 1

    Claim: the maximiser of (31), in ``(0, 1]`` for every eps > 0 (eqs. (64)-(65)). Truth: it
    does solve (63) = 0, but (31) is convex in alpha so it is the *minimiser*; it lies in
    ``(0, 1]`` only for ``eps <= 0.9575040241`` (the paper's (65) lower-bounds the wrong
    side). Undefined for ``eps >= 1`` (log of a non-positive number / division by zero):
    returns NaN. Near 0 it is :math:`\varepsilon^2/3 + \varepsilon^4/5 + \dots`, evaluated by
    series (relative accuracy); ``eps = 0`` gives the limit 0.
    """
    (eps,) = _inexact(eps)
    return _below_one(eps, _atanh_over_x_minus_1(sp.stand_in(~(eps < 1), eps, 0.0)))


@_checked(eps=_nonnegative)
def eq69(eps: ArrayLike) -> jax.Array:
    r"""Eq. (69): the stationary point of the bound on (68).

    .. math::

        \alpha^*_{ub,II} = \frac{1}{2\varepsilon}\log\frac{1+\varepsilon}{1-\varepsilon}
        = \frac{\operatorname{atanh}\varepsilon}{\varepsilon}

    Claim: the maximiser, in ``(0, 1]`` for every eps > 0 (eqs. (70)-(71)). Truth: the bounded
    objective is convex, so this is the minimiser, and since
    :math:`\operatorname{atanh}\varepsilon > \varepsilon` it is ``> 1`` for every eps in
    ``(0, 1)``: never in the claimed range. NaN for ``eps >= 1``; ``eps = 0`` gives the limit 1.
    """
    (eps,) = _inexact(eps)
    return _below_one(eps, 1 + _atanh_over_x_minus_1(sp.stand_in(~(eps < 1), eps, 0.0)))


@_checked(eps=_nonnegative)
def eq43(eps: ArrayLike) -> jax.Array:
    r"""Eq. (43): the paper's bound on the optimal alpha, :math:`\alpha^*_{alt}`.

    .. math::

        \alpha^*_{alt} \le \frac{1}{2\varepsilon}\log\frac{4\varepsilon+2}{\varepsilon+1} - 1

    Claim: bounds the maximiser of (30) (whose true sup is at ``alpha -> 0``, see
    :func:`eq30_max`). The value lies in ``(0, 1]`` only for ``eps`` in
    ``[0.2138543272, 0.4884751974)``: it exceeds 1 below and is negative above (tends to -1).
    ``eps = 0`` gives +inf and ``eps = inf`` gives -1 (the limits), with the limit slopes
    ``-inf`` and 0. The log is evaluated as :func:`_log_eq43`.
    """
    (eps,) = _inexact(eps)
    # eps = 0: log(2)/(2 eps), the leading term, whose slope is -inf (the quotient rule's
    # was inf - inf = nan); finite stand-ins in the branch not taken (its zero cotangent
    # times an infinite slope is nan)
    zero, e, e0 = _at_zero(eps)
    return jnp.where(zero, _LOG2 / (2 * e0), _log_eq43(e) / (2 * e) - 1)


@_checked(eps=_nonnegative, alpha=_unit_interval)
def eq56(eps: ArrayLike, alpha: ArrayLike) -> jax.Array:
    r"""Eq. (56): the paper's Jensen bound on :math:`C(P,Q)`.

    .. math::

        C(P,Q) \le \alpha\varepsilon\frac{(e^{\alpha\varepsilon}-1)(1-e^{-\alpha\varepsilon})}
        {e^{\alpha\varepsilon}-e^{-\alpha\varepsilon}}
        = \alpha\varepsilon\tanh(\alpha\varepsilon/2)

    (evaluated through the identity on the right; ``alpha * eps = 0``, 0/0 as printed, gives the
    limit 0, also at ``eps = inf``). Truth: Jensen gives
    :math:`-\log C_\alpha \le \alpha D(Q\|P) \le \alpha\varepsilon\tanh(\varepsilon/2)`; (54)
    replaced eps by alpha*eps inside the two-point law, which shrinks the bound. As a bound on
    the worst case :math:`-\log C_\alpha` (:func:`jaxdp.max_neg_log_bc_eps_dp`) it fails for
    ``alpha`` below a threshold just under 1/2 (0.49507 at eps = 1, 0.40482 at eps = 10) and
    holds for ``alpha >= 1/2``; as a bound on :math:`C(P,Q) = \max_\alpha`, i.e. on
    :math:`\log\cosh(\varepsilon/2)`, it fails below a similar threshold (0.49509 at eps = 1).
    """
    eps, alpha = _inexact(eps, alpha)
    # alpha = 0: 0 for every eps, so also at eps = inf (0 * inf was NaN); a finite stand-in
    # for eps in the branch not taken (its zero cotangent times eps = inf made the
    # alpha-slope nan there, limit 0). Only at eps = inf: for a finite eps alpha eps is 0
    # itself, and the where cut its alpha-alpha second derivative eps^2 to 0
    zero = (alpha == 0) & (eps == jnp.inf)
    # eps = inf (alpha > 0): the leading term alpha eps (inf), whose second derivatives are
    # the limits (mixed 1, else 0; eps times the slope of x tanh(x/2) at x = inf was nan)
    inf = (eps == jnp.inf) & ~zero
    x = jnp.where(zero, 0.0, alpha * jnp.where(zero | inf, 1.0, eps))
    ei, ai = jnp.where(inf, eps, 1.0), jnp.where(inf, alpha, 1.0)
    return jnp.where(inf, ai * ei, _x_tanh_half(x))


@_checked(eps=_nonnegative)
def eq72(eps: ArrayLike) -> jax.Array:
    r"""Eq. (72): the paper's "optimal upper bound" :math:`C^*_{ub}(P,Q)`.

    .. math::

        C^*_{ub} = \left(\frac{1}{2\varepsilon}+\frac12\right)\log\frac{1+\varepsilon}
        {1-\varepsilon} - 1 + \log\left(\frac{2\varepsilon}{1-\varepsilon}\right)

    Claim: an upper bound on the Chernoff information of any eps-DP pair. Truth: negative for
    ``eps < 0.2698724407`` (tends to -inf like :math:`\log 2\varepsilon`), below
    :math:`\log\cosh(\varepsilon/2)` (:func:`jaxdp.max_chernoff_eps_dp`) for
    ``eps < 0.2713186701``, a (loose) bound only on ``[0.2713186701, 1)``, undefined for
    ``eps >= 1`` (returns NaN). Substituting :func:`alpha_ub1` into (31) (or :func:`eq69` into
    the bound on (68)) as the text says gives the same expression with
    :math:`-\log(2\varepsilon/(1-\varepsilon))` instead: that is :func:`fig2_ub2`, and
    ``fig2_ub2 - eq72 = -2 log(2 eps/(1 - eps))``.
    """
    (eps,) = _inexact(eps)
    e = sp.stand_in(~(eps < 1), eps, 0.5)
    value = _atanh_over_x_minus_1(e) + _atanh(e) + _LOG2 + jnp.log(e) - jnp.log1p(-e)
    return _below_one(eps, value)


@_checked(eps=_nonnegative)
def fig2_ub1(eps: ArrayLike) -> jax.Array:
    r"""Figure 2 "UB I": the (31) objective at :math:`\alpha^*_{alt}` of eq. (43).

    .. math::

        \mathrm{eq31}(\varepsilon, \mathrm{eq43}(\varepsilon))

    Reading: Section VII says "UB I and UB II represent the two alternative upper bounds on
    C(P,Q) obtained via :math:`\alpha^*_{alt}` and :math:`\alpha^*_{ub,I}`"; both are evaluated
    in the upper-bound objective (31) (whose stationary point :math:`\alpha^*_{ub,I}` is), so
    the two curves differ only in alpha. (``eq30(eps, eq43(eps))``, the other possible
    reading, is below this pointwise.) Truth: vacuous for small eps (alpha_alt ~
    :math:`\log 2/(2\varepsilon)` enters linearly), below :math:`\log\cosh(\varepsilon/2)` for
    ``eps > 0.4683229095``, negative for ``eps > 0.4807986983``. The limits are returned at
    ``eps = 0``, +inf (the value grows like :math:`\log 2/(2\varepsilon)`), and at
    ``eps = inf``, :math:`-1 - \log(3/2)` (:math:`\varepsilon(\alpha^*_{alt} + 1) \to
    \log 2`), with the limit slopes ``-inf`` and 0; as written both are NaN
    (``eq31(0, inf)``, ``eq31(inf, -1)``).

    Evaluated as :math:`\alpha - \log(2\sinh u)` with :math:`u = \varepsilon(\alpha + 1) =
    \frac12\log\frac{4\varepsilon+2}{\varepsilon+1}` taken from the identity, not from the
    rounded alpha (whose ``alpha + 1`` cancels for large eps: ``inf`` at ``eps = 1e300``).
    """
    (eps,) = _inexact(eps)
    return eq43(eps) - _log_2sinh(0.5 * _log_eq43(eps))


@_checked(eps=_nonnegative)
def fig2_ub2(eps: ArrayLike) -> jax.Array:
    r"""Figure 2 "UB II": the (31) objective at :math:`\alpha^*_{ub,I}` (:func:`alpha_ub1`).

    .. math::

        \mathrm{eq31}(\varepsilon, \alpha^*_{ub,I}) = \left(\frac{1}{2\varepsilon}+\frac12
        \right)\log\frac{1+\varepsilon}{1-\varepsilon} - 1 - \log\frac{2\varepsilon}
        {1-\varepsilon}

    i.e. eq. (72) with the sign of its last log flipped (see :func:`eq72`). Since
    :math:`\alpha^*_{ub,I}` minimises the convex (31), this is the *smallest* value of the
    (31) objective, not the bound :func:`eq31_max`. Truth: below
    :math:`\log\cosh(\varepsilon/2)` for ``eps > 0.4679251432``, negative for
    ``eps > 0.4797491090``, NaN for ``eps >= 1``. ``eps = 0`` gives +inf with the limit
    slope ``-inf``.
    """
    (eps,) = _inexact(eps)
    # eps = 0: -log(2 eps), the leading term, whose slope is -inf (reverse mode gave nan:
    # the cotangent of alpha there is eps times an infinite one, 0 * inf); finite stand-ins
    # in the branch not taken
    zero, e, e0 = _at_zero(eps, 0.5)
    return jnp.where(zero, -(_LOG2 + jnp.log(e0)), eq31(e, alpha_ub1(e)))


@_checked(eps=_nonnegative, alpha=_not_nan)
def fig2_kl_cuff(eps: ArrayLike, alpha: ArrayLike) -> jax.Array:
    r"""Figure 2 "KL-Cuff": eq. (22) times ``(1 - alpha)``.

    .. math::

        (1 - \alpha)\,\varepsilon\frac{(e^{\varepsilon}-1)(1-e^{-\varepsilon})}
        {e^{\varepsilon}-e^{-\varepsilon}}

    The tangent of :math:`-\log C_\alpha` at ``alpha = 1`` (slope :math:`-D(P\|Q)`); with the
    sharp KL bound (22) it is a valid upper bound on the worst-case :math:`-\log C_\alpha`
    (:func:`jaxdp.max_neg_log_bc_eps_dp`) for every alpha in ``[0, 1]`` (concavity). The
    mirror curve :math:`\alpha D(Q\|P)` is ``fig2_kl_cuff(eps, 1 - alpha)``. ``alpha = 1``
    gives 0 also at ``eps = inf`` (and ``eps = 0`` also at infinite ``alpha``), the limits;
    the alpha-slope there is ``-eq22(eps)``, ``-inf`` at ``eps = inf``.
    """
    eps, alpha = _inexact(eps, alpha)
    w, k = 1 - alpha, eq22(eps)
    # 0 * inf: the expression is 0 for every eps at alpha = 1 (for every alpha at eps = 0);
    # at alpha = 1, eps = inf its alpha-slope is still -eq22(eps) = -inf (a where there gave
    # a silent 0 in forward mode and nan in reverse mode), its eps-slope 0
    return jnp.where((k == 0) & jnp.isinf(w), 0.0, _mul(w, k))


# ---------------------------------------------------------------------------------------------
# Section V: Laplace mechanism under attack.


@_checked(shift=_not_nan, b=_positive, theta=_positive)
def eq34(shift: ArrayLike, b: ArrayLike, theta: ArrayLike) -> jax.Array:
    r"""Eq. (34): KL divergence of the attacked Laplace mechanism.

    .. math::

        D(P\|Q) = \log\theta - 1 + \frac{|\Delta\mu|}{\theta b} + \frac{1}{\theta}
        e^{-|\Delta\mu|/b}

    Claim: :math:`D(\mathrm{Lap}(0, b)\,\|\,\mathrm{Lap}(\Delta\mu, \theta b))`. **True**
    for every shift, ``b > 0``, ``theta > 0`` (checked by mpmath quadrature); equals
    ``jaxdp.kl(jaxdp.Laplace(0, b), jaxdp.Laplace(shift, theta * b))``. Evaluated without
    cancellation as :math:`[(s-1) - \log s] + s(e^{-t} - 1 + t)` with :math:`s = 1/\theta`,
    :math:`t = |\Delta\mu|/b` (both brackets >= 0); the first bracket takes
    :math:`-\log s = \log\theta` directly for ``theta > 10/9`` (``log1p(s - 1)`` of
    ``s - 1`` near -1 lost ``theta`` ulp: float32 inf from ``theta = 1e8``, float64 from
    ``1e16``). Measured against mpmath on shifts in ``[0, 40]`` and ``theta`` in
    ``[1e-300, 1e300]`` (float32: ``[1e-37, 1e37]``, where finite): relative error 1.1e-15
    (float64) and 8.1e-7 (float32, at ``theta = 0.88``; the second bracket, evaluated as
    ``expm1(-t) + t`` for ``t >= 0.1`` before, cancelled: 4e-6 at ``theta = 1``, t = 0.1).
    ``theta = inf`` gives ``+inf`` (the limit), with the limit theta-slope 0.

    Args:
        shift: mean shift :math:`\Delta\mu` (any real).
        b: scale of the unattacked noise, ``> 0``.
        theta: scale ratio, ``> 0``.
    """
    shift, b, theta = _inexact(shift, b, theta)
    over, t, x = _shift_ratios(shift, b, theta)
    # theta = inf: the shift term is 0 (inf/inf if t = inf too); the first bracket is inf.
    # Where t overflows, s(e^-t - 1 + t) = x - 1/theta = x (1 - 1/t) is x in floating point
    # (and theta a stand-in 1 in the branch not taken: its zero cotangent times -u/theta^2
    # was nan for theta below ~1e-154)
    # (a quotient: JAX's theta-slope -u/theta^2 was 0 * inf = nan at shift = 0 for theta
    # below ~1e-154)
    shift_term = quotient(_expm1_minus_x(-t), jnp.where(over, 1.0, theta))
    shift_term = jnp.where(theta == jnp.inf, 0.0, jnp.where(over, x, shift_term))
    return _kl_scale_term(theta) + shift_term


@_checked(shift=_not_nan, b=_positive, theta=_positive)
def eq35(shift: ArrayLike, b: ArrayLike, theta: ArrayLike) -> jax.Array:
    r"""Eq. (35): the paper's Chernoff information of the attacked Laplace mechanism.

    .. math::

        C(P,Q) = \frac{|\Delta\mu|}{\theta b} - \log\left(1 + \frac{|\Delta\mu|}{\theta b}\right)

    Claim: :math:`C(\mathrm{Lap}(0, b), \mathrm{Lap}(\Delta\mu, \theta b))`. **False.** For
    ``theta = 1`` the exact value is :math:`t/2 - \log(1 + t/2)`, :math:`t = |\Delta\mu|/b`
    (``alpha* = 1/2``), while (35) gives :math:`t - \log(1+t)`: the argument is off by a factor
    2, so (35) is ~4x too large for small t and ~2x for large t. For ``theta != 1`` theta only
    rescales t, which is not the exact value either (it can be below or above: at shift = 1,
    b = 1, (35) gives 0.0945349 vs exact 0.1097306 for theta = 2, and 0.9013877 vs 0.2285434
    for theta = 1/2). Exact: ``jaxdp.chernoff(jaxdp.Laplace(0, b),
    jaxdp.Laplace(shift, theta * b)).information``.

    Args:
        shift: mean shift :math:`\Delta\mu` (any real).
        b: scale, ``> 0``.
        theta: scale ratio, ``> 0``.
    """
    shift, b, theta = _inexact(shift, b, theta)
    # not |shift| / (theta * b), nor |shift| / b / theta (which XLA rewrites into it): the
    # product under- or overflowed where the ratio is representable (float64 shift = 0,
    # b = 1e-10, theta = 1e-300 gave 0/0 = NaN; float32 already at b = theta = 1e-20)
    # (|shift| / b as a quotient: its b-slope was nan or -inf for b below ~1e-154, as in eq34;
    # where it over- or underflows, |shift| / (theta b) from _shift_ratios)
    over, t, x = _shift_ratios(shift, b, theta, underflow=True)
    return _x_minus_log1p(jnp.where(over, x, scaled_divide(t, theta)))


# ---------------------------------------------------------------------------------------------
# Section VI: membership advantage.


@_checked(c=_nonnegative, q=_check_count)
def eq38(c: ArrayLike, q: ArrayLike = 1) -> jax.Array:
    r"""Eq. (38): the paper's "best advantage" from ``q`` samples.

    .. math::

        \mathrm{BestAdv}_q = 1 - 2^{-qC(P_0, P_1)}

    Printed with base 2, i.e. ``c`` in bits (the proof of Theorem 5 converts nats with
    :math:`2^{-\varepsilon\log_2 e} = e^{-\varepsilon}`); pass ``c`` in nats times
    :math:`\log_2 e` to reproduce (41). Truth: with ``C`` in nats, every pair has
    :math:`1 - e^{-qC} \le \mathrm{TV}(P_0^{\otimes q}, P_1^{\otimes q}) \le
    \sqrt{1 - e^{-2qC}}` (:func:`jaxdp.max_tv_chernoff`), so this is a lower bound on the best
    advantage, exact only asymptotically in the exponent, not its value.

    Args:
        c: Chernoff information, in bits, ``>= 0``.
        q: number of samples, integer ``>= 1``.
    """
    c, q = _inexact(c, q)
    return sp.one_minus_exp(q * c * _LOG2)


@_checked(eps=_nonnegative)
def eq39(eps: ArrayLike) -> jax.Array:
    r"""Eq. (39), Yeom et al.: :math:`\mathrm{Adv} \le e^{\varepsilon} - 1`.

    Valid for eps-DP (the sharp value is :math:`\tanh(\varepsilon/2)` =
    :func:`jaxdp.max_tv_eps_dp`), loose: above 1 (vacuous) for ``eps > log 2``.
    """
    (eps,) = _inexact(eps)
    return jnp.expm1(eps)


@_checked(eps=_nonnegative, delta=_unit_interval)
def eq40(eps: ArrayLike, delta: ArrayLike) -> jax.Array:
    r"""Eq. (40), Erlingsson et al.: :math:`\mathrm{Adv} \le 1 - e^{-\varepsilon} +
    \delta e^{-\varepsilon}`.

    Valid for (eps, delta)-DP; exceeds the sharp :func:`jaxdp.max_tv_eps_delta_dp`,
    :math:`\delta + (1-\delta)\tanh(\varepsilon/2)`, by
    :math:`(1-\delta)(1 - e^{-\varepsilon} - \tanh(\varepsilon/2))`, at most 0.1715728753
    (``delta = 0``, ``eps = asinh(1) = 0.8813735870``).
    """
    eps, delta = _inexact(eps, delta)
    return sp.one_minus_exp(eps) + delta * jnp.exp(-eps)


@_checked(eps=_nonnegative)
def eq41(eps: ArrayLike) -> jax.Array:
    r"""Eq. (41), the paper's Theorem 5: :math:`\mathrm{Adv} \le 1 - e^{-\varepsilon}`.

    Claim: bounds the advantage against an eps-Chernoff-DP mechanism (via (38)). Truth: as a
    pure eps-DP bound it is valid (it is (40) with delta = 0; sharp is
    :math:`\tanh(\varepsilon/2)`, :func:`jaxdp.max_tv_eps_dp`). For a Chernoff budget
    :math:`C(P,Q) \le \varepsilon` it is *not* an upper bound: every pair has
    :math:`\mathrm{TV} \ge 1 - e^{-C}`, and randomized response with Chernoff information
    ``eps`` has :math:`\mathrm{TV} = \sqrt{1 - e^{-2\varepsilon}}`
    (:func:`jaxdp.max_tv_chernoff`), larger for every eps > 0, by up to 0.4142135624 at
    ``eps = log(2)/2``.
    """
    (eps,) = _inexact(eps)
    return sp.one_minus_exp(eps)


@_checked(eps=_nonnegative)
def eq42(eps: ArrayLike) -> jax.Array:
    r"""Eq. (42), Bayes security: :math:`\mathrm{Adv} \le \frac{e^{\varepsilon}-1}
    {e^{\varepsilon}+1}`.

    **True and sharp** for eps-DP: equals :math:`\tanh(\varepsilon/2)` (evaluated through that
    identity), the TV of randomized response = :func:`jaxdp.max_tv_eps_dp` with ``n = 1``.
    """
    (eps,) = _inexact(eps)
    return sp.tanh(0.5 * eps)

r"""Laplace pair :math:`P = \mathrm{Lap}(\mu_1, b_1)`, :math:`Q = \mathrm{Lap}(\mu_2, b_2)`.

With :math:`\Delta = |\mu_2 - \mu_1|`, :math:`\lambda_1 = a/b_1`, :math:`\lambda_2 = (1-a)/b_2`,
the integrand :math:`p^a q^{1-a}` is piecewise exponential with kinks at the two locations,
and integrates to

.. math::

   \log C_a = -g(a, \rho) - \Big[x - \log(1 + x\,\psi(d))\Big],\qquad
   \rho = \log\frac{b_2}{b_1},\; x = \min(\lambda_1, \lambda_2)\Delta,\;
   d = |\lambda_1 - \lambda_2|\Delta,

where :math:`g(a,\rho) = \log(1 - a + a e^{\rho}) - a\rho` is the scale mismatch at
:math:`\Delta = 0` and :math:`\psi(d) = (1 - e^{-d})/d`. The bracket is split into
:math:`[x - \log(1+x)] + \log\big(1 + x(1-\psi(d))/(1 + x\psi(d))\big)`, two non-negative
terms, so no step cancels: the result keeps relative accuracy down to information
~1e-300, and has no :math:`1/(2a - 1)` singularity at the symmetric optimum
:math:`a = 1/2` (the textbook form divides by :math:`\lambda_2 - \lambda_1`).
Equal scales: :math:`C = t/2 - \log(1 + t/2)`, :math:`t = \Delta/b`, at :math:`a^* = 1/2`.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from jaxdp import _fastmath as fm
from jaxdp import _special as sp

#: Both distributions have full support, so the Chernoff optimum is interior.
SAME_SUPPORT = True
#: :func:`value_derivs` also returns the third derivative (the solver takes Halley steps).
THIRD_DERIVATIVE = True


def _shift_args(P, Q, a):
    r""":math:`\rho`, :math:`x`, :math:`x\psi(d)` and :math:`x(1 - \psi(d))` (module
    docstring)."""
    b1, b2 = P.scale, Q.scale
    delta = jnp.abs(Q.loc - P.loc)
    # x = min(l1, l2), l1 = a Delta/b1, l2 = (1 - a) Delta/b2, d = |l1 - l2|, written with one
    # branch choice so that derivatives with respect to the parameters stay consistent at
    # the tie l1 = l2 (where the symmetric optimum of equal-scale pairs sits); min/abs would
    # drop a term there. The branch is the sign of num = (1 - a) b1 - a b2 (l1 <= l2), so d
    # is never negative, and only the smaller rate's term is formed: x <= Delta for a in
    # [0, 1] (standardized, one of the scales is at least 1), while the larger term overflows
    # where the offset exceeds ~1e308 of the narrower scale, P's or Q's (its quotient's
    # derivative, inf times a zero cotangent, was nan).
    # Quotients whose derivatives do not square the scales (sp.quotient): parameter
    # gradients stay finite and right for scale ratios beyond ~1e154; of the offset, as the
    # solver's (derivs_setup), not of the weight: (1 - a)/b2 times Delta underflowed in
    # forward mode where both are huge (standardized by ~1e200, a tangent of b2 ~1e-200
    # over b2 ~1e93: d/db2 of order 1/2 Renyi 1e-293 for 5e-294), (1 - a) Delta/b2 does not
    num = (1.0 - a) * b1 - a * b2
    left = num >= 0.0
    x = sp.quotient(jnp.where(left, a, 1.0 - a) * delta, jnp.where(left, b1, b2))
    diff = sp.quotient(num, b1 * b2) * delta  # l2 - l1
    d = jnp.where(left, diff, -diff)
    # d beyond the float range (an offset beyond ~1e308 of the narrower scale; they were
    # nan, one_minus_psi(inf) = inf/inf: Rényi, Bhattacharyya, Hellinger of Laplace(0, 1) vs
    # Laplace(1e304, 1e-5)): e^-d = 0, so x psi(d) = x/d, the ratio of the rates
    # min(l1, l2)/|l1 - l2| in which Delta cancels (a b2/num or (1 - a) b1/-num), and
    # x (1 - psi(d)) = x - x/d. Not 0 and x: x/d is ~b2/b1 there, and its derivatives are of
    # the order of the others (d/db2 of Bhattacharyya was -49999.00001 for -50000.00002).
    # So from d > 40 on (e^-d below half an ulp of 1): the derivative of x psi(d) through
    # psi'(d) ~ -1/d^2 went subnormal short of inf (d/db2 of Bhattacharyya of Laplace(0, 1) vs
    # Laplace(1e300, 1e-5) was -49999.00001, order 0.9 of Laplace(1e304, 1e-5) 1e-4 off)
    far = d > 40.0
    ds = jnp.where(far, 1.0, d)
    ratio = sp.quotient(
        jnp.where(left, a * b2, (1.0 - a) * b1), jnp.where(far, jnp.where(left, num, -num), 1.0)
    )
    xp = jnp.where(far, ratio, x * sp.psi(ds))
    xo = jnp.where(far, x - ratio, x * sp.one_minus_psi(ds))
    return sp.log_ratio(b2, b1), x, xp, xo


def _shift_unit(x, xp, xo):
    """The bracket for ``a`` in [0, 1] from ``x``, ``x psi`` and ``x (1 - psi)``: ``x >= 0``,
    both terms non-negative."""
    # a select, not max(x, 0): at a = 0 or 1, x = 0 is a tie, where JAX gives max half the
    # derivative (f'(1) came out as 0.76 D(P||Q))
    pos = x >= 0.0
    xc = jnp.where(pos, x, 0.0)
    return -sp.log1pmx(xc) + fm.log1p(jnp.where(pos, xo, 0.0) / (1.0 + jnp.where(pos, xp, 0.0)))


def log_bc(P, Q, a):
    rho, x, xp, xo = _shift_args(P, Q, a)
    # Convergence (only an issue for a > 1): a/b1 + (1-a)/b2 > 0, i.e. a b2 + (1-a) b1 > 0,
    # formed as b1 + a (b2 - b1): for equal scales a + (1 - a) cancelled to 0 once 1 - a
    # rounded to -a (orders from 2^53, float32 2^24: inf for identical pairs)
    converges = ~(P.scale + a * (Q.scale - P.scale) <= 0)  # NaN propagates
    # (x of a diverging integral, -inf where Delta/b2 overflows, on a stand-in: the unused
    # branch's derivatives are multiplied by 0)
    x, xp, xo = (jnp.where(converges, v, 0.0) for v in (x, xp, xo))
    # a > 1 (Rényi orders above 1): x < 0 and |x| psi(d) < 1/2 where the integral converges.
    neg = x <= 0.0
    xpn = jnp.maximum(jnp.where(neg, xp, 0.0), -0.5)
    shift_neg = jnp.where(neg, xo, 0.0) - sp.log1pmx(xpn)
    shift = jnp.where(x >= 0, _shift_unit(x, xp, xo), shift_neg)
    gap = sp.mixture_gap(jnp.where(converges, a, 0.5), rho)
    return jnp.where(converges, -gap - shift, jnp.inf)


def log_bc_unit(P, Q, a):
    """:func:`log_bc` for ``a`` in [0, 1] only (the same value there): without the branch
    for Rényi orders above 1, whose value and derivatives would be computed and discarded."""
    rho, x, xp, xo = _shift_args(P, Q, a)
    return -sp.mixture_gap(a, rho) - _shift_unit(x, xp, xo)


def kl(P, Q):
    r""":math:`D(P\|Q) = \varphi(-\rho) + \frac{b_1}{b_2}\varphi(-\Delta/b_1)`, :math:`\varphi(x) =
    e^x - 1 - x` (eq. (34) in this notation, both terms non-negative).

    Built from the pair's ratios, so it may read the pair in its own units, not standardized
    (:func:`jaxdp.divergences.kl` does): ``(Q.loc - P.loc)/c`` overflows where the offset
    exceeds ~1e308 of ``b1`` (a narrow ``P`` far from ``Q``: ``D`` ~ :math:`\Delta/b_2` is
    finite), and ``Q.scale/c`` where :math:`b_2/b_1` exceeds the float range."""
    b1, b2 = P.scale, Q.scale
    delta = jnp.abs(Q.loc - P.loc)
    r = sp.quotient(b1, b2)
    rho = sp.log_ratio_apart(b2, b1)  # also where b2/b1 leaves the float range
    # Delta/b1, capped at 1e3, where e^-t is 0 (an overflowed quotient gave nan gradients)
    t = sp.quotient(jnp.minimum(delta, 1e3 * b1), b1)
    far = t > 2.0
    u = sp.quotient(delta, b2)
    # r phi(-t) as (Delta/b2) (1 - psi(t)): phi(-t) ~ t^2/2 underflowed, and the slopes in
    # the locations, ~t/b2, with it, for t below ~1e-154
    # phi(-rho) = r - 1 + rho where P is far wider than Q: e^-rho recomputed from the rounded
    # rho was ~|rho| ulp off (4.5e-14 relative at r ~ 1e244)
    wide = rho < -8.0
    phr = jnp.where(wide, (r - 1.0) + rho, sp.phi(-jnp.where(wide, 0.0, rho)))
    near = phr + u * sp.one_minus_psi(jnp.where(far, 1.0, t))
    # beyond 2, D = Delta/b2 + rho - 1 + r e^-t (cancelling at most ~3x): from Delta/b2,
    # which stays finite where Delta/b1 overflows, and without the two slopes ~1/b2 of the
    # form above, which cancel in the b1-derivative where r >> 1 (to 1/b1: all digits lost
    # at r ~ 1e16)
    tail = jnp.exp(-jnp.where(far, t, 2.0))
    away = u + (rho - 1.0) + jnp.where(tail > 0, r * tail, 0.0)
    return jnp.where(far, away, near)


def _difference(x, y, t1, t2, den):
    """``x - y``, or the same number as ``(t1 + t2) / den``: whichever form cancels less.
    The first loses digits when the two standardized offsets are close (nearly identical
    pairs), the second when one scale is far narrower than the other."""
    direct = (jnp.abs(x) + jnp.abs(y)) * den <= jnp.abs(t1) + jnp.abs(t2)
    return jnp.where(direct, x - y, sp.quotient(t1 + t2, den))


def _cdf_diff(z1, z2, d, b1, b2):
    """F_P(x) - F_Q(x) without cancellation, from the offsets ``z1 = x - m1`` and
    ``z2 = x - m2`` (``d = m2 - m1``): each CDF reads its own offset, so a point next to a
    location much wider than its scale allows (float32: |m| / b ~ 1e5) keeps its digits."""
    below = (z1 <= 0) & (z2 <= 0)
    above = (z1 >= 0) & (z2 >= 0)
    u1, u2 = sp.quotient(-z1, b1), sp.quotient(-z2, b2)
    du = _difference(u2, u1, d * b1, z1 * (b2 - b1), b1 * b2)  # u2 - u1
    # (offsets zeroed off their region: exp(-u) grows without bound there, and inf * 0 in a
    # branch that jnp.where drops still poisons the gradient)
    # both tails below: (e^{-u1} - e^{-u2})/2, u_i = -z_i/b_i
    ub1, ub2 = jnp.where(below, u1, 0.0), jnp.where(below, u2, 0.0)
    d_below = 0.5 * sp.exp_diff(-ub1, -ub2, jnp.where(below, du, 0.0))
    # both tails above: (e^{-v2} - e^{-v1})/2, v_i = z_i/b_i = -u_i, so v1 - v2 = u2 - u1
    ua1, ua2 = jnp.where(above, u1, 0.0), jnp.where(above, u2, 0.0)
    d_above = 0.5 * sp.exp_diff(ua2, ua1, jnp.where(above, du, 0.0))
    # between: sign * (1 - (e^{-|z1|/b1} + e^{-|z2|/b2})/2), as two 1 - e^{-u}, whose
    # derivatives e^{-u} are formed directly (JAX's expm1(-u) + 1 lost them to rounding
    # where TV nears 1: 3.8e-6 relative off 50 scales apart, halved or 0 from ~73)
    mid = 0.5 * (
        sp.one_minus_exp(sp.quotient(jnp.abs(z1), b1))
        + sp.one_minus_exp(sp.quotient(jnp.abs(z2), b2))
    )
    d_mid = jnp.where(d >= 0, mid, -mid)
    return jnp.where(below, d_below, jnp.where(above, d_above, d_mid))


def tv(P, Q):
    r"""Total variation: the sum of :math:`|F_P - F_Q|` at the (at most two) crossings of
    :math:`\log p/q`, which is piecewise linear; each term is computed without cancellation.

    A crossing :math:`x` is located by its offsets from both locations, :math:`z_1 = (s_2 d /
    b_2 - \rho)/k` and :math:`z_2 = (s_1 d / b_1 - \rho)/k` (:math:`d = m_2 - m_1`, slope
    :math:`k`), not by :math:`x` itself, whose rounding next to a location far larger than
    the narrower scale would move it by a visible fraction of that scale."""
    m1, b1, m2, b2 = P.loc, P.scale, Q.loc, Q.scale
    d = m2 - m1
    # TV is 1 (to rounding: 1 - TV < 1e-300) where d overflows (locations ~1e308 of opposite
    # signs), a standardized b2 left the float range (b2/b1 beyond ~1e308 or below ~1e-308;
    # TV was 0, Laplace(0, 1e-300) vs Laplace(1, 1e300)) or the crossings' offsets d/b
    # overflow; computed on an identical pair there, whose derivatives are finite (0: the
    # offsets' gave reverse-mode nan, Laplace(0, 1) vs Laplace(1e304, 1e-5))
    gone = jnp.isinf(d) | ~(jnp.isfinite(b2) & (b2 >= jnp.finfo(b2.dtype).tiny))
    gone = gone | jnp.isinf(sp.quotient(jnp.abs(d), jnp.where(gone, 1.0, jnp.minimum(b1, b2))))
    b2 = jnp.where(gone, b1, b2)
    d = jnp.where(gone, 0.0, d)
    # with the derivatives of log b2 - log b1: log_ratio's reverse-mode cotangent of
    # (b2 - b1)/b1, ct/(1 + b2/b1), underflowed for a tiny ct at scale ratios ~1e300 (the
    # slope of TV at its crossings, ~e^-rho; Laplace(0, 1) vs Laplace(1e300, 1e300))
    logs = jnp.log(b2) - jnp.log(b1)
    dlogs = jnp.where(jnp.isfinite(logs), logs - lax.stop_gradient(logs), 0.0)
    rho = lax.stop_gradient(sp.log_ratio(b2, b1)) + dlogs
    shape = jnp.broadcast_shapes(m1.shape, b1.shape, m2.shape, b2.shape)
    total = jnp.zeros(shape, m1.dtype)
    # log p/q = rho - s1 (x - m1)/b1 + s2 (x - m2)/b2 on each piece (s_i = sign(x - m_i)).
    # Pieces: below both (z1, z2 <= 0), between (one side of each), above both (> 0).
    forward = d >= 0  # m1 <= m2
    for s1, s2 in (
        (-1.0, -1.0),
        (jnp.where(forward, 1.0, -1.0), jnp.where(forward, -1.0, 1.0)),
        (1.0, 1.0),
    ):
        # s2/b2 - s1/b1 as (s2 b1 - s1 b2)/(b1 b2): below and above both, s1 = s2 and the
        # difference of the rounded reciprocals cancelled for nearly equal scales, which
        # moved the crossings by ~eps/|b2/b1 - 1| of a scale and TV by that squared (2.6e-11
        # relative off at b2 = b1 (1 + 1e-12), 1e-4 at 1 + 1e-13, 1.5e-2 at 1 + 1e-15)
        slope = sp.quotient(sp.quotient(s2 * b1 - s1 * b2, b1), b2)
        # with the derivatives of s2/b2 - s1/b1: the reverse-mode cotangent of the inner
        # quotient, ~b2/b1 times larger than the slope, is ct/b2 (it underflowed, as above)
        alt = sp.quotient(s2, b2) - sp.quotient(s1, b1)
        dalt = jnp.where(jnp.isfinite(alt), alt - lax.stop_gradient(alt), 0.0)
        slope = lax.stop_gradient(slope) + dalt
        ok = slope != 0
        safe = jnp.where(ok, slope, 1.0)
        z1 = sp.quotient(sp.quotient(s2 * d, b2) - rho, safe)
        z2 = sp.quotient(sp.quotient(s1 * d, b1) - rho, safe)
        on_piece = ((z1 > 0) == (s1 > 0)) & ((z2 > 0) == (s2 > 0))
        valid = ok & on_piece & jnp.isfinite(z1) & jnp.isfinite(z2)
        z1 = jnp.where(valid, z1, 0.0)
        z2 = jnp.where(valid, z2, -d)
        # z2 = z1 - d: both moved by the crossing's one tangent, taken from the offset whose
        # terms are the smaller (d/b2 in z1, d/b1 in z2). The other's terms ~d/b^2 cancel
        # to it: Laplace(0, 1) vs Laplace(1e300, 1e300) gave d/db1 of TV -1.8e-301 (under
        # jit -1.8e-17, FMA contraction: the cancellation's rounding) for -2.5e-298
        dz = jnp.where(b2 >= b1, z1 - lax.stop_gradient(z1), (z2 + d) - lax.stop_gradient(z2 + d))
        z1 = lax.stop_gradient(z1) + dz
        z2 = lax.stop_gradient(z2) + (dz - (d - lax.stop_gradient(d)))
        total = total + jnp.where(valid, jnp.abs(_cdf_diff(z1, z2, d, b1, b2)), 0.0)
    # the two terms may round above 1 when TV rounds to 1; d overflows (locations ~1e308 of
    # opposite signs) only where TV is 1. Where |d| > 80 max(b1, b2), 1 - TV <= e^-40 rounds
    # away (float32 too); the crossings' offsets d/b may overflow there (Laplace(0, 1) vs
    # Laplace(1e304, 1e-5): no valid piece, TV 0)
    far = sp.quotient(jnp.abs(d), jnp.maximum(b1, b2)) > 80.0
    # There, and where total rounds above 1, the value is 1 with the slope of total, whose
    # terms' derivatives are formed directly: that of 1 - TV, ~e^(-|d|/(b1 + b2)), is normal
    # out to ~1416 scales apart for equal scales (it was 0 beyond 80). (A where, not
    # jnp.minimum, whose derivative is halved where total rounds to 1 exactly.)
    one = 1.0 + (total - lax.stop_gradient(total))
    return jnp.where(gone, 1.0, jnp.where(far | (total > 1.0), one, total))


def swap_mask(P, Q):
    r"""Pairs the solver takes as :math:`(Q, P)`: those whose
    :math:`e^\rho = b_2/b_1` would overflow
    (:func:`jaxdp._special.exp_rho_overflows`)."""
    return sp.exp_rho_overflows(Q.scale, P.scale)


def derivs_setup(P, Q):
    r"""Per-pair constants for :func:`derivs` (hoisted out of the Newton loop): the scale
    constants of :math:`\rho = \log(b_2/b_1)` (:class:`~jaxdp._special.ScaleConsts`),
    :math:`\Delta/b_1` and :math:`\Delta/b_2`."""
    delta = jnp.abs(Q.loc - P.loc)
    return (
        sp.scale_consts(Q.scale, P.scale),
        sp.quotient(delta, P.scale),
        sp.quotient(delta, Q.scale),
    )


def initial_alpha(consts):
    r"""The solver's starting point: the pure-scale maximiser (:math:`\Delta = 0`)
    :math:`a_\rho = 1/\rho - 1/K` (series near :math:`\rho = 0`), blended with the kink
    :math:`a_k = b_1/(b_1 + b_2)` of :math:`x = \min(a/b_1, (1-a)/b_2)\Delta`, where the
    optimum moves as the shift dominates, with weight :math:`w = \Delta/(5(b_1 + b_2))`:
    :math:`(a_\rho + w a_k)/(1 + w)`. The constant 1/5 is measured, not derived: on 1e5
    pairs with locations ~ N(0, 3^2) and log-scales uniform on [-6, 6], 1/5 gives at most
    one Halley step in float32 and two in float64 (the pure-scale start: up to 16; weights
    1/4 and 1/3 leave some float32 pairs at two steps, 1/2 some float64 pairs at three).
    Equal scales give :math:`a_\rho = a_k = 1/2`, the exact optimum.

    Two divisions per pair instead of four: :math:`a_\rho = \varphi(\rho)/(\rho K)`
    (:math:`K - \rho = \varphi(\rho)`: no cancellation, unlike :math:`1/\rho - 1/K`) and
    the blend over one common denominator."""
    sc, p, _ = consts
    small = jnp.abs(sc.rho) < 1e-3  # 0/0 at rho = 0: the series 1/2 - rho/12 around it
    num = jnp.where(small, 0.5 - sc.rho / 12.0, sc.phr)
    den = jnp.where(small, 1.0, sc.rho * sc.k)  # a_rho = num/den
    kink = 1.0 / (1.0 + sc.w)  # b1/(b1 + b2), w = b2/b1
    t = 0.2 * p  # p = Delta/b1, so t * kink = Delta/(5(b1 + b2))
    return (num + t * kink * kink * den) / (den * (1.0 + t * kink))


def _shift_terms(consts, a):
    r"""``x``, ``dx/da``, ``dd/da`` and the :math:`\psi` family at ``d`` (module docstring)."""
    _, p, q = consts
    u = a * p
    v = (1.0 - a) * q
    left = u <= v
    x = jnp.where(left, u, v)  # min/abs with a consistent branch (see log_bc)
    d = jnp.where(left, v - u, u - v)
    xp = jnp.where(left, p, -q)
    dp = jnp.where(left, -(p + q), p + q)
    return (x, xp, dp) + tuple(sp.psi_family(d))[:5]


def derivs(consts, a):
    r"""First and second :math:`\alpha`-derivatives of :math:`\log C_\alpha`, hand-written.

    With :math:`\log C = -g(a,\rho) - S(x, d)` (module docstring), :math:`g' =
    (\varphi(\rho) - a\rho K)/(1 + aK)`, :math:`g'' = -K^2/(1+aK)^2` (:math:`K = e^\rho - 1`),
    and for :math:`S = x - \log(1 + x\psi(d))`, :math:`D = 1 + x\psi`:
    :math:`S_x = (1 - \psi + x\psi)/D`, :math:`S_d = x\omega/D`, :math:`S_{xx} = \psi^2/D^2`,
    :math:`S_{xd} = \omega/D^2`, :math:`S_{dd} = x(\omega' D + x\omega^2)/D^2`, with
    :math:`\omega = (\psi - e^{-d})/d`. Every factor is a sum of same-sign terms, so the
    derivatives keep relative accuracy for near-identical pairs; one ``exp`` per call.
    Tested equal to autodiff of :func:`log_bc`.
    """
    return _derivs(consts, a, _shift_terms(consts, a), _inv_den(consts, a))[:2]


def _inv_den(consts, a):
    """:math:`1/(1 + aK)`, formed as ``1/((1 - a) + a e^rho)`` (see mixture_gap_da)."""
    return sp.quotient(1.0, (1.0 - a) + a * consts[0].w)


def _derivs(consts, a, terms, inv_den):
    sc = consts[0]
    x, xp, dp, psi, omp, om, omd = terms[:7]
    kd = sc.k * inv_den  # K/(1 + aK)
    g1 = sp.mixture_gap_da(a, sc.rho, sc.k, sc.phr, sc.w, inv_den)
    g2 = -jnp.square(kd)
    big_d = 1.0 + x * psi
    inv = 1.0 / big_d
    s_x = (omp + x * psi) * inv
    s_d = x * om * inv
    s_xx = jnp.square(psi * inv)
    s_xd = om * inv * inv
    s_dd = x * (omd * big_d + x * om * om) * inv * inv
    s1 = s_x * xp + s_d * dp
    s2 = s_xx * xp * xp + 2.0 * s_xd * xp * dp + s_dd * dp * dp
    return -g1 - s1, -g2 - s2, inv, kd


def value_derivs(consts, a):
    r"""``log C_a`` (for ``a`` in [0, 1]) and its first three derivatives from the same
    transcendentals: :math:`S = x(1 - \psi(d)) - [\log(1 + x\psi) - x\psi]`, two
    non-negative terms; the third derivative (for the solver's Halley steps) is
    :math:`-g^{(3)} + D^{(3)}/D - 3D''D'/D^2 + 2D'^3/D^3` along the line :math:`(x(a), d(a))`,
    with :math:`D = 1 + x\psi`, :math:`g^{(3)} = 2K^3/(1 + aK)^3`."""
    terms = _shift_terms(consts, a)
    d1, d2, inv, kd = _derivs(consts, a, terms, _inv_den(consts, a))
    x, xp, dp, psi, omp, om, omd, omdd = terms
    shift = x * omp - sp.log1pmx(x * psi)
    value = -sp.mixture_gap_pre(a, consts[0]) - shift
    e1 = (psi * xp - x * om * dp) * inv  # D'/D
    e2 = -(2.0 * om * xp + x * omd * dp) * dp * inv  # D''/D
    e3 = -(3.0 * omd * xp + x * omdd * dp) * dp * dp * inv  # D^(3)/D
    d3 = -2.0 * kd * kd * kd + e3 - 3.0 * e2 * e1 + 2.0 * e1 * e1 * e1
    (value,) = sp.stored(a, value)  # computed once (see sp.stored)
    return value, d1, d2, d3

r"""Gaussian pair :math:`P = \mathcal N(\mu_1, \sigma_1^2)`, :math:`Q = \mathcal N(\mu_2,
\sigma_2^2)`.

.. math::

   \log C_a = -\tfrac12\, g(a, \rho) - \frac{a(1-a)\Delta^2}{2\sigma_a^2},\qquad
   \rho = \log\frac{\sigma_2^2}{\sigma_1^2},\; \sigma_a^2 = a\sigma_2^2 + (1-a)\sigma_1^2,

with :math:`g(a,\rho) = \log(1 - a + a e^\rho) - a\rho \ge 0` (see
:func:`jaxdp._special.mixture_gap`): two non-positive terms, so the result keeps relative
accuracy for near-identical pairs. Equal variances: :math:`C = \Delta^2/(8\sigma^2)` at
:math:`a^* = 1/2`.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np

from jaxdp import _special as sp

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


#: Both distributions have full support, so the Chernoff optimum is interior.
SAME_SUPPORT = True


def log_bc(P, Q, a):
    s1, s2 = P.scale, Q.scale
    delta = Q.loc - P.loc
    rho = 2.0 * sp.log_ratio(s2, s1)
    # in units of the larger scale: s^2 and delta^2 overflow for scale ratios ~1e154+
    m = jnp.maximum(s1, s2)
    r1, r2, dn = sp.quotient(s1, m), sp.quotient(s2, m), sp.quotient(delta, m)
    var_a = a * r2 * r2 + (1.0 - a) * r1 * r1
    # above 1 as r2^2 + (a - 1)(r2 - r1)(r2 + r1): the sum above cancelled to 0 for equal
    # scales once 1 - a rounded to -a (orders from 2^53, float32 2^24: inf for identical
    # pairs); r2 - r1 as (s2 - s1)/m, exact but for one rounding (the difference of the
    # rounded ratios lost ~eps/|r2 - r1| relative: float32 scales 1 and 1.001, 1.4e-5)
    dr = sp.quotient(s2 - s1, m)
    var_a = jnp.where(a <= 1, var_a, r2 * r2 + (a - 1.0) * (dr * (r2 + r1)))
    # only an issue for a > 1; NaN propagates. var_a underflows to 0 at a = 0 (1) for scale
    # ratios ~1e154+ (~1e-154-), ~1e19 in float32, where the numerator below is 0: finite
    converges = ~(var_a <= 0) | (a <= 1)
    safe_var = jnp.where(var_a > 0, var_a, 1.0)
    gap = sp.mixture_gap(jnp.where(converges, a, 0.5), rho)
    # (a quotient: JAX's rule for x / y forms x / y^2, which overflows where var_a(a) is
    # below ~1e-154, scale ratios ~1e77+ at a = 0 or 1, and 0 * inf made d/da there nan)
    # ((a dn)((1 - a) dn): a (1 - a) overflows for orders beyond ~1e154, and inf * 0 was nan
    # for identical pairs)
    num = (a * dn) * ((1.0 - a) * dn)
    # Rényi orders beyond ~1e154 (float32 ~1e19) with a shift: a (1 - a) dn^2 overflows
    # where its quotient by var_a ~ a (r2^2 - r1^2) does not (inf for a finite log C); there
    # a dn is divided first (the overflowed product kept out of the quotient: inf * 0 = nan
    # in its derivative)
    over = jnp.isinf(num)
    shift = jnp.where(
        over,
        sp.quotient(a * dn, 2.0 * safe_var) * ((1.0 - a) * dn),
        sp.quotient(jnp.where(over, 0.0, num), 2.0 * safe_var),
    )
    value = -0.5 * gap - shift
    return jnp.where(converges, value, jnp.inf)


def kl(P, Q):
    r""":math:`D(P\|Q) = \tfrac12\varphi(-\rho) + \Delta^2/(2\sigma_2^2)`."""
    s1, s2 = P.scale, Q.scale
    delta = Q.loc - P.loc
    # also where s2/s1 leaves the float range (log_ratio overflowed: KL inf for a narrow P,
    # nan for a wide one), with the derivatives of log s2 - log s1 (log_ratio's forward-mode
    # tangent formed s2/s1^2: d/ds1 nan for s1 = 1e-300 against s2 = 1e-100)
    rho = 2.0 * sp.log_ratio_apart(s2, s1)
    dn = sp.quotient(delta, s2)  # not delta^2/s2^2: s2^2 under/overflows for ratios ~1e154+
    # a wider P (rho < -1.5, s1/s2 > ~2.1): phi(-rho) = r^2 - 1 + rho, r = s1/s2, with r^2
    # from r; phi's e^-rho from the rounded rho was ~|rho| ulp off (float32 ratio 1e4: 20
    # ulp, 2e-6; float64 1e29: 1.4e-14). Closer to 1 the r^2 form cancels more than phi
    # (float32 ratio 1.3: 18 ulp). (r/2) r: r^2 overflows from ratios ~1.8e19 (float32)
    # where the divergence does not; phi's argument masked: its expm1 overflowed there, and
    # the unselected inf made the derivative nan
    wide = rho < -1.5
    r = sp.quotient(s1, s2)
    scale_term = jnp.where(
        wide, (0.5 * r) * r + 0.5 * (rho - 1.0), 0.5 * sp.phi(jnp.where(wide, 0.0, -rho))
    )
    return scale_term + 0.5 * dn * dn


def ndtr_diff(y, z, w):
    r""":math:`\Phi(y) - \Phi(z)` given ``w = y - z`` computed stably by the caller.

    Close arguments use 16-point Gauss-Legendre on :math:`\int_z^y \phi`, exact to rounding
    because the interval is short relative to :math:`1/\max(1,|y|,|z|)`; otherwise the
    difference of the appropriate tails, which then do not cancel.
    """
    close = jnp.abs(w) <= 0.5 / jnp.maximum(1.0, jnp.maximum(jnp.abs(y), jnp.abs(z)))
    wc = jnp.where(close, w, 0.0)
    nodes = jnp.asarray(_GL_NODES, dtype=wc.dtype)
    weights = jnp.asarray(_GL_WEIGHTS, dtype=wc.dtype)
    t = z[..., None] + wc[..., None] * (1.0 + nodes) / 2.0
    dens = jnp.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    quad = wc / 2.0 * jnp.sum(weights * dens, axis=-1)
    r2 = 1.0 / math.sqrt(2.0)
    upper = 0.5 * (jss.erfc(z * r2) - jss.erfc(y * r2))
    lower = 0.5 * (jss.erfc(-y * r2) - jss.erfc(-z * r2))
    far = jnp.where((y >= 0) & (z >= 0), upper, lower)
    return jnp.where(close, quad, far)


def tv(P, Q):
    r"""Total variation via the (at most two) roots of the quadratic :math:`\log p/q`:
    :math:`\mathrm{TV} = \sum_{\text{roots}} |\Phi(y) - \Phi(z)|` in standardised coordinates.

    TV is symmetric, so the roots are solved in the coordinates of the narrower of the two
    (``y``): ``z = r y - dn`` then has ``r <= 1``. The other way round, ``z`` came from
    ``r y`` with ``r`` up to ~1e6, which cancelled to a visible error in float32."""
    swap = Q.scale < P.scale
    s1 = jnp.where(swap, Q.scale, P.scale)
    s2 = jnp.where(swap, P.scale, Q.scale)
    delta = jnp.where(swap, P.loc - Q.loc, Q.loc - P.loc)
    # Centres more than 40 (s1 + s2) apart: TV is 1 to rounding (the overlap is below
    # e^-800), and the squares below overflow once |delta|/s2 > ~1e154. The roots are then
    # computed for delta = s2 instead (an ordinary pair; finite and unused, which keeps the
    # gradient finite too: delta = 0 with equal scales would be a double root).
    far = ~(jnp.abs(delta) <= 40.0 * (s1 + s2)) & ~jnp.isnan(delta)
    delta = jnp.where(far, s2, delta)
    # quotients whose derivatives do not square s2 (sp.quotient): sigma ~1e154+ gave nan
    r = sp.quotient(s1, s2)
    dn = sp.quotient(delta, s2)
    log_r = sp.log_ratio(s1, s2)
    # r^2 - 1, without s2^2, which overflows for scale ratios ~1e154+ (inf/inf)
    a = sp.quotient(s1 - s2, s2) * sp.quotient(s1 + s2, s2)
    c = dn * dn - 2.0 * log_r
    # (r^2 - 1) y^2 - 2 r dn y + c = 0, y = (x - mu1)/s1
    # sqrt(dn^2 + 2 a log r) as a hypot (2 a log r >= 0): dn^2 underflows for shifts below
    # ~1e-154 scales (sigma ~1e154+ in the Gaussian mechanism), and the root of the zero then
    # made the derivative nan; sqrt_weight: the second term vanishes at equal scales
    sgn = jnp.where(dn >= 0, 1.0, -1.0)
    qq = r * dn + sgn * sp.hypot(dn, sp.sqrt_weight(jnp.maximum(2.0 * a * log_r, 0.0)))
    ok_q = qq != 0
    y2 = sp.quotient(c, jnp.where(ok_q, qq, 1.0))
    ok_a = a != 0
    y1 = sp.quotient(qq, jnp.where(ok_a, a, 1.0))
    # the two roots stacked on a leading axis: one copy of ndtr_diff's code to compile (and
    # differentiate) instead of two
    shape = jnp.broadcast_shapes(s1.shape, s2.shape, delta.shape)
    ok = jnp.stack([jnp.broadcast_to(ok_a & ok_q, shape), jnp.broadcast_to(ok_q, shape)])
    ys = jnp.where(ok, jnp.stack([jnp.broadcast_to(y1, shape), jnp.broadcast_to(y2, shape)]), 0.0)
    z = r * ys - dn
    w = ys * sp.quotient(s2 - s1, s2) + dn  # y - z
    total = jnp.sum(jnp.where(ok, jnp.abs(ndtr_diff(ys, z, w)), 0.0), axis=0)
    return jnp.where(far, 1.0, total)


def swap_mask(P, Q):
    r"""Pairs the solver takes as :math:`(Q, P)`: those whose
    :math:`e^\rho = \sigma_2^2/\sigma_1^2` would overflow
    (:func:`jaxdp._special.exp_rho_overflows`)."""
    return sp.exp_rho_overflows(Q.scale, P.scale, power=2)


def derivs_setup(P, Q):
    r"""Per-pair constants for :func:`derivs` (hoisted out of the Newton loop): the scale
    constants of :math:`\rho = \log(\sigma_2^2/\sigma_1^2)`
    (:class:`~jaxdp._special.ScaleConsts`), :math:`c = \Delta^2/(2\sigma_1^2)` and
    :math:`r = \sigma_2/\sigma_1`."""
    s1, s2 = P.scale, Q.scale
    delta = Q.loc - P.loc
    # c from delta/s1: s1^2 underflows (flushed) for scales below ~1.5e-154 (float32
    # ~1e-19), which made c, and the information, inf (a Gaussian-mechanism budget of 1e307)
    dn = sp.quotient(delta, s1)
    return sp.scale_consts(s2, s1, power=2), 0.5 * dn * dn, s2 / s1


def initial_alpha(consts):
    r"""The maximiser in closed form: a root of a quadratic.

    Multiplying :math:`\partial_a \log C_a = 0` (see :func:`derivs`) by :math:`(1 + aK)^2`
    gives :math:`A a^2 + B a + C_0 = 0` with :math:`A = K(\rho K/2 + c)`,
    :math:`B = 2c + K^2/2 - K\varphi(\rho)`, :math:`C_0 = -\varphi(\rho)/2 - c`. The
    polynomial is :math:`(1 + aK)^2` times the derivative, negative at 0 and positive at 1,
    so exactly one root lies in :math:`(0, 1)`; both roots come from the cancellation-free
    pair :math:`q/A`, :math:`C_0/q`. When :math:`\sigma_2 \ll \sigma_1` the two roots
    nearly coincide and the formula loses digits, which the solver's Newton polish restores.
    """
    sc, c, _ = consts
    # in units of m = a power of two >= max(1, K, c): A, B ~ K^2 and B^2 ~ K^4 overflow from
    # scale ratios ~1e38 on (and c K from shifts ~sigma_2 at ratios ~1e100); exact scaling
    s = sp.inverse_power_of_two(jnp.maximum(jnp.maximum(sc.k, c), 1.0))
    rho, k, phr, c = sc.rho, sc.k * s, sc.phr * s, c * s
    qa = k * (0.5 * rho * k + c)
    qb = 2.0 * c * s + k * (0.5 * k - phr)
    qc = (-0.5 * phr - c) * s
    disc = jnp.maximum(qb * qb - 4.0 * qa * qc, 0.0)
    q = -0.5 * (qb + jnp.where(qb < 0, -1.0, 1.0) * jnp.sqrt(disc))
    r_small = qc / q  # the root q/A runs off to infinity as A -> 0
    r_big = q / qa
    return jnp.where((r_small >= 0) & (r_small <= 1), r_small, r_big)


def derivs(consts, a):
    r"""First and second :math:`\alpha`-derivatives of :math:`\log C_\alpha`, hand-written.

    :math:`\log C = -g/2 - c\,a(1-a)/D` with :math:`c = \Delta^2/(2\sigma_1^2)`,
    :math:`D = 1 + aK = (1 - a) + a r^2`, :math:`r = \sigma_2/\sigma_1`; rational in
    :math:`a` (no transcendental per Newton step): :math:`T' = c(1 - a - ar)(1 - a + ar)/D^2`,
    :math:`T'' = -2cr^2/D^3`. Every factor is a sum of same-sign terms or a product of such.
    """
    return _derivs(consts, a, sp.quotient(1.0, (1.0 - a) + a * consts[0].w))


def _derivs(consts, a, inv):
    sc, c, r = consts
    g1 = sp.mixture_gap_da(a, sc.rho, sc.k, sc.phr, sc.w, inv)
    g2 = -jnp.square(sc.k * inv)
    # c * inv first: c ~ Delta^2 and r^2 ~ 1e200 (scale ratios ~1e100 with shifts ~sigma_2)
    # overflow in c * r^2 while every factor formed with inv is ordinary
    ci = c * inv
    t1 = ci * (sp.quadratic_factor(a, r) * inv)
    t2 = -2.0 * ci * (sc.w * inv) * inv
    return -0.5 * g1 - t1, -0.5 * g2 - t2


def value_derivs(consts, a):
    """``log C_a`` and its first two derivatives in ``a`` from the same constants (the
    value stored once, see :func:`jaxdp._special.stored`: the solver reads it from several
    outputs; inside its loop, where only the derivatives are used, XLA drops it)."""
    sc, c, _ = consts
    inv = 1.0 / ((1.0 - a) + a * sc.w)
    d1, d2 = _derivs(consts, a, inv)
    value = -0.5 * sp.mixture_gap_pre(a, sc) - c * a * (1.0 - a) * inv
    return sp.stored(a, value)[0], d1, d2

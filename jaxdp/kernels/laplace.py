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

from jaxdp import _special as sp


def log_bc(P, Q, a):
    b1, b2 = P.scale, Q.scale
    delta = jnp.abs(Q.loc - P.loc)
    rho = sp.log_ratio(b2, b1)
    l1 = a / b1 * delta
    l2 = (1.0 - a) / b2 * delta
    x = jnp.minimum(l1, l2)
    d = jnp.abs(a * b2 - (1.0 - a) * b1) / (b1 * b2) * delta
    p = sp.psi(d)
    omp = sp.one_minus_psi(d)
    # a in [0, 1]: x >= 0, both terms non-negative.
    xp = jnp.maximum(x, 0.0)
    shift_pos = -sp.log1pmx(xp) + jnp.log1p(xp * omp / (1.0 + xp * p))
    # a > 1 (Rényi orders above 1): x < 0 and |x| psi(d) < 1/2 where the integral converges.
    xn = jnp.minimum(x, 0.0)
    xpn = jnp.maximum(xn * p, -0.5)
    shift_neg = xn * omp - sp.log1pmx(xpn)
    shift = jnp.where(x >= 0, shift_pos, shift_neg)
    # Convergence (only an issue for a > 1): a/b1 + (1-a)/b2 > 0.
    converges = a * b2 + (1.0 - a) * b1 > 0
    gap = sp.mixture_gap(jnp.where(converges, a, 0.5), rho)
    return jnp.where(converges, -gap - shift, jnp.inf)


def kl(P, Q):
    r""":math:`D(P\|Q) = \varphi(-\rho) + \frac{b_1}{b_2}\varphi(-\Delta/b_1)`, :math:`\varphi(x) =
    e^x - 1 - x` (eq. (34) in this notation, both terms non-negative)."""
    b1, b2 = P.scale, Q.scale
    delta = jnp.abs(Q.loc - P.loc)
    rho = sp.log_ratio(b2, b1)
    return sp.phi(-rho) + b1 / b2 * sp.phi(-delta / b1)


def _cdf_diff(x, m1, b1, m2, b2):
    """F_P(x) - F_Q(x) without cancellation (Laplace CDFs)."""
    below = (x <= m1) & (x <= m2)
    above = (x >= m1) & (x >= m2)
    # both tails below: (e^{-u1} - e^{-u2})/2, u_i = (m_i - x)/b_i
    u2 = (m2 - x) / b2
    du = ((m2 - m1) * b1 + (m1 - x) * (b1 - b2)) / (b1 * b2)  # u2 - u1
    d_below = 0.5 * jnp.exp(-u2) * jnp.expm1(jnp.where(below, du, 0.0))
    # both tails above: (e^{-v2} - e^{-v1})/2, v_i = (x - m_i)/b_i
    v1 = (x - m1) / b1
    dv = ((x - m1) * (b2 - b1) + (m2 - m1) * b1) / (b1 * b2)  # v1 - v2
    d_above = 0.5 * jnp.exp(-v1) * jnp.expm1(jnp.where(above, dv, 0.0))
    # between: sign * (1 - (e^{-|x-m1|/b1} + e^{-|x-m2|/b2})/2)
    mid = -0.5 * (jnp.expm1(-jnp.abs(x - m1) / b1) + jnp.expm1(-jnp.abs(x - m2) / b2))
    d_mid = jnp.where(m1 <= m2, mid, -mid)
    return jnp.where(below, d_below, jnp.where(above, d_above, d_mid))


def tv(P, Q):
    r"""Total variation: the sum of :math:`|F_P - F_Q|` at the (at most two) crossings of
    :math:`\log p/q`, which is piecewise linear; each term is computed without cancellation."""
    m1, b1, m2, b2 = P.loc, P.scale, Q.loc, Q.scale
    rho = sp.log_ratio(b2, b1)
    lo, hi = jnp.minimum(m1, m2), jnp.maximum(m1, m2)
    total = jnp.zeros(jnp.broadcast_shapes(m1.shape, b1.shape, m2.shape, b2.shape), m1.dtype)
    # log p/q = rho - s1 (x - m1)/b1 + s2 (x - m2)/b2 on each piece (s_i = sign(x - m_i)).
    for s1, s2, left, right in (
        (-1.0, -1.0, -jnp.inf, lo),
        (jnp.where(m1 <= m2, 1.0, -1.0), jnp.where(m1 <= m2, -1.0, 1.0), lo, hi),
        (1.0, 1.0, hi, jnp.inf),
    ):
        slope = -s1 / b1 + s2 / b2
        ok = slope != 0
        safe = jnp.where(ok, slope, 1.0)
        root = -(rho + s1 * m1 / b1 - s2 * m2 / b2) / safe
        valid = ok & (root > left) & (root <= right) & jnp.isfinite(root)
        r = jnp.where(valid, root, lo)
        total = total + jnp.where(valid, jnp.abs(_cdf_diff(r, m1, b1, m2, b2)), 0.0)
    return total

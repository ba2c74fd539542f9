r"""Discrete Laplace pair on the integers (the geometric mechanism).

:math:`P(k) = \tanh(\kappa_1) e^{-|k-\mu_1|/b_1}`, :math:`\kappa_i = 1/(2b_i)`, integer
locations, :math:`\Delta = |\mu_2 - \mu_1|`. Summing the geometric pieces,

.. math::

   \log C_a = \underbrace{a\,B(\kappa_1,\kappa_a) + (1-a)\,B(\kappa_2,\kappa_a)}_{\text{scale
   mismatch}\ \le 0} - \Big[\lambda\Delta - \log(1 + K)\Big],

with :math:`\kappa_a = a\kappa_1 + (1-a)\kappa_2`, :math:`B` the Bregman gap of
:math:`\log\tanh`, :math:`\lambda = \min(a/b_1, (1-a)/b_2)`, :math:`\delta = |a/b_1 -
(1-a)/b_2|` and :math:`K = \Delta\,\psi(\delta\Delta)\,(1 - e^{-2\lambda}) e^{-\delta} /
(\psi(\delta)(1 + e^{-2\kappa_a}))`. The bracket is evaluated as a sum of non-negative
terms (:math:`K - \log(1+K)`, :math:`\lambda - \tanh\lambda`, ...), so the geometric
mechanism with tiny :math:`\varepsilon` (information ~:math:`\varepsilon^2`) keeps relative
accuracy. For :math:`a > 1` (Rényi orders above 1) the direct log-sum form is used.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.special import logsumexp

from jaxdp import _fastmath as fm
from jaxdp import _special as sp

#: Both distributions have full support, so the Chernoff optimum is interior.
SAME_SUPPORT = True


def _stable(b1, b2, delta, a):
    k1, k2 = 0.5 / b1, 0.5 / b2
    ka = k1 + (1.0 - a) * (k2 - k1)
    base = a * sp.logtanh_bregman(k1, ka) + (1.0 - a) * sp.logtanh_bregman(k2, ka)
    # min/abs with one branch choice: consistent parameter-derivatives at the tie
    left = a / b1 <= (1.0 - a) / b2
    lam = jnp.where(left, a / b1, (1.0 - a) / b2)
    diff = ((1.0 - a) * b1 - a * b2) / (b1 * b2)
    dl = jnp.where(left, diff, -diff)
    e2l = -jnp.expm1(-2.0 * lam)  # 1 - e^{-2 lambda}
    psi_d = sp.psi(dl)
    g = e2l * jnp.exp(-dl) / (psi_d * (1.0 + jnp.exp(-2.0 * ka)))
    small = dl < 3.0
    ds = jnp.where(small, dl, 0.0)
    exprel = sp.psi(-ds)  # (e^d - 1)/d
    dd = (1.0 + jnp.exp(-2.0 * lam - ds)) * exprel
    tanh_minus_g_series = (
        e2l
        * (2.0 * sp.sinhc_m1(ds) + e2l * sp.one_minus_psi(ds))
        / ((1.0 + jnp.exp(-2.0 * lam)) * dd)
    )
    tanh_minus_g = jnp.where(small, tanh_minus_g_series, jnp.tanh(lam) - g)
    lam_minus_g = sp.x_minus_tanh(lam) + tanh_minus_g
    psi_dd = sp.psi(dl * delta)
    big_k = delta * psi_dd * g
    shift = -sp.log1pmx(big_k) + delta * (lam * sp.one_minus_psi(dl * delta) + psi_dd * lam_minus_g)
    return base - shift


def _direct(b1, b2, delta, a):
    l1, l2 = a / b1, (1.0 - a) / b2
    s = 0.5 * (l1 + l2)
    converges = ~(s <= 0)
    ss = jnp.where(converges, s, 1.0)
    left = l1 <= l2
    lo = jnp.where(left, l1, l2)
    dl = jnp.where(left, l2 - l1, l1 - l2)
    log_tail = -fm.log(jnp.expm1(2.0 * ss))
    terms = jnp.stack(
        [
            -l2 * delta + log_tail,
            -l1 * delta + log_tail,
            -lo * delta + fm.log1p(delta) + fm.log(sp.psi(dl * (delta + 1.0))) - fm.log(sp.psi(dl)),
        ],
        -1,
    )
    value = a * sp.logtanh(0.5 / b1) + (1.0 - a) * sp.logtanh(0.5 / b2) + logsumexp(terms, axis=-1)
    return jnp.where(converges, value, jnp.inf)


def log_bc(P, Q, a):
    b1, b2 = P.scale, Q.scale
    delta = jnp.abs(Q.loc - P.loc)
    inside = a <= 1.0
    stable = _stable(b1, b2, delta, jnp.where(inside, a, 0.5))
    direct = _direct(b1, b2, delta, jnp.where(inside, 2.0, a))
    return jnp.where(inside, stable, direct)


def kl(P, Q):
    r""":math:`D(P\|Q) = -B(\kappa_2, \kappa_1) + \varepsilon_2\big[\Delta - (1 -
    e^{-\varepsilon_1\Delta})/\sinh\varepsilon_1\big]`, :math:`\varepsilon_i = 1/b_i`, both
    terms non-negative."""
    b1, b2 = P.scale, Q.scale
    delta = jnp.abs(Q.loc - P.loc)
    e1, e2 = 1.0 / b1, 1.0 / b2
    kl0 = -sp.logtanh_bregman(0.5 * e2, 0.5 * e1)
    small = e1 < 1.0
    es = jnp.where(small, e1, 0.5)
    series = delta * (sp.sinhc_m1(es) + sp.one_minus_psi(es * delta)) / (1.0 + sp.sinhc_m1(es))
    el = jnp.where(small, 2.0, e1)
    direct = delta - (-jnp.expm1(-el * delta)) * 2.0 * jnp.exp(-el) / (-jnp.expm1(-2.0 * el))
    return kl0 + e2 * jnp.where(small, series, direct)


def _cdf_diff(k, m1, b1, m2, b2):
    """F_P(k) - F_Q(k) at integer k, without cancellation where it matters."""
    q1, q2 = jnp.exp(-1.0 / b1), jnp.exp(-1.0 / b2)
    l1q, l2q = fm.log1p(q1), fm.log1p(q2)
    below = (k < m1) & (k < m2)
    above = (k >= m1) & (k >= m2)
    # below both: A_i = e^{-(m_i - k)/b_i} / (1 + q_i)
    # differences of logs formed term by term (the log1p(q) parts cancel exactly for equal
    # scales; subtracting the full logs would lose ~1e-7 relative at epsilon = 1e-9)
    dlq = l1q - l2q
    log_a2 = -(m2 - k) / b2 - l2q
    da = -(m1 - k) / b1 + (m2 - k) / b2 - dlq  # log A1 - log A2
    d_below = jnp.exp(log_a2) * jnp.expm1(jnp.where(below, da, 0.0))
    # above both: B_i = e^{-(k - m_i + 1)/b_i} / (1 + q_i); D = B2 - B1
    log_b1 = -(k - m1 + 1.0) / b1 - l1q
    db = -(k - m2 + 1.0) / b2 + (k - m1 + 1.0) / b1 + dlq  # log B2 - log B1
    d_above = jnp.exp(log_b1) * jnp.expm1(jnp.where(above, db, 0.0))

    def one_minus_2(u, b, q):
        # 1 - 2 e^{-u}/(1+q) for u >= 1/b, as two non-negative terms
        return (-jnp.expm1(-u) - q * jnp.expm1(-(u - 1.0 / b))) / (1.0 + q)

    # m1 <= k < m2: (1 - B1) - A2
    mid12 = 0.5 * (
        one_minus_2(jnp.maximum(k - m1 + 1.0, 1.0) / b1, b1, q1)
        + one_minus_2(jnp.maximum(m2 - k, 1.0) / b2, b2, q2)
    )
    # m2 <= k < m1: A1 - (1 - B2)
    mid21 = -0.5 * (
        one_minus_2(jnp.maximum(k - m2 + 1.0, 1.0) / b2, b2, q2)
        + one_minus_2(jnp.maximum(m1 - k, 1.0) / b1, b1, q1)
    )
    d_mid = jnp.where(m1 <= m2, mid12, mid21)
    return jnp.where(below, d_below, jnp.where(above, d_above, d_mid))


def tv(P, Q):
    r"""Total variation :math:`\max_k D(k) - \min_k D(k)`, :math:`D = F_P - F_Q`, with the
    extrema searched at the integers next to the real crossings of the (piecewise linear)
    :math:`\log p/q`."""
    m1, b1, m2, b2 = P.loc, P.scale, Q.loc, Q.scale
    c = sp.logtanh(0.5 / b1) - sp.logtanh(0.5 / b2)
    lo, hi = jnp.minimum(m1, m2), jnp.maximum(m1, m2)
    shape = jnp.broadcast_shapes(m1.shape, b1.shape, m2.shape, b2.shape)
    dmax = jnp.zeros(shape, m1.dtype)
    dmin = jnp.zeros(shape, m1.dtype)
    for s1, s2, left, right in (
        (-1.0, -1.0, -jnp.inf, lo),
        (jnp.where(m1 <= m2, 1.0, -1.0), jnp.where(m1 <= m2, -1.0, 1.0), lo, hi),
        (1.0, 1.0, hi, jnp.inf),
    ):
        slope = -s1 / b1 + s2 / b2
        ok = slope != 0
        root = -(c + s1 * m1 / b1 - s2 * m2 / b2) / jnp.where(ok, slope, 1.0)
        valid = ok & (root >= left - 1.0) & (root <= right + 1.0) & jnp.isfinite(root)
        base = jnp.floor(jnp.where(valid, root, lo))
        for off in (-1.0, 0.0, 1.0):
            dk = _cdf_diff(base + off, m1, b1, m2, b2)
            dmax = jnp.where(valid, jnp.maximum(dmax, dk), dmax)
            dmin = jnp.where(valid, jnp.minimum(dmin, dk), dmin)
    # The crossings of two lattices can also sit at the locations themselves.
    for k in (m1, m2):
        for off in (-1.0, 0.0, 1.0):
            dk = _cdf_diff(k + off, m1, b1, m2, b2)
            dmax = jnp.maximum(dmax, dk)
            dmin = jnp.minimum(dmin, dk)
    return dmax - dmin


def derivs_setup(P, Q):
    return P.scale, Q.scale, jnp.abs(Q.loc - P.loc)


def derivs(consts, a):
    """Derivatives for the solver: the first (which locates the root, so it must keep
    relative accuracy for near-identical pairs) by forward-mode autodiff of the stable form,
    the second (which only scales the Newton step) of the compact log-sum form, which is
    much cheaper to compile twice over."""
    import jax

    b1, b2, delta = consts
    ones = jnp.ones_like(a)
    d1 = jax.jvp(lambda s: _stable(b1, b2, delta, s), (a,), (ones,))[1]

    def first(t):
        return jax.jvp(lambda s: _direct(b1, b2, delta, s), (t,), (ones,))[1]

    d2 = jax.jvp(first, (a,), (ones,))[1]
    return d1, d2


def initial_alpha(consts):
    r"""The continuous Laplace pair's pure-scale optimum :math:`1/\rho - 1/(e^\rho - 1)`,
    :math:`\rho = \log(b_2/b_1)`, as the solver's starting point (the discrete pair tends
    to it for large scales; elsewhere Newton's method takes it from there)."""
    b1, b2, _ = consts
    return sp.pure_scale_alpha(sp.log_ratio(b2, b1), (b2 - b1) / b1)

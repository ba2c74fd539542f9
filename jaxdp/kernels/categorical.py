r"""Categorical pair (finite support, last axis).

.. math:: \log C_a = \log\sum_k p_k^a q_k^{1-a}

is a ``logsumexp``. For nearly identical pairs it is instead evaluated through the exact
identity

.. math:: C_a - 1 = -\sum_k w_k\, G(a_k, \ell_k),\qquad
          G(a, \ell) = a e^{\ell} + 1 - a - e^{a\ell} \ge 0,

(``w = q``, ``l = log p/q`` where ``p <= q``; ``w = p``, ``l = log q/p``, ``a -> 1 - a``
elsewhere), a sum of non-negative weighted AM-GM deficits, so a Chernoff information of
1e-20 comes out with small relative error. Zero-mass categories follow the one-sided limits
(:math:`C_0 = Q(\mathrm{supp}\,P)`, :math:`C_1 = P(\mathrm{supp}\,Q)`).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.special import logsumexp

from jaxdp import _fastmath as fm
from jaxdp import _special as sp


def deficit_sum(a, lp, lq, *, weights=None, axis=-1):
    """Sum of weighted AM-GM deficits (see module doc); ``weights`` multiplies each term."""
    l = lp - lq
    pos = l > 0
    both = jnp.isfinite(lp) & jnp.isfinite(lq)
    l_safe = jnp.where(both, l, jnp.where(jnp.isfinite(lp), jnp.inf, -jnp.inf))
    l_neg = jnp.where(pos, -l_safe, l_safe)  # <= 0 (or -inf)
    a_eff = jnp.where(pos, 1.0 - a, a)
    b_eff = jnp.where(pos, a, 1.0 - a)
    w = jnp.exp(jnp.where(pos, lp, lq))
    term = w * sp.amgm_gap(a_eff, l_neg, b_eff)
    if weights is not None:
        term = term * weights
    return jnp.sum(term, axis=axis)


def combine(a, direct, deficit):
    """Pick the accurate form: ``log1p(-deficit)`` when ``C_a`` is near 1, else ``direct``."""
    near_one = jnp.abs(deficit) < 0.5
    return jnp.where(near_one, fm.log1p(-jnp.where(near_one, deficit, 0.0)), direct)


def exponent(a, lp, lq):
    """``a lp + (1-a) lq`` with 0 * (-inf) read as the one-sided limit (-inf).

    For ``a > 1`` (Rényi orders above 1) a point with ``p > 0 = q`` contributes
    ``p^a q^(1-a) = +inf``.
    """
    zero = (lp == -jnp.inf) | (lq == -jnp.inf)
    lps = jnp.where(zero, 0.0, lp)
    lqs = jnp.where(zero, 0.0, lq)
    blow_up = (a > 1) & (lq == -jnp.inf) & (lp > -jnp.inf)
    return jnp.where(zero, jnp.where(blow_up, jnp.inf, -jnp.inf), a * lps + (1.0 - a) * lqs)


def log_bc(P, Q, a):
    lp, lq = P.log_probs, Q.log_probs
    a_ = jnp.asarray(a)[..., None]
    direct = logsumexp(exponent(a_, lp, lq), axis=-1)
    deficit = _deficit_any_order(a_, lp, lq)
    return combine(a, direct, deficit)


def _deficit_any_order(a_, lp, lq, weights=None):
    """Deficit sum for a in [0, 1]; for a > 1 only where every |log p/q| <= 1 (near-identical
    pairs; elsewhere the direct form is accurate and the deficit is set to +inf)."""
    inside = (a_ >= 0) & (a_ <= 1)
    both = jnp.isfinite(lp) & jnp.isfinite(lq)
    l = jnp.where(both, lp - lq, jnp.inf)
    mild = jnp.all((jnp.abs(l) <= 1.0) | ((lp == -jnp.inf) & (lq == -jnp.inf)), axis=-1)
    deficit = deficit_sum(jnp.where(inside | mild[..., None], a_, 0.5), lp, lq, weights=weights)
    return jnp.where(inside[..., 0] | mild, deficit, jnp.inf)


def kl(P, Q):
    r""":math:`\sum_k p_k \varphi(-\ell_k)`, :math:`\ell = \log p/q` (equal to
    :math:`\sum p\log(p/q)` because both sum to 1; non-negative terms)."""
    return jnp.sum(kl_terms(P.log_probs, Q.log_probs), axis=-1)


def kl_terms(lp, lq, *, normalized=True):
    """Per-point KL terms: ``p phi(-l) = q - p + p l`` (non-negative; their sum is the KL when
    both masses sum to 1 over the points), else plain ``p l`` (``normalized=False``)."""
    p, q = jnp.exp(lp), jnp.exp(lq)
    has_p = lp > -jnp.inf
    has_q = lq > -jnp.inf
    l = jnp.where(has_p & has_q, lp - lq, 0.0)
    if not normalized:
        return jnp.where(has_p, jnp.where(has_q, p * l, jnp.inf), 0.0)
    small = jnp.abs(l) <= 1.0
    term = jnp.where(small, p * sp.phi(-jnp.where(small, l, 0.0)), q - p + p * l)
    # p = 0 < q: the term q - p + p*l of the identity reduces to q
    return jnp.where(has_p, jnp.where(has_q, term, jnp.inf), q)


def tv(P, Q):
    r""":math:`\tfrac12\sum_k |p_k - q_k|`, with :math:`p - q = q\,\mathrm{expm1}(\ell)`."""
    return 0.5 * jnp.sum(abs_diff(P.log_probs, Q.log_probs), axis=-1)


def abs_diff(lp, lq):
    """``|p - q|`` from log-probabilities: ``min(p, q) expm1(|l|)`` where ``p ~ q`` (no
    cancellation), else the plain difference (no overflow of ``expm1``)."""
    both = jnp.isfinite(lp) & jnp.isfinite(lq)
    absl = jnp.abs(jnp.where(both, lp - lq, 0.0))
    small = absl <= 1.0
    return jnp.where(
        both & small,
        jnp.exp(jnp.minimum(lp, lq)) * jnp.expm1(jnp.where(small, absl, 0.0)),
        jnp.exp(jnp.maximum(lp, lq)) - jnp.where(both, jnp.exp(jnp.minimum(lp, lq)), 0.0),
    )


def moment_derivs(a, lp, lq, lw=None, *, normalized=True):
    r"""First and second :math:`a`-derivatives of :math:`\log\sum_k w_k p_k^a q_k^{1-a}`.

    They are the mean and variance of :math:`\ell = \log p/q` under the tilted weights
    :math:`\pi_k \propto w_k p_k^a q_k^{1-a}`. The mean is accumulated as
    :math:`\sum_k w_k[\ell_k p_k^a q_k^{1-a} - (p_k - q_k)]/C_a` (the subtracted terms sum to
    zero), whose terms are second order in :math:`\ell` for near-identical pairs; the
    variance as a sum of squares. Zero-mass entries follow the one-sided limits. With
    ``normalized=False`` (the weights do not carry all of both masses) the plain tilted mean
    is used.
    """
    a_ = jnp.asarray(a)[..., None]
    ex = exponent(a_, lp, lq)
    e = ex if lw is None else ex + lw
    log_c = logsumexp(e, axis=-1, keepdims=True)
    pi = jnp.exp(e - log_c)
    both = jnp.isfinite(lp) & jnp.isfinite(lq)
    l = jnp.where(both, lp - lq, 0.0)
    p, q = jnp.exp(lp), jnp.exp(lq)
    small = jnp.abs(l) <= 1.0
    ls = jnp.where(small, l, 0.0)
    # q [l expm1(a l) - phi(l)]  ==  l p^a q^(1-a) - (p - q)
    term_small = q * (ls * jnp.expm1(a_ * ls) - sp.phi(ls))
    term_large = l * jnp.exp(ex) - (p - q)
    term = jnp.where(small & both, term_small, jnp.where(both, term_large, q - p))
    if lw is not None:
        term = jnp.where(lw > -jnp.inf, term * jnp.exp(lw), 0.0)  # empty pieces carry nothing
    d1 = jnp.sum(term, axis=-1) / jnp.exp(log_c[..., 0])
    if not normalized:
        d1 = jnp.sum(jnp.where(both, pi * l, 0.0), axis=-1)
    # (sqrt(pi) |l - d1|)^2: far quadrature nodes carry pi = 0 and |l| ~ 1e24, whose
    # square overflows float32 (0 * inf would poison the sum)
    d2 = jnp.sum(jnp.square(jnp.sqrt(pi) * (l - d1[..., None])) * both, axis=-1)
    return d1, d2


def derivs_setup(P, Q):
    return P.log_probs, Q.log_probs


def derivs(consts, a):
    lp, lq = consts
    return moment_derivs(a, lp, lq)

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

import jax
import jax.numpy as jnp
from jax import lax

from jaxdp import _fastmath as fm
from jaxdp import _special as sp


def _sum(x):
    """``x`` summed over its last axis; two categories (randomized response, any binary
    mechanism) as one addition.

    XLA:CPU ends a kernel at every reduction, while an addition fuses into its neighbours:
    a Chernoff solve of two-category pairs compiles to 40 kernels instead of 60 and runs
    15-25% faster (``benchmarks/compare_trees.py --families Categorical --cat-sizes 2
    --runs 3``, batch 1e5: float64 390.9 -> 332.5 ns/pair, float32 283.3 -> 213.6; compile
    time unchanged, ``--compile 5``).
    Results agree to rounding (XLA may contract a product into the addition).
    """
    if x.shape[-1] == 2:
        return x[..., 0] + x[..., 1]
    return jnp.sum(x, axis=-1)


def _max(x):
    """The maximum over the last axis, kept as an axis of one (see :func:`_sum`)."""
    if x.shape[-1] == 2:
        return jnp.maximum(x[..., :1], x[..., 1:])
    return jnp.max(x, axis=-1, keepdims=True)


def _all(x):
    """``jnp.all`` over the last axis (see :func:`_sum`)."""
    if x.shape[-1] == 2:
        return x[..., 0] & x[..., 1]
    return jnp.all(x, axis=-1)


def _logsumexp(x):
    """``jax.scipy.special.logsumexp`` over the last axis, its steps spelled out (for two
    categories see :func:`_sum`). An empty sum (every term ``-inf``: disjoint supports) is
    ``-inf`` with derivative 0; ``log`` of it had the tangent 0/0, so forward-mode derivatives
    of the Bhattacharyya coefficient, Hellinger distance, Chernoff information and ``log_bc``
    of such pairs were ``nan`` (reverse mode: 0)."""
    m = _max(x)
    m = lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))
    s = _sum(jnp.exp(x - m))
    some = s > 0
    return jnp.where(some, jnp.log(jnp.where(some, s, 1.0)), -jnp.inf) + m[..., 0]


def deficit_sum(a, lp, lq, *, weights=None, axis=-1):
    """Sum of weighted AM-GM deficits (see module doc); ``weights`` multiplies each term.

    The terms are computed on the arguments broadcast to one shape and flattened: over a
    (pairs, categories) array XLA:CPU emits this long elementwise kernel with the short
    category axis as its inner loop, 4x slower (one core, batch 1e5, 2 and 10 categories:
    407 -> 106 and 1677 -> 429 ns/pair; the same values to the last bit or two, from the
    other kernel's rounding). (Not so for the tilted moments of :func:`moment_eval`:
    flattened, those ran 1.2-1.5x slower.)
    """
    args = (a, lp, lq) if weights is None else (a, lp, lq, weights)
    shape = jnp.broadcast_shapes(*(jnp.shape(x) for x in args))
    if len(shape) < 2:
        return jnp.sum(_deficit_terms(*args), axis=axis)
    flat = [jnp.broadcast_to(x, shape).reshape(-1) for x in args]
    terms = _deficit_terms(*flat).reshape(shape)
    return _sum(terms) if axis in (-1, len(shape) - 1) else jnp.sum(terms, axis=axis)


def _deficit_terms(a, lp, lq, weights=None):
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
    return term


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
    direct = _at_rate(_logsumexp(exponent(a_, lp, lq)), a_, lp, lq)
    deficit = _deficit_any_order(a_, lp, lq)
    return combine(a, direct, deficit)


def _deficit_any_order(a_, lp, lq, weights=None):
    """Deficit sum for a in [0, 1]; for a > 1 where no term overflows: every point with
    both masses positive has (a - 1)|log p/q| <= 500 (elsewhere C_a is huge, the direct form
    is accurate, and the deficit is set to +inf; a point where only q vanishes makes C_a
    infinite, one where only p does adds the finite term (a - 1) q). Not only
    near-identical pairs need it: with a light point far apart (|log p/q| > 1) and the rest
    equal, C_a - 1 is as small, and the direct form gave Rényi divergences of order 2 to 10
    only to ~1e-16 absolute (0 for 6.4e-20; 11% off for 2.5e-16), as it did where p has a
    light zero (``[0, .5, .5]`` against ``[2^-30, .5, .5 - 2^-30]``: 0 at order
    1 + 1e-9 for 9.3e-10)."""
    inside = (a_ >= 0) & (a_ <= 1)
    both = jnp.isfinite(lp) & jnp.isfinite(lq)
    l = jnp.where(both, lp - lq, jnp.inf)
    mild = _all(
        (jnp.abs(l) <= 1.0)
        | (both & ((a_ - 1.0) * jnp.abs(l) <= 500.0))
        | (lp == -jnp.inf)  # p = 0: its term is (a - 1) q, of the others' sign
    )
    deficit = deficit_sum(jnp.where(inside | mild[..., None], a_, 0.5), lp, lq, weights=weights)
    return jnp.where(inside[..., 0] | mild, deficit, jnp.inf)


def kl(P, Q):
    r""":math:`\sum_k p_k \varphi(-\ell_k)`, :math:`\ell = \log p/q` (equal to
    :math:`\sum p\log(p/q)` because both sum to 1; non-negative terms).

    A point with :math:`p_k > 0 = q_k` makes it ``inf``, with the derivative
    :math:`-p_k\,d\log q_k` (:func:`_inf_at_rate`): the rate at which :math:`p_k\log(p_k/q_k)`
    grows as :math:`q_k` vanishes (randomized response at :math:`\varepsilon = \infty`:
    :math:`d\,\varepsilon\tanh(\varepsilon/2)/d\varepsilon \to 1`; it was 0). A
    :math:`q_k = 0` that does not move keeps the derivative 0 (``inf`` all around).
    """
    lp, lq = P.log_probs, Q.log_probs
    terms = kl_terms(lp, lq)
    only_p = (lp > -jnp.inf) & (lq == -jnp.inf)
    return _sum(jnp.where(only_p, _inf_at_rate(jnp.exp(lp), lq), terms))


@jax.custom_jvp
def _inf_at_rate(p, lq):
    """``+inf`` (shaped like ``p``), whose tangent is ``-p dlq``: linear in the tangent of
    ``lq`` (reverse mode too), none from ``p`` (its term ``dp log(p/q)`` is infinite, or 0
    where ``p`` does not move: randomized response)."""
    return jnp.full_like(p, jnp.inf)


@_inf_at_rate.defjvp
def _inf_at_rate_jvp(primals, tangents):
    p, lq = primals
    return _inf_at_rate(p, lq), -p * tangents[1]


@jax.custom_jvp
def _at_rate(direct, a_, lp, lq):
    r"""``direct`` (:math:`\log C_a`). Where it is infinite (no finite term: disjoint
    supports, ``-inf``; an order above 1 with a point where :math:`p_k > 0 = q_k`, ``+inf``)
    its tangent is the rate at which the dominant terms vanish or blow up, as in
    :func:`_inf_at_rate`: a zero mass whose log moves by ``dl`` is read as a mass vanishing at
    that rate. A term's exponent :math:`a\log p_k + (1 - a)\log q_k` then goes to
    :math:`\mp\infty` as :math:`c_k` times a common rate, :math:`c_k` the sum of the
    coefficients of its zero masses (:math:`a` for :math:`p_k = 0`, :math:`1 - a` for
    :math:`q_k = 0`); the terms of least :math:`c_k` dominate, and the tangent is theirs,
    from the zero masses only (none from the other mass, whose own term is finite: as
    :func:`_inf_at_rate` takes none from ``p``), tied terms weighted by their finite parts.
    Randomized response at :math:`\varepsilon = \infty`: :math:`d\log C_a/d\varepsilon
    = -\min(a, 1 - a)`, the limit of the slope (it was 0). Zero masses that do not move
    keep the derivative 0; no tangent in ``a`` there (the formula's, 0).
    """
    return direct


@_at_rate.defjvp
def _at_rate_jvp(primals, tangents):
    direct, a_, lp, lq = primals
    t_direct, _, tlp, tlq = tangents
    zp, zq = lp == -jnp.inf, lq == -jnp.inf
    c = jnp.where(zp, a_, 0.0) + jnp.where(zq, 1.0 - a_, 0.0)
    lead = c == -_max(-c)
    finite = a_ * jnp.where(zp, 0.0, lp) + (1.0 - a_) * jnp.where(zq, 0.0, lq)
    finite = jnp.where(lead, finite, -jnp.inf)
    w = jnp.exp(finite - lax.stop_gradient(_max(finite)))
    w = w / _sum(w)[..., None]
    # (wheres, not products: a zero mass outside the leading terms may carry a nan tangent)
    t = jnp.where(zp & lead, a_ * tlp, 0.0) + jnp.where(zq & lead, (1.0 - a_) * tlq, 0.0)
    rate = _sum(jnp.where(lead, w * t, 0.0))
    tangent = jnp.where(jnp.isinf(direct), rate, t_direct)
    return direct, tangent.astype(direct.dtype)


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
    r""":math:`\max(\sum_{p > q} (p_k - q_k), \sum_{q > p} (q_k - p_k))`, with
    :math:`p - q = q\,\mathrm{expm1}(\ell)`.

    Both sums equal :math:`\tfrac12\sum_k |p_k - q_k|` for masses that sum to 1 exactly.
    Stored masses sum to 1 only to rounding, and rounding hides a small difference under a
    mass near 1: ``[1e-17, 1]`` against ``[0, 1]`` (read, as everywhere in jaxdp, as
    ``[x, 1 - x]``) has one sum 1e-17 and the other 0, and the half-sum 5e-18 broke
    :math:`1 - e^{-C} \le TV` against the (exact) Chernoff information 1e-17. A hidden
    difference only lowers its side's sum, so the larger one is kept. The gradient is the
    half-sum's (the two differ by rounding), so that it does not jump between the sides.
    """
    lp, lq = P.log_probs, Q.log_probs
    d = abs_diff(lp, lq)
    above = lp > lq
    up, down = _sum(jnp.where(above, d, 0.0)), _sum(jnp.where(above, 0.0, d))
    half = 0.5 * (up + down)
    return half + lax.stop_gradient(jnp.maximum(up, down) - half)


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


def moment_setup(lp, lq, lw=None, *, normalized=True):
    """Every term of :func:`moment_derivs` that does not depend on ``a`` (log-probabilities
    ``lp``, ``lq`` and optional log-weights ``lw`` on the last axis), computed once per solve.
    """
    both = jnp.isfinite(lp) & jnp.isfinite(lq)
    live = both if lw is None else both & (lw > -jnp.inf)  # empty pieces carry nothing
    # the log-summand is a lpm + (1 - a) lqm, lpm = lw + lp and lqm = lw + lq on the live
    # points (not lqm + a l, whose rounding ~eps |lq| can exceed the log-summand near a = 1),
    # and -BIG elsewhere: a zero mass, whose summand vanishes for a in [0, 1] (the one-sided
    # limits of ``exponent``), with no mask and no nan in any tangent. Without weights,
    # l = lpm - lqm is then exactly log p/q on the live points and 0 elsewhere (no array)
    big = -0.25 * jnp.finfo(jnp.result_type(lp, lq)).max
    lwp, lwq = (lp, lq) if lw is None else (lw + lp, lw + lq)
    lpm, lqm = jnp.where(live, lwp, big), jnp.where(live, lwq, big)
    l = jnp.where(both, lp - lq, 0.0)
    l_kept = None if lw is None else l
    if not normalized:
        return lpm, lqm, l_kept, None
    small = both & (jnp.abs(l) <= 1.0)
    ls = jnp.where(small, l, 0.0)
    p, q = jnp.exp(lp), jnp.exp(lq)
    w = 1.0 if lw is None else jnp.where(lw > -jnp.inf, jnp.exp(lw), 0.0)
    wq = jnp.where(small, w * q, 0.0)
    # the compensated term is t = wq_ls expm1(a l) - base: where |l| <= 1, wq_ls = w q l and
    # base = w q phi(l); elsewhere (|l| > 1 or a zero mass) wq_ls = 0 and base = w (p - q)
    # (phi by its series, as sp.phi does for |l| <= 1, without its other branch's expm1)
    base = jnp.where(small, wq * (ls * ls * sp.horner(sp._PHI_COEFFS, ls)), w * (p - q))
    # which form of the mean has the smaller rounding bound (see moment_derivs; in units of
    # eps, multiplied through by C_a, tilted weights at a = 1/2): l itself is uncertain by
    # ~(1 + |lp| + |lq|) (p and q rounded, then their logs)
    dl = 1.0 + jnp.abs(jnp.where(small, lp, 0.0)) + jnp.abs(jnp.where(small, lq, 0.0))
    comp_err = jnp.where(small, wq * jnp.abs(ls) * dl, jnp.abs(base))
    plain_err = jnp.where(small, w * jnp.sqrt(p * q) * (jnp.abs(ls) + dl), 0.0)
    near = _sum(comp_err - plain_err) < 0
    return lpm, lqm, l_kept, (wq * ls, base, near)


def moment_derivs(a, lp, lq, lw=None, *, normalized=True):
    r"""First and second :math:`a`-derivatives of :math:`\log C_a`,
    :math:`C_a = \sum_k w_k p_k^a q_k^{1-a}`, for :math:`a \in [0, 1]`
    (``moment_eval(moment_setup(lp, lq, lw, normalized=normalized), a)``; a solver calls
    the two separately).

    They are the mean and variance of :math:`\ell = \log p/q` under the tilted weights
    :math:`\pi_k = w_k p_k^a q_k^{1-a}/C_a`. The mean has two forms: the plain tilted mean
    :math:`\sum_k \pi_k \ell_k`, and the compensated
    :math:`\sum_k w_k[\ell_k p_k^a q_k^{1-a} - (p_k - q_k)]/C_a` (the subtracted masses sum
    to zero when both sum to 1), whose terms are second order in :math:`\ell` for
    near-identical pairs: where :math:`|\ell_k| \le 1` the term is evaluated as
    :math:`w_k q_k[\ell_k\,\mathrm{expm1}(a\ell_k) - \varphi(\ell_k)]`,
    :math:`\varphi(x) = e^x - 1 - x`, without cancellation; elsewhere as
    :math:`\pi_k\ell_k` with the masses :math:`w_k(p_k - q_k)` summed apart.

    Neither is accurate everywhere. The compensated form divides by :math:`C_a` the absolute
    rounding error of its mass terms, :math:`\sim\epsilon\sum_k w_k|p_k - q_k| \le
    2\epsilon`, a residue that does not depend on :math:`a`. For well separated pairs
    :math:`C_a` is tiny at the optimum: float32 pairs 12 to 18 nats apart
    (:math:`C_a = 4\cdot10^{-6}` to :math:`2\cdot10^{-8}`) had :math:`f'` off by
    :math:`10^{-3}` to 3 there, against the solver's certificate
    :math:`|f'| \le \sqrt\epsilon|f''| \approx 0.2` to 0.4: it stopped off the maximiser,
    bisected to its cap (``converged=False``), or, with differing supports, took the wrong
    end point (information up to 10% off, sometimes certified); float64 broke the same way
    from ~27 nats (up to 30% off). The solver's gradients (implicit function theorem, through
    :math:`f'`) were as wrong. The plain form's error, :math:`\epsilon\sum_k\pi_k(|\ell_k| +
    \delta_k)`, where :math:`\epsilon\delta_k \approx \epsilon(1 + |\log p_k| + |\log
    q_k|)` is the rounding of :math:`\ell_k` itself (of the masses, then of their logs),
    swamps instead the :math:`O(\ell^2)` mean of a near-identical pair (e.g. :math:`p` and
    :math:`q` differing by :math:`2^{-20}`); the compensated terms feel that rounding only
    through :math:`q_k|\ell_k|\delta_k`, being second order in :math:`\ell`. So both are
    formed and, per pair, the one with the smaller rounding bound is kept. Points with
    :math:`|\ell| > 1` carry the same :math:`\pi_k\ell_k` in both forms, so the bounds
    compare over the points with :math:`|\ell| \le 1` only, multiplied through by
    :math:`C_a`: :math:`\sum_{|\ell_k|>1} w_k|p_k - q_k| + \sum_{|\ell_k|\le1}
    w_kq_k|\ell_k|\delta_k` against :math:`\sum_{|\ell_k|\le1} w_k p_k^a q_k^{1-a}(|\ell_k|
    + \delta_k)`. Neither side depends on :math:`a` beyond a factor :math:`e^{\pm1/2}`
    (:math:`|\ell_k| \le 1`), so the choice is made once per pair, at :math:`a = 1/2`. (The
    :math:`\delta_k` matter: float32 ``[1.5e-10, 1]`` against ``[8.4e-10, 1]`` has
    :math:`\ell = 0` on its second masses, and without them the plain mean, blind to the
    :math:`7\cdot10^{-10}` the masses imply there, put the optimum at an end point:
    information 0 instead of :math:`1.45\cdot10^{-10}`.) With ``normalized=False`` (the
    weights do not carry all of both masses) only the plain mean is formed.

    The variance is a sum of squares. An evaluation costs one ``exp`` and one ``expm1`` per
    point and four reductions.
    """
    return moment_eval(moment_setup(lp, lq, lw, normalized=normalized), a)


def moment_eval(consts, a):
    """:func:`moment_derivs` from the constants of :func:`moment_setup`."""
    lpm, lqm, l, comp = consts
    a_ = jnp.asarray(a)[..., None]
    e = a_ * lpm + (1.0 - a_) * lqm
    if l is None:
        l = lpm - lqm
    # logsumexp sharing its exponentials with the tilted weights; the shift m cancels
    # (also in tangents, hence stop_gradient)
    m = lax.stop_gradient(_max(e))
    z = jnp.exp(e - m)
    s = _sum(z)
    if comp is None:
        d1 = _sum(z * l) / s
    else:
        wq_ls, base, near = comp
        # l split exactly into its |l| <= 1 part and the rest (one of the two is 0), each
        # by a where: as ls and l - ls, the rest's zero carried a derivative of 1 - 1,
        # which reverse mode (summing the cotangents of l in its own order) did not cancel
        # exactly: ~eps absolute in d f'/d theta, whose true size at the optimum of a pair
        # delta apart is ~delta^2 (d alpha*/d theta 2e-4 off at delta = 1e-6, the wrong
        # sign at 1e-10; forward mode was accurate)
        small = jnp.abs(l) <= 1.0
        ls, lb = jnp.where(small, l, 0.0), jnp.where(small, 0.0, l)
        # q [l expm1(a l) - phi(l)]  ==  l p^a q^(1-a) - (p - q), without cancellation
        t = wq_ls * jnp.expm1(a_ * ls) - base
        # both forms times C_a e^-m = s, in one sum: the compensated terms scaled by e^-m
        # (the guard keeps an underflowing e^m, where the plain form is kept, from making
        # the unused branch's gradient nan)
        nr = near[..., None]
        scale = jnp.exp(-jnp.where(nr, m, 0.0))
        d1 = _sum(z * lb + jnp.where(nr, t * scale, z * ls)) / s
    # (sqrt(z) |l - d1|)^2, a sum of squares (0 * inf from a huge |l| would poison it)
    d2 = _sum(jnp.square(sp.sqrt_weight(z) * (l - d1[..., None]))) / s
    return d1, d2


def derivs_setup(P, Q):
    """Every :func:`derivs` term that does not depend on ``a``, computed once per solve."""
    return moment_setup(P.log_probs, Q.log_probs)


def initial_alpha(consts):
    r"""The solver's starting point: for two categories the maximiser itself, 1/2 otherwise.

    With two categories :math:`f'(a) = 0` reads
    :math:`q_1\ell_1 e^{a\ell_1} = -q_2\ell_2 e^{a\ell_2}` (:math:`\ell = \log p/q`; the two
    :math:`\ell` have opposite signs), so
    :math:`a^* = (\log(q_2|\ell_2|) - \log(q_1|\ell_1|))/(\ell_1 - \ell_2)`: the randomized
    response pairs then need one Newton step to polish rounding instead of ~7 from 1/2.
    Nearly identical pairs (:math:`|\ell_1 - \ell_2| < \epsilon^{1/3}`) start at 1/2
    instead: :math:`a^* - 1/2 = O(\ell)` there, while the formula divides the rounding of
    the logarithms by :math:`\ell_1 - \ell_2`. Identical pairs (0/0) and pairs with a zero
    mass (an end-point optimum) give ``nan`` or a point outside (0, 1), which the solver
    replaces by 1/2.
    """
    lpm, lqm, _, _ = consts
    if lpm.shape[-1] != 2:
        return jnp.full(lpm.shape[:-1], 0.5, lpm.dtype)
    l = lpm - lqm
    w = lqm + fm.log(jnp.abs(l))  # log(q |l|)
    span = l[..., 0] - l[..., 1]
    far = jnp.abs(span) >= jnp.finfo(l.dtype).eps ** (1 / 3)
    return jnp.where(far, (w[..., 1] - w[..., 0]) / jnp.where(far, span, 1.0), 0.5)


def derivs(consts, a):
    """``(d/da, d2/da2)`` of ``log C_a`` (see :func:`moment_derivs`)."""
    return moment_eval(consts, a)

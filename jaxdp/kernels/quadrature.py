r"""Quadrature path for any pair of 1-D densities with log-densities.

The real line (intersected with both supports) is split at every kink and centre of the two
distributions; finite pieces use tanh-sinh quadrature and the two infinite tails exp-sinh
quadrature scaled by the geometric mean of the two length scales (:func:`_nodes`). Both
rules converge double-exponentially for integrands that are analytic inside each piece
(kinks sit at piece ends), and they cluster nodes at the ends, where a peaked integrand
lives. The integrand is handled in log space:
:math:`\log C_a = \mathrm{logsumexp}(\log w_i + a\log p(x_i) + (1-a)\log q(x_i))`, and for
nearly identical pairs through the AM-GM deficit form (see
:mod:`jaxdp.kernels.categorical`), which keeps relative accuracy.

Accuracy against the closed forms (``benchmarks/bench_accuracy.py``, max relative error of
``log C_a``, float64): level 3 ~1e-5, level 4 ~6e-11, level 5 (the default, ~730 nodes per
pair) ~2e-15 on Laplace, Gaussian and Laplace-vs-Gaussian pairs.

Limitation: there is no automatic error estimate and no adaptive refinement; ``converged``
certifies the solver on the rule, not the rule. ``Density(..., level=L)`` sets the step
``2**-L`` (:func:`pair_level`); the change from one level to the next estimates the
error. A log-density that bends sharply between piece ends (analytic, but with a narrow
strip of analyticity) is resolved only as far as the nodes there allow: a mixture whose
components swap dominance, 0.3 N(-10, 0.5^2) + 0.7 N(10, 2^2) (breakpoints at -10 and 10,
scale 2) against Laplace(0, 3), has its log-density switch component within ~0.05 of
x = -6, where the nodes are ~0.25 apart: ``log C_0.3`` is 7.2e-9 relative off and the
Chernoff information 6.7e-9 high, both reported converged (another mixture, 7e-12); level 6
gives 1.1e-11 and level 7 5e-15. Or declare the switch as a breakpoint (here -6: 1e-15).

Likewise an integrand whose bulk lies at the end of a piece (or the start of a tail) far
longer than it: near an end, a tanh-sinh piece's nodes are spaced ~``h log(2H/d)`` relative
to their distance ``d`` from it (``H`` its half-length; ~0.5 at level 5 for ``H/d`` ~1e7).
For pairs with a :class:`Density` at scale ratios beyond ~1e5 the bulk, between the two
scales wide, sits at the narrower one's centre (no breakpoint of its own is added there):
N(0, 1) vs a Density N(1e8, 1e8), all converged, has the information 2.8e-6 relative off
and ``log C_a`` up to 1.7e-4 (a = 0.999); N(10, 1e-8) 2e-6 and 4e-4 (a = 0.01). Pieces
ending 12 integrand widths either side of its peak bring these to ~1e-16 (1e-8 where the
nodes' own rounding, ``ulp(10)/1e-8``, takes over); for ``log_bc`` at a given ``a`` a
user can declare them as ``breakpoints`` (README, "Limits of the quadrature path").
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from jaxdp import _fastmath as fm
from jaxdp import _special as sp
from jaxdp.distributions import DEFAULT_QUADRATURE_LEVEL, Density, Gaussian, Laplace
from jaxdp.kernels import categorical as cat

#: Step ``h = 2**-level`` of the double-exponential rules, unless a :class:`Density` of the
#: pair asks for another (``Density(..., level=L)``; see :func:`pair_level`).
DEFAULT_LEVEL = DEFAULT_QUADRATURE_LEVEL


def pair_level(P, Q, level=None) -> int:
    """The rules' level for a pair: ``level`` if given, else the highest ``level`` of its
    :class:`Density` members (a built-in family has none), else :data:`DEFAULT_LEVEL`."""
    if level is not None:
        return level
    asked = [d.level for d in (P, Q) if isinstance(d, Density) and d.level is not None]
    return max(asked) if asked else DEFAULT_LEVEL


def _rules(level: int):
    h = 2.0**-level
    # tanh-sinh on (-1, 1): t in [-3.2, 3.2]
    t = np.arange(-3.2, 3.2 + h / 2, h)
    u = 0.5 * math.pi * np.sinh(t)
    ts_x = np.tanh(u)
    ts_w = h * 0.5 * math.pi * np.cosh(t) / np.cosh(u) ** 2
    # distance of each node from the nearer end, accurate near the ends: 1 - |tanh u|
    ts_gap = 2.0 / (np.exp(2.0 * np.abs(u)) + 1.0)
    keep = ts_gap > 0
    # exp-sinh on (0, inf): x = exp(pi/2 sinh t), t in [-4.5, 3.6]
    te = np.arange(-4.5, 3.6 + h / 2, h)
    ue = 0.5 * math.pi * np.sinh(te)
    es_logx = ue
    es_logw = np.log(h * 0.5 * math.pi * np.cosh(te)) + ue
    return ts_x[keep], np.log(ts_w[keep]), ts_gap[keep], es_logx, es_logw


#: With ``bulk=True`` (:func:`kl`, :func:`tv`), pieces also end this many length scales
#: either side of each distribution's centre.
BULK_SCALES = 12.0


def _bulk_points(P, Q):
    """``centre -+ BULK_SCALES * scale`` of both distributions, shape ``batch + (4,)``;
    piece ends only (no gradient: they change the rule, not the integral)."""
    pts = []
    for D in (P, Q):
        centre, scale = D._quad_points()[..., 0], D._quad_scale()
        pts += [centre - BULK_SCALES * scale, centre + BULK_SCALES * scale]
    shape = jnp.broadcast_shapes(*(jnp.shape(v) for v in pts))
    return lax.stop_gradient(jnp.stack([jnp.broadcast_to(v, shape) for v in pts], -1))


def _nodes(P, Q, level, extra=None, bulk=False, ascending=False):
    """Nodes (..., n) and log-weights (..., n) covering supp P ∩ supp Q, the pieces split
    at the distributions' points and at ``extra`` (..., k) if given; with ``ascending``, in
    increasing order of the nodes (a fixed permutation of the pieces: no sort).
    :func:`_node_groups` has the same nodes unconcatenated.

    The infinite tails are scaled by the geometric mean of the two length scales; with ``bulk``,
    pieces also end at :func:`_bulk_points` and the tails, which then start outside both
    bulks, by the larger. Without it, the bulk of a distribution far wider than the other
    lies on tail nodes spaced for the narrower one: integrands that depend on the wider
    one's shape there (KL, TV; not ``log C_a``, whose integrand the narrower one's tail
    dominates) lost accuracy with the scale ratio (KL(N(0, 1e3) || Lap(0.3, 1)) 6e-8
    relative, 5e-6 at 1e4; with ``bulk`` ~1e-15 up to 1e5 either way round, 3e-13 at 1e7,
    for ~2.1x the nodes).

    Not by the smaller scale (as before): exp-sinh nodes spread in log distance as they go
    out (~0.58 apart in the log at 1e8 scales), so the wider density's bulk lay on sparse
    nodes, and the tails ended ~3e12 of the narrower scales out. Both cost pairs of
    power-law densities far apart in scale, where ``p^a q^(1-a)`` for small ``a`` follows
    the wider one: ``log C_0.1`` of Cauchy(0, 1) vs Cauchy(0, g) was 1.1e-7 relative off at
    g = 1e6, 8e-6 at 1e8; light tails too near ``a = 1`` (N(0, 1) vs N(0, 1e5) as
    densities, ad hoc: 1.4e-6 at ``a = 0.99``, now 1.3e-10; at most 2.3e-10 over ``a`` in
    0.01..0.99). At the geometric mean each bulk sits ``sqrt(g)`` scales from the tail's
    own, in the log 6.9 at g = 1e6, where the spacing is ~0.2; for pairs of equal scales
    nothing changes. What the rule still misses beyond its last node is left out for ``a``
    in [0, 1]: ``log C_0.1`` of Cauchy(0, 1) vs Cauchy(0, g) 1.1e-10 relative off at g =
    1e6, 8e-10 at 1e8, the information 3.5e-12 and 1.9e-11 (mpmath,
    ``tests/test_quadrature_scale_tails.py``). Adding it there (the power-law rest of
    :func:`_tail_rest`, as for orders above 1) measured all of these below 1.1e-13 but
    doubled the compile time of programs differentiating the quadrature path (``taskset -c
    0 pytest -n 0 tests/test_density_gradients.py tests/test_quadrature_peaks.py``: 77 ->
    151 s), so it is not done."""
    xs, lws = _node_groups(P, Q, level, extra, bulk, ascending)
    return jnp.concatenate(xs, -1), jnp.concatenate(lws, -1), _empty(P, Q)


def _support(P, Q) -> tuple[float, float]:
    """``(lower, upper)`` of the common support (static floats, may be infinite)."""
    return max(P.lower, Q.lower), min(P.upper, Q.upper)


def _finite_bounds(P, Q) -> list[float]:
    """The finite ends of the common support (where a density may vanish)."""
    return [b for b in _support(P, Q) if math.isfinite(b)]


def _empty(P, Q) -> bool:
    """Whether the supports are disjoint (then no node carries weight)."""
    lower, upper = _support(P, Q)
    return lower >= upper


def _node_groups(P, Q, level, extra=None, bulk=False, ascending=False, ends=False):
    """The nodes of :func:`_nodes` as lists ``xs``, ``lws`` of arrays (..., n_i): the
    finite pieces, then the upper and the lower end (``ascending``: lower end first).
    A sum over all nodes is a sum over the groups, without the concatenation (on XLA:CPU
    a copy at several ns per element).

    With ``ends`` (not with ``ascending``), also each group's piece ends: ``(left, right)``,
    each (..., pieces, 1), for tanh-sinh pieces; ``(inner, None)``, (..., 1), for a tail."""
    ts_x, ts_lw, ts_gap, es_logx, es_lw = _rules(level)
    lower, upper = _support(P, Q)
    dtype = jnp.result_type(P.dtype, Q.dtype)
    pts = _broadcast_pts(P, Q)
    nudge = bool(_finite_bounds(P, Q))
    if bulk:
        more = _bulk_points(P, Q)
        if extra is not None:
            batch = jnp.broadcast_shapes(extra.shape[:-1], more.shape[:-1])
            more = jnp.concatenate(
                [jnp.broadcast_to(v, batch + v.shape[-1:]) for v in (extra, more)], -1
            )
        extra = more
    if extra is not None:
        shape = jnp.broadcast_shapes(pts[0].shape[:-1], extra.shape[:-1])
        pts = [jnp.broadcast_to(v, shape + v.shape[-1:]) for v in (*pts, extra)]
    pts = jnp.concatenate(pts, -1).astype(dtype)
    pts = _shared_ends(jnp.sort(jnp.clip(pts, lower, upper), axis=-1))
    if bulk:
        scale = jnp.maximum(P._quad_scale(), Q._quad_scale())
    else:
        # (as a product of roots: scales near the float range's ends do not overflow)
        scale = jnp.sqrt(P._quad_scale()) * jnp.sqrt(Q._quad_scale())
    scale = scale[..., None].astype(dtype)
    ts_x = jnp.asarray(ts_x, dtype)
    gap = jnp.asarray(ts_gap, dtype)
    # finite pieces between consecutive points
    x, lw = _finite(pts[..., :-1, None], pts[..., 1:, None], ts_x, gap, ts_lw, dtype, nudge)
    # (the length spelled out, not -1: JAX cannot infer it for an empty batch)
    xs = [x.reshape(x.shape[:-2] + (x.shape[-2] * x.shape[-1],))]
    lws = [lw.reshape(lw.shape[:-2] + (lw.shape[-2] * lw.shape[-1],))]
    piece_ends = [(pts[..., :-1, None], pts[..., 1:, None])]
    ex = jnp.exp(jnp.asarray(es_logx, dtype))
    elw = jnp.asarray(es_lw, dtype) + fm.log(scale)
    first, last = pts[..., :1], pts[..., -1:]
    if math.isinf(upper):
        xs.append(last + scale * ex)
        lws.append(jnp.broadcast_to(elw, last.shape[:-1] + ex.shape))
        piece_ends.append((last, None))
    else:
        x, lw = _finite(last, jnp.full_like(last, upper), ts_x, gap, ts_lw, dtype, nudge)
        xs.append(x)
        lws.append(lw)
        piece_ends.append((last[..., None], jnp.full_like(last, upper)[..., None]))
    if math.isinf(lower):
        xs.append(first - scale * ex)
        lws.append(jnp.broadcast_to(elw, first.shape[:-1] + ex.shape))
        piece_ends.append((first, None))
    else:
        x, lw = _finite(jnp.full_like(first, lower), first, ts_x, gap, ts_lw, dtype, nudge)
        xs.append(x)
        lws.append(lw)
        piece_ends.append((jnp.full_like(first, lower)[..., None], first[..., None]))
    if ascending:
        # each piece's nodes increase (tanh-sinh) and so do the upper tail's; the lower
        # tail's decrease
        flip = math.isinf(lower)
        xs = [xs[-1][..., ::-1] if flip else xs[-1], *xs[:-1]]
        lws = [lws[-1][..., ::-1] if flip else lws[-1], *lws[:-1]]
    shape = jnp.broadcast_shapes(*(x.shape[:-1] for x in xs))
    xs = [jnp.broadcast_to(x, shape + x.shape[-1:]) for x in xs]
    lws = [jnp.broadcast_to(lw, shape + lw.shape[-1:]) for lw in lws]
    if ends:
        return xs, lws, piece_ends
    return xs, lws


def _shared_ends(pts):
    """Sorted piece ends (..., k), each run of equal ends with the derivative of its first.

    The pieces only define the rule; gradients move them with the parameters, and the
    boundary terms of neighbouring pieces cancel. A piece between two coincident ends (the
    locations of a Laplace and a Gaussian at the same point) has no weight, hence no
    derivative, and its ends moved differently: its boundary term, the integrand at that
    point, went missing (d KL(Lap(m, 1) || N(0, 2))/dm at m = 0 came out 0.159, not 0).
    With one derivative per run the ends move together and the terms cancel without it.
    """
    out = [pts[..., 0]]
    for k in range(1, pts.shape[-1]):
        out.append(jnp.where(pts[..., k] == out[-1], out[-1], pts[..., k]))
    return jnp.stack(out, -1)


def _finite(left, right, ts_x, gap, ts_lw, dtype, nudge=True):
    half = 0.5 * (right - left)
    x = jnp.where(ts_x < 0, left + half * gap, right - half * gap)
    lw = fm.log(jnp.maximum(half, jnp.finfo(dtype).tiny)) + jnp.asarray(ts_lw, dtype)
    # nodes closer to an end than its rounding (left + 1e-17 half == left unless the end is
    # 0) sat on it, where a density may vanish: p^a q^(1-a) was +inf at orders above 1
    # (U(5, 6) vs 2(x - 5), also where it converges). One float inside instead: the weight
    # keeps the mass next to the end (dropping those nodes lost ~ulp(end)/scale of it: TV of
    # pairs 1e12 scales apart came out 1 - 2e-5). A piece an ulp or two wide (a peak of the
    # integrand next to a bound, see _peaks) has no float inside for some: they carry nothing.
    # Only where a support bound is finite (``nudge``): elsewhere both densities are
    # positive at every piece end, and the nudge cost the Chernoff solver of a Laplace vs a
    # Gaussian ~10 compiled kernels.
    if not nudge:
        return x, jnp.where(half > 0, lw, -jnp.inf)
    l0, r0 = lax.stop_gradient((left, right))  # (nextafter has no derivative rule)
    step_in = jnp.nextafter(l0, r0) - l0
    step_back = jnp.nextafter(r0, l0) - r0
    x = jnp.where(x == left, left + step_in, jnp.where(x == right, right + step_back, x))
    lw = jnp.where((half > 0) & (x > left) & (x < right), lw, -jnp.inf)
    return x, lw


def _outer_tail_nodes(P, Q, level):
    """Indices (last, previous) of the outermost nodes of each infinite tail (see _nodes)."""
    ts_x, _, _, es_logx, _ = _rules(level)
    lower_inf, upper_inf = (math.isinf(b) for b in _support(P, Q))
    lower_size = es_logx.shape[0] if lower_inf else ts_x.shape[0]
    out = []
    if lower_inf:
        out.append((-1, -2))
    if upper_inf:
        out.append((-lower_size - 1, -lower_size - 2))
    return out


def _broadcast_pts(P, Q):
    shape = tuple(np.broadcast_shapes(P.batch_shape, Q.batch_shape))
    pp, qp = P._quad_points(), Q._quad_points()
    return [
        jnp.broadcast_to(pp, shape + pp.shape[-1:]),
        jnp.broadcast_to(qp, shape + qp.shape[-1:]),
    ]


def _at_nodes(D, x):
    """``D.log_prob`` at nodes shaped ``batch + (n,)`` (scalar fields get a trailing axis)."""
    if isinstance(D, Density):
        return D.log_prob(x)
    return jax.tree_util.tree_map(lambda v: jnp.asarray(v)[..., None], D).log_prob(x)


def _log_probs(P, Q, level, extra=None, bulk=False):
    x, lw, disjoint = _nodes(P, Q, level, extra, bulk)
    lp, lq = _log_probs_at(P, Q, x, lw, _live_point(P, Q, [x], [lw]))
    return lw, lp, lq, disjoint


def _log_probs_at(P, Q, x, lw=None, live_point=None):
    """``log p``, ``log q`` at ``x``; with ``lw`` and ``live_point`` (:func:`_live_point`),
    nodes without weight are evaluated at the live point instead.

    Those nodes (empty pieces, nodes rounded onto an end) sit on a piece end, often a support
    bound where a density vanishes. Their contributions are masked, but a log-density with
    a parameter, ``(k - 1) log x`` at ``x = 0``, still sent ``0 * inf = nan`` back through
    the mask into ``dk`` (Rényi, KL, the Chernoff information of a parametrized
    :class:`~jaxdp.Density`)."""
    if live_point is not None:
        x = jnp.where(lw > -jnp.inf, x, live_point)
    return _log_prob_at(P, x), _log_prob_at(Q, x)


def _log_prob_at(D, x):
    """``D``'s log-density at ``x`` (:func:`_at_nodes`), a ``nan`` read as a zero density."""
    lp = _at_nodes(D, x)
    return jnp.where(jnp.isnan(lp), -jnp.inf, lp)


def _live_point(P, Q, xs, lws):
    """A node with weight, (..., 1), from the groups ``xs``, ``lws`` (any node where there
    is none: disjoint supports); no gradient (a stand-in point only). ``None`` (no stand-in
    needed) where the support has no finite bound: both densities are positive at every
    node then."""
    if not _finite_bounds(P, Q):
        return None
    point, found = None, None
    for x, lw in zip(xs, lws, strict=True):
        k = jnp.argmax(lw, axis=-1, keepdims=True)
        best = jnp.take_along_axis(x, k, -1)
        alive = jnp.take_along_axis(lw, k, -1) > -jnp.inf
        if point is None:
            point, found = best, alive
        else:
            point = jnp.where(~found & alive, best, point)
            found = found | alive
    return lax.stop_gradient(point)


#: :func:`log_bc` makes at most this many local maxima of its integrand breakpoints.
MAX_PEAKS = 2


def _laplace_gaussian(P, Q) -> bool:
    """Whether the pair is a built-in Laplace and a built-in Gaussian, either way round."""
    return {type(P), type(Q)} == {Laplace, Gaussian}


def _laplace_gaussian_peak(P, Q, a):
    r"""The maximiser of :math:`a\log p + (1-a)\log q` for a built-in Laplace
    :math:`(\mu, b)` and Gaussian :math:`(m, s)` and ``a`` in [0, 1], with weights
    :math:`w_L, w_G = 1 - w_L` on their log-densities: the function is concave, with slope
    :math:`-w_L\,\mathrm{sign}(x - \mu)/b - w_G (x - m)/s^2`, so the maximiser is
    :math:`m` moved towards :math:`\mu` by :math:`w_L s^2/(w_G b)`, stopping at the kink
    :math:`\mu`. One formula instead of a pass over the nodes (:func:`_peaks`), which made
    ``jd.log_bc`` of such pairs 4.5x slower."""
    lap_first = isinstance(P, Laplace)
    L, G = (P, Q) if lap_first else (Q, P)
    a = jnp.asarray(a)
    w_l = a if lap_first else 1.0 - a
    w_g = 1.0 - w_l
    d = G.loc - L.loc
    shift = jnp.where(
        w_g > 0, w_l * G.scale * G.scale / (L.scale * jnp.where(w_g > 0, w_g, 1.0)), jnp.inf
    )
    return G.loc - jnp.sign(d) * jnp.minimum(jnp.abs(d), shift)


#: :func:`_laplace_gaussian_points`: the piece next to the integrand's peak ends this many
#: of its widths from it, on the Laplace's side.
PEAK_WIDTHS = 12.0


def _laplace_gaussian_points(P, Q, a):
    r"""The peak :math:`x^*` of :func:`_laplace_gaussian_peak` and the point
    ``PEAK_WIDTHS`` of the integrand's widths :math:`s/\sqrt{w_G}` from it towards the
    Laplace's centre (where the integrand is :math:`e^{-72}` of its peak), if that point lies
    strictly between the Laplace's centre and :math:`x^*`; otherwise :math:`x^*` again (an
    empty piece). Shape ``batch + (2,)``.

    Without it the Gaussian side of the peak lay at the end of one tanh-sinh piece reaching
    back to the Laplace's centre, whose nodes there are spaced in proportion to the piece's
    length: Laplace(0, 1) vs N(m, 1e-3), ``log C_0.1`` was 3.6e-9 relative off at m = 10,
    3.8e-8 at m = 100, the information 3.6e-11 at m = 300 (a* = 0.998: a peak 22 Gaussian
    scales wide), against the erfc closed form; now <= 6e-14 and 4e-16. The price: one
    more tanh-sinh piece (level 5: 932 -> 1138 nodes in ``jd.log_bc`` and the Chernoff
    solver's second solve)."""
    lap_first = isinstance(P, Laplace)
    L, G = (P, Q) if lap_first else (Q, P)
    a = jnp.asarray(a)
    w_g = 1.0 - a if lap_first else a
    peak = _laplace_gaussian_peak(P, Q, a)
    d = G.loc - L.loc
    reach = PEAK_WIDTHS * G.scale / jnp.sqrt(jnp.where(w_g > 0, w_g, 1.0))
    inner = peak - jnp.sign(d) * reach
    # strictly between the Laplace's centre and an interior peak (not at the kink)
    inside = (w_g > 0) & (reach < jnp.abs(peak - L.loc)) & (peak != L.loc)
    return jnp.stack(jnp.broadcast_arrays(peak, jnp.where(inside, inner, peak)), -1)


def laplace_gaussian_optimum(P, Q, a):
    r"""The Chernoff optimum of a built-in Laplace :math:`(\mu, b)` and Gaussian :math:`(m,
    s)` pair (``a``: ``P``'s weight) where the integrand's peak lies on the Gaussian's side
    of the kink, more than ``PEAK_WIDTHS`` of its widths from it; ``a`` elsewhere.

    There the rest of the integral beyond the kink is below :math:`e^{-72}` of it, and
    :math:`\log C` is the Gaussian integral of :math:`p_L^{w_L} p_G^{w_G}` over the whole
    line: with :math:`r = s/b`, :math:`D = |m - \mu|/b`, :math:`u = 1/w_G`,
    :math:`\log C = w_L(\ell - D) - \tfrac12\log w_G + \tfrac12 r^2 w_L^2 u`,
    :math:`\ell = \log(r\sqrt{2\pi}/2)`, whose :math:`w_L`-derivative vanishes where
    :math:`K u^2 + u/2 + (\ell - D - K) = 0`, :math:`K = r^2/2`: :math:`w_L = (2(D - \ell)
    - 1)/(2k - 1/2 + \sqrt{1/4 + 4Kk})`, :math:`k = K + D - \ell` (the quadratic's root
    as :math:`1 - 1/u`, without cancellation).

    For the Chernoff solver's second rule (``jaxdp.chernoff``): its breakpoints at the peak
    for the first solve's answer (on the plain rule, which misses that peak) left the true
    peak tens of widths from them where the Gaussian is far wider than the Laplace and far
    from it, because the peak moves by :math:`w_L s^2/(w_G^2 b)` per unit of ``a``."""
    lap_first = isinstance(P, Laplace)
    L, G = (P, Q) if lap_first else (Q, P)
    a = jnp.asarray(a)
    inv_b = 1.0 / L.scale
    r, dist = G.scale * inv_b, jnp.abs(G.loc - L.loc) * inv_b
    k_half = 0.5 * r * r
    ell = fm.log(r) + 0.5 * math.log(2.0 * math.pi) - math.log(2.0)
    k = k_half + dist - ell
    w_l = (2.0 * (dist - ell) - 1.0) / (2.0 * k - 0.5 + jnp.sqrt(0.25 + 4.0 * k_half * k))
    w_g = 1.0 - w_l
    # the peak's distance from the kink, dist - r^2 w_L/w_G (units of b), above PEAK_WIDTHS
    # widths r/sqrt(w_G), multiplied through by w_G > 0 (no more divisions: each is a stored
    # kernel of the solver's program)
    gap = dist * w_g - r * (r * w_l)
    far = (w_l > 0) & (w_g > 0) & (gap > PEAK_WIDTHS * r * jnp.sqrt(jnp.maximum(w_g, 0.0)))
    return jnp.where(far, w_l if lap_first else w_g, a)


def _peaks(P, Q, a, level, unit=False):
    r"""The highest local maxima (up to ``MAX_PEAKS``; shape ``batch + (MAX_PEAKS,)``) of
    :math:`a\log p + (1-a)\log q` among the nodes of the plain rule, each moved to the vertex
    of the parabola through it and its two neighbours. Unused slots hold one of ``P``'s
    own points, a breakpoint already. ``unit=True`` promises ``a`` in [0, 1]: a built-in
    Laplace and Gaussian pair then has one peak, in closed form, and the end of its bulk
    towards the Laplace's centre (:func:`_laplace_gaussian_points`; shape ``batch + (2,)``).

    For ``a`` in ``[0, 1]`` the integrand has one peak, between the centres; for Rényi orders
    above 1 (:math:`q^{1-a}` grows away from ``q``'s centre) it can have two, out in the
    tails, where the plain rule's nodes are already sparse (Gaussian vs a Laplace of scale
    0.1, order 10: a peak 90 Laplace scales out, ~5e-4 relative error without it).
    """
    spare = _broadcast_pts(P, Q)[0][..., :1]
    closed = None
    if _laplace_gaussian(P, Q):  # (no spare slots: each is an empty piece's nodes)
        dtype = jnp.result_type(P.dtype, Q.dtype)
        peak = _laplace_gaussian_points(P, Q, a)
        closed = _not_own(P, Q, peak.astype(dtype), spare.astype(dtype))
        if unit:
            return closed
    x, _, _ = _nodes(P, Q, level, ascending=True)
    lp, lq = _log_probs_at(P, Q, x)
    f = cat.exponent(jnp.asarray(a)[..., None], lp, lq)
    x = jnp.broadcast_to(x, f.shape)
    mid = f[..., 1:-1]
    is_max = (mid > f[..., :-2]) & (mid >= f[..., 2:]) & jnp.isfinite(mid)
    weight = jnp.where(is_max, mid, -jnp.inf)
    _, i = lax.top_k(weight, min(MAX_PEAKS, weight.shape[-1]))
    used = jnp.take_along_axis(weight, i, -1) > -jnp.inf
    (x0, x1, x2), (f0, f1, f2) = (
        [jnp.take_along_axis(v, i + k, -1) for k in range(3)] for v in (x, f)
    )
    d10, d12 = x1 - x0, x1 - x2
    num = d10 * d10 * (f1 - f2) - d12 * d12 * (f1 - f0)
    den = d10 * (f1 - f2) - d12 * (f1 - f0)
    vertex = x1 - 0.5 * num / jnp.where(den != 0, den, 1.0)
    inside = (den != 0) & (vertex > x0) & (vertex < x2)
    spare = spare.astype(x.dtype)
    out = _not_own(P, Q, jnp.where(used, jnp.where(inside, vertex, x1), spare), spare)
    if closed is not None:
        # Rényi orders in [0, 1] of a built-in pair (``jd.renyi`` evaluates every order
        # here): the closed form's points, as for ``unit``. The vertex of the nodes' parabola
        # at a Gaussian-like peak far from the Laplace left its bulk at the end of one long
        # piece (see _laplace_gaussian_points): order 0.1 of Laplace(0, 1) vs N(100, 1e-3)
        # was 3.8e-8 relative off.
        out = jnp.where((jnp.asarray(a) <= 1)[..., None], closed, out)
    return out


def _not_own(P, Q, peaks, spare):
    """``peaks`` (``batch + (k,)``), those near one of the pair's own points replaced by
    ``spare``."""
    # A peak within 1e-3 of the narrower scale from one of the pair's own points is resolved
    # by that point's pieces (their nodes crowd towards it). As a piece end of its own it
    # made a sliver, with one fixed end and one moving with the parameters, whose
    # log-weight's second derivative cancelled catastrophically: a Density N(m, 1) with
    # centre = m had a spurious peak 2.4e-17 from it at m = 0, and Hessians of its Chernoff
    # information, alpha and log C were O(1) off (0.169 for 0.160; first derivatives right).
    own = jnp.concatenate(_broadcast_pts(P, Q), -1).astype(peaks.dtype)
    width = 1e-3 * jnp.minimum(P._quad_scale(), Q._quad_scale())[..., None, None]
    near = jnp.any(jnp.abs(peaks[..., :, None] - own[..., None, :]) <= width, -1)
    return jnp.where(near, spare, peaks)


def log_bc(P, Q, a, *, level=None, peaks=True, above_one=True):
    """``log C_a`` on nodes whose pieces also end at the integrand's peaks (:func:`_peaks`;
    ``peaks=False``: the plain rule). The peaks are breakpoints only, so they carry no
    gradient: moving a piece end changes the rule, not the integral. ``above_one=False``
    promises ``a`` in [0, 1] and skips the tests for a diverging integral (tails that do not
    decay, :func:`_singular_ends`), which only orders above 1 can have."""
    level = pair_level(P, Q, level)
    extra = lax.stop_gradient(_peaks(P, Q, a, level, unit=not above_one)) if peaks else None
    xs, lws, piece_ends = _node_groups(P, Q, level, extra, ends=True)
    x, lw, disjoint = jnp.concatenate(xs, -1), jnp.concatenate(lws, -1), _empty(P, Q)
    lp, lq = _log_probs_at(P, Q, x, lw, _live_point(P, Q, xs, lws))
    # P has mass where q = 0: p^a q^(1-a) is +inf there for a > 1 (as for KL, the order 1)
    p_outside = P.lower < Q.lower or P.upper > Q.upper
    if disjoint:
        out = jnp.full(jnp.shape(lw)[:-1], -jnp.inf, lw.dtype)
        if above_one:
            out = jnp.where(jnp.asarray(a) > 1, jnp.inf, out)
        return out
    a_ = jnp.asarray(a)[..., None]
    expo = cat.exponent(a_, lp, lq)
    direct = logsumexp(lw + expo, axis=-1)
    # Nodes whose every term underflows (w p, w q, w p^a q^(1-a), times the order) count as
    # a common zero of p and q in the deficit. Far out in a tail (log p ~ -1e19) two
    # formulas of one density differ by their rounding, |log p/q| ~ 2e3, which made the
    # deficit refuse orders above 1 (see categorical._deficit_any_order) and sent
    # near-identical pairs to the direct form, ~1e-15 absolute: Rényi divergences of a
    # Density N(0, 1e-100) and the Gaussian came out -8e-15 (order 2), of two Density
    # N(0, 3) 3e-9 apart 0 for 1e-18.
    # (Only with above_one: the solver's calls, a in [0, 1], compile 3 kernels fewer.)
    if above_one:
        log_tiny = math.log(jnp.finfo(lw.dtype).tiny)
        top = jnp.maximum(jnp.maximum(lp, lq), expo) + fm.log(jnp.maximum(jnp.abs(a_), 1.0))
        gone = lw + top < log_tiny
        dp, dq = jnp.where(gone, -jnp.inf, lp), jnp.where(gone, -jnp.inf, lq)
    else:
        dp, dq = lp, lq
    deficit = cat._deficit_any_order(a_, dp, dq, weights=jnp.exp(lw))
    if (P.lower, P.upper) != (Q.lower, Q.upper):
        deficit = jnp.full_like(deficit, jnp.inf)  # the identity needs both masses on the nodes
    out = cat.combine(a, direct, deficit)
    if not above_one:  # a in [0, 1]: the integral converges (p^a q^(1-a) <= p + q)
        return out
    # a > 1 (Rényi orders above 1): along an infinite tail, p^a q^(1-a) can decay like a
    # power r^-s of the distance r from the tail's start (heavy-tailed densities), or not at
    # all. The two outermost tail nodes, ~3e12 length scales out and du ~ 0.9 apart in
    # log r, give s = (e_prev - e_last)/du. The integral diverges where s <= 1 (so does a
    # tail that grows or stays flat: exponentials whose rates combine to zero). For s > 1
    # the rule misses the tail beyond its last node, and its sum there, in the exp-sinh
    # variable t, is a geometric series (rate L per unit t) where the integral is not: it
    # gets f r/(s - 1) (the integral from the last node on) minus the sum's excess over
    # the integral up to that node, w f (1/(1 - e^-Lh) - 1/(Lh)) (w f: the last node's
    # term). Cauchy vs t(3) at order 1.5, s = 1, came out finite (3.67); at 1.45, s = 1.1,
    # 2.1389 for 2.2402. An exponential tail drops by its rate times ~1e12 between the two
    # nodes: s ~ 1e12, and the correction underflows to nothing. (Rounding: the exponent's
    # terms a lp and (1 - a) lq are ~1e12 there in an exponential tail, ~60 in a power law.)
    eps = jnp.finfo(expo.dtype).eps
    growing = jnp.zeros(out.shape, bool)
    log_scale = 0.5 * (fm.log(P._quad_scale()) + fm.log(Q._quad_scale()))  # the tails' (_nodes)
    extra = jnp.zeros(out.shape, out.dtype)  # the corrections, in units of C
    for last, prev in _outer_tail_nodes(P, Q, level):
        size = jnp.abs(a_[..., 0] * lp[..., last]) + jnp.abs((1.0 - a_[..., 0]) * lq[..., last])
        diverges, rest = _tail_rest(
            expo[..., last], expo[..., prev], lw[..., last], log_scale, level, 64 * eps * size, out
        )
        growing = growing | diverges
        extra = extra + rest
    out = jnp.where((jnp.asarray(a) > 1) & (extra > -1.0), out + fm.log1p(extra), out)
    growing = growing | _singular_ends(x, xs, piece_ends, lw, expo, _finite_bounds(P, Q))
    growing = growing | p_outside
    if isinstance(P, Laplace) and isinstance(Q, Gaussian):
        # p^a q^(1-a) ~ e^((a - 1) x^2/(2 s^2) - a|x|/b): it diverges at every order above 1,
        # also where the growth sets in beyond the last tail node (order 1 + 1e-7 of scales 1
        # and 1e4, order 2 of 1 and 1e10: finite)
        growing = jnp.ones_like(growing)
    return jnp.where((jnp.asarray(a) > 1) & growing, jnp.inf, out)


def _tail_rest(end, prev, lw_last, log_scale, level, tol, unit=0.0):
    """An infinite tail's power law, from its log-integrand at the two outermost nodes
    (``end``, ``prev``; ``lw_last``: the last node's log-weight): whether the integral
    diverges (``s <= 1`` within ``tol``), and the missing rest in units of ``e^unit`` (see
    :func:`log_bc`: the integral from the last node on, less the excess of the rule's sum
    over the integral up to it; 0 where ``end`` is ``-inf``)."""
    u_last, du, du_dt, tanh_t, h = _tail_steps(level)
    slope = prev - end  # s du
    diverges = (slope <= du + tol) & (end > -jnp.inf)
    use = ~diverges & (end > -jnp.inf)
    s = jnp.where(use, slope / du, 2.0)
    lh = ((1.0 - s) * du_dt + tanh_t) * h  # L h
    small = jnp.abs(lh) < 1e-3
    # beyond |L h| = 40 the excess is its limit to rounding (e^-40 ~ 4e-18); computed there
    # as the formula, it was right but its derivative nan (expm1 overflowing in it: a
    # Gaussian-tailed integrand has s ~ 1e25 at the last node), and every gradient of a
    # log_bc off [0, 1] and of a Rényi divergence of a Density with it
    big = jnp.abs(lh) > 40.0
    safe = jnp.where(small | big, 1.0, lh)
    limit = jnp.where(lh > 0, 1.0, 0.0) - 1.0 / jnp.where(big, lh, 1.0)
    excess = jnp.where(
        small, 0.5 + lh / 12.0, jnp.where(big, limit, -1.0 / jnp.expm1(-safe) - 1.0 / safe)
    )
    rel = jnp.where(use, end - unit, -jnp.inf)
    rest = jnp.exp(rel + log_scale + u_last) / (s - 1.0) - jnp.exp(rel + lw_last) * excess
    return diverges, rest


@functools.cache
def _tail_steps(level: int) -> tuple[float, float, float, float, float]:
    """``(u, du, du/dt, tanh t, h)`` at the outermost node of the exp-sinh tails
    (:func:`_rules`): ``u = log r`` (``r`` in length scales from the tail's start), its
    distance from the node before, and the rule's variable ``t`` and step ``h``."""
    es_logx = _rules(level)[3]
    t = math.asinh(es_logx[-1] / (0.5 * math.pi))
    du = float(es_logx[-1] - es_logx[-2])
    return float(es_logx[-1]), du, 0.5 * math.pi * math.cosh(t), math.tanh(t), 2.0**-level


def _singular_ends(x, xs, piece_ends, lw, expo, bounds):
    r"""Whether the log-integrand ``expo`` has a non-integrable singularity at a piece end
    or a finite support bound (batch-shaped bools; for :func:`log_bc` at ``a > 1``).
    ``xs``, ``piece_ends``: :func:`_node_groups` with ``ends``; ``x``, ``lw``, ``expo``:
    over the concatenated nodes; ``bounds``: the finite support bounds.

    Next to an end at distance :math:`d` an integrand :math:`\sim d^{-s}` is integrable iff
    :math:`s < 1`. From the live node nearest an end, at :math:`d_0`, and the nearest one
    farther out, at :math:`d_1`, :math:`s = (e_0 - e_1)/\log(d_1/d_0)`. At a support bound
    where ``q`` vanishes like :math:`d^k` and ``p`` does not, :math:`p^a q^{1-a} \sim
    d^{-(a-1)k}`: U(0, 1) against ``2x`` at order 2 diverges (:math:`s = 1`; its quadrature
    came out 2.99), at order 1.5 (:math:`s = 1/2`) it converges, to :math:`\sqrt 2`. Ends
    where the integrand is smooth have :math:`s \approx 0`. The bounds are judged over all
    nodes too: a breakpoint next to one (a peak of the integrand, :func:`_peaks`) can leave
    a piece too short to resolve. Where the exponents' rounding could move the estimate by
    1/4 (a log-integrand ~1e14 in float64, far out in a tail, where it is negligible) an end
    is not judged. An :math:`s` of 1 with a logarithmic factor (``q ~ x sqrt(-log x)``) is
    beyond two nodes: it reads as below 1.
    """
    eps = jnp.finfo(expo.dtype).eps
    live_all = lw > -jnp.inf

    def blows_up(d, live, e):  # (..., pieces, nodes) -> (...)
        shape = jnp.broadcast_shapes(d.shape, live.shape, e.shape)
        d, live, e = (jnp.broadcast_to(v, shape) for v in (d, live, e))
        far = jnp.inf
        k0 = jnp.argmin(jnp.where(live, d, far), axis=-1, keepdims=True)
        take = functools.partial(jnp.take_along_axis, axis=-1)
        d0 = take(d, k0)
        # the nearest one farther out: near an end other than 0 consecutive nodes can round
        # to the same point (float32 at 5: spacing 5e-7)
        k1 = jnp.argmin(jnp.where(live & (d > d0), d, far), axis=-1, keepdims=True)
        d1 = take(d, k1)
        e0, e1 = take(e, k0), take(e, k1)
        log_ratio = fm.log(jnp.where(d0 > 0, d1 / jnp.where(d0 > 0, d0, 1.0), 1.0))
        tol = 64 * eps * (jnp.abs(e0) + jnp.abs(e1))
        judged = take(live, k0) & take(live, k1) & (d1 > d0) & (d0 > 0)
        judged = judged & (tol < 0.25 * log_ratio)
        out = judged & (e1 > -jnp.inf) & (e0 - e1 >= log_ratio - tol)
        return jnp.any(out[..., 0], axis=-1)

    out = jnp.zeros(lw.shape[:-1], bool)
    for b in bounds:
        out = out | blows_up(
            jnp.abs(x - b)[..., None, :], live_all[..., None, :], expo[..., None, :]
        )
    start = 0
    for xg, (left, right) in zip(xs, piece_ends, strict=True):
        n = xg.shape[-1]
        sl = slice(start, start + n)
        start += n
        # every group as (..., pieces, nodes)
        batch = jnp.broadcast_shapes(xg.shape[:-1], expo.shape[:-1])
        if right is None:  # a tail: its inner end only
            ends = [left[..., None]]
            shape = batch + (1, n)
        else:
            ends = [left, right]
            m = left.shape[-2]
            shape = batch + (m, n // m)
        px, plive, pe = (
            jnp.broadcast_to(v, batch + (n,)).reshape(shape)
            for v in (xg, live_all[..., sl], expo[..., sl])
        )
        for end in ends:
            out = out | blows_up(jnp.abs(px - end), plive, pe)
    return out


@jax.jit
def log_mass(D):
    """The log of the integral of ``exp(D.log_prob)`` on ``D``'s own rule (batch-shaped): 0
    to rounding where the rule resolves a normalised density (``Density._check_mass``).

    Nodes without weight (the empty piece between ``D``'s two copies of its ``centre``, the
    nodes of a piece that round onto its end) are left out, not summed as ``-inf + log p``:
    where the density is infinite there (Gamma(1/2) with ``lower`` 0 and ``centre`` 0,
    ``|x|^(-1/2)`` at its ``centre``) that was ``nan``, and the constructor refused a
    normalised density ("integrates exp(log_prob) to nan")."""
    x, lw, _ = _nodes(D, D, pair_level(D, D))
    terms = lw + _log_prob_at(D, x)
    return logsumexp(jnp.where(lw > -jnp.inf, terms, -jnp.inf), axis=-1)


def log_bc_unit(P, Q, a, *, level=None):
    """:func:`log_bc` for ``a`` in [0, 1] (:func:`jaxdp.log_bc`, the Bhattacharyya and
    Hellinger distances), with the integrand's peak as a breakpoint: on the plain rule, a
    peak ~1 length scale wide midway between two Gaussian-tailed densities 100 scales apart
    falls between nodes ~2.5 scales apart (5e-5 relative error; 4e-7 at 60 scales). Built-in
    Laplace-vs-Gaussian pairs need it too, once they are ~1000 Laplace scales apart: on the
    plain rule ``log C_a`` of Laplace(0, 1) and N(5000, 1) was 2.4e-5 off at ``a = 0.999``,
    of Laplace(0, 0.1) and N(1000, 1) 5.7e-6 at 0.9 (against the erfc closed form)."""
    return log_bc(P, Q, a, level=level, peaks=True, above_one=False)


def log_bc_solver(P, Q, a, *, level=None):
    """:func:`log_bc` for ``a`` in [0, 1] on the plain rule, for the Chernoff solver. Finding
    the peaks would double the cost of each evaluation, and they move with ``a``: the solver
    instead solves again on the plain rule of the pair with the peaks at its first answer
    as breakpoints (:func:`peak_points`; ``jaxdp.chernoff``)."""
    return log_bc(P, Q, a, level=level, peaks=False, above_one=False)


def peak_points(P, Q, a, *, level=None):
    """The integrand's peaks at ``a`` in [0, 1] (:func:`_peaks`: shape ``batch +
    (MAX_PEAKS,)``, or ``batch + (2,)`` for a built-in Laplace and Gaussian), as
    breakpoints: no gradient."""
    level = pair_level(P, Q, level)
    return lax.stop_gradient(_peaks(P, Q, a, level, unit=True))


def kl(P, Q, *, level=None):
    r""":math:`D(P\|Q)` on nodes that also cover both bulks (``_nodes(..., bulk=True)``)."""
    level = pair_level(P, Q, level)
    # nodes cover only the common support: when supports differ the identity behind the
    # phi form lacks mass, so integrate p log(p/q) directly; P's mass outside supp Q -> +inf
    normalized = (P.lower, P.upper) == (Q.lower, Q.upper)
    out = 0.0
    diverges = False
    log_scale = fm.log(jnp.maximum(P._quad_scale(), Q._quad_scale()))  # the tails' (bulk)
    xs, lws = _node_groups(P, Q, level, bulk=True)
    live_point = _live_point(P, Q, xs, lws)
    tails = [math.isinf(b) for b in _support(P, Q)[::-1]]  # the upper tail's group first
    for x, lw, tail in zip(xs, lws, [False] * (len(xs) - 2) + tails, strict=True):
        lp, lq = _log_probs_at(P, Q, x, lw, live_point)
        if not (isinstance(P, Density) or isinstance(Q, Density)):
            # built-in families are positive on the whole line: a -inf log-density is an
            # overflowed (x/s)^2 far out in a tail (float32, scale ratios ~1e8), not a zero
            # (as one, KL(Lap(0, 1) || N(0, 1e-8)) was inf for ~1e16)
            big = jnp.finfo(lq.dtype).max
            lp, lq = jnp.maximum(lp, -big), jnp.maximum(lq, -big)
        # (empty pieces, e.g. ends clipped to a bound, carry lw = -inf and may sit where a
        # density vanishes: 0 * inf)
        phi = cat.kl_terms(lp, lq, normalized=normalized)
        terms = _weighted(P, Q, lw, phi)
        out = out + jnp.sum(terms, axis=-1)
        if tail:
            # A convergent tail's contributions fall off at the outermost nodes (~1e12
            # scales out); where they do not, the integral diverges (a heavy-tailed P
            # against a lighter Q: KL(Cauchy || Laplace), whose integrand ~ 1/(pi x), came
            # out 16.6, against a Gaussian 1.2e12)
            last, prev = jnp.abs(terms[..., -1]), jnp.abs(terms[..., -2])
            diverges = diverges | ((last >= prev) & (last > 0))
            # a power-law tail that converges slowly: the rest beyond the last node, as for
            # log_bc (KL(t(1.2) || Laplace), integrand ~ x^-1.2, was 5.3e-3 short)
            phi = phi[..., -2:]
            positive = (phi[..., 0] > 0) & (phi[..., 1] > 0) & (lw[..., -1] > -jnp.inf)
            log_phi = fm.log(jnp.where(positive[..., None], phi, 1.0))
            end = jnp.where(positive, log_phi[..., 1], -jnp.inf)
            eps = jnp.finfo(log_phi.dtype).eps
            _, rest = _tail_rest(
                end, log_phi[..., 0], lw[..., -1], log_scale, level, 64 * eps * jnp.abs(end)
            )
            out = out + rest
    if P.lower < Q.lower or P.upper > Q.upper or _empty(P, Q):
        return jnp.full(out.shape, jnp.inf, out.dtype)
    return jnp.where(diverges, jnp.inf, out)


def _weighted(P, Q, lw, term):
    """``exp(lw) * term`` on the nodes with weight, 0 elsewhere (:func:`kl`, :func:`tv`).
    For a pair with a :class:`Density` also 0 where ``term`` is 0: the outermost tail
    nodes of a Density of scale ~1e27 in float32 (~1e297 in float64), ~2.5e12 scales out,
    overflow to ``inf``, and so do their weights ``exp(lw)``, where both densities vanish:
    ``inf * 0`` made KL and TV ``nan``. (Built-in families come rescaled to scale ~1,
    ``coefficient.standardize``: their programs stay as they were.)"""
    live = lw > -jnp.inf
    if not (isinstance(P, Density) or isinstance(Q, Density)):
        return jnp.where(live, jnp.exp(lw) * term, 0.0)
    live = live & (term != 0)
    # (the weight masked too: an unused inf * 0 makes the gradient nan)
    return jnp.where(live, jnp.exp(jnp.where(live, lw, 0.0)) * term, 0.0)


#: :func:`tv` makes at most this many crossings of ``p`` and ``q`` quadrature breakpoints.
MAX_CROSSINGS = 8


def _crossings(P, Q, level):
    r"""Points where the sign of :math:`p - q` changes (shape ``batch + (MAX_CROSSINGS,)``,
    unordered): each found between two neighbouring nodes of the plain rule, then located
    by bisection to the spacing of the floats. Where there are more, those next to the
    largest density are kept; unused slots hold one of ``P``'s own points, a breakpoint
    already.

    Two crossings between the same two nodes are missed; the area between them is second
    order in their distance, like the error of a crossing placed that far off.
    """
    x, _, _ = _nodes(P, Q, level, bulk=True, ascending=True)
    lp, lq = _log_probs_at(P, Q, x)
    above = lp > lq
    change = above[..., 1:] != above[..., :-1]
    top = jnp.maximum(lp, lq)
    if isinstance(P, Density) or isinstance(Q, Density):
        # not into nodes where both densities vanish (|p - q| is 0 on), such as tail nodes
        # that overflowed to inf (a Density of scale ~1e27 in float32): bisected towards
        # them, a spurious crossing ~1e38 out started the tail there (TV 1.3e-5 off)
        gone = top == -jnp.inf
        change = change & ~gone[..., 1:] & ~gone[..., :-1]
    weight = jnp.where(change, jnp.maximum(top[..., 1:], top[..., :-1]), -jnp.inf)
    k = min(MAX_CROSSINGS, change.shape[-1])
    _, i = lax.top_k(weight, k)
    used = jnp.take_along_axis(weight, i, -1) > -jnp.inf
    lo = jnp.take_along_axis(x, i, -1)
    hi = jnp.take_along_axis(x, i + 1, -1)
    left_above = jnp.take_along_axis(above, i, -1)

    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * lo + 0.5 * hi  # no overflow for brackets far out in a tail
        lpm, lqm = _log_probs_at(P, Q, mid)
        right = (lpm > lqm) == left_above
        return jnp.where(right, mid, lo), jnp.where(right, hi, mid)

    # 2**-(2 nmant + 8) of the bracket's width: far below what matters, as the error of a
    # misplaced crossing is second order in its distance (float64: 112 halvings)
    steps = 2 * jnp.finfo(x.dtype).nmant + 8
    lo, hi = lax.fori_loop(0, steps, bisect, (lo, hi))
    spare = _broadcast_pts(P, Q)[0][..., :1].astype(x.dtype)
    return jnp.where(used, 0.5 * lo + 0.5 * hi, spare)


def _moving_crossings(P, Q, cross):
    r"""The crossings ``cross`` (found without gradients), with the derivative of the root
    :math:`c(\theta)` of :math:`g = \log p - \log q` (implicit function theorem:
    :math:`c' = -\partial_\theta g / \partial_x g`), as ``c + (t - stop_gradient(t))``
    with ``t = -g(c)/stop_gradient(g_x(c))``: the same values. Held fixed, they made
    :func:`tv`'s second derivatives wrong (Laplace vs Gaussian: d2/dmu2 -0.235 for -0.103;
    first derivatives right). Unused slots (``P``'s own point, where :math:`g` is not 0)
    and crossings where :math:`g_x` is 0 or not finite stay fixed."""
    c = lax.stop_gradient(cross)
    scale = jnp.minimum(P._quad_scale(), Q._quad_scale())[..., None]

    def gap(x):
        lp, lq = _log_probs_at(P, Q, x)
        return lp - lq

    g = gap(c)
    slope = lax.stop_gradient(jax.jvp(gap, (c,), (jnp.ones_like(c),))[1])
    g_ = lax.stop_gradient(g)
    ok = (slope != 0) & jnp.isfinite(slope) & jnp.isfinite(g_)
    # a root: bisected to the floats' spacing, |g / g_x| is its distance from the crossing
    ok = ok & (jnp.abs(g_) <= 1e-8 * jnp.abs(slope) * (jnp.abs(c) + scale))
    t = -jnp.where(ok, g, 0.0) / jnp.where(ok, slope, 1.0)
    return c + (t - lax.stop_gradient(t))


def tv(P, Q, *, level=None):
    r"""Total variation :math:`\tfrac12\int|p - q|` on nodes whose pieces also end at the
    crossings of ``p`` and ``q`` (:func:`_crossings`), where :math:`|p - q|` has kinks: each
    piece's integrand is then as smooth as the densities, and the rule converges as fast as
    for :func:`log_bc` (on the plain nodes the kinks cost ~1e-4 relative). The integrand
    vanishes at a crossing, so moving it changes the integral only at second order
    (Leibniz rule), but that order is the Hessian's: the crossings move with the parameters
    (:func:`_moving_crossings`)."""
    level = pair_level(P, Q, level)
    cross = _moving_crossings(P, Q, _crossings(P, Q, level))
    same_support = (P.lower, P.upper) == (Q.lower, Q.upper)
    out = 0.0
    xs, lws = _node_groups(P, Q, level, cross, bulk=True)
    live_point = _live_point(P, Q, xs, lws)
    for x, lw in zip(xs, lws, strict=True):
        lp, lq = _log_probs_at(P, Q, x, lw, live_point)
        live = lw > -jnp.inf  # (empty pieces: see kl)
        if same_support:
            terms = _weighted(P, Q, lw, cat.abs_diff(lp, lq))
            out = out + 0.5 * jnp.sum(terms, axis=-1)
        else:  # mass outside the common support counts fully: TV = 1 - int min(p, q)
            terms = jnp.where(live, jnp.exp(lw + jnp.minimum(lp, lq)), 0.0)
            out = out - jnp.sum(terms, axis=-1)
    out = out if same_support else 1.0 + out
    if _empty(P, Q):
        return jnp.ones(out.shape, out.dtype)
    # (the rule's rounding lifts it above 1 for pairs far apart: 1 + 2e-15 at 1e3 scales,
    # 1 + 4e-10 at 1e8)
    return jnp.minimum(out, 1.0)


def derivs_setup(P, Q, *, level=None):
    """Nodes and log-densities, and every :func:`derivs` term that does not depend on
    ``a``, computed once per solve."""
    level = pair_level(P, Q, level)
    same_support = (P.lower, P.upper) == (Q.lower, Q.upper)
    lw, lp, lq, _ = _log_probs(P, Q, level)
    both = jnp.isfinite(lp) & jnp.isfinite(lq)
    l = jnp.where(both, lp - lq, 0.0)
    # the log-integrand is a (lw + lp) + (1 - a)(lw + lq) on the live nodes and -inf
    # elsewhere (a vanishing density or an empty piece: the one-sided limits of
    # ``cat.exponent`` for a in [0, 1]); not lw + lq + a l, whose rounding ~eps |lq| can
    # exceed the log-integrand itself near a = 1
    live = both & (lw > -jnp.inf)
    ends = (jnp.where(live, lw + lp, 0.0), jnp.where(live, lw + lq, 0.0), live)
    if not same_support:
        return ends, l, both, None
    w = jnp.where(lw > -jnp.inf, jnp.exp(lw), 0.0)  # empty pieces carry nothing
    p, q = jnp.exp(lp), jnp.exp(lq)
    small = both & (jnp.abs(l) <= 1.0)
    ls = jnp.where(small, l, 0.0)
    wq = jnp.where(small, w * q, 0.0)
    # the nodes with |l| > 1 (or a zero density) enter the compensated mean through their
    # masses only: their sum and the rounding bound of that sum
    pq = jnp.where(small, 0.0, w * (p - q))
    comp = (wq * ls, wq * sp.phi(ls), jnp.sum(pq, -1), jnp.sum(jnp.abs(pq), -1))
    return ends, l, both, (ls, small, *comp)


def derivs(consts, a):
    r"""First and second :math:`a`-derivatives of :math:`\log C_a` on the nodes.

    They are the mean and variance of :math:`\ell = \log p/q` under the tilted weights
    :math:`\pi_i = w_i p_i^a q_i^{1-a}/C_a`. The mean has two forms (see
    :func:`jaxdp.kernels.categorical.moment_derivs`): the plain tilted mean
    :math:`\sum_i \pi_i \ell_i`, and the compensated
    :math:`\sum_i w_i[\ell_i p_i^a q_i^{1-a} - (p_i - q_i)]/C_a` (the subtracted masses
    sum to zero), whose terms are second order in :math:`\ell` for near-identical pairs.

    Neither is accurate everywhere. The compensated form divides by :math:`C_a` the absolute
    rounding error of its mass terms, :math:`\sim\epsilon\sum_i w_i|p_i - q_i| \le
    2\epsilon` (plus the quadrature's own mass error): for a Laplace and a Gaussian 30
    scales apart, :math:`C_a \approx e^{-22}`, and float32 rounding (~1e-7) over
    :math:`e^{-22}` made :math:`f'` (~20 in size) wrong by tens to hundreds, so the solver
    bisected to its cap (``converged=False``, information 10% off); float64 broke the same
    way from ~100 scales (:math:`C_a \approx e^{-85}`), there often "certified" at a wrong
    end point. The plain form's error, :math:`\epsilon\sum_i\pi_i|\ell_i|`, swamps
    instead the :math:`O(\ell^2)` mean of a near-identical pair. So both are formed and,
    per pair, the one with the smaller rounding bound is kept. Nodes with
    :math:`|\ell| > 1` carry the same :math:`\ell_i\pi_i` in both forms, so the bounds
    compare over the nodes with :math:`|\ell| \le 1` only, multiplied through by
    :math:`C_a` (an underflowing :math:`C_a`, as in float32 beyond ~90 nats, selects the
    plain mean).

    Everything independent of ``a`` comes from :func:`derivs_setup`; an evaluation costs one
    ``exp`` and one ``expm1`` per node.
    """
    (lwp, lwq, live), l, both, comp = consts
    a_ = jnp.asarray(a)[..., None]
    e = jnp.where(live, a_ * lwp + (1.0 - a_) * lwq, -jnp.inf)
    # logsumexp sharing its exponentials with the tilted weights; the shift m cancels
    # (also in tangents, hence stop_gradient)
    m = lax.stop_gradient(jnp.max(e, axis=-1, keepdims=True))
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    z = jnp.exp(e - m)
    s = jnp.sum(z, axis=-1, keepdims=True)
    pi = z / s
    pl = pi * l
    d1 = jnp.sum(pl, axis=-1)
    if comp is not None:
        ls, small, wq_ls, wq_phi, mass, mass_err = comp
        # q [l expm1(a l) - phi(l)]  ==  l p^a q^(1-a) - (p - q), without cancellation
        t = wq_ls * jnp.expm1(a_ * ls) - wq_phi
        c = (s * jnp.exp(m))[..., 0]
        near = jnp.sum(jnp.abs(t), -1) + mass_err < c * jnp.sum(jnp.abs(pl) * small, -1)
        far = jnp.sum(jnp.where(small, 0.0, pl), axis=-1)
        # (the guard keeps an underflowed c from making the unused branch's gradient nan)
        compensated = (jnp.sum(t, -1) - mass) / jnp.where(near, c, 1.0) + far
        d1 = jnp.where(near, compensated, d1)
    # (sqrt(pi) |l - d1|)^2: far quadrature nodes carry pi = 0 and |l| ~ 1e24, whose
    # square overflows float32 (0 * inf would poison the sum)
    d2 = jnp.sum(jnp.square(sp.sqrt_weight(pi) * (l - d1[..., None])) * both, axis=-1)
    return d1, d2

r"""The paper's formulas against the exact quantities: figure data and the findings table.

Everything here is computed at run time from the library: the paper's closed forms from
:mod:`jaxdp.paper` (each *as printed*), the exact suprema from :mod:`jaxdp.conversions`, the
exact membership advantages from :mod:`jaxdp.membership`, and the exact divergences of concrete
pairs from the engine (:func:`jaxdp.chernoff`, :func:`jaxdp.kl`). This module holds no formula of
its own: it evaluates grids (one jitted call per family of curves), compares, locates the
points where a formula stops being what it claims, and writes the table.

Public entry points:

* :func:`fig2_data`, :func:`fig3_data`, :func:`membership_data` — the curves of the paper's
  Figures 2-5, with the exact curves beside them (plotted by :mod:`jaxdp.plots`).
* :func:`findings` — one :class:`Finding` per paper formula (and reading): the exact quantity it
  stands for, the largest relative gap on the grid, and the ranges where it fails (a bound
  below the exact value, a negative value, undefined, a claimed value that differs, or a
  claimed optimiser outside its claimed range), each range end located to ~1e-12 relative
  (float64; ~1e-6 on a float32 grid) by repeated subdivision of the grid cell where the
  failure begins or ends.
* :func:`write_table` — ``paper_vs_exact.md`` and ``paper_vs_exact.csv``.

Readings (how the paper's figures are read; see also :mod:`jaxdp.paper`):

* Figure 2 "Chernoff-Cuff" is (30) maximised over :math:`\alpha \in (0, 1)`
  (:func:`jaxdp.paper.eq30_max`); (31) and (32) are maximised over :math:`(0, 1]`
  (``eq31_max``, ``eq32_max``); "UB I"/"UB II" are the (31) objective at
  :math:`\alpha^*_{alt}` of (43) and at :math:`\alpha^*_{ub,I}` (``fig2_ub1``/``fig2_ub2``);
  the paper's "KL-Cuff" is (22) times :math:`(1 - \alpha)`, at an :math:`\alpha` it does not
  state (:func:`jaxdp.paper.fig2_kl_cuff`), so the figure here draws the KL bound (22)
  itself; the ":math:`\alpha = 0.5`" curve is the (30) objective at
  :math:`\alpha = 1/2`. All of them claim to bound the Chernoff information of an
  :math:`\varepsilon`-DP pair, whose exact supremum is :math:`\log\cosh(\varepsilon/2)`
  (the (30)-at-1/2 curve: the worst :math:`-\log C_{1/2}`, the same number).
* Figure 3: :math:`P = \mathrm{Lap}(0, s/\varepsilon)`, :math:`Q = \mathrm{Lap}(\Delta\mu,
  \theta s/\varepsilon)`; (34) claims :math:`D(P\|Q)`, (35) claims :math:`C(P, Q)`.
* Figures 4-5: the bounds (39)-(42) are evaluated at the composed budget :math:`n\varepsilon`
  and compared with the exact best advantage against ``n``-fold :math:`\varepsilon`-DP.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxdp import _checks, conversions, mechanisms, membership, paper
from jaxdp.chernoff import chernoff
from jaxdp.divergences import kl

__all__ = [
    "DEFAULT_POINTS",
    "EPS_RANGE",
    "Fig2Data",
    "Fig3Data",
    "Finding",
    "MembershipData",
    "atomic_writer",
    "eps_grid",
    "fig2_data",
    "fig3_data",
    "findings",
    "membership_data",
    "table_csv",
    "table_markdown",
    "write_atomic",
    "write_table",
]

#: Range of the privacy parameter (log-spaced grid) used by the figures and the table.
EPS_RANGE: tuple[float, float] = (1e-3, 10.0)
#: Grid points per curve in ``jaxdp reproduce`` (``--quick`` uses fewer).
DEFAULT_POINTS = 200
#: Figure 3: shifts in units of the sensitivity and scale ratios after the attack.
FIG3_SHIFTS: tuple[float, ...] = (1.0, 2.0, 3.0)
FIG3_THETAS: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0)
#: Figures 4-5: the delta of the second Erlingsson curve (40).
FIG45_DELTA = 1e-2

# A bound "fails" where it is below the exact value by more than this relative amount (the two
# sides are computed by different float64 expressions, so equality holds only to rounding); a
# claimed value "differs" beyond VALUE_RTOL.
BOUND_RTOL = 1e-12
VALUE_RTOL = 1e-9
# The same for a float32 grid (the library without jax_enable_x64): float32 rounding alone
# reached 2.3e-7 ((42) against the exact TV) and 3.4e-6 ((34) against jd.kl), which the float64
# tolerances reported as failures.
BOUND_RTOL_F32 = 1e-5
VALUE_RTOL_F32 = 3e-5


def _tolerances(dtype) -> tuple[float, float]:
    """``(bound, value)`` relative tolerances for values computed in ``dtype``."""
    if jnp.dtype(dtype) == jnp.float64:
        return BOUND_RTOL, VALUE_RTOL
    return BOUND_RTOL_F32, VALUE_RTOL_F32


def eps_grid(points: int = DEFAULT_POINTS, lo: float = EPS_RANGE[0], hi: float = EPS_RANGE[1]):
    """Log-spaced grid of ``points`` values in ``[lo, hi]`` (default dtype of jax).

    Raises:
        TypeError: ``points`` is not an integer.
        ValueError: ``points < 2``, or not ``0 < lo < hi`` with both finite, or ``lo``/``hi``
            at or beyond the ends of the dtype's normal range (a grid point 0 or inf).
    """
    if isinstance(points, bool) or not isinstance(points, int | np.integer):
        raise TypeError(f"points must be an integer, got {type(points).__name__}")
    if points < 2:
        raise ValueError(f"points must be >= 2, got {points}")
    # (a decreasing grid, or nan/inf ends, came back as a grid; lo <= 0: "math domain error")
    if not (0 < lo < hi < math.inf):
        raise ValueError(f"lo and hi must satisfy 0 < lo < hi < inf, got lo={lo!r}, hi={hi!r}")
    grid = jnp.logspace(math.log10(lo), math.log10(hi), points)
    # (a lo below the dtype's smallest normal number gave a first point 0 (XLA flushes
    # subnormals), a hi beyond float32's largest a last point inf; the ends of the range
    # themselves rounded past it)
    if not np.all(np.isfinite(grid) & (grid > 0)):
        fi = jnp.finfo(grid.dtype)
        raise ValueError(
            f"lo and hi must lie inside the normal range of {grid.dtype} ({fi.tiny:.4g} to "
            f"{fi.max:.4g}): the grid reached 0 or inf, got lo={lo!r}, hi={hi!r}"
        )
    return grid


def _np(x) -> np.ndarray:
    return np.asarray(jax.device_get(x), dtype=float)


# ---------------------------------------------------------------------------------------------
# Figure 2: Chernoff information of eps-DP pairs.


class Fig2Data(NamedTuple):
    """Curves of Figure 2 over ``eps`` (all numpy, shape ``(len(eps),)``; nats).

    Paper (as printed, :mod:`jaxdp.paper`): ``eq30`` ("Chernoff-Cuff"), ``eq31`` (C_ubI),
    ``eq32`` (C_ubII), ``eq72`` (C*_ub), ``ub1``/``ub2`` ("UB I"/"UB II"), ``eq22`` (the KL
    bound; the paper's "KL-Cuff" is it times 1 - alpha), ``eq30_half`` (the (30) objective
    at alpha = 1/2). Exact:
    ``exact_chernoff`` = log cosh(eps/2), ``exact_kl`` = eps tanh(eps/2), ``exact_half`` = the
    worst -log C_{1/2}. Engine: ``engine_chernoff``, ``engine_alpha``, ``engine_kl`` =
    :func:`jaxdp.chernoff` / :func:`jaxdp.kl` of binary randomized response (the extremal
    eps-DP pair), computed independently of the closed forms.
    """

    eps: np.ndarray
    eq30: np.ndarray
    eq31: np.ndarray
    eq32: np.ndarray
    eq72: np.ndarray
    ub1: np.ndarray
    ub2: np.ndarray
    eq22: np.ndarray
    eq30_half: np.ndarray
    exact_chernoff: np.ndarray
    exact_kl: np.ndarray
    exact_half: np.ndarray
    engine_chernoff: np.ndarray
    engine_alpha: np.ndarray
    engine_kl: np.ndarray
    engine_converged: np.ndarray


@jax.jit
def _fig2_family(eps):
    return (
        paper.eq30_max(eps),
        paper.eq31_max(eps),
        paper.eq32_max(eps),
        paper.eq72(eps),
        paper.fig2_ub1(eps),
        paper.fig2_ub2(eps),
        paper.eq22(eps),
        paper.eq30(eps, 0.5),
        conversions.max_chernoff_eps_dp(eps),
        conversions.max_kl_eps_dp(eps),
        conversions.max_neg_log_bc_eps_dp(eps, 0.5),
    )


@jax.jit
def _rr_engine(eps):
    P, Q = mechanisms.randomized_response(eps)
    r = chernoff(P, Q)
    return r.information, r.alpha, kl(P, Q), r.converged


def _check_eps(eps) -> jax.Array:
    """``eps`` as a 1-D array (the grid of the curves), refused (naming it) unless every value
    is positive and finite: the curves' jitted calls gave nan rows for eps <= 0 and nan,
    without a word (a string JAX's "Value 'a' with dtype <U1 is not a valid JAX array type",
    a single number :func:`fig3_data`'s "Too many indices")."""
    (eps,) = _checks.as_inexact(eps, names=("eps",))
    if eps.ndim != 1:
        raise ValueError(f"eps must be a sequence of numbers, got an array of shape {eps.shape}")
    _checks.check_positive("eps", eps)
    return eps


def _check_values(name: str, values, ndim: int) -> np.ndarray:
    """``values`` as a float64 numpy array of ``ndim`` dimensions (1: a sequence, 0: one
    number), refused naming ``name`` otherwise: a scalar ``shifts`` failed as "Too many
    indices: array is 0-dimensional", a string as "could not convert string to float", an
    array ``sensitivity`` as batch shapes of ``adversarial_laplace`` that do not broadcast."""
    arr = np.asarray(_checks.as_array(values, name), float)
    if arr.ndim != ndim:
        what = "a sequence of numbers" if ndim == 1 else "a single number"
        raise ValueError(f"{name} must be {what}, got an array of shape {arr.shape}")
    return arr


def fig2_data(eps) -> Fig2Data:
    """Evaluate Figure 2's curves on ``eps`` (> 0): two jitted calls.

    Raises:
        TypeError: ``eps`` is not real numbers.
        ValueError: an ``eps`` that is not positive and finite, or not 1-D.
    """
    eps = _check_eps(eps)
    paper_and_exact = _fig2_family(eps)
    engine = _rr_engine(eps)
    return Fig2Data(
        _np(eps), *map(_np, paper_and_exact), *map(_np, engine[:3]), np.asarray(engine[3])
    )


# ---------------------------------------------------------------------------------------------
# Figure 3: the attacked Laplace mechanism.


class Fig3Data(NamedTuple):
    """Curves of Figure 3: arrays of shape ``(len(shifts), len(thetas), len(eps))`` (nats).

    ``P = Lap(0, s/eps)``, ``Q = Lap(shift * s, theta * s/eps)`` with ``s = sensitivity``.
    ``eq34``/``eq35``: the paper's KL (34) and Chernoff (35) as printed; ``kl``/``chernoff``:
    exact (:func:`jaxdp.kl`, :func:`jaxdp.chernoff`); ``alpha``: the exact maximiser.
    """

    eps: np.ndarray
    shifts: np.ndarray
    thetas: np.ndarray
    sensitivity: float
    eq34: np.ndarray
    kl: np.ndarray
    eq35: np.ndarray
    chernoff: np.ndarray
    alpha: np.ndarray
    converged: np.ndarray


@jax.jit
def _fig3_family(eps, shift, theta, s):
    P, Q = mechanisms.adversarial_laplace(eps, sensitivity=s, shift=shift, theta=theta)
    r = chernoff(P, Q)
    b = s / eps
    return paper.eq34(shift, b, theta), kl(P, Q), paper.eq35(shift, b, theta), r


def fig3_data(
    eps,
    *,
    shifts: Sequence[float] = FIG3_SHIFTS,
    thetas: Sequence[float] = FIG3_THETAS,
    sensitivity: float = 1.0,
) -> Fig3Data:
    """Evaluate Figure 3's curves (one jitted call; ``shifts`` in units of ``sensitivity``).

    Raises:
        TypeError: an argument that is not real numbers.
        ValueError: ``eps``, ``thetas`` or ``sensitivity`` not positive and finite, or
            ``shifts`` not finite; ``eps``, ``shifts`` or ``thetas`` not 1-D, or
            ``sensitivity`` not a single number; a noise scale ``s/eps`` or
            ``theta * s/eps`` outside the float range.
    """
    eps = _check_eps(eps)
    shifts = _check_values("shifts", shifts, 1)
    thetas = _check_values("thetas", thetas, 1)
    sensitivity = float(_check_values("sensitivity", sensitivity, 0))
    _checks.check_finite("shifts", shifts)
    _checks.check_positive("thetas", thetas)
    _checks.check_positive("sensitivity", sensitivity)
    dtype = eps.dtype
    shift = jnp.asarray(shifts, dtype)[:, None, None] * sensitivity
    theta = jnp.asarray(thetas, dtype)[None, :, None]
    # (the pairs' own checks, which the jitted call skips: a noise scale s/eps or
    # theta*s/eps outside the float range, e.g. eps 1e-320, gave nan curves without a word)
    mechanisms.adversarial_laplace(
        eps[None, None, :], sensitivity=sensitivity, shift=shift, theta=theta
    )
    e34, d, e35, r = _fig3_family(eps[None, None, :], shift, theta, jnp.asarray(sensitivity, dtype))
    return Fig3Data(
        _np(eps),
        np.asarray(shifts, float),
        np.asarray(thetas, float),
        float(sensitivity),
        _np(e34),
        _np(d),
        _np(e35),
        _np(r.information),
        _np(r.alpha),
        np.asarray(r.converged),
    )


# ---------------------------------------------------------------------------------------------
# Figures 4-5: membership advantage.


class MembershipData(NamedTuple):
    """Curves of Figures 4-5 over the per-release ``eps`` (numpy, dimensionless advantages).

    ``bounds`` is :func:`jaxdp.membership.membership_bounds` (the paper's (39)-(42) at the
    composed budget ``n * eps`` with delta = 0, the exact worst case ``exact`` and the tight
    Chernoff bound ``chernoff_tight``); ``erlingsson_delta`` is (40) with ``delta``; ``laplace``
    the exact best advantage against ``n`` releases of the Laplace mechanism with
    ``b = s / eps`` (:func:`jaxdp.membership.best_advantage_laplace`).
    """

    eps: np.ndarray
    n: int
    delta: float
    bounds: membership.MembershipBounds
    erlingsson_delta: np.ndarray
    laplace: np.ndarray


def _membership_family(n: int):
    def family(eps, delta):
        bounds = membership.membership_bounds(eps, n)
        return bounds, paper.eq40(n * eps, delta), membership.best_advantage_laplace(eps, n).value

    return jax.jit(family)


_MEMBERSHIP: dict[int, Callable] = {}


def membership_data(eps, n: int, *, delta: float = FIG45_DELTA) -> MembershipData:
    """Evaluate Figures 4-5's curves for ``n`` releases (one jitted call per ``n``).

    Raises:
        TypeError: ``eps`` or ``delta`` is not real numbers.
        ValueError: an ``eps`` that is not positive and finite, or not 1-D, or ``delta``
            outside [0, 1] or not a single number (and ``n`` as
            :func:`jaxdp.membership.best_advantage_laplace` refuses it).
    """
    eps = _check_eps(eps)
    _checks.check_unit_interval("delta", _check_values("delta", delta, 0))
    # (checked before the cache lookup: True or 3.0 hit the cached family of n = 1 or 3 and
    # passed, a list or an array failed as "unhashable type")
    n = membership._check_n(n)
    if n not in _MEMBERSHIP:
        _MEMBERSHIP[n] = _membership_family(n)
    bounds, e40, lap = _MEMBERSHIP[n](eps, jnp.asarray(delta, eps.dtype))
    return MembershipData(
        _np(eps),
        int(n),
        float(delta),
        membership.MembershipBounds(*map(_np, bounds)),
        _np(e40),
        _np(lap),
    )


# ---------------------------------------------------------------------------------------------
# The findings table.


class Finding(NamedTuple):
    """One row of the findings table.

    Attributes:
        formula: the paper formula and its reading, e.g. ``"(30) max over alpha"``.
        claim: what the paper says it is.
        exact: the exact quantity it stands for, with the library function that computes it.
        kind: ``"upper bound"``, ``"value"`` or ``"range"`` (a claimed optimiser in ``(0, 1]``).
        x: name of the grid variable (``"eps"``: pure-DP parameter per release; ``"c"``: a
            Chernoff-DP budget in nats).
        grid: ``(min, max, points)`` of the log-spaced grid.
        max_abs_rel_gap: largest ``|paper - exact| / |exact|`` on the grid (NaN points skipped).
        at_x: where it is attained; ``paper_at_x``/``exact_at_x``: the two values there.
        min_rel_gap, max_rel_gap: the signed extremes of ``(paper - exact) / |exact|``.
        fails: ``((reason, intervals), ...)``: for each failure kind that occurs, the
            intervals ``(lo, hi)`` of ``x`` where it does; an end of the grid is reported as
            the grid end, an interior end is located to ~1e-12 relative (~1e-6 on a
            float32 grid).
        note: a short comment (what the gap means).
    """

    formula: str
    claim: str
    exact: str
    kind: str
    x: str
    grid: tuple[float, float, int]
    max_abs_rel_gap: float
    at_x: float
    paper_at_x: float
    exact_at_x: float
    min_rel_gap: float
    max_rel_gap: float
    fails: tuple[tuple[str, tuple[tuple[float, float], ...]], ...]
    note: str


class _Row(NamedTuple):
    formula: str
    claim: str
    exact: str
    kind: str
    x: str
    paper_fn: Callable  # x -> paper values, shape (..., len(x)) (jittable)
    exact_fn: Callable | None  # x -> exact values (jittable), None: use exact_grid only
    paper_grid: np.ndarray | None  # precomputed on the grid (else paper_fn(grid))
    exact_grid: np.ndarray | None
    note: str


def _predicates(kind: str, dtype="float64"):
    """Failure predicates ``(reason, f(paper, exact) -> bool)`` for a kind of claim, with the
    tolerances of ``dtype`` (:func:`_tolerances`).

    Arrays may carry leading axes (several parameter settings); a point fails if any setting
    does.
    """
    bound_rtol, value_rtol = _tolerances(dtype)

    def undefined(p, e):
        return ~np.isfinite(p)

    if kind == "upper bound":

        def below(p, e):
            return np.isfinite(p) & (p < e - bound_rtol * np.abs(e))

        def negative(p, e):
            return np.isfinite(p) & (p < 0)

        return (("below exact", below), ("negative", negative), ("undefined", undefined))
    if kind == "value":

        def differs(p, e):
            return np.isfinite(p) & (np.abs(p - e) > value_rtol * np.abs(e))

        return (("differs", differs), ("undefined", undefined))
    if kind == "range":

        def outside(p, e):
            return np.isfinite(p) & ((p <= 0) | (p > 1))

        return (("outside (0, 1]", outside), ("undefined", undefined))
    raise ValueError(f"unknown kind {kind!r}")


def _any_leading(mask: np.ndarray) -> np.ndarray:
    return mask.reshape(-1, mask.shape[-1]).any(axis=0)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Index runs ``[i, j]`` (inclusive) where a 1-D boolean mask is True."""
    runs, start = [], None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        if not m and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(mask) - 1))
    return runs


_SUBDIV = 64  # cells per bracket per refinement round
_SLOTS = 8  # brackets per row per call
_WIDTH = _SLOTS * (_SUBDIV + 1)  # every batched call has shape (rows, _WIDTH)
_ROUNDS = 12  # 64**12 >> 2**52: a bracket shrinks to rounding level well before


def _batched_evaluator(rows: Sequence[_Row], dtype):
    """One jitted function evaluating ``(paper, exact)`` of every row, row ``i`` at ``X[i]``.

    All rows are compiled together, once, for the single shape ``(len(rows), _WIDTH)``. Rows
    without ``exact_fn`` get zeros for the exact side (only their paper side is used).
    """

    def fn(X):
        out = []
        for i, row in enumerate(rows):
            p = row.paper_fn(X[i])
            e = row.exact_fn(X[i]) if row.exact_fn is not None else jnp.zeros_like(p)
            shape = jnp.broadcast_shapes(p.shape, e.shape)
            out.append((jnp.broadcast_to(p, shape), jnp.broadcast_to(e, shape)))
        return out

    jitted = jax.jit(fn)

    def evaluate(X: np.ndarray):
        return [(_np(p), _np(e)) for p, e in jitted(jnp.asarray(X, dtype))]

    return evaluate


def _evaluate_grid(rows: Sequence[_Row], grid: np.ndarray, dtype):
    """``(paper, exact)`` of each row on ``grid`` (padded to ``_WIDTH`` columns per call)."""
    if not rows:
        return []
    evaluate = _batched_evaluator(rows, dtype)
    pieces: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in rows]
    for start in range(0, len(grid), _WIDTH):
        x = grid[start : start + _WIDTH]
        X = np.tile(np.pad(x, (0, _WIDTH - len(x)), mode="edge"), (len(rows), 1))
        for i, (p, e) in enumerate(evaluate(X)):
            pieces[i].append((p[..., : len(x)], e[..., : len(x)]))
    return [
        (np.concatenate([a for a, _ in ps], -1), np.concatenate([b for _, b in ps], -1))
        for ps in pieces
    ]


class _Job(NamedTuple):
    row: int  # index into the rows being refined
    predicate: Callable
    bracket: list  # [lo, hi], updated in place


def _refine(rows: Sequence[_Row], jobs: Sequence[_Job], dtype) -> None:
    """Shrink every job's bracket around the point where its predicate switches.

    Each round evaluates ``_SUBDIV + 1`` log-spaced points in every active bracket, all rows
    and brackets in one batched call (more calls only if a row has more than ``_SLOTS``
    brackets), and keeps the first cell whose ends disagree. A bracket is done when it is
    ~1e-13 relative wide, or when no switch is seen any more (rounding noise at that scale).
    """
    if not jobs:
        return
    evaluate = _batched_evaluator(rows, dtype)
    t = np.linspace(0.0, 1.0, _SUBDIV + 1)
    done = [False] * len(jobs)
    for _ in range(_ROUNDS):
        for k, job in enumerate(jobs):
            lo, hi = job.bracket
            done[k] = done[k] or hi - lo <= 1e-13 * hi
        active = [k for k in range(len(jobs)) if not done[k]]
        if not active:
            break
        per_row: dict[int, list[int]] = {}
        for k in active:
            per_row.setdefault(jobs[k].row, []).append(k)
        calls = max(-(-len(ks) // _SLOTS) for ks in per_row.values())
        for c in range(calls):
            X = np.full((len(rows), _WIDTH), float(jobs[active[0]].bracket[0]))
            slots: list[tuple[int, int, np.ndarray]] = []  # (job, slot, x)
            for r, ks in per_row.items():
                for slot, k in enumerate(ks[c * _SLOTS : (c + 1) * _SLOTS]):
                    lo, hi = jobs[k].bracket
                    x = np.exp(np.log(lo) + t * (np.log(hi) - np.log(lo)))
                    x[0], x[-1] = lo, hi
                    X[r, slot * (_SUBDIV + 1) : (slot + 1) * (_SUBDIV + 1)] = x
                    slots.append((k, slot, x))
            values = evaluate(X)
            for k, slot, x in slots:
                p, e = values[jobs[k].row]
                cols = slice(slot * (_SUBDIV + 1), (slot + 1) * (_SUBDIV + 1))
                mask = _any_leading(jobs[k].predicate(p[..., cols], e[..., cols]))
                switch = np.nonzero(mask[1:] != mask[:-1])[0]
                if len(switch) == 0:
                    done[k] = True
                    continue
                i = switch[0]
                jobs[k].bracket[:] = [float(x[i]), float(x[i + 1])]


def _summary(p: np.ndarray, e: np.ndarray, grid: np.ndarray):
    """Largest |relative gap| (and where), and the signed extremes, over finite points."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = (p - e) / np.abs(e)
    finite = np.isfinite(rel)
    if not finite.any():
        return (math.nan,) * 6
    flat = np.where(finite, np.abs(rel), -np.inf).reshape(-1, len(grid))
    k, i = np.unravel_index(np.argmax(flat), flat.shape)
    return (
        float(flat[k, i]),
        float(grid[i]),
        float(p.reshape(-1, len(grid))[k, i]),
        float(e.reshape(-1, len(grid))[k, i]),
        float(np.min(rel[finite])),
        float(np.max(rel[finite])),
    )


def _findings(rows: Sequence[_Row], grid: np.ndarray, dtype) -> list[Finding]:
    # 1. Grid values: precomputed by the figure families, the rest in one batched call.
    missing = [i for i, r in enumerate(rows) if r.paper_grid is None or r.exact_grid is None]
    evaluated = dict(
        zip(missing, _evaluate_grid([rows[i] for i in missing], grid, dtype), strict=True)
    )
    values = []
    for i, row in enumerate(rows):
        p, e = row.paper_grid, row.exact_grid
        if i in evaluated:
            p = evaluated[i][0] if p is None else p
            e = evaluated[i][1] if e is None else e
        values.append(np.broadcast_arrays(np.asarray(p, float), np.asarray(e, float)))

    # 2. Failure runs on the grid; every interior end becomes a refinement job.
    n = len(grid)
    runs_of: dict[tuple[int, str], list[tuple[int, int]]] = {}
    jobs: list[_Job] = []
    job_of: dict[tuple[int, str, int, int], _Job] = {}
    refine_rows: list[int] = []
    for i, (row, (p, e)) in enumerate(zip(rows, values, strict=True)):
        for reason, predicate in _predicates(row.kind, dtype):
            runs = _runs(_any_leading(predicate(p, e)))
            if not runs:
                continue
            runs_of[(i, reason)] = runs
            ends = [(a - 1, a) for a, _ in runs if a > 0] + [
                (b, b + 1) for _, b in runs if b < n - 1
            ]
            if ends and i not in refine_rows:
                refine_rows.append(i)
            for a, b in ends:
                job = _Job(refine_rows.index(i), predicate, [float(grid[a]), float(grid[b])])
                jobs.append(job)
                job_of[(i, reason, a, b)] = job

    # 3. Locate the interior ends (all rows together).
    _refine([rows[i] for i in refine_rows], jobs, dtype)

    out = []
    for i, (row, (p, e)) in enumerate(zip(rows, values, strict=True)):
        fails = []
        for reason, _ in _predicates(row.kind, dtype):
            runs = runs_of.get((i, reason))
            if not runs:
                continue
            intervals = []
            for a, b in runs:
                lo = grid[0] if a == 0 else np.mean(job_of[(i, reason, a - 1, a)].bracket)
                hi = grid[-1] if b == n - 1 else np.mean(job_of[(i, reason, b, b + 1)].bracket)
                intervals.append((float(lo), float(hi)))
            fails.append((reason, tuple(intervals)))
        max_abs, at_x, paper_at, exact_at, lo_gap, hi_gap = _summary(p, e, grid)
        out.append(
            Finding(
                formula=row.formula,
                claim=row.claim,
                exact=row.exact,
                kind=row.kind,
                x=row.x,
                grid=(float(grid[0]), float(grid[-1]), n),
                max_abs_rel_gap=max_abs,
                at_x=at_x,
                paper_at_x=paper_at,
                exact_at_x=exact_at,
                min_rel_gap=lo_gap,
                max_rel_gap=hi_gap,
                fails=tuple(fails),
                note=row.note,
            )
        )
    return out


def _laplace_pair_exact(x, shift, theta, s):
    P, Q = mechanisms.adversarial_laplace(x, sensitivity=s, shift=shift, theta=theta)
    return kl(P, Q), chernoff(P, Q).information


def _rows(f2: Fig2Data, f3: Fig3Data, mems: Sequence[MembershipData]) -> list[_Row]:
    mc = conversions.max_chernoff_eps_dp
    sup_c = "sup C over eps-DP pairs = log cosh(eps/2) [max_chernoff_eps_dp]"
    rows = [
        _Row(
            "(22) KL bound",
            "KL of any eps-DP pair <= this",
            "sup KL over eps-DP pairs = eps tanh(eps/2) [max_kl_eps_dp]",
            "upper bound",
            "eps",
            paper.eq22,
            conversions.max_kl_eps_dp,
            f2.eq22,
            f2.exact_kl,
            "correct and sharp (identical to the supremum)",
        ),
        _Row(
            "(30) max over alpha ('Chernoff-Cuff')",
            "C(P,Q) of an eps-DP pair",
            sup_c,
            "upper bound",
            "eps",
            paper.eq30_max,
            mc,
            f2.eq30,
            f2.exact_chernoff,
            "sup at alpha -> 0: -log(2 sinh eps); vacuous for small eps",
        ),
        _Row(
            "(31) C_ubI, max over alpha",
            "upper bound on C(P,Q)",
            sup_c,
            "upper bound",
            "eps",
            paper.eq31_max,
            mc,
            f2.eq31,
            f2.exact_chernoff,
            "objective convex in alpha: max at an end point",
        ),
        _Row(
            "(32) C_ubII, max over alpha",
            "upper bound on C(P,Q)",
            sup_c,
            "upper bound",
            "eps",
            paper.eq32_max,
            mc,
            f2.eq32,
            f2.exact_chernoff,
            "sup at alpha -> 0+: -log(2 eps)",
        ),
        _Row(
            "(72) C*_ub",
            "optimal upper bound on C(P,Q)",
            sup_c,
            "upper bound",
            "eps",
            paper.eq72,
            mc,
            f2.eq72,
            f2.exact_chernoff,
            "log((1+eps)/(1-eps)) undefined for eps >= 1",
        ),
        _Row(
            "Fig. 2 'UB I': (31) objective at (43)",
            "upper bound on C(P,Q)",
            sup_c,
            "upper bound",
            "eps",
            paper.fig2_ub1,
            mc,
            f2.ub1,
            f2.exact_chernoff,
            "alpha_alt of (43) plugged into (31)",
        ),
        _Row(
            "Fig. 2 'UB II': (31) objective at alpha*_ubI",
            "upper bound on C(P,Q)",
            sup_c,
            "upper bound",
            "eps",
            paper.fig2_ub2,
            mc,
            f2.ub2,
            f2.exact_chernoff,
            "alpha*_ubI minimises (31); = (72) with its last log's sign flipped",
        ),
        _Row(
            "Fig. 2 'alpha = 0.5': (30) objective at 1/2",
            "Bhattacharyya distance -log C_1/2 of an eps-DP pair",
            "sup -log C_1/2 over eps-DP pairs = log cosh(eps/2) [max_neg_log_bc_eps_dp]",
            "upper bound",
            "eps",
            lambda x: paper.eq30(x, 0.5),
            lambda x: conversions.max_neg_log_bc_eps_dp(x, 0.5),
            f2.eq30_half,
            f2.exact_half,
            "built on (50), which is not a moment of any law of dP/dQ",
        ),
    ]
    for a in (0.25, 0.5, 0.75):
        rows.append(
            _Row(
                f"(56) Jensen bound at alpha = {a:g}",
                "-log C_alpha(P,Q) of an eps-DP pair <= this",
                "sup -log C_alpha over eps-DP pairs [max_neg_log_bc_eps_dp]",
                "upper bound",
                "eps",
                lambda x, a=a: paper.eq56(x, a),
                lambda x, a=a: conversions.max_neg_log_bc_eps_dp(x, a),
                None,
                None,
                "(54) puts alpha*eps inside the two-point law",
            )
        )
    alpha_exact = "alpha* of the extremal (RR) pair = 1/2 [chernoff(randomized_response)]"
    for name, fn, note in (
        ("alpha*_ubI (after (63))", paper.alpha_ub1, "a stationary point of (31), its minimum"),
        ("(69) alpha*_ubII", paper.eq69, "atanh(eps)/eps > 1 for every eps in (0, 1)"),
        ("(43) alpha*_alt", paper.eq43, "bounds the maximiser of (30), which is alpha -> 0"),
    ):
        rows.append(
            _Row(
                name,
                "optimal alpha, in (0, 1]",
                alpha_exact,
                "range",
                "eps",
                fn,
                None,
                None,
                f2.engine_alpha,
                note,
            )
        )
    shift = jnp.asarray(f3.shifts)[:, None, None] * f3.sensitivity
    s = f3.sensitivity
    theta_all = jnp.asarray(f3.thetas)[None, :, None]
    shifts = ", ".join(f"{v:g}" for v in f3.shifts)
    thetas = ", ".join(f"{v:g}" for v in f3.thetas)
    rows.append(
        _Row(
            f"(34) KL, Laplace attack (shift = {shifts} s; theta = {thetas})",
            "D(Lap(0, b) || Lap(shift, theta b)), b = s/eps",
            "exact KL of the pair [kl(adversarial_laplace)]",
            "value",
            "eps",
            lambda x: paper.eq34(shift, s / x, theta_all),
            lambda x: _laplace_pair_exact(x, shift, theta_all, s)[0],
            f3.eq34,
            f3.kl,
            "correct",
        )
    )
    for t, theta in enumerate(f3.thetas):
        rows.append(
            _Row(
                f"(35) Chernoff, Laplace attack, theta = {theta:g} (shift = {shifts} s)",
                "C(Lap(0, b), Lap(shift, theta b)), b = s/eps",
                "exact Chernoff information of the pair [chernoff(adversarial_laplace)]",
                "value",
                "eps",
                lambda x, theta=theta: paper.eq35(shift, s / x, theta),
                lambda x, theta=theta: _laplace_pair_exact(x, shift, theta, s)[1],
                f3.eq35[:, t],
                f3.chernoff[:, t],
                "theta = 1: argument off by a factor 2 (exact: t/2 - log(1 + t/2))"
                if theta == 1
                else "theta only rescales |shift|/b; not the Chernoff information",
            )
        )
    log2e = 1.0 / math.log(2.0)
    for q in (1, 3):
        rows.append(
            _Row(
                f"(38) BestAdv_q = 1 - 2^(-qC), q = {q} (C in bits, RR pair)",
                "best advantage from q samples",
                f"exact TV of {q}-fold randomized response [max_tv_eps_dp]",
                "value",
                "eps",
                lambda x, q=q: paper.eq38(mc(x) * log2e, q),
                lambda x, q=q: conversions.max_tv_eps_dp(x, q),
                None,
                None,
                "1 - e^(-qC) is a lower bound on the TV, not its value",
            )
        )
    for m in mems:
        n, b = m.n, m.bounds
        exact = f"exact best advantage vs {n}-fold eps-DP (TV of {n}-fold RR) [max_tv_eps_dp]"
        for formula, claim, fn, grid_vals, note in (
            (
                "(39) Yeom",
                "Adv <= e^(n eps) - 1",
                paper.eq39,
                b.yeom,
                "valid, loose; > 1 for n eps > log 2",
            ),
            (
                "(40) Erlingsson, delta = 0",
                "Adv <= 1 - e^(-n eps)",
                lambda x: paper.eq40(x, 0.0),
                b.erlingsson,
                "valid",
            ),
            (
                "(41) Theorem 5, eps-DP reading",
                "Adv <= 1 - e^(-n eps)",
                paper.eq41,
                b.chernoff_paper,
                "valid for pure DP",
            ),
            (
                "(42) Bayes security",
                "Adv <= tanh(n eps / 2)",
                paper.eq42,
                b.bayes_security,
                "sharp for n = 1" if n == 1 else "valid; the exact n-fold value is smaller",
            ),
        ):
            rows.append(
                _Row(
                    f"{formula}, n = {n} (at budget n eps)",
                    claim,
                    exact,
                    "upper bound",
                    "eps",
                    lambda x, fn=fn, n=n: fn(n * x),
                    lambda x, n=n: conversions.max_tv_eps_dp(x, n),
                    grid_vals,
                    b.exact,
                    note,
                )
            )
    rows.append(
        _Row(
            "(41) Theorem 5, Chernoff-DP reading",
            "Adv <= 1 - e^(-c) when C(P,Q) <= c",
            "sup TV over pairs with C <= c = sqrt(1 - e^(-2c)) [max_tv_chernoff]",
            "upper bound",
            "c",
            paper.eq41,
            conversions.max_tv_chernoff,
            None,
            None,
            "false: randomized response attains sqrt(1 - e^(-2c)) > 1 - e^(-c)",
        )
    )
    return rows


def findings(f2: Fig2Data, f3: Fig3Data, mems: Sequence[MembershipData]) -> list[Finding]:
    """The findings table: every paper formula against the exact quantity it stands for.

    Args:
        f2, f3, mems: the figure data (their grids are reused; the grid of ``f2`` must be the
            log-spaced ``eps`` grid of the table).

    Returns:
        One :class:`Finding` per formula (and per reading / parameter setting).
    """
    grid = np.asarray(f2.eps, float)
    dtype = jnp.asarray(f2.eps).dtype
    return _findings(_rows(f2, f3, mems), grid, dtype)


# ---------------------------------------------------------------------------------------------
# Writing.


def _g(v: float, digits: int = 10) -> str:
    if math.isnan(v):
        return "nan"
    return f"{v:.{digits}g}"


def _intervals_text(x: str, intervals, grid) -> str:
    lo_g, hi_g = grid[0], grid[1]
    parts = []
    for lo, hi in intervals:
        at_lo, at_hi = lo == lo_g, hi == hi_g
        if at_lo and at_hi:
            parts.append(f"all {x} in grid")
        elif at_lo:
            parts.append(f"{x} < {_g(hi)}")
        elif at_hi:
            parts.append(f"{x} > {_g(lo)}")
        else:
            parts.append(f"{_g(lo)} < {x} < {_g(hi)}")
    return ", ".join(parts)


def _fails_text(f: Finding, sep: str = "; ") -> str:
    if not f.fails:
        return "never on the grid"
    return sep.join(f"{reason}: {_intervals_text(f.x, iv, f.grid)}" for reason, iv in f.fails)


def _spacing(grid) -> float:
    """Ratio between neighbouring points of the log-spaced ``(min, max, points)`` grid."""
    lo, hi, n = grid
    return (hi / lo) ** (1 / (n - 1)) if n > 1 else math.nan


def table_markdown(rows: Sequence[Finding], *, dtype: str = "float64") -> str:
    """The findings as a Markdown document (title, grid, table, reading notes)."""
    g = rows[0].grid if rows else (math.nan, math.nan, 0)
    bound_rtol, value_rtol = _tolerances(dtype)
    located = "1e-12" if jnp.dtype(dtype) == jnp.float64 else "1e-6"
    lines = [
        "# The paper's formulas against the exact values",
        "",
        f"Computed by jaxdp at run time ({dtype}) on a log-spaced grid of {g[2]} points, "
        f"x in [{_g(g[0])}, {_g(g[1])}] (x = eps: pure-DP parameter per release; "
        "x = c: Chernoff-DP budget, nats). Relative gap = (paper - exact) / |exact|. "
        f"'Fails' lists where a bound is below the exact value (relative {bound_rtol:g}), "
        "negative or undefined, where a claimed value differs (relative "
        f"{value_rtol:g}), or where a claimed optimal alpha leaves (0, 1]; interior ends are "
        f"located to ~{located} relative. Only the grid points are tested: a "
        f"failure region between two neighbouring points (a factor {_spacing(g):.3g} apart "
        "here) can be missed (e.g. alpha*_ubI > 1 on 0.9575 < eps < 1, a factor 1.044 "
        "wide); a finer grid (jaxdp reproduce --points) finds it.",
        "",
        "| Formula (paper) | Claim | Exact quantity [jaxdp function] | Largest rel. gap "
        "(at x) | Rel. gap range | Fails on |",
        "|---|---|---|---|---|---|",
    ]
    for f in rows:
        lines.append(
            "| "
            + " | ".join(
                cell.replace("|", "\\|")
                for cell in (
                    f.formula,
                    f.claim,
                    f.exact,
                    f"{f.max_abs_rel_gap:.3g} ({f.x} = {f.at_x:.4g})",
                    f"[{f.min_rel_gap:.3g}, {f.max_rel_gap:.3g}]",
                    _fails_text(f, "; <br>"),
                )
            )
            + " |"
        )
    lines += [
        "",
        "Notes:",
        "",
    ]
    lines += [f"- {f.formula}: {f.note}." for f in rows if f.note]
    lines += [
        "",
        "Readings: Figure 2 'Chernoff-Cuff' is (30) maximised over alpha in (0, 1); (31), (32) "
        "are maximised over (0, 1]; 'UB I'/'UB II' are the (31) objective at alpha_alt (43) "
        "and at alpha*_ubI; the paper's 'KL-Cuff' is (22) times (1 - alpha), at an alpha it "
        "does not state, so the figure draws (22) itself; the 'alpha = 0.5' curve is the (30) "
        "objective "
        "at alpha = 1/2. Figure 3: P = Lap(0, s/eps), Q = Lap(shift, theta s/eps). Figures 4-5: "
        "the bounds at the composed budget n eps against the exact n-fold worst case.",
        "",
    ]
    return "\n".join(lines)


_CSV_FIELDS = (
    "formula",
    "claim",
    "exact",
    "kind",
    "x",
    "grid_min",
    "grid_max",
    "grid_points",
    "max_abs_rel_gap",
    "at_x",
    "paper_at_x",
    "exact_at_x",
    "min_rel_gap",
    "max_rel_gap",
    "fails_on",
    "fail_intervals",
    "note",
)


def table_csv(rows: Sequence[Finding]) -> str:
    """The findings as CSV (numbers with 17 significant digits).

    ``fail_intervals`` is machine-readable: ``reason:lo:hi`` items separated by ``;``.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_CSV_FIELDS)
    for f in rows:
        intervals = ";".join(f"{reason}:{lo!r}:{hi!r}" for reason, iv in f.fails for lo, hi in iv)
        w.writerow(
            [
                f.formula,
                f.claim,
                f.exact,
                f.kind,
                f.x,
                repr(f.grid[0]),
                repr(f.grid[1]),
                f.grid[2],
                repr(f.max_abs_rel_gap),
                repr(f.at_x),
                repr(f.paper_at_x),
                repr(f.exact_at_x),
                repr(f.min_rel_gap),
                repr(f.max_rel_gap),
                _fails_text(f),
                intervals,
                f.note,
            ]
        )
    return buf.getvalue()


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike):
    """Open ``path`` for binary writing via a temporary file in the same folder.

    On success the temporary file gets the usual permissions (``0o666`` less the umask) and is
    renamed over ``path``, so readers never see a partial file; on error it is removed.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically (:func:`atomic_writer`)."""
    with atomic_writer(path) as fh:
        fh.write(data.encode() if isinstance(data, str) else data)


#: The files :func:`write_table` writes (``jaxdp reproduce`` checks them before any work).
TABLE_FILES = ("paper_vs_exact.md", "paper_vs_exact.csv")


def write_table(
    rows: Sequence[Finding], out_dir: str | os.PathLike, *, dtype: str = "float64"
) -> tuple[str, str]:
    """Write ``paper_vs_exact.md`` and ``paper_vs_exact.csv`` into ``out_dir`` (atomically)."""
    md, cs = (os.path.join(os.fspath(out_dir), name) for name in TABLE_FILES)
    write_atomic(md, table_markdown(rows, dtype=dtype))
    write_atomic(cs, table_csv(rows))
    return md, cs

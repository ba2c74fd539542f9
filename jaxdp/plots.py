"""The paper's Figures 2-5, regenerated with the exact curves overlaid (matplotlib, Agg).

Every number drawn here comes from :mod:`jaxdp.report` (which gets it from the library); this
module only draws. Figures are built on :class:`matplotlib.figure.Figure` directly (the Agg
canvas; no ``pyplot``, no display, no global state) and written atomically by :func:`save`.

Visual convention in every figure: the paper's closed forms are *dashed or dotted* coloured
lines; exact values are *solid* lines (black for the exact supremum / worst case); jaxdp's own
bound from Chernoff information (Figures 4-5; exact only for n = 1) is dash-dotted; markers
are independent checks by the engine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogLocator, NullLocator

from jaxdp.report import Fig2Data, Fig3Data, MembershipData, atomic_writer

__all__ = ["FORMATS", "fig2", "fig3", "fig_membership", "save"]

#: File formats written by :func:`save` by default.
FORMATS: tuple[str, ...] = ("png", "pdf")

_EXACT = {"color": "black", "lw": 3.0, "ls": "-", "zorder": 2}
_EXACT2 = {"color": "0.55", "lw": 3.0, "ls": "-", "zorder": 2}
_PAPER_LW = 1.7


def _positive(y: np.ndarray) -> np.ndarray:
    """Values for a log axis: non-positive and undefined points are left out (NaN)."""
    y = np.asarray(y, float)
    return np.where(np.isfinite(y) & (y > 0), y, np.nan)


def _finite(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, float)
    return np.where(np.isfinite(y), y, np.nan)


def _style(ax) -> None:
    """Tick labels, a light major grid, and few minor ticks on log axes spanning many decades.

    (Minor ticks on wide log axes are also what makes drawing slow.)
    """
    ax.tick_params(labelsize=9)
    ax.grid(True, which="major", alpha=0.35)
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if axis.get_scale() == "log":
            axis.set_major_locator(LogLocator(numticks=12))
            decades = abs(np.log10(lim[1]) - np.log10(lim[0]))
            axis.set_minor_locator(NullLocator() if decades > 5 else LogLocator(subs=(2, 5)))


# ---------------------------------------------------------------------------------------------
# Figure 2


def fig2(d: Fig2Data) -> Figure:
    """Figure 2: the paper's bounds on the Chernoff information of eps-DP pairs vs exact.

    Left: log-log over the whole grid (a curve stops where the formula is negative or
    undefined). Right: linear zoom on ``eps <= 1.2`` where the formulas cross the exact value,
    go negative and become undefined.
    """
    fig = Figure(figsize=(14, 6.4), layout="constrained")
    axes = fig.subplots(1, 2)
    paper_curves = [
        (d.eq30, "(30) max$_\\alpha$  'Chernoff-Cuff'", "tab:red", (6, 2)),
        (d.eq31, "(31) $C_{ubI}$, max$_\\alpha$", "tab:orange", (3, 1.2)),
        (d.eq32, "(32) $C_{ubII}$, max$_\\alpha$", "tab:olive", (2, 2)),
        (d.eq72, "(72) $C^*_{ub}$", "tab:blue", (10, 2.5)),
        (d.ub1, "'UB I': (31) at $\\alpha^*_{alt}$ (43)", "tab:purple", (5, 3)),
        (d.ub2, "'UB II': (31) at $\\alpha^*_{ub,I}$", "tab:cyan", (1, 1.5)),
        (
            d.eq30_half,
            "'$\\alpha$ = 0.5': (30) objective at $\\alpha=1/2$",
            "tab:brown",
            (0.8, 2.2),
        ),
        (
            d.eq22,
            "(22) KL bound (the paper's 'KL-Cuff' is it $\\times (1-\\alpha)$)",
            "tab:green",
            (6, 3),
        ),
    ]
    step = max(1, len(d.eps) // 14)
    for ax, log in zip(axes, (True, False), strict=True):
        tf = _positive if log else _finite
        ax.plot(
            d.eps,
            tf(d.exact_kl),
            label="exact sup KL = $\\varepsilon\\tanh(\\varepsilon/2)$",
            **_EXACT2,
        )
        ax.plot(
            d.eps,
            tf(d.exact_chernoff),
            label="exact sup $C$ = $\\log\\cosh(\\varepsilon/2)$ (= sup $-\\log C_{1/2}$)",
            **_EXACT,
        )
        for y, label, color, dashes in paper_curves:
            ax.plot(d.eps, tf(y), color=color, lw=_PAPER_LW, dashes=dashes, label=label, zorder=3)
        if not log:
            continue
        ax.plot(
            d.eps[::step],
            tf(d.engine_chernoff)[::step],
            "o",
            mfc="white",
            mec="black",
            ms=5,
            zorder=4,
            label="jd.chernoff(randomized response), engine",
        )
        ax.plot(
            d.eps[::step],
            tf(d.engine_kl)[::step],
            "s",
            mfc="white",
            mec="0.4",
            ms=4.5,
            zorder=4,
            label="jd.kl(randomized response), engine",
        )
    for ax in axes:
        ax.set_xlabel("$\\varepsilon$ (pure-DP parameter)")
        ax.set_ylabel("divergence (nats)")
    left, right = axes
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlim(d.eps[0], d.eps[-1])
    finite = np.concatenate([_positive(d.exact_chernoff), _positive(d.ub1)])
    left.set_ylim(np.nanmin(finite) / 3, np.nanmax(finite) * 3)
    left.set_title(
        "log-log, whole range (curves stop where a formula is $\\leq 0$ or undefined)", fontsize=10
    )
    right.set_xlim(0.0, 1.2)
    right.set_ylim(-1.0, 1.6)
    right.axhline(0.0, color="0.3", lw=0.8)
    right.axvspan(1.0, 1.2, color="0.88", zorder=0)
    right.text(
        1.1,
        1.45,
        "(72), 'UB II'\nundefined\n($\\varepsilon \\geq 1$)",
        ha="center",
        va="top",
        fontsize=8.5,
    )
    for ax in axes:
        _style(ax)
    right.set_title(
        "linear zoom: where the paper's bounds cross the exact value and go negative", fontsize=10
    )
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(
        "Figure 2 — Chernoff information of $\\varepsilon$-DP pairs: the paper's closed forms "
        "(dashed or dotted) vs the exact supremum (solid)",
        fontsize=12.5,
    )
    return fig


# ---------------------------------------------------------------------------------------------
# Figure 3


def fig3(d: Fig3Data) -> Figure:
    """Figure 3: KL (34) and Chernoff (35) of the attacked Laplace mechanism vs exact.

    Rows: KL divergence, Chernoff information; columns: the shift :math:`\\Delta\\mu`; colours:
    the scale ratio :math:`\\theta`. Log-log axes, with the budget line ``eps``.
    """
    n_shift = len(d.shifts)
    fig = Figure(figsize=(5.0 * n_shift, 8.8), layout="constrained")
    axes = np.asarray(fig.subplots(2, n_shift, sharex=True, sharey=True)).reshape(2, n_shift)
    cmap_colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    colors = [cmap_colors[i % len(cmap_colors)] for i in range(len(d.thetas))]
    rows = (
        ("KL divergence $D(P\\|Q)$", d.eq34, d.kl),
        ("Chernoff information $C(P,Q)$", d.eq35, d.chernoff),
    )
    values = np.concatenate([_positive(x).ravel() for _, a, b in rows for x in (a, b)])
    ylo = max(np.nanmin(values) / 3, 1e-12)
    yhi = np.nanmax(values) * 3
    for r, (name, paper_y, exact_y) in enumerate(rows):
        for c, shift in enumerate(d.shifts):
            ax = axes[r, c]
            ax.plot(d.eps, d.eps, color="black", ls=":", lw=1.6, zorder=1)
            for t, color in enumerate(colors):
                ax.plot(d.eps, _positive(exact_y[c, t]), color=color, lw=3.4, alpha=0.5, zorder=2)
                ax.plot(d.eps, _positive(paper_y[c, t]), color=color, lw=1.5, ls="--", zorder=3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(d.eps[0], d.eps[-1])
            ax.set_ylim(ylo, yhi)
            ax.set_title(f"{name}, shift $\\Delta\\mu$ = {shift:g}$\\,s$", fontsize=10)
            if r == 1:
                ax.set_xlabel("privacy budget $\\varepsilon$  (noise scale $b = s/\\varepsilon$)")
            if c == 0:
                ax.set_ylabel(f"{name.split(' $')[0]} (nats)")
            _style(ax)
    handles = [Line2D([], [], color=col, lw=3) for col in colors]
    labels = [f"$\\theta$ = {t:g}" for t in d.thetas]
    handles += [
        Line2D([], [], color="0.3", lw=3.4, alpha=0.5),
        Line2D([], [], color="0.3", lw=1.5, ls="--"),
        Line2D([], [], color="black", lw=1.6, ls=":"),
    ]
    labels += [
        "exact (jd.kl / jd.chernoff)",
        "paper: (34) top row, (35) bottom row",
        "budget line $y = \\varepsilon$",
    ]
    fig.legend(
        handles, labels, loc="outside lower center", ncol=len(labels), fontsize=9.5, frameon=False
    )
    fig.suptitle(
        "Figure 3 — attacked Laplace mechanism, $P = \\mathrm{Lap}(0, s/\\varepsilon)$ vs "
        "$Q = \\mathrm{Lap}(\\Delta\\mu, \\theta s/\\varepsilon)$: paper (dashed) vs exact (solid)",
        fontsize=12.5,
    )
    return fig


# ---------------------------------------------------------------------------------------------
# Figures 4-5


def fig_membership(d: MembershipData, *, number: int) -> Figure:
    """Figures 4-5: membership-advantage bounds (39)-(42) at budget ``n eps`` vs exact.

    Left: log-log (advantages span decades at small eps); right: linear axes.
    """
    b = d.bounds
    n = d.n
    fig = Figure(figsize=(14, 6.4), layout="constrained")
    axes = fig.subplots(1, 2)
    exact_label = (
        f"exact best advantage, {n}-fold $\\varepsilon$-DP (TV of {n}-fold randomized response)"
    )
    tight_label = (
        "tight bound via Chernoff information: $\\sqrt{1-\\mathrm{sech}(\\varepsilon/2)^{2n}}$"
        + (" (= exact for n = 1)" if n == 1 else "")
    )
    for ax, log in zip(axes, (True, False), strict=True):
        tf = _positive if log else _finite
        ax.axhline(1.0, color="0.3", lw=0.8, zorder=1)
        ax.plot(d.eps, tf(b.exact), label=exact_label, **_EXACT)
        ax.plot(
            d.eps,
            tf(b.chernoff_tight),
            color="tab:purple",
            lw=2.2,
            dashes=(8, 2, 1, 2),  # a bound (exact only for n = 1): not solid
            label=tight_label,
            zorder=2.5,
        )
        ax.plot(
            d.eps,
            tf(d.laplace),
            color="0.6",
            lw=1.8,
            label=f"exact, Laplace mechanism $b = s/\\varepsilon$, n = {n}",
            zorder=2,
        )
        ax.plot(
            d.eps,
            tf(b.yeom),
            color="tab:red",
            lw=_PAPER_LW,
            dashes=(6, 2),
            label="(39) Yeom et al. $e^{n\\varepsilon}-1$",
            zorder=3,
        )
        ax.plot(
            d.eps,
            tf(b.chernoff_paper),
            color="tab:green",
            lw=4.0,
            ls=":",
            label="(41) paper's Theorem 5 'Chernoff' $1-e^{-n\\varepsilon}$",
            zorder=3,
        )
        ax.plot(
            d.eps,
            tf(b.erlingsson),
            color="tab:orange",
            lw=_PAPER_LW,
            dashes=(5, 3),
            label="(40) Erlingsson et al., $\\delta = 0$ (= (41))",
            zorder=3.2,
        )
        ax.plot(
            d.eps,
            tf(d.erlingsson_delta),
            color="tab:orange",
            lw=1.2,
            dashes=(1, 1.5),
            label=f"(40) Erlingsson et al., $\\delta$ = {d.delta:g}",
            zorder=3,
        )
        ax.plot(
            d.eps,
            tf(b.bayes_security),
            color="tab:blue",
            lw=_PAPER_LW,
            dashes=(2.5, 1.5),  # dashed: dash-dot is the bound from Chernoff information
            label="(42) Bayes security $\\tanh(n\\varepsilon/2)$"
            + (" (= exact for n = 1)" if n == 1 else ""),
            zorder=3.5,
        )
        ax.set_xlabel("$\\varepsilon$ per release (budget $n\\varepsilon$)")
        ax.set_ylabel("membership advantage TPR $-$ FPR (probability)")
    left, right = axes
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlim(d.eps[0], d.eps[-1])
    left.set_ylim(np.nanmin(_positive(b.exact)) / 2, 3.0)
    left.set_title("log-log (y = 1: trivial bound; (39) exceeds it)", fontsize=10)
    right.set_xlim(0.0, min(float(d.eps[-1]), 6.0 / n**0.5))
    right.set_ylim(0.0, 1.08)
    right.set_title("linear", fontsize=10)
    for ax in axes:
        _style(ax)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=9.5, frameon=False)
    fig.suptitle(
        f"Figure {number} — membership-advantage bounds for n = {n} at budget "
        "$n\\varepsilon$\nthe paper's bounds (dashed/dotted) vs exact (solid); the bound "
        "from Chernoff information dash-dotted",
        fontsize=12.5,
    )
    return fig


# ---------------------------------------------------------------------------------------------
# Writing


def save(
    fig: Figure, out_dir: str | os.PathLike, name: str, *, formats: Sequence[str] = FORMATS
) -> list[str]:
    """Write ``fig`` as ``out_dir/name.<fmt>`` for each format, atomically (tmp + rename).

    Returns:
        The paths written.
    """
    paths = []
    for fmt in formats:
        path = os.path.join(os.fspath(out_dir), f"{name}.{fmt}")
        with atomic_writer(path) as fh:
            fig.savefig(fh, format=fmt, dpi=150)
        paths.append(path)
    return paths

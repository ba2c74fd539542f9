"""``jaxdp.plots``: what the figures' titles and labels say is on the figure, readable.

Drawn from synthetic curves (the plotting module only draws; the numbers are checked in
``tests/test_reproduce.py``), so nothing here compiles.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from jaxdp import plots
from jaxdp.membership import MembershipBounds
from jaxdp.report import Fig2Data, MembershipData

EPS = np.geomspace(1e-3, 10.0, 16)


def _membership(n: int) -> MembershipData:
    x = n * EPS
    bounds = MembershipBounds(
        yeom=np.expm1(x),
        erlingsson=-np.expm1(-x),
        chernoff_paper=-np.expm1(-x),
        bayes_security=np.tanh(x / 2),
        exact=np.tanh(x / 2) * 0.9,
        chernoff_tight=np.sqrt(1 - np.cosh(EPS / 2) ** (-2.0 * n)),
    )
    return MembershipData(
        EPS, n, 1e-2, bounds, -np.expm1(-x) + 1e-2 * np.exp(-x), 0.8 * bounds.exact
    )


@pytest.mark.parametrize("n, number", [(1, 4), (3, 5)])
def test_membership_figure_texts_fit_on_the_figure(n, number):
    fig = plots.fig_membership(_membership(n), number=number)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    texts = [fig._suptitle] + [
        t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)
    ]
    assert fig._suptitle.get_text().startswith(f"Figure {number} ")
    for text in texts + list(fig.legends):
        e = text.get_window_extent(renderer)
        assert box.x0 - 0.5 <= e.x0 and e.x1 <= box.x1 + 0.5, getattr(text, "get_text", str)()
        assert box.y0 - 0.5 <= e.y0 and e.y1 <= box.y1 + 0.5, getattr(text, "get_text", str)()


@pytest.mark.parametrize("n", [1, 3])
def test_membership_figure_line_styles_follow_its_title(n):
    # the title: "the paper's bounds (dashed/dotted) vs exact (solid); the bound from
    # Chernoff information dash-dotted" -- so no paper bound may be dash-dotted
    fig = plots.fig_membership(_membership(n), number=4)
    for ax in fig.axes:
        for line in ax.get_lines():
            label = line.get_label()
            pattern = line._unscaled_dash_pattern[1]  # None: solid; (on, off, ...) otherwise
            if label.startswith("("):  # a paper formula, "(39) Yeom et al. ..."
                assert pattern is not None and len(pattern) == 2, (label, pattern)
            elif label.startswith("tight bound via Chernoff"):
                assert pattern is not None and len(pattern) == 4, (label, pattern)
            elif label.startswith("exact"):
                assert pattern is None, (label, pattern)


def _fig2_data() -> Fig2Data:
    c = np.log(np.cosh(EPS / 2))
    curves = {f: c * (1.0 + 0.1 * i) for i, f in enumerate(Fig2Data._fields[1:])}
    curves["engine_converged"] = np.ones(len(EPS), bool)
    return Fig2Data(eps=EPS, **curves)


def test_fig2_line_styles_follow_the_convention():
    # plots' module doc, for every figure: the paper's closed forms dashed or dotted, exact
    # values solid (and the title says so)
    fig = plots.fig2(_fig2_data())
    assert "dashed or dotted" in fig._suptitle.get_text()
    labels = []
    for line in fig.axes[0].get_lines():
        label = line.get_label()
        pattern = line._unscaled_dash_pattern[1]
        if label.startswith(("(", "'")):  # "(30) max ...", "'UB I': ...", "'$\alpha$ = 0.5'"
            labels.append(label)
            assert pattern is not None and len(pattern) == 2, (label, pattern)
        elif label.startswith("exact"):
            assert pattern is None, (label, pattern)
    assert len(labels) == 8

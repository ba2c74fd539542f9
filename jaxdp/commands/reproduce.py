"""``jaxdp reproduce [--out DIR]``: the paper's Figures 2-5 with exact curves, and the table.

Writes into ``DIR`` (default ``./jaxdp-reproduce``; created if needed, other files in it are
left alone):

* ``fig2.png/.pdf`` — the paper's closed forms (22), (30)-(32), (72), 'UB I'/'UB II' and the
  alpha = 1/2 curve against the exact supremum ``log cosh(eps/2)`` and the exact KL supremum;
* ``fig3.png/.pdf`` — (34) and (35) against the exact KL and Chernoff information of the
  attacked Laplace mechanism, with the budget line;
* ``fig4.png/.pdf``, ``fig5.png/.pdf`` — membership-advantage bounds (39)-(42) for n = 1 and
  n = 3 at budget ``n eps`` against the exact worst case and the tight Chernoff bound;
* ``paper_vs_exact.md`` and ``paper_vs_exact.csv`` — every paper formula against the exact
  quantity it stands for (see :mod:`jaxdp.report`).

Every file is written atomically (temporary file + rename). The independent curve families
are computed concurrently (one jitted call each; XLA compiles in parallel threads).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time

from jaxdp.commands import prepare_out_dir

DEFAULT_OUT = "jaxdp-reproduce"
QUICK_POINTS = 40
#: Largest --points. Every curve family is one jitted call over the whole grid, so memory
#: grows with it: peak RSS about 0.5 GB + 7.5 KB a point (`/usr/bin/time`, one core: 200k
#: points 2.1 GB in 20 s, 1e6 points 8.1 GB in 112 s); 1e7 would need ~75 GB, and 1e10
#: aborted the process inside XLA (`Check failed: buffer_.IsConcrete()`). No figure shows
#: more than a million points per curve anyway.
MAX_POINTS = 10**6


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output directory (default: ./{DEFAULT_OUT}; created, other files kept)",
    )
    parser.add_argument(
        "--points",
        type=int,
        default=None,
        metavar="N",
        help="grid points per curve, 8 to 10**6 (default 200; --quick: 40)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"small grid ({QUICK_POINTS} points), for smoke tests"
    )
    parser.add_argument(
        "--formats",
        default="png,pdf",
        metavar="LIST",
        help="comma-separated figure formats (default: png,pdf)",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")


def _formats(text: str) -> tuple[str, ...]:
    allowed = ("png", "pdf", "svg")
    # (deduplicated: "png,png" drew and wrote each figure twice and counted it twice)
    fmts = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    bad = [f for f in fmts if f not in allowed]
    if not fmts or bad:
        raise ValueError(f"--formats: choose from {', '.join(allowed)}, got {text!r}")
    return fmts


def _shown(path: str) -> str:
    """``path`` for a text stream: the bytes of a name that is not UTF-8 (``os.fsdecode``'s
    surrogates) as ``\\xNN`` escapes. (printed as is, such a name failed the command after
    every file was written, where stdout is strict UTF-8, e.g. under LANG=en_US.UTF-8)"""
    return os.fsencode(path).decode(sys.getfilesystemencoding(), "backslashreplace")


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    points = args.points if args.points is not None else (QUICK_POINTS if args.quick else None)
    if points is not None and points < 8:
        raise ValueError(f"--points must be >= 8, got {points}")
    if points is not None and points > MAX_POINTS:
        raise ValueError(
            f"--points {points} is too large: at most {MAX_POINTS} (10**6; memory grows by "
            "about 7.5 KB a point, 8 GB at the limit)"
        )
    formats = _formats(args.formats)
    out = prepare_out_dir(args.out)

    from jaxdp import plots, report

    figures = ("fig2", "fig3", "fig4", "fig5")
    targets = [f"{fig}.{fmt}" for fig in figures for fmt in formats] + list(report.TABLE_FILES)
    for name in targets:
        # (found only at the rename, after the figures before it were written, and named
        # by its temporary file: "Is a directory: '.fig3.png.yekik9jy.tmp' -> 'fig3.png'")
        if os.path.isdir(os.path.join(out, name)):
            raise ValueError(f"--out: {os.path.join(out, name)!r} is a directory, not a file")

    eps = report.eps_grid(points or report.DEFAULT_POINTS)
    dtype = str(eps.dtype)
    written: list[str] = []
    workers = max(2, min(4, os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        submitted = (
            pool.submit(report.fig2_data, eps),
            pool.submit(report.fig3_data, eps),
            pool.submit(report.membership_data, eps, 1),
            pool.submit(report.membership_data, eps, 3),
        )
        jobs = dict(zip(figures, submitted, strict=True))
        data = {}
        for name, job in jobs.items():  # draw each figure as soon as its data is ready
            data[name] = job.result()
            if name == "fig2":
                fig = plots.fig2(data[name])
            elif name == "fig3":
                fig = plots.fig3(data[name])
            else:
                fig = plots.fig_membership(data[name], number=int(name[-1]))
            written += plots.save(fig, out, name, formats=formats)
    rows = report.findings(data["fig2"], data["fig3"], [data["fig4"], data["fig5"]])
    written += report.write_table(rows, out, dtype=dtype)
    if not args.quiet:
        elapsed = time.perf_counter() - start
        for path in written:
            print(_shown(path))
        failing = sum(1 for r in rows if r.fails)
        print(
            f"jaxdp reproduce: {len(written)} files in {_shown(out)} ({len(eps)} points, {dtype}, "
            f"{elapsed:.1f} s); {failing} of {len(rows)} paper formulas fail somewhere on the "
            "grid, see paper_vs_exact.md",
            file=sys.stderr,
        )
    return 0

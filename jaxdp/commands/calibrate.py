"""``jaxdp calibrate MECHANISM --budget B [...]``: noise parameter for a privacy budget.

Runs :func:`jaxdp.calibrate.calibrate` on one or more budgets (one jitted, batched call) and
prints a table, or JSON with ``--json``. Examples::

    jaxdp calibrate laplace --budget 0.1 --budget 1 --compositions 10
    jaxdp calibrate gaussian --budget 0.5 --sensitivity 2 --metric kl --json

Non-finite numbers are written as the strings ``"inf"``/``"nan"`` in the JSON output (strict
JSON has no infinities). Exit status: 0 when every budget converged, 1 otherwise, 2 on bad
arguments (one-line error).
"""

from __future__ import annotations

import argparse
import json
import sys

from jaxdp.commands import as_given, json_number

_MECHANISMS = ("laplace", "gaussian", "geometric", "randomized_response")
_METRICS = ("chernoff", "kl", "tv")


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "mechanism",
        choices=_MECHANISMS,
        help="mechanism family (calibrates: laplace scale, gaussian sigma, "
        "geometric/randomized_response epsilon)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        action="append",
        required=True,
        metavar="B",
        help=(
            "privacy budget (nats for chernoff/kl; an advantage for tv, where a budget of 1 "
            "or more constrains nothing: scale 0, epsilon inf); repeatable"
        ),
    )
    parser.add_argument(
        "--sensitivity",
        type=float,
        default=1.0,
        metavar="S",
        help="query sensitivity (default 1; an integer for geometric; must be 1 for "
        "randomized_response)",
    )
    parser.add_argument(
        "--compositions",
        type=int,
        default=1,
        metavar="N",
        help="calibrate the N-fold composition exactly (default 1)",
    )
    parser.add_argument(
        "--metric",
        choices=_METRICS,
        default="chernoff",
        help="chernoff information (default), kl (larger direction) or tv (best advantage)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from jaxdp.calibrate import MECHANISMS, calibrate

    if not 1 <= args.compositions < 2**63:
        raise ValueError(
            f"--compositions must be a positive integer below 2**63, got {args.compositions}"
        )
    budgets = np.asarray(args.budget, dtype=np.float64)
    try:
        res = calibrate(
            args.mechanism,
            budgets,
            sensitivity=float(args.sensitivity),
            compositions=int(args.compositions),
            metric=args.metric,
        )
    except NotImplementedError as e:
        raise ValueError(str(e)) from None
    name = MECHANISMS[args.mechanism]
    param = np.asarray(res.parameter, dtype=np.float64)
    achieved = np.asarray(res.achieved, dtype=np.float64)
    converged = np.asarray(res.converged)
    iterations = np.asarray(res.iterations)
    if args.json:
        out = {
            "mechanism": args.mechanism,
            "parameter": name,
            "metric": args.metric,
            "compositions": int(args.compositions),
            "sensitivity": float(args.sensitivity),
            "results": [
                {
                    "budget": json_number(float(b)),
                    name: json_number(float(p)),
                    "achieved": json_number(float(a)),
                    "converged": bool(c),
                    "iterations": int(i),
                }
                for b, p, a, c, i in zip(
                    budgets, param, achieved, converged, iterations, strict=True
                )
            ],
        }
        print(json.dumps(out, indent=2))
    else:
        unit = "nats" if args.metric != "tv" else "advantage"
        print(
            f"{args.mechanism}: {name} for a {args.metric} budget ({unit}), "
            f"{args.compositions}-fold composition, sensitivity {as_given(args.sensitivity)}"
        )
        given = [as_given(b) for b in budgets]
        w = max(14, *map(len, given))  # (a longer budget pushed its row out of line)
        header = f"{'budget':>{w}}  {name:>22}  {'achieved':>22}  {'converged':>9}  {'iters':>5}"
        print(header)
        print("-" * len(header))
        # (the budget as given: 6 significant digits showed a tv budget of 0.99999999 as 1, a
        # budget that constrains nothing, beside a positive scale)
        for b, p, a, c, i in zip(given, param, achieved, converged, iterations, strict=True):
            print(f"{b:>{w}}  {p:>22.17g}  {a:>22.17g}  {'yes' if c else 'NO':>9}  {i:>5d}")
    if not converged.all():
        print("jaxdp: warning: some budgets did not converge", file=sys.stderr)
        return 1
    return 0

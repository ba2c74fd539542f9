"""``jaxdp chernoff MECHANISM [--epsilon ...]``: exact divergences of a mechanism's pair.

Example::

    jaxdp chernoff laplace --epsilon 0.1 --epsilon 1
    jaxdp chernoff adversarial_laplace --epsilon 1 --shift 2 --theta 1.5 --json

Exit status: 0 when the Chernoff solver converged for every pair (or its information
overflowed to ``inf``, the right value beyond the largest float), 1 otherwise (a one-line
warning on stderr names the rows; JSON rows carry the solver's ``converged``), 2 on bad
arguments.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys

import numpy as np

from jaxdp.commands import as_given, json_number

MECHANISMS = ("laplace", "gaussian", "randomized_response", "geometric", "adversarial_laplace")
FLOAT_PARAMS = ("epsilon", "scale", "sigma", "sensitivity", "shift", "theta")
#: Largest --k: randomized response is evaluated on all k outcomes (several float64 arrays of
#: k values per epsilon), so a larger k only ends in an out-of-memory error.
MAX_K = 2**24


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("mechanism", choices=MECHANISMS, help="mechanism (jaxdp.mechanisms)")
    for name in FLOAT_PARAMS:
        parser.add_argument(
            f"--{name}", type=float, action="append", help=f"{name} (repeat for a batch)"
        )
    parser.add_argument(
        "--k",
        type=int,
        default=None,
        help=f"randomized response: alphabet size (2 to 2**24 = {MAX_K})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    import jax.numpy as jnp

    import jaxdp as jd

    make = getattr(jd.mechanisms, args.mechanism)
    params = inspect.signature(make).parameters
    accepted = set(params)
    given = {n: getattr(args, n) for n in FLOAT_PARAMS if getattr(args, n) is not None}
    missing = [n for n, p in params.items() if p.default is p.empty and n not in given and n != "k"]
    if missing:
        flags = " ".join(f"--{n}" for n in missing)
        raise ValueError(f"{args.mechanism} needs {flags}")
    for name in given:
        if name not in accepted:
            raise ValueError(f"--{name} does not apply to {args.mechanism}")
    if args.k is not None:
        if "k" not in accepted:
            raise ValueError(f"--k does not apply to {args.mechanism}")
        if args.k < 2:  # (--k 0 was a ZeroDivisionError traceback in the blocking below)
            raise ValueError(f"--k must be an integer >= 2, got {args.k}")
        if args.k > MAX_K:
            raise ValueError(
                f"--k {args.k} is too large: randomized response is evaluated on all k "
                f"outcomes, at most 2**24 = {MAX_K}"
            )
        given["k"] = args.k
    counts = {k: len(v) for k, v in given.items() if k != "k"}
    lengths = set(counts.values())
    if len(lengths - {1}) > 1:  # (the message named none of the options)
        told = ", ".join(f"--{k} {c} times" for k, c in counts.items() if c > 1)
        raise ValueError(
            f"repeated options must all be given the same number of times (or once): {told}"
        )
    n = max(lengths, default=1)
    kwargs = {
        k: (v if k == "k" else jnp.asarray(np.broadcast_to(np.asarray(v, float), (n,))))
        for k, v in given.items()
    }
    # rows in blocks of at most MAX_K outcomes in all: memory grows with rows x k (eight
    # epsilons at k = 2**24 took ~15 GB and could end in the out-of-memory killer)
    block = n if args.k is None else max(1, MAX_K // args.k)
    parts = []
    for lo in range(0, n, block):
        sub = {k: (v if k == "k" else v[lo : lo + block]) for k, v in kwargs.items()}
        try:
            P, Q = make(**sub)
        except TypeError as e:
            raise ValueError(f"{args.mechanism}: {e}") from None
        r = jd.chernoff(P, Q)
        parts.append(
            {
                "chernoff": r.information,
                "alpha": r.alpha,
                "kl_pq": jd.kl(P, Q),
                "kl_qp": jd.kl(Q, P),
                "tv": jd.tv(P, Q),
                "converged": r.converged,
            }
        )
    rows = {
        k: np.concatenate(
            [
                np.broadcast_to(np.asarray(p[k]), (min(block, n - i * block),))
                for i, p in enumerate(parts)
            ]
        )
        for k in parts[0]
    }
    converged = rows.pop("converged")
    out = [
        {
            **{k: float(np.broadcast_to(v, (n,))[i]) for k, v in kwargs.items() if k != "k"},
            **({"k": args.k} if args.k is not None else {}),  # (was left out of every row)
            **{k: float(v[i]) for k, v in rows.items()},
        }
        for i in range(n)
    ]
    # (a pair the solver did not resolve, e.g. a shift ~1e308 scales: printed with exit 0
    # and nothing to tell it from the others)
    # (inf with converged False is an information beyond the largest float: the right value;
    # nan never is, and was printed with exit 0 and no warning, e.g. Laplace(0, 1e-200) vs
    # Laplace(-1.7e308, 1e-100))
    unresolved = ~converged & ~np.isposinf(rows["chernoff"])
    if args.json:
        # strict JSON has no Infinity/NaN: non-finite numbers as strings, as `calibrate` does
        finite = [
            {**{k: json_number(v) for k, v in row.items()}, "converged": bool(c)}
            for row, c in zip(out, converged, strict=True)
        ]
        print(json.dumps(finite, indent=2, allow_nan=False))
    else:
        cols = list(out[0])
        # (the inputs as given: with 8 significant digits, --epsilon 1 --epsilon 1.000000001
        # read as two rows of epsilon 1)
        cells = [[as_given(row[c]) if c in given else f"{row[c]:.8g}" for c in cols] for row in out]
        # (columns as wide as their longest text: 0.30000000000000004 pushed its row out)
        widths = [max(14, *(len(r[j]) for r in cells)) for j in range(len(cols))]
        for line in [cols, *cells]:
            print("  ".join(f"{t:>{w}}" for t, w in zip(line, widths, strict=True)))
        print(
            "(chernoff, kl_pq, kl_qp in nats; alpha: the maximiser a*; tv: best membership "
            "advantage)"
        )
    if not unresolved.any():
        return 0
    rows = ", ".join(str(i + 1) for i in np.flatnonzero(unresolved))
    print(
        f"jaxdp: warning: the Chernoff solver did not converge for row(s) {rows}: chernoff "
        "and alpha there are not certified",
        file=sys.stderr,
    )
    return 1

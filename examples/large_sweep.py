"""A large parameter sweep: exact vs the paper's (34)/(35) for the attacked Laplace mechanism.

Evaluates the exact Chernoff information, its maximiser α*, the exact KL divergence and the
paper's eqs. (34) and (35) of ``Lap(0, s/eps)`` vs ``Lap(shift, theta s/eps)`` on a grid of
about ``--points`` points (eps x shift x theta), chunked and sharded over every device JAX sees
(``jaxdp.sweep``), written to ``--out`` and resumable (run the same command again after an
interruption). Size it to the machine:

    python examples/large_sweep.py --points 1000000            # a CPU: ~1e6 points
    python examples/large_sweep.py --points 1000000000 --out /data/sweep   # GPUs

Then it reports where (35) is furthest from the exact value.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from typing import NamedTuple

import _argtypes as argtypes  # (examples/_argtypes.py, beside this script)
import numpy as np


class SweepSummary(NamedTuple):
    out_dir: str
    n_points: int
    shape: tuple[int, ...]
    points_per_second: float
    max_eq34_rel_err: float  # max |eq34 / kl - 1| (eq34 is correct: rounding level)
    max_eq35_ratio: float  # max eq35 / chernoff
    min_eq35_ratio: float
    all_converged: bool


def spec_for(points: int) -> dict:
    """A spec with about ``points`` grid points: eps x 4 shifts x n_theta thetas."""
    n_shift = 4
    n_theta = max(2, round(math.sqrt(points / n_shift) / 8))
    n_eps = max(2, points // (n_shift * n_theta))
    return {
        "mechanism": "adversarial_laplace",
        "quantities": ["chernoff", "alpha", "converged", "kl_pq", "eq34", "eq35"],
        "grid": {
            "epsilon": {"logspace": [-3, 1, n_eps]},
            "shift": [0.5, 1.0, 2.0, 3.0],
            "theta": {"linspace": [1.0, 4.0, n_theta]},
            "sensitivity": 1.0,
        },
    }


def main(argv: list[str] | None = None) -> SweepSummary:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--points", type=argtypes.count, default=1_000_000, help="approximate grid size"
    )
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    parser.add_argument("--chunk-size", type=argtypes.count, default=None, help="points per chunk")
    parser.add_argument("--float32", action="store_true", help="compute in float32 (GPUs)")
    args = parser.parse_args(argv)

    import jax

    if not args.float32:
        jax.config.update("jax_enable_x64", True)

    from jaxdp.sweep import load_sweep, sweep

    spec = spec_for(args.points)
    spec["dtype"] = "float32" if args.float32 else "float64"
    out_dir = args.out or os.path.join(tempfile.mkdtemp(prefix="jaxdp-sweep-"), "sweep")
    try:
        run = sweep(spec, out_dir, chunk_size=args.chunk_size)
        res = load_sweep(out_dir)
    except (ValueError, OSError) as e:  # an --out holding another sweep, a file, no space...
        parser.error(str(e))  # (one line, exit 2, as jaxdp sweep does; was a traceback)
    v = res.values
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio35 = v["eq35"] / v["chernoff"]
        err34 = np.abs(v["eq34"] / v["kl_pq"] - 1)
    out = SweepSummary(
        out_dir=str(out_dir),
        n_points=run.n_points,
        shape=tuple(run.shape),
        points_per_second=run.points_per_second,
        max_eq34_rel_err=float(np.nanmax(err34)),
        max_eq35_ratio=float(np.nanmax(ratio35)),
        min_eq35_ratio=float(np.nanmin(ratio35)),
        all_converged=bool(np.all(v["converged"])),
    )
    devices = jax.devices()
    rate = (
        f"at {out.points_per_second:,.0f} points/s"
        if run.computed
        else "(resumed: every chunk was already on disk)"
    )
    print(
        f"swept {out.n_points:,} points {out.shape} on {len(devices)} {devices[0].platform} "
        f"device(s) {rate} -> {out.out_dir}"
    )
    print(f"(34) vs exact KL: max relative error {out.max_eq34_rel_err:.3g}")
    print(
        f"(35) / exact Chernoff information: from {out.min_eq35_ratio:.4g} to "
        f"{out.max_eq35_ratio:.4g} (1 would be correct)"
    )
    print(f"solver converged everywhere: {out.all_converged}")
    return out


if __name__ == "__main__":
    main()

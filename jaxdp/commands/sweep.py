"""``jaxdp sweep SPEC.toml --out DIR``: a chunked, sharded, resumable parameter sweep.

Runs :func:`jaxdp.sweep.sweep` on a TOML spec (see :mod:`jaxdp.sweep.spec`). Re-running the
same command resumes; a different spec pointed at the same ``DIR`` is refused. With
``--distributed`` it first calls :func:`jax.distributed.initialize` (coordinator, process count
and id from the flags, the ``JAX_COORDINATOR_ADDRESS``/``JAX_NUM_PROCESSES``/``JAX_PROCESS_ID``
environment variables, or the cluster's auto-detection, e.g. SLURM); start the same command
on every host.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC.toml", help="sweep specification (TOML)")
    parser.add_argument("--out", metavar="DIR", help="output directory (required to run)")
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="N",
        help="points per chunk (default: spec's chunk_size, or 2**16 per CPU device, "
        "2**20 per accelerator; a resumed sweep keeps its own)",
    )
    parser.add_argument("--csv", action="store_true", help="also write DIR/results.csv")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the spec and print the grid size, then stop",
    )
    dist = parser.add_argument_group("multi-host")
    dist.add_argument(
        "--distributed",
        action="store_true",
        help="call jax.distributed.initialize() first (run the command on every host)",
    )
    dist.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0")
    dist.add_argument("--num-processes", type=int, metavar="N", help="number of processes")
    dist.add_argument("--process-id", type=int, metavar="I", help="this process's index")


def run(args: argparse.Namespace) -> int:
    import jax

    if args.distributed:
        kw = {
            k: v
            for k, v in (
                ("coordinator_address", args.coordinator),
                ("num_processes", args.num_processes),
                ("process_id", args.process_id),
            )
            if v is not None
        }
        jax.distributed.initialize(**kw)
    elif args.coordinator or args.num_processes is not None or args.process_id is not None:
        raise ValueError("--coordinator/--num-processes/--process-id need --distributed")
    if args.chunk_size is not None and args.chunk_size < 1:
        raise ValueError(f"--chunk-size must be positive, got {args.chunk_size}")

    from jaxdp.sweep.kernel import check_kernel, make_kernel
    from jaxdp.sweep.runner import default_chunk_size, sweep
    from jaxdp.sweep.spec import parse_spec

    spec = parse_spec(args.spec)
    if args.dry_run:
        check_kernel(spec, make_kernel(spec))
        size = min(args.chunk_size or spec.chunk_size or default_chunk_size(), spec.size)
        shape = " x ".join(str(s) for s in spec.shape) or "1"
        print(
            f"{spec.mechanism}: {len(spec.quantities)} quantities on {shape} = {spec.size} points, "
            f"{-(-spec.size // size)} chunk(s) of {size}, {len(jax.devices())} device(s)"
        )
        return 0
    if not args.out:
        raise ValueError("--out DIR is required (the output directory)")
    result = sweep(spec, args.out, chunk_size=args.chunk_size, quiet=args.quiet, csv=args.csv)
    if not args.quiet and jax.process_index() == 0:
        if result.computed:
            note = f"{result.n_points} points, {result.points_per_second:,.0f} points/s"
        else:
            note = f"{result.n_points} points, all chunks were already done"
        print(f"wrote {result.results} ({note})", file=sys.stderr)
    return 0

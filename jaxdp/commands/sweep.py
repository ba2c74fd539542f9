"""``jaxdp sweep SPEC.toml --out DIR``: a chunked, sharded, resumable parameter sweep.

Runs :func:`jaxdp.sweep.sweep` on a TOML spec (see :mod:`jaxdp.sweep.spec`). Re-running the
same command resumes; a different spec pointed at the same ``DIR`` is refused. With
``--distributed`` it first calls :func:`jax.distributed.initialize` (coordinator, process count
and id from the flags, the ``JAX_COORDINATOR_ADDRESS``/``JAX_NUM_PROCESSES``/``JAX_PROCESS_ID``
environment variables, or the cluster's auto-detection, e.g. SLURM); start the same command
on every host. The coordinator address is checked (``HOST:PORT``, port 1..65535) before JAX
sees it, and a process other than 0 waits at most ``--init-timeout`` seconds for process 0 to
answer (JAX would abort the process with a C++ stack trace instead).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from jaxdp._checks import error_line

#: Seconds to wait for the other processes in ``jax.distributed.initialize`` (JAX: 300).
INIT_TIMEOUT = 120


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC.toml", help="sweep specification (TOML)")
    parser.add_argument("--out", metavar="DIR", help="output directory (required to run)")
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="N",
        help="points per chunk (default: spec's chunk_size, or 2**16 per CPU device, "
        "2**20 per accelerator, fewer for a pair of many values per point, e.g. randomized "
        "response with a large k; a resumed sweep keeps its own); a chunk is held whole in "
        "host memory, so one that would not fit in the memory available is refused, naming "
        "the largest that fits",
    )
    parser.add_argument("--csv", action="store_true", help="also write DIR/results.csv")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the spec and the chunk size (as a run does) and print the grid size, then stop",
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
    dist.add_argument(
        "--init-timeout",
        type=int,
        default=INIT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for the coordinator and the other processes to connect "
        f"(default {INIT_TIMEOUT})",
    )


def parse_address(address: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[IPv6]:PORT`` too) -> ``(host, port)``.

    Raises:
        ValueError: naming ``what`` (the flag or variable) and the expected form.
    """
    host, sep, port = address.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(
            f"{what} must be HOST:PORT with a port from 1 to 65535 (e.g. host0:1234), "
            f"got {address!r}"
        )
    return host, int(port)


def _wait_for(host: str, port: int, timeout: float, what: str) -> None:
    """Wait until something listens at ``host:port`` (process 0's coordinator service)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(5.0, timeout))):
                return
        except socket.gaierror as e:
            raise ValueError(f"{what} {host}:{port}: unknown host ({e.strerror})") from None
        except OSError:
            if time.monotonic() >= deadline:
                raise ValueError(
                    f"{what} {host}:{port}: no coordinator (process 0) answered within "
                    f"{timeout:g} s; start process 0 first, check the address, or raise "
                    "--init-timeout"
                ) from None
            time.sleep(0.2)


def _initialize(args: argparse.Namespace) -> None:
    """``jax.distributed.initialize`` from the flags/environment, with one-line errors."""
    import jax

    if args.init_timeout < 1:
        raise ValueError(f"--init-timeout must be a positive integer, got {args.init_timeout}")
    if args.num_processes is not None and args.num_processes < 1:
        raise ValueError(f"--num-processes must be positive, got {args.num_processes}")
    if args.process_id is not None and args.process_id < 0:
        raise ValueError(f"--process-id must be non-negative, got {args.process_id}")
    if args.process_id is not None and args.num_processes is not None:
        if args.process_id >= args.num_processes:
            raise ValueError(
                f"--process-id {args.process_id} must be less than --num-processes "
                f"{args.num_processes}"
            )
    if args.coordinator is not None:
        address, what = args.coordinator, "--coordinator"
    else:
        address, what = os.environ.get("JAX_COORDINATOR_ADDRESS"), "JAX_COORDINATOR_ADDRESS"
    if address:
        host, port = parse_address(address, what)
        process_id = args.process_id
        if process_id is None and os.environ.get("JAX_PROCESS_ID", "").strip().isdigit():
            process_id = int(os.environ["JAX_PROCESS_ID"])
        if process_id is not None and process_id != 0:
            _wait_for(host, port, args.init_timeout, what)
    kw = {
        k: v
        for k, v in (
            ("coordinator_address", args.coordinator),
            ("num_processes", args.num_processes),
            ("process_id", args.process_id),
        )
        if v is not None
    }
    try:
        jax.distributed.initialize(**kw, initialization_timeout=args.init_timeout)
    except (ValueError, TypeError, RuntimeError) as e:
        msg = error_line(e)
        if "should be defined" in msg or "must be defined" in msg:
            raise ValueError(
                "--distributed: no cluster found (JAX says: "
                f"{msg.rstrip('.')}); give --coordinator HOST:PORT --num-processes N "
                "--process-id I, set JAX_COORDINATOR_ADDRESS/JAX_NUM_PROCESSES/JAX_PROCESS_ID, "
                "or run under a cluster manager JAX detects (SLURM, Open MPI, ...)"
            ) from None
        raise ValueError(f"--distributed: jax.distributed.initialize failed: {msg}") from None


def run(args: argparse.Namespace) -> int:
    import jax

    if not args.distributed and (
        args.coordinator
        or args.num_processes is not None
        or args.process_id is not None
        or "init_timeout" in getattr(args, "_jaxdp_seen", ())  # (was ignored, even if < 1)
    ):
        raise ValueError(
            "--coordinator/--num-processes/--process-id/--init-timeout need --distributed"
        )
    # the arguments before --distributed's initialize (a process other than 0 waited for the
    # coordinator, up to --init-timeout seconds, before it said that the spec did not exist)
    if args.chunk_size is not None and args.chunk_size < 1:
        raise ValueError(f"--chunk-size must be positive, got {args.chunk_size}")
    # (was "[Errno 2] No such file or directory: 'x.toml'"; a pipe, <(...), is fine)
    if not os.path.exists(args.spec) or os.path.isdir(args.spec):
        what = "is a directory" if os.path.isdir(args.spec) else "does not exist"
        raise ValueError(f"SPEC.toml: {args.spec!r} {what}; give the sweep's TOML file")
    if not args.dry_run and not args.out:
        raise ValueError("--out DIR is required (the output directory)")
    if args.distributed:  # (before the spec is parsed: its mechanism may be a module of the
        # user's that computes with JAX when imported, which must come after initialize)
        _initialize(args)

    from jaxdp.sweep.kernel import check_kernel, make_kernel, point_values
    from jaxdp.sweep.runner import _check_memory, _chunk_source, default_chunk_size, sweep
    from jaxdp.sweep.spec import parse_spec

    spec = parse_spec(args.spec)
    if args.dry_run:
        kernel = make_kernel(spec)
        dtypes = check_kernel(spec, kernel)
        default = default_chunk_size(point_values=point_values(spec, kernel))
        size = min(args.chunk_size or spec.chunk_size or default, spec.size)
        # (the run refuses a chunk that does not fit in memory: so does the dry run, which
        # said "1 chunk(s) of 2147483648" for a --chunk-size of 10**12)
        _check_memory(spec, dtypes, size, _chunk_source(spec, args.chunk_size), args.csv)
        shape = " x ".join(str(s) for s in spec.shape) or "1"
        print(
            f"{spec.mechanism}: {_count(len(spec.quantities), 'quantity', 'quantities')} "
            f"on {shape} = "
            f"{_points(spec.size)}, "
            f"{-(-spec.size // size)} chunk(s) of {size}, {len(jax.devices())} device(s)"
        )
        return 0
    result = sweep(spec, args.out, chunk_size=args.chunk_size, quiet=args.quiet, csv=args.csv)
    if not args.quiet and jax.process_index() == 0:
        if result.computed:
            note = f"{_points(result.n_points)}, {result.points_per_second:,.0f} points/s"
        else:
            note = f"{_points(result.n_points)}, all chunks were already done"
        print(f"wrote {result.results} ({note})", file=sys.stderr)
    return 0


def _points(n: int) -> str:
    return _count(n, "point", "points")  # ('1 points')


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one}" if n == 1 else f"{n} {many}"  # ('1 quantities')

"""Benchmark: throughput and peak memory of a Laplace sweep (``jaxdp.sweep``).

Each grid size runs in a fresh subprocess (so peak RSS is that run's own), on a new output
directory; the child reports points/s of the compute loop (compilation excluded), the compile
time, the time to assemble ``results.npz``, and peak RSS from ``resource.getrusage``. Host
memory is bounded by the chunk size, so peak RSS should not grow with the grid.

Usage::

    python benchmarks/bench_sweep.py            # 1e6 and 1e7 points
    python benchmarks/bench_sweep.py --quick    # 1e6 points only
    python benchmarks/bench_sweep.py --devices 4   # force 4 host (CPU) devices

Writes ``benchmarks/results/sweep.json`` and ``benchmarks/results/sweep.md`` (or
``--results DIR``). On a machine with a GPU, JAX uses it by default; ``--platform cpu`` forces
the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUANTITIES = ["chernoff", "alpha", "kl_pq", "tv"]
SENSITIVITIES = 100  # grid: epsilon (size / 100 values) x sensitivity (100 values)


def _spec(size: int, dtype: str) -> dict:
    return {
        "mechanism": "laplace",
        "quantities": QUANTITIES,
        "dtype": dtype,
        "grid": {
            "epsilon": {"logspace": [-3, 1, size // SENSITIVITIES]},
            "sensitivity": {"linspace": [0.5, 2.0, SENSITIVITIES]},
        },
    }


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(size: int, workdir: str, dtype: str, chunk_size: int | None) -> dict:
    """Run one sweep in this (fresh) process and return its measurements."""
    import jax

    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import numpy as np

    import jaxdp
    from jaxdp.sweep import load_sweep, sweep

    # Baseline: JAX initialised and the library imported, before any sweep work.
    jax.numpy.zeros(1).block_until_ready()
    rss_start = _rss_mib()
    spec = _spec(size, dtype)
    out = Path(workdir) / "run"
    t0 = time.perf_counter()
    run = sweep(spec, out, chunk_size=chunk_size, quiet=True)
    total = time.perf_counter() - t0
    rss_peak = _rss_mib()
    res = load_sweep(out, mmap=True)
    finite = float(np.mean(np.isfinite(res.values["chernoff"][::97])))
    devices = jax.devices()
    return {
        "points": run.n_points,
        "shape": list(run.shape),
        "quantities": QUANTITIES,
        "dtype": dtype,
        "chunk_size": run.chunk_size,
        "chunks": run.n_chunks,
        "points_per_second": run.points_per_second,
        "compute_seconds": run.seconds,
        "total_seconds": total,
        "overhead_seconds": total - run.seconds,
        "peak_rss_mib": rss_peak,
        "baseline_rss_mib": rss_start,
        "results_mib": os.path.getsize(run.results) / 2**20,
        "finite_fraction": finite,
        "platform": devices[0].platform,
        "device_kind": devices[0].device_kind,
        "devices": len(devices),
        "jax": jax.__version__,
        "jaxdp": jaxdp.__version__,
    }


def _run_child(size: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="jaxdp-bench-sweep-") as workdir:
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            str(size),
            "--workdir",
            workdir,
            "--dtype",
            args.dtype,
        ]
        if args.chunk_size:
            cmd += ["--chunk-size", str(args.chunk_size)]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        if args.devices:
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
        if args.platform:
            env["JAX_PLATFORMS"] = args.platform
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"child for {size} points failed:\n{proc.stderr}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def _markdown(rows: list[dict], command: str) -> str:
    r0 = rows[0]
    lines = [
        "# Sweep benchmark",
        "",
        f"Laplace mechanism, quantities {', '.join(r0['quantities'])}; {r0['dtype']}; "
        f"{r0['devices']} x {r0['platform']} ({r0['device_kind']}); jax {r0['jax']}, "
        f"jaxdp {r0['jaxdp']}; {platform.node()} ({os.cpu_count()} CPUs).",
        "",
        f"Command: `{command}`",
        "",
        "| points | chunk | points/s | compute s | other s | peak RSS MiB | baseline RSS MiB "
        "| results MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['points']:.0e} | {r['chunk_size']} | {r['points_per_second']:,.0f} "
            f"| {r['compute_seconds']:.1f} | {r['overhead_seconds']:.1f} "
            f"| {r['peak_rss_mib']:.0f} | {r['baseline_rss_mib']:.0f} | {r['results_mib']:.0f} |"
        )
    if len(rows) > 1:
        ratio = rows[-1]["peak_rss_mib"] / rows[0]["peak_rss_mib"]
        lines += [
            "",
            f"Peak RSS ratio {rows[-1]['points']:.0e} / {rows[0]['points']:.0e} points: "
            f"{ratio:.2f} (bounded memory: the grid is never materialised on the host).",
        ]
    lines += [
        "",
        "points/s: the compute loop (chunks computed, copied back and written), compilation "
        "excluded; other s: spec checks, compilation and streaming results.npz.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1e6 points only")
    p.add_argument("--sizes", type=float, nargs="+", help="grid sizes (default 1e6 1e7)")
    p.add_argument("--devices", type=int, help="force N host devices (CPU)")
    p.add_argument("--platform", help="JAX_PLATFORMS for the children, e.g. cpu")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--chunk-size", type=int, help="points per chunk (default: by device)")
    p.add_argument("--results", default=str(Path(__file__).resolve().parent / "results"))
    p.add_argument("--tag", default="", help="suffix of the result file names")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child is not None:
        print(json.dumps(child(args.child, args.workdir, args.dtype, args.chunk_size)))
        return 0

    sizes = [int(s) for s in (args.sizes or ([1e6] if args.quick else [1e6, 1e7]))]
    command = shlex.join(["python", "benchmarks/bench_sweep.py", *(argv or sys.argv[1:])])
    print(command, flush=True)
    rows = []
    for size in sizes:
        r = _run_child(size, args)
        rows.append(r)
        print(
            f"{r['points']:>10,d} points: {r['points_per_second']:>12,.0f} points/s, "
            f"compute {r['compute_seconds']:.1f} s, other {r['overhead_seconds']:.1f} s, "
            f"peak RSS {r['peak_rss_mib']:.0f} MiB (baseline {r['baseline_rss_mib']:.0f}), "
            f"{r['devices']} x {r['platform']}",
            flush=True,
        )
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    name = "sweep" + (f"-{args.tag}" if args.tag else "")
    (out / f"{name}.json").write_text(
        json.dumps({"command": command, "runs": rows}, indent=2) + "\n"
    )
    (out / f"{name}.md").write_text(_markdown(rows, command))
    print(f"wrote {out / (name + '.json')} and {out / (name + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

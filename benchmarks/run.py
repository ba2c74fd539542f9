"""Run every jaxdp benchmark and write JSON + markdown results.

Usage::

    python benchmarks/run.py [--quick] [--out benchmarks/results]
    python benchmarks/run.py --speed-only --gpu --out benchmarks/results/gpu-<date>

Steps, each a separate process (so that ``jax_enable_x64`` and the one-core pinning are set at
start-up): the accuracy suite (``bench_accuracy.py``), the speed suite in float64 and in
float32 with x64 off (``bench_speed.py``, pinned to CPU 0 with single-threaded XLA unless
``--all-cores`` or ``--gpu``), and, when present, ``bench_calibrate.py`` and
``bench_sweep.py``. When the speed runs are pinned and a second CPU is available, the work
goes to two lanes of about equal length, every timed program on a core and an L2 cache of
its own (pinned, single-threaded XLA): CPU 0 runs the float64 speed suite and then
``bench_calibrate.py``; the second CPU runs the accuracy suite (which times nothing) and then
the float32 speed suite (quick mode in a deep slow spell of this 2-core VM: 91 and 109 s,
114 s of wall clock). The cold compile times on all cores (``bench_speed.py --compile-only``,
informational; not with ``--quick``) and ``bench_sweep.py`` (all cores) run last, alone. Then
``summary.json``/``summary.md``: the headline tables, the targets of the issue and the
command and machine that produced them. ``--quick`` aims at two minutes of wall clock on two
cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

HERE = Path(__file__).resolve().parent


def _run(
    cmd: list[str],
    log: list,
    timeout: float | None = None,
    cpu: int | None = None,
    background: bool = False,
) -> int:
    """Run ``cmd`` and log it; with ``cpu``, pinned there with single-threaded XLA
    (``background``: a step of :func:`_lane`)."""
    where = "" if cpu is None else f"  ({'in the background, ' if background else ''}on CPU {cpu})"
    print("$ " + " ".join(cmd[1:] if cmd[0] == sys.executable else cmd) + where, flush=True)
    extra = {}
    if cpu is not None:
        env = dict(os.environ)
        flags = env.get("XLA_FLAGS", "")
        if "intra_op_parallelism_threads" not in flags:
            env["XLA_FLAGS"] = (flags + " " + H.ONE_CORE_XLA_FLAGS).strip()
        extra = {"env": env, "preexec_fn": lambda: os.sched_setaffinity(0, {cpu})}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=H.REPO, **extra)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        print(f"  -> killed after {timeout:.0f} s (partial results kept)", flush=True)
        rc = 124
    dt = time.perf_counter() - t
    entry = {"command": " ".join(cmd[1:]), "rc": rc, "seconds": dt}
    if cpu is not None:
        entry["cpu"] = cpu
    if background:
        entry["background"] = True
    log.append(entry)
    print(f"  -> {'background step ' if background else ''}exit {rc} in {dt:.1f} s", flush=True)
    return rc


def _lane(cmds: list[list[str]], cpu: int, log: list, timeout: float | None):
    """Start a thread that runs ``cmds`` one after another on ``cpu`` (:func:`_run`), beside
    the main sequence; ``join()`` it."""

    def run_all():
        for cmd in cmds:
            _run(cmd, log, timeout, cpu, background=True)

    thread = threading.Thread(target=run_all, daemon=True)
    thread.start()
    return thread


def _spare_cpu() -> int | None:
    """A CPU other than CPU 0 (where the pinned speed runs go), or None."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None
    spare = [c for c in cpus if c != 0]
    return spare[0] if spare and 0 in cpus else None


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _rate_at(rows, n):
    for r in rows or []:
        if r.get("n") == n and "pairs_per_s" in r:
            return r
    return None


def _best(rows, min_n):
    good = [r for r in rows or [] if "pairs_per_s" in r and r["n"] >= min_n]
    return max(good, key=lambda r: r["pairs_per_s"]) if good else None


def summarize(out: Path, args, steps, wall: float) -> str:
    acc = _load(out / "accuracy.json")
    prefix = "speed-gpu-" if args.gpu else "speed-"
    s64 = _load(out / f"{prefix}float64.json")
    s32 = _load(out / f"{prefix}float32.json")
    machine = (s64 or s32 or acc or {}).get("machine", H.machine_info())
    pinned = not args.gpu and not args.all_cores
    where = "one CPU core (taskset -c 0, single-threaded XLA)" if pinned else "all cores"
    beside = ""
    if any(s.get("background") for s in steps):
        beside = (
            "; CPU 0: the float64 speed suite, then bench_calibrate; a second CPU: the "
            "accuracy suite, then the float32 speed suite"
        )
    md = [
        "# jaxdp benchmarks\n\n",
        f"Command: `{H.command_line()}`  \n",
        f"Machine: {H.machine_line(machine)}  \n",
        f"Speed runs: {'GPU (default device), ' if args.gpu else ''}"
        f"{where}; "
        f"total {wall:.0f} s (wall clock{beside}).\n",
    ]
    targets = []
    summary = {
        "command": H.command_line(),
        "machine": machine,
        "steps": steps,
        "wall_s": wall,
    }

    if s64 or s32:
        md.append("\n## Exact Chernoff information throughput (pairs/s)\n\n")
        names = list((s64 or s32)["families"])
        rows = []
        for name in names:
            r64 = (s64 or {}).get("families", {}).get(name, [])
            r32 = (s32 or {}).get("families", {}).get(name, [])
            sizes = sorted({r["n"] for r in r64 + r32 if "pairs_per_s" in r})
            for n in sizes:
                a, b = _rate_at(r64, n), _rate_at(r32, n)
                ra = a["pairs_per_s"] if a else None
                rb = b["pairs_per_s"] if b else None
                rows.append(
                    [
                        name,
                        n,
                        ra,
                        rb,
                        rb / ra if ra and rb else None,
                        (a["trace_lower_s"] + a["compile_s"]) if a else None,
                        a.get("reload_s") if a else None,
                        a["iterations_max"] if a else None,
                    ]
                )
        md.append(
            H.md_table(
                [
                    "kernel",
                    "batch",
                    "float64",
                    "float32 (x64 off)",
                    "f32/f64",
                    "trace+compile s (f64)",
                    "from disk cache s",
                    "iterations (max)",
                ],
                rows,
            )
        )
        if args.gpu:
            cc = (s32 or {}).get("cpu_compare") or {}
            cc64 = (s64 or {}).get("cpu_compare") or {}
            if cc or cc64:
                md.append(
                    "\nSame kernels on this machine's CPU (all cores, same process as the "
                    "GPU run):\n\n"
                )
                rows = []
                for name in sorted(set(cc) | set(cc64)):
                    rows.append(
                        [
                            name,
                            (cc64.get(name) or cc.get(name) or {}).get("n"),
                            (cc64.get(name) or {}).get("pairs_per_s"),
                            (cc64.get(name) or {}).get("gpu_over_cpu"),
                            (cc.get(name) or {}).get("pairs_per_s"),
                            (cc.get(name) or {}).get("gpu_over_cpu"),
                        ]
                    )
                md.append(
                    H.md_table(
                        [
                            "kernel",
                            "batch",
                            "CPU float64",
                            "GPU/CPU float64",
                            "CPU float32",
                            "GPU/CPU float32",
                        ],
                        rows,
                    )
                )
        if s64 and s64.get("baselines"):
            md.append("\n## Against baselines (same process, float64, jaxdp at batch 1e5)\n\n")
            rows = []
            for fam, b in s64["baselines"].items():
                sc, gr, op = b.get("scipy", {}), b.get("numpy_grid", {}), b.get("jaxdp_optax", {})
                rows.append(
                    [
                        fam,
                        sc.get("pairs_per_s"),
                        sc.get("jaxdp_speedup"),
                        (sc.get("rel_diff_vs_jaxdp") or {}).get("max"),
                        gr.get("pairs_per_s"),
                        gr.get("jaxdp_speedup"),
                        (gr.get("rel_err_vs_jaxdp") or {}).get("max"),
                        op.get("pairs_per_s"),
                        op.get("jaxdp_speedup"),
                        (op.get("rel_diff_vs_newton") or {}).get("max"),
                    ]
                )
            scipy_pairs = {b.get("scipy", {}).get("pairs_timed") for b in s64["baselines"].values()}
            scipy_pairs = "/".join(str(n) for n in sorted(scipy_pairs - {None})) or "no"
            md.append(
                H.md_table(
                    [
                        "kernel",
                        "scipy pairs/s",
                        "x scipy",
                        "scipy max rel diff",
                        "grid pairs/s",
                        "x grid",
                        "grid max rel err",
                        "optax pairs/s",
                        "x optax",
                        "optax max rel diff",
                    ],
                    rows,
                )
            )
            md.append(
                "\nscipy: `quad` split at the locations inside `minimize_scalar`, timed "
                f"on {scipy_pairs} pairs (median of 3 passes) and "
                "extrapolated; grid: numpy closed form on "
                '1000 alphas; optax: `jd.chernoff(P, Q, method="optax")`'
                + (" (quick mode: Laplace only, to save its compile time)" if args.quick else "")
                + ".\n"
            )
        if s64 and s64.get("limits"):
            md.append("\n## What limits each kernel (float64)\n\n")
            rows = [
                [
                    k,
                    v["ops_outside"],
                    v["ops_loop"],
                    v["trips"],
                    v["predicted_ns_per_pair"],
                    v["measured_ns_per_pair"],
                    v["transcendental_share"],
                ]
                for k, v in s64["limits"].items()
            ]
            md.append(
                H.md_table(
                    [
                        "kernel",
                        "transcendentals outside loop",
                        "per Newton trip",
                        "trips",
                        "their ns/pair",
                        "measured ns/pair",
                        "share",
                    ],
                    rows,
                )
            )
            md.append(
                "\nOp cost (ns/element, measured): "
                + ", ".join(f"{k} {v:.2f}" for k, v in s64.get("op_ns_per_element", {}).items())
                + "\n"
            )
        for s in (s64, s32):
            if s:
                targets += s.get("targets", [])
        if s64 and s32 and not args.gpu:
            for fam in ("Laplace", "Gaussian"):
                a = _rate_at(s64["families"].get(fam), 10**5)
                b = _rate_at(s32["families"].get(fam), 10**5)
                if a and b:
                    # informational: the ratios are against a baseline run in the same
                    # process (the "same process" rows, from interleaved rounds); these two
                    # figures come from processes run a minute apart on a noisy machine
                    targets.append(
                        {
                            "name": f"{fam} float32/float64 (separate processes, 1e5; "
                            "informational)",
                            "value": b["pairs_per_s"] / a["pairs_per_s"],
                            "goal": 3.0,
                            "met": None,
                        }
                    )
        # only from this run (a results directory may hold an older file)
        ran = any("--compile-only" in s["command"] for s in steps)
        comp = _load(out / "compile-all-cores.json") if ran else None
        if comp and comp.get("families"):
            cores = comp.get("cores")
            md.append(
                f"\n## Cold trace+compile, one core and all {cores} cores (float64, s)\n\n"
                "XLA:CPU compiles the fused kernels of a program in parallel, so a first call "
                "on a machine with more cores pays less than on one core (the issue's target, "
                "the figure judged below). All-core figures: `bench_speed.py --compile-only`, "
                "run alone after the pinned runs, JAX's caches cleared before each kernel."
                "\n\n"
            )
            rows = []
            for name, c in comp["families"].items():
                one = _rate_at((s64 or {}).get("families", {}).get(name), c["n"])
                rows.append(
                    [
                        name,
                        c["n"],
                        (one["trace_lower_s"] + one["compile_s"]) if one else None,
                        c["trace_lower_s"] + c["compile_s"],
                    ]
                )
            md.append(H.md_table(["kernel", "batch", "one core", f"{cores} cores"], rows))
            targets.append(
                {
                    "name": f"max trace+compile s on all {cores} cores (informational; the "
                    "target is one core)",
                    "value": max(r[3] for r in rows),
                    "goal": 1.0,
                    "met": None,
                }
            )
        if args.gpu and s64 and s32:
            a = _best(s64["families"].get("Laplace"), 10**6)
            b = _best(s32["families"].get("Laplace"), 10**6)
            if a and b:
                targets.append(
                    {
                        "name": "GPU Laplace float32/float64",
                        "value": b["pairs_per_s"] / a["pairs_per_s"],
                        "goal": None,
                        "met": None,
                    }
                )

    if acc:
        mpm = acc.get("mpmath")
        if mpm:
            md.append("\n## Accuracy: jaxdp.chernoff vs mpmath (50 digits), relative error\n\n")
            rows = []
            for fam, d in mpm["families"].items():
                rows.append(
                    [
                        fam,
                        d["float64"]["n"],
                        d["float64"]["max_rel"],
                        d["float64"]["median_rel"],
                        d["float32"]["max_rel"],
                        d["float32"]["median_rel"],
                        d["float64"]["worst_case"],
                    ]
                )
            rows.append(
                [
                    "**all**",
                    mpm["float64"]["n"],
                    mpm["float64"]["max_rel"],
                    mpm["float64"]["median_rel"],
                    mpm["float32"]["max_rel"],
                    mpm["float32"]["median_rel"],
                    "",
                ]
            )
            md.append(
                H.md_table(
                    [
                        "family",
                        "pairs",
                        "f64 max",
                        "f64 median",
                        "f32 max",
                        "f32 median",
                        "worst case (f64)",
                    ],
                    rows,
                )
            )
        paper = acc.get("paper")
        if paper:
            md.append(
                "\n## The paper's formulas vs the exact values (eps in "
                f"[{paper['eps_grid'][0]:g}, {paper['eps_grid'][1]:g}])\n\n"
            )
            rows = []
            for r in paper["formulas"]:
                if r["name"].startswith(("eq34 (", "eq35 (")) and "theta=1)" not in r["name"]:
                    continue
                g = r.get("rel_gap") or {}
                fails = "; ".join(f"[{a:.5g}, {b:.5g}]" for a, b in r["fails_on"]) or "never"
                rows.append([r["name"], r["claim"], r["kind"], g.get("min"), g.get("max"), fails])
            md.append(
                H.md_table(
                    [
                        "formula",
                        "claim",
                        "kind",
                        "min rel gap",
                        "max rel gap",
                        "claim fails for eps in",
                    ],
                    rows,
                )
            )
            md.append(
                "\nAll shifts/thetas for (34)/(35) and the negative/NaN ranges: `accuracy.md`.\n"
            )
        quad = acc.get("quadrature")
        if quad:
            md.append("\n## Quadrature path vs closed forms (max rel error of log C_a)\n\n")
            # jd.log_bc's rule (pieces also end at the integrand's peaks), then the plain
            # rule of jd.chernoff and the divergences (the plain_ columns)
            keys = list(dict.fromkeys(k for r in quad["rows"] for k in r if k.endswith("float64")))
            rows = [
                [
                    r["level"],
                    r.get("nodes_per_pair"),
                    r.get("plain_nodes_per_pair"),
                    *[r.get(k) for k in keys],
                ]
                for r in quad["rows"]
            ]
            md.append(H.md_table(["level", "nodes/pair", "plain nodes/pair", *keys], rows))
        for c in acc.get("checks", []):
            targets.append(
                {
                    "name": "accuracy: " + c["name"],
                    "value": c["value"],
                    "goal": c["threshold"],
                    "met": c["pass"],
                }
            )

    for name in ("calibrate", "sweep"):
        p = out / f"{name}.md"
        if p.exists():
            md.append(f"\n## {name.capitalize()} (from bench_{name}.py)\n\n")
            md.append(p.read_text().split("\n", 1)[-1])
        elif not args.gpu and not args.accuracy_only:
            md.append(
                f"\n({name}: benchmarks/bench_{name}.py not present or wrote no "
                f"{name}.md; skipped)\n"
            )

    if targets:
        md.append("\n## Targets\n\n")
        md.append(
            H.md_table(
                ["target", "value", "goal", "met"],
                [[t["name"], t["value"], t["goal"], t["met"]] for t in targets],
            )
        )
    summary["targets"] = targets
    failed = [s for s in steps if s["rc"] != 0]
    if failed:
        md.append(
            "\nSteps that failed: "
            + "; ".join(f"`{s['command']}` (exit {s['rc']})" for s in failed)
            + "\n"
        )
    text = "".join(md)
    H.write_json(out / "summary.json", summary)
    H.write_text(out / "summary.md", text)
    return text


def _optional_cmd(name: str, args, out: Path) -> list[str] | None:
    script = HERE / f"bench_{name}.py"
    if not script.exists():
        print(f"(bench_{name}.py not present: skipped)")
        return None
    text = script.read_text()
    # the other helpers' programs name their output option --out or --results
    out_flag = "--results" if '"--results"' in text and '"--out"' not in text else "--out"
    cmd = [sys.executable, str(script), out_flag, str(out)]
    if args.quick and '"--quick"' in text:
        cmd.append("--quick")
    return cmd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about two minutes in all")
    ap.add_argument("--out", default=str(HERE / "results"), help="results directory")
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--accuracy-only", action="store_true")
    ap.add_argument("--gpu", action="store_true", help="speed suite at GPU sizes (1e6..1e8)")
    ap.add_argument("--all-cores", action="store_true", help="do not pin the CPU speed runs")
    ap.add_argument("--no-extras", action="store_true", help="skip bench_calibrate/bench_sweep")
    ap.add_argument(
        "--step-timeout", type=float, default=None, help="seconds before a step is killed"
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    steps: list = []
    py = sys.executable
    quick = ["--quick"] if args.quick else []
    started = time.perf_counter()
    pinned = not args.gpu and not args.all_cores
    accuracy = [py, str(HERE / "bench_accuracy.py"), *quick, "--out", str(out)]
    extras = not (args.gpu or args.no_extras or args.speed_only or args.accuracy_only)
    calibrate = _optional_cmd("calibrate", args, out) if extras else None
    sweep = _optional_cmd("sweep", args, out) if extras else None
    # With the speed runs pinned to CPU 0, a second CPU takes the accuracy suite (it times
    # nothing) and then the float32 speed suite (pinned there, single-threaded XLA), while
    # CPU 0 runs the float64 speed suite and then the calibration benchmark: two lanes of
    # about equal length, each timed program with a core and an L2 cache of its own.
    spare = _spare_cpu() if pinned else None
    flags = [*quick, "--out", str(out)]
    if args.gpu:
        flags.append("--gpu")
    elif not args.all_cores:
        flags.append("--one-core")
    # on a GPU the float32 headline goes first, in case the time runs out
    speed = [
        [py, str(HERE / "bench_speed.py"), "--dtype", dtype, *flags]
        for dtype in (("float32", "float64") if args.gpu else ("float64", "float32"))
    ]
    if args.accuracy_only:
        speed = []
    background = []
    if not args.speed_only:
        if spare is None:
            _run(accuracy, steps, args.step_timeout)
        else:
            background.append(accuracy)
    if spare is not None and speed:
        background.append(speed.pop())  # the float32 suite
    lane = _lane(background, spare, steps, args.step_timeout) if background else None
    for cmd in speed:
        _run(cmd, steps, args.step_timeout)
    if calibrate is not None:  # on CPU 0 after the float64 suite when there are two CPUs
        _run(calibrate, steps, args.step_timeout, None if spare is None else 0)
    if lane is not None:
        lane.join()
    if pinned and not args.accuracy_only and not args.quick:
        # what a first call costs with every core compiling (informational; alone, after the
        # pinned runs, so that nothing else shares the cores). Not in --quick: its 10-20 s
        # would come after both lanes (the longer one 109 s in a slow spell) and break the
        # two minutes
        _run(
            [py, str(HERE / "bench_speed.py"), "--compile-only", "--out", str(out)],
            steps,
            args.step_timeout,
        )
    if sweep is not None:  # all cores: after everything else
        _run(sweep, steps, args.step_timeout)
    wall = time.perf_counter() - started
    text = summarize(out, args, steps, wall)
    print()
    print(text)
    print(f"wrote {out / 'summary.md'} and summary.json; total {wall:.0f} s")
    return 0 if all(s["rc"] == 0 for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())

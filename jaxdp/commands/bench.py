"""``jaxdp bench [--quick] [--out DIR] ...``: run the benchmark suite of a source checkout.

The benchmarks are programs in the repository's ``benchmarks/`` directory (not part of the
installed package). This command finds ``benchmarks/run.py`` next to the imported ``jaxdp``
package (editable install or running from the checkout) or under the current directory, and
runs it with the same Python interpreter; results go to ``benchmarks/results/`` by default.
Without a checkout it fails with a one-line error.

The runner runs in the checkout's root, so ``--out`` is resolved against the current directory
first, and the directory is created and checked for writing before the long run starts (an
unusable one is a one-line error, not a traceback from the runner minutes later).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from jaxdp.commands import prepare_out_dir


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small sizes, about two minutes")
    parser.add_argument(
        "--out", default=None, metavar="DIR", help="results directory (default benchmarks/results)"
    )
    parser.add_argument("--speed-only", action="store_true", help="only the speed suite")
    parser.add_argument("--accuracy-only", action="store_true", help="only the accuracy suite")
    parser.add_argument("--gpu", action="store_true", help="speed suite at GPU batch sizes")
    parser.add_argument(
        "--all-cores", action="store_true", help="do not pin the CPU speed runs to one core"
    )
    parser.add_argument(
        "--no-extras", action="store_true", help="skip the calibration and sweep benchmarks"
    )
    parser.add_argument(
        "--step-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds before a step of the runner is killed",
    )


def find_runner() -> Path | None:
    """``benchmarks/run.py`` of the checkout this ``jaxdp`` comes from, or under the cwd."""
    import jaxdp

    candidates = [Path(jaxdp.__file__).resolve().parent.parent, Path.cwd()]
    for root in candidates:
        runner = root / "benchmarks" / "run.py"
        if runner.is_file() and (root / "benchmarks" / "_harness.py").is_file():
            return runner
    return None


def run(args: argparse.Namespace) -> int:
    runner = find_runner()
    if runner is None:
        raise ValueError(
            "benchmarks/run.py not found: `jaxdp bench` needs a source checkout of jaxdp "
            "(run it from the repository root)"
        )
    if args.speed_only and args.accuracy_only:
        raise ValueError("--speed-only and --accuracy-only exclude each other")
    cmd = [sys.executable, str(runner)]
    for flag in ("quick", "speed_only", "accuracy_only", "gpu", "all_cores", "no_extras"):
        if getattr(args, flag):
            cmd.append("--" + flag.replace("_", "-"))
    if args.step_timeout is not None:
        if not (args.step_timeout > 0 and args.step_timeout < float("inf")):
            raise ValueError(f"--step-timeout must be positive and finite, got {args.step_timeout}")
        cmd += ["--step-timeout", repr(args.step_timeout)]
    if args.out is not None:
        # absolute: the runner's cwd is the checkout root, not the user's
        cmd += ["--out", os.path.abspath(prepare_out_dir(args.out))]
    return subprocess.call(cmd, cwd=runner.parent.parent)

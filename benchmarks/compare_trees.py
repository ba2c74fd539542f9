"""Interleaved speed comparison of jaxdp source trees in one process.

Usage (pin to one core; check other commits out with ``git worktree add /tmp/old <commit>``)::

    taskset -c 0 python benchmarks/compare_trees.py --tree old=/tmp/old --tree new=. \\
        [--tree c4096=.:chernoff.CPU_CHUNK=2048] [--families Laplace,Gaussian] [--runs 3]

Each tree's ``jaxdp`` package is copied to a temporary directory under a name of its own
(``jaxdp_<label>``, imports rewritten), so that all of them load side by side; ``:mod.ATTR=value``
after a path sets a module attribute of that copy (a Python literal) before anything is
traced, and ``:ATTR=value`` one of the package itself: ``:CPU_COMPILER_OPTIONS={...}``
compiles that tree with other XLA options (both timings use the package's attribute).
Every tree's ``chernoff`` is compiled for the speed suite's inputs (``bench_speed.families``)
at batch 1e5 in float64 and float32 (x64 on), and all executables
are timed in alternating rounds (``_harness.interleaved``), so a slow spell of a shared
machine hits them alike. Prints the median over ``--runs`` of ns per pair, float64 / float32,
and their ratio (the float32 target), per family and tree.

With ``--compile R`` it instead times cold trace+compile (float64, JAX's caches cleared,
garbage collector off) of every tree's ``chernoff`` in ``R`` alternating rounds and prints
the minimum and median seconds and the count of fused kernels, per family and tree: compile
time drifts by 20-30% with the machine's load, so only trees timed in one run compare.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import pathlib
import re
import shutil
import statistics
import sys
import tempfile

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import _harness as H  # noqa: E402
import bench_speed as bs  # noqa: E402


def _load(label: str, spec: str, tmp: pathlib.Path):
    # ':' before each 'name=' (a dict literal's own colons are not followed by one)
    path, *overrides = re.split(r":(?=[\w.]+=)", spec)
    dest = tmp / label / f"jaxdp_{label}"
    shutil.copytree(
        pathlib.Path(path) / "jaxdp", dest, ignore=shutil.ignore_patterns("__pycache__")
    )
    for f in dest.rglob("*.py"):
        f.write_text(re.sub(r"\bjaxdp\b", f"jaxdp_{label}", f.read_text()))
    sys.path.insert(0, str(tmp / label))
    mod = importlib.import_module(f"jaxdp_{label}")
    for item in overrides:
        target, value = item.split("=", 1)
        modname, _, attr = target.rpartition(".")
        owner = importlib.import_module(f"jaxdp_{label}.{modname}") if modname else mod
        setattr(owner, attr, ast.literal_eval(value))
    return mod


def family_names(spec: str, known: list[str]) -> list[str]:
    """The families named in ``--families``: a full name, or a bare one standing for every
    family it starts ("Quadrature"; "Categorical" for each ``--cat-sizes`` k, which was the
    last k only)."""
    groups: dict[str, list[str]] = {}
    for full in known:
        groups.setdefault(full.split(" ")[0], []).append(full)
    names: list[str] = []
    for name in spec.split(","):
        if name in known:
            names.append(name)
        elif name in groups:
            names += groups[name]
        else:
            raise ValueError(f"--families: unknown family {name!r} (known: {', '.join(known)})")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="LABEL=PATH[:mod.ATTR=value]")
    ap.add_argument("--families", default="Laplace,Gaussian")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--cat-sizes",
        type=lambda v: [int(k) for k in v.split(",")],
        default=[],
        help="categorical sizes k, as family 'Categorical k=K'",
    )
    ap.add_argument("--compile", type=int, default=0, metavar="R", help="time compiles instead")
    args = ap.parse_args()
    fams = {f.name: f for f in bs.families({"cat_sizes": args.cat_sizes})}
    try:
        names = family_names(args.families, list(fams))
    except ValueError as e:
        ap.error(str(e))
    with tempfile.TemporaryDirectory() as tmp:
        mods = {}
        for t in args.tree:
            label, spec = t.split("=", 1)
            mods[label] = _load(label, spec, pathlib.Path(tmp))
        for name in names:
            fam = fams[name]
            if args.compile:
                _compare_compiles(name, fam, mods, args.n, args.compile)
                continue
            calls, keys = [], []
            for dt in (np.float64, np.float32):
                inputs = fam.make(args.n, dt)
                for label, mod in mods.items():
                    compiled = jax.jit(
                        _chernoff_fn(mod, fam), compiler_options=mod.CPU_COMPILER_OPTIONS
                    )
                    calls.append((compiled.lower(*inputs).compile(), inputs))
                    keys.append((label, np.dtype(dt).name))
            times = {k: [] for k in keys}
            for _ in range(args.runs):
                for k, t in zip(keys, H.interleaved(calls, rounds=7), strict=True):
                    times[k].append(t / args.n * 1e9)
            for label in mods:
                t64 = statistics.median(times[(label, "float64")])
                t32 = statistics.median(times[(label, "float32")])
                print(
                    f"{name:16s} {label:10s} float64 {t64:7.1f}  float32 {t32:6.1f} ns/pair  "
                    f"ratio {t64 / t32:.2f}",
                    flush=True,
                )


def _chernoff_fn(mod, fam):
    """The tree's ``chernoff`` on the family's input arrays."""

    def run(*a):
        return mod.chernoff(*fam.build(mod, *a))

    return jax.vmap(run) if fam.vmap else run


def _compare_compiles(name, fam, mods, n, rounds) -> None:
    inputs = fam.make(n, np.float64)
    times = {label: [] for label in mods}
    kernels = {}
    for _ in range(rounds):
        for label, mod in mods.items():
            jax.clear_caches()
            compiled, t = H.compile_jit(
                _chernoff_fn(mod, fam), *inputs, compiler_options=mod.CPU_COMPILER_OPTIONS
            )
            times[label].append(t["trace_lower_s"] + t["compile_s"])
            kernels[label] = len(re.findall(r"= \S+ fusion\(", compiled.as_text()))
    for label, ts in times.items():
        print(
            f"{name:16s} {label:10s} trace+compile min {min(ts):.3f} median "
            f"{statistics.median(ts):.3f} s  {kernels[label]} kernels",
            flush=True,
        )


if __name__ == "__main__":
    main()

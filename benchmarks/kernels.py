"""Compiled-kernel count, trace and compile time, and run time of ``jaxdp.chernoff`` per family.

Usage (pin to one core; run it at two commits, alternating, to compare)::

    taskset -c 0 python benchmarks/kernels.py [--n 100000] [--families Laplace,Gaussian]

XLA:CPU compiles every fused kernel separately, so the count of ``fusion`` instructions in
the optimised HLO sets most of the compile time. Prints one line per family: kernels, trace
s, compile s, ns per pair (median of 5), max solver iterations.

``--fusion-cost`` instead compiles synthetic elementwise programs (k independent kernels of
n chained operations each, on 4096 float64 elements) and prints the best of three compile
times for each: what one fused kernel and one operation in it cost XLA:CPU here.

``--profile`` times every compiled kernel of a call (JAX's profiler with XLA:CPU's
``xla_cpu_enable_xprof_traceme``; ``--dtype float32`` for float32 inputs) and prints the
slowest ones per pair, next to the same call's time unprofiled: each kernel event costs the
profiler a few microseconds, so read the table for where the time goes, not as exact times.

``--output-floor`` times a jitted function that only writes outputs of the dtypes and sizes
of ``jaxdp.chernoff``'s five fields (batch 1e5, 1e6, 1e7, in that order in one process), and
counts the page faults a call takes (``ru_minflt``): the memory cost of a call, whatever it
computes.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

# this checkout's jaxdp, as the other benchmark programs import it (not an installed one:
# run at two commits, the script would otherwise time the same installed tree twice)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

H.repo_on_path()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jaxdp as jd  # noqa: E402

FAMILIES = ("Laplace", "Gaussian", "DiscreteLaplace", "Cat2", "Cat10", "Quad")


def _problem(name, n, key):
    k = jax.random.split(key, 4)
    loc = jax.random.normal(k[0], (n,)), jax.random.normal(k[2], (n,))
    scale = jax.random.uniform(k[1], (n,)) + 0.5, jax.random.uniform(k[3], (n,)) + 0.5
    if name in ("Laplace", "Gaussian"):
        D = getattr(jd, name)
        return (lambda a, b, c, d: jd.chernoff(D(a, b), D(c, d))), (
            loc[0],
            scale[0],
            loc[1],
            scale[1],
        )
    if name == "DiscreteLaplace":
        D = jd.DiscreteLaplace
        return (lambda a, b, c, d: jd.chernoff(D(a, b), D(c, d))), (
            jnp.round(3 * loc[0]),
            scale[0],
            jnp.round(3 * loc[1]),
            scale[1],
        )
    if name in ("Cat2", "Cat10"):
        size = int(name[3:])
        m = n if size == 2 else min(n, 10_000)
        p = jax.random.dirichlet(k[0], jnp.ones(size), (m,))
        q = jax.random.dirichlet(k[1], jnp.ones(size), (m,))
        return (lambda p, q: jd.chernoff(jd.Categorical(p), jd.Categorical(q))), (p, q)
    if name == "Quad":
        m = min(n, 1000)
        args = (loc[0][:m], scale[0][:m], loc[1][:m], scale[1][:m])
        return (lambda a, b, c, d: jd.chernoff(jd.Laplace(a, b), jd.Gaussian(c, d))), args
    raise ValueError(f"unknown family {name!r}; choose from {', '.join(FAMILIES)}")


def _synthetic(kernels: int, ops: int):
    """``kernels`` independent outputs, each a chain of ``ops`` multiply-adds (an ``exp``
    every tenth step): XLA fuses each chain into one kernel of ~2 * ops HLO operations."""

    def chain(x):
        for i in range(ops):
            x = x * 1.0001 + 0.5
            if i % 10 == 0:
                x = jnp.exp(-x) + x
        return x

    return lambda x: [chain(x + j) for j in range(kernels)]


def fusion_cost() -> None:
    x = jnp.linspace(0.1, 1.0, 4096)
    for kernels, ops in ((1, 50), (1, 400), (1, 1600), (10, 5), (40, 5), (80, 5), (10, 80)):
        fn = _synthetic(kernels, ops)
        times = []
        for _ in range(3):
            jax.clear_caches()
            lowered = jax.jit(fn, compiler_options=jd.CPU_COMPILER_OPTIONS).lower(x)
            t = time.perf_counter()
            compiled = lowered.compile()
            times.append(time.perf_counter() - t)
        found = len(re.findall(r"= \S+ fusion\(", compiled.as_text()))
        print(
            f"{kernels:3d} kernels x {ops:5d} steps  fusions {found:3d}  "
            f"compile {min(times):.3f} s",
            flush=True,
        )


def output_floor() -> None:
    fn = jax.jit(lambda a, b, c, d: (a + b, c * d, a - d, a > c, (b * 3).astype(jnp.int32)))
    for n in (10**5, 10**6, 10**7):
        args = [jax.random.normal(k, (n,)) for k in jax.random.split(jax.random.PRNGKey(0), 4)]
        jax.block_until_ready(fn(*args))
        reps = max(3, 3 * 10**6 // n)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        times = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(reps):
                out = fn(*args)
            jax.block_until_ready(out)
            times.append((time.perf_counter() - t) / reps)
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / (7 * reps)
        pages = n * (3 * 8 + 1 + 4) / 4096
        print(
            f"batch {n:.0e}  {statistics.median(times) / n * 1e9:5.1f} ns/pair  "
            f"{faults:7.0f} page faults a call for {pages:7.0f} pages of output",
            flush=True,
        )


def profile(names, n: int, dtype: str, top: int = 25) -> None:
    """The ``top`` slowest compiled kernels of one ``jd.chernoff`` call per family (see above)."""
    for name in names:
        fn, xs = _problem(name, n, jax.random.PRNGKey(0))
        xs = [x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x for x in xs]
        opts = dict(jd.CPU_COMPILER_OPTIONS, xla_cpu_enable_xprof_traceme=True)
        compiled = jax.jit(fn, compiler_options=opts).lower(*xs).compile()
        jax.block_until_ready(compiled(*xs))
        pairs, calls = xs[0].shape[0], 10
        t = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(compiled(*xs))
        plain = (time.perf_counter() - t) / calls / pairs * 1e9
        with tempfile.TemporaryDirectory() as d:
            with jax.profiler.trace(d, create_perfetto_trace=True):
                for _ in range(calls):
                    jax.block_until_ready(compiled(*xs))
            (path,) = glob.glob(f"{d}/**/*.trace.json.gz", recursive=True)
            with gzip.open(path) as f:
                trace = json.load(f)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        total, count = collections.Counter(), collections.Counter()
        for e in events:
            if e.get("ph") == "X" and not e["name"].startswith("$"):
                total[e["name"]] += e.get("dur", 0.0)  # microseconds
                count[e["name"]] += 1
        per_pair = {k: v * 1e3 / calls / pairs for k, v in total.items()}
        print(
            f"{name} {dtype} batch {pairs}: {plain:.1f} ns/pair unprofiled, "
            f"{per_pair.get('ThunkExecutor::Execute', float('nan')):.1f} in the profiled "
            f"executor (nested events are counted in their parents too)",
            flush=True,
        )
        for k, v in sorted(per_pair.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {v:8.2f} ns/pair  {count[k] // calls:5d} a call  {k}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--families", default="Laplace,Gaussian")
    ap.add_argument("--fusion-cost", action="store_true", help="compile cost of synthetic kernels")
    ap.add_argument("--output-floor", action="store_true", help="cost of writing the outputs")
    ap.add_argument("--profile", action="store_true", help="time of each compiled kernel")
    ap.add_argument(
        "--dtype", default="float64", choices=("float64", "float32"), help="with --profile"
    )
    args = ap.parse_args()
    jax.jit(lambda x: jnp.sin(x) * 2).lower(jnp.ones(3)).compile()  # warm up XLA itself
    if args.fusion_cost:
        fusion_cost()
        return
    if args.output_floor:
        output_floor()
        return
    if args.profile:
        profile(args.families.split(","), args.n, args.dtype)
        return
    for name in args.families.split(","):
        fn, xs = _problem(name, args.n, jax.random.PRNGKey(0))
        t0 = time.perf_counter()
        lowered = jax.jit(fn, compiler_options=jd.CPU_COMPILER_OPTIONS).lower(*xs)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        kernels = len(re.findall(r"= \S+ fusion\(", compiled.as_text()))
        res = jax.block_until_ready(compiled(*xs))
        times = []
        for _ in range(5):
            t = time.perf_counter()
            jax.block_until_ready(compiled(*xs))
            times.append(time.perf_counter() - t)
        per_pair = sorted(times)[2] / xs[0].shape[0] * 1e9
        print(
            f"{name:16s} kernels {kernels:4d}  trace {t1 - t0:.2f} s  compile {t2 - t1:.2f} s  "
            f"{per_pair:.0f} ns/pair  iterations {int(res.iterations.max())}",
            flush=True,
        )


if __name__ == "__main__":
    main()

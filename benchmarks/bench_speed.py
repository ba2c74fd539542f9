"""Speed benchmark: exact Chernoff information throughput, baselines, what limits each kernel.

Usage::

    python benchmarks/bench_speed.py [--quick] [--one-core] [--dtype float64|float32] [--gpu]
                                     [--out benchmarks/results]

Writes ``speed-<dtype>.json``/``.md`` (``speed-gpu-<dtype>`` with ``--gpu``) under ``--out``.

* Throughput of ``jax.jit(jaxdp.chernoff)`` (default ``method="newton"``) in pairs/s against
  batch size for Laplace and Gaussian pairs with distinct scales, DiscreteLaplace, Categorical
  (k = 2..1000) and the quadrature path (Laplace vs Gaussian, under ``jax.vmap``). Each point
  is the median of several timed runs after a warm-up, with ``block_until_ready``; trace+lower
  and XLA compile times are reported separately, and so is the time to trace and load the
  same executable from JAX's persistent compilation cache (``jaxdp.enable_compile_cache``, a
  fresh temporary directory per run), what a later process pays.
* Baselines, run in the same process (float64 only): scipy per pair (three ``quad`` pieces
  split at the two locations, inside ``minimize_scalar``; tolerances matched to our accuracy;
  timed on 200 pairs, 30 in quick mode, the median of 3 passes, and extrapolated per pair), a
  numpy grid over 1000 alpha values
  (closed-form ``log C_a``, chunked), and jaxdp's own ``method="optax"``. Each is also scored
  for accuracy against jaxdp's Newton result on the same pairs.
* float32: ``--dtype float32`` runs with ``jax_enable_x64`` off (``run.py`` starts it as a
  separate process); the float64 process also times float32 inputs in-process so the
  float32/float64 ratio has a same-process measurement.
* Limits: transcendental operations per pair (outside the Newton loop, and per loop trip)
  counted in the optimised HLO, times the measured per-element cost of each op, compared with
  the measured time per pair.
* ``--one-core``: re-executes under ``taskset -c 0`` with single-threaded XLA flags, before
  JAX is imported (the issue's targets are per core).
* ``--gpu``: batch sizes 1e6..1e8 on the default (GPU) device, plus the same kernels on the
  host CPU in the same process for the GPU/CPU ratio; chunked automatically when a batch does
  not fit in device memory.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

# --------------------------------------------------------------------------- configuration

QUICK = {
    "sizes": (10**3, 10**5),
    "dl_sizes": (10**5,),
    "cat_sizes": {2: (10**5,), 10: (10**4,), 100: (10**4,), 1000: (10**3,)},
    "quad_sizes": (10**3,),
    # a median of 5 samples of 0.05 s: robust to the transient slow phases of a shared VM
    "repeats": 5,
    "min_sample_s": 0.05,
    "point_budget_s": 4.0,
    "scipy_pairs": 30,
    "grid_pairs": 2000,
    "optax_pairs": 10**3,
    # the optax method's trace+compile takes seconds per family (trace_lower_s + compile_s
    # in results/full): quick mode times it on Laplace only
    "optax_families": ("Laplace",),
    "op_n": 2 * 10**5,
}
FULL = {
    "sizes": (10**3, 10**4, 10**5, 10**6, 10**7),
    "cat_sizes": {
        2: (10**3, 10**4, 10**5, 10**6, 10**7),
        10: (10**3, 10**4, 10**5, 10**6),
        100: (10**3, 10**4, 10**5),
        1000: (10**3, 10**4),
    },
    "quad_sizes": (10**2, 10**3, 10**4),
    "dl_sizes": (10**3, 10**4, 10**5, 10**6, 10**7),
    "repeats": 7,
    "min_sample_s": 0.1,
    # 100 s: discrete Laplace and two-category pairs at 1e7 (~60 and ~80 s) are not skipped
    "point_budget_s": 100.0,
    "scipy_pairs": 200,
    "grid_pairs": 10**5,
    "optax_pairs": 10**4,
    "optax_families": ("Laplace", "Gaussian"),
    # as in quick mode: the solver's chunks stay in cache, and at 2e6 elements every call
    # also pays page faults on a fresh 16 MB output (exp measured 2.0 ns at 2e5, 4-6 at 2e6)
    "op_n": 2 * 10**5,
}
GPU = {
    "sizes": (10**6, 10**7, 10**8),
    "cat_sizes": {2: (10**6, 10**7, 10**8), 10: (10**6, 10**7), 100: (10**6,), 1000: (10**5,)},
    "quad_sizes": (10**4, 10**5),
    "dl_sizes": (10**6, 10**7, 10**8),
    "repeats": 5,
    "min_sample_s": 0.05,
    "point_budget_s": 30.0,
    "scipy_pairs": 0,
    "grid_pairs": 0,
    "optax_pairs": 0,
    "optax_families": (),
    "op_n": 10**7,
    "cpu_compare_size": 10**6,
}
TARGET_BATCH = 10**5

# Performance targets of the issue (float64, one CPU core, batch >= 1e5).
TARGETS = {
    "laplace_pairs_per_s": 5e6,
    "laplace_vs_scipy": 5000.0,
    "gaussian_pairs_per_s": 1.5e7,
    "gaussian_vs_scipy": 1e4,
    "vs_numpy_grid": 100.0,
    "compile_s": 1.0,
    "float32_over_float64": 3.0,
    "gpu_float32_laplace_pairs_per_s": 1e9,
}


# --------------------------------------------------------------------------- families


def _gen(kind, key, n, dtype, k=None):
    import jax
    import jax.numpy as jnp

    k1, k2, k3, k4 = jax.random.split(key, 4)
    if kind == "loc":
        return jax.random.normal(k1, (n,), dtype)
    if kind == "scale":  # log-uniform on [e^-1, e^1]: distinct scales almost surely
        return jnp.exp(jax.random.uniform(k2, (n,), dtype, -1.0, 1.0))
    if kind == "int":
        return jnp.floor(jax.random.uniform(k3, (n,), dtype, -4.0, 5.0))
    if kind == "logits":
        return jax.nn.log_softmax(jax.random.normal(k4, (n, k), dtype), axis=-1)
    raise ValueError(kind)


class Family:
    """One benchmarked kernel: how to make a batch of ``n`` pairs and what to run on it."""

    def __init__(self, name, kinds, build, *, k=None, vmap=False):
        self.name, self.kinds, self.build, self.k, self.vmap = name, kinds, build, k, vmap

    def make(self, n, dtype, device=None, seed=0):
        import jax

        keys = jax.random.split(jax.random.PRNGKey(seed), len(self.kinds))
        with jax.default_device(device) if device is not None else _null():
            gen = jax.jit(_gen, static_argnums=(0, 2, 3, 4))
            arrays = tuple(
                gen(kind, kk, n, np.dtype(dtype).name, self.k)
                for kind, kk in zip(self.kinds, keys, strict=True)
            )
        if device is not None:  # committed inputs: the jitted kernel runs on that device
            arrays = tuple(jax.device_put(a, device) for a in arrays)
        return arrays

    def fn(self, method="newton"):
        import jax

        import jaxdp as jd

        def run(*arrays):
            P, Q = self.build(jd, *arrays)
            return jd.chernoff(P, Q, method=method)

        return jax.vmap(run) if self.vmap else run

    def one_pass(self) -> bool:
        """Whether the solver evaluates this kernel's value with its derivatives (then its
        last small step takes no loop trip)."""
        import jaxdp as jd
        from jaxdp.chernoff import _one_pass

        return _one_pass(*self.build(jd, *self.make(1, np.float32)))


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def families(cfg):
    out = [
        Family(
            "Laplace",
            ("loc", "scale", "loc", "scale"),
            lambda jd, m1, b1, m2, b2: (jd.Laplace(m1, b1), jd.Laplace(m2, b2)),
        ),
        Family(
            "Gaussian",
            ("loc", "scale", "loc", "scale"),
            lambda jd, m1, b1, m2, b2: (jd.Gaussian(m1, b1), jd.Gaussian(m2, b2)),
        ),
        Family(
            "DiscreteLaplace",
            ("int", "scale", "int", "scale"),
            lambda jd, m1, b1, m2, b2: (jd.DiscreteLaplace(m1, b1), jd.DiscreteLaplace(m2, b2)),
        ),
    ]
    for k in cfg["cat_sizes"]:
        out.append(
            Family(
                f"Categorical k={k}",
                ("logits", "logits"),
                lambda jd, lp, lq: (
                    jd.Categorical.from_log_probs(lp),
                    jd.Categorical.from_log_probs(lq),
                ),
                k=k,
            )
        )
    out.append(
        Family(
            "Quadrature (Laplace vs Gaussian)",
            ("loc", "scale", "loc", "scale"),
            lambda jd, m1, b1, m2, b2: (jd.Laplace(m1, b1), jd.Gaussian(m2, b2)),
            vmap=True,
        )
    )
    return out


def sizes_for(fam, cfg):
    if fam.name.startswith("Categorical"):
        return cfg["cat_sizes"][fam.k]
    if fam.name.startswith("Quadrature"):
        return cfg["quad_sizes"]
    if fam.name == "DiscreteLaplace":
        return cfg["dl_sizes"]
    return cfg["sizes"]


# --------------------------------------------------------------------------- measurement


def _is_oom(e: Exception) -> bool:
    s = str(e)
    return "RESOURCE_EXHAUSTED" in s or "Out of memory" in s or isinstance(e, MemoryError)


def measure(
    fam, n, dtype, cfg, *, device=None, method="newton", chunk=None, keep=False, reload=True
):
    """Throughput of ``fam`` at batch ``n`` (compile and run timed separately; with
    ``reload``, also the load from the persistent compilation cache)."""
    import jax

    m = n if chunk is None else min(n, chunk)
    reps = -(-n // m)
    try:
        arrays = fam.make(m, dtype, device)
        with jax.default_device(device) if device is not None else _null():
            compiled, ct = H.compile_jit(fam.fn(method), *arrays, reload=reload)
        if reps == 1:
            t = H.time_call(
                compiled, *arrays, repeats=cfg["repeats"], min_sample_s=cfg["min_sample_s"]
            )
        else:

            def many(*a):
                return [compiled(*a) for _ in range(reps)]

            t = H.time_call(many, *arrays, repeats=cfg["repeats"], min_sample_s=0.0)
            t["result"] = t["result"][-1]
    except Exception as e:
        if _is_oom(e) and m > 1000:
            return measure(
                fam,
                n,
                dtype,
                cfg,
                device=device,
                method=method,
                chunk=m // 8,
                keep=keep,
                reload=reload,
            )
        raise
    try:
        ran_on = str(next(iter(t["result"].information.devices())))
    except Exception:  # informative only
        ran_on = None
    r = jax.device_get(t["result"])
    res = {
        "n": n,
        "device": ran_on,
        "pairs_per_s": n / t["median_s"],
        "median_s": t["median_s"],
        "min_s": t["min_s"],
        "max_s": t["max_s"],
        "repeats": t["repeats"],
        "inner": t["inner"],
        "trace_lower_s": ct["trace_lower_s"],
        "compile_s": ct["compile_s"],
        "cold_cache_hits": ct["cold_cache_hits"],
        "reload_s": ct.get("reload_s"),
        "reload_cache_hits": ct.get("reload_cache_hits"),
        "iterations_max": int(np.max(r.iterations)),
        "iterations_mean": float(np.mean(r.iterations)),
        "converged_fraction": float(np.mean(r.converged)),
        "finite_fraction": float(np.mean(np.isfinite(r.information))),
    }
    if reps > 1:
        res["chunk"] = m
        res["note"] = f"run as {reps} chunks of {m} (same data) to fit device memory"
    extra = {"compiled": compiled, "iterations": np.asarray(r.iterations).ravel()}
    if keep:
        extra["arrays"] = [np.asarray(jax.device_get(a), dtype=np.float64) for a in arrays]
        extra["information"] = np.asarray(r.information, dtype=np.float64)
        extra["alpha"] = np.asarray(r.alpha, dtype=np.float64)
    return res, extra


def sweep_family(fam, dtype, cfg, *, device=None, log=print):
    """All batch sizes of one family; skips sizes predicted to exceed the point budget."""
    rows, keep, ops = [], None, None
    rate = None
    for n in sizes_for(fam, cfg):
        if rate is not None:
            predicted = n / rate * (cfg["repeats"] + 2)
            if predicted > cfg["point_budget_s"]:
                rows.append({"n": n, "skipped": f"predicted {predicted:.0f} s > budget"})
                log(f"  {fam.name:<34} n={n:>9,}  skipped (predicted {predicted:.0f} s)")
                continue
        try:
            # the load from the disk cache is reported (and judged) for float64 only
            res, extra = measure(
                fam,
                n,
                dtype,
                cfg,
                device=device,
                keep=(n == TARGET_BATCH),
                reload=np.dtype(dtype) == np.float64,
            )
        except Exception as e:  # record and continue with the other kernels
            msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            rows.append({"n": n, "error": f"{type(e).__name__}: {msg}"})
            log(f"  {fam.name:<34} n={n:>9,}  ERROR {type(e).__name__}: {msg[:120]}")
            break
        rate = res["pairs_per_s"]
        rows.append(res)
        ops = H.count_ops(extra["compiled"], n)  # of the largest batch measured
        # Newton trips actually run: the loop runs until its slowest pair converges (its
        # iterations, plus the trip that evaluates at the start, plus for kernels without a
        # one-pass value_derivs the trip at the last small step), per chunk when the kernel
        # splits the batch into chunks (a static outer loop)
        chunks = max(ops.get("static_trip_counts") or [1])
        it = extra["iterations"]
        size = -(-it.size // chunks)
        padded = np.zeros(chunks * size, it.dtype)
        padded[: it.size] = it
        res["chunks"] = chunks
        slowest = float(padded.reshape(chunks, size).max(axis=1).mean())
        res["effective_trips"] = slowest + (1.0 if fam.one_pass() else 2.0)
        if n == TARGET_BATCH:
            keep = extra
        log(
            f"  {fam.name:<34} n={n:>9,}  {rate:10.3e} pairs/s  "
            f"compile {res['trace_lower_s'] + res['compile_s']:.2f} s  "
            f"iters<={res['iterations_max']}  conv {res['converged_fraction']:.3f}"
        )
    return rows, keep, ops


# --------------------------------------------------------------------------- baselines


def _scipy_pair(kind, m1, b1, m2, b2, *, epsrel=1e-13, xatol=1e-10):
    from scipy import integrate, optimize

    if kind == "Laplace":

        def logp(x, m, b):
            return -abs(x - m) / b - math.log(2 * b)

    else:

        def logp(x, m, b):
            z = (x - m) / b
            return -0.5 * z * z - math.log(b) - 0.5 * math.log(2 * math.pi)

    lo, hi = min(m1, m2), max(m1, m2)

    def integrand(x, a):
        return math.exp(a * logp(x, m1, b1) + (1 - a) * logp(x, m2, b2))

    def log_c(a):
        kw = {"args": (a,), "epsabs": 0.0, "epsrel": epsrel, "limit": 200}
        total = integrate.quad(integrand, -math.inf, lo, **kw)[0]
        total += integrate.quad(integrand, lo, hi, **kw)[0] if hi > lo else 0.0
        total += integrate.quad(integrand, hi, math.inf, **kw)[0]
        return math.log(total)

    r = optimize.minimize_scalar(
        log_c, bounds=(0.0, 1.0), method="bounded", options={"xatol": xatol}
    )
    return -r.fun, r.x


def baseline_scipy(kind, arrays, ref, n_pairs, passes=3):
    """scipy per pair on the first ``n_pairs`` pairs, the median of ``passes`` passes;
    extrapolated per pair."""
    from scipy.integrate import IntegrationWarning

    m1, b1, m2, b2 = (a[:n_pairs] for a in arrays)
    out = np.empty(n_pairs)
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)
        for _ in range(passes):
            t0 = time.perf_counter()
            for i in range(n_pairs):
                pair = (float(m1[i]), float(b1[i]), float(m2[i]), float(b2[i]))
                out[i] = _scipy_pair(kind, *pair)[0]
            times.append(time.perf_counter() - t0)
    dt = float(np.median(times))
    rel = np.abs(out - ref[:n_pairs]) / np.abs(ref[:n_pairs])
    return {
        "method": "scipy.integrate.quad (3 pieces split at the locations, epsabs=0, "
        "epsrel=1e-13) inside scipy.optimize.minimize_scalar(bounded, xatol=1e-10)",
        "pairs_timed": n_pairs,
        "passes": passes,
        "seconds_per_pair": dt / n_pairs,
        "seconds_per_pair_min_max": [min(times) / n_pairs, max(times) / n_pairs],
        "pairs_per_s": n_pairs / dt,
        "rel_diff_vs_jaxdp": {"max": float(rel.max()), "median": float(np.median(rel))},
        "note": f"timed on {n_pairs} pairs, median of {passes} passes, extrapolated per pair",
    }


def _grid_log_c(kind, m1, b1, m2, b2, a):
    """Closed-form log C_a in numpy (textbook forms), broadcasting pairs (N,1) x alphas (G,)."""
    if kind == "Gaussian":
        var = a * b2 * b2 + (1 - a) * b1 * b1
        return (
            (1 - a) * np.log(b1)
            + a * np.log(b2)
            - 0.5 * np.log(var)
            - a * (1 - a) * (m2 - m1) ** 2 / (2 * var)
        )
    # Laplace: piecewise exponential integrand, kinks at the two locations
    l1, l2 = a / b1, (1 - a) / b2
    c0 = -a * np.log(2 * b1) - (1 - a) * np.log(2 * b2)
    lo, hi = np.minimum(m1, m2), np.maximum(m1, m2)
    e_lo = c0 - l1 * np.abs(m1 - lo) - l2 * np.abs(m2 - lo)
    e_hi = c0 - l1 * np.abs(m1 - hi) - l2 * np.abs(m2 - hi)
    s = l1 + l2
    z = e_hi - e_lo
    small = np.abs(z) < 1e-8
    zs = np.where(small, 1.0, z)
    log_exprel = np.where(small, 0.5 * z, np.log(np.abs(np.expm1(zs) / zs)))
    width = hi - lo
    with np.errstate(divide="ignore"):
        mid = np.where(width > 0, np.log(np.maximum(width, 1e-300)) + e_lo + log_exprel, -np.inf)
    terms = np.stack([e_lo - np.log(s), e_hi - np.log(s), mid])
    mx = terms.max(0)
    return mx + np.log(np.exp(terms - mx).sum(0))


def baseline_grid(kind, arrays, ref, n_pairs, *, n_alpha=1000, block=500):
    """numpy: log C_a on 1000 alphas for every pair (chunked), max over the grid."""
    alphas = np.linspace(0.0, 1.0, n_alpha)
    m1, b1, m2, b2 = (a[:n_pairs] for a in arrays)

    def run():
        out = np.empty(n_pairs)
        for s in range(0, n_pairs, block):
            sl = slice(s, s + block)
            lc = _grid_log_c(kind, m1[sl, None], b1[sl, None], m2[sl, None], b2[sl, None], alphas)
            out[sl] = -lc.min(axis=1)
        return out

    t = H.time_python(run, repeats=3)
    rel = np.abs(t["result"] - ref[:n_pairs]) / np.abs(ref[:n_pairs])
    return {
        "method": f"numpy closed-form log C_a on {n_alpha} alphas, max over the grid "
        f"(blocks of {block} pairs)",
        "pairs_timed": n_pairs,
        "pairs_per_s": n_pairs / t["median_s"],
        "median_s": t["median_s"],
        "rel_err_vs_jaxdp": {"max": float(rel.max()), "median": float(np.median(rel))},
    }


def baseline_optax(fam, cfg, ref_fn, n_pairs):
    """jaxdp.chernoff(..., method="optax") vs the default Newton on the same pairs."""
    import jax

    res, extra = measure(fam, n_pairs, np.float64, cfg, method="optax", reload=False)
    arrays = fam.make(n_pairs, np.float64)
    opt = np.asarray(jax.device_get(extra["compiled"](*arrays)).information)
    newton = np.asarray(jax.device_get(jax.jit(fam.fn())(*arrays)).information)
    rel = np.abs(opt - newton) / np.abs(newton)
    # NaN (a pair the optax method failed on) propagates into the max: it must show
    res["rel_diff_vs_newton"] = {"max": float(np.max(rel)), "median": float(np.median(rel))}
    res["nan_pairs"] = int(np.isnan(opt).sum())
    res["method"] = "jaxdp.chernoff(P, Q, method='optax') (optax.lbfgs on logit(alpha), per pair)"
    return res


# --------------------------------------------------------------------------- report


def markdown(res) -> str:
    md = [
        f"# Speed benchmark ({res['dtype']}{', GPU' if res['gpu'] else ''})\n",
        f"`{res['command']}`  \n{H.machine_line(res['machine'])}\n",
    ]
    md.append(
        "\n## jaxdp.chernoff throughput (pairs/s; median of timed runs, compile separate)\n\n"
    )
    rows = []
    for name, fam_rows in res["families"].items():
        for r in fam_rows:
            if "skipped" in r or "error" in r:
                rows.append(
                    [name, r["n"], r.get("skipped") or r.get("error"), None, None, None, None, None]
                )
                continue
            rows.append(
                [
                    name,
                    r["n"],
                    r["pairs_per_s"],
                    r["median_s"],
                    r["trace_lower_s"] + r["compile_s"],
                    r.get("reload_s"),
                    r["iterations_max"],
                    r["converged_fraction"],
                ]
            )
    md.append(
        H.md_table(
            [
                "kernel",
                "batch",
                "pairs/s",
                "median s",
                "trace+compile s",
                "from disk cache s",
                "iterations (max)",
                "converged",
            ],
            rows,
        )
    )
    if res.get("cpu_compare"):
        md.append("\n## Same kernels on the host CPU (same process)\n\n")
        rows = [
            [k, v.get("n"), v.get("pairs_per_s"), v.get("gpu_over_cpu")]
            for k, v in res["cpu_compare"].items()
        ]
        md.append(H.md_table(["kernel", "batch", "CPU pairs/s", "GPU / CPU"], rows))
    if res.get("float32_inprocess"):
        md.append("\n## float32 inputs in the same (x64) process\n\n")
        rows = [
            [k, v["n"], v["pairs_per_s"], v["float32_over_float64"]]
            for k, v in res["float32_inprocess"].items()
        ]
        md.append(
            H.md_table(
                ["kernel", "batch", "float32 pairs/s", "float32 / float64 (interleaved)"], rows
            )
        )
    if res.get("baselines"):
        md.append(f"\n## Baselines (same process; jaxdp at batch {TARGET_BATCH:.0e})\n\n")
        rows = []
        for fam, b in res["baselines"].items():
            for name, v in b.items():
                if not isinstance(v, dict) or "skipped" in v:
                    continue
                acc = (
                    v.get("rel_err_vs_jaxdp")
                    or v.get("rel_diff_vs_jaxdp")
                    or v.get("rel_diff_vs_newton")
                    or {}
                )
                rows.append(
                    [
                        fam,
                        name,
                        v.get("pairs_timed", v.get("n")),
                        v.get("pairs_per_s"),
                        v.get("jaxdp_speedup"),
                        acc.get("max"),
                        acc.get("median"),
                    ]
                )
        md.append(
            H.md_table(
                [
                    "kernel",
                    "baseline",
                    "pairs timed",
                    "pairs/s",
                    "jaxdp speed-up",
                    "max rel diff",
                    "median rel diff",
                ],
                rows,
            )
        )
        md.append(
            "\nscipy is timed on the pairs counted above (median of 3 passes) and "
            "extrapolated per pair; its "
            "relative difference to jaxdp is its own error (jaxdp is within ~1e-14 of "
            "mpmath, see accuracy.md). The grid's error is its discretisation error.\n"
        )
    if res.get("limits"):
        md.append("\n## What limits each kernel\n\n")
        md.append(
            "Transcendental ops (and divisions) per pair in the optimised HLO (after XLA "
            "CSE; `per trip` = inside the Newton loop, which runs until the slowest pair of "
            "the batch (or of each chunk, when the kernel chunks it) has converged: `trips`), "
            "the time they alone would take at the measured per-element "
            "cost of each op above the elementwise floor (a standalone `x + 1`), and the "
            "measured time per pair. A share near 1 means the kernel is bound by its "
            "transcendentals; well below 1, by the rest (selects, multiplies, loop-state "
            "memory traffic).\n\n"
        )
        rows = []
        for name, lim in res["limits"].items():
            rows.append(
                [
                    name,
                    lim["ops_outside"],
                    lim["ops_loop"],
                    lim["trips"],
                    lim["predicted_ns_per_pair"],
                    lim["measured_ns_per_pair"],
                    lim["transcendental_share"],
                ]
            )
        md.append(
            H.md_table(
                [
                    "kernel",
                    "ops outside loop",
                    "ops per trip",
                    "trips",
                    "transcendental ns/pair",
                    "measured ns/pair",
                    "share",
                ],
                rows,
            )
        )
        per = res.get("op_ns_per_element", {})
        md.append(
            "\nMeasured ns per element (standalone): "
            + ", ".join(f"{k} {v:.2f}" for k, v in per.items())
            + "\n"
        )
    if res.get("targets"):
        md.append("\n## Targets\n\n")
        md.append(
            H.md_table(
                ["target", "value", "goal", "met"],
                [[t["name"], t["value"], t["goal"], t["met"]] for t in res["targets"]],
            )
        )
    for note in res.get("notes", []):
        md.append(f"\n- {note}")
    return "".join(md) + "\n"


def _ops_str(d):
    return ", ".join(f"{k} {v:.3g}" for k, v in d.items()) or "-"


def best_rate(rows, min_n=TARGET_BATCH):
    rates = [r["pairs_per_s"] for r in rows if "pairs_per_s" in r and r["n"] >= min_n]
    return max(rates) if rates else None


def evaluate_targets(res) -> list[dict]:
    """Targets this process can evaluate alone (the float32 ratio is added by run.py)."""
    out = []

    def add(name, value, goal, higher=True):
        met = None if value is None else (value >= goal if higher else value <= goal)
        out.append({"name": name, "value": value, "goal": goal, "met": met})

    fams = res["families"]
    if res["gpu"]:
        if res["dtype"] == "float32" and "Laplace" in fams:
            add(
                "GPU float32 Laplace pairs/s",
                best_rate(fams["Laplace"], 10**6),
                TARGETS["gpu_float32_laplace_pairs_per_s"],
            )
        return out
    if res["dtype"] != "float64":
        return out
    base = res.get("baselines", {})
    for fam, key in (("Laplace", "laplace"), ("Gaussian", "gaussian")):
        if fam in fams:
            add(
                f"{fam} pairs/s (float64, batch >= 1e5)",
                best_rate(fams[fam]),
                TARGETS[f"{key}_pairs_per_s"],
            )
        b = base.get(fam, {})
        if "scipy" in b:
            add(f"{fam} speed-up vs scipy", b["scipy"]["jaxdp_speedup"], TARGETS[f"{key}_vs_scipy"])
        if "numpy_grid" in b:
            add(
                f"{fam} speed-up vs numpy grid",
                b["numpy_grid"]["jaxdp_speedup"],
                TARGETS["vs_numpy_grid"],
            )
    compile_times = [
        r["trace_lower_s"] + r["compile_s"]
        for rows in fams.values()
        for r in rows
        if "compile_s" in r
    ]
    if compile_times:
        add(
            "max trace+compile s (any kernel, any batch)",
            max(compile_times),
            TARGETS["compile_s"],
            higher=False,
        )
    reload_times = [r["reload_s"] for rows in fams.values() for r in rows if r.get("reload_s")]
    if reload_times:
        add(
            "max trace+compile s, executable in the persistent cache (any kernel, any batch)",
            max(reload_times),
            TARGETS["compile_s"],
            higher=False,
        )
    if res.get("float32_inprocess"):
        for fam, v in res["float32_inprocess"].items():
            add(
                f"{fam} float32/float64 (same process)",
                v["float32_over_float64"],
                TARGETS["float32_over_float64"],
            )
    return out


# --------------------------------------------------------------------------- compile only


def compile_only(args) -> int:
    """Cold trace+compile of each kernel at its largest quick batch up to ``TARGET_BATCH``,
    with every core this process may use (XLA:CPU compiles the fused kernels of a program in
    parallel, so this is what a laptop pays on a first call; the one-core figures of the
    speed suite are the issue's target). JAX's in-memory caches are cleared before each
    kernel and no persistent cache is used. Writes ``compile-all-cores.json``."""
    import jax

    cfg = dict(QUICK)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    dtype = np.float64 if args.dtype == "float64" else np.float32
    res = {"suite": "compile", "command": H.command_line(), "dtype": args.dtype}
    res.update(cores=cores, xla_flags=os.environ.get("XLA_FLAGS", ""), families={})
    print(f"compile ({args.dtype}): {cores} cores, backend {jax.default_backend()}")
    fams = families(cfg)
    if args.families:
        wanted = [w.strip() for w in args.families.split(",")]
        fams = [f for f in fams if any(f.name.startswith(w) for w in wanted)]
    for fam in fams:
        n = max(m for m in sizes_for(fam, cfg) if m <= TARGET_BATCH)
        arrays = fam.make(n, dtype)
        jax.clear_caches()
        _, ct = H.compile_jit(fam.fn(), *arrays)
        res["families"][fam.name] = {"n": n, **ct}
        total = ct["trace_lower_s"] + ct["compile_s"]
        print(f"  {fam.name:<34} n={n:>9,}  trace+compile {total:.2f} s")
    res["machine"] = H.machine_info()
    H.write_json(Path(args.out) / "compile-all-cores.json", res)
    return 0


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (well under a minute)")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ap.add_argument("--one-core", action="store_true", help="taskset -c 0 + single-thread XLA")
    ap.add_argument("--gpu", action="store_true", help="GPU sizes 1e6..1e8 + CPU comparison")
    ap.add_argument("--out", default=str(H.REPO / "benchmarks" / "results"))
    ap.add_argument("--families", default=None, help="comma-separated subset (name prefixes)")
    ap.add_argument("--sizes", default=None, help="comma-separated batch sizes (override)")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument(
        "--compile-only",
        action="store_true",
        help="only cold trace+compile times, one per kernel, on every core this process has",
    )
    args = ap.parse_args(argv)
    # (before anything else: a name that matches no kernel ran nothing and wrote empty results)
    names = [f.name for f in families(QUICK)]  # the same kernels in every mode
    for w in (w.strip() for w in (args.families or "").split(",")):
        if w and not any(n.startswith(w) for n in names):
            choices = ", ".join(names)
            ap.error(f"--families: no kernel name starts with {w!r}; choose from {choices}")

    if args.one_core:
        H.pin_one_core()
    H.repo_on_path()
    import jax

    jax.config.update("jax_enable_x64", args.dtype == "float64")
    import jaxdp

    if args.compile_only:
        return compile_only(args)
    # A fresh, empty persistent compilation cache: compile times stay cold, and each kernel
    # is then reloaded from it once to time what a later process pays (``reload_s``; in
    # float64, the figure reported and judged).
    cache_dir = tempfile.mkdtemp(prefix="jaxdp-bench-xla-")
    atexit.register(shutil.rmtree, cache_dir, True)  # also when a step fails
    jaxdp.enable_compile_cache(cache_dir)

    cfg = dict(GPU if args.gpu else QUICK if args.quick else FULL)
    if args.sizes:
        sizes = tuple(int(float(s)) for s in args.sizes.split(","))
        cfg["sizes"] = sizes
        cfg["cat_sizes"] = {k: sizes for k in cfg["cat_sizes"]}
        cfg["quad_sizes"] = tuple(s for s in sizes if s <= 10**5) or sizes[:1]
        cfg["dl_sizes"] = sizes
    dtype = np.float64 if args.dtype == "float64" else np.float32
    tag = ("gpu-" if args.gpu else "") + args.dtype
    res = {
        "suite": "speed",
        "command": H.command_line(),
        "mode": "gpu" if args.gpu else "quick" if args.quick else "full",
        "dtype": args.dtype,
        "gpu": args.gpu,
        "one_core": args.one_core,
        "config": {k: v for k, v in cfg.items()},
        "families": {},
        "notes": [],
    }
    if args.gpu and jax.default_backend() == "cpu":
        res["notes"].append("--gpu given but JAX's default backend is the CPU")
    print(
        f"speed ({tag}): backend {jax.default_backend()}, devices {jax.devices()}, "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
    )
    t_start = time.perf_counter()
    fams = families(cfg)
    if args.families:
        wanted = [w.strip() for w in args.families.split(",")]
        fams = [f for f in fams if any(f.name.startswith(w) for w in wanted)]
    out = Path(args.out)

    def flush():  # partial results survive a timeout
        res["machine"] = H.machine_info()
        H.write_json(out / f"speed-{tag}.json", res)

    kept, ops = {}, {}
    for fam in fams:
        rows, keep, fam_ops = sweep_family(fam, dtype, cfg)
        res["families"][fam.name] = rows
        flush()
        if keep is not None:
            kept[fam.name] = keep
        if fam_ops is not None:
            ops[fam.name] = fam_ops

    # GPU: the same kernels on the host CPU, same process
    if args.gpu and jax.default_backend() != "cpu":
        cpu = jax.devices("cpu")[0]
        n = cfg["cpu_compare_size"]
        res["cpu_compare"] = {}
        for fam in fams:
            if fam.name.startswith(("Categorical k=1000", "Categorical k=100", "Quadrature")):
                continue
            try:
                r, _ = measure(fam, n, dtype, {**cfg, "repeats": 3}, device=cpu, reload=False)
                gpu_rows = [
                    x for x in res["families"][fam.name] if x.get("n") == n and "pairs_per_s" in x
                ]
                ratio = gpu_rows[0]["pairs_per_s"] / r["pairs_per_s"] if gpu_rows else None
                res["cpu_compare"][fam.name] = {**r, "gpu_over_cpu": ratio}
                print(f"  CPU {fam.name:<30} n={n:,}  {r['pairs_per_s']:.3e} pairs/s")
            except Exception as e:
                res["cpu_compare"][fam.name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}

    # same-process float32 check (x64 on, float32 inputs)
    if args.dtype == "float64" and not args.gpu:
        res["float32_inprocess"] = {}
        for fam in fams:
            if fam.name not in ("Laplace", "Gaussian"):
                continue
            if fam.name not in kept:
                continue
            r, extra = measure(fam, TARGET_BATCH, np.float32, cfg, reload=False)
            # The ratio from alternating rounds of the two executables on the same data:
            # a slow spell of a shared machine then slows both alike (the float64 figure of
            # the batch sweep was taken minutes earlier).
            t64, t32 = H.interleaved(
                [
                    (kept[fam.name]["compiled"], fam.make(TARGET_BATCH, np.float64)),
                    (extra["compiled"], fam.make(TARGET_BATCH, np.float32)),
                ],
                rounds=3 * cfg["repeats"],
            )
            res["float32_inprocess"][fam.name] = {
                **r,
                "interleaved_float64_s": t64,
                "interleaved_float32_s": t32,
                "float32_over_float64": t64 / t32,
            }
            print(
                f"  {fam.name} float32 in-process: {r['pairs_per_s']:.3e} pairs/s, "
                f"{t64 / t32:.2f}x float64 (interleaved)"
            )

    # baselines (float64, CPU)
    if args.dtype == "float64" and not args.gpu and not args.no_baselines:
        res["baselines"] = {}
        for fam in fams:
            if fam.name not in ("Laplace", "Gaussian") or fam.name not in kept:
                continue
            keep = kept[fam.name]
            rate = next(r for r in res["families"][fam.name] if r.get("n") == TARGET_BATCH)
            rate = rate["pairs_per_s"]
            b = {}
            t = time.perf_counter()
            b["scipy"] = baseline_scipy(
                fam.name, keep["arrays"], keep["information"], cfg["scipy_pairs"]
            )
            b["numpy_grid"] = baseline_grid(
                fam.name, keep["arrays"], keep["information"], cfg["grid_pairs"]
            )
            if fam.name not in cfg["optax_families"]:
                b["jaxdp_optax"] = {"skipped": "not in this mode's optax_families"}
            else:
                try:
                    b["jaxdp_optax"] = baseline_optax(fam, cfg, None, cfg["optax_pairs"])
                except Exception as e:
                    b["jaxdp_optax"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            for v in b.values():
                if "pairs_per_s" in v:
                    v["jaxdp_speedup"] = rate / v["pairs_per_s"]
            res["baselines"][fam.name] = b
            print(
                f"  baselines {fam.name}: scipy {b['scipy']['pairs_per_s']:.3g}/s "
                f"(x{b['scipy']['jaxdp_speedup']:.3g}), "
                f"grid {b['numpy_grid']['pairs_per_s']:.3g}/s "
                f"(x{b['numpy_grid']['jaxdp_speedup']:.3g}), optax "
                f"{b['jaxdp_optax'].get('pairs_per_s', float('nan')):.3g}/s "
                f"[{time.perf_counter() - t:.1f} s]"
            )

    # what limits each kernel
    if ops:
        needed = sorted(
            {k for o in ops.values() for part in ("outside", "loop_body") for k in o[part]}
        )
        per_op = {}
        if needed:
            per_op = H.op_throughput(dtype, n=cfg["op_n"], repeats=3, ops={*needed, "add"})
        res["op_ns_per_element"] = {k: v * 1e9 for k, v in per_op.items()}
        # inside a fused kernel the memory round trip is shared by many ops: charge each op
        # its cost above the elementwise floor (a standalone ``x + 1``)
        floor = per_op.get("add", 0.0)
        net_op = {k: max(v - floor, 0.0) for k, v in per_op.items() if k != "add"}
        res["op_net_ns_per_element"] = {k: v * 1e9 for k, v in net_op.items()}
        res["limits"] = {}
        for name, o in ops.items():
            rows = [r for r in res["families"][name] if "pairs_per_s" in r]
            if not rows:
                continue
            ref = max(rows, key=lambda r: r["n"])
            trips = ref.get("effective_trips", ref["iterations_max"] + 1)
            pred = H.predicted_seconds(o, trips, net_op)
            meas = ref["median_s"] / ref["n"]
            res["limits"][name] = {
                "ops_outside": _ops_str(o["outside"]),
                "ops_loop": _ops_str(o["loop_body"]),
                "ops": o,
                "trips": trips,
                "chunks": ref.get("chunks"),
                "at_batch": ref["n"],
                "predicted_ns_per_pair": pred * 1e9,
                "measured_ns_per_pair": meas * 1e9,
                "transcendental_share": pred / meas if meas > 0 else None,
            }
    res["seconds"] = time.perf_counter() - t_start
    res["machine"] = H.machine_info()
    res["targets"] = evaluate_targets(res)
    H.write_json(out / f"speed-{tag}.json", res)
    H.write_text(out / f"speed-{tag}.md", markdown(res))
    print(f"speed ({tag}): wrote {out / f'speed-{tag}.json'} and .md in {res['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

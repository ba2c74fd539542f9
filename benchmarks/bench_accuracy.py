"""Accuracy benchmark: the paper's formulas, the library against mpmath, quadrature vs levels.

Usage::

    python benchmarks/bench_accuracy.py [--quick | --tiny] [--out benchmarks/results]

Writes ``accuracy.json`` and ``accuracy.md`` under ``--out``. Four sections:

1. **Paper formulas** (:mod:`jaxdp.paper`, implemented as printed) against the exact value
   they aim at (:mod:`jaxdp.conversions`, cross-checked against :func:`jaxdp.chernoff`,
   :func:`jaxdp.kl`, :func:`jaxdp.tv` on randomized response; eqs. (34)/(35) against
   ``jaxdp.kl``/``jaxdp.chernoff`` on the attacked Laplace pair over eps x shift x theta):
   relative gap, whether the claimed bound holds, and the eps intervals where it fails
   (boundaries refined to ~1e-6 relative on a dense sub-grid).
2. **Library vs mpmath**: ``jaxdp.chernoff`` on random pairs of every family plus edge cases
   (near-identical, huge shifts, extreme scale ratios, alpha* near 0 or 1) against a
   50-digit reference generated here: exact ``log C_a`` from
   ``tests/references/mp_reference.py`` maximised by golden-section search polished with
   parabolic interpolation. Max and median relative error, float64 and float32 (each dtype
   against the reference at its own rounded parameters).
3. **Quadrature vs closed forms**: ``jaxdp.kernels.quadrature.log_bc`` at ``level`` L
   (step ``2**-L``) against the closed-form kernels, with the number of nodes.
4. **TV on the quadrature path**: ``jaxdp.tv`` on random Laplace vs Gaussian pairs against
   the exact value, float64 and float32.

The ``checks`` list in the JSON records pass/fail of the accuracy thresholds
(:data:`THRESHOLDS`); the exit status is 1 when one fails.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

H.repo_on_path()

#: Accuracy thresholds checked by this benchmark (and by tests/test_benchmarks_smoke.py).
THRESHOLDS = {
    # jaxdp.chernoff vs the mpmath reference, relative error of the information
    "float64_max_rel": 1e-10,
    "float64_median_rel": 1e-14,
    "float32_max_rel": 1e-4,
    "float32_median_rel": 1e-6,
    # exact sup formulas (jaxdp.conversions) vs jaxdp on randomized response
    "exact_vs_library_rel": 1e-12,
    # quadrature at the default level vs closed forms (float64)
    "quadrature_default_rel": 1e-10,
    # jaxdp.tv on the quadrature path (Laplace vs Gaussian) vs mpmath (float64, float32)
    "tv_quadrature_float64_rel": 1e-13,
    "tv_quadrature_float32_rel": 1e-6,
}


# --------------------------------------------------------------------------- mpmath reference


def _load_reference():
    path = H.REPO / "tests" / "references" / "mp_reference.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("_jaxdp_bench_mp_reference", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def mp_chernoff(R, P, Q):
    r"""``(C, a*)`` of a reference pair: max over [0, 1] of :math:`-\log C_a` at 50 digits.

    Golden-section search (f is concave) down to a bracket of ~1e-6, then successive
    parabolic interpolation inside the bracket until the step is below 1e-30. Independent of
    jaxdp (only the reference's exact ``log_bc`` is used).
    """
    from mpmath import mp

    with mp.workdps(50):

        def f(a):
            return -R.log_bc(P, Q, a)

        g = (mp.sqrt(5) - 1) / 2
        lo, hi = mp.mpf(0), mp.mpf(1)
        flo, fhi = f(lo), f(hi)
        x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
        f1, f2 = f(x1), f(x2)
        for _ in range(30):
            if f1 < f2:
                lo, flo, x1, f1 = x1, f1, x2, f2
                x2 = lo + g * (hi - lo)
                f2 = f(x2)
            else:
                hi, fhi, x2, f2 = x2, f2, x1, f1
                x1 = hi - g * (hi - lo)
                f1 = f(x1)
        if f1 >= f2:
            a, b, c, fa, fb, fc = lo, x1, x2, flo, f1, f2
        else:
            a, b, c, fa, fb, fc = x1, x2, hi, f1, f2, fhi
        if fb >= fa and fb >= fc:
            for _ in range(60):
                num = (b - a) ** 2 * (fb - fc) - (b - c) ** 2 * (fb - fa)
                den = (b - a) * (fb - fc) - (b - c) * (fb - fa)
                if den == 0:
                    break
                v = b - num / (2 * den)
                if not (a < v < c) or abs(v - b) < mp.mpf(10) ** -30:
                    break
                fv = f(v)
                if v > b:
                    if fv >= fb:
                        a, fa, b, fb = b, fb, v, fv
                    else:
                        c, fc = v, fv
                elif fv >= fb:
                    c, fc, b, fb = b, fb, v, fv
                else:
                    a, fa = v, fv
        best, arg = fb, b
        f0, f1_ = f(mp.mpf(0)), f(mp.mpf(1))
        if f0 >= best:
            best, arg = f0, mp.mpf(0)
        if f1_ >= best:
            best, arg = f1_, mp.mpf(1)
        return best, arg


# --------------------------------------------------------------------------- cases

SECTIONS = ("paper", "mpmath", "quadrature", "tv")

# family -> (jaxdp constructor of the pair from parameter arrays, reference constructor)
FAMILIES = ("Laplace", "Gaussian", "DiscreteLaplace", "Categorical", "Laplace-Gaussian")


def _edge_cases():
    """Named edge cases per family: parameters as float64 tuples (categorical: prob lists)."""
    t = 2.0**-20
    return {
        "Laplace": [
            ("near-identical locs (shift 1e-8)", (0.0, 1.0, 1e-8, 1.0)),
            ("near-identical scales (1 + 1e-9)", (0.0, 1.0, 0.0, 1.0 + 1e-9)),
            ("equal scales, shift 1", (0.0, 1.0, 1.0, 1.0)),
            ("huge shift (1e4 scales)", (0.0, 1.0, 1e4, 1.0)),
            ("huge shift, scales 1 and 3", (0.0, 1.0, 1e3, 3.0)),
            ("scale ratio 1e6", (0.0, 1.0, 0.5, 1e6)),
            ("scale ratio 1e-6", (0.0, 1.0, 0.5, 1e-6)),
            ("same loc, scale ratio 1e3 (alpha* near end)", (0.0, 1.0, 0.0, 1e3)),
            ("shift 1e-3, scale ratio 1e-3 (alpha* near end)", (0.0, 1.0, 1e-3, 1e-3)),
        ],
        "Gaussian": [
            ("near-identical means (shift 1e-8)", (0.0, 1.0, 1e-8, 1.0)),
            ("near-identical scales (1 + 1e-9)", (0.0, 1.0, 0.0, 1.0 + 1e-9)),
            ("huge shift (1e3 sigmas)", (0.0, 1.0, 1e3, 1.0)),
            ("huge shift, sigmas 1 and 5", (0.0, 1.0, 300.0, 5.0)),
            ("scale ratio 1e6", (0.0, 1.0, 1.0, 1e6)),
            ("scale ratio 1e-6", (0.0, 1.0, 1.0, 1e-6)),
            ("same mean, scale ratio 1e4 (alpha* near end)", (0.0, 1.0, 0.0, 1e4)),
            ("shift 1e-4, scale ratio 1e-2 (alpha* near end)", (0.0, 1.0, 1e-4, 1e-2)),
            # float32: (sigma2/sigma1)^2 = e^rho overflows, solved as (Q, P)
            ("scale ratio 1e25 (e^rho overflows float32)", (0.0, 1.0, 2.0, 1e25)),
        ],
        "DiscreteLaplace": [
            ("geometric, eps 1e-6", (0.0, 1e6, 1.0, 1e6)),
            ("near-identical scales (1 + 1e-9)", (0.0, 1.0, 0.0, 1.0 + 1e-9)),
            ("huge shift (1000)", (0.0, 1.0, 1000.0, 1.0)),
            ("scale ratio 1e3", (0.0, 0.1, 3.0, 100.0)),
            ("geometric, eps 20", (0.0, 0.05, 1.0, 0.05)),
        ],
        "Categorical": [
            (
                "near-identical (2^-20)",
                ([0.25, 0.25, 0.25, 0.25], [0.25 + t, 0.25 - t, 0.25, 0.25]),
            ),
            (
                "RR-like, eps ~ 27",
                (
                    [1 - 3 * 2.0**-40, 2.0**-40, 2.0**-40, 2.0**-40],
                    [2.0**-40, 1 - 3 * 2.0**-40, 2.0**-40, 2.0**-40],
                ),
            ),
            (
                "supp P inside supp Q (alpha* at an end)",
                ([0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]),
            ),
            ("one zero each", ([0.5, 0.25, 0.25, 0.0], [0.0, 0.25, 0.25, 0.5])),
        ],
        "Laplace-Gaussian": [
            ("same centre, same scale", (0.0, 1.0, 0.0, 1.0)),
            ("huge shift (30 scales)", (0.0, 1.0, 30.0, 1.0)),
            # (the plain quadrature rule missed the integrand's peak from ~1000 Laplace
            # scales apart: 2.2e-7 and 5.6e-5 off before ff0ae60, certified)
            ("huge shift (5000 scales)", (0.0, 1.0, 5000.0, 1.0)),
            ("huge shift (1e4 Laplace scales, Gaussian 10x wider)", (0.0, 0.1, 1000.0, 1.0)),
            ("wide Gaussian (ratio 100)", (0.0, 1.0, 0.0, 100.0)),
            ("narrow Gaussian (ratio 1e-2)", (0.0, 1.0, 0.5, 1e-2)),
        ],
    }


def _random_cases(family: str, n: int, rng) -> list:
    out = []
    for i in range(n):
        if family == "Categorical":
            # dyadic probabilities (multiples of 2^-20) sum to exactly 1 in float32 and float64
            cp = rng.multinomial(2**20 - 4, rng.dirichlet(np.ones(4))) + 1
            cq = rng.multinomial(2**20 - 4, rng.dirichlet(np.ones(4))) + 1
            out.append((f"random {i}", (list(cp / 2.0**20), list(cq / 2.0**20))))
        elif family == "DiscreteLaplace":
            m1, m2 = (float(v) for v in rng.integers(-4, 5, size=2))
            b1, b2 = (float(v) for v in np.exp(rng.uniform(-1.5, 1.5, size=2)))
            out.append((f"random {i}", (m1, b1, m2, b2)))
        else:
            m1, m2 = (float(v) for v in rng.normal(size=2))
            b1, b2 = (float(v) for v in np.exp(rng.uniform(-1.5, 1.5, size=2)))
            out.append((f"random {i}", (m1, b1, m2, b2)))
    return out


def _round(params, dtype):
    """Parameters rounded to ``dtype`` (returned as Python floats, exactly)."""
    if isinstance(params[0], list):
        return tuple([float(v) for v in np.asarray(p, dtype=dtype)] for p in params)
    return tuple(float(v) for v in np.asarray(params, dtype=dtype))


def _ref_pair(R, family, params):
    if family == "Categorical":
        return R.Categorical(tuple(params[0])), R.Categorical(tuple(params[1]))
    m1, b1, m2, b2 = params
    if family == "Laplace":
        return R.Laplace(m1, b1), R.Laplace(m2, b2)
    if family == "Gaussian":
        return R.Gaussian(m1, b1), R.Gaussian(m2, b2)
    if family == "DiscreteLaplace":
        return R.DiscreteLaplace(int(m1), b1), R.DiscreteLaplace(int(m2), b2)
    if family == "Laplace-Gaussian":
        return R.Laplace(m1, b1), R.Gaussian(m2, b2)
    raise ValueError(family)


_CHERNOFF_CACHE: dict = {}
#: batch size the chernoff calls are padded to (set by ``main`` per mode)
PAD = 2048


def _jaxdp_chernoff(family: str, params_list: list, dtype):
    """``jaxdp.chernoff`` on a batch of cases (padded to a multiple of 64, one compile)."""
    import jax
    import jax.numpy as jnp

    import jaxdp as jd

    n = len(params_list)
    size = -(-n // PAD) * PAD  # one padded size per mode: every call shares a compile
    padded = list(params_list) + [params_list[0]] * (size - n)
    key = (family, np.dtype(dtype).name, size)
    if key not in _CHERNOFF_CACHE:

        def fn(*arrays):
            if family == "Categorical":
                P = jd.Categorical.from_log_probs(arrays[0])
                Q = jd.Categorical.from_log_probs(arrays[1])
            else:
                m1, b1, m2, b2 = arrays
                cls_p, cls_q = {
                    "Laplace": (jd.Laplace, jd.Laplace),
                    "Gaussian": (jd.Gaussian, jd.Gaussian),
                    "DiscreteLaplace": (jd.DiscreteLaplace, jd.DiscreteLaplace),
                    "Laplace-Gaussian": (jd.Laplace, jd.Gaussian),
                }[family]
                P, Q = cls_p(m1, b1), cls_q(m2, b2)
            return jd.chernoff(P, Q)

        # The mixed pair goes through quadrature, whose nodes are batch + (n,): evaluate it
        # per pair under vmap (a batched Laplace vs Gaussian pair currently fails to broadcast).
        _CHERNOFF_CACHE[key] = jax.jit(jax.vmap(fn) if family == "Laplace-Gaussian" else fn)
    if family == "Categorical":
        with np.errstate(divide="ignore"):
            arrays = [
                jnp.asarray(np.log(np.asarray([p[i] for p in padded], dtype=dtype))) for i in (0, 1)
            ]
    else:
        cols = np.asarray(padded, dtype=dtype)
        arrays = [jnp.asarray(cols[:, i]) for i in range(4)]
    r = _CHERNOFF_CACHE[key](*arrays)
    r = jax.device_get(r)
    return (
        np.asarray(r.information, dtype=np.float64)[:n],
        np.asarray(r.alpha, dtype=np.float64)[:n],
        np.asarray(r.converged)[:n],
    )


def _rel(x, ref):
    if math.isinf(ref) or math.isnan(ref):
        return 0.0 if x == ref else math.inf
    if math.isnan(x):
        return math.inf
    # P == Q (e.g. parameters that round to the same float32): the reference is 0 up to its
    # 50-digit noise, so score the absolute error instead.
    return abs(x - ref) / abs(ref) if abs(ref) > 1e-40 else abs(x)


def section_mpmath(R, *, n_random: int, families, rng) -> dict:
    from mpmath import mp

    edges = _edge_cases()
    out = {"families": {}, "cases": []}
    timing = {"reference_s": 0.0, "jaxdp_incl_compile_s": 0.0}
    ref_cache: dict = {}
    t0 = time.perf_counter()
    for family in families:
        cases = [(name, p, "edge") for name, p in edges[family]]
        cases += [(name, p, "random") for name, p in _random_cases(family, n_random, rng)]
        fam = {}
        for dtype in (np.float64, np.float32):
            dname = np.dtype(dtype).name
            params = [_round(p, dtype) for _, p, _ in cases]
            t_ref = time.perf_counter()
            refs = []
            for p in params:  # parameters that round to themselves reuse the float64 value
                key = (family, repr(p))
                if key not in ref_cache:
                    ref_cache[key] = mp_chernoff(R, *_ref_pair(R, family, p))
                refs.append(ref_cache[key])
            t_lib = time.perf_counter()
            info, alpha, conv = _jaxdp_chernoff(family, params, dtype)
            timing["reference_s"] += t_lib - t_ref
            timing["jaxdp_incl_compile_s"] += time.perf_counter() - t_lib
            rels, rows = [], []
            for i, (name, _, kind) in enumerate(cases):
                ref_c, ref_a = refs[i]
                rel = _rel(float(info[i]), float(ref_c))
                rels.append(rel)
                rows.append(
                    {
                        "family": family,
                        "case": name,
                        "kind": kind,
                        "dtype": dname,
                        "params": params[i],
                        "reference": float(ref_c),
                        "reference_str": mp.nstr(ref_c, 20),
                        "reference_alpha": float(ref_a),
                        "jaxdp": float(info[i]),
                        "jaxdp_alpha": float(alpha[i]),
                        "converged": bool(conv[i]),
                        "rel_err": rel,
                        # alpha* is arbitrary when P == Q
                        "alpha_abs_err": abs(float(alpha[i]) - float(ref_a))
                        if abs(ref_c) > 1e-40
                        else 0.0,
                    }
                )
            out["cases"] += rows
            worst = int(np.argmax(rels))
            fam[dname] = {
                "n": len(rels),
                "max_rel": max(rels),
                "median_rel": float(np.median(rels)),
                "max_rel_random": max(
                    r for r, c in zip(rels, cases, strict=True) if c[2] == "random"
                )
                if any(c[2] == "random" for c in cases)
                else None,
                "worst_case": cases[worst][0],
                "max_alpha_abs_err": max(r["alpha_abs_err"] for r in rows),
                "all_converged": bool(np.all(conv)),
            }
        out["families"][family] = fam
    out["seconds"] = time.perf_counter() - t0
    out["timing"] = timing
    for dname in ("float64", "float32"):
        rels = [c["rel_err"] for c in out["cases"] if c["dtype"] == dname]
        out[dname] = {"n": len(rels), "max_rel": max(rels), "median_rel": float(np.median(rels))}
    return out


# --------------------------------------------------------------------------- paper formulas


def _intervals(eps, bad):
    """Maximal runs of ``bad`` grid points as ``[(i_start, i_end)]`` (inclusive)."""
    runs, start = [], None
    for i, b in enumerate(bad):
        if b and start is None:
            start = i
        if not b and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(bad) - 1))
    return runs


def _refine(status_fn, lo, hi, lo_bad, n):
    """Boundary between ``lo`` and ``hi`` (status differs): three dense vectorised passes of
    ``n`` points (the main grid's length, so the jitted formulas are not recompiled)."""
    for _ in range(3):
        grid = np.geomspace(lo, hi, n)
        bad = status_fn(grid)
        flips = np.nonzero(bad != lo_bad)[0]
        if len(flips) == 0:
            return hi
        j = flips[0]
        lo, hi = grid[max(j - 1, 0)], grid[j]
    return 0.5 * (lo + hi)


def _runs(eps, bad, status, refine):
    """Intervals of eps where ``bad`` holds, ends refined with ``status`` (vectorised)."""
    out = []
    for i0, i1 in _intervals(eps, bad):
        if not refine:
            out.append([float(eps[i0]), float(eps[i1])])
            continue
        n = len(eps)
        lo = eps[i0] if i0 == 0 else _refine(status, eps[i0 - 1], eps[i0], False, n)
        hi = eps[i1] if i1 == n - 1 else _refine(status, eps[i1], eps[i1 + 1], True, n)
        out.append([float(lo), float(hi)])
    return out


def _assess(name, claim, kind, eps, value_fn, exact_fn, note="", refine=True):
    """Compare ``value_fn(eps)`` with ``exact_fn(eps)`` (numpy float64 arrays)."""
    eps = np.asarray(eps, dtype=np.float64)
    v = np.asarray(value_fn(eps), dtype=np.float64)
    e = np.asarray(exact_fn(eps), dtype=np.float64) if exact_fn is not None else None

    def status(x):
        vx = np.asarray(value_fn(x), dtype=np.float64)
        if kind == "range":
            return ~((vx > 0) & (vx <= 1))
        ex = np.asarray(exact_fn(x), dtype=np.float64)
        if kind == "upper":
            return ~(vx >= ex - 1e-12 * np.abs(ex))
        return ~(np.abs(vx - ex) <= 1e-9 * np.abs(ex) + 1e-300)

    bad = status(eps)
    fails = _runs(eps, bad, status, refine)
    res = {
        "name": name,
        "claim": claim,
        "kind": kind,
        "eps_range": [float(eps[0]), float(eps[-1])],
        "n_points": len(eps),
        "holds_fraction": float(np.mean(~bad)),
        "fails_on": fails,
        # the first NaN's eps, refined between grid points like the failure ranges (the
        # grid point alone said 1.09 for formulas that are NaN from eps = 1 on)
        "nan_from": _runs(
            eps, np.isnan(v), lambda x: np.isnan(np.asarray(value_fn(x), float)), refine
        )[0][0]
        if np.isnan(v).any()
        else None,
        "negative_on": _runs(eps, v < 0, lambda x: np.asarray(value_fn(x)) < 0, refine),
        "note": note,
    }
    if e is not None:
        ok = np.isfinite(v) & np.isfinite(e) & (e != 0)
        gap = (v[ok] - e[ok]) / np.abs(e[ok])
        res["rel_gap"] = (
            {
                "min": float(gap.min()),
                "median": float(np.median(gap)),
                "max": float(gap.max()),
                "at_eps": {
                    "min": float(eps[ok][np.argmin(gap)]),
                    "max": float(eps[ok][np.argmax(gap)]),
                },
            }
            if gap.size
            else None
        )
        res["samples"] = [
            {"eps": float(x), "value": float(y), "exact": float(z)}
            for x, y, z in zip(
                eps[:: max(1, len(eps) // 6)],
                v[:: max(1, len(eps) // 6)],
                e[:: max(1, len(eps) // 6)],
                strict=True,
            )
        ]
    return res


def section_paper(n_eps: int) -> dict:
    import jax
    import jax.numpy as jnp

    import jaxdp as jd
    from jaxdp import conversions as cv
    from jaxdp import mechanisms
    from jaxdp import paper as pp

    def npf(f):
        return lambda *a: np.asarray(f(*(jnp.asarray(x, dtype=jnp.float64) for x in a)))

    eps = np.geomspace(1e-3, 20.0, n_eps)
    rows = []
    exact_c = npf(cv.max_chernoff_eps_dp)
    exact_kl = npf(cv.max_kl_eps_dp)
    exact_tv = npf(lambda e: cv.max_tv_eps_dp(e, 1))
    exact_tvc = npf(cv.max_tv_chernoff)

    rows.append(_assess("eq22", "sup KL over eps-DP pairs", "equal", eps, npf(pp.eq22), exact_kl))
    for name, claim in (
        ("eq30_max", "Chernoff information of eps-DP ('Chernoff-Cuff', max of (30))"),
        ("eq31_max", "upper bound C_ubI on C of eps-DP (max of (31))"),
        ("eq32_max", "upper bound C_ubII on C of eps-DP (sup of (32))"),
        ("eq72", "optimal upper bound C*_ub on C of eps-DP"),
        ("fig2_ub1", "Fig. 2 'UB I': (31) at alpha_alt (43)"),
        ("fig2_ub2", "Fig. 2 'UB II': (31) at alpha_ubI"),
    ):
        kind = "equal" if name == "eq30_max" else "upper"
        rows.append(_assess(name, claim, kind, eps, npf(getattr(pp, name)), exact_c))
    for alpha in (0.25, 0.5, 0.75):
        wc = npf(lambda e, a=alpha: cv.max_neg_log_bc_eps_dp(e, a))
        rows.append(
            _assess(
                f"eq56 (alpha={alpha})",
                "Jensen bound on -log C_alpha of eps-DP",
                "upper",
                eps,
                npf(lambda e, a=alpha: pp.eq56(e, a)),
                wc,
            )
        )
        rows.append(
            _assess(
                f"fig2_kl_cuff (alpha={alpha})",
                "(1 - alpha) eq22 bounds -log C_alpha of eps-DP",
                "upper",
                eps,
                npf(lambda e, a=alpha: pp.fig2_kl_cuff(e, a)),
                wc,
            )
        )
    for name in ("alpha_ub1", "eq69", "eq43"):
        rows.append(
            _assess(
                name,
                "an alpha in the claimed range (0, 1]",
                "range",
                eps,
                npf(getattr(pp, name)),
                None,
            )
        )
    rows.append(
        _assess("eq39", "Adv <= e^eps - 1 for eps-DP", "upper", eps, npf(pp.eq39), exact_tv)
    )
    for delta in (0.0, 1e-5, 0.1):
        rows.append(
            _assess(
                f"eq40 (delta={delta:g})",
                "Adv <= 1 - (1 - delta) e^-eps for (eps, delta)-DP",
                "upper",
                eps,
                npf(lambda e, d=delta: pp.eq40(e, d)),
                npf(lambda e, d=delta: cv.max_tv_eps_delta_dp(e, d)),
            )
        )
    rows.append(
        _assess("eq41 (pure DP)", "Adv <= 1 - e^-eps, eps-DP", "upper", eps, npf(pp.eq41), exact_tv)
    )
    rows.append(
        _assess(
            "eq41 (Chernoff budget)",
            "Adv <= 1 - e^-eps when C(P,Q) <= eps (Theorem 5)",
            "upper",
            eps,
            npf(pp.eq41),
            exact_tvc,
        )
    )
    rows.append(
        _assess("eq42", "sharp Adv bound tanh(eps/2)", "equal", eps, npf(pp.eq42), exact_tv)
    )
    log2e = 1.0 / math.log(2.0)
    rows.append(
        _assess(
            "eq38 (q=1)",
            "best advantage 1 - 2^-C (C in bits) at Chernoff information C = eps nats",
            "upper",
            eps,
            npf(lambda c: pp.eq38(c * log2e, 1)),
            exact_tvc,
        )
    )

    # eqs. (34)/(35): attacked Laplace pair over eps (b = 1/eps) x shift x theta, vs jaxdp.
    shifts, thetas = (0.5, 1.0, 2.0), (0.5, 1.0, 2.0)
    E, S, T = np.meshgrid(eps, shifts, thetas, indexing="ij")
    b = 1.0 / E
    P = jd.Laplace(jnp.zeros(E.size), jnp.asarray(b.ravel()))
    Q = jd.Laplace(jnp.asarray(S.ravel()), jnp.asarray((T * b).ravel()))
    kl = np.asarray(jax.jit(jd.kl)(P, Q)).reshape(E.shape)
    cases = list(zip(np.zeros(E.size), b.ravel(), S.ravel(), (T * b).ravel(), strict=True))
    ch = _jaxdp_chernoff("Laplace", cases, np.float64)[0].reshape(E.shape)
    v34 = np.asarray(pp.eq34(S, b, T))
    v35 = np.asarray(pp.eq35(S, b, T))
    for name, v, ex, claim in (
        ("eq34", v34, kl, "KL(Lap(0,b) || Lap(shift, theta b))"),
        ("eq35", v35, ch, "Chernoff information of Lap(0,b) vs Lap(shift, theta b)"),
    ):
        for j, s in enumerate(shifts):
            for k, th in enumerate(thetas):
                vv, ee = v[:, j, k], ex[:, j, k]
                rows.append(
                    _assess(
                        f"{name} (shift={s:g}, theta={th:g})",
                        claim,
                        "equal",
                        eps,
                        lambda x, vv=vv: np.interp(np.log(x), np.log(eps), vv),
                        lambda x, ee=ee: np.interp(np.log(x), np.log(eps), ee),
                        note="exact from jaxdp.kl / jaxdp.chernoff; b = 1/eps; grid resolution",
                        refine=False,
                    )
                )

    # exact sup formulas vs the library on their extremal pair (binary randomized response)
    P2, Q2 = mechanisms.randomized_response(jnp.asarray(eps), 2)
    lib_c = np.asarray(jax.jit(jd.chernoff)(P2, Q2).information)
    lib_kl = np.asarray(jax.jit(jd.kl)(P2, Q2))
    lib_tv = np.asarray(jax.jit(jd.tv)(P2, Q2))
    cross = {}
    for name, lib, ex in (
        ("max_chernoff_eps_dp vs chernoff(RR)", lib_c, exact_c(eps)),
        ("max_kl_eps_dp vs kl(RR)", lib_kl, exact_kl(eps)),
        ("max_tv_eps_dp vs tv(RR)", lib_tv, exact_tv(eps)),
    ):
        cross[name] = float(np.max(np.abs(lib - ex) / np.abs(ex)))
    e34 = float(np.max(np.abs(v34 - kl) / np.abs(kl)))
    return {
        "eps_grid": [float(eps[0]), float(eps[-1]), len(eps)],
        "formulas": rows,
        "exact_vs_library": cross,
        "eq34_vs_kl_max_rel": e34,
    }


# --------------------------------------------------------------------------- quadrature


def section_quadrature(
    levels, R=None, *, float32_levels=None, plain_levels=None, families=None
) -> dict:
    """Quadrature ``log C_a`` at each level against closed forms (and mpmath for the mixed
    pair), for both rules of the path: ``jd.log_bc``'s (the plain rule's pieces also end at
    the integrand's peaks; every dtype) and the plain rule that the Chernoff solver and the
    divergences evaluate (float64; at ``plain_levels`` if given, every level otherwise). One
    jitted call per (level, rule, dtype) evaluates every pair (under ``vmap``); each row
    counts the nodes per pair of both rules."""
    import jax
    import jax.numpy as jnp

    import jaxdp as jd
    from jaxdp.kernels import gaussian as kg
    from jaxdp.kernels import laplace as kl_
    from jaxdp.kernels import quadrature as kq

    alphas = np.asarray([0.05, 0.25, 0.5, 0.75, 0.95])
    pairs = {
        "Laplace": [(0.0, 1.0, 1.0, 2.0), (0.0, 1.0, 0.3, 1.0), (0.0, 1.0, 5.0, 0.5)],
        "Gaussian": [(0.0, 1.0, 1.0, 2.0), (0.0, 1.0, 3.0, 0.5), (0.0, 1.0, 0.1, 1.0)],
        "Laplace-Gaussian": [(0.0, 1.0, 0.5, 2.0), (0.0, 1.0, 3.0, 0.7)],
    }
    classes = {
        "Laplace": (jd.Laplace, jd.Laplace),
        "Gaussian": (jd.Gaussian, jd.Gaussian),
        "Laplace-Gaussian": (jd.Laplace, jd.Gaussian),
    }
    if R is None:
        del pairs["Laplace-Gaussian"]
    if families is not None:
        pairs = {f: v for f, v in pairs.items() if f in families}

    # references: closed forms in float64 (at the parameters rounded to each dtype), mpmath
    # for the mixed pair
    def reference(family, params):
        if family == "Laplace-Gaussian":
            from mpmath import mp

            m1, b1, m2, b2 = params
            with mp.workdps(40):
                return np.asarray(
                    [
                        float(R.log_bc(R.Laplace(m1, b1), R.Gaussian(m2, b2), float(a)))
                        for a in alphas
                    ]
                )
        m1, b1, m2, b2 = (jnp.asarray(v, jnp.float64) for v in params)
        return np.asarray(closed_form(family, m1, b1, m2, b2, jnp.asarray(alphas)))

    # jitted: run eagerly, each of the kernel's operations was compiled on its own (~70
    # small programs, seconds)
    @functools.partial(jax.jit, static_argnums=0)
    def closed_form(family, m1, b1, m2, b2, a):
        kernel = kl_ if family == "Laplace" else kg
        cp, cq = classes[family]
        return kernel.log_bc(cp(m1, b1), cq(m2, b2), a)

    def quad_all(level, peaks, arrays, a):
        out = {}
        for family, (m1, b1, m2, b2) in arrays.items():
            cp, cq = classes[family]

            def one(m1, b1, m2, b2, cp=cp, cq=cq):
                return kq.log_bc(cp(m1, b1), cq(m2, b2), a, level=level, peaks=peaks)

            out[family] = jax.vmap(one)(m1, b1, m2, b2)
        return out

    quad_fn = jax.jit(quad_all, static_argnums=(0, 1))

    def n_nodes(level, peaks):
        """Nodes per pair of the rule measured (the same for every family here: each pair
        has the same number of breakpoints and peak slots)."""

        def nodes(P):
            extra = kq._peaks(P, P, jnp.asarray(0.5), level) if peaks else None
            return jnp.concatenate(kq._node_groups(P, P, level, extra)[0], -1)

        P = jd.Laplace(jnp.asarray(0.0), jnp.asarray(1.0))
        try:
            return int(jax.eval_shape(nodes, P).shape[-1])
        except Exception:  # private helpers; the count is informative only
            return None

    refs = {
        np.dtype(dt).name: {f: [reference(f, _round(p, dt)) for p in ps] for f, ps in pairs.items()}
        for dt in (np.float64, np.float32)
    }
    rows = []
    for level in levels:
        row = {"level": level, "step": 2.0**-level}
        for dtype in (np.float64, np.float32):
            dname = np.dtype(dtype).name
            if dtype is np.float32 and float32_levels is not None and level not in float32_levels:
                continue
            arrays = {
                f: tuple(jnp.asarray(np.asarray(ps, dtype)[:, i]) for i in range(4))
                for f, ps in pairs.items()
            }
            # the rule of jd.log_bc (pieces also end at the integrand's peaks) in every
            # dtype; the plain rule of the chernoff solver (jd.chernoff, jd.kl ...) in float64
            for peaks, key in ((True, "{}_{}"), (False, "plain_{}_{}")):
                if not peaks and (
                    dtype is not np.float64
                    or (plain_levels is not None and level not in plain_levels)
                ):
                    continue
                got = jax.device_get(quad_fn(level, peaks, arrays, jnp.asarray(alphas, dtype)))
                for family in pairs:
                    q = np.asarray(got[family], dtype=np.float64)
                    ref = np.asarray(refs[dname][family])
                    row[key.format(family, dname)] = float(np.max(np.abs(q - ref) / np.abs(ref)))
        row["nodes_per_pair"] = n_nodes(level, True)
        row["plain_nodes_per_pair"] = n_nodes(level, False)
        rows.append(row)
    return {
        "alphas": alphas.tolist(),
        "pairs": pairs,
        "default_level": kq.DEFAULT_LEVEL,
        "rows": rows,
    }


# --------------------------------------------------------------------------- tv


def section_tv(R, *, n_random: int, rng) -> dict:
    """``jaxdp.tv`` on the quadrature path (Laplace vs Gaussian pairs, no closed form)
    against the exact value of ``tests/references/mp_reference.py`` (the crossings of the
    densities as roots of quadratics, then their CDFs), random pairs in float64 and float32
    (each against the reference at its own rounded parameters)."""
    import jax
    from mpmath import mp

    import jaxdp as jd

    base = np.column_stack(
        [
            rng.normal(size=n_random),
            np.exp(rng.normal(size=n_random)),
            rng.normal(size=n_random),
            np.exp(rng.normal(size=n_random)),
        ]
    )
    tv = jax.jit(jd.tv)
    out = {"pairs": n_random}
    for dtype in (np.float64, np.float32):
        params = [_round(p, dtype) for p in base]
        with mp.workdps(40):
            ref = np.asarray(
                [float(R.tv(R.Laplace(m1, b1), R.Gaussian(m2, b2))) for m1, b1, m2, b2 in params]
            )
        c = np.asarray(params, dtype)
        got = np.asarray(tv(jd.Laplace(c[:, 0], c[:, 1]), jd.Gaussian(c[:, 2], c[:, 3])))
        err = np.abs(got.astype(np.float64) - ref) / ref
        out[np.dtype(dtype).name] = {
            "max_rel": float(err.max()),
            "median_rel": float(np.median(err)),
        }
    return out


# --------------------------------------------------------------------------- report


def _checks(res) -> list[dict]:
    checks = []

    def add(name, value, threshold):
        ok = value is not None and math.isfinite(value) and value <= threshold
        checks.append({"name": name, "value": value, "threshold": threshold, "pass": bool(ok)})

    mpm = res.get("mpmath")
    if mpm:
        add(
            "float64 max rel error vs mpmath",
            mpm["float64"]["max_rel"],
            THRESHOLDS["float64_max_rel"],
        )
        add(
            "float64 median rel error vs mpmath",
            mpm["float64"]["median_rel"],
            THRESHOLDS["float64_median_rel"],
        )
        add(
            "float32 max rel error vs mpmath",
            mpm["float32"]["max_rel"],
            THRESHOLDS["float32_max_rel"],
        )
        add(
            "float32 median rel error vs mpmath",
            mpm["float32"]["median_rel"],
            THRESHOLDS["float32_median_rel"],
        )
        conv = all(c["converged"] for c in mpm["cases"])
        checks.append({"name": "all converged", "value": conv, "threshold": True, "pass": conv})
    paper = res.get("paper")
    if paper:
        for name, v in paper["exact_vs_library"].items():
            add(f"{name} (rel)", v, THRESHOLDS["exact_vs_library_rel"])
        add(
            "eq34 vs jaxdp.kl (rel)",
            paper["eq34_vs_kl_max_rel"],
            THRESHOLDS["exact_vs_library_rel"],
        )
    quad = res.get("quadrature")
    if quad:
        default = [r for r in quad["rows"] if r["level"] == quad["default_level"]]
        # (no error columns when --families selects none of the section's families)
        errs = [v for k, v in (default[0] if default else {}).items() if k.endswith("_float64")]
        if errs:
            add(
                "quadrature at default level vs closed forms / mpmath (float64, rel)",
                max(errs),
                THRESHOLDS["quadrature_default_rel"],
            )
    tvq = res.get("tv")
    if tvq:
        for d in ("float64", "float32"):
            add(
                f"tv on the quadrature path vs mpmath ({d}, max rel)",
                tvq[d]["max_rel"],
                THRESHOLDS[f"tv_quadrature_{d}_rel"],
            )
    return checks


def markdown(res) -> str:
    md = ["# Accuracy benchmark\n", f"`{res['command']}`  \n{H.machine_line(res['machine'])}\n"]
    mpm = res.get("mpmath")
    if mpm:
        md.append("\n## jaxdp.chernoff vs mpmath (50 digits)\n")
        md.append(
            "Relative error of the Chernoff information; each dtype against the reference at its "
            "own rounded parameters. Edge cases: near-identical pairs, huge shifts, extreme "
            "scale ratios, alpha* near 0 or 1. alpha* is not unique where f is flat (e.g. the "
            "categorical 'one zero each' case), so its difference is informative only.\n\n"
        )
        rows = []
        for fam, d in mpm["families"].items():
            for dname in ("float64", "float32"):
                x = d[dname]
                rows.append(
                    [
                        fam,
                        dname,
                        x["n"],
                        x["max_rel"],
                        x["median_rel"],
                        x["max_rel_random"],
                        x["worst_case"],
                        x["max_alpha_abs_err"],
                        x["all_converged"],
                    ]
                )
        for dname in ("float64", "float32"):
            rows.append(
                [
                    "**all**",
                    dname,
                    mpm[dname]["n"],
                    mpm[dname]["max_rel"],
                    mpm[dname]["median_rel"],
                    None,
                    "",
                    None,
                    None,
                ]
            )
        md.append(
            H.md_table(
                [
                    "family",
                    "dtype",
                    "pairs",
                    "max rel",
                    "median rel",
                    "max rel (random)",
                    "worst case",
                    "max abs diff alpha*",
                    "converged",
                ],
                rows,
            )
        )
        md.append("\n<details><summary>edge cases</summary>\n\n")
        rows = [
            [
                c["family"],
                c["case"],
                c["dtype"],
                c["reference_str"],
                c["reference_alpha"],
                c["rel_err"],
            ]
            for c in mpm["cases"]
            if c["kind"] == "edge"
        ]
        md.append(H.md_table(["family", "case", "dtype", "C (mpmath)", "alpha*", "rel err"], rows))
        md.append("\n</details>\n")
    paper = res.get("paper")
    if paper:
        md.append("\n## The paper's formulas vs the exact values\n")
        md.append(
            f"eps in [{paper['eps_grid'][0]:g}, {paper['eps_grid'][1]:g}] ({paper['eps_grid'][2]} "
            "log-spaced points). *kind*: `upper` = claimed upper bound (fails where below the "
            "exact value or NaN), `equal` = claimed equality (fails beyond 1e-9 relative), "
            "`range` = an alpha claimed to lie in (0, 1]. "
            "Relative gap = (formula - exact)/exact.\n\n"
        )
        rows = []
        for r in paper["formulas"]:
            g = r.get("rel_gap") or {}
            fails = "; ".join(f"[{a:.6g}, {b:.6g}]" for a, b in r["fails_on"]) or "never"
            neg = "; ".join(f"[{a:.4g}, {b:.4g}]" for a, b in r["negative_on"]) or "-"
            rows.append(
                [
                    r["name"],
                    r["kind"],
                    g.get("min"),
                    g.get("median"),
                    g.get("max"),
                    r["holds_fraction"],
                    fails,
                    neg,
                    r["nan_from"],
                ]
            )
        md.append(
            H.md_table(
                [
                    "formula",
                    "kind",
                    "min rel gap",
                    "median rel gap",
                    "max rel gap",
                    "holds (fraction)",
                    "fails for eps in",
                    "negative for eps in",
                    "NaN from eps",
                ],
                rows,
            )
        )
        md.append(
            "\nExact sup formulas vs the library on randomized response (max rel diff): "
            + ", ".join(f"{k}: {H.fmt(v)}" for k, v in paper["exact_vs_library"].items())
            + "\n"
        )
    quad = res.get("quadrature")
    if quad:
        md.append("\n## Quadrature path vs closed forms\n")
        md.append(
            "`jaxdp.kernels.quadrature.log_bc(P, Q, a, level=L)` (tanh-sinh / exp-sinh, step "
            "2^-L) against the closed-form kernels (Laplace, Gaussian) and the mpmath value "
            "(Laplace vs Gaussian, no closed form); max relative error of log C_a over "
            f"alpha in {quad['alphas']}. Default level: {quad['default_level']}. Two rules: "
            "`jd.log_bc`'s, whose pieces also end at the integrand's peaks (`nodes/pair`, "
            "the unprefixed columns), and the plain rule that `jd.chernoff` and the "
            "divergences evaluate (`plain nodes/pair`, the `plain_` columns, float64).\n\n"
        )
        keys = [
            f"{p}{f}_{d}"
            for p, dtypes in (("", ("float64", "float32")), ("plain_", ("float64",)))
            for d in dtypes
            for f in quad["pairs"]
            if any(f"{p}{f}_{d}" in r for r in quad["rows"])
        ]
        rows = [
            [
                r["level"],
                r["step"],
                r.get("nodes_per_pair"),
                r.get("plain_nodes_per_pair"),
                *[r.get(k) for k in keys],
            ]
            for r in quad["rows"]
        ]
        md.append(H.md_table(["level", "step", "nodes/pair", "plain nodes/pair", *keys], rows))
    tvq = res.get("tv")
    if tvq:
        md.append("\n## TV on the quadrature path vs mpmath\n")
        md.append(
            f"`jaxdp.tv` on {tvq['pairs']} random Laplace vs Gaussian pairs (the crossings of "
            "the densities as quadrature breakpoints) against the exact value "
            "(`tests/references/mp_reference.py`: crossings as roots, then CDFs).\n\n"
        )
        md.append(
            H.md_table(
                ["dtype", "max rel", "median rel"],
                [[d, tvq[d]["max_rel"], tvq[d]["median_rel"]] for d in ("float64", "float32")],
            )
        )
    md.append("\n## Checks\n")
    md.append(
        H.md_table(
            ["check", "value", "threshold", "pass"],
            [[c["name"], c["value"], c["threshold"], c["pass"]] for c in res["checks"]],
        )
    )
    for note in res.get("notes", []):
        md.append(f"\n- {note}")
    return "".join(md) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small grids (well under a minute)")
    ap.add_argument("--tiny", action="store_true", help="smallest sizes (smoke test)")
    ap.add_argument("--out", default=str(H.REPO / "benchmarks" / "results"))
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)

    sections = {s for s in args.sections.split(",") if s}
    for s in sorted(sections - set(SECTIONS)):
        ap.error(f"unknown section {s!r}; choose from {', '.join(SECTIONS)}")
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in FAMILIES:
            ap.error(f"unknown family {f!r}; choose from {', '.join(FAMILIES)}")
    global PAD
    from jaxdp.kernels.quadrature import DEFAULT_LEVEL

    if args.tiny:
        n_eps, n_random, levels, f32_levels, PAD = 40, 2, (DEFAULT_LEVEL,), (), 512
    elif args.quick:
        n_eps, n_random, levels, f32_levels, PAD = 120, 4, (3, 4, 5), (4,), 2048
    else:
        n_eps, n_random, levels, f32_levels, PAD = 400, 40, (1, 2, 3, 4, 5, 6, 7), None, 4096
    rng = np.random.default_rng(args.seed)
    res = {
        "suite": "accuracy",
        "command": H.command_line(),
        "mode": "tiny" if args.tiny else "quick" if args.quick else "full",
        "notes": [],
    }
    timings = {}
    R = _load_reference()
    if "paper" in sections:
        t = time.perf_counter()
        try:
            res["paper"] = section_paper(n_eps)
        except ImportError as e:
            res["notes"].append(f"paper section skipped: {e}")
        timings["paper"] = time.perf_counter() - t
    if "mpmath" in sections:
        t = time.perf_counter()
        if R is None:
            res["notes"].append("mpmath section skipped: tests/references/mp_reference.py missing")
        else:
            res["mpmath"] = section_mpmath(R, n_random=n_random, families=families, rng=rng)
        timings["mpmath"] = time.perf_counter() - t
    if "quadrature" in sections:
        t = time.perf_counter()
        res["quadrature"] = section_quadrature(
            levels,
            R,
            float32_levels=f32_levels,
            # (quick: each rule and level is a compile of its own, ~9 s here)
            plain_levels=None if not (args.quick or args.tiny) else (DEFAULT_LEVEL,),
            families=families,
        )
        timings["quadrature"] = time.perf_counter() - t
    if "tv" in sections and R is not None:
        t = time.perf_counter()
        res["tv"] = section_tv(R, n_random=max(3, 4 * n_random), rng=rng)
        timings["tv"] = time.perf_counter() - t
    res["seconds"] = timings
    res["machine"] = H.machine_info()
    res["thresholds"] = THRESHOLDS
    res["checks"] = _checks(res)
    out = Path(args.out)
    H.write_json(out / "accuracy.json", res)
    H.write_text(out / "accuracy.md", markdown(res))
    failed = [c["name"] for c in res["checks"] if not c["pass"]]
    print(
        f"accuracy: wrote {out / 'accuracy.json'} and accuracy.md "
        f"({', '.join(f'{k} {v:.1f}s' for k, v in timings.items())})"
    )
    if failed:
        print("accuracy: FAILED checks: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

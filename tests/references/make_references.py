"""Generate ``references.json``: high-precision reference values for jaxdp's core engine.

Run: ``/work/venv/bin/python tests/references/make_references.py`` (about 2 CPU-minutes,
spread over up to 4 processes; ``REFERENCES_PROCS`` overrides).

Every number is computed by the hand-derived implementations of ``mp_reference`` at 80 digits,
recomputed at 60 digits (agreement required to 28 digits, so the reported 80-digit values are
good to about 48), and cross-checked against an independent method: quadrature of the raw
densities (continuous families), direct or extrapolated summation of the raw pmfs (discrete
families), the left derivative of ``log C_a`` at ``a = 1`` for KL, central finite differences
of re-solved problems for the envelope gradient and for ``d a*/dθ``, and textbook closed forms
where they exist. Any failing check aborts generation (nothing is written). Each case records
the checks that ran (``checks``: worst discrepancy of each, relative unless the reference is 0)
and how each quantity was computed (``method``).

JSON layout: a list of cases ``{"id", "family", "P", "Q", "alphas", "log_bc", "chernoff":
{"information", "alpha", "derivative", "grad", "alpha_grad"}, "kl_pq", "kl_qp", "renyi_0.5",
"renyi_2", "bhattacharyya", "hellinger", "tv", "method", "checks", "notes"?}``.

- Parameters are float64 values (JSON numbers round-trip exactly); references are for the exact
  binary values. ``P``/``Q`` hold the constructor fields (``loc``, ``scale``; ``probs``;
  integer ``loc`` for DiscreteLaplace); mixed pairs (family ``"Laplace-Gaussian"``) and product
  components carry their own ``"family"``; products list every component (``"iid": n`` marks
  ``Product.iid``).
- Categorical probabilities are normalised exactly (``p / sum(p)``) before use; the floats of
  randomized response sum to 1 only up to an ulp.
- ``alphas`` are ``repr`` strings of float64 values (``float(s)`` gives them back exactly); the
  references are for those binary values (1e-06 is not exactly 10^-6).
- Values are decimal strings with 25 significant digits, or ``"inf"``, ``"-inf"``, ``"nan"``;
  ``null`` means not computed (TV of products other than iid categorical ones).
- ``chernoff.alpha`` is ``"nan"`` when a* is not unique (P == Q, or disjoint supports);
  ``derivative`` is f'(a*) with f(a) = -log C_a (~0 inside, the sign at an end).
- ``grad`` keys: ``"P.loc"``, ``"Q.scale"``, ``"P.probs[2]"``, ``"P.1.loc"`` (product
  component 1; iid products list each copy, the gradient w.r.t. a shared field is their sum).
  ``grad[θ] = dC/dθ`` (envelope theorem), ``alpha_grad[θ] = d a*/dθ`` (0 when a* is at an end).
  Categorical entries are partial derivatives of sum_i p_i^a q_i^(1-a) with the probabilities
  as free variables (no renormalisation): an implementation that normalises gives these plus
  a* (for P) or 1 - a* (for Q) on every entry, i.e. the same projection onto sum-zero
  directions. Zero probabilities are not differentiable: ``"nan"``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import sys
import time
from pathlib import Path

from mpmath import mp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from references import mp_reference as R

OUT = Path(__file__).resolve().parent / "references.json"
DPS, DPS_HI = 60, 80
ALPHAS = [0.0, 1e-6, 0.25, 0.5, 0.75, 1 - 1e-6, 1.0]
QUAD_ALPHAS = [1e-6, 0.5, 1 - 1e-6]
REL_PREC = mp.mpf("1e-28")  # dps 60 vs dps 80 (=> dps-80 values good to ~1e-48)
REL_XCHECK = mp.mpf("1e-30")  # independent method (quadrature / summation / derivative)
REL_FD = mp.mpf("1e-22")  # finite differences of re-solved Chernoff problems


# --------------------------------------------------------------------------- case specs


def lap(loc, scale):
    return {"family": "Laplace", "loc": float(loc), "scale": float(scale)}


def gau(loc, scale):
    return {"family": "Gaussian", "loc": float(loc), "scale": float(scale)}


def dlap(loc, scale):
    return {"family": "DiscreteLaplace", "loc": int(loc), "scale": float(scale)}


def cat(probs):
    return {"family": "Categorical", "probs": [float(p) for p in probs]}


def prod(*components, iid=None):
    spec = {"family": "Product", "components": list(components)}
    if iid is not None:
        spec["iid"] = iid
    return spec


def _strip(spec):
    return {k: v for k, v in spec.items() if k != "family"}


def rr(eps, k):
    """Randomized response on k values, true value 0 vs 1 (float probabilities)."""
    if k == 2:
        p1 = 1 / (1 + math.exp(-eps))  # >= 1/2, so 1 - p1 is exact (Sterbenz)
        return [p1, 1 - p1], [1 - p1, p1]
    e = math.exp(eps)
    z = e + k - 1
    p = [e / z] + [1 / z] * (k - 1)
    q = [1 / z, e / z] + [1 / z] * (k - 2)
    return p, q


def random_simplex(rng, k):
    xs = [rng.expovariate(1.0) for _ in range(k)]
    s = sum(xs)
    return [x / s for x in xs]


def case_specs():
    cases = []

    def add(cid, family, P, Q, notes=""):
        if family != "Laplace-Gaussian":  # mixed pairs keep a "family" key in P and Q
            P, Q = _strip(P), _strip(Q)
        cases.append({"id": cid, "family": family, "P": P, "Q": Q, "notes": notes})

    # Laplace, equal scales: C = t/2 - log(1 + t/2), a* = 1/2.
    for t, b, m in [
        (1e-10, 1.0, 0.0),
        (1e-5, 1.0, 0.0),
        (0.1, 2.0, -3.0),
        (1.0, 2.5, 0.0),
        (10.0, 0.5, 1.5),
        (1e3, 1.0, 0.0),
        (1e6, 1.0, 0.0),
    ]:
        add(f"laplace-equal-t{t:g}", "Laplace", lap(m, b), lap(m + t * b, b), "equal scales")
    # Laplace, distinct scales.
    for d, b1, b2 in [
        (0.0, 1.0, 1.5),
        (1.0, 1.0, 1.5),
        (0.0, 1.0, 10.0),
        (2.0, 1.0, 10.0),
        (0.0, 1.0, 1e3),
        (5.0, 1.0, 1e3),
        (0.0, 1.0, 0.25),
        (0.0, 1.0, 1e-12),
        (1.0, 1.0, 1e-12),
        (3.0, 1.0, 1e12),
        (0.5, 1e-6, 1e6),
    ]:
        add(f"laplace-ratio{b2 / b1:g}-d{d:g}", "Laplace", lap(0.0, b1), lap(d, b2))
    # Laplace, near-identical (information ~ 1e-21) and identical.
    add("laplace-near-scale", "Laplace", lap(0.0, 1.0), lap(0.0, 1.0 + 1e-10))
    add("laplace-near-both", "Laplace", lap(0.0, 1.0), lap(1e-10, 1.0 + 1e-10))
    add("laplace-near-loc5", "Laplace", lap(5.0, 2.0), lap(5.0 + 1e-9, 2.0 * (1 - 1e-10)))
    add("laplace-identical", "Laplace", lap(2.0, 3.0), lap(2.0, 3.0), "P == Q")

    # Gaussian, equal variances: C = D^2 / (8 s^2), a* = 1/2.
    for t, s, m in [
        (1e-10, 1.0, 0.0),
        (1e-5, 1.0, 0.0),
        (0.1, 2.0, -1.0),
        (1.0, 1.0, 0.0),
        (10.0, 0.5, 0.0),
        (1e3, 1.0, 0.0),
    ]:
        add(f"gauss-equal-t{t:g}", "Gaussian", gau(m, s), gau(m + t * s, s), "equal scales")
    for d, s1, s2 in [
        (0.0, 1.0, 1.5),
        (1.0, 1.0, 1.5),
        (0.0, 1.0, 10.0),
        (2.0, 1.0, 1e3),
        (2.0, 1.0, 1e-6),
        (0.0, 1.0, 0.5),
        (0.0, 1e-6, 1e6),
        (1.0, 1.0, 1e12),
    ]:
        add(f"gauss-ratio{s2 / s1:g}-d{d:g}", "Gaussian", gau(0.0, s1), gau(d, s2))
    add("gauss-ratio1e-12-d1", "Gaussian", gau(0.0, 1.0), gau(1.0, 1e-12))
    add("gauss-near-scale", "Gaussian", gau(0.0, 1.0), gau(0.0, 1.0 + 1e-10))
    add("gauss-near-both", "Gaussian", gau(0.0, 1.0), gau(1e-10, 1.0 + 1e-10))

    # Discrete Laplace: geometric mechanism (D = 1, scale = 1/eps) and others.
    for eps in [1e-8, 1e-4, 0.1, 1.0, 5.0, 20.0]:
        add(f"dlaplace-geometric-eps{eps:g}", "DiscreteLaplace", dlap(0, 1 / eps), dlap(1, 1 / eps))
    add("dlaplace-d0-scales", "DiscreteLaplace", dlap(0, 1.0), dlap(0, 2.0))
    add("dlaplace-d5-equal", "DiscreteLaplace", dlap(-2, 2.0), dlap(3, 2.0))
    add("dlaplace-d5-scales", "DiscreteLaplace", dlap(0, 1.0), dlap(5, 3.0))
    add("dlaplace-d0-renyi2-inf", "DiscreteLaplace", dlap(0, 4.0), dlap(0, 0.5))

    # Categorical.
    for eps in [0.01, 1.0, 5.0]:
        p, q = rr(eps, 2)
        add(f"rr2-eps{eps:g}", "Categorical", cat(p), cat(q), "binary randomized response")
    for eps in [0.1, 1.0, 3.0]:
        p, q = rr(eps, 5)
        add(f"rr5-eps{eps:g}", "Categorical", cat(p), cat(q), "5-ary randomized response")
    rng = random.Random(20240611)
    for k in [3, 5, 7, 10]:
        add(
            f"categorical-random-k{k}",
            "Categorical",
            cat(random_simplex(rng, k)),
            cat(random_simplex(rng, k)),
        )
    add(
        "categorical-support-a0",
        "Categorical",
        cat([0.5, 0.5, 0.0]),
        cat([0.4, 0.4, 0.2]),
        "supp P strictly inside supp Q: a* = 0, C = -log Q(supp P)",
    )
    add(
        "categorical-support-a1",
        "Categorical",
        cat([0.4, 0.4, 0.2]),
        cat([0.5, 0.5, 0.0]),
        "supp Q strictly inside supp P: a* = 1",
    )
    add(
        "categorical-support-interior",
        "Categorical",
        cat([0.9, 0.1, 0.0]),
        cat([0.1, 0.5, 0.4]),
        "different supports, interior a*",
    )
    add(
        "categorical-disjoint",
        "Categorical",
        cat([0.5, 0.5, 0.0, 0.0]),
        cat([0.0, 0.0, 0.25, 0.75]),
        "disjoint supports: C = inf, a* not unique",
    )
    add(
        "categorical-identical",
        "Categorical",
        cat([0.2, 0.3, 0.5]),
        cat([0.2, 0.3, 0.5]),
        "P == Q: C = 0, a* not unique",
    )
    add(
        "categorical-near",
        "Categorical",
        cat([0.5, 0.5]),
        cat([0.5 + 2**-30, 0.5 - 2**-30]),
        "near-identical Bernoulli",
    )

    # Products.
    add(
        "product-iid-laplace-n3",
        "Product",
        prod(*[lap(0.0, 1.0)] * 3, iid=3),
        prod(*[lap(1.0, 1.0)] * 3, iid=3),
        "C = 3 C(Laplace pair)",
    )
    add(
        "product-laplace-gauss",
        "Product",
        prod(lap(0.0, 1.0), gau(0.0, 1.0)),
        prod(lap(1.0, 1.0), gau(2.0, 1.5)),
        "heterogeneous: common a*",
    )
    add(
        "product-laplace-laplace-opposite",
        "Product",
        prod(lap(0.0, 1.0), lap(0.0, 3.0)),
        prod(lap(1.0, 3.0), lap(1.0, 1.0)),
        "components with a* = 0.4227 and 0.5773: C < sum of component C",
    )
    p, q = rr(1.0, 2)
    add(
        "product-categorical-laplace",
        "Product",
        prod(cat(p), lap(0.0, 2.0)),
        prod(cat(q), lap(1.0, 2.0)),
        "categorical x Laplace",
    )
    add(
        "product-iid-rr2-n5",
        "Product",
        prod(*[cat(p)] * 5, iid=5),
        prod(*[cat(q)] * 5, iid=5),
        "5-fold binary RR eps=1; TV by enumeration of {0,1}^5",
    )
    rng = random.Random(7)
    p3, q3 = random_simplex(rng, 3), random_simplex(rng, 3)
    add(
        "product-iid-categorical-k3-n3",
        "Product",
        prod(*[cat(p3)] * 3, iid=3),
        prod(*[cat(q3)] * 3, iid=3),
        "TV by enumeration of 27 outcomes",
    )

    # Mixed Laplace / Gaussian.
    add("mixed-laplace-gauss", "Laplace-Gaussian", lap(0.0, 1.0), gau(0.0, 1.0), "P Laplace")
    add("mixed-gauss-laplace", "Laplace-Gaussian", gau(0.0, 1.0), lap(1.0, 1.0), "P Gaussian")
    add("mixed-laplace-gauss-2", "Laplace-Gaussian", lap(0.5, 2.0), gau(-1.0, 0.5), "P Laplace")
    return cases


# --------------------------------------------------------------------------- computing


def build(case):
    fam = case["family"]
    return R.from_spec(case["P"], fam), R.from_spec(case["Q"], fam)


def _is_continuous(d):
    if isinstance(d, R.Product):
        return all(_is_continuous(c) for c in d.components)
    return isinstance(d, (R.Laplace, R.Gaussian))


def _has_continuous(d):
    if isinstance(d, R.Product):
        return any(_has_continuous(c) for c in d.components)
    return isinstance(d, (R.Laplace, R.Gaussian))


def _same_support(P, Q):
    if isinstance(P, R.Product):
        return all(_same_support(p, q) for p, q in zip(P.components, Q.components, strict=True))
    if isinstance(P, R.Categorical):
        return all((p > 0) == (q > 0) for p, q in zip(P.probs, Q.probs, strict=True))
    return True


def analytic(case):
    """All reference values at the current precision (hand-derived implementations)."""
    P, Q = build(case)
    out = {}
    alphas = [mp.mpf(a) for a in ALPHAS]
    out["log_bc"] = []
    for a in alphas:
        v = R.log_bc(P, Q, a)
        if a in (0, 1) and _same_support(P, Q) and abs(v) < mp.mpf("1e-45"):
            v = mp.zero  # C_0 = Q(supp P) = 1 exactly
        out["log_bc"].append(v)
    ch = R.chernoff(P, Q)
    out["information"], out["alpha"], out["derivative"] = ch
    if R._identical(P, Q):
        out["grad"] = {k: mp.zero for k in R.grad_keys(P, Q)}
        out["alpha_grad"] = {k: mp.nan for k in R.grad_keys(P, Q)}
    elif ch.information == mp.inf:
        out["grad"] = {k: mp.nan for k in R.grad_keys(P, Q)}
        out["alpha_grad"] = {k: mp.nan for k in R.grad_keys(P, Q)}
    else:
        out["grad"] = R.chernoff_grad(P, Q, ch.alpha)
        out["alpha_grad"] = R.chernoff_alpha_grad(P, Q, ch.alpha)
    out["kl_pq"] = R.kl(P, Q)
    out["kl_qp"] = R.kl(Q, P)
    out["renyi_0.5"] = R.renyi(P, Q, mp.mpf(1) / 2)
    out["renyi_2"] = R.renyi(P, Q, 2)
    out["bhattacharyya"] = R.bhattacharyya(P, Q)
    out["hellinger"] = R.hellinger(P, Q)
    out["tv"] = R.tv(P, Q)
    return out


def _flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                yield f"{prefix}{k}[{i}]", x
        else:
            yield prefix + k, v


def discrepancy(x, y, floor=None):
    """Relative difference (absolute when the reference is 0); 0 for equal infinities/nans."""
    with mp.workdps(DPS_HI):
        return _discrepancy(x, y, mp.mpf("1e-300") if floor is None else floor)


def _discrepancy(x, y, floor):
    if x is None or y is None:
        return mp.zero if x is y else mp.inf
    x, y = mp.mpf(x), mp.mpf(y)
    if mp.isnan(x) or mp.isnan(y):
        return mp.zero if (mp.isnan(x) and mp.isnan(y)) else mp.inf
    if mp.isinf(x) or mp.isinf(y):
        return mp.zero if x == y else mp.inf
    if x == 0:
        return abs(y)
    return abs(x - y) / max(abs(x), floor)


class CheckError(RuntimeError):
    pass


def compute_case(case):
    t0 = time.time()
    checks = {}

    def check(name, value, tol, extra=""):
        value = mp.mpf(value)
        prev = checks.get(name)
        if prev is None or value > mp.mpf(prev):
            checks[name] = mp.nstr(value, 3)
        if not value <= tol:
            raise CheckError(
                f"{case['id']}: check {name} failed: {mp.nstr(value, 5)} > {tol} {extra}"
            )

    with mp.workdps(DPS_HI):
        hi = analytic(case)
    with mp.workdps(DPS):
        lo = analytic(case)
        flat_hi = dict(_flatten(hi))
        worst = mp.zero
        for k, v in _flatten(lo):
            if k == "derivative" and 0 < lo["alpha"] < 1:
                continue  # certificate, ~1e-60 vs ~1e-80: checked below
            d = discrepancy(flat_hi[k], v)
            worst = max(worst, d)
            if not d <= REL_PREC:
                raise CheckError(f"{case['id']}: {k} differs between dps 60 and 80: {d}")
        checks["dps60_vs_dps80"] = mp.nstr(worst, 3)

        P, Q = build(case)
        res = hi  # reported values: the dps-80 ones
        cont = _has_continuous(P)
        method = {"log_bc": LOG_BC_METHOD[case["family"]] + ", dps 80"}
        # --- log C_a cross-check
        if cont:
            method["log_bc"] += f"; cross-check: mp.quad (dps 45) at alphas {QUAD_ALPHAS} and a*"
            for a, v in zip(ALPHAS, res["log_bc"], strict=True):
                if a in QUAD_ALPHAS:
                    check("log_bc_vs_quad", discrepancy(v, R.log_bc_quad(P, Q, a)), REL_XCHECK)
        else:
            method["log_bc"] += "; cross-check: summation of the raw pmfs at every alpha"
            for a, v in zip(ALPHAS, res["log_bc"], strict=True):
                check("log_bc_vs_sum", discrepancy(v, R.log_bc_sum(P, Q, a)), REL_XCHECK)
        # --- KL
        mixed = case["family"] in ("Laplace-Gaussian", "Product")
        kl_how = set()
        for key, (A, B) in (("kl_pq", (P, Q)), ("kl_qp", (Q, P))):
            if _same_support(A, B) and R.log_bc(A, B, mp.mpf(1) / 2) > -mp.inf:
                check("kl_vs_dlogbc", discrepancy(res[key], R.kl_from_log_bc(A, B)), REL_XCHECK)
                kl_how.add("left derivative of log C_a at a = 1")
            # Quadrature of p log(p/q) where the closed form is not a textbook one.
            other = (R.kl_quad(A, B) if mixed else None) if cont else R.kl_sum(A, B)
            if other is not None:
                check("kl_vs_quad_or_sum", discrepancy(res[key], other), REL_XCHECK)
                kl_how.add("quadrature of p log(p/q)" if cont else "summation")
        method["kl"] = "closed form, dps 80; cross-checks: " + (
            ", ".join(sorted(kl_how)) or "none (infinite)"
        )
        # --- Renyi 2 via the independent method
        r2 = res["renyi_2"]
        if r2 != mp.inf:
            other = R.log_bc_quad(P, Q, 2) if cont else R.log_bc_sum(P, Q, 2)
            if other is not None:
                check("renyi2_vs_quad_or_sum", discrepancy(r2, other), REL_XCHECK)
        method["renyi"] = "log C_order / (order - 1) from log_bc; order 2 cross-checked like log_bc"
        # --- TV
        if res["tv"] is None:
            method["tv"] = "not computed (no simple formula for this product)"
        else:
            if isinstance(P, (R.Laplace, R.Gaussian)):
                other = R.tv_quad(P, Q)
                method["tv"] = "exact CDF differences between the exact crossings of p and q"
                method["tv"] += "; cross-check: mp.quad of |p - q|/2"
            elif isinstance(P, R.Product):
                other = R.tv_sum(P, Q)
                method["tv"] = "iid categorical: sum over types (multinomial coefficients)"
                method["tv"] += "; cross-check: enumeration of the product support"
            elif isinstance(P, R.DiscreteLaplace):
                other = R.tv_sum(P, Q)
                method["tv"] = "exact masses of the integer intervals between crossings"
                method["tv"] += "; cross-check: summation of |p - q|/2"
            else:
                other = R.tv_sum(P, Q)
                method["tv"] = "sum |p - q| / 2"
            if other is not None:
                check("tv_vs_quad_or_sum", discrepancy(res["tv"], other), REL_XCHECK)
            elif isinstance(P, R.DiscreteLaplace):
                method["tv"] += " (infeasible here: not cross-checked)"
        # --- Chernoff
        info, alpha = res["information"], res["alpha"]
        method["chernoff"] = (
            "max of -log C_a: bisection + bracketed Newton on f'(a) (mp.diff of the closed-form "
            "log C_a), dps 80"
        )
        if mp.isfinite(info) and not mp.isnan(alpha):
            if 0 < alpha < 1:
                check("chernoff_certificate", abs(res["derivative"]), mp.mpf("1e-50"))
            if cont:
                method["chernoff"] += "; -log C_a* cross-checked by mp.quad"
                check(
                    "chernoff_vs_quad", discrepancy(-info, R.log_bc_quad(P, Q, alpha)), REL_XCHECK
                )
            for da in (mp.mpf("1e-8"), mp.mpf("-1e-8")):
                if 0 <= alpha + da <= 1:
                    f = -R.log_bc(P, Q, alpha + da)
                    check("chernoff_is_max", max(f - info, 0), mp.zero)
            fd_checks(case, P, Q, res, check)
            method["grad"] = "envelope theorem: mp.diff of -log C_a in θ at fixed a*"
            method["alpha_grad"] = "implicit function theorem: -f_aθ / f_aa at a* (0 at an end)"
            method["grad"] += "; checked by central FD of the re-solved problem"
            method["alpha_grad"] += "; checked by central FD of the re-solved problem"
        elif mp.isnan(alpha):
            method["chernoff"] = "a* is not unique (P == Q or disjoint supports): alpha is nan"
        closed_form_checks(case, P, Q, res, check)
    elapsed = time.time() - t0
    return serialise(case, res, method, checks), elapsed


LOG_BC_METHOD = {
    "Laplace": "closed form: piecewise-exponential integral with kinks at both locations",
    "Gaussian": "closed form (completing the square)",
    "Laplace-Gaussian": "closed form: erfc integrals on each side of the Laplace kink",
    "DiscreteLaplace": "closed form: geometric tails + explicit middle terms",
    "Categorical": "direct sum over the common support",
    "Product": "sum of the component closed forms",
}


def fd_checks(case, P, Q, res, check):
    """Central finite differences of the re-solved Chernoff problem (dps 80, h = 1e-28 |θ|)."""
    keys = R.grad_keys(P, Q)
    if isinstance(P, R.Product):
        keys = keys[:2] + keys[len(keys) // 2 : len(keys) // 2 + 2]
    for key in keys:
        th = R._field_value(P, Q, key)
        if th == 0 and "probs" in key:
            continue
        ref = th if th != 0 else mp.one
        h = abs(ref) * mp.mpf("1e-28")  # small: near-identical pairs vary on a 1e-10 scale
        with mp.workdps(DPS_HI):
            rp = R.chernoff(*R._with_field(P, Q, key, th + h), guess=res["alpha"])
            rm = R.chernoff(*R._with_field(P, Q, key, th - h), guess=res["alpha"])
        g_fd = (rp.information - rm.information) / (2 * h)
        g = res["grad"][key]
        scale = max(abs(g), abs(res["information"]) / abs(ref), mp.mpf("1e-300"))
        check("grad_vs_fd", abs(g - g_fd) / scale, REL_FD, key)
        ag = res["alpha_grad"][key]
        ag_fd = (rp.alpha - rm.alpha) / (2 * h)
        scale = max(abs(ag), 1 / abs(ref) * mp.mpf("1e-10"), mp.mpf("1e-300"))
        check("alpha_grad_vs_fd", abs(ag - ag_fd) / scale, REL_FD, key)


def closed_form_checks(case, P, Q, res, check):
    """Textbook / hand-derived closed forms, written out independently of mp_reference."""
    cid = case["id"]
    info, alpha = res["information"], res["alpha"]
    half = mp.mpf(1) / 2

    def agree(name, x, ref):
        check("closed_form", discrepancy(ref, x), REL_XCHECK, name)

    if cid.startswith("laplace-equal"):
        t = abs(Q.loc - P.loc) / P.scale
        agree("C", info, t / 2 - mp.log1p(t / 2))
        agree("a*", alpha, half)
        agree("KL", res["kl_pq"], t + mp.expm1(-t))
        agree("TV", res["tv"], -mp.expm1(-t / 2))
    if cid.startswith("gauss-equal"):
        d = (Q.loc - P.loc) / P.scale
        agree("C", info, d**2 / 8)
        agree("a*", alpha, half)
        agree("KL", res["kl_pq"], d**2 / 2)
        agree("TV", res["tv"], 2 * mp.ncdf(d / 2) - 1)
    if case["family"] == "Laplace" and P != Q:
        b1, b2, d = P.scale, Q.scale, abs(P.loc - Q.loc)
        agree("KL", res["kl_pq"], mp.log(b2 / b1) + d / b2 + (b1 / b2) * mp.exp(-d / b1) - 1)
    if case["family"] == "Gaussian" and P != Q:
        s1, s2, d = P.scale, Q.scale, P.loc - Q.loc
        agree("KL", res["kl_pq"], mp.log(s2 / s1) + (s1**2 + d**2) / (2 * s2**2) - half)
    if cid.startswith("dlaplace-geometric"):
        eps = 1 / P.scale  # geometric mechanism, D = 1: same C and TV as binary RR
        agree("C", info, mp.log(mp.cosh(eps / 2)))
        agree("a*", alpha, half)
        agree("KL", res["kl_pq"], eps * mp.tanh(eps / 2))
        agree("TV", res["tv"], mp.tanh(eps / 2))
    if cid.startswith("rr2-"):
        p1, p2 = P.probs
        agree("C", info, -mp.log(2 * mp.sqrt(p1 * p2)))
        agree("a*", alpha, half)
        agree("TV", res["tv"], abs(p1 - p2))
    if cid.startswith("rr5-"):
        agree("a*", alpha, half)
    if cid == "product-iid-laplace-n3":
        t = abs(Q.components[0].loc - P.components[0].loc) / P.components[0].scale
        agree("C", info, 3 * (t / 2 - mp.log1p(t / 2)))
    if cid == "product-iid-rr2-n5":
        p1, p2 = P.components[0].probs
        agree("C", info, -5 * mp.log(2 * mp.sqrt(p1 * p2)))
    if cid == "categorical-support-a0":
        agree("C", info, -mp.log(mp.mpf("0.8")))
        agree("a*", alpha, mp.zero)
    if cid == "categorical-support-a1":
        agree("C", info, -mp.log(mp.mpf("0.8")))
        agree("a*", alpha, mp.one)


def serialise(case, res, method, checks):
    s = R.to_str
    out = {
        "id": case["id"],
        "family": case["family"],
        "P": case["P"],
        "Q": case["Q"],
        "alphas": [repr(a) for a in ALPHAS],
        "log_bc": [s(v) for v in res["log_bc"]],
        "chernoff": {
            "information": s(res["information"]),
            "alpha": s(res["alpha"]),
            "derivative": s(res["derivative"]),
            "grad": {k: s(v) for k, v in res["grad"].items()},
            "alpha_grad": {k: s(v) for k, v in res["alpha_grad"].items()},
        },
        "kl_pq": s(res["kl_pq"]),
        "kl_qp": s(res["kl_qp"]),
        "renyi_0.5": s(res["renyi_0.5"]),
        "renyi_2": s(res["renyi_2"]),
        "bhattacharyya": s(res["bhattacharyya"]),
        "hellinger": s(res["hellinger"]),
        "tv": s(res["tv"]),
        "method": method,
        "checks": checks,
    }
    if case["notes"]:
        out["notes"] = case["notes"]
    return out


def main():
    t0 = time.time()
    cases = case_specs()
    procs = int(os.environ.get("REFERENCES_PROCS", min(4, os.cpu_count() or 1)))
    # Longest cases first for a better schedule; output keeps the spec order.
    with multiprocessing.Pool(procs) as pool:
        results = pool.map(_compute_safe, cases, chunksize=1)
    failures = []
    for (_, cpu, err), case in zip(results, cases, strict=True):
        print(f"{cpu:7.1f}s cpu  {case['id']}" + (f"  FAILED: {err}" if err else ""))
        if err:
            failures.append(err)
    print(f"total cpu {sum(r[1] for r in results):.0f}s over {procs} processes")
    if failures:
        print(f"{len(failures)} case(s) failed; {OUT} not written", file=sys.stderr)
        return 1
    data = [out for out, _, _ in results]
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(data)} cases written to {OUT} in {time.time() - t0:.0f}s")
    return 0


def _compute_safe(case):
    t0 = time.process_time()
    try:
        out, _ = compute_case(case)
        return out, time.process_time() - t0, None
    except Exception as exc:  # report every failing case, not just the first
        return None, time.process_time() - t0, f"{type(exc).__name__}: {exc}"


if __name__ == "__main__":
    sys.exit(main())

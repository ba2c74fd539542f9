"""Self-check of the mpmath reference set (tests/references): the references the engine's tests
compare against must themselves be right.

Checks (all in mpmath, no jaxdp): hand-derived closed forms against the reference functions;
the quadrature / summation cross-checks against the closed forms at 40 digits; a handful of
``references.json`` cases recomputed from scratch.
"""

import json
import math
from pathlib import Path

import pytest
from mpmath import mp
from references import mp_reference as R

REFS = Path(__file__).resolve().parent / "references" / "references.json"
DPS = 80  # high enough that the tiny (1e-21) closed forms keep 45+ digits
ALPHAS = ["0.0", "1e-06", "0.25", "0.5", "0.75", "0.999999", "1.0"]


@pytest.fixture(scope="module")
def cases():
    return {c["id"]: c for c in json.loads(REFS.read_text())}


@pytest.fixture(autouse=True)
def _precision():
    with mp.workdps(DPS):
        yield


def close(x, y, rel, atol="1e-70"):
    """|x - y| <= rel |y| + atol; infinities and nans must match exactly."""
    x, y, atol = mp.mpf(x), mp.mpf(y), mp.mpf(atol)
    if mp.isnan(y) or mp.isinf(y):
        return (mp.isnan(x) and mp.isnan(y)) or x == y
    return abs(x - y) <= rel * abs(y) + atol


# --------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("t", ["1e-10", "1e-3", "0.7", "3", "250"])
def test_laplace_equal_scale_closed_form(t):
    t = mp.mpf(t)
    b = mp.mpf("1.75")
    P, Q = R.Laplace(0, b), R.Laplace(t * b, b)
    # -log C_{1/2} = t/2 - log(1 + t/2) and a* = 1/2 by symmetry.
    assert close(R.log_bc(P, Q, 0.5), mp.log1p(t / 2) - t / 2, mp.mpf("1e-45"))
    r = R.chernoff(P, Q)
    assert close(r.information, t / 2 - mp.log1p(t / 2), mp.mpf("1e-40"))
    assert abs(r.alpha - mp.mpf(1) / 2) < mp.mpf("1e-40")


def test_laplace_log_bc_general_closed_form():
    # Hand integration for a Laplace pair with L = 0 < R = D, rates u = a/b1, v = (1-a)/b2:
    # C_a = (2b1)^-a (2b2)^-(1-a) [ (e^{-vD} + e^{-uD})/(u+v) + (e^{-uD} - e^{-vD})/(v-u) ].
    b1, b2, D = mp.mpf(1), mp.mpf(3), mp.mpf("1.25")
    P, Q = R.Laplace(0, b1), R.Laplace(D, b2)
    for a in ["0.1", "0.5", "0.9", "2"]:
        a = mp.mpf(a)
        u, v = a / b1, (1 - a) / b2
        c = (2 * b1) ** -a * (2 * b2) ** (a - 1)
        c *= (mp.exp(-v * D) + mp.exp(-u * D)) / (u + v) + (mp.exp(-u * D) - mp.exp(-v * D)) / (
            v - u
        )
        assert close(R.log_bc(P, Q, a), mp.log(c), mp.mpf("1e-45"))


@pytest.mark.parametrize("d,s", [("1e-8", "1"), ("0.3", "2"), ("40", "0.5")])
def test_gaussian_equal_variance_closed_form(d, s):
    d, s = mp.mpf(d), mp.mpf(s)
    P, Q = R.Gaussian(1, s), R.Gaussian(1 + d, s)
    for a in ["0.2", "0.5", "0.9"]:
        a = mp.mpf(a)
        assert close(R.log_bc(P, Q, a), -a * (1 - a) * d**2 / (2 * s**2), mp.mpf("1e-45"))
    r = R.chernoff(P, Q)
    assert close(r.information, d**2 / (8 * s**2), mp.mpf("1e-40"))
    assert abs(r.alpha - mp.mpf(1) / 2) < mp.mpf("1e-40")


@pytest.mark.parametrize(
    "m1,b1,m2,b2", [(0, 1, 0, 2), (0, 1, 1.5, 1), (-1, 0.5, 2, 3), (0, 1, 1e-9, 1 + 1e-9)]
)
def test_laplace_kl_closed_form(m1, b1, m2, b2):
    P, Q = R.Laplace(m1, b1), R.Laplace(m2, b2)
    b1, b2 = mp.mpf(b1), mp.mpf(b2)
    d = abs(mp.mpf(m1) - mp.mpf(m2))
    expected = mp.log(b2 / b1) + d / b2 + (b1 / b2) * mp.exp(-d / b1) - 1
    assert close(R.kl(P, Q), expected, mp.mpf("1e-40"))
    # Independent: KL(P||Q) = d/da log C_a at a = 1.
    assert close(R.kl_from_log_bc(P, Q), expected, mp.mpf("1e-40"))


@pytest.mark.parametrize(
    "m1,s1,m2,s2", [(0, 1, 0, 2), (0, 1, 1.5, 1), (-1, 0.5, 2, 3), (0, 1, 1, 0.5)]
)
def test_gaussian_kl_closed_form(m1, s1, m2, s2):
    P, Q = R.Gaussian(m1, s1), R.Gaussian(m2, s2)
    s1, s2, d = mp.mpf(s1), mp.mpf(s2), mp.mpf(m2) - mp.mpf(m1)
    expected = mp.log(s2 / s1) + (s1**2 + d**2) / (2 * s2**2) - mp.mpf(1) / 2
    assert close(R.kl(P, Q), expected, mp.mpf("1e-45"))
    assert close(R.kl_from_log_bc(P, Q), expected, mp.mpf("1e-40"))
    # Textbook Renyi divergence of order 2, with v = 2 s2^2 - s1^2 (finite iff v > 0):
    # D_2 = log(s2/s1) + log(s2^2/v)/2 + D^2/v.
    v = 2 * s2**2 - s1**2
    expected_r2 = mp.log(s2 / s1) + mp.log(s2**2 / v) / 2 + d**2 / v if v > 0 else mp.inf
    assert close(R.renyi(P, Q, 2), expected_r2, mp.mpf("1e-45"))


@pytest.mark.parametrize("eps", ["0.01", "1", "6"])
def test_randomized_response_closed_forms(eps):
    eps = mp.mpf(eps)
    p1 = mp.exp(eps) / (1 + mp.exp(eps))
    P, Q = R.Categorical((p1, 1 - p1)), R.Categorical((1 - p1, p1))
    r = R.chernoff(P, Q)
    assert close(r.information, mp.log(mp.cosh(eps / 2)), mp.mpf("1e-45"))
    assert abs(r.alpha - mp.mpf(1) / 2) < mp.mpf("1e-40")
    assert close(R.tv(P, Q), mp.tanh(eps / 2), mp.mpf("1e-45"))
    assert close(R.kl(P, Q), eps * mp.tanh(eps / 2), mp.mpf("1e-45"))


def test_discrete_laplace_geometric_closed_form():
    # Geometric mechanism, D = 1, r = e^{-eps}: by symmetry a* = 1/2 and
    # C_{1/2} = tanh(eps/2) * sum_k r^{(|k| + |k-1|)/2} = tanh(eps/2) * (2 r^{1/2}/(1 - r)).
    eps = mp.mpf("0.7")
    P, Q = R.DiscreteLaplace(0, 1 / eps), R.DiscreteLaplace(1, 1 / eps)
    r = mp.exp(-eps)
    c_half = mp.tanh(eps / 2) * 2 * mp.sqrt(r) / (1 - r)
    assert close(R.log_bc(P, Q, 0.5), mp.log(c_half), mp.mpf("1e-45"))
    assert close(R.chernoff(P, Q).information, -mp.log(c_half), mp.mpf("1e-40"))
    # log p - log q = eps (|k-1| - |k|) = +eps for k <= 0, -eps for k >= 1, so
    # KL = eps (1 - 2 P(K >= 1)) with P(K >= 1) = r / (1 + r).
    p_ge1 = r / (1 + r)
    assert close(R.kl(P, Q), eps * (1 - 2 * p_ge1), mp.mpf("1e-45"))


def test_categorical_support_ends():
    P, Q = R.Categorical.normalized([0.5, 0.5, 0.0]), R.Categorical.normalized([0.4, 0.4, 0.2])
    # log C_a = log 0.8 + a log 1.25: f decreasing, a* = 0, C = -log Q(supp P).
    for a in ["0", "0.3", "1"]:
        a = mp.mpf(a)
        assert close(R.log_bc(P, Q, a), mp.log(mp.mpf("0.8")) + a * mp.log(mp.mpf("1.25")), 1e-45)
    r = R.chernoff(P, Q)
    assert r.alpha == 0 and close(r.information, -mp.log(mp.mpf("0.8")), 1e-45)
    r = R.chernoff(Q, P)
    assert r.alpha == 1 and close(r.information, -mp.log(mp.mpf("0.8")), 1e-45)
    assert R.kl(P, Q) < mp.inf and R.kl(Q, P) == mp.inf
    assert R.renyi(Q, P, 2) == mp.inf
    disjoint = R.Categorical.normalized([0.0, 0.0, 1.0])
    assert R.chernoff(P, disjoint).information == mp.inf
    assert R.tv(P, disjoint) == 1


def test_tv_closed_forms():
    # Equal-scale Laplace: TV = 1 - e^{-t/2}; equal-variance Gaussian: 2 Phi(D/(2s)) - 1.
    t = mp.mpf("0.8")
    assert close(R.tv(R.Laplace(0, 1), R.Laplace(t, 1)), -mp.expm1(-t / 2), 1e-45)
    d, s = mp.mpf("0.8"), mp.mpf(2)
    assert close(R.tv(R.Gaussian(0, s), R.Gaussian(d, s)), 2 * mp.ncdf(d / (2 * s)) - 1, 1e-45)


# --------------------------------------------------------------------------- cross-checks


def test_quadrature_matches_closed_forms_at_40_digits():
    pairs = [
        (R.Laplace(0, 1), R.Laplace(0.75, 2.5)),
        (R.Gaussian(0, 1), R.Gaussian(1, 0.5)),
        (R.Laplace(0.5, 2), R.Gaussian(-1, 0.5)),
    ]
    # All quadratures at 45 digits (kl_quad / tv_quad add 10): one Gauss-Legendre node cache.
    for (P, Q), a in zip(pairs, ["0.3", "0.999999", "0.6"], strict=True):
        quad = R.log_bc_quad(P, Q, a, dps=45)
        assert close(quad, R.log_bc(P, Q, a), mp.mpf("1e-40")), (P, Q, a)
    P, Q = pairs[0]
    assert close(R.kl_quad(P, Q, dps=35), R.kl(P, Q), mp.mpf("1e-40"))
    assert close(R.tv_quad(P, Q, dps=35), R.tv(P, Q), mp.mpf("1e-40"))


def test_summation_matches_closed_forms_at_40_digits():
    P, Q = R.DiscreteLaplace(0, 1.0), R.DiscreteLaplace(5, 3.0)
    for a in ["0", "0.3", "1", "2"]:
        assert close(R.log_bc_sum(P, Q, a), R.log_bc(P, Q, a), mp.mpf("1e-40"))
    assert close(R.kl_sum(P, Q), R.kl(P, Q), mp.mpf("1e-40"))
    assert close(R.tv_sum(P, Q), R.tv(P, Q), mp.mpf("1e-40"))
    iid_p = R.Product((R.Categorical.normalized([0.6, 0.3, 0.1]),) * 3)
    iid_q = R.Product((R.Categorical.normalized([0.2, 0.5, 0.3]),) * 3)
    assert close(R.tv_sum(iid_p, iid_q), R.tv(iid_p, iid_q), mp.mpf("1e-45"))


def test_envelope_gradient_by_finite_differences():
    P, Q = R.Laplace(0, 1), R.Laplace(1, 3)
    r = R.chernoff(P, Q)
    grad = R.chernoff_grad(P, Q, r.alpha)
    agrad = R.chernoff_alpha_grad(P, Q, r.alpha)
    h = mp.mpf("1e-15")
    for key in grad:
        th = R._field_value(P, Q, key)
        rp = R.chernoff(*R._with_field(P, Q, key, th + h), guess=r.alpha)
        rm = R.chernoff(*R._with_field(P, Q, key, th - h), guess=r.alpha)
        assert close((rp.information - rm.information) / (2 * h), grad[key], mp.mpf("1e-20"))
        assert close((rp.alpha - rm.alpha) / (2 * h), agrad[key], mp.mpf("1e-20"))


# --------------------------------------------------------------------------- the JSON


def test_json_schema(cases):
    ids = [c["id"] for c in json.loads(REFS.read_text())]
    assert len(ids) == len(set(ids)) >= 55
    keys = {"id", "family", "P", "Q", "alphas", "log_bc", "chernoff", "kl_pq", "kl_qp"}
    keys |= {"renyi_0.5", "renyi_2", "bhattacharyya", "hellinger", "tv", "method", "checks"}
    for cid, c in cases.items():
        assert keys <= set(c), cid
        assert c["alphas"] == ALPHAS
        assert len(c["log_bc"]) == len(ALPHAS)
        for v in [*c["log_bc"], c["kl_pq"], c["chernoff"]["information"]]:
            float(v)  # parseable
        ch = c["chernoff"]
        assert set(ch["grad"]) == set(ch["alpha_grad"])
        info = float(ch["information"])
        # Consequences of the definitions (DESIGN.md section 4).
        assert info >= 0
        if math.isfinite(info) and info > 0:
            kl_pq, kl_qp = float(c["kl_pq"]), float(c["kl_qp"])
            assert info <= min(kl_pq, kl_qp) * (1 + 1e-12)
            if c["tv"] is not None:
                tv = float(c["tv"])
                assert -math.expm1(-info) <= tv * (1 + 1e-12)
                assert tv <= math.sqrt(-math.expm1(-2 * info)) * (1 + 1e-12)
            assert info >= float(c["bhattacharyya"]) * (1 - 1e-12)


RECOMPUTE = [
    "laplace-ratio10-d2",
    "laplace-near-both",
    "gauss-ratio1.5-d1",
    "dlaplace-d5-scales",
    "categorical-support-interior",
    "mixed-gauss-laplace",
    "product-laplace-gauss",
]


@pytest.mark.parametrize("cid", RECOMPUTE)
def test_recompute_cases(cases, cid):
    c = cases[cid]
    P, Q = R.from_spec(c["P"], c["family"]), R.from_spec(c["Q"], c["family"])
    rel = mp.mpf("1e-23")  # the JSON keeps 25 significant digits
    for a, v in zip(c["alphas"], c["log_bc"], strict=True):
        # alphas are float64 values (repr): the references are for the exact binary values.
        assert close(R.log_bc(P, Q, float(a)), v, rel), (a, v)
    r = R.chernoff(P, Q)
    assert close(r.information, c["chernoff"]["information"], rel)
    assert close(r.alpha, c["chernoff"]["alpha"], rel)
    assert close(R.kl(P, Q), c["kl_pq"], rel)
    assert close(R.kl(Q, P), c["kl_qp"], rel)
    assert close(R.renyi(P, Q, 0.5), c["renyi_0.5"], rel)
    assert close(R.renyi(P, Q, 2), c["renyi_2"], rel)
    assert close(R.hellinger(P, Q), c["hellinger"], rel)
    tv = R.tv(P, Q)
    assert (tv is None and c["tv"] is None) or close(tv, c["tv"], rel)
    grad = R.chernoff_grad(P, Q, r.alpha)
    for k, v in c["chernoff"]["grad"].items():
        assert close(grad[k], v, rel), k


def test_json_matches_generator_specs(cases):
    """references.json is regenerated whenever make_references.py's case list changes."""
    from references import make_references

    specs = make_references.case_specs()
    assert [s["id"] for s in specs] == list(cases)
    for s in specs:
        c = cases[s["id"]]
        assert (c["family"], c["P"], c["Q"]) == (s["family"], s["P"], s["Q"]), s["id"]
        assert c["alphas"] == [repr(a) for a in make_references.ALPHAS]

"""High-precision mpmath reference implementations for jaxdp's divergences.

Independent of jaxdp (nothing here imports it). Every quantity has a primary implementation
derived by hand (closed forms, piecewise-exponential integrals, geometric sums, erfc
integrals) and a second, independent one (tanh-sinh quadrature of the raw densities, direct or
extrapolated summation of the raw pmfs, derivatives of ``log C_a`` at the ends) used as a
cross-check by ``make_references.py`` and ``test_references_selfcheck.py``.

Conventions (nats), for distributions :math:`P, Q` with densities or pmfs :math:`p, q`:

.. math::

    \\log C_a = \\log \\int p^a q^{1-a}, \\qquad
    C = \\max_{a \\in [0, 1]} -\\log C_a, \\qquad
    D_\\alpha = \\frac{\\log C_\\alpha}{\\alpha - 1}.

At :math:`a \\in \\{0, 1\\}` the one-sided limits are used: :math:`C_0 = Q(\\operatorname{supp} P)`,
:math:`C_1 = P(\\operatorname{supp} Q)`.  :math:`H = \\sqrt{1 - C_{1/2}}`,
:math:`TV = \\sup_A |P(A) - Q(A)|`.

Precision: every public function runs at ``max(mp.dps, MIN_DPS)`` digits and otherwise uses the
ambient precision, so that ``mp.diff`` (which raises the working precision) differentiates the
functions correctly. Distribution parameters are converted to ``mpf`` exactly (a Python float
is a dyadic rational), so references are for the exact binary float64 values.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import NamedTuple

from mpmath import mp
from mpmath.libmp import dps_to_prec

MIN_DPS = 50

__all__ = [
    "MIN_DPS",
    "Categorical",
    "ChernoffInfo",
    "DiscreteLaplace",
    "Gaussian",
    "Laplace",
    "Product",
    "bhattacharyya",
    "chernoff",
    "chernoff_alpha_grad",
    "chernoff_grad",
    "from_spec",
    "hellinger",
    "kl",
    "kl_from_log_bc",
    "kl_quad",
    "kl_sum",
    "log_bc",
    "log_bc_quad",
    "log_bc_sum",
    "renyi",
    "replace_field",
    "to_str",
    "tv",
    "tv_quad",
    "tv_sum",
]


def _atleast(fn: Callable) -> Callable:
    """Run ``fn`` at ``max(ambient, MIN_DPS)`` decimal digits."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with mp.workprec(max(mp.prec, dps_to_prec(MIN_DPS))):
            return fn(*args, **kwargs)

    return wrapper


@functools.lru_cache(maxsize=1 << 14)
def _log_at(x, prec):
    with mp.workprec(prec):
        return mp.log(x)


def _clog(x):
    """Cached ``mp.log`` of a parameter at the current precision (speed only)."""
    return _log_at(x, mp.prec)


def _mpf(x) -> object:
    return x if isinstance(x, type(mp.mpf(0))) else mp.mpf(x)


# --------------------------------------------------------------------------- distributions


@dataclasses.dataclass(frozen=True)
class Laplace:
    """Density :math:`e^{-|x - loc| / scale} / (2\\,scale)`."""

    loc: object
    scale: object
    float_fields = ("loc", "scale")

    def __post_init__(self):
        object.__setattr__(self, "loc", _mpf(self.loc))
        object.__setattr__(self, "scale", _mpf(self.scale))

    kinks = property(lambda self: (self.loc,))
    width = property(lambda self: self.scale)

    def logpdf(self, x):
        return -mp.log(2 * self.scale) - abs(x - self.loc) / self.scale

    def logpdf_fn(self):
        """Fast closure for ``logpdf`` with constants precomputed at the current precision."""
        c, m, r = -mp.log(2 * self.scale), self.loc, 1 / self.scale
        return lambda x: c - abs(x - m) * r

    def poly(self, x, x0):
        """Coefficients (c0, c1, c2) of logpdf as a polynomial in t = x - x0, valid on the
        side of the kink that contains ``x``."""
        sgn = 1 if x < self.loc else -1
        return (-mp.log(2 * self.scale) + sgn * (x0 - self.loc) / self.scale, sgn / self.scale, 0)

    def cdf(self, x):
        if x == mp.inf:
            return mp.one
        if x < self.loc:
            return mp.exp((x - self.loc) / self.scale) / 2
        return 1 - mp.exp(-(x - self.loc) / self.scale) / 2

    def sf(self, x):
        return self.cdf(2 * self.loc - x) if x != -mp.inf else mp.one

    def mass(self, lo, hi):
        """P([lo, hi]) without cancellation."""
        if lo >= self.loc:
            return self.sf(lo) - self.sf(hi)
        if hi <= self.loc:
            return self.cdf(hi) - self.cdf(lo)
        return 1 - self.cdf(lo) - self.sf(hi)


@dataclasses.dataclass(frozen=True)
class Gaussian:
    """Normal distribution with mean ``loc`` and standard deviation ``scale``."""

    loc: object
    scale: object
    float_fields = ("loc", "scale")

    def __post_init__(self):
        object.__setattr__(self, "loc", _mpf(self.loc))
        object.__setattr__(self, "scale", _mpf(self.scale))

    kinks = property(lambda self: ())
    width = property(lambda self: self.scale)

    def logpdf(self, x):
        return (
            -mp.log(2 * mp.pi) / 2 - mp.log(self.scale) - (x - self.loc) ** 2 / (2 * self.scale**2)
        )

    def logpdf_fn(self):
        """Fast closure for ``logpdf`` with constants precomputed at the current precision."""
        c, m, r = -mp.log(2 * mp.pi) / 2 - mp.log(self.scale), self.loc, 1 / (2 * self.scale**2)
        return lambda x: c - (x - m) ** 2 * r

    def poly(self, x, x0):
        s2 = self.scale**2
        d = x0 - self.loc
        return (
            -mp.log(2 * mp.pi) / 2 - mp.log(self.scale) - d**2 / (2 * s2),
            -d / s2,
            -1 / (2 * s2),
        )

    def cdf(self, x):
        return mp.ncdf((x - self.loc) / self.scale)

    def sf(self, x):
        return mp.ncdf(-(x - self.loc) / self.scale)

    def mass(self, lo, hi):
        if lo >= self.loc:
            return self.sf(lo) - self.sf(hi)
        if hi <= self.loc:
            return self.cdf(hi) - self.cdf(lo)
        return 1 - self.cdf(lo) - self.sf(hi)


@dataclasses.dataclass(frozen=True)
class DiscreteLaplace:
    """pmf :math:`\\tanh(1/(2 s)) e^{-|k - loc|/s}` on the integers (integer ``loc``)."""

    loc: int
    scale: object
    float_fields = ("scale",)

    def __post_init__(self):
        if int(self.loc) != self.loc:
            raise ValueError("DiscreteLaplace loc must be an integer")
        object.__setattr__(self, "loc", int(self.loc))
        object.__setattr__(self, "scale", _mpf(self.scale))

    def log_norm(self):
        return mp.log(mp.tanh(1 / (2 * self.scale)))

    def logpmf(self, k):
        return self.log_norm() - abs(k - self.loc) / self.scale

    def cdf(self, k):
        """P(K <= k) for integer (mpf) k, k may be +-inf."""
        if k == mp.inf:
            return mp.one
        if k == -mp.inf:
            return mp.zero
        r1 = 1 + mp.exp(-1 / self.scale)
        if k < self.loc:
            return mp.exp(-(self.loc - k) / self.scale) / r1
        return 1 - mp.exp(-(k + 1 - self.loc) / self.scale) / r1

    def sf(self, k):
        """P(K >= k)."""
        if k == -mp.inf:
            return mp.one
        if k == mp.inf:
            return mp.zero
        r1 = 1 + mp.exp(-1 / self.scale)
        if k > self.loc:
            return mp.exp(-(k - self.loc) / self.scale) / r1
        return 1 - mp.exp(-(self.loc - k + 1) / self.scale) / r1

    def mass(self, lo, hi):
        """P(lo <= K <= hi) for integers lo <= hi (may be infinite)."""
        if lo > self.loc:
            return self.sf(lo) - self.sf(hi + 1)
        if hi < self.loc:
            return self.cdf(hi) - self.cdf(lo - 1)
        return 1 - self.cdf(lo - 1) - self.sf(hi + 1)


@dataclasses.dataclass(frozen=True)
class Categorical:
    """pmf ``probs`` (used as given: normalise with :meth:`normalized` first)."""

    probs: tuple

    def __post_init__(self):
        object.__setattr__(self, "probs", tuple(_mpf(p) for p in self.probs))

    @property
    def float_fields(self):
        return tuple(f"probs[{i}]" for i in range(len(self.probs)))

    @classmethod
    def normalized(cls, probs: Sequence) -> Categorical:
        """Exactly normalised (at the working precision) version of float ``probs``."""
        ps = [_mpf(p) for p in probs]
        total = mp.fsum(ps)
        return cls(tuple(p / total for p in ps))


@dataclasses.dataclass(frozen=True)
class Product:
    """Independent composition of ``components``."""

    components: tuple

    def __post_init__(self):
        object.__setattr__(self, "components", tuple(self.components))

    @property
    def float_fields(self):
        return tuple(f"{i}.{f}" for i, c in enumerate(self.components) for f in c.float_fields)


_CONTINUOUS = (Laplace, Gaussian)


def replace_field(dist, field: str, value):
    """Copy of ``dist`` with float field ``field`` (e.g. ``"scale"``, ``"probs[2]"``,
    ``"1.loc"`` for product component 1) set to ``value``."""
    if isinstance(dist, Product):
        idx, rest = field.split(".", 1)
        comps = list(dist.components)
        comps[int(idx)] = replace_field(comps[int(idx)], rest, value)
        return Product(tuple(comps))
    if isinstance(dist, Categorical):
        i = int(field[len("probs[") : -1])
        probs = list(dist.probs)
        probs[i] = value
        return Categorical(tuple(probs))
    return dataclasses.replace(dist, **{field: value})


def get_field(dist, field: str):
    if isinstance(dist, Product):
        idx, rest = field.split(".", 1)
        return get_field(dist.components[int(idx)], rest)
    if isinstance(dist, Categorical):
        return dist.probs[int(field[len("probs[") : -1])]
    return getattr(dist, field)


def from_spec(spec: dict, family: str | None = None):
    """Build a distribution from a ``references.json`` parameter dict.

    ``family`` is the case family; a ``"family"`` key inside ``spec`` overrides it (mixed pairs,
    product components). Categorical probabilities are normalised exactly.
    """
    fam = spec.get("family", family)
    if fam == "Laplace":
        return Laplace(spec["loc"], spec["scale"])
    if fam == "Gaussian":
        return Gaussian(spec["loc"], spec["scale"])
    if fam == "DiscreteLaplace":
        return DiscreteLaplace(spec["loc"], spec["scale"])
    if fam == "Categorical":
        return Categorical.normalized(spec["probs"])
    if fam == "Product":
        return Product(tuple(from_spec(c) for c in spec["components"]))
    raise ValueError(f"unknown family {fam!r}")


# --------------------------------------------------------------------------- helpers


def _logsumexp(terms):
    terms = [t for t in terms if t != -mp.inf]
    if not terms:
        return -mp.inf
    m = max(terms)
    if m == mp.inf:
        return mp.inf
    return m + mp.log(mp.fsum(mp.exp(t - m) for t in terms))


def _log_exprel(z):
    """log((e^z - 1)/z), stable for tiny z; z <= 0 here."""
    if z == 0:
        return mp.zero
    return mp.log(mp.expm1(z) / z)


def _pair_sides(P, Q, a):
    """Laplace-type rates: u = a/b_P, v = (1-a)/b_Q, sorted by location."""
    u = a / P.scale
    v = (1 - a) / Q.scale
    if P.loc <= Q.loc:
        return u, v, abs(Q.loc - P.loc)
    return v, u, abs(Q.loc - P.loc)


# --------------------------------------------------------------------------- log C_a


def _log_bc_laplace(P: Laplace, Q: Laplace, a):
    # Integrand (2b1)^-a (2b2)^-(1-a) exp(-u|x-m1| - v|x-m2|), u=a/b1, v=(1-a)/b2. With the
    # locations sorted L <= R (rates uL, uR, D = R - L):
    #   x < L : exp(-uR D) exp(-(uL+uR)(L-x))    -> exp(-uR D)/s,  s = uL + uR
    #   x > R : exp(-uL D) exp(-(uL+uR)(x-R))    -> exp(-uL D)/s
    #   L..R  : exp(-uR D + (uR-uL) y), y=x-L    -> exp(-min(uL,uR) D) D exprel(-|uR-uL| D)
    # Valid for any real a with s > 0 (otherwise the integral diverges).
    uL, uR, D = _pair_sides(P, Q, a)
    s = uL + uR
    if s <= 0:
        return mp.inf
    terms = [-uR * D - mp.log(s), -uL * D - mp.log(s)]
    if D > 0:
        terms.append(-min(uL, uR) * D + mp.log(D) + _log_exprel(-abs(uR - uL) * D))
    return -a * _clog(2 * P.scale) - (1 - a) * _clog(2 * Q.scale) + _logsumexp(terms)


def _log_bc_gaussian(P: Gaussian, Q: Gaussian, a):
    # Completing the square: with V = (1-a) s1^2 + a s2^2 > 0,
    # log C_a = (1-a) log s1 + a log s2 - log(V)/2 - a(1-a) D^2 / (2 V).
    s1, s2 = P.scale, Q.scale
    V = (1 - a) * s1**2 + a * s2**2
    if V <= 0:
        return mp.inf
    d = Q.loc - P.loc
    return (1 - a) * mp.log(s1) + a * mp.log(s2) - mp.log(V) / 2 - a * (1 - a) * d**2 / (2 * V)


def _log_halfline_gauss(A, B):
    """log int_0^inf exp(-A z^2 - B z) dz."""
    if A < 0:
        return mp.inf
    if A == 0:
        return -mp.log(B) if B > 0 else mp.inf
    z = B / (2 * mp.sqrt(A))
    return mp.log(mp.pi / A) / 2 - mp.log(2) + _log_erfcx(z)


def _log_erfcx(z):
    """log(exp(z^2) erfc(z)); asymptotic series for large z (no cancellation as A -> 0)."""
    if z < 100:
        return z**2 + mp.log(mp.erfc(z))
    # erfcx(z) = 1/(z sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2 z^2)^n; terms shrink by <= 1e-4/n.
    x = 1 / (2 * z**2)
    total, term, n = mp.one, mp.one, 0
    while True:
        n += 1
        term *= -(2 * n - 1) * x
        total += term
        if abs(term) < mp.eps * abs(total) or n > 10 * mp.dps:
            break
    return mp.log(total) - mp.log(z) - mp.log(mp.pi) / 2


def _log_int_lap_gauss(L: Laplace, G: Gaussian, al, be):
    """log int p_L^al p_G^be dx (erfc on each side of the Laplace kink)."""
    if be < 0:
        return mp.inf
    b, m, sg, mu = L.scale, L.loc, G.scale, G.loc
    K = -al * mp.log(2 * b) - be * (mp.log(2 * mp.pi) / 2 + mp.log(sg))
    if be == 0:
        return K + (mp.log(2 * b / al) if al > 0 else mp.inf)
    # x = m + y: exponent -al|y|/b - be (y + delta)^2 / (2 sg^2), delta = m - mu.
    delta = m - mu
    A = be / (2 * sg**2)
    C = be * delta**2 / (2 * sg**2)
    BR = al / b + be * delta / sg**2
    BL = al / b - be * delta / sg**2
    return K - C + _logsumexp([_log_halfline_gauss(A, BR), _log_halfline_gauss(A, BL)])


def _log_bc_dlaplace(P: DiscreteLaplace, Q: DiscreteLaplace, a):
    # Same piecewise structure as the continuous case, sums instead of integrals:
    #   k <= L : exp(-uR D) / (1 - e^-s),   k >= R : exp(-uL D) / (1 - e^-s)   (D >= 1)
    #   L < k < R : exp(-uR D) sum_{y=1}^{D-1} exp((uR - uL) y)
    #   D = 0 : (1 + e^-s) / (1 - e^-s)
    uL, uR, D = _pair_sides(P, Q, a)
    s = uL + uR
    if s <= 0:
        return mp.inf
    lg = -mp.log(-mp.expm1(-s))
    pref = a * P.log_norm() + (1 - a) * Q.log_norm()
    if D == 0:
        return pref + lg + mp.log1p(mp.exp(-s))
    terms = [-uR * D + lg, -uL * D + lg]
    if D > 1:
        w = uR - uL
        if D <= 2000:
            terms.extend(-uR * D + w * y for y in range(1, D))
        else:  # sum_{y=1}^{D-1} e^{w y} = e^{w} expm1(w (D-1)) / expm1(w), written stably
            top = max(w, w * (D - 1))  # largest exponent of the sum
            if w == 0:
                terms.append(-uR * D + mp.log(D - 1))
            else:
                ratio = mp.expm1(-abs(w) * (D - 1)) / mp.expm1(-abs(w))
                terms.append(-uR * D + top + mp.log(ratio))
    return pref + _logsumexp(terms)


def _log_bc_categorical(P: Categorical, Q: Categorical, a):
    if len(P.probs) != len(Q.probs):
        raise ValueError("categorical supports differ in size")
    terms = []
    for p, q in zip(P.probs, Q.probs, strict=True):
        if p > 0 and q > 0:
            terms.append(a * _clog(p) + (1 - a) * _clog(q))
        elif (p > 0 and a > 1) or (q > 0 and a < 0):
            return mp.inf  # 0^(1-a) with a > 1, or 0^a with a < 0: a zero to a negative power
    return _logsumexp(terms)


@_atleast
def log_bc(P, Q, a):
    """Exact ``log C_a(P, Q)`` (hand-derived closed forms); ``+inf`` where divergent."""
    a = _mpf(a)
    if P == Q:
        return mp.zero  # int p^a p^(1-a) = 1 exactly, for every a
    if isinstance(P, Product):
        return mp.fsum(log_bc(p, q, a) for p, q in zip(P.components, Q.components, strict=True))
    if isinstance(P, Laplace) and isinstance(Q, Laplace):
        return _log_bc_laplace(P, Q, a)
    if isinstance(P, Gaussian) and isinstance(Q, Gaussian):
        return _log_bc_gaussian(P, Q, a)
    if isinstance(P, Laplace) and isinstance(Q, Gaussian):
        return _log_int_lap_gauss(P, Q, a, 1 - a)
    if isinstance(P, Gaussian) and isinstance(Q, Laplace):
        return _log_int_lap_gauss(Q, P, 1 - a, a)
    if isinstance(P, DiscreteLaplace) and isinstance(Q, DiscreteLaplace):
        return _log_bc_dlaplace(P, Q, a)
    if isinstance(P, Categorical) and isinstance(Q, Categorical):
        return _log_bc_categorical(P, Q, a)
    raise TypeError(f"no log_bc for {type(P).__name__}, {type(Q).__name__}")


# --------------------------------------------------------------------------- quadrature


LEVELS = (1, 5, 20, 60, 150, 300)  # log-integrand drops at which segments are cut


def _golden_max(phi, lo, hi, tol):
    """Golden-section search for the maximiser of a unimodal phi on [lo, hi], to within tol
    (the smallest scale of the problem: a very narrow peak must be found, not just bracketed)."""
    g = (mp.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = phi(x1), phi(x2)
    for _ in range(2000):
        if hi - lo <= tol:
            break
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = phi(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = phi(x1)
    return (lo + hi) / 2


def _expand(phi, x0, direction, w0, limit):
    """Width W such that phi(x0 + dir W) < phi(x0 + dir W/2) (concave phi), capped at limit."""
    W = w0
    for _ in range(400):
        if limit is not None and W >= limit:
            return limit
        if phi(x0 + direction * W) < phi(x0 + direction * W / 2):
            return W
        W *= 2
    raise RuntimeError("no bracket for the maximum")


def _piece_argmax(phi, lo, hi, anchor, w0):
    """Maximiser of phi, concave on [lo, hi] (ends may be infinite)."""
    if lo == -mp.inf and hi == mp.inf:
        WL = _expand(phi, anchor, -1, w0, None)
        WR = _expand(phi, anchor, 1, w0, None)
        return _golden_max(phi, anchor - WL, anchor + WR, w0)
    if lo == -mp.inf:
        return _golden_max(phi, hi - _expand(phi, hi, -1, w0, None), hi, w0)
    if hi == mp.inf:
        return _golden_max(phi, lo, lo + _expand(phi, lo, 1, w0, None), w0)
    return _golden_max(phi, lo, hi, w0)


def _level_points(phi, lo, hi, xmax, w0):
    """Points on each side of xmax (within [lo, hi]) where phi has dropped by LEVELS."""
    fmax = phi(xmax)
    out = [xmax]
    for direction, end in ((1, hi), (-1, lo)):
        x = xmax
        for level in LEVELS:
            target = fmax - level
            if end not in (mp.inf, -mp.inf) and phi(end) >= target:
                break
            d = w0
            while True:
                y = x + direction * d
                if (direction > 0 and y >= end) or (direction < 0 and y <= end):
                    y = end
                if phi(y) < target:
                    break
                d *= 2
            a, b = x, y
            for _ in range(24):
                m = (a + b) / 2
                if phi(m) >= target:
                    a = m
                else:
                    b = m
            x = (a + b) / 2
            out.append(x)
    return out


def _breakpoints(phis, kinks, anchors, w0, extra=()):
    """Breakpoints for a quadrature whose integrand's log is phi (concave between kinks)."""
    kinks = sorted(set(kinks))
    edges = [-mp.inf, *kinks, mp.inf]
    pts = set(kinks) | set(extra)
    for phi in phis:
        for lo, hi in itertools.pairwise(edges):
            if lo == -mp.inf and hi == mp.inf:
                anchor = anchors[0]
            elif lo == -mp.inf:
                anchor = hi
            elif hi == mp.inf:
                anchor = lo
            else:
                anchor = (lo + hi) / 2
            xm = _piece_argmax(phi, lo, hi, anchor, w0)
            pts.update(_level_points(phi, lo, hi, xm, w0))
    return [-mp.inf, *sorted(pts), mp.inf]


QUAD_DPS = 45  # quadrature cross-checks target 30 digits (with margin)
QUAD_METHOD = "gauss-legendre"  # finite segments; infinite ones use tanh-sinh


def _quad(f, pts, ref):
    """Sum over segments of int f; each segment is integrated as f * exp(-l) with
    l = max(ref(u), ref(v)) over its finite ends, because mp.quad's tolerance is absolute.
    Returns (value, estimated absolute error)."""
    val = err = mp.zero
    for u, v in itertools.pairwise(pts):
        if u == v:
            continue
        ends = [ref(x) for x in (u, v) if x not in (mp.inf, -mp.inf)]
        lev = max(ends) if ends else mp.zero
        if lev in (mp.inf, -mp.inf):
            lev = mp.zero
        scale = mp.exp(lev)
        finite = u not in (mp.inf, -mp.inf) and v not in (mp.inf, -mp.inf)
        method = QUAD_METHOD if finite else "tanh-sinh"
        j, e = mp.quad(lambda x, s=scale: f(x) / s, [u, v], error=True, method=method)
        val += scale * j
        err += scale * e
    return val, err


def _cont_setup(P, Q):
    kinks = [k for d in (P, Q) for k in d.kinks]
    anchors = [P.loc, Q.loc]
    w0 = min(P.width, Q.width) / 1024
    return kinks, anchors, w0


def log_bc_quad(P, Q, a, *, return_error=False, dps=QUAD_DPS):
    """``log C_a`` by quadrature of ``exp(a log p + (1-a) log q)`` (continuous pairs).

    Only the raw log-densities are used. Breakpoints at the kinks, at each piece's maximiser
    (the log-integrand is concave between kinks), and where the log-integrand has dropped by
    LEVELS below it; Gauss-Legendre on finite segments, tanh-sinh on the two infinite ends, each
    segment rescaled to O(1) (mp.quad's tolerance is absolute). When the result is tiny the
    integral of ``q expm1(a (log p - log q))`` (= C_a - 1) is used instead, at ``dps + 20``
    digits, so that values like 1e-21 keep their relative accuracy. Products: sum over
    components; discrete families are summed (:func:`log_bc_sum`). Runs at ``dps`` digits.
    """
    if isinstance(P, Product):
        vals = [
            log_bc_quad(p, q, a, return_error=True, dps=dps)
            for p, q in zip(P.components, Q.components, strict=True)
        ]
        v = mp.fsum(x for x, _ in vals)
        e = mp.fsum(x for _, x in vals)
        return (v, e) if return_error else v
    if not (isinstance(P, _CONTINUOUS) and isinstance(Q, _CONTINUOUS)):
        v = log_bc_sum(P, Q, a)
        return (v, mp.zero) if return_error else v
    with mp.workdps(dps):
        a = _mpf(a)
        kinks, anchors, w0 = _cont_setup(P, Q)
        lp, lq = P.logpdf_fn(), Q.logpdf_fn()

        def phi(x):
            return a * lp(x) + (1 - a) * lq(x)

        pts = _breakpoints([phi], kinks, anchors, w0)
        val, err = _quad(lambda x: mp.exp(phi(x)), pts, phi)
        res, rerr = mp.log(val), err / val
    if abs(res) < mp.mpf("1e-12"):
        with mp.workdps(dps + 20):
            a = _mpf(a)
            lp, lq = P.logpdf_fn(), Q.logpdf_fn()

            # Tiny log C_a: integrate C_a - 1 = int q expm1(a (log p - log q)).
            def g(x):
                y = lq(x)
                return mp.exp(y) * mp.expm1(a * (lp(x) - y))

            val, err = _quad(g, pts, lq)
            res, rerr = mp.log1p(val), err
    return (res, rerr) if return_error else res


def kl_quad(P, Q, *, dps=QUAD_DPS):
    """KL(P||Q) = int p (log p - log q) by quadrature (continuous pairs, products)."""
    if isinstance(P, Product):
        return mp.fsum(
            kl_quad(p, q, dps=dps) for p, q in zip(P.components, Q.components, strict=True)
        )
    if not (isinstance(P, _CONTINUOUS) and isinstance(Q, _CONTINUOUS)):
        return kl_sum(P, Q)
    with mp.workdps(dps + 10):
        kinks, anchors, w0 = _cont_setup(P, Q)
        lp, lq = P.logpdf_fn(), Q.logpdf_fn()
        pts = _breakpoints([lp], kinks, anchors, w0)

        def g(x):
            y = lp(x)
            return mp.exp(y) * (y - lq(x))

        val, _ = _quad(g, pts, lp)
    return val


def tv_quad(P, Q, *, dps=QUAD_DPS):
    """TV = int |p - q| / 2 by quadrature (continuous pairs)."""
    with mp.workdps(dps + 10):
        kinks, anchors, w0 = _cont_setup(P, Q)
        lp, lq = P.logpdf_fn(), Q.logpdf_fn()
        roots = _crossings(P, Q)
        pts = _breakpoints([lp, lq], kinks, anchors, w0, extra=roots)
        val, _ = _quad(
            lambda x: abs(mp.exp(lp(x)) - mp.exp(lq(x))) / 2, pts, lambda x: max(lp(x), lq(x))
        )
    return val


# --------------------------------------------------------------------------- summation


def _sum_range(P, Q, rate):
    """Integer range [lo, hi] outside which the tails are below 10^-(dps+20) (or None)."""
    n = int(mp.ceil((mp.dps + 20) * mp.log(10) / rate)) + 2
    if n > 40000:
        return None
    return min(P.loc, Q.loc) - n, max(P.loc, Q.loc) + n


@_atleast
def log_bc_sum(P, Q, a):
    """``log C_a`` by direct summation of the raw pmfs (Categorical; DiscreteLaplace with
    truncation when the tails are short, ``mp.nsum`` extrapolation otherwise)."""
    a = _mpf(a)
    if isinstance(P, Categorical):
        total = mp.zero
        for p, q in zip(P.probs, Q.probs, strict=True):
            # 0^x is 0 for x > 0, +inf for x < 0, and 0 for x = 0 (one-sided limit: the
            # a = 0 and a = 1 conventions C_0 = Q(supp P), C_1 = P(supp Q)).
            if (p == 0 and a < 0) or (q == 0 and a > 1):
                return mp.inf
            if p > 0 and q > 0:
                total += mp.power(p, a) * mp.power(q, 1 - a)
        return mp.log(total) if total > 0 else -mp.inf
    if isinstance(P, Product):
        return mp.fsum(log_bc_sum(p, q, a) for p, q in zip(P.components, Q.components, strict=True))
    rate = a / P.scale + (1 - a) / Q.scale
    if rate <= 0:
        return mp.inf

    def term(k):
        return mp.exp(a * P.logpmf(k) + (1 - a) * Q.logpmf(k))

    rng = _sum_range(P, Q, rate)
    if rng is not None:
        total = mp.fsum(term(k) for k in range(rng[0], rng[1] + 1))
    else:
        lo, hi = min(P.loc, Q.loc), max(P.loc, Q.loc)
        total = (
            mp.nsum(lambda j: term(lo - j), [1, mp.inf])
            + mp.fsum(term(k) for k in range(lo, hi + 1))
            + mp.nsum(lambda j: term(hi + j), [1, mp.inf])
        )
    return mp.log(total)


@_atleast
def kl_sum(P, Q):
    """KL by direct summation (Categorical; DiscreteLaplace: truncated when the tails are
    short, extrapolated (``mp.nsum``) for long geometric tails of equal scales, else None)."""
    if isinstance(P, Categorical):
        total = mp.zero
        for p, q in zip(P.probs, Q.probs, strict=True):
            if p > 0:
                if q == 0:
                    return mp.inf
                total += p * (mp.log(p) - mp.log(q))
        return total
    if isinstance(P, Product):
        vals = [kl_sum(p, q) for p, q in zip(P.components, Q.components, strict=True)]
        return None if any(v is None for v in vals) else mp.fsum(vals)

    def term(k):
        return mp.exp(P.logpmf(k)) * (P.logpmf(k) - Q.logpmf(k))

    rng = _sum_range(P, Q, 1 / P.scale)
    if rng is not None:
        return mp.fsum(term(k) for k in range(rng[0], rng[1] + 1))
    return _nsum_equal_scales(P, Q, term)


def _nsum_equal_scales(P, Q, term):
    """sum_k term(k) with long tails: explicit middle, mp.nsum (extrapolation) on the tails.
    Only for equal scales, where every tail term is exactly geometric in k (else None)."""
    if P.scale != Q.scale:
        return None
    lo, hi = min(P.loc, Q.loc), max(P.loc, Q.loc)
    return (
        mp.nsum(lambda j: term(lo - j), [1, mp.inf])
        + mp.fsum(term(k) for k in range(lo, hi + 1))
        + mp.nsum(lambda j: term(hi + j), [1, mp.inf])
    )


@_atleast
def tv_sum(P, Q):
    """TV = sum |p - q| / 2 by direct summation (as :func:`kl_sum`), or by brute-force
    enumeration of the product support for products of categoricals."""
    if isinstance(P, Categorical):
        return mp.fsum(abs(p - q) for p, q in zip(P.probs, Q.probs, strict=True)) / 2
    if isinstance(P, Product):
        if not all(isinstance(c, Categorical) for c in P.components + Q.components):
            return None
        total = mp.zero
        for idx in itertools.product(*[range(len(c.probs)) for c in P.components]):
            pp = mp.fprod(c.probs[i] for c, i in zip(P.components, idx, strict=True))
            qq = mp.fprod(c.probs[i] for c, i in zip(Q.components, idx, strict=True))
            total += abs(pp - qq)
        return total / 2

    def term(k):
        return abs(mp.exp(P.logpmf(k)) - mp.exp(Q.logpmf(k)))

    rng = _sum_range(P, Q, min(1 / P.scale, 1 / Q.scale))
    if rng is not None:
        return mp.fsum(term(k) for k in range(rng[0], rng[1] + 1)) / 2
    total = _nsum_equal_scales(P, Q, term)
    return None if total is None else total / 2


# --------------------------------------------------------------------------- KL and friends


def _kl_laplace(P, Q):
    # E_P|X - m2| = D + b1 e^{-D/b1}  =>  KL = log(b2/b1) + (D + b1 e^{-D/b1})/b2 - 1.
    b1, b2 = P.scale, Q.scale
    D = abs(P.loc - Q.loc)
    return mp.log(b2 / b1) + (D + b1 * mp.exp(-D / b1)) / b2 - 1


def _kl_gaussian(P, Q):
    s1, s2 = P.scale, Q.scale
    return mp.log(s2 / s1) + (s1**2 + (P.loc - Q.loc) ** 2) / (2 * s2**2) - mp.one / 2


def _kl_lap_gauss(L, G):
    # KL(Laplace||Gaussian): E_L (X - mu)^2 = 2 b^2 + delta^2.
    b, sg = L.scale, G.scale
    delta = L.loc - G.loc
    return (
        -mp.log(2 * b)
        - 1
        + mp.log(2 * mp.pi) / 2
        + mp.log(sg)
        + (2 * b**2 + delta**2) / (2 * sg**2)
    )


def _kl_gauss_lap(G, L):
    # KL(Gaussian||Laplace): E_G |X - m| = sg sqrt(2/pi) e^{-delta^2/(2 sg^2)} + delta erf(...).
    b, sg = L.scale, G.scale
    delta = G.loc - L.loc
    e_abs = sg * mp.sqrt(2 / mp.pi) * mp.exp(-(delta**2) / (2 * sg**2)) + delta * mp.erf(
        delta / (sg * mp.sqrt(2))
    )
    return -mp.log(2 * mp.pi * mp.e * sg**2) / 2 + mp.log(2 * b) + e_abs / b


def _kl_dlaplace(P, Q):
    # E_P|K - m1| = 1/sinh(1/b1);  E_P|K - m2| = D + e^{-D/b1}/sinh(1/b1)  (D = |m1 - m2|).
    b1, b2 = P.scale, Q.scale
    D = abs(P.loc - Q.loc)
    sh = mp.sinh(1 / b1)
    return P.log_norm() - Q.log_norm() - 1 / (b1 * sh) + (D + mp.exp(-D / b1) / sh) / b2


@_atleast
def kl(P, Q):
    """KL(P || Q) in closed form (``+inf`` if P is not absolutely continuous w.r.t. Q)."""
    if P == Q:
        return mp.zero
    if isinstance(P, Product):
        return mp.fsum(kl(p, q) for p, q in zip(P.components, Q.components, strict=True))
    if isinstance(P, Laplace) and isinstance(Q, Laplace):
        return _kl_laplace(P, Q)
    if isinstance(P, Gaussian) and isinstance(Q, Gaussian):
        return _kl_gaussian(P, Q)
    if isinstance(P, Laplace) and isinstance(Q, Gaussian):
        return _kl_lap_gauss(P, Q)
    if isinstance(P, Gaussian) and isinstance(Q, Laplace):
        return _kl_gauss_lap(P, Q)
    if isinstance(P, DiscreteLaplace) and isinstance(Q, DiscreteLaplace):
        return _kl_dlaplace(P, Q)
    if isinstance(P, Categorical) and isinstance(Q, Categorical):
        return kl_sum(P, Q)
    raise TypeError(f"no kl for {type(P).__name__}, {type(Q).__name__}")


@_atleast
def kl_from_log_bc(P, Q):
    """KL(P || Q) = d/da log C_a at a = 1 (needs log C_a analytic around 1; cross-check)."""
    return mp.diff(lambda t: log_bc(P, Q, t), mp.one, direction=-1)


@_atleast
def renyi(P, Q, order):
    """Rényi divergence ``log C_order / (order - 1)``; order 1 is KL; may be ``+inf``."""
    order = _mpf(order)
    if order == 1:
        return kl(P, Q)
    lc = log_bc(P, Q, order)
    if lc == mp.inf or lc == -mp.inf:
        return mp.inf
    return lc / (order - 1)


@_atleast
def bhattacharyya(P, Q):
    """``-log C_{1/2}``."""
    return -log_bc(P, Q, mp.mpf(1) / 2)


@_atleast
def hellinger(P, Q):
    """``sqrt(1 - C_{1/2})`` (so H^2 = 1 - BC, H in [0, 1])."""
    return mp.sqrt(-mp.expm1(log_bc(P, Q, mp.mpf(1) / 2)))


# --------------------------------------------------------------------------- total variation


def _quadratic_roots(c0, c1, c2):
    if c2 == 0:
        return [] if c1 == 0 else [-c0 / c1]
    disc = c1**2 - 4 * c2 * c0
    if disc < 0:
        return []
    sgn = 1 if c1 >= 0 else -1
    qq = -(c1 + sgn * mp.sqrt(disc)) / 2
    roots = [qq / c2]
    if qq != 0:
        roots.append(c0 / qq)
    return roots


def _crossings(P, Q):
    """Points where log p = log q (continuous pairs): exact roots of the piecewise
    polynomial log p - log q (degree <= 2 on each piece between kinks)."""
    kinks = sorted(set(P.kinks) | set(Q.kinks))
    edges = [-mp.inf, *kinks, mp.inf]
    x0 = P.loc
    roots = []
    for lo, hi in itertools.pairwise(edges):
        if lo == -mp.inf and hi == mp.inf:
            xm = x0
        elif lo == -mp.inf:
            xm = hi - 1
        elif hi == mp.inf:
            xm = lo + 1
        else:
            xm = (lo + hi) / 2
        cp, cq = P.poly(xm, x0), Q.poly(xm, x0)
        c = [cp[i] - cq[i] for i in range(3)]
        for t in _quadratic_roots(*c):
            x = x0 + t
            if lo < x < hi:
                roots.append(x)
    return sorted(set(roots))


def _tv_continuous(P, Q):
    pts = sorted(set(P.kinks) | set(Q.kinks) | set(_crossings(P, Q)))
    edges = [-mp.inf, *pts, mp.inf]
    # log p - log q has constant sign on each interval, so TV = sum of positive parts.
    return mp.fsum(max(P.mass(lo, hi) - Q.mass(lo, hi), 0) for lo, hi in itertools.pairwise(edges))


def _tv_dlaplace(P, Q):
    kinks = sorted({P.loc, Q.loc})
    edges = [-mp.inf, *[mp.mpf(k) for k in kinks], mp.inf]
    cuts = {mp.mpf(k) for k in kinks}
    for lo, hi in itertools.pairwise(edges):
        xm = hi - 1 if lo == -mp.inf else (lo + 1 if hi == mp.inf else (lo + hi) / 2)
        # log p - log q = c0 + c1 k on this piece
        sp = 1 if xm < P.loc else -1
        sq = 1 if xm < Q.loc else -1
        c1 = sp / P.scale - sq / Q.scale
        c0 = P.log_norm() - Q.log_norm() - sp * P.loc / P.scale + sq * Q.loc / Q.scale
        if c1 != 0:
            r = -c0 / c1
            if lo < r < hi:
                cuts.update({mp.floor(r), mp.ceil(r)})
    cuts = sorted(cuts)
    intervals = [(-mp.inf, cuts[0] - 1)]
    for c, d in itertools.pairwise(cuts):
        intervals.append((c, c))
        if d - c >= 2:
            intervals.append((c + 1, d - 1))
    intervals += [(cuts[-1], cuts[-1]), (cuts[-1] + 1, mp.inf)]
    return mp.fsum(max(P.mass(lo, hi) - Q.mass(lo, hi), 0) for lo, hi in intervals)


def _tv_iid_types(P: Product, Q: Product):
    """TV of iid categorical products grouped by type (multinomial counts)."""
    p, q = P.components[0], Q.components[0]
    n, k = len(P.components), len(p.probs)
    total = mp.zero
    for counts in _compositions(n, k):
        coef = mp.factorial(n) / mp.fprod(mp.factorial(c) for c in counts)
        pp = mp.fprod(x**c for x, c in zip(p.probs, counts, strict=True))
        qq = mp.fprod(x**c for x, c in zip(q.probs, counts, strict=True))
        total += coef * abs(pp - qq)
    return total / 2


def _compositions(n, k):
    if k == 1:
        yield (n,)
        return
    for i in range(n + 1):
        for rest in _compositions(n - i, k - 1):
            yield (i, *rest)


@_atleast
def tv(P, Q):
    """Total variation ``sup_A |P(A) - Q(A)|``; ``None`` for heterogeneous products."""
    if P == Q:
        return mp.zero
    if isinstance(P, _CONTINUOUS) and isinstance(Q, _CONTINUOUS):
        return _tv_continuous(P, Q)
    if isinstance(P, DiscreteLaplace):
        return _tv_dlaplace(P, Q)
    if isinstance(P, Categorical):
        return tv_sum(P, Q)
    if isinstance(P, Product):
        comps = P.components + Q.components
        iid = all(isinstance(c, Categorical) for c in comps) and (
            len(set(P.components)) == 1 and len(set(Q.components)) == 1
        )
        return _tv_iid_types(P, Q) if iid else None
    raise TypeError(f"no tv for {type(P).__name__}, {type(Q).__name__}")


# --------------------------------------------------------------------------- Chernoff


class ChernoffInfo(NamedTuple):
    information: object  # C = max_a -log C_a
    alpha: object  # argmax (nan when not unique: P == Q or disjoint supports)
    derivative: object  # f'(a*) with f(a) = -log C_a (certificate; sign at an end)


def _fprime(P, Q, a):
    # One-sided at the ends: log C_a may be +inf just outside [0, 1] (e.g. Laplace vs Gaussian).
    direction = 1 if a == 0 else (-1 if a == 1 else 0)
    return -mp.diff(lambda t: log_bc(P, Q, t), a, direction=direction)


def _fsecond(P, Q, a):
    return -mp.diff(lambda t: log_bc(P, Q, t), a, 2)


def _identical(P, Q):
    return P == Q


@_atleast
def chernoff(P, Q, *, guess=None):
    """Chernoff information by safeguarded Newton on f'(a) = -d/da log C_a over [0, 1].

    f is concave, so a* = 0 if f'(0) <= 0, a* = 1 if f'(1) >= 0, else the unique root of f',
    bracketed by bisection (or around ``guess``, a nearby a*) and polished by bracketed Newton
    to about ``dps - 8`` digits.
    """
    if _identical(P, Q):
        return ChernoffInfo(mp.zero, mp.nan, mp.zero)
    half = mp.mpf(1) / 2
    if log_bc(P, Q, half) == -mp.inf:
        return ChernoffInfo(mp.inf, mp.nan, mp.nan)
    d0 = _fprime(P, Q, mp.zero)
    if d0 <= 0:
        return ChernoffInfo(-log_bc(P, Q, mp.zero), mp.zero, d0)
    d1 = _fprime(P, Q, mp.one)
    if d1 >= 0:
        return ChernoffInfo(-log_bc(P, Q, mp.one), mp.one, d1)
    lo, hi = mp.zero, mp.one
    if guess is not None and 0 < guess < 1:
        width = mp.mpf("1e-12")
        g_lo, g_hi = max(guess - width, mp.zero), min(guess + width, mp.one)
        if _fprime(P, Q, g_lo) > 0 and _fprime(P, Q, g_hi) < 0:
            lo, hi = g_lo, g_hi
    else:
        for _ in range(12):
            mid = (lo + hi) / 2
            d = _fprime(P, Q, mid)
            if d == 0:
                lo = hi = mid
                break
            if d > 0:
                lo = mid
            else:
                hi = mid
    a = (lo + hi) / 2
    if lo == hi:
        return ChernoffInfo(-log_bc(P, Q, a), a, mp.zero)
    tol = mp.mpf(10) ** (-(mp.dps - 8))
    for _ in range(300):
        d = _fprime(P, Q, a)
        if d > 0:
            lo = a
        elif d < 0:
            hi = a
        else:
            break
        f2 = _fsecond(P, Q, a)
        step = -d / f2
        # f' is accurate to ~10^-(dps+5) absolutely, so a* only to ~that / |f''|.
        if abs(step) <= max(tol * abs(a), mp.mpf(10) ** (-(mp.dps + 5)) / abs(f2)):
            a += step
            break
        new = a + step
        if not (lo <= new <= hi):
            new = (lo + hi) / 2
        a = new
    else:
        raise RuntimeError("chernoff: Newton did not converge")
    return ChernoffInfo(-log_bc(P, Q, a), a, _fprime(P, Q, a))


def _with_field(P, Q, key, value):
    side, field = key.split(".", 1)
    if side == "P":
        return replace_field(P, field, value), Q
    return P, replace_field(Q, field, value)


def _field_value(P, Q, key):
    side, field = key.split(".", 1)
    return get_field(P if side == "P" else Q, field)


def grad_keys(P, Q):
    """Gradient keys: ``"P.loc"``, ``"Q.scale"``, ``"P.probs[1]"``, ``"P.0.loc"`` ..."""
    return [f"P.{f}" for f in P.float_fields] + [f"Q.{f}" for f in Q.float_fields]


@_atleast
def chernoff_grad(P, Q, alpha):
    """Envelope gradient dC/dθ = ∂θ [-log C_a](a = alpha fixed), for every float field.

    Categorical ``probs`` entries are treated as free variables in sum_i p_i^a q_i^(1-a) (no
    renormalisation); zero entries (non-differentiable) give nan.
    """
    out = {}
    for key in grad_keys(P, Q):
        th = _field_value(P, Q, key)
        if ".probs[" in key or key.startswith(("P.probs", "Q.probs")):
            if th == 0:
                out[key] = mp.nan
                continue
        out[key] = -mp.diff(lambda t, key=key: log_bc(*_with_field(P, Q, key, t), alpha), th)
    return out


@_atleast
def chernoff_alpha_grad(P, Q, alpha):
    """d a*/dθ = -f_{aθ} / f_{aa} at an interior a* (implicit function theorem); 0 at an end."""
    out = {}
    interior = 0 < alpha < 1
    faa = _fsecond(P, Q, alpha) if interior else None
    for key in grad_keys(P, Q):
        th = _field_value(P, Q, key)
        if ("probs[" in key and th == 0) or mp.isnan(alpha):
            out[key] = mp.nan
        elif not interior:
            out[key] = mp.zero
        else:

            def F(a, t, key=key):
                return -log_bc(*_with_field(P, Q, key, t), a)

            fat = mp.diff(F, (alpha, th), (1, 1))
            out[key] = -fat / faa
    return out


# --------------------------------------------------------------------------- output


def to_str(x, digits: int = 25) -> str | None:
    """Decimal string with ``digits`` significant digits; 'inf', '-inf', 'nan'; None stays."""
    if x is None:
        return None
    x = _mpf(x)
    if mp.isnan(x):
        return "nan"
    if x == mp.inf:
        return "inf"
    if x == -mp.inf:
        return "-inf"
    if x == 0:
        return "0.0"
    s = mp.nstr(x, digits, min_fixed=-4, max_fixed=digits, strip_zeros=False)
    return s

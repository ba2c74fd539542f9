"""Independent high-precision references (mpmath) shared by the core tests.

Everything here integrates or sums the definitions directly at 60 digits, with breakpoints
at the kinks; nothing reuses jaxdp's closed forms.
"""

from __future__ import annotations

import itertools

import mpmath as mp

DPS = 60


def _lap_logpdf(x, m, b):
    return -abs(x - m) / b - mp.log(2 * b)


def _gau_logpdf(x, m, s):
    return -((x - m) ** 2) / (2 * s * s) - mp.log(s) - mp.log(2 * mp.pi) / 2


def _split_points(m1, s1, m2, s2):
    pts = sorted({m1, m2})
    extra = []
    for m, s in ((m1, s1), (m2, s2)):
        for k in (1, 5, 20, 80):
            extra += [m - k * s, m + k * s]
    return sorted(set(pts + extra))


def log_bc_continuous(logpdf_p, logpdf_q, pts, a):
    with mp.workdps(DPS):
        a = mp.mpf(a)

        def f(x):
            return mp.exp(a * logpdf_p(x) + (1 - a) * logpdf_q(x))

        return mp.log(mp.quad(f, [-mp.inf, *pts, mp.inf]))


def lap_log_bc(m1, b1, m2, b2, a):
    m1, b1, m2, b2 = map(mp.mpf, (m1, b1, m2, b2))
    return log_bc_continuous(
        lambda x: _lap_logpdf(x, m1, b1),
        lambda x: _lap_logpdf(x, m2, b2),
        _split_points(m1, b1, m2, b2),
        a,
    )


def gau_log_bc(m1, s1, m2, s2, a):
    m1, s1, m2, s2 = map(mp.mpf, (m1, s1, m2, s2))
    return log_bc_continuous(
        lambda x: _gau_logpdf(x, m1, s1),
        lambda x: _gau_logpdf(x, m2, s2),
        _split_points(m1, s1, m2, s2),
        a,
    )


def lap_gau_log_bc(m1, b1, m2, s2, a):
    m1, b1, m2, s2 = map(mp.mpf, (m1, b1, m2, s2))
    return log_bc_continuous(
        lambda x: _lap_logpdf(x, m1, b1),
        lambda x: _gau_logpdf(x, m2, s2),
        _split_points(m1, b1, m2, s2),
        a,
    )


def dl_log_bc(m1, b1, m2, b2, a):
    """Discrete Laplace: explicit terms over a window plus exact geometric tails."""
    with mp.workdps(DPS):
        b1, b2, a = mp.mpf(b1), mp.mpf(b2), mp.mpf(a)
        c1, c2 = mp.tanh(1 / (2 * b1)), mp.tanh(1 / (2 * b2))
        lo, hi = min(m1, m2), max(m1, m2)
        l1, l2 = a / b1, (1 - a) / b2

        def term(k):
            return c1**a * c2 ** (1 - a) * mp.exp(-l1 * abs(k - m1) - l2 * abs(k - m2))

        total = mp.fsum(term(k) for k in range(int(lo), int(hi) + 1))
        r = mp.exp(-(l1 + l2))  # ratio of consecutive terms in both tails
        total += term(int(lo) - 1) / (1 - r) + term(int(hi) + 1) / (1 - r)
        return mp.log(total)


def dl_log_bc_geometric(m1, b1, m2, b2, a):
    """Discrete Laplace, integer locations any distance apart: the sum split at the two
    locations into three geometric series, each summed in closed form (at 60 digits)."""
    with mp.workdps(DPS):
        b1, b2, a = mp.mpf(b1), mp.mpf(b2), mp.mpf(a)
        c = mp.tanh(1 / (2 * b1)) ** a * mp.tanh(1 / (2 * b2)) ** (1 - a)
        l1, l2 = a / b1, (1 - a) / b2
        (l_lo, _), (l_hi, _) = sorted([(l1, m1), (l2, m2)], key=lambda t: t[1])
        d = abs(int(m2) - int(m1))
        r = mp.exp(-(l1 + l2))
        outer = (mp.exp(-l_hi * d) + mp.exp(-l_lo * d)) / (1 - r)  # k <= lo and k >= hi
        if d == 0:
            outer -= 1  # (k = lo = hi is in both)
        # lo < k < hi: e^{-l_hi d} sum_{j=1}^{d-1} e^{(l_hi - l_lo) j}
        g = l_hi - l_lo
        if d < 2:
            inner = mp.mpf(0)
        elif g == 0:
            inner = (d - 1) * mp.exp(-l_hi * d)
        else:
            inner = mp.exp(-l_hi * d + g) * mp.expm1(g * (d - 1)) / mp.expm1(g)
        return mp.log(c * (outer + inner))


def cat_log_bc(p, q, a):
    with mp.workdps(DPS):
        a = mp.mpf(a)
        s = mp.mpf(0)
        # the distributions are the normalised vectors (float inputs sum to 1 only to ~1e-16)
        sp_, sq_ = mp.fsum(map(mp.mpf, p)), mp.fsum(map(mp.mpf, q))
        for pi, qi in zip(p, q, strict=True):
            pi, qi = mp.mpf(pi) / sp_, mp.mpf(qi) / sq_
            if pi == 0 or qi == 0:
                continue  # one-sided limits at a in {0, 1}
            s += pi**a * qi ** (1 - a)
        return mp.log(s) if s > 0 else -mp.inf


def golden_section(f, a, b, steps):
    """``steps`` golden-section steps towards the max of a unimodal ``f`` on ``[a, b]``
    (at the working precision): the final bracket ``(a, b)`` and ``f`` at its two inner
    points ``(fc, fd)``."""
    g = (mp.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc > fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return a, b, fc, fd


def maximise(f, lo=0, hi=1):
    """Max of a concave function on [lo, hi] to ~30 digits: golden search + findroot."""
    with mp.workdps(DPS):
        lo, hi = mp.mpf(lo), mp.mpf(hi)
        a, b, _, _ = golden_section(f, lo, hi, 120)
        x = (a + b) / 2
        if lo < x - mp.mpf(10) ** -8 and x + mp.mpf(10) ** -8 < hi:
            try:
                x = mp.findroot(lambda t: mp.diff(f, t), x, tol=mp.mpf(10) ** -30)
            except (ValueError, ZeroDivisionError):
                pass
        best = max([(f(x), x), (f(lo), lo), (f(hi), hi)], key=lambda t: t[0])
        return best[0], best[1]


def chernoff(log_bc, *args):
    """(information, alpha*) for a log_bc(*args, a) reference."""
    val, x = maximise(lambda a: -log_bc(*args, a))
    return val, x


def lap_log_bc_cf(m1, b1, m2, b2, a, dps=None):
    """Textbook piecewise-exponential closed form, evaluated at 60 digits (``dps``)."""
    with mp.workdps(dps or DPS):
        m1, b1, m2, b2, a = map(mp.mpf, (m1, b1, m2, b2, a))
        d = abs(m2 - m1)
        l1, l2 = a / b1, (1 - a) / b2
        tails = (mp.exp(-l2 * d) + mp.exp(-l1 * d)) / (l1 + l2)
        mid = d * mp.exp(-l1 * d) if l1 == l2 else (mp.exp(-l1 * d) - mp.exp(-l2 * d)) / (l2 - l1)
        return -a * mp.log(2 * b1) - (1 - a) * mp.log(2 * b2) + mp.log(tails + mid)


def lap_log_bc_cf_grad(m1, b1, m2, b2, a):
    """The gradient of :func:`lap_log_bc_cf` in ``(m1, b1, m2, b2)``: central differences at
    500 digits (a value ~1e304 keeps ~190 digits below 1), each parameter stepped by 1e-60
    of its size (of the larger scale at 0)."""
    return _grad_500(lambda *x: lap_log_bc_cf(*x, a, dps=500), m1, b1, m2, b2)


def _grad_500(f, m1, b1, m2, b2):
    with mp.workdps(500):
        x = [mp.mpf(v) for v in (m1, b1, m2, b2)]
        out = []
        for k in range(4):
            h = (abs(x[k]) or max(x[1], x[3])) * mp.mpf(10) ** -60
            up, down = list(x), list(x)
            up[k], down[k] = x[k] + h, x[k] - h
            out.append((f(*up) - f(*down)) / (2 * h))
        return out


def gau_log_bc_cf(m1, s1, m2, s2, a):
    """Textbook Gaussian closed form, evaluated at 60 digits."""
    with mp.workdps(DPS):
        m1, s1, m2, s2, a = map(mp.mpf, (m1, s1, m2, s2, a))
        va = a * s2**2 + (1 - a) * s1**2
        return ((1 - a) * mp.log(s1**2) + a * mp.log(s2**2) - mp.log(va)) / 2 - a * (1 - a) * (
            m1 - m2
        ) ** 2 / (2 * va)


def lap_kl(m1, b1, m2, b2, dps=None):
    with mp.workdps(dps or DPS):
        m1, b1, m2, b2 = map(mp.mpf, (m1, b1, m2, b2))
        d = abs(m2 - m1)
        return mp.log(b2 / b1) + d / b2 + b1 / b2 * mp.exp(-d / b1) - 1


def lap_kl_grad(m1, b1, m2, b2):
    """The gradient of :func:`lap_kl` in ``(m1, b1, m2, b2)``, as :func:`lap_log_bc_cf_grad`."""
    return _grad_500(lambda *x: lap_kl(*x, dps=500), m1, b1, m2, b2)


def gau_kl(m1, s1, m2, s2):
    with mp.workdps(DPS):
        m1, s1, m2, s2 = map(mp.mpf, (m1, s1, m2, s2))
        return mp.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - mp.mpf(1) / 2


def tv_continuous(logpdf_p, logpdf_q, pts):
    """TV = 1/2 int |p - q| by quadrature split at the given points and the crossings
    (30 digits: the tests compare at 1e-10)."""
    with mp.workdps(30):

        def h(x):
            return logpdf_p(x) - logpdf_q(x)

        grid = sorted(set(pts))
        roots = []
        xs = (
            [grid[0] - 200 * (grid[-1] - grid[0] + 1)]
            + grid
            + [grid[-1] + 200 * (grid[-1] - grid[0] + 1)]
        )
        fine = []
        for lo, hi in itertools.pairwise(xs):
            fine += [lo + (hi - lo) * k / 64 for k in range(64)]
        fine.append(xs[-1])
        for lo, hi in itertools.pairwise(fine):
            if h(lo) == 0:
                roots.append(lo)
            elif h(lo) * h(hi) < 0:
                roots.append(mp.findroot(h, (lo, hi), solver="anderson"))
        cuts = sorted(set(grid + roots))

        def f(x):
            return abs(mp.exp(logpdf_p(x)) - mp.exp(logpdf_q(x)))

        return mp.quad(f, [-mp.inf, *cuts, mp.inf]) / 2


def lap_tv(m1, b1, m2, b2):
    m1, b1, m2, b2 = map(mp.mpf, (m1, b1, m2, b2))
    return tv_continuous(
        lambda x: _lap_logpdf(x, m1, b1),
        lambda x: _lap_logpdf(x, m2, b2),
        _split_points(m1, b1, m2, b2),
    )


def gau_tv(m1, s1, m2, s2):
    m1, s1, m2, s2 = map(mp.mpf, (m1, s1, m2, s2))
    return tv_continuous(
        lambda x: _gau_logpdf(x, m1, s1),
        lambda x: _gau_logpdf(x, m2, s2),
        _split_points(m1, s1, m2, s2),
    )


def dl_pmf_window(m, b, lo, hi):
    with mp.workdps(DPS):
        b = mp.mpf(b)
        c = mp.tanh(1 / (2 * b))
        return [c * mp.exp(-abs(k - m) / b) for k in range(lo, hi + 1)]


def dl_kl_tv(m1, b1, m2, b2, width=None):
    """KL and TV of discrete Laplace pairs by summation over a window wide enough that the
    tails (< e^-45 of the mass) are below the tests' tolerance."""
    width = int(45 * max(b1, b2)) + 10 if width is None else width
    with mp.workdps(30):
        lo, hi = min(m1, m2) - width, max(m1, m2) + width
        p = dl_pmf_window(m1, b1, lo, hi)
        q = dl_pmf_window(m2, b2, lo, hi)
        kl = mp.fsum(pi * mp.log(pi / qi) for pi, qi in zip(p, q, strict=True))
        tv = mp.fsum(abs(pi - qi) for pi, qi in zip(p, q, strict=True)) / 2
        return kl, tv


def dl_n_fold_tv(eps, n, delta, dps=DPS):
    """TV(DLap(0, b)^n, DLap(delta, b)^n), b = delta/eps (the geometric mechanism's n
    releases), from the pmfs: the privacy loss log p/q of each outcome at DPS digits, the
    masses of equal loss summed (the two infinite tails by ``mp.nsum``), the law of the
    total loss by n-fold convolution, then E_P[(1 - e^{-L})_+]. Losses are multiples of
    1/b, kept as integers (each checked to be one)."""
    with mp.workdps(dps):
        eps = mp.mpf(eps)
        b = delta / eps
        c = mp.tanh(1 / (2 * b))  # 1 / sum_k e^{-|k|/b}

        def pmf(k, m):
            return c * mp.exp(-abs(k - m) / b)

        def key(k):
            loss = mp.log(pmf(k, 0) / pmf(k, delta)) * b
            assert abs(loss - mp.nint(loss)) < mp.mpf(10) ** (10 - dps)
            return int(mp.nint(loss))

        law = {}
        for k in range(1, delta):
            law[key(k)] = law.get(key(k), 0) + pmf(k, 0)
        assert key(-1) == key(0) and key(delta) == key(delta + 1)
        law[key(0)] = law.get(key(0), 0) + mp.nsum(lambda i: pmf(-i, 0), [0, mp.inf])
        law[key(delta)] = law.get(key(delta), 0) + mp.nsum(lambda i: pmf(delta + i, 0), [0, mp.inf])
        assert abs(mp.fsum(law.values()) - 1) < mp.mpf(10) ** (10 - dps)
        total = {0: mp.mpf(1)}
        for _ in range(n):
            new = {}
            for k1, p1 in total.items():
                for k2, p2 in law.items():
                    new[k1 + k2] = new.get(k1 + k2, 0) + p1 * p2
            total = new
        return mp.fsum(p * -mp.expm1(-k / b) for k, p in total.items() if k > 0)

"""Stable elementary functions used by the kernels.

Each function here keeps *relative* accuracy where its value is tiny, which is what lets
jaxdp return Chernoff information ~1e-20 for near-identical pairs with small relative
error. The pattern is: a short Taylor series (Horner form) where cancellation would bite,
the textbook expression elsewhere, and the "double where" trick so that the branch not taken
never sees an argument that would produce ``inf``/``nan`` (which would poison gradients).

All functions are elementwise, dtype-preserving and differentiable.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxdp import _fastmath as fm
from jaxdp._quotient import inverse_power_of_two as inverse_power_of_two  # (re-exported)
from jaxdp._quotient import quotient

# Taylor coefficients of (e^x - 1 - x) / x^2 = sum_{n>=0} x^n / (n+2)!  (18 terms: |x| <= 1
# truncation below 1e-17 relative).
_PHI_COEFFS = tuple(1.0 / math.factorial(n + 2) for n in range(18))
# (sinh x - x) / x^3 = sum_{n>=0} x^(2n) / (2n+3)!  (|x| <= 1).
_SINH_COEFFS = tuple(1.0 / math.factorial(2 * n + 3) for n in range(10))
# x coth x - 1 = sum_{n>=1} 2^(2n) B_(2n) x^(2n) / (2n)!   (|x| <= 1: ratio ~ 1/pi^2 per term).
_XCOTH_COEFFS = (
    0.3333333333333333,
    -0.022222222222222223,
    0.0021164021164021165,
    -0.00021164021164021165,
    2.1377799155576935e-05,
    -2.1644042808063972e-06,
    2.1925947851873778e-07,
    -2.2214608789979678e-08,
    2.2507846516808994e-09,
    -2.2805151204592183e-10,
    2.3106432599002624e-11,
    -2.3411706819824882e-12,
    2.3721017400233653e-13,
    -2.4034415333307705e-14,
    2.4351954029183367e-15,
    -2.4673688045172075e-16,
)
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


def horner(coeffs, x, xmax=1.0):
    """``sum_i coeffs[i] x^i`` by Horner's rule (Python-float coefficients), for
    ``|x| <= xmax``.

    Terms that cannot matter in ``x``'s dtype (``|c_i| xmax^i <= eps |c_0| / 16``, at the
    tail) are dropped at trace time, so float32 evaluates about half the terms of float64.
    """
    tiny = float(jnp.finfo(jnp.result_type(x)).eps) * abs(coeffs[0]) / 16
    keep = 1 + max(i for i, c in enumerate(coeffs) if i == 0 or abs(c) * xmax**i > tiny)
    coeffs = coeffs[:keep]
    acc = jnp.full_like(x, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = acc * x + c
    return acc


def sqrt_weight(w):
    r""":math:`\sqrt{w}` of a weight :math:`w \ge 0`, with derivative 0 (not ``inf``) at
    :math:`w = 0`. For sums of squares :math:`(\sqrt{w}\,x)^2 = w x^2`, written so to avoid
    overflowing :math:`x^2`: their derivative is finite, and ``inf * 0`` from the root at a
    zero weight would make second derivatives (Hessians, the derivative of
    :math:`d\alpha^*/d\theta`) ``nan``."""
    pos = (w > 0) | jnp.isnan(w)  # (NaN propagates)
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, w, 1.0)), 0.0)


def hypot(x, y):
    r""":math:`\sqrt{x^2 + y^2}` whose value and derivatives neither under- nor overflow:
    ``jnp.hypot`` divides the smaller leg by the larger, whose derivative squares the larger
    (``0 * inf = nan`` for legs below ~1e-154)."""
    x, y = jnp.abs(x), jnp.abs(y)
    big, small = jnp.maximum(x, y), jnp.minimum(x, y)
    pos = big > 0
    ratio = quotient(small, jnp.where(pos, big, 1.0))
    return jnp.where(pos, big * jnp.sqrt(1.0 + ratio * ratio), 0.0)


def phi(x):
    r"""Stable :math:`\varphi(x) = e^x - 1 - x \ge 0`."""
    x = jnp.asarray(x)
    small = jnp.abs(x) <= 1.0
    xs = jnp.where(small, x, 0.0)
    series = xs * xs * horner(_PHI_COEFFS, xs)
    xl = jnp.where(small, 1.0, x)
    return jnp.where(small, series, jnp.expm1(xl) - xl)


_LOG1PMX_COEFFS = tuple(1.0 / (2 * k + 3) for k in range(12))


@jax.custom_jvp
def one_minus_exp(x):
    r""":math:`1 - e^{-x}` (``-expm1(-x)``), with its derivative :math:`e^{-x}` formed
    directly: JAX differentiates ``expm1`` as ``expm1(x) + 1``, which cancels to 0 once the
    value is within an ulp of 1 (:math:`x \gtrsim 37` in float64), and gradients of
    advantages and bounds near 1 came out 0 or negative."""
    return -jnp.expm1(-x)


@one_minus_exp.defjvp
def _one_minus_exp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return -jnp.expm1(-x), jnp.exp(-x) * t


@jax.custom_jvp
def tanh(x):
    r""":math:`\tanh x`, with its derivative :math:`\mathrm{sech}^2 x = 4e^{-2|x|}/(1 +
    e^{-2|x|})^2` formed directly (JAX's :math:`1 - \tanh^2 x` cancels to 0 from
    :math:`|x| \approx 19` in float64)."""
    return jnp.tanh(x)


@tanh.defjvp
def _tanh_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    e = jnp.exp(-2.0 * jnp.abs(x))
    return jnp.tanh(x), 4.0 * e / jnp.square(1.0 + e) * t


def log1pmx(x):
    r"""Stable :math:`\log(1 + x) - x \le 0` for :math:`x > -1`.

    Uses :math:`\log(1+x) = 2\,\mathrm{atanh}(z)`, :math:`z = x/(2+x)`, so that
    :math:`\log(1+x) - x = -zx + 2 z^3 (1/3 + z^2/5 + \dots)`, whose terms do not cancel.
    """
    x = jnp.asarray(x)
    small = (x > -0.3) & (x < 0.5)
    xs = jnp.where(small, x, 0.0)
    z = xs * (1.0 / (2.0 + xs))  # not xs/(2 + xs): see jaxdp._fastmath (a kernel less)
    z2 = z * z
    tail = horner(_LOG1PMX_COEFFS, z2, 0.04)
    series = -z * xs + 2.0 * z * z2 * tail
    xl = jnp.where(small, 1.0, x)
    return jnp.where(small, series, fm.log1p(xl) - xl)


# psi(x) = sum_n (-x)^n/(n+1)! and 1 - psi(x) = x sum_n (-x)^n/(n+2)!, for |x| <= 1/8
_PSI_SERIES = tuple(1.0 / math.factorial(n + 1) for n in range(12))
_OMPSI_SERIES = tuple(1.0 / math.factorial(n + 2) for n in range(12))


def psi(x):
    r"""Stable :math:`\psi(x) = (1 - e^{-x})/x`, with :math:`\psi(0) = 1`.

    A series near 0 (not a special case at 0), so that derivatives at 0 are right too.
    """
    x = jnp.asarray(x)
    small = jnp.abs(x) <= 0.125
    xs = jnp.where(small, x, 0.0)
    xl = jnp.where(small, 1.0, x)
    return jnp.where(small, horner(_PSI_SERIES, -xs, 0.125), quotient(-jnp.expm1(-xl), xl))


def one_minus_psi(x):
    r"""Stable :math:`1 - \psi(x) = \varphi(-x)/x` (series near 0, value 0 at 0)."""
    x = jnp.asarray(x)
    small = jnp.abs(x) <= 0.125
    xs = jnp.where(small, x, 0.0)
    xl = jnp.where(small, 1.0, x)
    return jnp.where(small, xs * horner(_OMPSI_SERIES, -xs, 0.125), quotient(phi(-xl), xl))


def sinhc_m1(x):
    r"""Stable :math:`\sinh(x)/x - 1`."""
    x = jnp.asarray(x)
    small = jnp.abs(x) <= 1.0
    xs = jnp.where(small, x, 0.0)
    x2 = xs * xs
    series = x2 * horner(_SINH_COEFFS, x2)
    xl = jnp.where(small, 1.0, x)
    return jnp.where(small, series, jnp.sinh(xl) / xl - 1.0)


def x_minus_tanh(x):
    r"""Stable :math:`x - \tanh x` (odd; :math:`\approx x^3/3` near 0)."""
    x = jnp.asarray(x)
    small = jnp.abs(x) <= 1.0
    xs = jnp.where(small, x, 0.0)
    series = jnp.tanh(xs) * (xs * xs) * horner(_XCOTH_COEFFS, xs * xs)
    xl = jnp.where(small, 1.0, x)
    return jnp.where(small, series, xl - jnp.tanh(xl))


def log_ratio(num, den):
    r"""Stable :math:`\log(\text{num}/\text{den})` for positive arguments.

    Computed as :math:`\pm\log(1 + |\text{num} - \text{den}|/\min(\text{num}, \text{den}))`:
    one ``log1p`` of a non-negative argument, which is well conditioned everywhere, and the
    difference is exact when the two are close, which keeps relative accuracy of tiny
    log-ratios.
    """
    up = num >= den
    x = quotient(jnp.where(up, num - den, den - num), jnp.where(up, den, num))
    # float32 keeps XLA's own log1p here, one operation that XLA:CPU computes once: the
    # vectorized one is cheap arithmetic, which XLA recomputes in every reader of the
    # log-ratio (float32 constants are not packed, see jaxdp.chernoff._pack), and a Gaussian
    # pair's rho has many (one core, batch 1e5: float32 26.4 -> 30.2 ns/pair with it, 24.3
    # without; benchmarks/compare_trees.py). The argument is 0 or >= 2**-24: no subnormals.
    y = (jnp.log1p if x.dtype == jnp.float32 else fm.log1p)(x)
    return jnp.where(up, y, -y)


def log_ratio_apart(num, den):
    r""":math:`\log(\text{num}/\text{den})` for positive scales whose ratio may leave the float
    range, with the derivatives of :math:`\log \text{num} - \log \text{den}`.

    Where the two are within a factor ~4, :func:`log_ratio` of the scales moved by the power
    of two below ``den`` (exact, as :func:`~jaxdp.coefficient.standardize` does: the
    difference stays normal for tiny scales); else :math:`\log(\text{num}/\text{den})`
    (relative accuracy: the result exceeds ~0.69 in size), or :math:`\log \text{num} -
    \log \text{den}` where the ratio leaves the float range (beyond ~708). JAX's
    derivatives of :func:`log_ratio` or of ``num/den`` overflow there in forward mode
    (``num`` ~1e200 ``den``: :math:`\dot{\text{den}}\,\text{num}/\text{den}^2`), as does a
    reverse-mode cotangent of ``num`` times the power of two."""
    s = inverse_power_of_two(jax.lax.stop_gradient(den))
    ns = num * s
    close = (ns >= 0.5) & (ns <= 4.0)
    near = log_ratio(jnp.where(close, ns, 1.0), den * s)
    logs = jnp.log(num) - jnp.log(den)
    q = jax.lax.stop_gradient(quotient(num, den))
    q_ok = jnp.isfinite(q) & (q >= jnp.finfo(q.dtype).tiny)
    apart = jnp.where(q_ok, jnp.log(jnp.where(q_ok, q, 1.0)), jax.lax.stop_gradient(logs))
    return jnp.where(close, near, apart + (logs - jax.lax.stop_gradient(logs)))


def mixture_gap(a, rho):
    r"""Jensen gap of the Bernoulli log-MGF, :math:`\log(1 - a + a e^{\rho}) - a\rho`.

    Equivalently :math:`\log(a e^{(1-a)\rho} + (1-a) e^{-a\rho})`. It is :math:`\ge 0` for
    :math:`a \in [0, 1]` and :math:`\approx a(1-a)\rho^2/2` for small :math:`\rho`. For
    :math:`|\rho| \le 1` it is evaluated as :math:`\log(1 + a\varphi((1-a)\rho) + (1-a)
    \varphi(-a\rho))` (two non-negative terms); otherwise in the form whose subtraction is
    benign for the given side of :math:`a = 1/2`. Also valid for ``a`` outside ``[0, 1]``
    where :math:`1 - a + a e^{\rho} > 0` (Rényi orders above 1); ``nan`` elsewhere. There
    the series is used only while both :math:`\varphi` arguments stay in ``[-1, 1]`` (as
    they always do for ``a`` in ``[0, 1]``): for ``a > 1`` its two terms have opposite signs,
    and beyond that they cancel (order 41 at :math:`\rho = \log 2.2`: 1% off, or ``nan``).
    """
    a = jnp.asarray(a)
    rho = jnp.asarray(rho)
    small = (jnp.abs(rho) <= 1.0) & (jnp.abs(a * rho) <= 1.0) & (jnp.abs((1.0 - a) * rho) <= 1.0)
    huge = jnp.abs(rho) > math.log(jnp.finfo(rho.dtype).max) - 5.0
    rs = jnp.where(small, rho, 0.0)
    series_arg = a * phi((1.0 - a) * rs) + (1.0 - a) * phi(-a * rs)
    rl = jnp.where(small | huge, 2.0, rho)
    low = a <= 0.5
    large_arg = jnp.where(low, a * jnp.expm1(rl), (1.0 - a) * jnp.expm1(-rl))
    offset = jnp.where(small, 0.0, jnp.where(low, -a * rl, (1.0 - a) * rl))
    # a single log1p on the selected argument (log1p dominates the cost)
    gap = fm.log1p(jnp.where(small, series_arg, large_arg)) + offset
    # the unused branch at a = 1/2: at a = 0 or 1 its log of a zero weight would turn the
    # zero cotangent of the discarded value into inf * 0 = nan (reverse mode)
    hr = _mixture_gap_huge(jnp.where(huge, a, 0.5), jnp.where(huge, rho, 1e3))
    return jnp.where(huge, hr, gap)


def _mixture_gap_huge(a, rho):
    r""":func:`mixture_gap` where :math:`e^{|\rho|}` overflows (Gaussian scale ratios beyond
    ~1e154, float32 ~1.8e19). By the symmetry :math:`g(a, \rho) = g(1 - a, -\rho)`, with
    :math:`t = |\rho|`, :math:`d` the weight of the smaller exponent (``1 - a`` for
    :math:`\rho > 0`, ``a`` otherwise) and :math:`c = 1 - d`,
    :math:`g = d\,t + \log(c + d e^{-t})`. The log is taken as :math:`\log(1 + d\,
    \mathrm{expm1}(-t))` while :math:`d \le 1/2` or ``a`` is outside ``[0, 1]`` (Rényi
    orders), which keeps a tiny ``d`` exact, and otherwise as a log-sum-exp of
    :math:`\log c` and :math:`\log d - t`, which keeps a tiny ``c`` (``c = 0`` gives
    ``g = 0``, not ``t - inf`` once :math:`e^{-t}` underflows)."""
    t = jnp.abs(rho)
    pos = rho > 0
    d = jnp.where(pos, 1.0 - a, a)
    c = jnp.where(pos, a, 1.0 - a)
    lse = (d > 0.5) & (d <= 1.0)
    cl, dl = jnp.where(lse, c, 0.5), jnp.where(lse, d, 0.5)
    by_lse = jnp.logaddexp(jnp.log(cl), jnp.log(dl) - t)
    by_log1p = fm.log1p(jnp.where(lse, 0.0, d) * jnp.expm1(-t))
    return d * t + jnp.where(lse, by_lse, by_log1p)


def exp_diff(x, y, d):
    r""":math:`e^x - e^y` given :math:`d = x - y` (computed without cancellation by the
    caller): :math:`e^y\,\mathrm{expm1}(d)`, or :math:`-e^x\,\mathrm{expm1}(-d)` once
    :math:`d > 1`, where :math:`e^y` may underflow while :math:`\mathrm{expm1}(d)`
    overflows (0 * inf: e.g. CDF tails of locations more than ~709 scales apart). Either
    form keeps relative accuracy when :math:`d` is small. ``expm1(t)`` as
    ``-one_minus_exp(-t)``, whose derivative :math:`e^t` is formed directly: JAX's,
    ``expm1(t) + 1``, is 0 once ``expm1(t)`` rounds to -1 (:math:`t \lesssim -37`), which lost
    the term :math:`e^x\,\dot d` (Laplace TV's d/db1 at scale ratio 1e300 7e-4 off)."""
    big = d > 1.0
    return jnp.where(
        big,
        jnp.exp(x) * one_minus_exp(jnp.where(big, d, 0.0)),
        -jnp.exp(y) * one_minus_exp(-jnp.where(big, 0.0, d)),
    )


def amgm_gap(a, l, b=None):
    r"""Stable :math:`G(a, \ell) = a e^{\ell} + (1 - a) - e^{a\ell}` for :math:`\ell \le 0`.

    :math:`G \ge 0` for :math:`a \in [0, 1]` (weighted AM-GM). It is the per-point deficit in
    :math:`C_a - 1 = -\int q\, G(a, \log p/q)`, which gives relative accuracy for
    near-identical pairs. ``l = -inf`` (``p = 0``) gives :math:`1 - a`.

    For :math:`|\ell| \le 1` the series :math:`a(1-a)\sum_{n\ge2} (1 + a + \dots + a^{n-2})
    \ell^n/n!` is used (no cancellation); for :math:`\ell < -1` the form adapted to the side
    of :math:`a = 1/2`. ``b`` is :math:`1 - a` when the caller knows it more accurately than
    ``1 - a`` would give (e.g. :math:`a` just below 1). Outside ``[0, 1]`` (Rényi orders
    above 1, where :math:`G \le 0`) the series also needs :math:`|a\ell|, |(1-a)\ell| \le 1`:
    its terms grow like :math:`(a\ell)^n/n!` and 18 of them do not reach the sum beyond that
    (order 20 at :math:`\ell = -0.4`: 8% off); the forms for :math:`\ell < -1` are used there.
    """
    a = jnp.asarray(a)
    l = jnp.asarray(l)
    b = 1.0 - a if b is None else jnp.asarray(b)
    # for a in [0, 1] the last two conditions follow from the first
    small = (l >= -1.0) & (jnp.abs(a) * l >= -1.0) & (jnp.abs(b) * l >= -1.0)
    ls = jnp.where(small, l, 0.0)
    # sum_{n>=2} S_{n-1}(a) l^n / n!, S_m(a) = 1 + a + ... + a^(m-1), as
    # sum_{m>=0} h_m / (m + 2)!, h_m = S_{m+1}(a) l^m = sum_{k<=m} (a l)^k l^(m-k), each
    # bounded by m + 1 (|a l|, |l| <= 1): S_m(a) alone overflowed for Rényi orders a > ~137
    # in float32 (a^17; ~1e17 in float64), and the nan sent identical pairs to the direct
    # form (1e-8 instead of 0; 1.4e-3 relative at order 1e4, masses 1e-5 apart)
    n_terms = 18
    al = a * ls
    h = jnp.ones_like(al)
    pw = jnp.ones_like(al)
    acc = jnp.full_like(al, 0.5)
    for m in range(1, n_terms):
        pw = pw * ls
        h = h * al + pw
        acc = acc + h * (1.0 / math.factorial(m + 2))
    series = al * (b * ls) * acc
    ll = jnp.where(small, -2.0, l)
    finite = jnp.isfinite(ll)
    lf = jnp.where(finite, ll, -2.0)
    big_l = -lf
    # a <= 1/2: a expm1(l) - expm1(a l), without cancellation for l < -1 (its terms are at
    # most 1 in size and G >= a phi(l) e^{al}; not a phi(l) - phi(a l), whose l terms cancel:
    # 0 instead of 1/2 at a = 1/2, l = -3e16). a > 1/2 (b = 1 - a, L = -l):
    # e^{-L} [b phi(L) - phi(bL)], the second factor kept as e^{-L} phi(bL) (no cancellation
    # when b is tiny) unless bL is so large that phi(bL) would overflow, where the plain
    # difference is harmless. Outside [0, 1] (Rényi orders above 1, G <= 0), a < 0 takes the
    # first form and a > 1 the second (b < 0; the first cancels as a -> 1+: 2e-4 relative
    # at a = 1 + 1e-12, l = -1.9, against 6e-16; mpmath, 80 digits).
    e = jnp.exp(-big_l)
    low = a * jnp.expm1(lf) - jnp.expm1(a * lf)
    bl = b * big_l
    moderate = bl < 50.0
    e_phi_bl = jnp.where(
        moderate,
        e * phi(jnp.where(moderate, bl, 0.0)),
        jnp.exp(-a * big_l) - e * (1.0 + bl),
    )
    high = b * (-jnp.expm1(-big_l) - big_l * e) - e_phi_bl
    large = jnp.where(a <= 0.5, low, high)
    large = jnp.where(finite, large, b)
    return jnp.where(small, series, large)


def logtanh(k):
    r""":math:`\log\tanh k = -\log(1 + 2e^{-2k}/(1 - e^{-2k}))` for :math:`k > 0`, overflow-free
    and to full relative accuracy also where :math:`\tanh k` rounds to 1 (one ``log1p``)."""
    # e^{-2k} itself, not 1 + expm1(-2k), which is 0 once e^{-2k} < eps
    return -fm.log1p(2.0 * jnp.exp(-2.0 * k) / -jnp.expm1(-2.0 * k))


def _logtanh_d1(k):
    # d/dk log tanh k = 2 / sinh(2k) = 4 e^{-2k} / (1 - e^{-4k})
    return 4.0 * jnp.exp(-2.0 * k) / -jnp.expm1(-4.0 * k)


def _logtanh_d2_scaled(k, v):
    # v^2 d^2/dk^2 log tanh k = -4 v^2 cosh(2k)/sinh(2k)^2
    #   = -8 (1 + e^{-4k}) (v e^{-k}/(1 - e^{-4k}))^2, O(1) for k ~ v however small, and
    #   e^{-k} inside the square: for k ~ v ~ 1e200, v^2 alone overflows (0 * inf)
    e4 = jnp.exp(-4.0 * k)
    return -8.0 * (1.0 + e4) * jnp.square(v * jnp.exp(-k) / jnp.expm1(-4.0 * k))


def logtanh_bregman(u, v, w=None):
    r"""Bregman gap :math:`B(u, v) = g(u) - g(v) - g'(v)(u - v) \le 0`, :math:`g = \log\tanh`.

    When ``u`` and ``v`` are close (so the textbook difference would cancel) it is computed
    as :math:`\int_v^u (u - t)\, g''(t)\, dt` with 16-point Gauss-Legendre, which is exact to
    rounding there because :math:`g''` is analytic in a wide neighbourhood of the interval.
    ``w`` is :math:`u - v` when the caller knows it more accurately than ``u - v`` would give:
    :math:`B \approx g''w^2/2`, so a rounding of ``u`` (e.g. ``u = 1/(2b)``) that is small
    relative to ``u`` can still be large relative to a tiny ``w``.
    """
    u = jnp.asarray(u)
    v = jnp.asarray(v)
    w = u - v if w is None else jnp.asarray(w)
    close = jnp.abs(w) <= 0.25 * jnp.minimum(jnp.minimum(u, v), 1.0)
    wc = jnp.where(close, w, 0.0)
    nodes = jnp.asarray(_GL_NODES, dtype=wc.dtype)
    weights = jnp.asarray(_GL_WEIGHTS, dtype=wc.dtype)
    # t = v + w (1 + s)/2, (u - t) = w (1 - s)/2, dt = w/2 ds; in units of v, so that
    # neither w^2 nor g'' (~1/v^2) under- or overflows for tiny v (scales ~1e150)
    t = v[..., None] + wc[..., None] * (1.0 + nodes) / 2.0
    integrand = (1.0 - nodes) / 2.0 * _logtanh_d2_scaled(t, v[..., None])
    quad = jnp.square(wc / v) / 2.0 * jnp.sum(weights * integrand, axis=-1)
    uf = jnp.where(close, 2.0 * v, u)
    direct = logtanh(uf) - logtanh(v) - _logtanh_d1(v) * (uf - v)
    return jnp.where(close, quad, direct)


class ScaleConsts(NamedTuple):
    r"""Per-pair constants of the scale mismatch :math:`g(a, \rho)` (:func:`mixture_gap`):
    :math:`\rho`, :math:`K = e^\rho - 1`, :math:`w = e^\rho`, :math:`\varphi(\rho)` and
    :math:`K^- = e^{-\rho} - 1`, each to full relative accuracy."""

    rho: jax.Array
    k: jax.Array
    w: jax.Array
    phr: jax.Array
    km: jax.Array


def exp_rho_overflows(num, den, power=1):
    r"""Where :math:`e^\rho = (\text{num}/\text{den})^{p}` would overflow the constants of
    :func:`scale_consts`: :math:`\rho > \log(M/2.2)`, :math:`M` the largest float (~709 in
    float64, ~88 in float32). A product and a comparison (a logarithm would cost a compiled
    kernel); kernels solve such pairs as :math:`(Q, P)`, whose :math:`e^{-\rho} \approx 0`
    every constant absorbs."""
    dtype = jnp.result_type(num, den)
    big = float(jnp.finfo(dtype).max) / 2.2
    # (den in the common dtype: a float32 den times the float64 bound overflowed to inf in
    # a mixed float32/float64 pair, so nothing was swapped and the constants overflowed)
    return num > jnp.asarray(den, dtype) * big ** (1.0 / power)


def scale_consts(num, den, power=1):
    r""":class:`ScaleConsts` for :math:`e^\rho = (\text{num}/\text{den})^{p}`, ``p`` 1 or 2
    (scales of Laplace, variances of Gaussians); :math:`K` from the difference, so it keeps
    relative accuracy for nearly equal scales."""
    r = num / den
    if power == 1:
        w, k = r, (num - den) / den
    else:  # two quotients: (num - den)(num + den) and den^2 overflow for scales ~1e154
        w, k = r * r, ((num - den) / den) * ((num + den) / den)
    rho = power * log_ratio(num, den)
    return ScaleConsts(rho, k, w, phi(rho), -quotient(k, w))


def pure_scale_alpha(rho, k):
    r"""Maximiser of :math:`-g(a, \rho)` (:func:`mixture_gap`), :math:`1/\rho - 1/K` with
    :math:`K = e^\rho - 1` (series :math:`1/2 - \rho/12` for :math:`|\rho| < 10^{-3}`): the
    Chernoff optimum of two Laplace laws with the same location, used as a starting point."""
    small = jnp.abs(rho) < 1e-3
    rs = jnp.where(small, 1.0, rho)
    ks = jnp.where(small, 1.0, k)
    return jnp.where(small, 0.5 - rho / 12.0, 1.0 / rs - 1.0 / ks)


def mixture_gap_pre(a, sc):
    r""":func:`mixture_gap` from precomputed :class:`ScaleConsts`, for ``a`` in ``[0, 1]``.

    The same two forms as :func:`mixture_gap`, one ``log1p`` of the selected argument: for
    :math:`|\rho| \le 1`, :math:`\log(1 + a\varphi((1-a)\rho) + (1-a)\varphi(-a\rho))`, two
    non-negative terms whose :math:`\varphi` arguments lie in ``[-1, 1]`` (pure series, no
    exponential); otherwise :math:`\log(1 + aK) - a\rho` (:math:`a \le 1/2`) or its mirror
    image :math:`\log(1 + (1 - a)K^-) + (1 - a)\rho`, with :math:`K`, :math:`K^-` precomputed.
    """
    low = a <= 0.5
    b = 1.0 - a
    small = jnp.abs(sc.rho) <= 1.0
    rs = jnp.where(small, sc.rho, 0.0)
    u, v = b * rs, -a * rs
    series = a * (u * u * horner(_PHI_COEFFS, u)) + b * (v * v * horner(_PHI_COEFFS, v))
    # (the other form where K or K^- overflows, |rho| > ~709: there 1 + aK = b + a e^rho
    # with e^rho ~ 0, or its mirror, a sum the log1p keeps to relative accuracy)
    low = (low & ~jnp.isinf(sc.k)) | jnp.isinf(sc.km)
    large = jnp.where(low, a * sc.k, b * sc.km)
    offset = jnp.where(small, 0.0, jnp.where(low, -a * sc.rho, b * sc.rho))
    return fm.log1p(jnp.where(small, series, large)) + offset


@jax.custom_jvp
def mixture_gap_da(a, rho, k, phr, w, inv):
    r""":math:`\partial_a g(a, \rho) = (\varphi(\rho) - a\rho K)/(1 + aK)`, :math:`K = e^\rho - 1`.

    ``k``, ``phr``, ``w`` and ``inv`` must be ``expm1(rho)``, ``phi(rho)``, ``exp(rho)`` and
    ``1/((1 - a) + a exp(rho))`` (precomputed by the caller, each to full relative
    accuracy; the callers share the reciprocal). The denominator is formed as
    :math:`(1 - a) + a e^\rho`, a sum of non-negative terms, which stays accurate when
    :math:`e^\rho \ll 1` and :math:`a \to 1` (:math:`1 + aK` would cancel there).
    Its derivatives are supplied in the stable forms :math:`\partial_a = -K^2/(1+aK)^2` and
    :math:`\partial_\rho = K\,(1 - a - a e^{\rho/2})(1 - a + a e^{\rho/2})/(1+aK)^2`:
    autodiff of the expression above would cancel two :math:`O(\rho)` terms, losing
    relative accuracy of :math:`d\alpha^*/d\theta` for nearly equal scales.
    """
    return (phr - a * rho * k) * inv


@mixture_gap_da.defjvp
def _mixture_gap_da_jvp(primals, tangents):
    a, rho, k, phr, w, inv = primals
    ta, trho = tangents[:2]  # k, phr, w, inv are functions of a, rho: their tangents implied
    value = (phr - a * rho * k) * inv
    d_a = -jnp.square(k * inv)
    d_rho = (k * inv) * (quadratic_factor(a, jnp.sqrt(w)) * inv)  # k, w ~ 1e300: no inf * 0
    return value, d_a * ta + d_rho * trho


def quadratic_factor(a, r):
    r""":math:`1 - 2a - a^2 K = (1 - a - a r)(1 - a + a r)` for :math:`K = r^2 - 1`, as a
    product (no cancellation when :math:`r \to 0`, :math:`a \to 1`)."""
    b = 1.0 - a
    return (b - a * r) * (b + a * r)


# P_4(d) = sum_n (-d)^n/(n + 4)! for psi_family (|d| < 1; horner drops the terms that cannot
# matter in the dtype)
_PF_P4 = tuple(1.0 / math.factorial(n + 4) for n in range(20))


class PsiFamily(NamedTuple):
    r""":func:`psi_family` at ``d``: :math:`\psi`, :math:`1 - \psi`, :math:`\omega = -\psi'`,
    :math:`\omega'`, :math:`\omega''`, :math:`e^{-d}`, :math:`1 + e^{-d} - 2\psi`
    (:math:`\ge 0`, ~:math:`d^2/6`) and :math:`1/d` (``nan``-free: 1 where ``|d| < 1``, where it
    is not needed)."""

    psi: jax.Array
    omp: jax.Array
    om: jax.Array
    omd: jax.Array
    omdd: jax.Array
    exp: jax.Array
    gap: jax.Array
    inv: jax.Array


def psi_family(d):
    r""":math:`\psi(d) = (1 - e^{-d})/d`, its complement and derivatives from one exponential.

    :math:`\omega(d) = (\psi - e^{-d})/d`, :math:`\omega'(d) = (e^{-d} - 2\omega)/d` and
    :math:`\omega'' = -(e^{-d} + 3\omega')/d` (:math:`\psi' = -\omega`), each to full relative
    accuracy (a few ulp; ~15 for :math:`\omega''`). For :math:`|d| < 1`, where the closed forms
    cancel, all come from one Taylor series, :math:`P_4`, of :math:`P_k(d) = \sum_n
    (-d)^n/(n + k)!` and the recurrence :math:`P_k = 1/k! - dP_{k+1}` (no cancellation for
    :math:`|d| < 1`): :math:`\psi = P_1`, :math:`1 - \psi = dP_2`, :math:`\omega = P_1 - P_2`,
    :math:`\omega' = -(P_1 - 2P_2 + 2P_3)`, :math:`\omega'' = P_1 - 3P_2 + 6P_3 - 6P_4`,
    :math:`e^{-d} = 1 - dP_1`, :math:`1 + e^{-d} - 2\psi = d^2(P_2 - 2P_3)` (partial fractions
    of the series coefficients); the closed forms elsewhere (:math:`\psi = (1 - e^{-d})/d`, not
    :math:`1 - (1 - \psi)`, which would lose relative accuracy for large ``d``).
    """
    d = jnp.asarray(d)
    small = jnp.abs(d) < 1.0
    ds = jnp.where(small, d, 0.0)
    p4 = horner(_PF_P4, -ds)
    p3 = 1.0 / 6.0 - ds * p4
    p2 = 0.5 - ds * p3
    p1 = 1.0 - ds * p2
    dl = jnp.where(small, 1.0, d)
    e = jnp.exp(-dl)
    inv = 1.0 / dl
    psi_l = (1.0 - e) * inv
    om_l = (psi_l - e) * inv
    omd_l = (e - 2.0 * om_l) * inv
    omdd_l = -(e + 3.0 * omd_l) * inv

    def pick(s, l):
        return jnp.where(small, s, l)

    return PsiFamily(
        pick(p1, psi_l),
        pick(ds * p2, 1.0 - psi_l),
        pick(p1 - p2, om_l),
        pick(2.0 * (p2 - p3) - p1, omd_l),
        pick(p1 - 3.0 * p2 + 6.0 * (p3 - p4), omdd_l),
        pick(1.0 - ds * p1, e),
        pick(ds * ds * (p2 - 2.0 * p3), 1.0 + e - 2.0 * psi_l),
        inv,
    )


def stored(a, *xs):
    """``xs``, each ending in a division by a 1 computed at run time from ``a``
    (``1 + 0 a``, which XLA does not fold: ``0 * a`` is nan for infinite ``a``).

    XLA:CPU fuses a chain of cheap elementwise operations into every consumer and recomputes
    it there (it has no multi-output fusion), but computes a division, which it counts as
    expensive, once and stores it. The solver consumes :math:`f'` several times per trip
    (step, bracket, stopping test), so without this the kernel's algebra for it runs several
    times per trip (one core, batch 1e5: discrete Laplace ~25% faster and ~20% less compile
    time, Laplace ~10% faster for two more kernels). The higher derivatives need no store:
    the solver reads them only in its step, whose own division is stored once (storing them
    too cost Laplace ~8% in float64 and ~13% in float32, and one more kernel). A kernel whose
    loop reads the signs of :math:`f'` from that step too (``SIGNED_STEP``, the default; see
    :mod:`jaxdp.chernoff`) need not store :math:`f'` either: Laplace stores only its value;
    discrete Laplace opts out of that (see its module) and stores the pieces of :math:`f'`.
    """
    one = 1.0 + 0.0 * a
    return tuple(x / one for x in xs)


@jax.custom_jvp
def stored_as_is(x):
    """``x``, stored as by :func:`stored`, with the derivative of ``x`` itself: that of the
    division, a division of every tangent or cotangent by the run-time 1, cost the location
    gradient of ``jaxdp.log_bc`` of Laplace pairs ~3% (one core, 20,000 pairs: 26.4 ->
    25.7 ns/pair without it; that of ``jaxdp.bhattacharyya`` 24.0 -> 23.3)."""
    return stored(x, x)[0]


@stored_as_is.defjvp
def _stored_as_is_jvp(primals, tangents):
    return stored_as_is(primals[0]), tangents[0]


@jax.custom_jvp
def stand_in(bad, x, safe):
    """``safe`` where ``bad``, ``x`` elsewhere (the argument a kernel sees at invalid
    inputs), with derivative 1 in ``x`` everywhere. ``jnp.where``'s is 0 where ``bad``: the
    ``nan`` mask on the result (a product, as in
    :func:`jaxdp.coefficient.nan_where_invalid`) then never reached the gradient, which was
    a silent 0 at a negative traced epsilon. Equal to ``jnp.where`` where ``bad`` is false."""
    return jnp.where(bad, safe, x)


@stand_in.defjvp
def _stand_in_jvp(primals, tangents):
    bad, x, safe = primals
    out = stand_in(bad, x, safe)
    return out, jnp.broadcast_to(tangents[1], out.shape).astype(out.dtype)

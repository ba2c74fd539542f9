r"""Vectorized float64 ``log`` and ``log1p`` for XLA:CPU.

On XLA:CPU, float64 ``jnp.log`` and ``jnp.log1p`` lower to one scalar libm call per element
(~4-6 ns each), while ``jnp.exp`` is vectorized (~0.6 ns). The functions here compute the same
values with plain arithmetic on the bit pattern, which XLA vectorizes (~1-2 ns per element),
by the algorithm of fdlibm's ``e_log.c`` / ``s_log1p.c`` (Sun Microsystems, 1993; also musl):

.. math::

    x = 2^k (1 + f), \quad \sqrt{1/2} \le 1 + f < \sqrt 2, \quad s = \frac{f}{2 + f},
    \qquad \log x = k \ln 2 + f - \tfrac12 f^2 + s\,(\tfrac12 f^2 + R(s^2)),

with ``R`` the 7-term minimax polynomial ``Lg1..Lg7`` and ``ln 2`` split into a high part
(exact in ``k * ln2_hi``) and a low part. Error is below 1 ulp.

The fast path is used only for non-weak float64 inputs and only when lowering for CPU
(``lax.platform_dependent``, resolved at lowering: no runtime branch); other dtypes, Python
scalars and other platforms call ``jnp.log`` / ``jnp.log1p``, which are already vectorized
there. Special values are those of ``jnp.log`` / ``jnp.log1p`` and so are derivatives
(``custom_jvp``, any order; the tangent ``t / x`` is a
:func:`jaxdp._quotient.scaled_divide`, whose own derivatives do not square ``x``, for every
dtype), except that subnormal inputs, which XLA:CPU flushes to zero (``jnp.log`` gives
``-inf``), get their exact logarithm (``nan`` if negative), as in numpy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxdp._quotient import scaled_divide

__all__ = ["log", "log1p"]

_LN2_HI = 6.93147180369123816490e-01  # 0x3fe62e42fee00000: k * _LN2_HI exact for |k| < 2**11
_LN2_LO = 1.90821492927058770002e-10
_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)
_SQRTH_BITS = 0x3FE6A09E667F3BCD  # bits of sqrt(1/2)
_ONE_BITS = 0x3FF0000000000000
_MANT_MASK = 0x000FFFFFFFFFFFFF
_INF_BITS = 0x7FF0000000000000


def _split(x):
    """``x = 2**k * m`` with ``m`` in ``[sqrt(1/2), sqrt(2))``, for positive normal float64.

    Returns ``(k, f)``: ``k`` as int64, ``f = m - 1`` (exact).
    """
    bits = lax.bitcast_convert_type(x, jnp.int64) + (_ONE_BITS - _SQRTH_BITS)
    k = (bits >> 52) - 0x3FF
    m = lax.bitcast_convert_type((bits & _MANT_MASK) + _SQRTH_BITS, jnp.float64)
    return k, m - 1.0


def _kernel(k, f, c=0.0):
    """``k ln2 + log(1 + f) + c`` for ``1 + f`` in ``[sqrt(1/2), sqrt(2))``, tiny ``c`` (fdlibm)."""
    k = k.astype(jnp.float64)
    hfsq = 0.5 * f * f
    # f * (1/(2 + f)), not f/(2 + f): XLA:CPU stores a quotient with a varying numerator and
    # several readers in a kernel of its own (one per log in the program: compile time),
    # while a reciprocal fuses into its readers; same < 1 ulp bound (tests/test_fastmath.py)
    s = f * (1.0 / (2.0 + f))
    z = s * s
    w = z * z
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    r = t2 + t1
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + (k * _LN2_LO + c))) - f)


def _log_cpu(x):
    # Classify on the bits: XLA:CPU flushes subnormals to zero in float arithmetic and
    # comparisons. A subnormal is n * 2**-1074 with integer n = its bits.
    bits = lax.bitcast_convert_type(x, jnp.int64)
    sub = bits < 0x0010000000000000  # subnormal (non-positive values are masked below)
    k, f = _split(jnp.where(sub, bits.astype(jnp.float64), x))
    out = _kernel(k - jnp.where(sub, 1074, 0), f)
    ok = (bits > 0) & (bits < _INF_BITS)
    # nan for x < 0 (bits in (INT64_MIN, 0)) and nan; -inf for +-0; +inf for +inf. (Written as
    # range checks: LLVM rewrites `bits & mask == 0` into the DAZ-affected x == 0.0.)
    nan = ((bits - 1) < -1) | (bits > _INF_BITS)
    special = jnp.where(nan, jnp.nan, jnp.where(bits == _INF_BITS, jnp.inf, -jnp.inf))
    return jnp.where(ok, out, special)


def _log1p_cpu(x):
    # u = 1 + x = 2**k (1 + f + e), with f + e = 2**-k x + (2**-k - 1) split exactly by TwoSum
    # (fdlibm instead recovers the rounding error of 1 + x, which XLA's algebraic simplifier
    # breaks by reassociating (x + 1) - 1 into x). The scaling of x is done on the exponent
    # bits; 2**-k - 1 is exact for k <= 53 and rounds to -1 beyond, where the lost 1/x term
    # is far below one ulp of log(x).
    k, _ = _split(1.0 + x)  # 1 + x >= 2**-53 for x > -1: always normal
    a = lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.int64) - (k << 52), x.dtype)
    b = lax.bitcast_convert_type((0x3FF - jnp.minimum(k, 60)) << 52, x.dtype) - 1.0
    f = a + b
    bb = f - a
    e = (a - (f - bb)) + (b - bb)
    out = _kernel(k, f, e / (1.0 + f))  # log(1 + f + e)
    ok = (x > -1.0) & (x < jnp.inf) & (jnp.abs(x) >= 2.0**-54)
    special = jnp.where(x == -1.0, -jnp.inf, jnp.where(x > -1.0, x, jnp.nan))
    return jnp.where(ok, out, special)  # tiny |x| (incl. -0.0, subnormals) and +inf return x


# One custom_jvp per function for every dtype: its tangent t/x is a scaled_divide, where
# JAX's own log differentiates t/x again as -t dx/x^2, whose x^2 leaves the float range for
# |x| beyond ~1e154 (second derivatives of the Chernoff information at scale ratios ~1e100
# came out wrong by 10x)
@jax.custom_jvp
def _log(x):
    if _fast(x):
        return lax.platform_dependent(x, cpu=_log_cpu, default=jnp.log)
    return jnp.log(x)


@_log.defjvp
def _log_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _log(x), scaled_divide(t, x)


@jax.custom_jvp
def _log1p(x):
    if _fast(x):
        return lax.platform_dependent(x, cpu=_log1p_cpu, default=jnp.log1p)
    return jnp.log1p(x)


@_log1p.defjvp
def _log1p_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _log1p(x), scaled_divide(t, 1.0 + x)


def _fast(x):
    return x.dtype == jnp.float64 and not jax.typeof(x).weak_type


def log(x):
    r"""Natural logarithm, elementwise; drop-in for ``jnp.log``.

    Float64 arrays on CPU use the vectorized fdlibm algorithm (< 1 ulp) instead of the scalar
    libm call behind ``jnp.log``; everything else calls ``jnp.log``. Same special values
    (``log 0 = -inf``, ``log x = nan`` for ``x < 0``), dtype and derivatives (``t / x``).

    Args:
        x: array-like.

    Returns:
        :math:`\log x`, same shape and dtype as ``jnp.log(x)``.
    """
    x = jnp.asarray(x)
    return _log(x)


def log1p(x):
    r"""Stable :math:`\log(1 + x)`, elementwise; drop-in for ``jnp.log1p``.

    Float64 arrays on CPU use the vectorized fdlibm algorithm: ``k`` from ``1 + x`` as in
    :func:`log`, then :math:`f + e = 2^{-k} x + (2^{-k} - 1)` exactly (TwoSum) and
    :math:`\log(1 + x) = k \ln 2 + \log(1 + f) + e / (1 + f)` (< 1 ulp); everything else
    calls ``jnp.log1p``. Returns ``x`` exactly for :math:`|x| < 2^{-54}` (sign of ``-0.0``
    kept), ``-inf`` at ``x = -1``, ``nan`` below; derivative ``t / (1 + x)``.

    Args:
        x: array-like.

    Returns:
        :math:`\log(1 + x)`, same shape and dtype as ``jnp.log1p(x)``.
    """
    x = jnp.asarray(x)
    return _log1p(x)

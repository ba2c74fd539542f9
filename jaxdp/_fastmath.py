r"""Vectorized float64 and float32 ``log`` and ``log1p`` for XLA:CPU.

On XLA:CPU, float64 ``jnp.log`` and ``jnp.log1p`` lower to one scalar libm call per element
(~4-6 ns each), while ``jnp.exp`` is vectorized (~0.6 ns); float32 ``jnp.log1p`` is
vectorized but evaluates a logarithm and a series and selects (~1.7 ns against ~1.1 ns
here), and float32 ``jnp.log`` and ``jnp.log1p`` flush subnormal inputs to zero (``log``
of ``1e-45`` is ``-inf``, ``log1p`` of ``1e-40`` is ``0``). The functions here compute the
values with plain arithmetic on the bit pattern, which XLA vectorizes, by the algorithm of
fdlibm's ``e_log.c`` / ``s_log1p.c`` and their float32 versions ``e_logf.c`` /
``s_log1pf.c`` (Sun Microsystems, 1993; also musl):

.. math::

    x = 2^k (1 + f), \quad \sqrt{1/2} \le 1 + f < \sqrt 2, \quad s = \frac{f}{2 + f},
    \qquad \log x = k \ln 2 + f - \tfrac12 f^2 + s\,(\tfrac12 f^2 + R(s^2)),

with ``R`` the minimax polynomial (``Lg1..Lg7`` in float64, ``Lg1..Lg4`` in float32) and
``ln 2`` split into a high part (exact in ``k * ln2_hi``) and a low part. Error is below
1 ulp in both formats (``tests/test_fastmath.py``).

The fast path is used only for non-weak float64 and float32 inputs and only when lowering
for CPU (``lax.platform_dependent``, resolved at lowering: no runtime branch); other dtypes,
Python scalars and other platforms call ``jnp.log`` / ``jnp.log1p``, which are vectorized
there. Special values are those of ``jnp.log`` / ``jnp.log1p`` and so are derivatives
(``custom_jvp``, any order; the tangent ``t / x`` is a
:func:`jaxdp._quotient.scaled_divide`, whose own derivatives do not square ``x``, for every
dtype), except that subnormal inputs, which XLA:CPU flushes to zero, get their exact
logarithm (``nan`` if negative), as in numpy.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxdp._quotient import scaled_divide

__all__ = ["log", "log1p"]


class _Format(NamedTuple):
    """Bit layout and fdlibm constants of one binary floating-point format."""

    int_dtype: type
    mant_bits: int  # stored mantissa bits
    bias: int  # exponent bias
    min_sub_exp: int  # a subnormal with integer bits n is n * 2**-min_sub_exp
    ln2_hi: float  # k * ln2_hi exact for every exponent k of the format
    ln2_lo: float
    lg: tuple  # minimax coefficients of R(s^2), lowest order first
    sqrth_bits: int  # bits of sqrt(1/2) rounded
    tiny: float  # log1p(x) rounds to x below this |x|


_F64 = _Format(
    jnp.int64,
    52,
    0x3FF,
    1074,
    6.93147180369123816490e-01,  # 0x3fe62e42fee00000
    1.90821492927058770002e-10,
    (
        6.666666666666735130e-01,
        3.999999999940941908e-01,
        2.857142874366239149e-01,
        2.222219843214978396e-01,
        1.818357216161805012e-01,
        1.531383769920937332e-01,
        1.479819860511658591e-01,
    ),
    0x3FE6A09E667F3BCD,
    2.0**-54,
)
# fdlibm e_logf.c: four terms reach < 1 ulp of float32
_F32 = _Format(
    jnp.int32,
    23,
    0x7F,
    149,
    6.9313812256e-01,  # 0x3f317180
    9.0580006145e-06,  # 0x3717f7d1
    (0xAAAAAA * 2.0**-24, 0xCCCE13 * 2.0**-25, 0x91E9EE * 2.0**-25, 0xF89E26 * 2.0**-26),
    0x3F3504F3,
    2.0**-25,
)
_FORMATS = {jnp.dtype(jnp.float64): _F64, jnp.dtype(jnp.float32): _F32}


def _split(x, fmt):
    """``x = 2**k * m`` with ``m`` in ``[sqrt(1/2), sqrt(2))``, for positive normal ``x``.

    Returns ``(k, f)``: ``k`` as the format's integer type, ``f = m - 1`` (exact).
    """
    one = fmt.bias << fmt.mant_bits
    bits = lax.bitcast_convert_type(x, fmt.int_dtype) + (one - fmt.sqrth_bits)
    k = (bits >> fmt.mant_bits) - fmt.bias
    mant = (bits & ((1 << fmt.mant_bits) - 1)) + fmt.sqrth_bits
    return k, lax.bitcast_convert_type(mant, x.dtype) - 1.0


def _kernel(k, f, fmt, c=0.0):
    """``k ln2 + log(1 + f) + c`` for ``1 + f`` in ``[sqrt(1/2), sqrt(2))``, tiny ``c`` (fdlibm)."""
    k = k.astype(f.dtype)
    hfsq = 0.5 * f * f
    # f * (1/(2 + f)), not f/(2 + f): XLA:CPU stores a quotient with a varying numerator and
    # several readers in a kernel of its own (one per log in the program: compile time),
    # while a reciprocal fuses into its readers; same < 1 ulp bound (tests/test_fastmath.py)
    s = f * (1.0 / (2.0 + f))
    z = s * s
    w = z * z
    lg = fmt.lg
    if len(lg) == 7:
        t1 = w * (lg[1] + w * (lg[3] + w * lg[5]))
        t2 = z * (lg[0] + w * (lg[2] + w * (lg[4] + w * lg[6])))
    else:
        t1 = w * (lg[1] + w * lg[3])
        t2 = z * (lg[0] + w * lg[2])
    r = t2 + t1
    return k * fmt.ln2_hi - ((hfsq - (s * (hfsq + r) + (k * fmt.ln2_lo + c))) - f)


def _log_cpu(x):
    fmt = _FORMATS[x.dtype]
    inf_bits = (2 * fmt.bias + 1) << fmt.mant_bits
    # Classify on the bits: XLA:CPU flushes subnormals to zero in float arithmetic and
    # comparisons. A subnormal is n * 2**-min_sub_exp with integer n = its bits.
    bits = lax.bitcast_convert_type(x, fmt.int_dtype)
    sub = bits < (1 << fmt.mant_bits)  # subnormal (non-positive values are masked below)
    k, f = _split(jnp.where(sub, bits.astype(x.dtype), x), fmt)
    out = _kernel(k - jnp.where(sub, fmt.min_sub_exp, 0), f, fmt)
    ok = (bits > 0) & (bits < inf_bits)
    # nan for x < 0 (bits in (INT_MIN, 0)) and nan; -inf for +-0; +inf for +inf. (Written as
    # range checks: LLVM rewrites `bits & mask == 0` into the DAZ-affected x == 0.0.)
    nan = ((bits - 1) < -1) | (bits > inf_bits)
    special = jnp.where(nan, jnp.nan, jnp.where(bits == inf_bits, jnp.inf, -jnp.inf))
    return jnp.where(ok, out, special.astype(x.dtype))


def _log1p_cpu(x):
    # u = 1 + x = 2**k (1 + f + e), with f + e = 2**-k x + (2**-k - 1) split exactly by TwoSum
    # (fdlibm instead recovers the rounding error of 1 + x, which XLA's algebraic simplifier
    # breaks by reassociating (x + 1) - 1 into x). The scaling of x is done on the exponent
    # bits; 2**-k - 1 is exact for k <= mant_bits + 1 and rounds to -1 beyond, where the
    # lost 1/x term is far below one ulp of log(x).
    fmt = _FORMATS[x.dtype]
    k, _ = _split(1.0 + x, fmt)  # 1 + x >= 2**-(mant_bits + 1) for x > -1: always normal
    xbits = lax.bitcast_convert_type(x, fmt.int_dtype)
    a = lax.bitcast_convert_type(xbits - (k << fmt.mant_bits), x.dtype)
    two_mk = (fmt.bias - jnp.minimum(k, 60)) << fmt.mant_bits
    b = lax.bitcast_convert_type(two_mk, x.dtype) - 1.0
    f = a + b
    bb = f - a
    e = (a - (f - bb)) + (b - bb)
    out = _kernel(k, f, fmt, e / (1.0 + f))  # log(1 + f + e)
    ok = (x > -1.0) & (x < jnp.inf) & (jnp.abs(x) >= fmt.tiny)
    special = jnp.where(x == -1.0, -jnp.inf, jnp.where(x > -1.0, x, jnp.nan))
    return jnp.where(ok, out, special.astype(x.dtype))  # tiny |x| (incl. -0.0, subnormals): x


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
    return x.dtype in _FORMATS and not jax.typeof(x).weak_type


def log(x):
    r"""Natural logarithm, elementwise; drop-in for ``jnp.log``.

    Float64 and float32 arrays on CPU use the vectorized fdlibm algorithm (< 1 ulp) instead
    of the scalar libm call behind float64 ``jnp.log`` (and of float32 ``jnp.log``, which
    flushes subnormal inputs); everything else calls ``jnp.log``. Same special values
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

    Float64 and float32 arrays on CPU use the vectorized fdlibm algorithm: ``k`` from
    ``1 + x`` as in :func:`log`, then :math:`f + e = 2^{-k} x + (2^{-k} - 1)` exactly
    (TwoSum) and :math:`\log(1 + x) = k \ln 2 + \log(1 + f) + e / (1 + f)` (< 1 ulp);
    everything else calls ``jnp.log1p``. Returns ``x`` exactly for :math:`|x| < 2^{-54}`
    (float32: :math:`2^{-25}`; sign of ``-0.0`` kept), ``-inf`` at ``x = -1``, ``nan``
    below; derivative ``t / (1 + x)``.

    Args:
        x: array-like.

    Returns:
        :math:`\log(1 + x)`, same shape and dtype as ``jnp.log1p(x)``.
    """
    x = jnp.asarray(x)
    return _log1p(x)

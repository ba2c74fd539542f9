"""Division whose derivatives stay finite where the divisor's square leaves the float range.

Kept apart from :mod:`jaxdp._special` (which re-exports it) so that :mod:`jaxdp._fastmath`,
which that module imports, can write its logarithms' derivatives with it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["inverse_power_of_two", "quotient", "scaled_divide"]


@jax.custom_jvp
def quotient(x, y):
    r""":math:`x / y` whose derivative is formed as :math:`(\dot x - q\,\dot y)/y` with
    :math:`q = x/y`, not JAX's :math:`-x\dot y/y^2`, whose :math:`y^2` overflows (a zero
    gradient) or underflows (``inf``) for ``y`` beyond ~1e154 or below ~1e-154 (scale
    ratios of Gaussian pairs) while the quotient and its derivative are ordinary. The rule
    divides by :func:`scaled_divide`, so higher derivatives (``jax.hessian``, forward or
    reverse) stay finite too."""
    return x / y


@quotient.defjvp
def _quotient_jvp(primals, tangents):
    x, y = primals
    dx, dy = tangents
    q = quotient(x, y)
    return q, scaled_divide(dx - q * dy, y)


def scaled_divide(n, y):
    r""":math:`n / y`, formed as :math:`(n s)/(y s)` with :math:`s` the exact power of two
    that puts :math:`y s` in :math:`[1, 2)` (not differentiated). The same number (scaling by
    a power of two is exact), but JAX differentiates a division, also when it transposes one,
    as :math:`-n\,\dot y/y^2`, and :math:`y^2` leaves the float range for :math:`|y|`
    beyond ~1e154 or below ~1e-154; :math:`(y s)^2` is in :math:`[1, 4)`. For the tangents
    of custom rules (:func:`quotient`, the logarithms of :mod:`jaxdp._fastmath`), whose own
    derivatives are the second derivatives of the library's results. Multiplying by a
    reciprocal would do as well but stores the reciprocal for reverse mode (Laplace parameter
    gradients ran ~20% slower in an ad hoc comparison; this form ~6%)."""
    s = lax.stop_gradient(inverse_power_of_two(y))
    return (n * s) / (y * s)


def inverse_power_of_two(b):
    """``2**-floor(log2 |b|)`` for ``b != 0`` (so that ``|b| * it`` is in ``[1, 2)``), from the
    exponent bits: a few integer operations, where ``frexp``/``ldexp`` cost dozens per element,
    repeated in every kernel that reads the result. A factor, not a divisor: XLA rewrites
    ``(x/c)/(y/c)`` into ``(x*c)/(y*c)``, which overflows for the scales this is for."""
    finfo = jnp.finfo(b.dtype)
    mant = finfo.nmant  # 52 or 23 explicit mantissa bits
    top = 2 * (2 ** (finfo.nexp - 1) - 1)  # 2046 or 254: 2 * bias
    uint = jnp.uint64 if b.dtype.itemsize == 8 else jnp.uint32
    exp = (lax.bitcast_convert_type(b, uint) >> mant) & (2**finfo.nexp - 1)
    # exponent field 2 bias - E: 2**-(E - bias); E clipped so that the result stays normal
    exp = jnp.clip(exp, 1, top - 1).astype(uint)
    return lax.bitcast_convert_type((uint(top) - exp) << mant, b.dtype)

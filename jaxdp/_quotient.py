"""Division whose derivatives stay finite where the divisor's square leaves the float range.

Kept apart from :mod:`jaxdp._special` so that :mod:`jaxdp._fastmath` (which that module
imports) can write its logarithms' derivatives with it.
"""

from __future__ import annotations

import jax

__all__ = ["quotient"]


@jax.custom_jvp
def quotient(x, y):
    r""":math:`x / y` whose derivative is formed as :math:`(\dot x - q\,\dot y)/y` with
    :math:`q = x/y`, not JAX's :math:`-x\dot y/y^2`, whose :math:`y^2` overflows (a zero
    gradient) or underflows (``inf``) for ``y`` beyond ~1e154 or below ~1e-154 (scale
    ratios of Gaussian pairs) while the quotient and its derivative are ordinary. The rule
    multiplies by ``quotient(1, y)``, so higher derivatives (``jax.hessian``, forward or
    reverse) keep the form."""
    return x / y


@quotient.defjvp
def _quotient_jvp(primals, tangents):
    x, y = primals
    dx, dy = tangents
    q = quotient(x, y)
    # times 1/y rather than divided by y: the tangent is then linear in (dx, dy) with a
    # factor that is itself a quotient, so derivatives of every order, forward or reverse
    # (whose transpose of a division JAX differentiates as -x/y^2), keep this form
    return q, (dx - q * dy) * quotient(1.0, y)

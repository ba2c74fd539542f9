r"""DP mechanisms as neighbouring output pairs :math:`(P, Q)`.

Each constructor returns the output distributions of a mechanism on two neighbouring inputs
(the worst-case pair for the usual sensitivity definition), as jaxdp distributions; array
arguments give a batch (elementwise broadcasting).

* :func:`laplace` — :math:`\mathrm{Lap}(0, b)` vs :math:`\mathrm{Lap}(\Delta, b)`,
  :math:`b = \Delta/\varepsilon` (Definition 8, eq. (33)).
* :func:`gaussian` — :math:`\mathcal N(0,\sigma^2)` vs :math:`\mathcal N(\Delta,\sigma^2)`.
* :func:`randomized_response` — k-ary randomized response, rows for inputs 0 and 1.
* :func:`geometric` — discrete Laplace (two-sided geometric) with :math:`b = \Delta/\varepsilon`.
* :func:`adversarial_laplace` — the paper's Section V alteration: :math:`\mathrm{Lap}(0, b)`
  vs :math:`\mathrm{Lap}(\text{shift}, \theta b)`, :math:`b = \Delta/\varepsilon`.

Derivatives in :math:`\varepsilon` at huge :math:`\varepsilon` (beyond ~1e154 in float64):
the pairs are parametrised by the scale :math:`b`, and a divergence's derivative in
:math:`b`, ~:math:`\Delta/b^2`, is then beyond the float range. Forward mode (``jax.jvp``)
in :math:`\log\varepsilon`, the coordinate :func:`jaxdp.calibrate` steps in, stays exact for
the Laplace pairs; in :math:`\varepsilon` itself it gives 0 there (the tangent of :math:`b`,
:math:`-\Delta/\varepsilon^2` per unit of :math:`\varepsilon`, is below the float range).
Reverse mode (``jax.grad``) gives ``inf`` or ``nan`` there, and so do both modes for
:func:`geometric` (whose kernel divides by :math:`b` throughout; QA measurement, not a test).

Arguments out of range (a non-positive sensitivity, scale or epsilon, a negative randomized
response epsilon, NaN) raise ``ValueError`` naming the argument when concrete; traced
(under ``jit``/``vmap``) they give a pair whose divergences are NaN.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxdp import _checks
from jaxdp._quotient import quotient
from jaxdp.distributions import Categorical, DiscreteLaplace, Gaussian, Laplace

__all__ = ["adversarial_laplace", "gaussian", "geometric", "laplace", "randomized_response"]


def _noise_scale(mechanism, s, eps):
    """``s / eps``, checked: an extreme epsilon (e.g. subnormal) overflows or underflows it,
    which would otherwise surface as an error about a ``scale`` the caller never gave."""
    # (a quotient whose derivative is not formed as -s/eps**2: that underflowed to 0 beyond
    # eps ~1e154, so forward-mode derivatives in epsilon, which calibrate steps on, were 0)
    b = quotient(s, eps)
    if _checks.is_concrete(b) and not _checks.all_positive_finite(b):
        raise ValueError(
            f"{mechanism}: the noise scale sensitivity/epsilon is outside the float range "
            "(epsilon too small or too large for the sensitivity)"
        )
    return b


def laplace(sensitivity=1.0, *, epsilon=None, scale=None):
    r"""Laplace mechanism pair :math:`(\mathrm{Lap}(0, b), \mathrm{Lap}(\Delta, b))`.

    Give exactly one of ``epsilon`` (then :math:`b = \Delta/\varepsilon`) or ``scale``
    (:math:`b`). The pair is :math:`\varepsilon`-DP with :math:`\varepsilon = \Delta/b`.
    """
    if (epsilon is None) == (scale is None):
        raise ValueError("laplace: give exactly one of epsilon or scale")
    # promoted jointly: a float32 epsilon (or scale) with the default sensitivity 1.0 gives
    # a float32 pair also under x64
    name, value = ("epsilon", epsilon) if epsilon is not None else ("scale", scale)
    s, value = _checks.as_inexact(sensitivity, value, names=("sensitivity", name))
    _checks.check_broadcast(f"laplace: sensitivity and {name}", s.shape, value.shape)
    _checks.check_positive("sensitivity", s)
    _checks.check_positive(name, value)
    b = _noise_scale("laplace", s, value) if epsilon is not None else value
    zero = jnp.zeros_like(s * b)
    return Laplace(zero, b), Laplace(zero + s, b)


def gaussian(sensitivity=1.0, *, sigma):
    r"""Gaussian mechanism pair :math:`(\mathcal N(0,\sigma^2), \mathcal N(\Delta,\sigma^2))`."""
    s, sigma = _checks.as_inexact(sensitivity, sigma, names=("sensitivity", "sigma"))
    _checks.check_broadcast("gaussian: sensitivity and sigma", s.shape, sigma.shape)
    _checks.check_positive("sensitivity", s)
    _checks.check_positive("sigma", sigma)
    _checks.check_normal("sigma", sigma)  # (else named "Gaussian: scale", never given)
    zero = jnp.zeros_like(s * sigma)
    # (traced, the check is skipped: a negative sensitivity gave the pair of |sensitivity|;
    # a mask, not a where, for nan derivatives there too. Concrete, it passed: a positive
    # subnormal one is kept, as Laplace keeps it, where XLA's flushed `s > 0` made it NaN,
    # "Gaussian: loc contains NaN")
    shift = s if _checks.is_concrete(s) else s * jnp.where(s > 0, 1.0, jnp.nan)
    return Gaussian(zero, sigma), Gaussian(zero + shift, sigma)


def randomized_response(epsilon, k: int = 2):
    r"""k-ary randomized response: report the true value w.p. :math:`e^\varepsilon/(e^\varepsilon
    + k - 1)`, each other value w.p. :math:`1/(e^\varepsilon + k - 1)`.

    Returns the rows for inputs 0 and 1 as :class:`~jaxdp.Categorical` (last axis ``k``).
    Built in log space, so ``epsilon`` up to ~700 (float64) is exact. ``epsilon = 0`` is
    legal: both rows are uniform (every divergence 0); so is ``epsilon = inf``, the identity
    channel: one-hot rows, disjoint (information and KL ``inf``, TV 1).
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 2:
        raise ValueError(f"k must be an integer >= 2, got {_checks.plain(k)!r}")
    k = int(k)
    (eps,) = _checks.as_inexact(epsilon, names=("epsilon",))
    # (inf: eagerly refused before, while the traced value gave the identity channel)
    _checks.check_nonnegative("epsilon", eps, finite=False)
    # (traced, the check is skipped: a negative epsilon gave the pair of |epsilon|, rows
    # swapped, so every divergence of RR(|epsilon|))
    e = (eps * jnp.where(eps >= 0, 1.0, jnp.nan))[..., None]  # (a mask: nan derivatives too)
    log_norm = jnp.log1p((k - 1) * jnp.exp(-e))  # log((e^eps + k - 1) / e^eps)
    own = -log_norm
    other = -e - log_norm
    idx = jnp.arange(k)
    lp = jnp.where(idx == 0, own, other)
    lq = jnp.where(idx == 1, own, other)
    return Categorical.from_log_probs(lp), Categorical.from_log_probs(lq)


def geometric(sensitivity=1, *, epsilon):
    r"""Geometric mechanism pair: :class:`~jaxdp.DiscreteLaplace` at 0 and at
    :math:`\Delta` (an integer) with scale :math:`b = \Delta/\varepsilon`."""
    s, eps = _checks.as_inexact(sensitivity, epsilon, names=("sensitivity", "epsilon"))
    _checks.check_broadcast("geometric: sensitivity and epsilon", s.shape, eps.shape)
    _checks.check_positive("sensitivity", s)
    _checks.check_integer("sensitivity", s)
    _checks.check_positive("epsilon", eps)
    b = _noise_scale("geometric", s, eps)
    zero = jnp.zeros_like(b)
    return DiscreteLaplace(zero, b), DiscreteLaplace(zero + s, b)


def adversarial_laplace(epsilon, *, sensitivity=1.0, shift, theta):
    r"""The paper's Section V pair: :math:`\mathrm{Lap}(0, b)` vs
    :math:`\mathrm{Lap}(\text{shift}, \theta b)`, :math:`b = \Delta/\varepsilon`.

    ``shift`` is the change of the query output caused by the adversary's record (the
    paper's :math:`\Delta\mu`, in absolute units; Figure 3 uses multiples of the
    sensitivity) and ``theta`` the ratio of scales after the attack (eqs. (34)-(35)).
    """
    eps, s, shift, theta = _checks.as_inexact(
        epsilon, sensitivity, shift, theta, names=("epsilon", "sensitivity", "shift", "theta")
    )
    _checks.check_broadcast(
        "adversarial_laplace: epsilon, sensitivity, shift and theta",
        eps.shape,
        s.shape,
        shift.shape,
        theta.shape,
    )
    _checks.check_positive("epsilon", eps)
    _checks.check_positive("sensitivity", s)
    _checks.check_finite("shift", shift)
    _checks.check_positive("theta", theta)
    b = _noise_scale("adversarial_laplace", s, eps)
    zero = jnp.zeros_like(b * shift * theta)
    b2 = theta * b
    if _checks.is_concrete(b2) and not _checks.all_positive_finite(b2):  # (was blamed on
        # "Laplace: scale", a value the caller never gave: --epsilon 1e-10 --theta 1e300)
        raise ValueError(
            "adversarial_laplace: the neighbour's noise scale theta*sensitivity/epsilon is "
            "outside the float range (theta too large or too small for that epsilon)"
        )
    return Laplace(zero, b + zero), Laplace(zero + shift, b2)

r"""Exact best membership-inference advantage under composition (paper Section VI).

The best advantage of a membership-inference adversary who sees the outputs of a mechanism
run on one of two neighbouring inputs is (paper eqs. (36)-(37))

.. math::

   \mathrm{Adv} = \max_{\text{tests}} (\mathrm{TPR} - \mathrm{FPR})
   = \mathrm{TV}(P, Q) = \sup_A \big(P(A) - Q(A)\big),

attained by the likelihood-ratio test :math:`A = \{p > q\}`. (The paper's eq. (38),
:math:`1 - 2^{-qC}`, is not this number: with :math:`C` in nats, :math:`1 - e^{-nC}` is only
a lower bound on the ``n``-fold value; see :func:`jaxdp.paper.eq38`.) Under ``n``-fold
composition the two output distributions are the products :math:`P^n` and :math:`Q^n`. This
module gives that number exactly for the Laplace, Gaussian, geometric and binary
randomized-response mechanisms, and sets it beside the paper's bounds (39)-(42).
"""

from __future__ import annotations

import decimal
import fractions
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxdp import _special as sp
from jaxdp._checks import (
    as_given,
    as_inexact,
    check_broadcast,
    check_integer,
    check_nonnegative,
    check_normal,
    check_positive,
    check_unit_interval,
    is_concrete,
)
from jaxdp.conversions import _check_work_size, max_tv_eps_dp, max_tv_eps_dp_chernoff_bound

__all__ = [
    "LaplaceAdvantage",
    "MembershipBounds",
    "best_advantage_gaussian",
    "best_advantage_geometric",
    "best_advantage_laplace",
    "best_advantage_randomized_response",
    "membership_bounds",
]


class LaplaceAdvantage(NamedTuple):
    """Best advantage against the ``n``-fold Laplace mechanism, with its error bound.

    Attributes:
        value: the total variation :math:`\\mathrm{TV}(P^n, Q^n)` (dimensionless, in [0, 1]).
        error_bound: a bound on ``|value - exact|``: the Gauss-Legendre remainder bound
            (rigorous in exact arithmetic) plus a first-order worst-case rounding bound for
            the dtype, capped by the length :math:`e^{-\\varepsilon/2}` of the a-priori
            interval. See :func:`best_advantage_laplace`.
    """

    value: jax.Array
    error_bound: jax.Array


class MembershipBounds(NamedTuple):
    r"""Bounds on the membership advantage for ``n``-fold composition of ``eps``-DP.

    The paper's four bounds are evaluated, as in its Figures 4-5, at the composed budget
    :math:`n\varepsilon`; ``exact`` and ``chernoff_tight`` are the exact worst case and the
    tight Chernoff-information bound for the composition itself.

    Attributes:
        yeom: eq. (39), :math:`e^{n\varepsilon} - 1` (Yeom et al.).
        erlingsson: eq. (40), :math:`1 - e^{-n\varepsilon} + \delta e^{-n\varepsilon}`.
        chernoff_paper: eq. (41) (the paper's Theorem 5), :math:`1 - e^{-n\varepsilon}`.
        bayes_security: eq. (42), :math:`(e^{n\varepsilon} - 1)/(e^{n\varepsilon} + 1)
            = \tanh(n\varepsilon/2)`.
        exact: the exact best advantage against ``n``-fold composition of ``eps``-DP, i.e.
            the TV of ``n``-fold binary randomized response (a binomial sum).
        chernoff_tight: :math:`\sqrt{1 - \mathrm{sech}(\varepsilon/2)^{2n}}`, the tight bound
            via Chernoff information :math:`n \log\cosh(\varepsilon/2)`.
    """

    yeom: jax.Array
    erlingsson: jax.Array
    chernoff_paper: jax.Array
    bayes_security: jax.Array
    exact: jax.Array
    chernoff_tight: jax.Array


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be a Python int (static), got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return int(n)


# --------------------------------------------------------------------------------------------
# Laplace: exact n-fold total variation
# --------------------------------------------------------------------------------------------

#: The largest ``n`` of :func:`best_advantage_laplace` (its setup grows as ``n^4``).
LAPLACE_MAX_N = 400
# (membership_bounds' exact field, a binomial sum over ~n/2 terms, is refused beyond ~6.7e7:
# "for bounds at any n" sent n = 1e8 to a function that refused it)
_BOUNDS_HINT = (
    "membership_bounds(epsilon, n) for bounds (n up to ~6.7e7), or "
    "max_tv_eps_dp_chernoff_bound(epsilon, n) for a bound at any n"
)


@functools.lru_cache(maxsize=32)
def _gauss_legendre_unit(nodes: int):
    """Gauss-Legendre nodes and weights on ``[0, 1]``, correctly rounded to float64.

    ``numpy.polynomial.legendre.leggauss`` weights carry relative errors up to ~1e-13 for
    ~100 nodes, which would dominate the error budget here; so its nodes are polished by
    Newton's method on the Legendre three-term recurrence in 36-digit ``decimal``
    arithmetic (stdlib; cached, ~0.2 s for 100 nodes).
    """
    x0, _ = np.polynomial.legendre.leggauss(nodes)
    sigma = np.empty(nodes)
    weight = np.empty(nodes)
    with decimal.localcontext() as ctx:
        ctx.prec = 36
        one = decimal.Decimal(1)
        for i in range((nodes + 1) // 2):
            x = decimal.Decimal(float(x0[i]))
            for it in range(5):
                p0, p1 = one, x
                for m in range(2, nodes + 1):
                    p0, p1 = p1, ((2 * m - 1) * x * p1 - (m - 1) * p0) / m
                dp = nodes * (p0 - x * p1) / (one - x * x)
                if it < 4:
                    x -= p1 / dp
            w = 2 / ((one - x * x) * dp * dp)
            sigma[i], sigma[nodes - 1 - i] = float((1 + x) / 2), float((1 - x) / 2)
            weight[i] = weight[nodes - 1 - i] = float(w / 2)
    return sigma, weight


@functools.lru_cache(maxsize=32)
def _gauss_bernstein(n: int, nodes: int):
    """Static tables for the final quadrature of the ``n``-fold Laplace computation.

    Returns ``(sigma, weight, basis, log_cheb)``: for each cell ``i < n/2`` (length
    ``l_i = min(1, n/2 - i)``) the Gauss-Legendre nodes ``sigma_iq`` in ``[0, l_i]`` and
    weights (shape ``(cells, nodes)``); the degree-``n - 1`` Bernstein basis at the nodes
    (shape ``(cells, nodes, n)``) from the recurrence
    ``B_{j,d} = sigma B_{j-1,d-1} + (1 - sigma) B_{j,d-1}`` (non-negative weights, so
    accurate to a few ulp); and ``log(8 (l_i/4)^R / R!)``, ``R = 2 nodes - n + 1``, the
    eps-free part of the remainder bound (see :func:`_laplace_tv_dp`).
    """
    cells = (n + 1) // 2
    unit_sigma, unit_weight = _gauss_legendre_unit(nodes)
    length = np.minimum(1.0, n / 2.0 - np.arange(cells))[:, None]
    sigma = length * unit_sigma
    weight = length * unit_weight
    basis = np.ones(sigma.shape + (1,))
    zero = np.zeros(sigma.shape + (1,))
    for _ in range(1, n):
        s = sigma[..., None]
        basis = s * np.concatenate([zero, basis], -1) + (1.0 - s) * np.concatenate(
            [basis, zero], -1
        )
    order = 2 * nodes - n + 1
    log_cheb = math.log(8.0) + order * np.log(length[:, 0] / 4.0) - math.lgamma(order + 1)
    return sigma, weight, basis, log_cheb


@functools.partial(jax.jit, static_argnums=(1, 2))
def _laplace_tv_dp(eps, n: int, nodes: int):
    r"""``n``-fold Laplace TV by an exact piecewise-polynomial recursion plus Gauss-Legendre.

    See :func:`best_advantage_laplace` for the math. ``eps``: float array (any shape), finite
    and ``>= 0``; ``nodes >= n/2`` so that the quadrature is exact for the polynomial part.
    Returns ``(value, error_bound)`` of the shape of ``eps``.

    Remainder bound: Gauss-Legendre with ``Q`` nodes integrates ``p * q`` exactly for any
    polynomial ``q`` of degree ``2Q - 1 - deg p``, so on a cell of length ``l``
    ``|I(p w) - G(p w)| <= 2 ||w - q||_inf I(p)`` for ``p >= 0``. Taking for ``q`` the
    Chebyshev interpolant of degree ``R - 1`` (``R = 2Q - n + 1``) of the weight
    ``w(sigma) = e^{-eps sigma} (1 - e^{-2 eps (c - sigma)})``, whose derivatives obey
    ``|w^(R)| <= 2 eps^R``, gives ``||w - q|| <= 4 (eps l / 4)^R / R!``.
    """
    dtype = eps.dtype
    cells = (n + 1) // 2  # cells [i, i + 1) and atoms at i, for i < n / 2
    deg = n - 1  # final polynomial degree
    e = jnp.exp(-eps)
    half_eps = 0.5 * eps
    batch = eps.shape
    j = jnp.arange(deg + 1)
    jf = j.astype(dtype)

    def shift(x, axis):
        # index i receives the old value at i - 1 (zero at i = 0)
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        return jax.lax.slice_in_dim(jnp.pad(x, pad), 0, x.shape[axis], axis=axis)

    # pi_1 = zeta: atoms 1/2 at u = 0 and e^{-eps}/2 at u = 1, density (eps/2) e^{-eps u}.
    atoms = jnp.zeros(batch + (cells,), dtype).at[..., 0].set(0.5)
    if cells > 1:
        atoms = atoms.at[..., 1].set(0.5 * e)
    coef = jnp.zeros(batch + (cells, deg + 1), dtype).at[..., 0, 0].set(half_eps)
    e_c = e[..., None, None]
    he_c = half_eps[..., None, None]

    def step(r, state):
        # pi_{r+1} = pi_r * zeta; the cell polynomials go from degree r - 1 to degree r.
        atoms, coef = state
        rf = jnp.asarray(r, dtype)
        inside = j <= r
        lower = shift(coef, -1)
        # degree elevation (weights j/r and 1 - j/r, both >= 0 where it matters)
        elev = (jf / rf) * lower + jnp.where(inside, 1.0 - jf / rf, 0.0) * coef
        # int_0^tau p and int_tau^1 p as degree-r Bernstein coefficients (partial sums / r)
        head = jnp.where(inside, jnp.cumsum(lower, axis=-1), 0.0) / rf
        tail = jnp.flip(jnp.cumsum(jnp.flip(coef, -1), axis=-1), -1) / rf
        const = jnp.where(inside, atoms[..., None], 0.0)
        new_coef = 0.5 * (elev + e_c * shift(elev, -2)) + he_c * (
            head + e_c * shift(tail, -2) + const
        )
        new_atoms = 0.5 * (atoms + e[..., None] * shift(atoms, -1))
        return new_atoms, new_coef

    atoms, coef = jax.lax.fori_loop(1, n, step, (atoms, coef))

    sigma, weight, basis, log_cheb = _gauss_bernstein(n, nodes)
    t = n / 2.0
    sigma = jnp.asarray(sigma, dtype)
    weight = jnp.asarray(weight, dtype)
    start = jnp.arange(cells, dtype=dtype)[:, None]
    # p_i(sigma_iq) >= 0, as sums of non-negative terms
    poly = jnp.einsum("...ij,iqj->...iq", coef, jnp.asarray(basis, dtype))
    eps_c = eps[..., None, None]
    w = jnp.exp(-eps_c * sigma) * -jnp.expm1(-2.0 * eps_c * (t - start - sigma))
    continuous = jnp.sum(weight * w * poly, axis=(-2, -1))
    k = jnp.arange(cells, dtype=dtype)
    discrete = jnp.sum(atoms * -jnp.expm1(-2.0 * eps[..., None] * (t - k)), axis=-1)
    value = discrete + continuous
    # Near 1, the value is 1 - (1 - TV), whose derivative the sums above lose (differences
    # of O(1) terms once TV is within ~1e-16 of 1: 3e-6 off at eps = 20, n = 3, the wrong
    # sign at 30). Under Q, S_n has the law of n - S_n under P, so 1 - TV = 2 int_{s < n/2}
    # e^{-2 eps (n/2 - s)} dP(s) + P(S_n = n/2), the last an atom C(n, n/2) 2^-n e^{-eps n/2}
    # for even n: non-negative terms. Its weight e^{-eps sigma} 2 e^{-2 eps (c - sigma)} has
    # derivatives bounded as w's are (2 eps^R: they sum to e^{-eps sigma}), so the
    # remainder bound below holds for it too.
    w_rest = 2.0 * jnp.exp(-eps_c * (2.0 * (t - start) - sigma))
    rest = jnp.sum(weight * w_rest * poly, axis=(-2, -1)) + 2.0 * jnp.sum(
        atoms * jnp.exp(-2.0 * eps[..., None] * (t - k)), axis=-1
    )
    if n % 2 == 0:
        middle = float(fractions.Fraction(math.comb(n, n // 2), 2**n))
        rest = rest + middle * jnp.exp(-eps * (n / 2))
    value = jnp.where(rest < 0.5, 1.0 - rest, value)

    # Remainder bound: 8 (eps l / 4)^R / R! * int_0^l p_i, summed over cells.
    mass = jax.lax.stop_gradient(jnp.sum(weight * poly, axis=-1))
    eps_sg = jax.lax.stop_gradient(eps)
    order = 2 * nodes - n + 1
    log_rem = jnp.asarray(log_cheb, dtype) + order * jnp.log(eps_sg)[..., None] + jnp.log(mass)
    quad_bound = jnp.sum(jnp.exp(log_rem), axis=-1)
    # First-order rounding bound: every operation combines non-negative terms, so each
    # stored number carries a relative error of at most (number of roundings on its path) u.
    n_ops = (n - 1) * (n // 2 + 10) + 3 * n + cells * nodes + 12
    round_bound = n_ops * (jnp.finfo(dtype).eps / 2) * jax.lax.stop_gradient(value)
    return value, quad_bound + round_bound


def best_advantage_laplace(
    epsilon, n: int = 1, *, sensitivity=1.0, quadrature_nodes: int | None = None
) -> LaplaceAdvantage:
    r"""Exact best membership advantage against ``n`` releases of the Laplace mechanism.

    With :math:`b = s/\varepsilon` (``s = sensitivity``),

    .. math::

       \mathrm{Adv}_n(\varepsilon) = \mathrm{TV}\big(\mathrm{Lap}(0, b)^{\otimes n},
       \mathrm{Lap}(s, b)^{\otimes n}\big)
       = \mathbb{E}_P\big[(1 - e^{-L_n})_+\big],

    where :math:`L_n` is the ``n``-fold privacy loss. It depends on :math:`\varepsilon`
    only (scale invariance), so ``sensitivity`` merely has to be positive and broadcast.
    For ``n = 1``, :math:`\mathrm{Adv}_1 = 1 - e^{-\varepsilon/2}` (used directly).

    **Method.** In units of ``b`` the per-release loss is :math:`\ell = \varepsilon -
    2\varepsilon Z` with :math:`Z = \mathrm{clip}(X, 0, \varepsilon)/\varepsilon`,
    :math:`X \sim \mathrm{Lap}(0, 1)` under :math:`P` — so :math:`Z \in [0, 1]` has law
    :math:`\zeta = \tfrac12\delta_0 + \tfrac12 e^{-\varepsilon}\delta_1 +
    \tfrac{\varepsilon}{2}e^{-\varepsilon u}\,du` on ``(0, 1)``, i.e. the privacy-loss
    distribution has atoms at :math:`\pm\varepsilon` and an exponentially tilted uniform
    part. The law of :math:`S_n = \sum Z_i` is :math:`\zeta^{*n}`: atoms at the integers and
    a density :math:`e^{-\varepsilon u} p_i(u - i)` on each cell :math:`[i, i + 1)`, with
    :math:`p_i` a polynomial of degree :math:`n - 1` (exponential tilts multiply under
    convolution, so only Irwin-Hall-type polynomials remain). The recursion
    :math:`\zeta^{*(r+1)} = \zeta^{*r} * \zeta` is carried out *exactly* on the Bernstein
    coefficients of the :math:`p_i` (degree elevation and the partial sums that integrate a
    Bernstein polynomial; every coefficient is a sum of non-negative terms, so there is no
    cancellation, unlike the alternating Irwin-Hall formula). Since
    :math:`L_n = 2\varepsilon(n/2 - S_n)`,

    .. math::

       \mathrm{Adv}_n = \sum_{k < n/2} \Pr[S_n = k]\,\big(1 - e^{-2\varepsilon(n/2 - k)}\big)
       + \int_0^{n/2} e^{-\varepsilon u} p(u)\,\big(1 - e^{-2\varepsilon(n/2 - u)}\big)\,du,

    the last integral by ``Q``-point Gauss-Legendre on each cell below ``n/2`` (positive
    weights, positive integrand :math:`e^{-\varepsilon\sigma}(1 - e^{-2\varepsilon(c -
    \sigma)})\,p_i(\sigma)`, evaluated with ``expm1``; nodes and weights correctly rounded).
    Only the cells below ``n/2`` are carried (convolution moves mass to the right).

    **Error bound** (returned, ``error_bound``), the sum of

    - the quadrature remainder: Gauss-Legendre with ``Q`` nodes integrates
      :math:`p_i\,q` exactly for every polynomial :math:`q` of degree :math:`2Q - n`, and
      :math:`p_i \ge 0`, so on a cell of length :math:`l \le 1` the error is at most
      :math:`2\|w - q\|_\infty \int p_i`, with :math:`w` the exponential weight above; the
      Chebyshev interpolant and :math:`|w^{(R)}| \le 2\varepsilon^R` give
      :math:`8\,(\varepsilon l/4)^R/R!\,\int p_i`, :math:`R = 2Q - n + 1` (rigorous in exact
      arithmetic, evaluated from the computed :math:`\int p_i`);
    - a first-order rounding bound :math:`N\,u\,\mathrm{Adv}` (:math:`u` the unit roundoff of
      the dtype, :math:`N = (n-1)(\lfloor n/2\rfloor + 10) + 3n + \lceil n/2\rceil Q + 12`
      the longest chain of roundings; valid because every operation adds or multiplies
      non-negative numbers). It is a worst case: observed errors are 100-1000 times
      smaller;

    capped by the a-priori interval :math:`1 - e^{-\varepsilon/2} \le \mathrm{Adv}_n \le 1`
    (length :math:`e^{-\varepsilon/2}`, rounded up), into which the value is also clipped,
    with the lower end rounded *up* to a float (``n >= 2``; round-to-nearest could put it half
    an ulp below the interval: float32 ``eps = 34.64``, ``n = 10`` gave 0.99999994 with a
    real error of 6e-8 against a bound of 3e-8; now 1.0). Above
    :math:`\varepsilon = 2\log(1/u) + 2`, ``u`` the unit roundoff (75.5 in float64, 35.3 in
    float32), that interval is below the unit roundoff and the recursion, whose intermediate
    numbers grow like :math:`e^{\varepsilon}`, is not run at the given :math:`\varepsilon`.

    **Near 1.** Where the advantage exceeds 1/2 it is returned as :math:`1 - (1 -
    \mathrm{Adv}_n)`: :math:`Q` is the reflection of :math:`P` (:math:`S_n \mapsto n - S_n`),
    so :math:`1 - \mathrm{Adv}_n = 2\int_{s < n/2} e^{-2\varepsilon(n/2 - s)}\,d\Pr[S_n = s]
    + \Pr[S_n = n/2]` (the last an atom :math:`\binom{n}{n/2}2^{-n}e^{-\varepsilon n/2}` for
    even ``n``), non-negative terms on the same cells and nodes, whose weight's derivatives
    obey the same bound. Its derivative keeps relative accuracy where the sum above, a
    difference of O(1) terms, lost it (``n = 3``: 3e-6 off at :math:`\varepsilon = 20`, the
    wrong sign at 30; now within 1e-15 of 200-digit central differences up to 60). Beyond
    the :math:`\varepsilon` above the derivative is 0.

    With the default :math:`Q = \lceil n/2\rceil + 48` the quadrature term is below
    ``1e-24`` for :math:`\varepsilon \le 45` and every :math:`n \le 100`, and the whole bound
    is below ``2e-12`` (float64) for all :math:`\varepsilon` and :math:`n \le 100`.
    Measured against an independent 50-digit mpmath evaluation (loss-space PLD, Irwin-Hall
    pieces integrated exactly) for :math:`n \le 11`: relative errors below 5e-16 in float64;
    float32 agrees with float64 to 2e-6 relative (:math:`n \le 100`; ad hoc, 64
    :math:`\varepsilon` in :math:`[10^{-4}, 35]`: 2.6e-7 for ``n <= 10``, 7.1e-7 at 50,
    1.5e-6 at 100).

    **Range and cost.** :math:`1 \le n \le 400` (static; ``LAPLACE_MAX_N``). The first
    call builds a static table of :math:`\lceil n/2\rceil \cdot Q \cdot n` floats (4 MB at
    ``n = 100``) by a recurrence of :math:`O(n^4)` work and compiles: ~2 s at ``n = 100``,
    3 s at 200, 11 s at 300, 33 s at 400 on one CPU core (ad hoc, 2026-12-05); beyond 400
    ``n`` is refused (~20 min and 2.2 GB at 1000; :func:`membership_bounds` bounds ``n`` up
    to ~6.7e7, :func:`jaxdp.max_tv_eps_dp_chernoff_bound` any ``n``). Then run time
    :math:`O(n^3)` per :math:`\varepsilon` (``n = 100``: ~7 ms, ``n = 400``: ~0.4 s per value
    on one CPU core); memory :math:`O(n^2)` per :math:`\varepsilon` plus the table. Exact
    (up to the bound above) throughout. Below
    :math:`\varepsilon = \sqrt{\text{tiny}}` (1.5e-154 in float64, 1.1e-19 in float32), where
    the advantage is :math:`c_n\varepsilon` to far below the unit roundoff and the
    recursion's products would be subnormal, it is evaluated there and scaled.

    Args:
        epsilon: privacy parameter :math:`\varepsilon = s/b \ge 0`, any shape.
        n: number of independent releases (static Python int, ``>= 1``).
        sensitivity: query sensitivity ``s > 0`` (broadcasts; the result does not depend on
            it).
        quadrature_nodes: Gauss-Legendre nodes per cell (static, ``>= ceil(n/2)``); default
            ``ceil(n/2) + 48``.

    Returns:
        :class:`LaplaceAdvantage` ``(value, error_bound)``, shape
        ``broadcast(epsilon, sensitivity)``. :math:`\varepsilon = 0` gives 0,
        :math:`\varepsilon = \infty` gives 1; negative :math:`\varepsilon` or a non-positive
        ``sensitivity`` gives NaN under ``jit`` (``ValueError`` eagerly).
    """
    n = _check_n(n)
    if n > LAPLACE_MAX_N:
        # the static tables' setup grows as n^4 (2.2 GB and ~20 min at n = 1000): refused
        # at once rather than left to look like a hang
        raise ValueError(
            f"n={n}: the exact n-fold Laplace recursion supports n <= {LAPLACE_MAX_N} (its "
            "setup grows as n^4: ~35 s at n = 400 on one CPU core); use "
            f"{_BOUNDS_HINT}"
        )
    min_nodes = (n + 1) // 2
    nodes = min_nodes + 48 if quadrature_nodes is None else quadrature_nodes
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < min_nodes:
        raise ValueError(f"quadrature_nodes must be an int >= {min_nodes} for n={n}, got {nodes}")
    # the static table of ceil(n/2) * Q * n floats (~n^3/4): refuse before it exhausts memory
    # (n = 1e5 was killed by the OOM killer) instead of during compilation
    _check_work_size(
        min_nodes * nodes * n * 8,
        f"n={n}: the exact n-fold Laplace recursion's table (~n^2 Q/2 floats)",
        f"use {_BOUNDS_HINT}",
    )
    eps, s = as_inexact(epsilon, sensitivity, names=("epsilon", "sensitivity"))
    check_nonnegative("epsilon", eps, finite=False)
    check_positive("sensitivity", s)
    eps = jnp.broadcast_to(eps, check_broadcast("epsilon, sensitivity", eps.shape, s.shape))
    dtype = eps.dtype
    # (and a non-positive or NaN sensitivity, refused when concrete: traced, it gave the
    # value of |sensitivity|, unlike best_advantage_gaussian's NaN. Only traced: a concrete
    # one passed the checks, and a positive subnormal one, flushed by XLA, failed `s > 0`)
    bad = jnp.isnan(eps) | (eps < 0)
    if not is_concrete(s):
        bad = bad | ~(s > 0)
    # A priori: Adv_1 = 1 - e^{-eps/2} <= Adv_n <= 1. Above `cap` that interval is shorter
    # than the unit roundoff, so the recursion (whose intermediate numbers grow like e^eps)
    # is run at `cap` and the answer is the interval.
    ulp1 = float(jnp.finfo(dtype).eps)  # 2u
    cap = 2.0 * math.log(2.0 / ulp1) + 2.0
    eps_ok = sp.stand_in(bad, jnp.minimum(eps, cap), 0.0)  # (nan gradient where bad)
    gap = jnp.exp(-0.5 * eps)  # the interval length, to ~1 ulp
    lower = sp.one_minus_exp(0.5 * eps)
    if n == 1:
        value = sp.one_minus_exp(0.5 * sp.stand_in(bad, eps, 0.0))  # (derivative beyond cap too)
        bound = 2.0 * ulp1 * value
    else:
        # Below sqrt(tiny) (1.5e-154 in float64) Adv_n = c_n eps (1 + O(eps)), linear to
        # far below the unit roundoff, while the recursion's products there went subnormal
        # and were flushed (n = 50: 4.6e-4 low at eps = 1e-305, error_bound 0): run it at
        # sqrt(tiny) and scale (the slope there is c_n too)
        small = math.sqrt(float(jnp.finfo(dtype).tiny))
        linear = eps_ok < small
        value, bound = _laplace_tv_dp(jnp.where(linear, small, eps_ok), n, nodes)
        scale = jnp.where(linear, eps_ok / small, 1.0)
        value, bound = value * scale, bound * scale
        # The rounded lower end can lie up to 1/2 ulp below 1 - e^{-eps/2}: then clipping
        # to it gave a value below the interval, farther than `gap` from the truth (float32
        # eps = 34.64, n = 10: 0.99999994, error 6e-8 > gap 3e-8). Round it up instead: for
        # gap <= 1/2, 1 - lower is exact and compared with gap less a margin for the
        # rounding of exp (rounding up once too often is harmless: still in the interval).
        below = (gap <= 0.5) & (1.0 - lower > gap * (1.0 - 2.0 * ulp1))
        low = jax.lax.stop_gradient(lower)  # (nextafter has no derivative rule)
        up = jnp.nextafter(low, jnp.ones_like(low)) - low  # (exact)
        lower = lower + jnp.where(below, up, 0.0)
    # (where, not clip: at a tie the gradient must be the recursion's own)
    value = jnp.where(value < lower, lower, jnp.where(value > 1.0, 1.0, value))
    # the value and the truth both lie in [1 - e^{-eps/2}, 1]; gap rounded up
    bound = jnp.minimum(bound, gap * (1.0 + 2.0 * ulp1))
    # nan in values and derivatives where an argument is invalid (a mask, not a where,
    # whose derivative there, 0, made the gradient at a negative traced eps a silent 0)
    mask = jnp.where(bad, jnp.nan, 1.0)
    return LaplaceAdvantage(value * mask, bound * mask)


# --------------------------------------------------------------------------------------------
# Gaussian and randomized response
# --------------------------------------------------------------------------------------------


def best_advantage_gaussian(sigma, n: int = 1, *, sensitivity=1.0):
    r"""Exact best membership advantage against ``n`` releases of the Gaussian mechanism.

    .. math::

       \mathrm{TV}\big(N(0, \sigma^2)^{\otimes n}, N(s, \sigma^2)^{\otimes n}\big)
       = 2\Phi\Big(\frac{\sqrt{n}\, s}{2\sigma}\Big) - 1
       = \mathrm{erf}\Big(\frac{\sqrt{n}\, s}{2\sqrt{2}\,\sigma}\Big),

    since the log-likelihood ratio of ``n`` releases is a sufficient statistic with
    :math:`N(\pm\mu^2/2, \mu^2)` laws, :math:`\mu = \sqrt{n}\,s/\sigma`. Computed as
    ``erf`` (relative accuracy for tiny arguments); for arguments above 1 as
    :math:`1 - \mathrm{erfc}`, which is exact to rounding near 1.

    Args:
        sigma: noise standard deviation (``> 0``, a normal float: XLA flushes subnormals
            to 0), any shape.
        n: number of releases (static Python int, ``>= 1``).
        sensitivity: L2 sensitivity ``s > 0`` (a normal float too); broadcasts with
            ``sigma``.

    Returns:
        The advantage in [0, 1], shape ``broadcast(sigma, sensitivity)``; the limits 0 at
        ``sigma = inf`` and 1 at ``sensitivity = inf``. Non-positive or NaN ``sigma`` or
        ``sensitivity``, or both infinite (no limit), gives NaN under ``jit``
        (``ValueError`` eagerly).
    """
    n = _check_n(n)
    sig, s = as_inexact(sigma, sensitivity, names=("sigma", "sensitivity"))
    # (infinite sigma or sensitivity: the limits 0 and 1, as under jit; eagerly they were
    # refused)
    check_positive("sigma", sig, finite=False)
    check_positive("sensitivity", s, finite=False)
    # (XLA flushes subnormals to 0: nan results, or a ratio s/sigma read as 0 or inf)
    check_normal("sigma", sig)
    check_normal("sensitivity", s)
    check_broadcast("sigma, sensitivity", sig.shape, s.shape)
    if is_concrete(sig) and is_concrete(s) and (np.isinf(sig) & np.isinf(s)).any():
        raise ValueError("sigma and sensitivity must not both be infinite (no limit)")
    k = math.sqrt(n) / (2.0 * math.sqrt(2.0))
    # Beyond z = 28 the advantage is 1 and its derivative 0 to rounding (e^{-784} is below
    # the smallest float), but z's derivative -z/sigma overflows there for sigma below
    # ~1e-154 (0 * inf: nan); so z is formed from stand-ins there. (sp.quotient: JAX's
    # -s/sigma^2 gave -inf for sigma ~1e-160 at s = sigma, a finite slope.)
    far = jax.lax.stop_gradient(k * s / sig) > 28.0
    z = k * sp.quotient(jnp.where(far, 1.0, s), jnp.where(far, 1.0, sig))
    small = z < 1.0
    value = jnp.where(
        small,
        jax.scipy.special.erf(jnp.where(small, z, 0.0)),
        1.0 - jax.scipy.special.erfc(jnp.where(small, 1.0, z)),
    )
    value = jnp.where(far, 1.0, value)
    # traced values skip the checks above: a negative sigma gave a negative "advantage"
    # (nan in the derivative too: a mask, not a where)
    return value * jnp.where((sig > 0) & (s > 0), 1.0, jnp.nan)


def best_advantage_randomized_response(epsilon, n: int = 1):
    r"""Exact best advantage against ``n`` uses of binary randomized response.

    Binary RR with parameter :math:`\varepsilon` reports the true bit with probability
    :math:`e^\varepsilon/(1 + e^\varepsilon)`; it is the worst case among all pairs that are
    :math:`\varepsilon`-DP, also under ``n``-fold composition (Kairouz, Oh and Viswanath),
    so this is the exact best advantage against ``n``-fold :math:`\varepsilon`-DP:

    .. math::

       \mathrm{TV} = \sum_{k=0}^{n} \binom{n}{k}\, \big(p^{k} q^{n-k} - q^{k} p^{n-k}\big)_+,
       \qquad p = \frac{e^{\varepsilon}}{1 + e^{\varepsilon}},\; q = 1 - p,

    computed by :func:`jaxdp.conversions.max_tv_eps_dp`. For ``n = 1`` it is
    :math:`\tanh(\varepsilon/2)` (paper eq. (42)).

    Args:
        epsilon: :math:`\varepsilon \ge 0`, any shape.
        n: number of releases (static Python int, ``>= 1``).

    Returns:
        The advantage, shape of ``epsilon``.
    """
    n = _check_n(n)
    (eps,) = as_inexact(epsilon, names=("epsilon",))
    check_nonnegative("epsilon", eps, finite=False)
    return max_tv_eps_dp(eps, n)


# --------------------------------------------------------------------------------------------
# Geometric (discrete Laplace): exact n-fold total variation
# --------------------------------------------------------------------------------------------

#: Refused above this many multiply-adds (``size(epsilon) * n * (max sensitivity + 1) *
#: cells``): ~1e11 is minutes on one CPU core.
_MAX_GEOMETRIC_WORK = 10**11


def best_advantage_geometric(epsilon, n: int = 1, *, sensitivity=1):
    r"""Exact best membership advantage against ``n`` releases of the geometric mechanism.

    The geometric mechanism adds discrete Laplace noise of scale :math:`b = \Delta/\varepsilon`
    to an integer query of sensitivity :math:`\Delta` (:func:`jaxdp.mechanisms.geometric`):

    .. math::

       \mathrm{Adv}_n = \mathrm{TV}\big(\mathrm{DLap}(0, b)^{\otimes n},
       \mathrm{DLap}(\Delta, b)^{\otimes n}\big) = \mathbb{E}_P\big[(1 - e^{-L_n})_+\big].

    **Method.** With :math:`t = 1/b = \varepsilon/\Delta` and :math:`r = e^{-t}`, one
    release's privacy loss is :math:`\ell = t(|X - \Delta| - |X|) = t(\Delta - 2Z)`, a
    function of :math:`Z = \mathrm{clip}(X, 0, \Delta)`, whose law under :math:`P` is
    :math:`\Pr[Z = 0] = 1/(1 + r)`, :math:`\Pr[Z = j] = \tanh(t/2)\,r^j` for
    :math:`0 < j < \Delta` and :math:`\Pr[Z = \Delta] = e^{-\varepsilon}/(1 + r)`. So
    :math:`L_n = t(n\Delta - 2S_n)` with :math:`S_n = \sum_i Z_i`, and

    .. math::

       \mathrm{Adv}_n = \sum_{2s < n\Delta} \Pr[S_n = s]\,\big(1 - e^{-t(n\Delta - 2s)}\big).

    The law of :math:`S_n` is the ``n``-fold convolution of that of :math:`Z`, carried out
    directly on the cells :math:`s < n\Delta/2` (convolution only moves mass up, so the
    cells above never feed back): every number is a sum of products of non-negative terms and
    every term of the final sum is non-negative (``expm1``), so nothing cancels: tiny
    advantages (:math:`\varepsilon \to 0`) keep full relative accuracy, and :math:`n\,
    (\Delta + 1)` roundings bound the relative error. For :math:`\Delta = 1` the pair is
    binary randomized response in disguise (:math:`\ell = \pm\varepsilon`), and the
    binomial sum of :func:`best_advantage_randomized_response` is used (any ``n``). As
    :math:`\Delta \to \infty` at fixed :math:`\varepsilon` the value tends to the Laplace
    mechanism's (:func:`best_advantage_laplace`).

    Measured (``tests/test_membership.py``): float64 within :math:`n(\Delta + 1)` units of
    roundoff (at most 7.4e-16 relative for :math:`\Delta \ge 2`, ad hoc; :math:`\Delta = 1`
    takes the randomized-response sum, within 1.5e-14) of a 60-digit mpmath evaluation that
    starts from the pmfs (losses computed, tails summed by ``mp.nsum``), for :math:`\varepsilon` in
    :math:`[10^{-8}, 40]`, ``n <= 5``, :math:`\Delta \le 6`; within 1e-13 of a direct
    float64 sum of :math:`(p^{\otimes n} - q^{\otimes n})_+` over the product lattice
    (``n <= 3``). float32 loses ~1e-7 per release, as the rounded law's mass compounds
    (relative to float64 at the same inputs, 200 :math:`\varepsilon` in
    :math:`[10^{-8}, 40]`, :math:`\Delta \in \{2, 3, 7\}`, ad hoc: 4.7e-7 for ``n <= 3``,
    1.3e-6 at 10, 5.5e-6 at 50, 2.2e-5 at 200).

    **Cost.** :math:`n(\Delta + 1)\lceil n\Delta/2\rceil` multiply-adds per
    :math:`\varepsilon`; one core, ad hoc: ``n = 1000``, :math:`\Delta = 10`: 15 ms,
    ``n = 3000``, :math:`\Delta = 30`: 0.9 s (after ~0.4 s of compilation). Refused above
    1e11 multiply-adds in all, and above 4 GiB of arrays.

    Args:
        epsilon: :math:`\varepsilon = \Delta/b \ge 0`, any shape (may be traced).
        n: number of independent releases (static Python int, ``>= 1``).
        sensitivity: the integer sensitivity :math:`\Delta \ge 1`; concrete (its largest
            value sets the static size of the computation); broadcasts with ``epsilon``.

    Returns:
        The advantage in [0, 1], shape ``broadcast(epsilon, sensitivity)``.
        :math:`\varepsilon = 0` gives 0, :math:`\varepsilon = \infty` gives 1; negative or
        NaN :math:`\varepsilon` gives NaN under ``jit`` (``ValueError`` eagerly).

    Raises:
        TypeError: ``sensitivity`` is traced, or ``n`` is not a Python int.
        ValueError: ``epsilon`` negative or NaN (concrete), ``sensitivity`` not a positive
            integer, shapes that do not broadcast, or work beyond the limits above.
    """
    n = _check_n(n)
    if not is_concrete(sensitivity):
        raise TypeError(
            "sensitivity must be concrete (it sets the size of the computation), not traced"
        )
    eps, s = as_inexact(epsilon, sensitivity, names=("epsilon", "sensitivity"))
    check_nonnegative("epsilon", eps, finite=False)
    # (the values as given: under an outer jit the converted constant is a tracer, and its
    # checks were skipped: 1.5 gave a number, 0 gave 0)
    s_vals = as_given(sensitivity, s)
    check_positive("sensitivity", s_vals)
    check_integer("sensitivity", s_vals)
    shape = check_broadcast("epsilon, sensitivity", eps.shape, s.shape)
    # (numpy: under an outer jit, jnp would make even a constant sensitivity a tracer)
    dmax = geometric_plan(n, np.broadcast_to(np.asarray(sensitivity), shape), eps.dtype)
    eps = jnp.broadcast_to(eps, shape)
    return geometric_advantage(eps, jnp.broadcast_to(s, shape), n, dmax)


def geometric_plan(n: int, sensitivity, dtype) -> int:
    """The largest of the concrete, positive integer ``sensitivity`` values (the static size
    of :func:`geometric_advantage`'s computation; 1 for an empty batch), after refusing work
    beyond the limits of :func:`best_advantage_geometric`."""
    s = np.asarray(sensitivity)
    dmax = int(s.max()) if s.size else 1
    if dmax == 1:  # (the binomial sum checks its own size)
        return dmax
    cells = n * dmax // 2 + 1
    size = max(s.size, 1)
    what = f"n={n}, sensitivity {dmax}: the exact n-fold geometric sum over ~n*sensitivity/2 cells"
    hint = "use max_tv_chernoff(n * chernoff(P, Q).information) for an upper bound at any n"
    work = size * n * (dmax + 1) * cells
    if work > _MAX_GEOMETRIC_WORK:
        raise ValueError(
            f"{what} needs {work:.3g} multiply-adds (limit {_MAX_GEOMETRIC_WORK:.0e}); {hint}"
        )
    _check_work_size(6 * size * (cells + dmax + 1) * jnp.dtype(dtype).itemsize, what, hint)
    return dmax


def geometric_advantage(eps, sensitivity, n: int, dmax: int):
    """:func:`best_advantage_geometric` without checks: ``eps`` and ``sensitivity`` (integer
    values ``<= dmax``, from :func:`geometric_plan`) of one shape; ``eps`` may be traced."""
    if eps.size == 0:
        return jnp.zeros(eps.shape, eps.dtype)
    if dmax == 1:  # binary randomized response (see best_advantage_geometric)
        return max_tv_eps_dp(eps, n)
    return _geometric_tv(eps, sensitivity.astype(eps.dtype), n, dmax)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _geometric_tv(eps, delta, n: int, dmax: int):
    """Kernel of :func:`best_advantage_geometric`: ``delta`` integer-valued, ``<= dmax``."""
    dtype = eps.dtype
    bad = jnp.isnan(eps) | (eps < 0)
    inf = eps == jnp.inf  # (-inf is bad: its gradient nan, not 0)
    # (finite stand-in: those results are set below; its derivative kept, for the mask's nan
    # to reach the gradient where bad)
    e = sp.stand_in(bad | inf, eps, 1.0)
    # Below sqrt(tiny) (1.5e-154 in float64) Adv_n = c_n eps (1 + O(eps)), while the
    # convolution's products there went subnormal and were flushed (n = 4, Delta = 6: 0 at
    # eps = 1e-307): run it at sqrt(tiny) and scale (the slope there is c_n too)
    small = math.sqrt(float(jnp.finfo(dtype).tiny))
    linear = e < small
    scale = jnp.where(linear, e / small, 1.0)
    e = jnp.where(linear, small, e)
    t = e / delta
    r = jnp.exp(-t)
    j = jnp.arange(dmax + 1, dtype=dtype)
    d = delta[..., None]
    inv = 1.0 / (1.0 + r)
    # the law of Z on 0..dmax (0 above this element's own Delta)
    middle = jnp.tanh(0.5 * t)[..., None] * jnp.exp(-t[..., None] * j)
    law = jnp.where(
        j == 0,
        inv[..., None],
        jnp.where(j < d, middle, jnp.where(j == d, (jnp.exp(-e) * inv)[..., None], 0.0)),
    )
    cells = n * dmax // 2 + 1  # s <= n Delta / 2
    mass = jnp.zeros(eps.shape + (cells,), dtype).at[..., 0].set(1.0)
    pad = jnp.zeros(eps.shape + (dmax,), dtype)

    def release(_, mass):
        padded = jnp.concatenate([pad, mass], axis=-1)

        def add(k, acc):
            shifted = jax.lax.dynamic_slice_in_dim(padded, dmax - k, cells, axis=-1)
            return acc + jax.lax.dynamic_index_in_dim(law, k, axis=-1) * shifted

        return jax.lax.fori_loop(0, dmax + 1, add, jnp.zeros_like(mass))

    mass = jax.lax.fori_loop(0, n, release, mass)
    m = n * d - 2.0 * jnp.arange(cells, dtype=dtype)  # n Delta - 2 s
    valid = m > 0
    tm = t[..., None] * jnp.where(valid, m, 0.0)
    value = jnp.minimum(jnp.sum(jnp.where(valid, mass * sp.one_minus_exp(tm), 0.0), axis=-1), 1.0)
    # Near 1, the value is 1 - (1 - TV), whose derivative the sum above loses (a difference
    # of O(1) terms once TV is within ~1e-16 of 1). Under Q, S_n has the law of n Delta - S_n
    # under P, so P(S_n = n Delta - s) = P(S_n = s) e^{-t(n Delta - 2s)} and
    # 1 - TV = 2 sum_{2s < n Delta} P(S_n = s) e^{-t(n Delta - 2s)} + P(S_n = n Delta / 2).
    rest = jnp.sum(jnp.where(valid, 2.0 * mass * jnp.exp(-tm), jnp.where(m == 0, mass, 0.0)), -1)
    value = jnp.where(rest < 0.5, 1.0 - rest, value) * scale
    return jnp.where(inf, 1.0, value) * jnp.where(bad, jnp.nan, 1.0)  # (nan derivative too)


# --------------------------------------------------------------------------------------------
# The paper's bounds (39)-(42) beside the exact values
# --------------------------------------------------------------------------------------------


def membership_bounds(epsilon, n: int = 1, *, delta=0.0) -> MembershipBounds:
    r"""The paper's membership-advantage bounds (39)-(42) beside the exact worst case.

    As in the paper's Figures 4-5 the four bounds are evaluated at the composed budget
    :math:`\varepsilon_n = n\varepsilon` (pure DP composes additively):

    - (39) Yeom et al.: :math:`e^{\varepsilon_n} - 1` (exceeds 1 for
      :math:`\varepsilon_n > \log 2`);
    - (40) Erlingsson et al.: :math:`1 - e^{-\varepsilon_n} + \delta e^{-\varepsilon_n}`;
    - (41) the paper's Theorem 5: :math:`1 - e^{-\varepsilon_n}` (equal to (40) at
      :math:`\delta = 0`);
    - (42) Bayes security: :math:`(e^{\varepsilon_n} - 1)/(e^{\varepsilon_n} + 1) =
      \tanh(\varepsilon_n/2)`, the exact worst case for a *single* :math:`\varepsilon_n`-DP
      release.

    Beside them: ``exact``, the exact best advantage against ``n``-fold composition of
    :math:`\varepsilon`-DP (TV of ``n``-fold randomized response), and ``chernoff_tight``,
    :math:`\sqrt{1 - \mathrm{sech}(\varepsilon/2)^{2n}} = \sqrt{1 - e^{-2C}}` with
    :math:`C = n\log\cosh(\varepsilon/2)` the largest Chernoff information of ``n``-fold
    :math:`\varepsilon`-DP (tight: attained by RR at ``n = 1``). Order (all proven):
    ``exact <= bayes_security <= chernoff_paper <= yeom`` and ``exact <= chernoff_tight``.

    Args:
        epsilon: per-release :math:`\varepsilon \ge 0`, any shape.
        n: number of releases (static Python int, ``>= 1``).
        delta: the :math:`\delta` of (40) (``0 <= delta <= 1``); broadcasts.

    Returns:
        :class:`MembershipBounds`, every field of shape ``broadcast(epsilon, delta)``.
        Negative or NaN ``epsilon`` gives NaN in every field under ``jit``, and ``delta``
        outside ``[0, 1]`` (or NaN) NaN in ``erlingsson`` (``ValueError`` eagerly).

    Raises:
        ValueError: as above, and an ``n`` whose exact binomial sum (``exact``, by
            :func:`jaxdp.max_tv_eps_dp`) needs more than 4 GiB of work arrays: ``n`` above
            ~6.7e7 for one ``epsilon`` (:func:`jaxdp.max_tv_eps_dp_chernoff_bound` bounds any
            ``n``).
    """
    n = _check_n(n)
    eps, dlt = as_inexact(epsilon, delta, names=("epsilon", "delta"))
    check_nonnegative("epsilon", eps, finite=False)
    check_unit_interval("delta", dlt)
    shape = check_broadcast("epsilon, delta", eps.shape, dlt.shape)
    eps = jnp.broadcast_to(eps, shape)
    budget = float(n) * eps  # (an int n of 2**31 or more overflowed int32 without x64)
    yeom = jnp.expm1(budget)
    chernoff_paper = sp.one_minus_exp(budget)
    erlingsson = chernoff_paper + dlt * jnp.exp(-budget)
    bayes = sp.tanh(budget / 2.0)
    exact = max_tv_eps_dp(eps, n)
    tight = max_tv_eps_dp_chernoff_bound(eps, n)
    # traced values skip the checks above: a negative epsilon gave negative bounds (and
    # delta = 2 an Erlingsson bound of 1.37), beside NaN from exact and chernoff_tight; nan
    # in the derivatives too (masks, not wheres, whose derivative there was 0)
    ok = eps >= 0
    mask = jnp.where(ok, 1.0, jnp.nan)
    mask_delta = jnp.where(ok & (dlt >= 0) & (dlt <= 1), 1.0, jnp.nan)
    return MembershipBounds(
        yeom=yeom * mask,
        erlingsson=erlingsson * mask_delta,
        chernoff_paper=chernoff_paper * mask,
        bayes_security=bayes * mask,
        exact=jnp.broadcast_to(exact, shape),
        chernoff_tight=jnp.broadcast_to(tight, shape),
    )

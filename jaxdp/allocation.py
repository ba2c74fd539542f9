r"""Splitting a Chernoff budget across queries to minimise the total noise (optax).

Problem (DESIGN §5). ``m`` queries with sensitivities :math:`s_j` and utility weights
:math:`w_j` are answered by independent noise mechanisms with scales :math:`b_j`. Choose the
scales that minimise the total weighted noise variance subject to the *exact* Chernoff
information of the composed release staying within the budget :math:`\varepsilon`:

.. math::

   \min_b \sum_j w_j \operatorname{Var}_j(b_j)\quad\text{s.t.}\quad
   C\Big(\bigotimes_j P_j(b_j), \bigotimes_j Q_j(b_j)\Big)
   = \max_{\alpha\in[0,1]} \sum_j -\log C_\alpha(P_j, Q_j) \le \varepsilon,

a common :math:`\alpha` for all factors (:class:`jaxdp.Product`). The paper's composition
bound (Corollary 1.2, eq. (48)) replaces the constraint by :math:`\sum_j C(P_j, Q_j) \le
\varepsilon`, each factor with its own :math:`\alpha_j^*`; its *equal split* gives every
query :math:`\varepsilon/m`.

Method. The constraint is active at the optimum (the objective increases and the Chernoff
information decreases with every scale), so the problem is solved in the reduced space of
log-scales :math:`x` modulo a common shift: for any :math:`x` the shift :math:`\lambda(x)`
with :math:`C(e^{x + \lambda}) = \varepsilon` is found by Newton's method (the constraint
is met to rounding at every iterate), and :math:`F(x) = \log\sum_j w_j
\operatorname{Var}_j(e^{x_j + \lambda(x)})` is minimised with the directions of
``optax.lbfgs`` and a step-acceptance safeguard (see :func:`_optimise`); the gradient of
:math:`\lambda` comes from the implicit function theorem, :math:`\nabla\lambda =
-\nabla_x C / \partial_\lambda C`, and that of :math:`C` from the envelope theorem at the
composed maximiser (no finite differences). The final scales are shifted so that the
engine's composed information is :math:`\le \varepsilon` (equal to it within
~:math:`8|\log\sigma|` ulps: the shift is found to a few ulps of :math:`\log\sigma`, so far
budgets sit further below, 1.8e-13 relative at 1e100 in float64, 1.3e-5 at 1e12 in float32;
always on the safe side). Optimality is certified by the KKT condition :math:`\nabla_x V +
\mu \nabla_x C = 0`, :math:`\mu \ge 0`, reported as the largest residual relative to each
query's own gradient.
For the Gaussian mechanism the optimum is known in closed form, :math:`\sigma_j^2 \propto
s_j/\sqrt{w_j}`, total :math:`(\sum_j s_j\sqrt{w_j})^2/(8\varepsilon)`, against
:math:`m\sum_j w_j s_j^2/(8\varepsilon)` for the equal split (the tests check both).

Feasibility: for pairs whose information does not vanish as the noise grows (a neighbour
that also rescales the noise: :math:`C \to C(\mathcal N(0, 1), \mathcal N(0, \theta^2))
> 0`), budgets below that floor are infeasible; the result then has ``converged = False``.

When is the exact constraint better than the bound? For a *symmetric* pair
(:math:`C_\alpha = C_{1-\alpha}`, true for every built-in mechanism on neighbouring inputs:
Laplace, Gaussian, geometric, randomized response) :math:`\alpha^* = 1/2` for every factor,
so the exact composed information *equals* :math:`\sum_j C_j`: Corollary 1.2 is tight and the
whole saving over the equal split comes from the unequal allocation. For asymmetric pairs
(e.g. the paper's Section V pair whose neighbour also changes the scale,
:func:`jaxdp.mechanisms.adversarial_laplace`) the factors' maximisers differ and the exact
constraint admits strictly less noise than any split of the bound.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from jaxdp import _checks
from jaxdp import mechanisms as _mech
from jaxdp.chernoff import chernoff
from jaxdp.coefficient import log_bc
from jaxdp.distributions import Product, _check_mechanism_output

__all__ = ["AllocationResult", "allocate_budget"]


def _laplace_variance(b):
    return 2.0 * b * b


def _gaussian_variance(b):
    return b * b


_BUILTIN = {
    "laplace": (lambda b, s: _mech.laplace(s, scale=b), _laplace_variance),
    "gaussian": (lambda b, s: _mech.gaussian(s, sigma=b), _gaussian_variance),
}

#: The built-in variances' logarithms at log-scales ``x``: the total variance is summed in
#: log space (a Laplace variance 2 b^2, b ~ s/(2 budget), underflows beyond budgets ~1e154,
#: float32 ~1e19, where log V was -inf and the allocation nan with converged=False). A
#: callable ``variance`` is summed as it returns.
_LOG_VARIANCE = {
    _laplace_variance: lambda x: math.log(2.0) + 2.0 * x,
    _gaussian_variance: lambda x: 2.0 * x,
}


def _log_total_variance(variance, x, w):
    r""":math:`\log\sum_j w_j \operatorname{Var}_j(e^{x_j})`, in log space for the built-ins."""
    log_each = _LOG_VARIANCE.get(variance)
    if log_each is None:
        return jnp.log(jnp.sum(w * variance(jnp.exp(x))))
    return jax.nn.logsumexp(log_each(x) + jnp.log(w))


class AllocationResult(NamedTuple):
    r"""Result of :func:`allocate_budget` (arrays; ``(m,)`` fields are per query).

    Attributes:
      scales: ``(m,)`` optimal noise scales under the exact composed constraint.
      objective: :math:`\sum_j w_j \operatorname{Var}_j` at ``scales``.
      chernoff: exact composed Chernoff information at ``scales`` (``<= budget``).
      alpha: the common maximiser :math:`\alpha^*` of the composed information.
      multiplier: the KKT multiplier :math:`\mu \ge 0` (for the objective
        :math:`V = \sum_j w_j\operatorname{Var}_j` in log-scale coordinates).
      kkt_residual: :math:`\max_j |\partial_j V + \mu\,\partial_j C| / |\partial_j V|`
        (``x`` the log-scales; :math:`\mu` fitted to the same relative residuals); ~0 at the
        optimum, for every query however small its share of the objective.
      bound_scales, bound_objective: the optimum of the same problem under the paper's bound
        :math:`\sum_j C_j \le \varepsilon` (Corollary 1.2) with the best split.
      equal_scales, equal_objective: the equal split of Corollary 1.2 (each query calibrated
        to :math:`C_j = \varepsilon/m`).
      equal_chernoff: exact composed information of the equal split (``<= budget`` where
        the budget is feasible; above it, with ``converged`` False, where it is not).
      saving: :math:`1 - \text{objective}/\text{equal\_objective}`, the fraction of total
        weighted noise variance the exact constraint saves over the equal split.
      iterations: L-BFGS iterations (exact-constraint problem).
      converged: the optimiser met its gradient tolerance, the composed information is
        within the budget, ``kkt_residual`` is at most :math:`\sqrt{u}`, and every query's
        equal-split calibration (the optimiser's start) was found.
    """

    scales: jax.Array
    objective: jax.Array
    chernoff: jax.Array
    alpha: jax.Array
    multiplier: jax.Array
    kkt_residual: jax.Array
    bound_scales: jax.Array
    bound_objective: jax.Array
    equal_scales: jax.Array
    equal_objective: jax.Array
    equal_chernoff: jax.Array
    saving: jax.Array
    iterations: jax.Array
    converged: jax.Array


def _components(dist, m):
    # (broadcast first: a callable's Gaussian(0.0, scales) has a scalar loc, which failed
    # with JAX's "Too many indices: array is 0-dimensional")
    dist = dist._broadcast_batch((m,))
    return [jax.tree_util.tree_map(lambda leaf, j=j: leaf[j], dist) for j in range(m)]


def _pairs(kind, pair, x, s):
    """The pair at log-scales ``x``: one Product (``"exact"``) or the batch of ``m`` pairs."""
    P, Q = pair(jnp.exp(x), s)
    if kind == "exact":
        m = x.shape[0]
        return Product(*_components(P, m)), Product(*_components(Q, m))
    return P, Q


def _evaluate(kind, pair, x, s):
    r"""The engine's Chernoff information and maximiser at ``x`` (no gradient).

    ``"exact"``: the composed information (common alpha, scalar); ``"bound"``: the paper's
    bound :math:`\sum_j C_j` (alpha per query); ``"each"``: the ``(m,)`` per-query values.
    """
    res = chernoff(*_pairs(kind, pair, lax.stop_gradient(x), s))
    value = res.information if kind == "each" else jnp.sum(res.information)
    return value, lax.stop_gradient(res.alpha)


def _envelope(kind, pair, x, s, alpha):
    """The constraint at a fixed maximiser ``alpha``: equal to it at ``alpha*`` and with the
    right gradient there (envelope theorem), at the cost of one closed-form kernel."""
    P, Q = _pairs(kind, pair, x, s)
    value = -log_bc(P, Q, alpha)
    return value if kind == "each" else jnp.sum(value)


def _root(kind, pair, x, s, target, lam0, *, strict=True, max_steps=60, span=False):
    r"""Shift ``lam`` with ``value(x + lam) <= target``, equal to it within a few ulps.

    Newton on :math:`\log` value against ``lam`` (nearly linear for noise mechanisms; the
    slope from the envelope theorem), steps capped at 8, bisection once bracketed. A point
    is accepted where it was evaluated: when the Newton step there is negligible and the
    value is within ``target``; a converged point whose value exceeds ``target`` by
    rounding is nudged up by :math:`4u\,2^k`. Elementwise for ``"each"`` (then ``lam`` has
    shape ``(m,)``), scalar otherwise.

    With ``strict=False`` the final Newton step is applied instead (error of second order,
    far below an ulp of ``lam``; the value may then exceed ``target`` by rounding): used
    inside the optimiser, whose step test needs the reduced objective smooth to rounding.

    ``span``: ``max_steps`` more, as many capped steps as cross the float range (178 in
    float64), for a start that may be that far from the root (the equal split starts at
    the sensitivities: 60 steps of 8 stopped short of scales below ~3e-209 s, Laplace
    budgets above ~1e208, and returned that point's information 1e-100 of the budget).

    Returns ``(lam, value, alpha, found)`` with the engine's value and maximiser at ``x +
    lam`` (for ``strict=False``: at the last evaluated point, one negligible step before
    ``lam``) and whether it was accepted there (elementwise for ``"each"``).
    """
    info = jnp.finfo(lam0.dtype)
    if span:
        max_steps += math.ceil((math.log(float(info.max)) - math.log(float(info.tiny))) / 8.0)
    eps = float(info.eps)
    log_t = jnp.log(target) + math.log1p(-4.0 * eps)
    tol = 1e-4 * math.sqrt(eps)
    inf = jnp.full_like(lam0, jnp.inf)

    def cond(st):
        return jnp.any(~st[5]) & (st[6] < max_steps)

    def body(st):
        lam, lo, hi, value, alpha, done, it, k, found = st
        y = x + lam
        v, a = _evaluate(kind, pair, y, s)
        dv = jax.jvp(lambda l: _envelope(kind, pair, x + l, s, a), (lam,), (jnp.ones_like(lam),))
        dv = dv[1]
        g = jnp.log(v) - log_t  # decreasing in lam
        dg = dv / v
        # value too large: the root is to the right (also where g rounds to 0 or below above
        # the target: log v's ulp exceeds the 4u margin for targets above ~e^4, and Newton
        # then stepped back and forth between two points either side of the target until
        # its nudges ran out, returning a value 2.2e-15 above a budget of 1e8)
        lo = jnp.where((g > 0) | (v > target), lam, lo)
        hi = jnp.where(g < 0, lam, hi)
        ok = jnp.isfinite(g) & jnp.isfinite(dg) & (dg < 0)
        step = jnp.clip(-g / jnp.where(ok, dg, -1.0), -8.0, 8.0)
        step = jnp.where(ok, step, jnp.where(g > 0, 8.0, -8.0))
        cand = lam + step
        bracketed = jnp.isfinite(lo) & jnp.isfinite(hi)
        cand = jnp.where(bracketed & ((cand <= lo) | (cand >= hi)), 0.5 * (lo + hi), cand)
        ulp = 4.0 * eps * jnp.maximum(1.0, jnp.abs(lam) + jnp.max(jnp.abs(x)))
        # strict: a step above the rounding noise of g (4u/|dg|) is taken, not accepted: a
        # Newton tolerance of 1e-4 sqrt(u) left the composed Laplace information up to 1.6e-12
        # (7300 ulps) below the budget
        small = jnp.maximum(ulp, 4.0 * eps / jnp.abs(jnp.where(ok, dg, 1.0))) if strict else tol
        near = (ok & (jnp.abs(step) <= jnp.maximum(small, ulp))) | (bracketed & (hi - lo <= ulp))
        accept = near & (v <= target) if strict else near
        fix = near & ~accept
        cand = cand if strict else jnp.where(near & ok, lam + step, cand)
        nudged = lam + ulp * 2.0 ** k.astype(lam.dtype)
        nudged = jnp.where(jnp.isfinite(hi), jnp.minimum(nudged, hi), nudged)
        new = jnp.where(fix, nudged, cand)
        live = ~done
        value = jnp.where(live, v, value)
        alpha = jnp.where(live, a, alpha)
        lam = jnp.where(live & (~accept | (not strict)), new, lam)
        k = jnp.where(live & fix, k + 1, k)
        found = found | (live & accept)
        done = done | accept | jnp.isnan(g) | (k > 20)
        return lam, lo, hi, value, alpha, done, it + 1, k, found

    v0, a0 = jax.eval_shape(lambda: _evaluate(kind, pair, x + lam0, s))
    state = (
        lam0,
        -inf,
        inf,
        jnp.zeros(v0.shape, v0.dtype),
        jnp.zeros(a0.shape, a0.dtype),
        jnp.zeros(lam0.shape, bool),
        0,
        jnp.zeros(lam0.shape, jnp.int32),
        jnp.zeros(lam0.shape, bool),
    )
    lam, _, _, value, alpha, *_, found = lax.while_loop(cond, body, state)
    return lam, value, alpha, found


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _shift(kind, pair, x, s, budget):
    """``(lam, alpha)``: the common log-scale shift with ``constraint(x + lam) = budget``
    (to second order in the last Newton step; see :func:`_root` with ``strict=False``) and
    the maximiser there. ``alpha`` is auxiliary: its tangent is reported as zero (it is only
    used under ``stop_gradient``)."""
    lam, _, alpha, _ = _root(kind, pair, x, s, budget, jnp.zeros((), x.dtype), strict=False)
    return lam, alpha


@_shift.defjvp
def _shift_jvp(kind, pair, primals, tangents):
    # Implicit function theorem: dC = grad C . (dx + dlam 1) = d budget, with grad C from the
    # envelope theorem at the composed maximiser alpha*.
    x, s, budget = primals
    dx, _, db = tangents
    lam, alpha = _shift(kind, pair, x, s, budget)
    y = x + lam

    def c(y):
        return _envelope(kind, pair, y, s, alpha)

    _, dc = jax.jvp(c, (y,), (dx,))
    _, slope = jax.jvp(c, (y,), (jnp.ones_like(y),))
    return (lam, alpha), ((db - dc) / lax.stop_gradient(slope), jnp.zeros_like(alpha))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _tangent_of(fn, primal, args, fixed):
    """``primal`` (computed without derivatives), with the tangent of ``fn(*args, *fixed)``,
    which equals it there, in ``args`` (``fixed``: no derivative; ``fn`` is evaluated only
    under differentiation)."""
    return primal


@_tangent_of.defjvp
def _tangent_of_jvp(fn, primals, tangents):
    primal, args, fixed = primals
    _, dargs, _ = tangents
    # (the coefficients by forward mode with unit tangents, then contracted: jax.jvp of the
    # equal split's information took the Laplace scales' tangents b dx, which underflow
    # beyond budgets ~1e154, times dC/db, which overflows: d equal_chernoff / d budget inf
    # where it is 1, in both modes; the maximiser fixed, whose slope is 0 but nan there)
    jac = jax.jacfwd(lambda *a: fn(*a, *fixed), argnums=tuple(range(len(args))))(*args)
    terms = [jnp.tensordot(j, d, axes=jnp.ndim(d)) for j, d in zip(jac, dargs, strict=True)]
    return primal, sum(terms)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _kkt_point(kind, pair, variance, x, mu, info, a_star, budget, s, w):
    r"""``(x, mu, info, a_star)``: an optimum of :math:`\min V` s.t. :math:`C =
    \varepsilon`, its multiplier, and the information and maximiser there (found without
    derivatives), with their derivatives in the budget, sensitivities and weights by the
    implicit function theorem on the KKT system :math:`\nabla V(x; w) + \mu\nabla C(x; s)
    = 0`, :math:`C(x; s) = \varepsilon`:

    .. math:: \begin{pmatrix} \nabla^2 V + \mu\nabla^2 C & \nabla C \\ \nabla C^T & 0
       \end{pmatrix} \begin{pmatrix} dx \\ d\mu \end{pmatrix} = \begin{pmatrix}
       -\partial_{s,w}(\nabla V + \mu\nabla C)\,(ds, dw) \\ d\varepsilon -
       \partial_s C\,ds \end{pmatrix}

    (``x`` the log-scales; :math:`C` the composed information, ``kind="exact"``, or the
    paper's bound, ``"bound"``, whose Hessian includes the moving maximiser).
    Nonsingular at a strict minimum with an active constraint. Solved for :math:`L = \log V`
    in place of :math:`V` (the same optimum and :math:`dx`, multiplier :math:`\nu =
    \mu/V`), whose terms do not underflow, with :math:`d\mu = V\,d\nu + \mu\,dL`."""
    return x, mu, info, a_star


@_kkt_point.defjvp
def _kkt_point_jvp(kind, pair, variance, primals, tangents):
    x, mu_out, info, a_star, _, s, w = primals
    *_, db, ds, dw = tangents
    m = x.shape[0]
    # C(z) = -L(z, a*(z)) for L = log C_a and z = (x, s): from one Hessian of L in (z, a),
    # grad C = -L_z and hess C = -(L_zz - L_za L_aa^-1 L_az) (the maximiser moving with z).
    # (Autodiff of -log C at a maximiser moving by the implicit function theorem, as in
    # jaxdp.chernoff's closure terms, differentiates log C_a three times: 9 s of tracing
    # and 26 s of compiling for two Gaussian queries.)
    a = jnp.atleast_1d(a_star)
    k = a.shape[0]

    def log_c(v):
        x, s, a = v[:m], v[m : 2 * m], v[2 * m :].reshape(jnp.shape(a_star))
        P, Q = _pairs(kind, pair, x, s)
        return jnp.sum(log_bc(P, Q, a))

    v = jnp.concatenate([x, s, a])
    # (forward mode: the reverse cotangent of each scale, ~C/b, overflows beyond Laplace
    # budgets ~1e154, where the log-scales' does not: jax.hessian (forward over reverse)
    # gave nan, and through the linear solve every field's derivative nan; QA pass)
    grad_l, hess_l = jax.jacfwd(log_c)(v), jax.jacfwd(jax.jacfwd(log_c))(v)
    l_za, l_aa = hess_l[: 2 * m, 2 * m :], hess_l[2 * m :, 2 * m :]
    # an end-point maximiser, or a flat one, does not move
    safe = (a > 0) & (a < 1) & (jnp.diagonal(l_aa) != 0) & jnp.isfinite(jnp.diagonal(l_aa))
    l_za = jnp.where(safe[None, :], l_za, 0.0)
    l_aa = jnp.where(safe[:, None] & safe[None, :], l_aa, jnp.eye(k, dtype=x.dtype))
    hess_c = -(hess_l[: 2 * m, : 2 * m] - l_za @ jnp.linalg.solve(l_aa, l_za.T))
    grad_c = -grad_l[: 2 * m]

    # In log V (L), whose KKT system grad L + nu grad C = 0 has the same optimum, nu = mu/V:
    # the terms of V's (dV/dx ~ 4 w b^2, Laplace) underflowed beyond budgets ~1e154, giving
    # a singular system. The constraint's row and column are scaled by its largest gradient
    # component (~budget, Laplace).
    def log_v(x, w):
        return _log_total_variance(variance, x, w)

    def grad_lv(x, w):
        return jax.grad(log_v)(x, w)

    g_l, g_c = grad_lv(x, w), grad_c[:m]
    big = jnp.max(jnp.abs(g_c))
    g_c = g_c / big
    # (least squares: mu_out, fitted to relative residuals, may differ from it by rounding)
    nu = -jnp.dot(g_l, g_c) / jnp.dot(g_c, g_c) / big
    hess = jax.jacfwd(grad_lv)(x, w) + nu * hess_c[:m, :m]
    d_grad = jax.jvp(lambda w: grad_lv(x, w), (w,), (dw,))[1] + nu * hess_c[:m, m:] @ ds
    kkt = jnp.block([[hess, g_c[:, None]], [g_c[None, :], jnp.zeros((1, 1), x.dtype)]])
    # (the tangents times coefficients scaled first, here and below: reverse mode transposes
    # (a - b @ ds) / big into b (ct / big), which underflowed beyond Laplace budgets ~1e154:
    # d scales / d s 0 where it is ~scales / s)
    rhs = jnp.concatenate([-d_grad, (db / big - (grad_c[m:] / big) @ ds)[None]])
    sol = jnp.linalg.solve(kkt, rhs)
    dx = sol[:m]
    # mu = nu V: d mu = V d nu + mu dL, dL = grad L . dx + dL/dw . dw
    lv, d_lw = jax.jvp(lambda w: log_v(x, w), (w,), (dw,))
    v = jnp.exp(lv)
    d_mu = (v / big) * sol[m] + (nu * v) * (g_l @ dx + d_lw)
    dz = jnp.concatenate([dx, ds])
    # the information (envelope theorem) and the maximiser (implicit function theorem) there
    d_alpha = -jnp.linalg.solve(l_aa, l_za.T @ dz).reshape(jnp.shape(a_star))
    return (x, mu_out, info, a_star), (dx, d_mu, grad_c @ dz, d_alpha)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _equal_point(pair, x, a_star, budget, s):
    r"""The equal split's log-scales ``x`` (each query's information :math:`C_j(x_j; s_j) =
    \varepsilon/m`, found without derivatives; ``a_star`` the maximisers there), with
    :math:`dx_j = (d\varepsilon/m - \partial_s C_j\,ds_j)/\partial_x C_j`."""
    return x


@_equal_point.defjvp
def _equal_point_jvp(pair, primals, tangents):
    x, a_star, _, s = primals
    _, _, db, ds = tangents

    def each(x, s):  # (the envelope theorem: first derivatives at the maximisers)
        return _envelope("each", pair, x, s, a_star)

    ones = jnp.ones_like(x)
    _, slope = jax.jvp(lambda x: each(x, s), (x,), (ones,))  # C_j reads x_j only
    _, dc_ds = jax.jvp(lambda s: each(x, s), (s,), (ones,))
    # (coefficients first: reverse mode transposed (db/m - dc_ds)/slope into dc_ds's
    # transpose of ct/slope, which underflowed beyond Laplace budgets ~1e154: the equal
    # split's d scales / d s 0 where it is scales / s)
    return x, db / (x.shape[0] * slope) - (dc_ds / slope) * ds


#: the floor of the optimiser's tolerance, in ulps of the reduced gradient's terms
_GRAD_ULPS = 16.0


def _optimise(kind, pair, log_var, x0, s, budget, max_steps, tol, scaled):
    r"""L-BFGS directions from ``optax.lbfgs`` with a step-acceptance safeguard.

    Each iteration proposes ``x + t d`` (``d`` the L-BFGS update, ``t <= 1``) and evaluates
    the reduced objective and its gradient there once; the step is accepted when the
    objective does not increase by more than 64 ulps (near the optimum it is flat to
    rounding), and then ``t`` grows back towards 1; otherwise it is rejected, ``t`` is
    halved and the L-BFGS memory restarted. One evaluation per iteration (the evaluation
    that tests a step is the one that continues from it), which keeps the compiled program
    small compared with a separate line search. Converged: the largest gradient component
    is at most ``tol``.

    ``scaled`` (a traced bool: both runs share one compiled loop): for a start near the
    optimum. Query ``j`` moves :math:`F = \log V` by its share of the objective and of the
    constraint, :math:`d_j = |\partial_j \log V| +
    |\partial_j F - \partial_j \log V|`, so its gradient and curvature scale with
    :math:`d_j` (1e-12 of the largest for sensitivities 1e-6 and 1e6, whose scale the
    unscaled run left 50% off while the objective was optimal to 1e-16). L-BFGS then runs in
    ``y`` with ``x = x0 + y c``, :math:`c_j = \sqrt{\max_k d_k / d_j}` at ``x0`` (a
    diagonal preconditioner), and converged means :math:`|\partial_j F| \le` ``tol``
    :math:`d_j` for every query.

    Returns the optimum up to the common shift (project it with :func:`_root`), the
    iterations and the convergence flag.
    """

    def reduced(x):
        return log_var(x + _shift(kind, pair, x, s, budget)[0])

    eps = float(jnp.finfo(x0.dtype).eps)
    # not below the rounding of the gradient's terms: float32 Laplace queries at budgets
    # 1e-8 or 1e8 stalled at 3-8 ulps of them (1e-3 sqrt(u) is 2.9), ran every step and
    # reported converged=False with scales within 3e-6 of float64's (float64: no change)
    tol = max(tol, _GRAD_ULPS * eps)
    opt = optax.lbfgs(linesearch=None)
    value_and_grad = jax.value_and_grad(reduced)

    def share(x, g):
        own = jax.grad(log_var)(x)
        return jnp.maximum(jnp.abs(own) + jnp.abs(g - own), jnp.finfo(x0.dtype).tiny)

    d0 = share(x0, value_and_grad(x0)[1])
    c = jnp.where(scaled, lax.stop_gradient(jnp.sqrt(jnp.max(d0) / d0)), 1.0)

    def cond(carry):
        it, gnorm = carry[-2], carry[-1]
        return (it < max_steps) & (gnorm > tol)

    def body(carry):
        y, f, gy, state, t, it, _ = carry
        updates, new_state = opt.update(gy, state, y)
        y_try = y + t * updates
        x_try = x0 + c * y_try
        f_try, g_try = value_and_grad(x_try)
        size = jnp.abs(g_try) / jnp.where(scaled, share(x_try, g_try), 1.0)
        ok = jnp.isfinite(f_try) & (f_try <= f + 64.0 * eps * jnp.abs(f))
        keep = functools.partial(jnp.where, ok)
        y, f, gy = keep(y_try, y), keep(f_try, f), keep(c * g_try, gy)
        fresh = ok & (it > 0)  # the first iteration only evaluates x0 (zero update)
        state = jax.tree_util.tree_map(functools.partial(jnp.where, fresh), new_state, opt.init(y))
        t = jnp.where(ok, jnp.minimum(1.0, 2.0 * t), 0.5 * t)
        return y, f, gy, state, t, it + 1, jnp.where(ok, jnp.max(size), inf)

    one = jnp.ones((), x0.dtype)
    inf = jnp.asarray(jnp.inf, x0.dtype)
    y0 = jnp.zeros_like(x0)
    init = (y0, inf, y0, opt.init(y0), one, jnp.asarray(0), inf)
    y, *_, it, gnorm = lax.while_loop(cond, body, init)
    return x0 + c * y, it, gnorm <= tol


def _minimise(kind, pair, log_var, x0, s, budget, max_steps, tol):
    """:func:`_optimise` unscaled from ``x0``, then scaled from where it ended (one loop)."""

    def run(i, carry):
        x, it, _ = carry
        x, n, converged = _optimise(kind, pair, log_var, x, s, budget, max_steps, tol, i == 1)
        return x, it + n, converged

    return lax.fori_loop(0, 2, run, (x0, jnp.asarray(0), jnp.asarray(False)))


def allocate_budget(
    budget,
    sensitivities,
    weights=None,
    *,
    mechanism: str | Callable = "gaussian",
    variance: Callable | None = None,
    max_steps: int = 200,
    tol: float | None = None,
    compare_bound: bool = False,
) -> AllocationResult:
    r"""Noise scales for ``m`` queries minimising weighted variance under an exact budget.

    Minimises :math:`\sum_j w_j \operatorname{Var}_j(b_j)` subject to the exact composed
    Chernoff information :math:`C(\otimes_j P_j, \otimes_j Q_j) \le \varepsilon` (common
    :math:`\alpha`; see the module doc), with ``optax.lbfgs`` directions in the reduced
    space where the constraint holds with equality, and compares with the equal split of the
    paper's Corollary 1.2 (:math:`C_j = \varepsilon/m` each) and, with ``compare_bound``,
    with the best split of that bound. One jitted program per (mechanism, ``m``); the
    composed pair is a :class:`jaxdp.Product` of ``m`` components of one family, which the
    solver stacks and sums with one copy of the family's kernel
    (:mod:`jaxdp.kernels.stacked`), so compile time hardly grows with ``m`` (an ad hoc
    timing of the first call, Gaussian, one CPU core: ~8 s for ``m = 4`` and ``m = 8``).

    Args:
      budget: :math:`\varepsilon > 0` (nats), a scalar.
      sensitivities: ``(m,)`` positive sensitivities :math:`s_j`.
      weights: ``(m,)`` positive utility weights :math:`w_j` (default all 1).
      mechanism: ``"gaussian"`` (:math:`\operatorname{Var} = \sigma^2`), ``"laplace"``
        (:math:`2b^2`), or a callable ``(scales, sensitivities) -> (P, Q)`` returning
        jaxdp distributions of batch shape ``(m,)`` (parameters broadcast to it, e.g.
        ``(Gaussian(0.0, scales), Gaussian(sensitivities, scales))``; then ``variance`` is
        required).
      variance: callable ``scales -> (m,)`` variances (default from ``mechanism``).
      max_steps: L-BFGS iteration cap (static).
      tol: tolerance on the largest gradient component of the reduced objective
        :math:`F` (a log, so relative; default :math:`10^{-3}\sqrt{u}`, about ``1.5e-11``
        in float64), raised to :math:`16u` (``1.9e-6`` in float32) where below: the
        rounding of the gradient's terms, which a smaller tolerance cannot see past.
      compare_bound: also solve the problem under the paper's bound with the best (not
        equal) split, filling ``bound_scales``/``bound_objective`` (``nan`` otherwise); it
        separates the gain of the unequal split from that of the exact constraint.

    Returns:
      :class:`AllocationResult`, differentiable in the budget, sensitivities and weights
      (``jax.grad``, ``jax.jvp``, ``jax.jacfwd``/``jacrev`` of any float field but
      ``kkt_residual``, which is rounding and has derivative 0): the solvers run without
      derivatives, and the optimum takes those of its KKT system by the implicit function
      theorem, with the Hessian of the composed information (its maximiser moving), the
      equal split those of each query's calibration. Measured against central differences
      (Gaussian, Laplace and an asymmetric Gaussian pair, two queries, every field with
      ``compare_bound``): within 1e-9; against the Gaussian closed form, 2.4e-15. A
      derivative compiles its own program: ~12 s for two Gaussian queries on one core (ad
      hoc), against ~6 s for the values.

    Raises:
      ValueError: non-positive, subnormal or non-finite budget, sensitivities or weights,
        mismatched shapes, unknown mechanism, a callable mechanism without ``variance``, a
        callable ``mechanism`` whose distributions do not broadcast to ``(m,)`` or a
        ``variance`` that does not return ``(m,)``, ``max_steps`` not a positive int, or a
        negative or non-finite ``tol``. Traced (under ``jit``/``vmap``), a bad budget,
        sensitivity or weight gives ``nan`` in every float field and ``converged=False``.
      TypeError: ``variance`` not callable, ``tol`` not a real number, or a callable
        ``mechanism`` that does not return a pair ``(P, Q)`` of distributions.
    """
    if isinstance(mechanism, str):
        if mechanism not in _BUILTIN:
            raise ValueError(
                f"mechanism must be one of {sorted(_BUILTIN)} or a callable, got {mechanism!r}"
            )
        pair, default_var = _BUILTIN[mechanism]
        variance = variance or default_var
    elif callable(mechanism):
        if variance is None:
            raise ValueError("variance is required for a callable mechanism")
        pair = mechanism
    else:
        raise TypeError(f"mechanism must be a name or a callable, got {type(mechanism)}")
    if weights is None:  # ones of the sensitivities' dtype (float64 ones made float32 input 64)
        budget, s = _checks.as_inexact(budget, sensitivities, names=("budget", "sensitivities"))
        w = jnp.ones_like(s)
    else:
        budget, s, w = _checks.as_inexact(
            budget, sensitivities, weights, names=("budget", "sensitivities", "weights")
        )
    if budget.ndim != 0:
        raise ValueError(f"budget must be a scalar, got shape {budget.shape}")
    if s.ndim != 1 or s.shape[0] < 1:
        raise ValueError(f"sensitivities must be a non-empty 1-D array, got shape {s.shape}")
    if w.shape != s.shape:
        raise ValueError(f"weights must have the shape of sensitivities, got {w.shape}")
    for name, v in (("budget", budget), ("sensitivities", s), ("weights", w)):
        _checks.check_positive(name, v)
        # (XLA flushes subnormals: a subnormal budget gave scales 0, a sensitivity nan, a
        # weight a scale 2e17 of a flushed weight 0)
        _checks.check_normal(name, v)
    if (
        isinstance(max_steps, bool)
        or not isinstance(max_steps, int | np.integer)  # (np.int64(200) was refused)
        or max_steps < 1
    ):
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if variance is not None and not callable(variance):
        raise TypeError(f"variance must be a callable, got {type(variance).__name__}")
    if tol is not None:
        # (NaN or inf never entered the loop: the equal split came back; negative never
        # stopped it before max_steps)
        try:
            tol = float(tol)
        except (TypeError, ValueError):
            raise TypeError(f"tol must be a real number, got {tol!r}") from None
        if not (math.isfinite(tol) and tol >= 0):
            raise ValueError(f"tol must be non-negative and finite, got {tol!r}")
    _check_callables(pair if callable(mechanism) else None, variance, s)
    eps = float(jnp.finfo(s.dtype).eps)
    tol = 1e-3 * math.sqrt(eps) if tol is None else tol
    max_steps = min(int(max_steps), _checks.MAX_STEPS)
    return _allocate(pair, variance, max_steps, tol, bool(compare_bound), budget, s, w)


def _check_callables(pair, variance, s):
    """What a callable ``mechanism`` (``pair``; ``None`` for a built-in) and ``variance``
    return, by shape alone (:func:`jax.eval_shape`: nothing is computed). A variance of
    another shape was broadcast silently (a scalar: a wrong optimum, ``converged=True``); a
    mechanism returning one distribution failed with "cannot unpack non-iterable"."""
    m = s.shape[0]
    if pair is not None:
        out = jax.eval_shape(pair, s, s)
        _check_mechanism_output(out, (m,), f"of batch shape ({m},) (one per query)")
    out = jax.eval_shape(variance, s)
    if getattr(out, "shape", None) != (m,):
        got = getattr(out, "shape", type(out).__name__)
        raise ValueError(f"variance must return shape ({m},) (one per query), got {got}")


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _allocate(pair, variance, max_steps, tol, compare_bound, budget, s, w):
    m = s.shape[0]
    # The solvers run without derivatives (JAX would differentiate their loops, or raise
    # under reverse mode); _kkt_point, _equal_point and _tangent_of give the results theirs.
    live = (budget, s, w)
    budget, s, w = lax.stop_gradient(live)

    def log_var(x, w=w):
        return _log_total_variance(variance, x, w)

    # Equal split of Corollary 1.2: each query calibrated alone to budget / m.
    zeros = jnp.zeros_like(s)
    target = jnp.full_like(s, budget / m)
    x_equal, _, a_equal, equal_found = _root("each", pair, zeros, s, target, jnp.log(s), span=True)
    x0 = x_equal
    if compare_bound:
        x_bound, _, _ = _minimise("bound", pair, log_var, x_equal, s, budget, max_steps, tol)
        lam, _, a_bound, _ = _root("bound", pair, x_bound, s, budget, zeros[0])
        x_bound = x_bound + lam
        x0 = x_bound
    x_opt, it, converged = _minimise("exact", pair, log_var, x0, s, budget, max_steps, tol)
    lam, info, alpha, _ = _root("exact", pair, x_opt, s, budget, zeros[0])
    x_opt = x_opt + lam

    grad_v = jax.grad(log_var)(x_opt)  # (of log V: V's terms underflow, see _LOG_VARIANCE)
    # (forward mode: the reverse cotangent of each scale, dC/db ~ C/b, overflows (or
    # underflows) beyond budgets ~1e205 (~1e-205), where dC/dx = b dC/db does not: multiplier
    # and residual nan, converged=False at right scales; QA pass)
    grad_c = jax.jacfwd(lambda x: _envelope("exact", pair, x, s, alpha))(x_opt)
    # per query, relative to its own gradient (a norm is blind to the small queries)
    eps = float(jnp.finfo(s.dtype).eps)
    # (free of the problem's scale: the ratios are about -1/mu, ~eps^2 for Gaussian queries,
    # whose squares under- or overflowed beyond budgets 1e-77 and 1e77, 1e-9 and 1e9 in
    # float32: multiplier inf or 0, residual inf, nan or 1, converged=False at right scales)
    big_v, big_c = jnp.max(jnp.abs(grad_v)), jnp.max(jnp.abs(grad_c))
    ratio = (grad_c / big_c) / (grad_v / big_v)
    big = jnp.max(jnp.abs(ratio))
    ratio = ratio / big
    mu = -jnp.sum(ratio) / jnp.sum(ratio * ratio)
    kkt = jnp.max(jnp.abs(1.0 + mu * ratio))
    mu = mu * (big_v / big_c) / big * jnp.exp(log_var(x_opt))  # (mu for V: V / mu for log V)
    equal_info, equal_alpha = _evaluate("exact", pair, x_equal, s)
    # (and every query's KKT residual within sqrt(u): float32 scales 9% off had passed the
    # optimiser's test with a residual of 0.2)
    # (and the equal split found: it is the optimiser's start; QA pass)
    converged = converged & (info <= budget) & (kkt <= math.sqrt(eps)) & jnp.all(equal_found)

    # Derivatives in the budget, sensitivities and weights, by the implicit function theorem
    # at the points found (kkt_residual has none: it is rounding).
    b, s, w = live
    x_opt, mu, info, alpha = _kkt_point("exact", pair, variance, x_opt, mu, info, alpha, b, s, w)
    x_equal = _equal_point(pair, x_equal, a_equal, b, s)
    envelope = functools.partial(_envelope, "exact", pair)
    equal_info = _tangent_of(envelope, equal_info, (x_equal, s), (equal_alpha,))
    log_objective = log_var(x_opt, w)
    log_equal = log_var(x_equal, w)
    nan = jnp.full_like(x_opt, jnp.nan)
    if compare_bound:
        nan0 = nan[0]
        x_bound, *_ = _kkt_point("bound", pair, variance, x_bound, nan0, nan0, a_bound, b, s, w)
    result = AllocationResult(
        scales=jnp.exp(x_opt),
        objective=jnp.exp(log_objective),
        chernoff=info,
        alpha=alpha,
        multiplier=mu,
        kkt_residual=kkt,
        bound_scales=jnp.exp(x_bound) if compare_bound else nan,
        bound_objective=jnp.exp(log_var(x_bound, w)) if compare_bound else nan[0],
        equal_scales=jnp.exp(x_equal),
        equal_objective=jnp.exp(log_equal),
        equal_chernoff=equal_info,
        saving=-jnp.expm1(log_objective - log_equal),  # (0/0 where both underflow)
        iterations=it,
        converged=converged,
    )
    # Traced arguments skip the eager checks: a negative budget or weight gave plausible
    # scales (budget -0.1: [1.3e-7, 1.9e-7]), flagged only by converged=False. nan there, in
    # values and derivatives (a mask, not a where, whose derivative would be 0).
    budget, s, w = lax.stop_gradient(live)
    tiny = jnp.finfo(s.dtype).tiny  # (subnormals refused too, as eagerly)
    ok = (budget >= tiny) & (budget < jnp.inf)
    for v in (s, w):
        ok = ok & jnp.all((v >= tiny) & (v < jnp.inf))
    mask = jnp.where(ok, 1.0, jnp.nan)
    floats = {
        f: getattr(result, f) * mask
        for f in result._fields
        if jnp.issubdtype(getattr(result, f).dtype, jnp.floating)
    }
    return result._replace(**floats, converged=result.converged & ok)

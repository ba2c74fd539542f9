r"""Exact Chernoff information: the maximum over :math:`\alpha` of :math:`-\log C_\alpha`.

.. math::

   C(P, Q) = \max_{\alpha \in [0, 1]} f(\alpha),\qquad f(\alpha) = -\log C_\alpha(P, Q)

(the paper's eq. (11), over the closed interval with one-sided limits at the ends).
:math:`\log C_\alpha` is convex in :math:`\alpha` (Hölder), so :math:`f` is concave and the
maximiser is unique (or a flat set when :math:`P = Q`). :math:`f'(0^+) = D(Q\|P)` and
:math:`f'(1^-) = -D(P\|Q)` when the supports agree (the paper's eqs. (16)-(17) print them
as slopes of :math:`C_\alpha` itself, whose slopes there are :math:`-D(Q\|P)` and
:math:`D(P\|Q)`: they hold for :math:`f`), so the optimum is interior unless the supports
differ.

Solver (default ``method="newton"``): endpoint test on the sign of :math:`f'` at 0 and 1
(only for pairs whose supports may differ), then one ``lax.while_loop`` over the batch with
per-element convergence masks: safeguarded Newton steps on :math:`f'` (Halley steps where
the kernel supplies :math:`f^{(3)}`) inside a bracket that shrinks on every evaluation, with
a bisection fallback whenever a step leaves the bracket. It starts from the kernel's
closed-form guess: the exact maximiser for Gaussian pairs (a root of a quadratic) and for
two-category pairs (the loop then only polishes rounding); for (discrete) Laplace pairs the
pure-scale optimum :math:`1/\rho - 1/(e^\rho - 1)` blended with the kink
:math:`b_1/(b_1 + b_2)` of the shift term (at most two Halley steps in float64, one in
float32, on wide random continuous pairs); 1/2 otherwise. The loop carries only the point,
the bracket and a status number, and evaluates only derivatives (hand-written where autodiff
would be slow or cancel); for kernels with a one-pass ``value_derivs`` the last small step
is taken without another trip, and the value, the certificate :math:`f'` and :math:`f''`
are then evaluated once, at the returned :math:`\alpha` (the others evaluate their
derivatives there by one more trip, then the value). ``method="optax"`` runs
``optax.lbfgs`` on :math:`\mathrm{logit}(\alpha)` instead, one pair at a time (same
endpoint test, and Newton's certificate at the point it returns), for comparison.

Gradients never differentiate the iterations: the information uses the envelope theorem,
:math:`dC/d\theta = \partial f/\partial\theta\,(\alpha^*)`, and :math:`\alpha^*` the implicit
function theorem on :math:`f'(\alpha^*) = 0`,
:math:`d\alpha^*/d\theta = -(\partial f'/\partial\theta)/f''(\alpha^*)` (zero when
:math:`\alpha^*` sits at an end point).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from jaxdp import _jit
from jaxdp import _special as sp
from jaxdp._checks import MAX_STEPS
from jaxdp.coefficient import (
    check_pair,
    group_product,
    kernel_for,
    nan_where_invalid,
    raw_log_bc,
    standardize,
)
from jaxdp.distributions import (
    Density,
    DiscreteLaplace,
    Distribution,
    Gaussian,
    Laplace,
    Product,
)
from jaxdp.kernels import quadrature

__all__ = ["ChernoffResult", "chernoff"]


class ChernoffResult(NamedTuple):
    """Result of :func:`chernoff` (a pytree; every field has the pair's batch shape).

    Attributes:
      information: Chernoff information :math:`C(P,Q)` in nats (``inf`` for disjoint
        supports, 0 for ``P == Q``; ``inf`` with ``converged`` False where it overflowed,
        for pairs whose supports coincide).
      alpha: the maximiser :math:`\\alpha^* \\in [0, 1]` (1/2 for ``P == Q``).
      derivative: the certificate :math:`f'(\\alpha^*)`: ~0 at an interior optimum; at
        :math:`\\alpha^* = 0` it is :math:`\\le 0`, at :math:`\\alpha^* = 1` it is :math:`\\ge 0`.
      converged: whether the solver met its tolerance (``False`` with ``nan`` values for
        invalid parameters under ``jit``).
      iterations: derivative evaluations of the solver after the one at the start, each
        followed by a Newton, Halley or bisection step (an evaluation at the last, small
        step does not count); L-BFGS iterations for ``method="optax"``. 0 when the
        closed-form start needed only a polishing step.
    """

    information: jax.Array
    alpha: jax.Array
    derivative: jax.Array
    converged: jax.Array
    iterations: jax.Array


def _setup(P, Q):
    """Per-pair constants for :func:`_grad2` (hoisted out of the solver loop)."""
    if isinstance(P, Product):
        return tuple(_setup(p, q) for p, q in zip(P.components, Q.components, strict=True))
    kernel = kernel_for(P, Q)
    P, Q = standardize(P, Q)
    if hasattr(kernel, "derivs_setup"):
        return kernel.derivs_setup(P, Q)
    return (P, Q)


def _grad2(P, Q, consts, a):
    """``(d/da, d2/da2)`` of ``log C_a``, elementwise.

    A kernel module may provide ``derivs_setup``/``derivs`` (hand-written derivatives,
    tested equal to autodiff); otherwise nested forward-mode autodiff of ``log_bc``.
    """
    if isinstance(P, Product):
        d1 = d2 = 0.0
        for (p, n), q, c in zip(P._items(), Q.components, consts, strict=True):
            e1, e2 = _grad2(p, q, c, a)
            d1, d2 = d1 + n * e1, d2 + n * e2
        return d1, d2
    kernel = kernel_for(P, Q)
    if hasattr(kernel, "derivs"):
        return kernel.derivs(consts, a)
    P, Q = consts
    ones = jnp.ones_like(a)

    def first(a):
        return jax.jvp(lambda t: raw_log_bc(P, Q, t, unit=True, solver=True), (a,), (ones,))[1]

    return jax.jvp(first, (a,), (ones,))


def _always_interior(P, Q) -> bool:
    """True for pairs whose supports coincide, so the optimum is interior (or P == Q)."""
    if isinstance(P, Product):
        return all(_always_interior(p, q) for p, q in zip(P.components, Q.components, strict=True))
    return getattr(kernel_for(P, Q), "SAME_SUPPORT", False)


def _initial(P, Q, consts, shape, dtype):
    """Starting point of the solver: the kernel's closed-form guess where it has one."""
    if not isinstance(P, Product):
        kernel = kernel_for(P, Q)
        if hasattr(kernel, "initial_alpha"):
            a0 = jnp.broadcast_to(kernel.initial_alpha(consts).astype(dtype), shape)
            # a guess is only a guess: anything not strictly inside (0, 1) starts at 1/2
            return jnp.where((a0 > 0) & (a0 < 1), a0, 0.5)
    return jnp.full(shape, 0.5, dtype)


def _endpoints(P, Q, consts, shape, dtype):
    """Derivative of ``log C`` at 0 and 1 (``-D(Q||P)`` and ``D(P||Q)`` when the supports
    agree; evaluated only for pairs whose supports may differ)."""
    if _always_interior(P, Q):
        inf = jnp.full(shape, jnp.inf, dtype)
        return -inf, inf
    ends = jnp.asarray([0.0, 1.0], dtype).reshape((2,) + (1,) * len(shape))
    d1, _ = _grad2(P, Q, consts, jnp.broadcast_to(ends, (2, *shape)))
    d1 = jnp.broadcast_to(d1, (2, *shape))
    return d1[0], d1[1]


class _Solve(NamedTuple):
    """What a solver hands to :func:`_chernoff` (all elementwise, no gradients)."""

    alpha: jax.Array  # the maximiser
    value: jax.Array  # log C at alpha
    deriv: jax.Array  # f'(alpha)
    certified: jax.Array
    done: jax.Array
    at_end: jax.Array
    iterations: jax.Array


def _newton(P, Q, shape, dtype, max_steps, start=None, locate=False):
    r"""Safeguarded Newton (Halley where the kernel supplies a third derivative) on
    :math:`f'`, from the kernel's initial guess, in one loop.

    Every trip evaluates the derivatives of ``log C`` at each unfinished element's current
    point ``x``, shrinks its bracket, and moves ``x`` to the next point: ``x + s`` for a
    Newton/Halley step ``s`` that stays inside the bracket, else the bracket's midpoint. An
    element is finished once its step is at most ``tol * min(x, 1 - x)``, with ``tol =
    sqrt(eps)/10`` for Newton and ``eps**(1/3)/10`` for Halley, so that the error left after
    taking that step, ``O(s^2)`` or ``O(s^3)``, is at rounding level; with Halley steps also
    only once that error, predicted from the third derivative, is (near a kink of ``f`` it
    is not: see ``newton_step``). For kernels with a
    one-pass ``value_derivs`` the step is taken without another trip, and after the loop the
    value, :math:`f'` (the certificate, which must satisfy
    :math:`|f'| \le \sqrt{\epsilon}\,|f''|`) and :math:`f''` are evaluated once, at the
    returned alpha (the value once per pair, not once per trip: on Laplace pairs, where the
    value needs its own ``log1p`` and series, that is ~25% of the run time in float64).
    Other kernels evaluate :math:`f'` and :math:`f''` at the small step by one more trip,
    and only the value after the loop.

    ``start``: the starting point instead of the kernel's guess (an earlier solve's answer).
    ``locate``: the optimum only, for a second solve to refine: no end-point tests and no
    value (``nan``) for kernels without a one-pass ``value_derivs``.
    """
    eps = jnp.finfo(dtype).eps
    consts = _setup(P, Q)
    packed, unpack = _pack(consts, (P, Q), shape, dtype)
    consts = unpack(packed)
    halley = _has_third(P, Q)
    tol = 0.1 * (eps ** (1 / 3) if halley else jnp.sqrt(eps))
    if locate:  # (no end-point tests: the loop's bisection finds an optimum there too)
        d0 = d1 = jnp.zeros(shape, dtype)
    else:
        d0, d1 = _endpoints(P, Q, consts, shape, dtype)
    # f = -log C, so f' = -d log C/da: optimum at 0 if f'(0) < 0, at 1 if f'(1) > 0.
    at0 = -d0 < 0
    at1 = -d1 > 0
    if start is None:
        start = _initial(P, Q, consts, shape, dtype)
    else:  # (from an earlier solve: anything not strictly inside (0, 1) starts at 1/2)
        start = jnp.where((start > 0) & (start < 1), start, 0.5).astype(dtype)
    x0 = jnp.where(at0, 0.0, jnp.where(at1, 1.0, start))

    def newton_step(g, h, t, x):
        # Newton -g/h, or Halley -g/(h (1 - g t / (2 h^2))) = -g h/(h^2 - g t/2) while that
        # factor stays within (1/2, 2); one division either way. nan where f is not
        # concave (h >= 0: no step), tested inside the division so that h and t are read
        # by that one kernel only (kernels need not store them: jaxdp._special.stored).
        # Nor where f'' overflowed (h = -inf): a step of 0 there ended the loop at once,
        # uncertified (Laplace at eps ~1e300 stopped at its start 1/2, f' rounded to
        # 3.8e283: converged=False); bisection instead collapses the bracket, which
        # certifies a kink at float resolution (see finish).
        concave = (h < 0) & (h > -jnp.inf)
        if not halley:
            return -g / jnp.where(concave, h, jnp.nan)
        h2 = h * h
        den = h2 - 0.5 * g * t
        mild = (den > 0.5 * h2) & (den < 2.0 * h2)
        s = -g * jnp.where(mild, h, 1.0) / jnp.where(concave, jnp.where(mild, den, h), jnp.nan)
        # May this step be the last? The loop's small-step test (|s| <= tol min(x, 1 - x))
        # assumes the asymptotic regime, where a Halley step leaves an error ~k^2 |s| and a
        # Newton step ~k |s|, k = |g t|/h^2 = |s|/L for the length L = |h/t| over which f''
        # changes. Near a kink of f (Laplace and discrete Laplace pairs whose shift is ~1e7
        # scales: L ~ 1e-8), k is ~0.5 and the step left 1e-8 of alpha (1e-9 of the
        # information) while passing that test. Steps whose predicted error exceeds
        # eps min(x, 1 - x), to a factor of ~32 (a heuristic: powers of two from the
        # exponent bits, |s| as |g/h|; no division, which would make s a kernel of its own
        # and g, h, t read by two), carry a flag: the lowest mantissa bit of s set (the
        # others have it clear), so that the loop's test reads it from s alone (a change
        # of s by one ulp of itself).
        eg, et, eh = _exponent(g), _exponent(t), _exponent(h)
        log_k = eg + et - 2 * eh
        log_err = jnp.where(mild, 2 * log_k, log_k) + (eg - eh)
        last_ok = log_err <= _exponent(eps * jnp.minimum(x, 1.0 - x))
        return _flag_step(s, ~last_ok)

    def signed_step(g, h, t, x):
        # The step, and +-inf with the sign of g where f is not concave (or f'' overflowed:
        # see newton_step), 0 where g = 0, nan
        # where g is: then sign(r) = sign(g) everywhere (h < 0 where there is a step), and r
        # carries all that the trip needs of f' too. The derivatives then reach one kernel
        # only, this division's, and are computed once per trip without being stored,
        # instead of in that kernel and again in those of the bracket and status updates
        # (benchmarks/compare_trees.py against trees with SIGNED_STEP = False: Laplace, with
        # its value-only store, ~13% faster in float64 and ~11% in float32, Gaussian ~5% in
        # float32; discrete Laplace opts out, see _signed_step).
        step = (h < 0) & (h > -jnp.inf)
        r = jnp.where(step, newton_step(g, h, t, x), jnp.where(g > 0, jnp.inf, -jnp.inf))
        return jnp.where(g == 0, 0.0, jnp.where(jnp.isnan(g), jnp.nan, r))

    # Loop state: the point x (the next to evaluate; the answer once finished), the bracket
    # [lo, hi] and a status number: the count c of evaluations so far while unfinished (>= 0,
    # the same for every unfinished element), -1 - c once finished. On XLA:CPU, which has no
    # multi-output fusion, every loop-carried array costs a compiled kernel (~17 ms of
    # compile time each: benchmarks/kernels.py --fusion-cost), so the state is kept this
    # small: nothing that the next trip can recompute from x is carried, and the loop
    # condition is one max-reduction of the status. A kernel without a one-pass
    # value_derivs (categorical, quadrature) evaluates its derivatives at the small last
    # step in the loop instead, by one more trip (status c + 1/2 while that step is
    # pending), and carries f' and f'' for the certificate: after the loop it then needs its
    # value only, whose code shares nothing with the hand-written derivatives (evaluating
    # both there cost 13 more kernels on the quadrature path).
    one_pass = _one_pass(P, Q)
    signed = _signed_step(P, Q)

    # The state is stacked into arrays, each written by one kernel per trip, where separate
    # arrays take one kernel each (compile time; see _pack): all of it in one array, rows x,
    # lo, hi, status[, f', f'']; or, where the step's own kernel evaluates the derivatives
    # (the signed step of a one-pass kernel), in two, (x, status) and (lo, hi): a kernel
    # writing every row would absorb that code (its only reader) and run it once per row,
    # while with two readers the step stays one stored kernel.
    # Float32 keeps separate arrays, as for the constants (see _pack): stacked, Laplace and
    # Gaussian ran 5-6% slower, discrete Laplace ~5% (benchmarks/compare_trees.py).
    plain = dtype != jnp.float64
    split = signed and one_pass and not plain

    # Split, the status is stored plus 2 (exact: small integers), above every x in [0, 1]
    # exactly while unfinished: the loop test then reduces the whole (x, status) array, not
    # a slice of it (a slice is a kernel of its own).
    def stack_state(rows):
        if plain:
            return tuple(rows)
        if split:
            x, lo, hi, status = rows
            return jnp.stack([x, status + 2.0]), jnp.stack([lo, hi])
        return jnp.stack(rows)

    def unstack_state(state):
        if split:
            (x, status), (lo, hi) = state
            return [x, lo, hi, status - 2.0]
        return list(state)

    def cond(state):
        if split:
            top = jnp.max(state[0]) - 2.0
        else:
            top = jnp.max(unstack_state(state)[3])
        return (top >= 0) & (top <= max_steps)

    def body(state):
        # XLA would hoist every loop-invariant expression of the parameters out of the loop,
        # each into a kernel of its own (compile time), to save a few additions per trip:
        # the barrier makes the per-pair constants look loop-variant to it.
        packed_, state = _barrier((packed, state))
        x, lo, hi, status, *carried = unstack_state(state)
        consts_ = unpack(packed_)
        active = status >= 0
        if split:  # the bracket starts as [0, 1] (see the initial state)
            lo = jnp.where(status == 0, 0.0, lo)
            hi = jnp.where(status == 0, 1.0, hi)
        if one_pass:  # its value is unused here: XLA drops that part of the kernel
            _, n1, n2, n3 = _value_derivs(P, Q, consts_, x)
        else:
            (n1, n2), n3 = _grad2(P, Q, consts_, x), None
        g, h, t = -n1, -n2, (-n3 if halley else 0.0)
        s = signed_step(g, h, t, x) if signed else newton_step(g, h, t, x)
        if split or (halley and not signed):
            # stored: the state kernels read it (it would be fused into each; for the flagged
            # step of a kernel without the signed step, with its derivatives: discrete
            # Laplace 4.5x slower in float64)
            (s,) = sp.stored(x, s)
        sg = s if signed else g  # the same signs, zeros and nans (signed_step)
        # f is concave: the optimum lies right of x where f'(x) > 0, left where f'(x) < 0.
        lo = jnp.where(active & (sg > 0), x, lo)
        hi = jnp.where(active & (sg < 0), x, hi)
        # no step where f is not concave there or the step leaves the bracket
        s = jnp.where(jnp.isfinite(s) & (x + s >= lo) & (x + s <= hi), s, jnp.nan)
        # (or the step is below the spacing of x: float32 with alpha* within ~1e-7 of 1)
        small = jnp.abs(s) <= tol * jnp.minimum(x, 1 - x)
        if halley:  # (a flagged step is not the last, unless it cannot move x: newton_step)
            small = small & ~_step_flagged(s)
        small = small | (x + s == x)
        stop = (sg == 0) | (hi - lo <= 4 * eps) | jnp.isnan(sg)
        step = jnp.where(jnp.isnan(s), jnp.where(stop, x, 0.5 * (lo + hi)), x + s)
        if one_pass:  # the status of an unfinished element is its count of evaluations
            count = status + 1
            x = jnp.where(active, step, x)
            status = jnp.where(active, jnp.where(small | stop, -1.0 - count, count), status)
            return stack_state([x, lo, hi, status])
        c = jnp.floor(status)
        count = c + 1
        # this trip evaluated at a pending small step: the element is finished there
        pending = active & (status > c)
        x = jnp.where(active & ~pending, step, x)
        new = jnp.where(stop, -1.0 - count, jnp.where(small, count + 0.5, count))
        status = jnp.where(pending, -1.0 - c, jnp.where(active, new, status))
        g_at, h_at = carried
        g, h = jnp.where(active, g, g_at), jnp.where(active, h, h_at)
        return stack_state([x, lo, hi, status, g, h])

    def finish(state):
        alpha, lo, hi, status, *carried = unstack_state(state)
        if one_pass:
            value, d1, d2, _ = _value_derivs(P, Q, consts, alpha)  # d3: dead, dropped
            g, h = -d1, -d2
        else:
            # stored: each output kernel reads it, and would otherwise recompute it
            if locate:
                value = jnp.full(shape, jnp.nan, dtype)
            else:
                value = raw_log_bc(P, Q, alpha, unit=True, solver=True)
            (value,), (g, h) = sp.stored(alpha, value), carried
        done = status < 0
        evals = jnp.where(done, -1.0 - status, jnp.floor(status))
        certified = _newton_certified(g, h, eps)
        # Or the bracket certifies: collapsed to a few ulp around alpha (f' changes sign in
        # it, f concave), and |f'| times its width, a bound on the value's error, is ulp-sized
        # relative to the value. A maximum that is a kink at float resolution (discrete
        # Laplace at eps ~1e100: f' jumps from -1/b2 to 1/b1 within e^(-1/b) of alpha*)
        # passes this one, never the derivative test.
        width = hi - lo
        certified |= (width <= 4 * eps) & (jnp.abs(g) * width <= 16 * eps * jnp.abs(value))
        at_end = at0 | at1 | jnp.isnan(g)
        iterations = jnp.maximum(evals - 1, 0).astype(jnp.int32)
        return _Solve(alpha, value, g, certified, done, at_end, iterations)

    # an element at an end point is finished before the loop (no evaluation there; its f'
    # is the end point's, from the test above)
    status = jnp.where(at0 | at1, -1.0, 0.0).astype(dtype)
    x0 = x0.astype(dtype)
    if split:
        # the bracket starts as a copy of (x0, status), read as [0, 1] by the first trip: a
        # copy compiles to a memcpy, where filling an array with a constant takes a kernel
        xs = jnp.stack([x0, status + 2.0])
        state = (xs, xs)
    else:
        zeros = jnp.zeros(shape, dtype)
        rows = [x0, zeros, jnp.ones(shape, dtype), status]
        if not one_pass:
            rows += [jnp.where(at0, -d0, jnp.where(at1, -d1, 0.0)).astype(dtype), zeros]
        state = stack_state(rows)
    state = lax.while_loop(cond, body, state)
    return finish(state)


def _int_type(x):
    return jnp.int64 if x.dtype == jnp.float64 else jnp.int32


def _exponent(x):
    """``floor(log2 |x|)`` from the exponent bits (integers; -bias for 0 and subnormals,
    bias + 1 for inf and nan)."""
    info = jnp.finfo(x.dtype)
    bits = lax.bitcast_convert_type(x, _int_type(x))
    bias = 2 ** (info.nexp - 1) - 1
    return ((bits >> info.nmant) & (2 * bias + 1)) - bias


def _flag_step(s, flag):
    """``s`` with its lowest mantissa bit set where ``flag`` and cleared elsewhere (finite,
    nonzero ``s`` only: 0, inf and nan pass unchanged). On the bits alone, so that ``s`` has
    one reader here."""
    info = jnp.finfo(s.dtype)
    bits = lax.bitcast_convert_type(s, _int_type(s))
    magnitude = bits & (2 ** (info.bits - 1) - 1)  # the sign bit cleared
    finite_nonzero = (magnitude != 0) & (magnitude < (2**info.nexp - 1) << info.nmant)
    flagged = jnp.where(flag, bits | 1, bits & ~1)
    return lax.bitcast_convert_type(jnp.where(finite_nonzero, flagged, bits), s.dtype)


def _step_flagged(s):
    """Whether :func:`_flag_step` flagged ``s`` (False for 0, inf and nan)."""
    bit = (lax.bitcast_convert_type(s, _int_type(s)) & 1) == 1
    return bit & jnp.isfinite(s) & (s != 0)


def _pack(consts, params, shape, dtype):
    """Stack the computed array leaves of ``consts`` (the per-pair constants of hand-written
    derivatives) whose shapes end in the batch's shape into one float array (booleans as
    0/1).

    XLA:CPU has no multi-output fusion: every array that the solver loop reads is written by
    a kernel of its own (~20 ms of compile time each). One stacked array is one kernel (a
    concatenation that recomputes whatever its rows share). Returns ``(packed, unpack)``,
    ``unpack(packed)`` giving back the tree (rows are slices, fused into their readers)."""
    if dtype != jnp.float64 or not shape:
        # float32 ran slower packed (one core, batch 1e5, benchmarks/compare_trees.py:
        # Laplace 33 -> 40 ns/pair, Gaussian 16 -> 19; float64 equal or faster); a scalar
        # pair (under vmap) would stack arrays over quadrature nodes (25% slower)
        return consts, lambda packed: packed
    # distributions stay whole (kernels without hand-written derivatives)
    leaves, treedef = jax.tree_util.tree_flatten(
        consts, is_leaf=lambda x: isinstance(x, Distribution)
    )
    inputs = jax.tree_util.tree_leaves(params)
    nd = len(shape)
    rows = [
        i
        for i, x in enumerate(leaves)
        if isinstance(x, jax.Array)
        and x.ndim >= nd
        and x.shape[x.ndim - nd :] == shape
        and (x.dtype == dtype or x.dtype == bool)
        and not any(x is y for y in inputs)
    ]
    if not rows or (len(rows) == 1 and leaves[rows[0]].ndim == nd):
        return consts, lambda packed: packed
    parts = [leaves[i].astype(dtype).reshape((-1, *shape)) for i in rows]
    sizes = [p.shape[0] for p in parts]
    # (behind a barrier, which XLA does not look through: it would otherwise read each row
    # from the kernel that computed it, keeping all of them)
    stacked = lax.optimization_barrier(jnp.concatenate(parts))

    def unpack(packed):
        out = list(leaves)
        start = 0
        for i, n in zip(rows, sizes, strict=True):
            x = leaves[i]
            part = packed[start : start + n].reshape(x.shape)
            out[i] = part != 0 if x.dtype == bool else part
            start += n
        return jax.tree_util.tree_unflatten(treedef, out)

    return stacked, unpack


def _barrier(tree):
    """``lax.optimization_barrier`` on the array leaves of ``tree`` (static leaves pass)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    arrays = [i for i, x in enumerate(leaves) if isinstance(x, jax.Array)]
    out = lax.optimization_barrier([leaves[i] for i in arrays])
    for i, x in zip(arrays, out, strict=True):
        leaves[i] = x
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _newton_certified(g, h, eps):
    r"""The optimality certificate: the Newton step :math:`|f'/f''|` from the returned point
    is at most :math:`\sqrt{\epsilon}`, so the value is within :math:`\sim\epsilon |f''|` of
    the maximum. (An overflowed :math:`f''` certifies nothing, as :math:`|f'| \le \infty`
    holds for :math:`f' = \infty` too; :math:`f' = 0` exactly needs no :math:`f''`: discrete
    Laplace at eps > ~1e154, whose :math:`f''` overflows, at its symmetric optimum 1/2.)"""
    return ((jnp.abs(g) <= jnp.sqrt(eps) * jnp.abs(h)) & (jnp.abs(h) < jnp.inf)) | (g == 0)


def _lbfgs(P, Q, shape, dtype, max_steps, start=None):
    r"""``optax.lbfgs`` (zoom line search) on :math:`z = \mathrm{logit}(\alpha)`, minimising
    :math:`\log C_{\sigma(z)}` from :math:`z = 0`. ``chernoff`` calls it one pair at a time
    (``lax.map``): each pair has its own L-BFGS memory, line search and stopping test (one
    L-BFGS over the sum of a batch shares its line search and curvature pairs across the
    batch, and stalled on batches whose scales differ). It stops when the step in ``z`` is
    at most :math:`\sqrt{\epsilon}` (L-BFGS in one dimension is a secant method: the error
    after such a step is far smaller) and is certified by Newton's test,
    :func:`_newton_certified`, at the returned point. ``start``: the starting point
    instead of 1/2 (an earlier solve's answer, strictly inside (0, 1))."""
    consts = _setup(P, Q)
    d0, d1 = _endpoints(P, Q, consts, shape, dtype)
    at0, at1 = d0 > 0, d1 < 0

    # in units of the Bhattacharyya distance: L-BFGS's first step is the gradient itself,
    # ~1e-33 long for a pair whose information is ~1e-33, and its stopping test is absolute
    unit = -raw_log_bc(P, Q, jnp.full(shape, 0.5, dtype), unit=True, solver=True)
    unit = jnp.where((unit > 0) & (unit < jnp.inf), unit, 1.0)

    def objective(z):
        return jnp.sum(raw_log_bc(P, Q, jax.nn.sigmoid(z), unit=True, solver=True) / unit)

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)
    eps = jnp.finfo(dtype).eps
    tol = jnp.sqrt(eps)

    def cond(carry):
        _, _, it, step = carry
        # (a nan step, e.g. of a pair with disjoint supports, stops too; a pair whose optimum
        # the end-point test placed at 0 or 1 is not iterated: L-BFGS ran all max_steps
        # iterations there, towards z = -inf or inf, and reported them)
        return (it < max_steps) & jnp.any((step > tol) & ~(at0 | at1))

    def body(carry):
        z, opt_state, it, _ = carry
        value, grad = value_and_grad(z, state=opt_state)
        updates, opt_state = opt.update(
            grad, opt_state, z, value=value, grad=grad, value_fn=objective
        )
        return z + updates, opt_state, it + 1, jnp.abs(updates)

    if start is None:
        z0 = jnp.zeros(shape, dtype)
    else:
        start = jnp.where((start > 0) & (start < 1), start, 0.5).astype(dtype)
        z0 = jnp.log(start) - jnp.log1p(-start)
    init = (z0, opt.init(z0), 0, jnp.full(shape, jnp.inf, dtype))
    z, _, it, _ = lax.while_loop(cond, body, init)
    a = jnp.where(at0, 0.0, jnp.where(at1, 1.0, jax.nn.sigmoid(z)))
    value, g1, g2, _ = _value_derivs(P, Q, consts, a)
    g, h = -g1, -g2
    certified = _newton_certified(g, h, eps)
    done = jnp.ones(shape, bool)
    at_end = at0 | at1 | jnp.isnan(g)  # as in _newton (pairs with no end point: d0 + d1 = nan)
    return _Solve(a, value, g, certified, done, at_end, jnp.full(shape, it, jnp.int32))


_METHODS = {"newton": _newton, "optax": _lbfgs}


def _value_derivs(P, Q, consts, a):
    """``(log C_a, d/da log C_a, d2/da2 log C_a)`` in one pass (the kernel's
    ``value_derivs`` where it has one, sharing its transcendentals)."""
    if isinstance(P, Product):
        v = d1 = d2 = 0.0
        for (p, n), q, c in zip(P._items(), Q.components, consts, strict=True):
            e0, e1, e2, _ = _value_derivs(p, q, c, a)
            v, d1, d2 = v + n * e0, d1 + n * e1, d2 + n * e2
        return v, d1, d2, None
    kernel = kernel_for(P, Q)
    if hasattr(kernel, "value_derivs"):
        out = _traced_once(kernel.value_derivs)(consts, a)
        return out if len(out) == 4 else (*out, None)
    d1, d2 = _grad2(P, Q, consts, a)
    return raw_log_bc(P, Q, a, unit=True, solver=True), d1, d2, None


@functools.cache
def _traced_once(fn):
    """``fn`` under a nested ``jax.jit``: the solver calls a kernel's ``value_derivs`` in its
    loop and again after it, with the same shapes; JAX then traces and lowers it once
    (XLA inlines both calls)."""
    return jax.jit(fn)


def _one_pass(P, Q) -> bool:
    """Whether the kernel(s) compute the value with the derivatives at no extra cost."""
    if isinstance(P, Product):
        return all(_one_pass(p, q) for p, q in zip(P.components, Q.components, strict=True))
    return hasattr(kernel_for(P, Q), "value_derivs")


def _swap_mask(P, Q):
    r"""Where the kernel asks for the pair to be solved as (Q, P) (``swap_mask``; None when
    it has none): Laplace and Gaussian pairs whose scale ratio would overflow
    :math:`e^\rho` (the mirror image keeps every constant finite)."""
    if isinstance(P, Product):
        return None
    kernel = kernel_for(P, Q)
    return kernel.swap_mask(P, Q) if hasattr(kernel, "swap_mask") else None


def _mirror(swap, P, Q):
    """``(Q, P)`` where ``swap``, ``(P, Q)`` elsewhere (elementwise over the batch)."""
    return (
        jax.tree_util.tree_map(lambda x, y: jnp.where(swap, y, x), P, Q),
        jax.tree_util.tree_map(lambda x, y: jnp.where(swap, y, x), Q, P),
    )


def _signed_step(P, Q) -> bool:
    """Whether the loop reads the signs of f' from its step (``signed_step``); a kernel
    module may opt out with ``SIGNED_STEP = False``, as discrete Laplace does (10-19% slower
    in float32 that way, though 10-13% faster in float64; not understood yet)."""
    if isinstance(P, Product):
        return all(_signed_step(p, q) for p, q in zip(P.components, Q.components, strict=True))
    return getattr(kernel_for(P, Q), "SIGNED_STEP", True)


def _has_third(P, Q) -> bool:
    """Whether the kernel's ``value_derivs`` also returns the third derivative."""
    if isinstance(P, Product):
        return False
    return getattr(kernel_for(P, Q), "THIRD_DERIVATIVE", False)


@jax.custom_jvp
def _envelope(value, a_star, P, Q):
    r"""``value`` (= ``log C`` at ``a_star``, computed by the solver); its tangent is the
    envelope theorem's :math:`\partial_\theta \log C_{\alpha}(P, Q)` at
    :math:`\alpha = \alpha^*`."""
    return value


@_envelope.defjvp
def _envelope_jvp(primals, tangents):
    value, a_star, P, Q = primals
    _, _, tP, tQ = tangents
    # alpha* as the differentiable function of the parameters (the identity here): the
    # tangent's own derivative then has the term d^2 f/(d theta d alpha) d alpha*/d theta,
    # so second and higher derivatives are exact too, not only the gradient
    a = _implicit_alpha(a_star, P, Q)
    _, t = jax.jvp(lambda P, Q: raw_log_bc(P, Q, a, unit=True, solver=True), (P, Q), (tP, tQ))
    return value, jnp.broadcast_to(t, value.shape).astype(value.dtype)


@jax.custom_jvp
def _implicit_alpha(a_star, P, Q):
    """``a_star`` itself; its tangent comes from the implicit function theorem."""
    return a_star


@_implicit_alpha.defjvp
def _implicit_alpha_jvp(primals, tangents):
    # f'(a*, theta) = 0  =>  d a*/d theta = -(d f'/d theta) / f''(a*); zero at an end point.
    a_star, P, Q = primals
    _, tP, tQ = tangents
    # recursively the differentiable alpha*(theta) (identity at this order): derivatives of
    # this tangent, i.e. second derivatives of alpha*, follow it (the solver's point is a
    # constant to JAX)
    a_star = _implicit_alpha(a_star, P, Q)
    a_eval, sign = a_star, 1.0
    swap = _swap_mask(lax.stop_gradient(P), lax.stop_gradient(Q))
    if swap is not None:
        # pairs the solver took as (Q, P) (constants overflow the other way round):
        # f_PQ(a) = f_QP(1 - a), so f_PQ' = -f_QP' there and f'' is the same
        (P, Q), (tP, tQ) = _mirror(swap, P, Q), _mirror(swap, tP, tQ)
        a_eval = jnp.where(swap, 1.0 - a_star, a_star)
        sign = jnp.where(swap, -1.0, 1.0)

    def d1_of(P, Q):
        return _grad2(P, Q, _setup(P, Q), a_eval)

    (_d1, d2), (t1, _) = jax.jvp(d1_of, (P, Q), (tP, tQ))
    interior = (a_star > 0) & (a_star < 1)
    safe = interior & (d2 != 0) & jnp.isfinite(d2)
    return a_star, jnp.where(safe, -sign * t1 / jnp.where(safe, d2, 1.0), 0.0)


def chernoff(
    P: Distribution, Q: Distribution, *, method: str = "newton", max_steps: int = 100
) -> ChernoffResult:
    r"""Exact Chernoff information :math:`C(P,Q) = \max_{\alpha\in[0,1]} -\log C_\alpha(P,Q)`.

    Args:
      P, Q: distributions (batch shapes broadcast).
      method: ``"newton"`` (default; safeguarded Newton on :math:`f'`) or ``"optax"``
        (``optax.lbfgs`` on the logit of :math:`\alpha`, one pair at a time: a reference
        for the default, on Laplace pairs ~200x slower to run and ~3x slower to compile,
        ``benchmarks/results/quick``; certified by the same test, without the bracket test
        that certifies kinks at float resolution).
      max_steps: static iteration cap.

    Returns:
      :class:`ChernoffResult`. Differentiable (``jax.grad``/``jvp``) with respect to every
      float field of ``P`` and ``Q``: ``information`` by the envelope theorem and ``alpha``
      by the implicit function theorem; the solver's iterations are never differentiated.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    if (
        isinstance(max_steps, bool)
        or not isinstance(max_steps, int | np.integer)  # (np.int64(5) was refused)
        or max_steps < 1
    ):
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    max_steps = min(int(max_steps), MAX_STEPS)
    check_pair(P, Q)
    return _chernoff_dispatch(P, Q, method, max_steps, _closes_over_traced(P, Q))


#: On CPU, large batches of scalar-parameter pairs are solved in chunks of this many pairs
#: (a ``lax.fori_loop`` over the chunks): the solver's intermediates then stay in cache
#: (one core, batch 1e5: Laplace 183 vs 258 ns/pair unchunked, Gaussian 71 vs 114; chunks
#: of 2048 to 16384 pairs are equally fast, in float32 too: float32 chunks of 8192 pairs, the
#: same bytes, were within 2-8% of 4096 either way in interleaved runs of
#: benchmarks/compare_trees.py). A kernel module may set its own ``CPU_CHUNK`` (discrete
#: Laplace, whose loop carries more per-pair constants: 1024).
CPU_CHUNK = 4096


def _cpu_chunk(P, Q) -> int:
    if isinstance(P, Product):
        return CPU_CHUNK
    return getattr(kernel_for(P, Q), "CPU_CHUNK", CPU_CHUNK)


def _scalar_leaves(d) -> bool:
    if isinstance(d, Product):
        return all(_scalar_leaves(c) for c in d.components)
    return isinstance(d, Laplace | Gaussian | DiscreteLaplace)


def _densities(d) -> list:
    if isinstance(d, Product):
        return [x for c in d.components for x in _densities(c)]
    return [d] if isinstance(d, Density) else []


def _closes_over_traced(P, Q) -> bool:
    """Whether a :class:`~jaxdp.Density` of the pair has a log-density that closes over a
    traced value (``Density(lambda x: log_p(x, theta))`` under ``jax.grad`` in ``theta``)
    instead of taking it as ``params`` (see :func:`_closure_terms`). Not traced at all
    outside every transformation (a closure cannot hold a live tracer there): the test
    traces ``log_prob``, 0.3 ms of a 0.7 ms eager call of a Density pair."""
    densities = _densities(P) + _densities(Q)
    if not densities or not _tracing():
        return False
    return any(d._closed_over() for d in densities)


def _tracing() -> bool:
    """Whether a JAX transformation is being traced (JAX has no public test for it; if
    the private one moves, every call is taken as traced, which is only slower)."""
    try:
        from jax._src import core

        return not core.trace_state_clean()
    except Exception:  # pragma: no cover
        return True


class _Frozen:
    """A log-density with the traced values it closes over held fixed (``stop_gradient``),
    found anew at each call's shapes by ``jax.closure_convert``: the solver then carries no
    derivatives through its loops, as with ``params`` (:func:`_closure_terms` adds them).
    Equal when the wrapped functions are (``jit`` caches)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x, *params):
        converted, consts = jax.closure_convert(self.fn, x, *params)
        return converted(x, *params, *lax.stop_gradient(consts))

    def __eq__(self, other):
        return isinstance(other, _Frozen) and other.fn == self.fn

    def __hash__(self):
        return hash((_Frozen, self.fn))


def _frozen(d):
    """``d`` with each Density's log-density a :class:`_Frozen` one."""
    if isinstance(d, Product):
        return Product._of([_frozen(c) for c in d.components], d.counts)
    if not isinstance(d, Density):
        return d
    return d._with(log_prob_fn=_Frozen(d.log_prob_fn))


def _closure_terms(res, P, Q):
    r"""The derivatives of ``res``, solved for ``stop_gradient((P, Q))``, in every value the
    pair depends on: its leaves and what a Density's log-density closes over.

    The custom rules of :func:`_chernoff` differentiate the pytree leaves of ``P`` and ``Q``
    only; a value a log-density closes over (``Density(lambda x: log_p(x, theta))``) got a
    derivative of 0 from them, silently, and JAX could not differentiate the rules when
    leaves and closed-over values varied together. Here the terms are added as
    ``t - stop_gradient(t)``, which is 0 (the values are unchanged) with the derivative of
    ``t``: for :math:`\alpha^*`, ``t = -f'(\alpha^*)/f''`` with :math:`f''` held fixed
    (the implicit function theorem, :math:`d\alpha^*/d\theta = -\partial_\theta f'/f''`),
    and for the information, ``t = -log C`` at that differentiable :math:`\alpha^*` (the
    envelope theorem at first order, as :math:`f'(\alpha^*) = 0`; exact second
    derivatives too, since :math:`\partial_\alpha \partial_\theta \log C + f''
    d\alpha^*/d\theta = 0`). The price: one more evaluation of :math:`f', f''` and of
    ``log C`` at the optimum.
    """
    P, Q = group_product(P, Q)
    a_star = lax.stop_gradient(res.alpha)
    if _solved_twice(P, Q):  # with the integrand's peak as a breakpoint, as _chernoff
        P, Q = _refined(P, Q, a_star)
    d1, d2 = _grad2(P, Q, _setup(P, Q), a_star)
    d2 = lax.stop_gradient(d2)
    safe = (a_star > 0) & (a_star < 1) & (d2 != 0) & jnp.isfinite(d2)
    shift = -d1 / jnp.where(safe, d2, 1.0)
    alpha = a_star + jnp.where(safe, shift - lax.stop_gradient(shift), 0.0)
    log_c = raw_log_bc(P, Q, alpha, unit=True, solver=True)
    term = jnp.where(jnp.isfinite(log_c), log_c - lax.stop_gradient(log_c), 0.0)
    return res._replace(
        information=res.information - term.astype(res.information.dtype),
        alpha=alpha.astype(res.alpha.dtype),
    )


@_jit.jit(static_argnums=(2, 3, 4))
def _chernoff_dispatch(P, Q, method, max_steps, closure=False):
    if closure:  # (Density pairs are never solved in chunks: see below)
        frozen = lax.stop_gradient((_frozen(P), _frozen(Q)))
        return _closure_terms(_chernoff_dispatch(*frozen, method, max_steps), P, Q)
    shape = tuple(jnp.broadcast_shapes(P.batch_shape, Q.batch_shape))
    size = math.prod(shape)
    if size == 0:  # an empty batch: nothing to solve (the solver reduces over the batch)
        empty = jnp.zeros(shape, jnp.result_type(P.dtype, Q.dtype, float))
        none = jnp.zeros(shape, bool)
        return ChernoffResult(empty, empty, empty, none, jnp.zeros(shape, jnp.int32))
    # Inside a loop (lax.map, fori_loop) the pairs are solved without tangents, which are
    # attached after it (_reattach): JAX's reverse mode through a loop lost the implicit
    # derivative of alpha* in second derivatives (jax.hessian of the information was
    # d2f/dtheta2 at fixed alpha: 0.0575 for 0.1675), for the optax path and for CPU batches
    # of 16384 pairs and more.
    Ps, Qs = lax.stop_gradient((P, Q))
    if method == "optax":  # one L-BFGS per pair (see _lbfgs)
        flat = [
            jax.tree_util.tree_map(
                lambda x: x.reshape((size, *x.shape[len(shape) :])), d._broadcast_batch(shape)
            )
            for d in (Ps, Qs)
        ]
        # (a sequential map: under vmap, the line search's branches become selects that
        # evaluate both sides; ad hoc, 2000 wide random Laplace pairs, 2 shared cores:
        # first call 8.0 s vs 26 s, then 0.075 s vs 0.9 s)
        out = lax.map(lambda pq: _chernoff(*pq, method, max_steps), flat)
        return _reattach(jax.tree_util.tree_map(lambda x: x.reshape(shape), out), P, Q)
    chunk_size = _cpu_chunk(P, Q)
    if not (
        jax.default_backend() == "cpu"
        and size >= 4 * chunk_size
        and _scalar_leaves(P)
        and _scalar_leaves(Q)
    ):
        return _chernoff(P, Q, method, max_steps)
    # Chunk i covers [start, start + chunk_size) with start = min(i * chunk_size, size -
    # chunk_size): the last chunk overlaps the one before it instead of being padded, and
    # every result is written in place (no padding, reshaping or slicing kernels to compile).
    n_chunks = -(-size // chunk_size)
    Pf, Qf = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape).reshape(-1), (Ps, Qs))
    dtype = jnp.result_type(P.dtype, Q.dtype, float)
    # Every element is overwritten, so the float buffers start as copies of a parameter
    # array: a copy compiles to a memcpy, where filling an array with a constant takes a
    # compiled kernel (~20 ms of compile time each).
    same = [x for x in jax.tree_util.tree_leaves((Pf, Qf)) if x.dtype == dtype]
    fill = [same[0]] * 3 if same else [jnp.full(size, v, dtype) for v in (jnp.nan, 0.5, 0.0)]
    out = ChernoffResult(*fill, jnp.zeros(size, bool), jnp.zeros(size, jnp.int32))

    def chunk(i, out):
        start = jnp.minimum(i * chunk_size, size - chunk_size)
        Pc, Qc = jax.tree_util.tree_map(
            lambda x: lax.dynamic_slice_in_dim(x, start, chunk_size), (Pf, Qf)
        )
        res = _chernoff(Pc, Qc, method, max_steps)
        return jax.tree_util.tree_map(
            lambda o, r: lax.dynamic_update_slice_in_dim(o, r, start, 0), out, res
        )

    out = lax.fori_loop(0, n_chunks, chunk, out)
    return _reattach(jax.tree_util.tree_map(lambda x: x.reshape(shape), out), P, Q)


def _reattach(res, P, Q):
    """``res``, solved without tangents, with the derivatives :func:`_chernoff` gives: the
    envelope theorem for the information, the implicit function theorem for alpha (both
    custom rules whose primal is the identity: nothing is computed without a tangent)."""
    a_star = lax.stop_gradient(res.alpha)
    information = -_envelope(-res.information, a_star, P, Q)
    return res._replace(information=information, alpha=_implicit_alpha(a_star, P, Q))


def _peak_points(P, Q, a):
    r"""The peaks of the integrand :math:`p^a q^{1-a}` (``quadrature.peak_points``) of each
    quadrature pair with a :class:`~jaxdp.Density` (``None`` for other pairs; for a
    :class:`~jaxdp.Product`, a tuple over its components), as breakpoints for a second solve.

    The solver evaluates the plain quadrature rule, on which the integrand's peak can fall
    between nodes: two Gaussian-tailed densities 100 length scales apart have a peak ~1
    scale wide midway, where the nodes are ~2.5 apart (information 5.5e-5 relative off,
    ``a*`` 8e-4, yet certified: the certificate checks the optimum of the rule). Pieces that
    end at the peak for the first answer's ``a`` resolve it near that ``a``, where the second
    solve takes a few steps. Built-in Laplace-vs-Gaussian pairs too: their peak is wider,
    but from ~1000 Laplace scales apart the plain rule missed it as well (information 2.2e-7
    off at 5000 scales, 5.6e-5 for Laplace(0, 0.1) vs N(1000, 1), certified).
    """
    if isinstance(P, Product):
        return tuple(_peak_points(p, q, a) for p, q in zip(P.components, Q.components, strict=True))
    return quadrature.peak_points(P, Q, a) if _solved_twice(P, Q) else None


def _solved_twice(P, Q) -> bool:
    """Whether the pair, or a component of a product, is solved again (:func:`_peak_points`)."""
    if isinstance(P, Product):
        return any(_solved_twice(p, q) for p, q in zip(P.components, Q.components, strict=True))
    return kernel_for(P, Q) is quadrature


def _refined(P, Q, a):
    """``(P, Q)`` with the integrand's peaks at ``a`` (:func:`_peak_points`) among the
    breakpoints of their rule: a :class:`~jaxdp.Density` takes them as its own; a built-in
    Laplace-vs-Gaussian pair is first standardized (``coefficient.standardize``, as its
    kernels are: at scales ~1e-300 the peak's offset ``s^2/b`` underflowed, and the
    information came out 4e-8 off), then its Gaussian or Laplace ``Q`` becomes the same
    density with the points."""
    P, Q = _standardized_mixed(P, Q)
    return _with_points(P, Q, _peak_points(*lax.stop_gradient((P, Q)), a))


def _second_start(P, Q, a):
    """Where the second solve starts and its rule takes the integrand's peaks: the first
    solve's answer ``a``; for a built-in Laplace-vs-Gaussian pair whose peak lies far on the
    Gaussian's side of the kink, the closed-form optimum there
    (``quadrature.laplace_gaussian_optimum``), which the first solve, on the plain rule,
    located only to ~3e-5 (its peak then tens of integrand widths from the true one: the
    information of Laplace(0, 1) vs N(1e9, 1e4) 2.4e-7 relative off, converged)."""
    if not quadrature._laplace_gaussian(P, Q):
        return a
    P, Q = lax.stop_gradient(_standardized_mixed(P, Q))
    return quadrature.laplace_gaussian_optimum(P, Q, a).astype(a.dtype)


def _componentwise(fn, P, Q, *per_component):
    """``fn(p, q, *items)`` on each component pair of the products ``P``, ``Q`` (with the
    matching items of ``per_component``), the resulting pairs put back together as
    products."""
    pairs = [
        fn(p, q, *items)
        for p, q, *items in zip(P.components, Q.components, *per_component, strict=True)
    ]
    return (
        Product._of([p for p, _ in pairs], P.counts),
        Product._of([q for _, q in pairs], Q.counts),
    )


def _standardized_mixed(P, Q):
    """Built-in Laplace-vs-Gaussian pairs (also as components of a product) standardized."""
    if isinstance(P, Product):
        return _componentwise(_standardized_mixed, P, Q)
    return standardize(P, Q) if quadrature._laplace_gaussian(P, Q) else (P, Q)


def _with_points(P, Q, points):
    """``(P, Q)`` with ``points`` (:func:`_peak_points`) among a Density's breakpoints (or
    a built-in ``Q``'s, as a Density)."""
    if isinstance(P, Product):
        return _componentwise(_with_points, P, Q, points)
    if points is None:
        return P, Q
    if isinstance(Q, Density):
        return P, Q._with_breakpoints(points)
    if isinstance(P, Density):
        return P._with_breakpoints(points), Q
    # a built-in pair (Laplace vs Gaussian): Q as the same density, with the points
    return P, Q._as_density(points.astype(Q.dtype))


def _chernoff(P, Q, method, max_steps):
    P, Q = group_product(P, Q)  # one kernel per family of a product's components
    shape = tuple(jnp.broadcast_shapes(P.batch_shape, Q.batch_shape))
    dtype = jnp.result_type(P.dtype, Q.dtype, float)
    Ps, Qs = lax.stop_gradient(P), lax.stop_gradient(Q)
    swap = _swap_mask(Ps, Qs)
    if swap is not None:  # solved as (Q, P), whose optimum is 1 - alpha*, f' negated
        Ps, Qs = _mirror(swap, Ps, Qs)
    if swap is None and _solved_twice(Ps, Qs):
        # Located on the plain rule (no value, no end-point tests), then solved again from
        # there on the pair with the integrand's peaks at that point as breakpoints, and
        # differentiated on that rule (see _peak_points). Ad hoc, 1000 Laplace vs
        # Gaussian-Density pairs on one core: the first call 2.75 -> 3.7 s, then 194 -> 346
        # us/pair (two full solves: 5.4 s, ~400 us/pair; both on the second rule, in a loop
        # of two trips that XLA compiles once: 4.1 s, 704 us/pair); 1000 built-in Laplace
        # vs Gaussian pairs: 2.1 -> 3.2 s, 176 -> 249 us/pair (ad hoc, jit, one core).
        # (The optax method too, each solve in full: it was 5.5e-5 off at 100 scales.)
        if method == "newton":
            res = _newton(Ps, Qs, shape, dtype, max_steps, locate=True)
        else:
            res = _METHODS[method](Ps, Qs, shape, dtype, max_steps)
        start = _second_start(P, Q, res.alpha)
        P, Q = _refined(P, Q, start)
        Ps, Qs = lax.stop_gradient((P, Q))
        again = _METHODS[method](Ps, Qs, shape, dtype, max_steps, start=start)
        res = again._replace(iterations=res.iterations + again.iterations)
    else:
        res = _METHODS[method](Ps, Qs, shape, dtype, max_steps)
    if swap is not None:
        res = res._replace(
            alpha=jnp.where(swap, 1.0 - res.alpha, res.alpha),
            deriv=jnp.where(swap, -res.deriv, res.deriv),
        )
    a_star = lax.stop_gradient(res.alpha.astype(dtype))
    value = lax.stop_gradient(jnp.broadcast_to(res.value, shape).astype(dtype))
    # Envelope theorem: the gradient of the value at fixed a_star.
    information = -_envelope(value, a_star, P, Q)
    deriv = jnp.broadcast_to(res.deriv, shape).astype(dtype)
    # Disjoint supports: information +inf at any alpha; report alpha = 1/2, certificate 0.
    # Pairs whose supports coincide have finite information: +inf there is an overflow (of
    # the value, or of e^rho for Gaussian scale ratios beyond ~1e154), never converged.
    disjoint = (information == jnp.inf) & (not _always_interior(P, Q))
    a_star = jnp.where(disjoint, 0.5, a_star)
    deriv = jnp.where(disjoint, 0.0, deriv)
    converged = res.done & (res.certified | res.at_end)
    converged = ((converged & ~jnp.isnan(deriv) & jnp.isfinite(information)) | disjoint) & (
        ~jnp.isnan(information)
    )
    alpha = _implicit_alpha(a_star, P, Q)
    # parameters the constructors would have rejected (under jit): nan, never converged
    # (alpha and the certificate too: they were finite numbers of no pair)
    information = nan_where_invalid(P, Q, information)
    alpha = nan_where_invalid(P, Q, jnp.broadcast_to(alpha, shape))
    deriv = nan_where_invalid(P, Q, deriv)
    converged = converged & ~jnp.isnan(information)
    return ChernoffResult(
        information=information,
        alpha=alpha,
        derivative=deriv,
        converged=jnp.broadcast_to(converged, shape),
        iterations=jnp.broadcast_to(res.iterations, shape),
    )

r"""Noise calibration: the mechanism parameter that meets a privacy budget exactly.

Given a mechanism family with parameter :math:`p` (Laplace scale :math:`b`, Gaussian
:math:`\sigma`, geometric or randomized-response :math:`\varepsilon`, or any callable
``p -> (P, Q)``), a metric :math:`m` (Chernoff information, the larger KL direction, or total
variation = best membership advantage) and a budget :math:`c`, :func:`calibrate` solves

.. math:: m\big(P_p^{\otimes n}, Q_p^{\otimes n}\big) = c

for :math:`p`, for the ``n``-fold composition exactly (not by splitting the budget). Chernoff
information and KL are exactly additive over i.i.d. products (the maximiser :math:`\alpha^*`
is the same for every factor), so :math:`m_n = n\,m_1` for those two metrics; total variation
of an ``n``-fold product is computed by the exact kernels of :mod:`jaxdp.membership` and
:mod:`jaxdp.conversions` (Laplace, geometric, randomized response) or by the Gaussian identity
:math:`\mathrm{TV}(\mathcal N(0,\sigma^2)^{\otimes n}, \mathcal N(\Delta,\sigma^2)^{\otimes n})
= \mathrm{TV}(\mathcal N(0,\sigma^2), \mathcal N(\sqrt n\Delta,\sigma^2))`.

Method (DESIGN §5). Every built-in metric is a smooth monotone function of :math:`\log p`
(decreasing for scales, increasing for :math:`\varepsilon`):

1. *Initial guess* from the single-release closed forms in the mechanism's strength
   :math:`\theta` (:math:`\theta = \Delta/b` for Laplace and Gaussian, :math:`\varepsilon`
   otherwise): e.g. Laplace :math:`C = u - \log(1 + u)`, :math:`u = \theta/2` (DESIGN §4),
   Gaussian :math:`C = \theta^2/8`, geometric :math:`C = \theta/2 - \log(1 + \Delta
   \tanh(\theta/2\Delta))`, randomized response :math:`C = \log\cosh(\theta/2)` (inverted
   exactly). Where no inverse is explicit, Newton on :math:`\log m` against :math:`\log
   \theta`, started on the small-:math:`\theta` asymptote :math:`m \approx K\theta^k`
   (:math:`K\theta^k` lies above :math:`m` and :math:`\log m` is concave in :math:`\log\theta`,
   so the iterates increase monotonically to the root).
   The guess aims at :math:`c\,(1 - 16u)` (:math:`u` the unit roundoff), so that its
   first evaluation on the engine usually passes step 3 at once.
2. *Newton on the engine.* Safeguarded Newton on :math:`g(x) = \log m(e^x) - \log c'` (for
   TV budgets above 1/2, :math:`\log(1 - c') - \log(1 - m(e^x))`, which stays curved where
   :math:`\log m` flattens towards 0) with
   :math:`x = \log p` and :math:`c' = c\,(1 - 4u)`, where :math:`m` is the engine's value
   (:func:`jaxdp.chernoff`, :func:`jaxdp.kl`, :func:`jaxdp.tv`, on the mechanism's pair, or
   its :class:`jaxdp.Product` for ``n > 1``; for binary randomized response, which attains
   each eps-DP supremum, the closed forms of :mod:`jaxdp.conversions`: as a categorical
   pair its log-probabilities differ by eps only to ~1e-16 absolute, which no budget below
   ~1e-17 nats survives) and :math:`g'` its forward-mode derivative
   (for Chernoff information the envelope theorem, :math:`dC/dp = \partial f/\partial p\,
   (\alpha^*)`; no finite differences). A bracket is kept and a bisection replaces any
   Newton step that leaves it; steps are capped at :math:`e^{\pm 16}` while the root is not
   yet bracketed (callables start at :math:`p = 1`). One ``lax.while_loop`` over the whole
   batch with per-element masks, one evaluation of the engine per iteration.
3. *Acceptance where evaluated.* A point is accepted when the Newton step from it is below
   :math:`r = \max(10^{-4}\sqrt u,\ 4u\max(1, |\log p|),\ 4u/\eta)` in :math:`\log p`
   (the tolerance, the rounding of :math:`\log p`, and the step that the rounding of
   :math:`m` alone would cause; :math:`\eta = |d\log m/d\log p|`, the metric's elasticity:
   between 1 and 2 for Chernoff information and KL of the built-ins, small only for TV
   budgets close to 1) or the bracket has collapsed to a few ulps, *and* the metric just
   computed there is :math:`\le c`; that value is returned as ``achieved``. A converged
   point whose value exceeds :math:`c` by rounding is moved by :math:`r\,2^k` (:math:`k = 0,
   1, \dots`, at most 20) in :math:`\log p` in the safe direction and re-evaluated. So
   ``achieved <= budget`` always holds, and the parameter is within about
   :math:`10^{-4}\sqrt u + 6u\max(1, |\log p|) + 20u/\eta` relative of the exact
   calibration (ad hoc, against mpmath: float32, Chernoff information of Laplace, Gaussian
   and randomized response at 75 budgets in ``1e-36..10``: at most :math:`5.2u\max(1,
   |\log p|)`, i.e. 1.9e-5 at budget 1e-36 and 1.8e-6 for budgets ``>= 1e-6``; float64 TV
   budgets 1e-14 below 1 down to an ulp below: 0.1-4% of the scale, the resolution of
   ``m`` there). ``converged``
   additionally requires ``achieved >= budget (1 - sqrt(u))``: it is ``False`` where the
   mechanism cannot resolve the budget in floating point (e.g. a geometric or callable
   mechanism whose two distributions round to nearly the same numbers).

Measured against mpmath (40 digits) over budgets ``1e-6..5`` nats, Chernoff information and
KL of the four built-ins, 1- and 10-fold: relative error of the parameter below ``5e-13``
(typically ``3e-15``), with 1 to 1.1 engine evaluations per budget on average.

Gradients with respect to ``budget`` and ``sensitivity`` use the implicit function theorem
on :math:`m(p, \Delta) = c` (a ``custom_jvp``; the iterations are never differentiated):

.. math:: \frac{dp}{dc} = \frac{1}{\partial_p m},\qquad
          \frac{dp}{d\Delta} = -\frac{\partial_\Delta m}{\partial_p m}.

For Laplace and Gaussian noise the pair's metrics depend on :math:`\Delta/p` alone, so
:math:`p(c, \Delta) = \Delta\,p(c, 1)`: there :math:`dp/d\Delta = p/\Delta` (no engine
evaluation), :math:`d^2p/d\Delta^2 = 0` exactly and :math:`d^2p/dc\,d\Delta =
(dp/dc)/\Delta` (the slope's derivative in :math:`\Delta` is :math:`-1/\Delta` times that in
:math:`\log p`).

Second derivatives (``jax.hessian``, ``grad(grad)``, ``jacfwd(jacfwd)``) are the derivatives
of that rule, with :math:`\partial^2 m` from the engine's own second derivatives (one more
engine evaluation per second-order product). Measured against the implicit function theorem
differentiated twice on 40-digit closed forms: relative error below ``1e-14`` (Laplace KL,
budget and sensitivity mixed; 3-fold randomized response for ``c/n <= 3.3``). The rule works in
:math:`x = \log p`, where :math:`d^2p/dc^2 = p\,(x_c^2 + x_{cc})`; where :math:`p` is nearly
linear in :math:`c` the two terms cancel and the relative error grows as the true value
shrinks (3-fold randomized response, ad hoc: 9e-12 relative at :math:`c/n = 6.7`, 4.6e-9 at
:math:`c/n = 10`, where :math:`d^2\varepsilon/dc^2 = -4.6\cdot 10^{-10}`). Budgets down to
the smallest normal (``jax.hessian`` and ``jacfwd(jacfwd)``, ad hoc against the small-budget
closed forms :math:`b = \Delta/\sqrt{8c}`, :math:`\varepsilon = \sqrt{8c}`): the second
derivatives overflow to the right infinities (Laplace, Gaussian: :math:`d^2b/dc^2 = +\infty`
below ~1e-123, :math:`d^2b/dc\,d\Delta` finite to ~1e-206, then :math:`-\infty`;
randomized response :math:`d^2\varepsilon/dc^2` finite to ~1e-205), :math:`d^2b/d\Delta^2`
is 0 (above); the geometric mechanism's were ``nan`` below ~1e-210, where its
engine's own second :math:`\varepsilon`-derivatives fail (:math:`\varepsilon` ~1e-105): its
metric is the small-strength limit there (see :func:`_metric_composed`). Its sensitivity
derivatives at budgets below ~1e-20 are rounding noise of the engine's :math:`\partial
m/\partial\Delta`, an :math:`O(\varepsilon^2)` relative effect (open).

Unreachable budgets (documented limits, never an exception under ``jit``):

* ``budget == 0`` gives the no-release limit: scale ``+inf`` (Laplace, Gaussian) or
  :math:`\varepsilon = 0` (geometric, randomized response), with ``achieved = 0``; so do
  subnormal budgets (below ~2.2e-308 in float64, 1.2e-38 in float32), which XLA:CPU
  flushes to zero. The derivative in ``budget`` there is the one-sided limit as
  :math:`c \to 0^+`: :math:`-\infty` for a scale, :math:`+\infty` for :math:`\varepsilon`
  (Chernoff information, KL), :math:`1/K_n` for the TV of ``n`` geometric or randomized
  responses (:math:`K_n = E|S_n|/2`, :math:`S_n` a simple random walk), ``nan`` for a
  callable's :math:`p = 0`; in ``sensitivity`` and of second order it is 0. As with
  ``jnp.sqrt`` at 0, a forward-mode Jacobian (``jax.jacfwd``) of a batch holding a zero
  budget is ``nan`` off the diagonal in that row (a zero tangent times an infinite slope);
  ``jax.grad`` of a sum is not affected.
* Chernoff information and KL are unbounded for all four built-in families (they tend to
  :math:`+\infty` as the noise vanishes), so every finite positive budget is reachable
  (Gaussian Chernoff information up to the largest float: above ~4.5e307, float32
  ~8.5e37, the engine's constant :math:`4C` overflows, and :math:`C` is evaluated as 16
  times that of a quarter of the sensitivity); ``budget = inf`` gives scale 0 /
  :math:`\varepsilon = \infty`. Above half the largest float (Gaussian budgets only:
  other parameters are beyond the range there) the metric's slope :math:`2C` overflows;
  the first derivatives there are the closed forms of the exactly quadratic metric,
  :math:`d\sigma/dc = -\sigma/(2c)` and :math:`d\sigma/d\Delta = \sigma/\Delta` (they
  were 0).
* A built-in's parameter beyond the float range (Laplace, budget 1e-300, sensitivity
  1e300: scale ~3.5e449) is the limit: scale ``inf`` / :math:`\varepsilon = 0` with
  ``achieved = 0`` and ``converged = True`` (no information meets the budget; dp/dc is
  :math:`-\infty` / the budget-0 slope, a scale's dp/ds :math:`+\infty`), or scale 0 /
  :math:`\varepsilon = \infty` with ``achieved`` the supremum and ``converged = False``.
  (Decided from the closed-form guess, so a parameter within about the guess's accuracy of
  the range's ends may still come back ``nan``.)
* Total variation is below 1 for every parameter: ``budget >= 1`` gives the no-noise limit
  (scale 0 / :math:`\varepsilon = \infty`) with ``achieved = 1``.
* Negative or NaN budgets raise ``ValueError`` eagerly and give ``nan`` (and ``nan``
  derivatives) with ``converged = False`` under ``jit``.
* For callables the limits are not known: budgets out of range come back with
  ``converged = False``; ``budget == 0`` still gives the no-release limit (the direction is
  read off the derivative at ``p = 1``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxdp import _checks, _jit
from jaxdp import _special as sp
from jaxdp import mechanisms as _mech
from jaxdp._quotient import scaled_divide
from jaxdp.chernoff import chernoff
from jaxdp.conversions import _unflushed
from jaxdp.distributions import Product, _check_mechanism_output
from jaxdp.divergences import kl, tv

__all__ = ["MECHANISMS", "METRICS", "CalibrationResult", "calibrate"]

#: Built-in mechanism names and the parameter each calibrates.
MECHANISMS = {
    "laplace": "scale",
    "gaussian": "sigma",
    "geometric": "epsilon",
    "randomized_response": "epsilon",
}
#: Supported metrics.
METRICS = ("chernoff", "kl", "tv")

_MAX_STEP = 16.0  # cap on |Newton step| in log-parameter while the root is not bracketed
_NUDGES = 20  # bounded re-check: the last nudge is r * 2^19 (~5e-10 for r = 4u)


class CalibrationResult(NamedTuple):
    """Result of :func:`calibrate` (a pytree; every field has the budgets' broadcast shape).

    Attributes:
      parameter: the calibrated parameter: Laplace ``scale``, Gaussian ``sigma``, geometric
        and randomized-response ``epsilon``, or the callable's argument.
      achieved: the engine's value of the metric at ``parameter`` (for the ``n``-fold
        composition; for Chernoff information and KL of ``n > 1`` releases whose one-release
        value would be subnormal, its small-strength limit), in nats for
        ``"chernoff"``/``"kl"``; ``achieved <= budget`` wherever ``converged``.
      converged: Newton converged, ``achieved <= budget`` and ``achieved >= budget (1 -
        sqrt(u))`` (the budget is resolved); ``False`` for invalid budgets or
        sensitivities under ``jit``,
        for out-of-range budgets of callables, and where the mechanism cannot resolve the
        budget in floating point.
      iterations: evaluations of the engine's metric (Newton steps and re-checks); 1 for
        most budgets of the built-ins, 0 at the limits.
    """

    parameter: jax.Array
    achieved: jax.Array
    converged: jax.Array
    iterations: jax.Array


# --------------------------------------------------------------------------------------------
# Mechanism specs
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Spec:
    """A mechanism family: hashable (a static argument of the jitted solver)."""

    name: str
    fn: Callable | None = None
    #: the largest sensitivity (geometric TV of compositions: the static size of the sum)
    max_sensitivity: int = 1

    @property
    def proportional(self) -> bool:
        """Whether the parameter is proportional to the sensitivity (a scale of a location
        family: the metrics of ``(P_p, Q_p)`` depend on ``sensitivity / p`` alone)."""
        return self.name in ("laplace", "gaussian")

    @property
    def direction(self) -> int:
        """+1 when the metric increases with the parameter, -1 when it decreases, 0 unknown."""
        return {"laplace": -1, "gaussian": -1, "geometric": 1, "randomized_response": 1}.get(
            self.name, 0
        )

    def pair(self, p, s):
        if self.name == "laplace":
            return _mech.laplace(s, scale=p)
        if self.name == "gaussian":
            return _mech.gaussian(s, sigma=p)
        if self.name == "geometric":
            return _mech.geometric(s, epsilon=p)
        if self.name == "randomized_response":
            return _mech.randomized_response(p)
        return self.fn(p)


def _spec_for(mechanism) -> _Spec:
    if isinstance(mechanism, str):
        if mechanism not in MECHANISMS:
            raise ValueError(
                f"mechanism must be one of {sorted(MECHANISMS)} or a callable, got {mechanism!r}"
            )
        return _Spec(mechanism)
    if callable(mechanism):
        return _Spec("callable", mechanism)
    raise TypeError(
        f"mechanism must be a name or a callable parameter -> (P, Q), got {type(mechanism)}"
    )


def _check_callable(fn, shape, dtype):
    """What a callable mechanism returns for ``p`` of the budgets' shape, by shape alone
    (:func:`jax.eval_shape`: nothing is computed). One distribution failed with "cannot
    unpack non-iterable Laplace object", a triple with "too many values to unpack", other
    batch shapes with JAX's "Incompatible types for broadcasting", none naming mechanism."""
    out = jax.eval_shape(fn, jax.ShapeDtypeStruct(shape, dtype))
    _check_mechanism_output(
        out, shape, f"whose batch shapes broadcast to the budgets' shape {shape}"
    )


def _metric(spec: _Spec, metric: str, n: int, p, s):
    """The engine's metric of the ``n``-fold composition at parameter ``p``."""
    if metric != "tv" and spec.direction != 0 and (n > 1 or spec.name == "geometric"):
        return _metric_composed(spec, metric, n, p, s)
    return _metric_engine(spec, metric, n, p, s)


def _metric_composed(spec: _Spec, metric: str, n: int, p, s):
    r"""Chernoff information or KL of ``n > 1`` releases of a built-in: the engine's, but
    where one release's value :math:`K\theta^2` is below 16 times the smallest normal float,
    the small-strength limit :math:`(\sqrt{nK}\,\theta)^2` (:data:`_ASYMPTOTE`; its relative
    error is :math:`O(\theta)`, ~1e-153, float32 ~4e-18). The engine's per-release value is
    subnormal there and flushed to 0: ``calibrate("gaussian", 2.3e-308, compositions=1000)``
    (sigma ~7.4e154) gave scale ``inf`` with ``achieved`` ``nan``.

    The geometric mechanism (also ``n = 1``) takes the limit below :math:`\varepsilon =
    16\,\mathrm{tiny}^{1/3}` (~4.5e-102, float32 ~3.7e-12; relative error
    :math:`O(\varepsilon^2)`): its engine's second :math:`\varepsilon`-derivatives, through
    scales :math:`\Delta/\varepsilon` whose :math:`1/b^3` underflows, were ``nan`` there
    (``jax.hessian`` of the calibration at budgets below ~1e-210)."""
    big_k, _ = _ASYMPTOTE[metric]
    tiny = float(jnp.finfo(p.dtype).tiny)
    thr = math.sqrt(16.0 * tiny / big_k)
    if spec.name == "geometric":
        thr = max(thr, 16.0 * tiny ** (1.0 / 3.0))
    # (a quotient: JAX's rule for s / p squares p, which overflows for scales ~1e154+)
    theta = sp.quotient(s, p) if spec.direction < 0 else p
    small = theta < thr
    # the engine at an ordinary point where unused (no nan in its masked derivatives)
    p_eng = jnp.where(small, 1.0 / thr if spec.direction < 0 else thr, p)
    s_eng = jnp.where(small, 1.0, s)
    m = _metric_engine(spec, metric, n, p_eng, s_eng)
    # sqrt(nK) theta ~ sqrt(c) behind a barrier: XLA rewrote (k theta)^2 as theta^2 k^2,
    # whose theta^2 is subnormal (flushed: achieved 0 for a single budget, right in a batch)
    root = lax.optimization_barrier(math.sqrt(n * big_k) * jnp.where(small, theta, 0.0))
    tiny_m = root * root
    return jnp.where(small, tiny_m, m)


def _metric_engine(spec: _Spec, metric: str, n: int, p, s):
    if metric == "tv" and n > 1:
        return _tv_composed(spec, n, p, s)
    if spec.name == "randomized_response":
        # Binary randomized response attains each eps-DP supremum, in closed form: as a
        # categorical pair its log-probabilities differ by eps only to ~1e-16 absolute, which
        # left budgets below ~1e-17 (eps ~1e-8) unsolvable (and calibrated to 1e-12 with
        # ~5e-7 relative error); composition is additive for C and KL (alpha* = 1/2).
        from jaxdp.conversions import max_chernoff_eps_dp, max_kl_eps_dp, max_tv_eps_dp

        if metric == "chernoff":
            return n * max_chernoff_eps_dp(p)
        if metric == "kl":
            return n * max_kl_eps_dp(p)
        return max_tv_eps_dp(p, 1)
    big = None
    if spec.name == "gaussian" and metric == "chernoff":
        # The kernel's constant (Delta/sigma)^2/2 is 4x one release's information: it
        # overflowed for budgets above ~4.5e307 (float32 ~8.5e37), which were unreachable
        # (scale 0, achieved inf). The information is exactly quadratic in the strength, so
        # there it is 16 times that of a quarter of the sensitivity (powers of two: exact)
        big = sp.quotient(s, p) > math.sqrt(float(jnp.finfo(p.dtype).max)) / 4.0
        s = jnp.where(big, 0.25 * s, s)
    P, Q = spec.pair(p, s)
    if n > 1:  # exact composition: the engine's Product (same alpha for every factor)
        P, Q = Product.iid(P, n), Product.iid(Q, n)
    if metric == "chernoff":
        information = chernoff(P, Q).information
        return information if big is None else jnp.where(big, 16.0 * information, information)
    if metric == "kl":
        return jnp.maximum(kl(P, Q), kl(Q, P))
    return tv(P, Q)


def _tv_composed(spec: _Spec, n: int, p, s):
    if spec.name == "laplace":
        try:
            from jaxdp.membership import best_advantage_laplace
        except ImportError as e:  # pragma: no cover - module ships with jaxdp
            raise NotImplementedError(
                "metric='tv' with compositions > 1 for 'laplace' needs jaxdp.membership"
            ) from e
        return best_advantage_laplace(s / p, n, sensitivity=s).value
    if spec.name == "gaussian":
        # TV of n Gaussian releases = TV of one release with sensitivity sqrt(n) * s.
        return tv(*_mech.gaussian(math.sqrt(n) * s, sigma=p))
    if spec.name == "randomized_response":
        from jaxdp.conversions import max_tv_eps_dp

        return max_tv_eps_dp(p, n)
    if spec.name == "geometric":
        from jaxdp.membership import geometric_advantage

        return geometric_advantage(p, s, n, spec.max_sensitivity)
    P, Q = spec.fn(p)
    return tv(Product.iid(P, n), Product.iid(Q, n))


# --------------------------------------------------------------------------------------------
# Closed-form initial guesses (single release, strength theta: metric increasing in theta)
# --------------------------------------------------------------------------------------------


def _closed_form(name: str, metric: str, theta, s):
    """Single-release metric as a function of the strength ``theta`` (see module doc)."""
    if name == "laplace":
        if metric == "chernoff":
            return -sp.log1pmx(0.5 * theta)
        if metric == "kl":
            return sp.phi(-theta)
        return -jnp.expm1(-0.5 * theta)
    if name == "geometric":
        z = 0.5 * theta / s
        y = s * jnp.tanh(z)
        if metric == "chernoff":
            return s * sp.x_minus_tanh(z) - sp.log1pmx(y)
        if metric == "kl":  # (theta/s) [s - (1 - e^-theta)/sinh(theta/s)]; guess only
            v = theta / s
            return v * (s + jnp.expm1(-theta) / jnp.sinh(v))
        return jnp.tanh(0.5 * theta)  # exact for s = 1; a guess otherwise
    # randomized_response
    if metric == "chernoff":
        return 0.5 * theta + jnp.log1p(jnp.exp(-theta)) - math.log(2.0)
    if metric == "kl":
        return theta * jnp.tanh(0.5 * theta)
    return jnp.tanh(0.5 * theta)


# Small-theta asymptote m ~ K theta^k shared by all built-ins: (K, k).
_ASYMPTOTE = {"chernoff": (0.125, 2.0), "kl": (0.5, 2.0), "tv": (0.5, 1.0)}


def _invert_closed_form(name: str, metric: str, log_c, s, steps: int = 12):
    """Solve ``closed_form(theta) = c`` by Newton in log-log from the asymptote's root,
    given ``log c`` (budgets whose square or fourth power underflows stay representable)."""
    big_k, k = _ASYMPTOTE[metric]
    # also at least log c: the built-ins are eps-DP in theta, so m <= theta (KL <= eps), and
    # from budgets ~e^16 on the asymptote's root is far below (Laplace Chernoff 1e307: 12
    # capped steps ended at theta ~1e237 for 2e307; from ~2.2e307, where the scale is
    # subnormal, the solver then stepped into it: achieved nan, not the documented limit)
    y0 = jnp.maximum((log_c - math.log(big_k)) / k, log_c)  # (metric: chernoff or kl)

    def f(y):
        return jnp.log(_closed_form(name, metric, jnp.exp(y), s))

    def body(_, y):
        v, dv = jax.jvp(f, (y,), (jnp.ones_like(y),))
        step = (log_c - v) / jnp.where(dv > 0, dv, 1.0)
        ok = jnp.isfinite(step) & (dv > 0)
        return jnp.where(ok, y + jnp.clip(step, -_MAX_STEP, _MAX_STEP), y)

    return jnp.exp(lax.fori_loop(0, steps, body, y0))


def _guess(spec: _Spec, metric: str, n: int, c, s):
    """Initial parameter for budget ``c`` (callables: 1)."""
    if spec.direction == 0:
        return jnp.ones_like(c)
    name = spec.name
    if metric in ("chernoff", "kl"):
        c1 = c / n
        # one release's budget below ~16 times the smallest normal (subnormal, flushed):
        # the small-strength limit c = n K theta^2 (see _metric_composed)
        big_k, _ = _ASYMPTOTE[metric]
        small = c < 16.0 * n * float(jnp.finfo(c.dtype).tiny) if n > 1 else False
        c1 = jnp.where(small, 1.0, c1)
        if name == "gaussian":
            k8 = 8.0 if metric == "chernoff" else 2.0
            # (k8 c1 overflowed for c1 above max/k8: sigma 0, taken for beyond the range)
            big = c1 > float(jnp.finfo(c1.dtype).max) / k8
            theta = jnp.where(big, math.sqrt(k8) * jnp.sqrt(c1), jnp.sqrt(k8 * c1))
        elif name == "randomized_response" and metric == "chernoff":
            # log cosh(theta/2) = c  <=>  theta = 2 (c + log(1 + sqrt(1 - e^{-2c})))
            theta = 2.0 * (c1 + jnp.log1p(jnp.sqrt(-jnp.expm1(-2.0 * c1))))
        else:
            theta = _invert_closed_form(name, metric, jnp.log(c1), s)
        theta = jnp.where(small, jnp.sqrt(c) / math.sqrt(n * big_k), theta)
    else:
        ct = c  # (< 1: budgets >= 1 are handled before)
        if name == "gaussian":  # exact, like the three single-release inverses below
            theta = 2.0 * math.sqrt(2.0) * jax.scipy.special.erfinv(ct) / math.sqrt(n)
        elif n == 1 and name == "laplace":
            theta = -2.0 * jnp.log1p(-ct)
        elif n == 1:
            theta = 2.0 * jnp.arctanh(ct)
        else:
            # Gaussian approximation of the n-fold privacy loss: TV ~ erf(sqrt(n KL_1)/2),
            # in logs: KL_1 = 4 erfinv(TV)^2 / n underflows for TV below ~1e-154 (float32
            # ~1e-19), which gave the solver a start at theta = 0. Capped at 1 - 1e-3: the
            # approximation is poor in the tail (the solver then took up to 64 steps)
            ct = jnp.minimum(c, 1.0 - 1e-3)
            log_kl1 = math.log(4.0 / n) + 2.0 * jnp.log(jax.scipy.special.erfinv(ct))
            theta = _invert_closed_form(name, "kl", log_kl1, s)
    return s / theta if spec.direction < 0 else theta


# --------------------------------------------------------------------------------------------
# The solver
# --------------------------------------------------------------------------------------------


def _value_and_slope(spec, metric, n, x, s):
    """``(m, dm/dx)`` at ``p = e^x`` by forward-mode autodiff of the engine."""

    def m(x):
        return _metric(spec, metric, n, jnp.exp(x), s)

    v, dv = jax.jvp(m, (x,), (jnp.ones_like(x),))
    return jnp.broadcast_to(v, x.shape), jnp.broadcast_to(dv, x.shape)


def _solve(spec: _Spec, metric: str, n: int, max_steps: int, budget, s):
    r"""Bracketed Newton in log-parameter with the re-check folded in (see module doc).

    One ``lax.while_loop``; every iteration evaluates the engine's metric and its slope once
    (a single instantiation of the engine, which keeps compile time down). Per element:

    * if the Newton step is below the acceptance tolerance (or the bracket has collapsed)
      and the metric at the current point is within the budget: accept the point, with
      the metric just computed as ``achieved``;
    * if it is converged but the metric exceeds the budget (rounding): nudge the point by
      :math:`4u\,2^k` in log-parameter in the safe direction, :math:`k = 0, 1, \dots`;
    * otherwise take the (bracketed, capped) Newton step towards :math:`c(1 - 4u)`.

    With the closed-form guess the first evaluation is usually accepted.
    """
    dtype = budget.dtype
    eps = float(jnp.finfo(dtype).eps)
    sup = 1.0 if metric == "tv" else math.inf
    # Subnormal budgets are 0 too: XLA:CPU flushes them to zero in some kernels and not in
    # others (1e-320 alone gave scale inf, converged False; batched with 1.0, converged True)
    zero = (budget == 0) | _unflushed(budget)[0]  # (positive subnormals, from the bits)
    top = budget >= sup
    invalid = jnp.isnan(budget) | (budget < 0)
    active = ~(zero | top | invalid)
    c = jnp.where(active, budget, 1.0 if metric != "tv" else 0.5)
    log_target = jnp.log(c) + math.log1p(-4.0 * eps)
    # TV budgets above 1/2: the residual in log(1 - m), which Newton follows to budgets within
    # an ulp of 1 (log m is flat there: Laplace 2-fold at 1 - 1e-10 took 17 steps, at 1 - 1e-14
    # ran out of them)
    upper = (metric == "tv") & (c > 0.5)
    log_gap_target = jnp.log1p(-c * (1.0 - 4.0 * eps))
    acc_tol = 1e-4 * math.sqrt(eps)

    # The guess aims a little lower (16u) so that its first evaluation is usually accepted.
    p0 = _guess(spec, metric, n, c * (1.0 - 16.0 * eps), s)
    x0 = jnp.log(p0)
    # A built-in's parameter beyond the float range (the guess overflows, or is below the
    # smallest normal, which XLA flushes): the limit there, not evaluated (the engine gave
    # nan at scale inf: Laplace, budget 1e-300, sensitivity 1e300 had achieved nan and
    # converged False). On the no-release side (scale inf, epsilon 0) the metric is 0, which
    # meets the budget; on the other (scale 0, epsilon inf) it is the supremum, which does not.
    tiny = float(jnp.finfo(dtype).tiny)
    out = active & ((p0 == jnp.inf) | (p0 < tiny)) if spec.direction else jnp.zeros_like(active)
    out_release = out & ((p0 == jnp.inf) == (spec.direction < 0))
    if spec.direction:
        sigma0 = jnp.full_like(c, float(spec.direction))
    else:  # callables: the direction is the sign of the slope at the guess p = 1, read here
        # too (the loop does not run when every budget is a limit: budget 0 alone gave nan
        # with converged=False, batched with 0.1 scale inf with converged=True)
        sigma0 = jnp.sign(_value_and_slope(spec, metric, n, x0, s)[1])
        sigma0 = jnp.where(sigma0 == 0, jnp.nan, sigma0)
    inf = jnp.full_like(c, jnp.inf)

    def cond(state):
        done, it = state[6], state[8]
        return jnp.any(~done) & (jnp.max(it, initial=0) < max_steps)  # (0: empty batches)

    def body(state):
        x, sigma, lo, hi, achieved, slope, done, ok, it, k = state
        m, dm = _value_and_slope(spec, metric, n, x, s)
        if spec.direction == 0:  # callables: the direction is read off the first slope
            sigma = jnp.where(jnp.isnan(sigma), jnp.sign(dm), sigma)
            sigma = jnp.where(sigma == 0, jnp.nan, sigma)
        z = sigma * x  # the metric increases with z
        g = jnp.where(upper, log_gap_target - jnp.log1p(-m), jnp.log(m) - log_target)
        dg = sigma * dm / jnp.where(upper, 1.0 - m, m)
        lo = jnp.where(g < 0, z, lo)
        # (also where g rounds to 0 above the budget: a Newton step of 0 from the nudged
        # point returned there, and the nudges ran out; float32 TV of compositions)
        hi = jnp.where((g > 0) | (m > c), z, hi)
        newton_ok = jnp.isfinite(g) & jnp.isfinite(dg) & (dg > 0)
        step = jnp.clip(-g / jnp.where(newton_ok, dg, 1.0), -_MAX_STEP, _MAX_STEP)
        step = jnp.where(newton_ok, step, jnp.where(g > 0, -_MAX_STEP, _MAX_STEP))
        cand = z + step
        bracketed = jnp.isfinite(lo) & jnp.isfinite(hi)
        outside = (cand <= lo) | (cand >= hi)
        cand = jnp.where(bracketed & outside, 0.5 * (lo + hi), cand)
        ulp = 4.0 * eps * jnp.maximum(1.0, jnp.abs(z))
        collapsed = bracketed & (hi - lo <= ulp)
        # A step below 4u m/(dm/dz) is rounding noise in m: a TV budget within ~1e-15 of 1
        # (Gaussian: dm/dz ~ 4e-13, so m moves by an ulp per ~3e-4 of z) ran the 64 steps
        # out on it, and its nudges of 4u 2^k in z could not move m at all.
        # (newton_ok: dg > 0, so sigma dm > 0)
        noise = 4.0 * eps * m / jnp.where(newton_ok, sigma * dm, 1.0)
        res = jnp.maximum(ulp, jnp.where(newton_ok, noise, 0.0))
        near = (newton_ok & (jnp.abs(step) <= jnp.maximum(acc_tol, res))) | collapsed
        # a slope lost to underflow (metrics ~1e-300) with the residual at rounding level
        near = near | (~newton_ok & jnp.isfinite(g) & (jnp.abs(g) <= 16.0 * eps))
        within = m <= c
        accept = near & within
        fix = near & ~within
        nudge = res * 2.0 ** k.astype(dtype)
        new_z = jnp.where(fix, jnp.where(collapsed, jnp.minimum(lo, z - nudge), z - nudge), cand)
        failed = jnp.isnan(g) | jnp.isnan(sigma) | (fix & (k >= _NUDGES))
        live = ~done
        x = jnp.where(live & ~accept & ~failed, sigma * new_z, x)
        achieved = jnp.where(live & accept, m, achieved)
        slope = jnp.where(live & accept, dm, slope)
        ok = ok | (live & accept)
        k = jnp.where(live & fix, k + 1, k)
        it = jnp.where(live, it + 1, it)
        done = done | accept | failed
        return x, sigma, lo, hi, achieved, slope, done, ok, it, k

    int0 = jnp.zeros(c.shape, jnp.int32)
    nan = jnp.full_like(c, jnp.nan)
    state = (x0, sigma0, -inf, inf, nan, nan, ~active | out, ~active, int0, int0)
    x, sigma, _, _, achieved, slope, _, ok, it, _ = lax.while_loop(cond, body, state)
    p = jnp.where(out, jnp.where(p0 == jnp.inf, jnp.inf, 0.0), jnp.exp(x))
    achieved = jnp.where(out, jnp.where(out_release, 0.0, sup), achieved)

    # resolved: the engine's metric came out within sqrt(u) below the budget (not, e.g., 0
    # because the mechanism's representation cannot resolve so small a budget)
    converged = ok & active & (achieved >= c * (1.0 - math.sqrt(eps)))
    # Limits: budget 0 -> no release; budget >= sup -> no noise.
    no_release = jnp.where(sigma > 0, 0.0, jnp.inf)
    no_noise = jnp.where(sigma > 0, jnp.inf, 0.0)
    p = jnp.where(zero, no_release, jnp.where(top, no_noise, p))
    achieved = jnp.where(zero, 0.0, jnp.where(top, sup, achieved))
    converged = converged | zero | (top & (spec.direction != 0)) | out_release
    known = jnp.isfinite(sigma)  # a callable's direction is unknown if never evaluated
    converged = converged & known
    p = jnp.where(invalid | ~known, jnp.nan, p)
    # (a callable's limit at budget >= sup is not evaluated: achieved inf was claimed for a
    # metric capped at 1/8, and 0 or inf beside a nan parameter where the direction is unknown)
    unknown = ~known | (top & (spec.direction == 0))
    achieved = jnp.where(invalid | unknown, jnp.nan, achieved)
    result = CalibrationResult(p.astype(dtype), achieved.astype(dtype), converged, it)
    return result, jnp.where(converged & active, slope, jnp.nan).astype(dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2, 3))
def _implicit(spec, metric, n, limits, budget, s, p, achieved, slope):
    r"""Identity on ``(p, achieved)``; its JVP is the implicit function theorem.

    ``slope`` is :math:`\partial m/\partial \log p` at ``p``, from the solver's last
    evaluation (the point it accepted), so only :math:`\partial m/\partial\Delta` is
    evaluated here, and only when the sensitivity is perturbed (not even then for Laplace
    and Gaussian noise, whose ``p`` is proportional to it: ``_Spec.proportional``). The rule
    is written with differentiable operations on its own outputs (``p`` through this
    function again, the slope through :func:`_slope`), so that second derivatives are the
    derivatives of the first: a rule reading the solver's ``p`` and ``slope`` as constants gave
    :math:`d^2\sigma/dc^2 = 0` for the Gaussian (exact: :math:`\tfrac34 8^{-1/2} c^{-5/2}`).

    ``limits``: give budget 0 its one-sided :math:`dp/dc` (:func:`_limit_slope`, often
    infinite). Off in the rule's own call: its masked uses of ``p`` send zero cotangents,
    which an infinite slope turned into ``nan`` second derivatives at budget 0 (they are 0).

    Also returns :math:`x = \log p`, whose tangent is :math:`dx` itself (the rule's second
    derivatives read it: :math:`dp/p` was ``inf`` where :math:`dp` overflowed).
    """
    return p, achieved, jnp.log(p)


def _metric_at(spec, metric, n, x, s, shape):
    return jnp.broadcast_to(_metric(spec, metric, n, jnp.exp(x), s), shape)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _slope(spec, metric, n, x, s, slope):
    r"""``slope`` (:math:`\partial m/\partial x` at ``(x, s)``, from the solver), whose JVP
    is that of :math:`\partial m/\partial x` (no engine evaluation for first derivatives)."""
    return slope


def _slope_jvp(spec, metric, n, primals, tangents):
    x, s, slope = primals
    dx, ds = tangents[0], tangents[1]
    zero = jax.custom_derivatives.SymbolicZero
    dx = jnp.zeros_like(x) if isinstance(dx, zero) else dx
    ds = jnp.zeros_like(s) if isinstance(ds, zero) else ds

    def dm_dx(x, s):
        return jax.jvp(
            lambda x: _metric_at(spec, metric, n, x, s, x.shape), (x,), (jnp.ones_like(x),)
        )[1]

    # as coefficients times dx and ds: the engine's jvp along dx at p = e^x formed p dx,
    # which overflowed (budget 1e-250: dx ~ 5e249, p ~ 3.5e124) where dslope is ordinary
    one = jnp.ones_like(x)
    coef = jax.jvp(lambda x: dm_dx(x, s), (x,), (one,))[1]
    if isinstance(tangents[1], zero):
        d_slope = coef * dx
    elif spec.proportional:
        # m depends on x - log s alone (see _implicit_jvp), so the slope's derivative in s is
        # -1/s that in x: along ds, dx = ds/s (the same product) cancels it exactly. The
        # engine's own derivative in s was 1.3e-7 off for Laplace KL at sensitivity 1e300
        d_slope = coef * (dx - sp.quotient(1.0, s) * ds)
    else:
        d_slope = coef * dx + jax.jvp(lambda s: dm_dx(x, s), (s,), (jnp.ones_like(s),))[1] * ds
    return _slope(spec, metric, n, x, s, slope), d_slope


_slope.defjvp(_slope_jvp, symbolic_zeros=True)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _dm_ds(spec, metric, n, x, s, sc):
    r""":math:`\partial m/\partial\Delta` at ``(x, s)``, whose JVP is formed, as
    :func:`_slope`'s, from coefficients times ``dx`` and ``ds`` (the engine's jvp along ``dx``
    formed :math:`p\,dx`, which overflows where ``dx`` is ordinary), times ``sc``."""
    return _dm_ds_plain(spec, metric, n, x, s, sc)


def _dm_ds_plain(spec, metric, n, x, s, sc):
    return jax.jvp(
        lambda s: _metric_at(spec, metric, n, x, s, x.shape), (s,), (sc * jnp.ones_like(s),)
    )[1]


@_dm_ds.defjvp
def _dm_ds_jvp(spec, metric, n, primals, tangents):
    x, s, sc = primals
    dx, ds = tangents[0], tangents[1]

    def f(x, s):
        return _dm_ds_plain(spec, metric, n, x, s, sc)

    d = jax.jvp(lambda x: f(x, s), (x,), (jnp.ones_like(x),))[1] * dx
    d = d + jax.jvp(lambda s: f(x, s), (s,), (jnp.ones_like(s),))[1] * ds
    return _dm_ds(spec, metric, n, x, s, sc), d


def _implicit_jvp(spec, metric, n, limits, primals, tangents):
    budget, s, p, achieved, slope = primals
    db, ds = tangents[0], tangents[1]
    zero = jax.custom_derivatives.SymbolicZero
    # (the limit slopes below are infinite: times a zero db they gave a nan dp/ds at budget 0)
    limits = limits and not isinstance(db, zero)
    db = jnp.zeros_like(budget) if isinstance(db, zero) else db
    p, achieved, log_p = _implicit(spec, metric, n, False, budget, s, p, achieved, slope)
    ok = jnp.isfinite(slope) & (slope != 0)
    x = jnp.where(ok, log_p, 0.0)
    p_ok = jnp.where(ok, p, 1.0)
    safe = _slope(spec, metric, n, x, s, jnp.where(ok, slope, 1.0))
    # dx = x_c db + x_s ds and dp = p dx, with p dx/dc = e_c m_c and p dx/ds = e_s m_s, e a
    # power of two and m in [1, 2) (_split): their derivatives are m's, from rules that form
    # the sums of the second derivatives before the product with p (the second derivatives
    # were nan at budgets below ~1e-154, where p (x_c^2 + x_cc) is a sum of overflowed terms
    # of opposite signs, or p times cancelling rounding noise of ~1e284 (d^2 scale/dc ds)
    # beside an infinite term; dividing by the slope twice underflowed slope^2). The tangent
    # stays inside the products (e (m db)): a zero tangent times an infinite coefficient
    # would make batched Jacobians nan off the diagonal
    x_c = sp.quotient(1.0, safe)
    e_c, f_c, m_c = _split(p_ok, x, safe, True)
    dx = x_c * db
    dp = e_c * (f_c * (m_c * db))
    if not isinstance(ds, zero) and not spec.proportional:
        # dm/ds from the engine, then divided by the slope: p / slope overflowed (budget
        # 1e-300: d scale/d sensitivity nan or inf for p/s ~ 3.5e149) or underflowed (1e300:
        # 0 for 5e-301)
        # (along a tangent of ~1/slope, a power of two: along 1 its intermediates are
        # subnormal at budgets ~3e-308, flushed: d scale/d sensitivity 0 for 4e153; and
        # of ~s/slope, d m/d log s being of the order of the slope: along 1/slope the
        # engine's tangent of s/p, ~p/s^2 for the Gaussian, left the float range, so
        # d sigma/d s was 0 for sigma/s ~1e-51 (budget 1e100, sensitivity 1e300) and inf
        # for 3.5e49 (1e-100, 1e-300)). x_s = -dm_s/(safe t) = -(dm_s/(safe 2^a)) 2^(a - k)
        # (masked rows at p = 1 and s = 1: there a tangent ~s of a huge s overflowed the
        # engine's, and the masked inf made reverse-mode d p/ds nan)
        s_ok = jnp.where(ok, s, 1.0)
        bias = _bias(safe.dtype)
        a = jnp.clip(-_exponent(safe), 1 - bias, bias)
        # (4 times that: the Gaussian engine's tangent of a quarter of s at the largest
        # budgets, ~s/(4 slope), was subnormal, flushed: d sigma/ds 0 from ~4.5e307)
        k = jnp.clip(_exponent(s_ok) + a + 2, 1 - bias, bias)
        dm_s = _dm_ds(spec, metric, n, x, s_ok, _pow2(k, safe.dtype))
        x_s = -sp.quotient(dm_s, safe * _pow2(a, safe.dtype))
        k1 = jnp.clip(a - k, 1 - bias, bias)
        x_s = (x_s * _pow2(k1, safe.dtype)) * _pow2(a - k - k1, safe.dtype)
        e_s, f_s, m_s = _split(p_ok, x, x_s, False)
        dx = dx + x_s * ds
        dp = dp + e_s * (f_s * (m_s * ds))
    dx = jnp.where(ok, dx, 0.0)
    dp = jnp.where(ok, dp, 0.0)
    over = False
    if spec.name == "gaussian" and metric != "tv":
        # Gaussian Chernoff information and KL are n K (s/p)^2 exactly: above ~9e307 (the
        # largest budgets, float32 ~1.7e38) their slope -2m overflows, and the derivatives
        # were 0; there dp/dc = -p/(2m) (below the float range unless s is large: -8e-164 at
        # 1.7e308, s = 1e300), and dx likewise (dp/ds = p/s there too: the rule below)
        over = jnp.isinf(slope) & (achieved > 0) & (achieved < jnp.inf)
        m_over = jnp.where(over, achieved, 1.0)
        p_over = jnp.where(over, p, 1.0)
        dx = jnp.where(over, (-0.5 * sp.quotient(1.0, m_over)) * db, dx)
        dp = jnp.where(over, (-0.5 * sp.quotient(p_over, m_over)) * db, dp)
    if spec.proportional and not isinstance(ds, zero):
        # Laplace and Gaussian: the pair's metrics depend on s/p alone, so p(c, s) = s p(c, 1)
        # and dp/ds = p/s exactly, whatever the slope (also where it overflowed, above):
        # d^2p/ds^2 = 0 and d^2p/dc ds = (dp/dc)/s. The engine's dm/ds divided by the slope
        # gave them as rounding noise of the order of p/s^2 (d^2 sigma/ds^2 5.6e84 at
        # sensitivity 1e-100, -inf at 1e-300; forward-over-forward d^2 sigma/dc ds nan there).
        # As e m with m's derivative m (dx - ds/s) (_split): its two terms, each ~1/s, cancel
        # exactly along ds; p/s formed directly had the derivative of p/s^2, which underflows.
        fin = (p > 0) & (p < jnp.inf)
        s_fin = jnp.where(fin, s, 1.0)
        e_s, f_s, m_s = _split(jnp.where(fin, p, 1.0), jnp.where(fin, log_p, 0.0), s_fin, True)
        dx = dx + jnp.where(fin, sp.quotient(1.0, s_fin) * ds, 0.0)
        dp = dp + jnp.where(fin, e_s * (f_s * (m_s * ds)), 0.0)
    # Budget 0 (the no-release limit, subnormals too) has no slope from the solver: dp/dc
    # there is the one-sided limit as c -> 0+ (it was 0). (dp/ds stays 0: a scale is inf
    # for every s there, and an epsilon 0.)
    no_release = (budget == 0) | _unflushed(budget)[0]
    d_achieved = jnp.where(ok | over | no_release, db, 0.0)  # (achieved = budget = 0 there)
    # A positive budget whose parameter is beyond the float range on the no-release side
    # (see _solve): the same one-sided limit of dp/dc, and for a scale (proportional to the
    # sensitivity) dp/ds = p/s = inf (achieved is 0 there, for every budget nearby)
    if spec.direction:
        beyond = (budget > 0) & ~no_release & (p == (jnp.inf if spec.direction < 0 else 0.0))
        no_release = no_release | beyond
        if spec.direction < 0 and not isinstance(ds, zero):
            dp = dp + jnp.where(beyond, jnp.inf, 0.0) * ds
    if limits:
        dp = dp + jnp.where(no_release, _limit_slope(spec, metric, n, p), 0.0) * db
    return (p, achieved, jnp.log(p)), (dp, d_achieved, dx)


def _bias(dtype) -> int:
    """The exponent bias of a float dtype (1023, 127)."""
    return 2 ** (jnp.finfo(dtype).nexp - 1) - 1


def _exponent(v):
    """``floor(log2 |v|)`` of a normal ``v`` as an integer (from the bits; not differentiated)."""
    finfo, bias = jnp.finfo(v.dtype), _bias(v.dtype)
    uint = jnp.uint64 if v.dtype.itemsize == 8 else jnp.uint32
    bits = lax.bitcast_convert_type(lax.stop_gradient(v), uint)
    return ((bits >> finfo.nmant) & (2**finfo.nexp - 1)).astype(jnp.int32) - bias


def _pow2(k, dtype):
    """``2**k`` for integers ``k`` in the normal range (exact, from the bits)."""
    finfo, bias = jnp.finfo(dtype), _bias(dtype)
    uint = jnp.uint64 if jnp.dtype(dtype).itemsize == 8 else jnp.uint32
    k = jnp.clip(k, 1 - bias, bias)
    return lax.bitcast_convert_type((k + bias).astype(uint) << finfo.nmant, dtype)


def _mantissa(v, e):
    """``v 2^-e`` for ``e = _exponent(v)``: in [1, 2). As ``(v 2^(1 - e)) / 2``: ``2^-e`` is
    subnormal for ``|v| >= 2^1023`` (float32 ``2^127``), which ``_pow2`` clips to the smallest
    normal, twice the factor (a Gaussian d sigma/d budget half its value from budgets
    ~4.5e307, where the slope 2C is that large)."""
    return (v * _pow2(1 - e, v.dtype)) * 0.5


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _split(p, x, y, rate):
    r"""``(e, m)``: :math:`p/y` (``rate``) or :math:`p y` as :math:`e\,m`, ``e`` a power of
    two (no derivative) and ``m`` in [1, 2) (larger where the product leaves the float range),
    so that neither overflows. ``m``'s derivative is the product's over ``e``, with the sum
    formed first: :math:`m\,(\dot x - \dot y/y)` for :math:`p/y` (:math:`\dot x - \dot y/y`
    is of the order of :math:`1/c`, where :math:`x_c^2` and :math:`x_{cc}` overflow),
    :math:`(p/e)(y\dot x + \dot y)` for :math:`p y` (``x = log p``: :math:`\dot p/p` overflows
    with :math:`\dot p`)."""
    ep, ey = _exponent(p), _exponent(y)
    k = ep - ey if rate else ep + ey
    bias = _bias(p.dtype)
    k1 = jnp.clip(k, 1 - bias, bias)
    k2 = jnp.clip(k - k1, 1 - bias, bias)
    mp_, my = _mantissa(p, ep), _mantissa(y, ey)  # in [1, 2)
    m = (mp_ / my if rate else mp_ * my) * _pow2(k - k1 - k2, p.dtype)
    e1, e2 = _pow2(k1, p.dtype), _pow2(k2, p.dtype)
    return lax.stop_gradient(e1), lax.stop_gradient(e2), m


@_split.defjvp
def _split_jvp(rate, primals, tangents):
    p, x, y = primals
    _, dx, dy = tangents
    e1, e2, m = _split(p, x, y, rate)
    if rate:
        dm = m * (dx - scaled_divide(dy, y))
    else:  # p / e = the mantissa of p times 2^(ep - k) (p 2^-k overflows for y ~ 0)
        ep = _exponent(p)
        bias = _bias(p.dtype)
        k = jnp.clip(ep + _exponent(y), 1 - bias, bias)
        # (p/e)(y dx + dy) as m dx + (p/e) dy: y dx underflowed where y ~ 1/s is tiny
        # (d^2 sigma/dc ds 0, before +3.5e-151, for -1.8e-151 at budget 1e100, s 1e300)
        dm = m * dx + (_mantissa(p, ep) * _pow2(ep - k, p.dtype)) * dy
    return (e1, e2, m), (jnp.zeros_like(e1), jnp.zeros_like(e2), dm)


def _limit_slope(spec, metric, n, p):
    r""":math:`dp/dc` as the budget :math:`c \to 0^+`, at the limit ``p`` (inf or 0).

    A scale (``p = inf``) falls from infinity: :math:`-\infty` (:math:`p \propto c^{-1/2}`
    for Chernoff information and KL, :math:`c^{-1}` for TV; callables too). An
    :math:`\varepsilon` (``p = 0``) of the geometric mechanism or randomized response:
    Chernoff information and KL are :math:`\propto \varepsilon^2`, so :math:`+\infty`; the
    TV of ``n`` releases is :math:`K_n \varepsilon + O(\varepsilon^2)`, :math:`K_n =
    E|S_n|/2` (:math:`S_n` a simple random walk: each release's privacy loss is
    :math:`\pm\varepsilon` with probability 1/2 as :math:`\varepsilon \to 0`, whatever the
    sensitivity), so :math:`1/K_n`. A callable whose parameter is 0 there: ``nan`` (the
    order at which its metric vanishes is not evaluated).
    """
    if spec.direction == 0:
        at_zero = jnp.nan
    elif metric == "tv":
        at_zero = 1.0 / _tv_zero_slope(n)
    else:
        at_zero = jnp.inf
    slope = jnp.where(p == jnp.inf, -jnp.inf, jnp.where(p == 0, at_zero, jnp.nan))
    return slope.astype(p.dtype)


def _tv_zero_slope(n: int) -> float:
    r""":math:`K_n = E|S_n|/2 = n\binom{n-1}{\lfloor (n-1)/2\rfloor} 2^{-n}`, the slope of the
    TV of ``n`` releases at :math:`\varepsilon = 0` (1/2, 1/2, 3/4, 3/4, ... ;
    :math:`\sim\sqrt{n/2\pi}`)."""
    m = (n - 1) // 2
    if m <= 1000:
        return n * math.comb(n - 1, m) / 2**n  # (exact integers, one rounding)
    # E|S_n| = E|S_{2m+1}| = (2m+1) binom(2m, m) 4^-m, binom(2m, m) 4^-m = Gamma(m + 1/2) /
    # (sqrt(pi) Gamma(m + 1)): its asymptotic series (next term ~ 1.5e-3 m^-5)
    series = 1 - 1 / (8 * m) + 1 / (128 * m**2) + 5 / (1024 * m**3) - 21 / (32768 * m**4)
    return 0.5 * (2 * m + 1) * series / math.sqrt(math.pi * m)


_implicit.defjvp(_implicit_jvp, symbolic_zeros=True)


@_jit.jit(static_argnums=(0, 1, 2, 3))
def _calibrate_jit(spec, metric, n, max_steps, budget, s):
    shape = jnp.broadcast_shapes(budget.shape, s.shape)
    budget = jnp.broadcast_to(budget, shape)
    s = jnp.broadcast_to(s, shape)
    res, slope = _solve(spec, metric, n, max_steps, lax.stop_gradient(budget), lax.stop_gradient(s))
    p, achieved, _ = _implicit(spec, metric, n, True, budget, s, res.parameter, res.achieved, slope)
    # Traced, the eager checks are skipped: an invalid budget or sensitivity gives nan, also
    # in the derivatives (a mask, not a where: the implicit-function rule gave them as 0). A
    # bad sensitivity gave plausible numbers (-1: scale inf at budget 0 with converged=True;
    # geometric 1.5: epsilon 0.967; randomized response ignored it)
    ok = ~(jnp.isnan(budget) | (budget < 0)) & (s > 0) & (s < jnp.inf)
    if spec.name == "geometric":
        ok = ok & (s == jnp.round(s))
    elif spec.name in ("randomized_response", "callable"):
        ok = ok & (s == 1)
    mask = jnp.where(ok, 1.0, jnp.nan).astype(p.dtype)
    return CalibrationResult(p * mask, achieved * mask, res.converged & ok, res.iterations)


def calibrate(
    mechanism: str | Callable,
    budget,
    *,
    sensitivity=1.0,
    compositions: int = 1,
    metric: str = "chernoff",
    max_steps: int = 64,
) -> CalibrationResult:
    r"""Calibrate a mechanism's parameter so that its privacy loss equals ``budget``.

    Solves :math:`m(P_p^{\otimes n}, Q_p^{\otimes n}) = c` for the parameter :math:`p`, where
    :math:`(P_p, Q_p)` is the mechanism's neighbouring pair (:mod:`jaxdp.mechanisms`),
    :math:`n` = ``compositions`` and :math:`m` the metric:

    * ``"chernoff"``: :math:`C = \max_{\alpha} -\log C_\alpha` (eq. (11)); exactly
      :math:`n\,C(P_p, Q_p)` for the ``n``-fold composition (same :math:`\alpha^*`).
    * ``"kl"``: :math:`\max(D(P\|Q), D(Q\|P))`, times :math:`n` (Corollary 1.1).
    * ``"tv"``: total variation = best membership advantage (eq. (37)) of the ``n``-fold
      product, a number in :math:`[0, 1)`.

    Batched: an array of budgets (and/or sensitivities; they broadcast) is solved in one
    jitted call. The result is differentiable with respect to ``budget`` and
    ``sensitivity`` (implicit function theorem; see the module doc).

    Args:
      mechanism: ``"laplace"`` (parameter: scale :math:`b`), ``"gaussian"`` (:math:`\sigma`),
        ``"geometric"`` (:math:`\varepsilon`, scale :math:`\Delta/\varepsilon`, integer
        sensitivity), ``"randomized_response"`` (binary, :math:`\varepsilon`), or a
        callable ``p -> (P, Q)`` returning jaxdp distributions whose metric is monotone in
        :math:`p > 0` (it must accept an array ``p`` of the budgets' shape; it is a static
        argument of the jitted solver, so pass the same function object to reuse the
        compilation).
      budget: the budget :math:`c \ge 0` (nats for ``"chernoff"``/``"kl"``), any shape.
      sensitivity: :math:`\Delta > 0` for Laplace, Gaussian and geometric (an integer for
        the latter); must stay 1 for randomized response and callables (they take no
        sensitivity).
      compositions: :math:`n \ge 1` (static int): calibrate the ``n``-fold composition.
      metric: ``"chernoff"`` (default), ``"kl"`` or ``"tv"``.
      max_steps: static cap on Newton iterations.

    Returns:
      :class:`CalibrationResult` ``(parameter, achieved, converged, iterations)``, shaped
      by ``broadcast(budget, sensitivity)``. ``achieved <= budget`` wherever ``converged``.
      Limits: ``budget == 0`` gives scale ``inf`` / :math:`\varepsilon = 0`; a TV budget
      ``>= 1`` gives scale 0 / :math:`\varepsilon = \infty` (see the module doc).

    Raises:
      ValueError: unknown mechanism or metric, bad ``compositions`` (also one of ``2**63``
        or more, ``2**31`` without ``jax_enable_x64``) or ``max_steps``, negative
        or NaN budgets, a non-positive, subnormal or non-finite sensitivity, a non-integer one for
        ``"geometric"``, one other than 1 for randomized response and callables (concrete
        values only: traced, these give ``nan`` and ``converged=False``); for
        ``metric="tv"`` of ``"geometric"`` with ``compositions > 1``, an exact sum beyond
        the size limits of :func:`jaxdp.best_advantage_geometric`; of ``"laplace"``,
        ``compositions > 400`` (:func:`jaxdp.best_advantage_laplace`); a callable
        ``mechanism`` whose distributions' batch shapes do not broadcast to the budgets'.
      TypeError: a traced ``sensitivity`` there (its largest value sizes that sum); a
        callable ``mechanism`` that does not return a pair ``(P, Q)`` of distributions.
      NotImplementedError: ``metric="tv"`` with ``compositions > 1`` for a callable whose
        product has no TV kernel.

    Example:
      >>> r = calibrate("laplace", [0.1, 1.0], compositions=10)  # (float64: x64 on)
      >>> r.parameter  # Laplace scales whose 10-fold Chernoff information is 0.1, 1.0
      Array([3.37461335, 0.96857711], dtype=float64)
    """
    spec = _spec_for(mechanism)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}, got {metric!r}")
    if isinstance(compositions, bool) or not isinstance(compositions, int | np.integer):
        raise ValueError(f"compositions must be a positive int, got {compositions!r}")
    if compositions < 1:
        raise ValueError(f"compositions must be a positive int, got {compositions!r}")
    # n enters the solver as an integer of JAX's default width: beyond it JAX raised an
    # OverflowError about an argument "x2" deep inside the first call
    bits = 63 if jax.config.jax_enable_x64 else 31
    if compositions >= 2**bits:
        hint = "" if bits == 63 else " without jax_enable_x64 (2**63 with it)"
        raise ValueError(f"compositions must be below 2**{bits}{hint}, got {compositions!r}")
    if (
        isinstance(max_steps, bool)
        or not isinstance(max_steps, int | np.integer)  # (np.int64(64) was refused)
        or max_steps < 1
    ):
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    budget_in = budget
    budget, s = _checks.as_inexact(budget, sensitivity, names=("budget", "sensitivity"))
    b_vals, s_vals = _checks.as_given(budget_in, budget), _checks.as_given(sensitivity, s)
    if _checks.is_concrete(b_vals):
        v = np.asarray(b_vals)
        if np.isnan(v).any():
            raise ValueError("budget contains NaN")
        if (v < 0).any():
            raise ValueError(f"budget must be >= 0, got {_checks.written(v[v < 0].flat[0])}")
    _checks.check_positive("sensitivity", s_vals)
    _checks.check_normal("sensitivity", s_vals)  # (XLA flushes subnormals: nan results)
    if spec.name == "geometric":
        _checks.check_integer("sensitivity", s_vals)
    if spec.name in ("randomized_response", "callable") and _checks.is_concrete(s_vals):
        if (np.asarray(s_vals) != 1).any():
            raise ValueError(
                f"sensitivity does not apply to {spec.name!r} (it must be 1); fold it into "
                "the mechanism instead"
            )
    shape = _checks.check_broadcast("budget, sensitivity", budget.shape, s.shape)
    if spec.name == "callable":
        _check_callable(spec.fn, shape, budget.dtype)
    if metric == "tv" and compositions > 1 and spec.name == "laplace":
        from jaxdp.membership import _BOUNDS_HINT, LAPLACE_MAX_N

        if compositions > LAPLACE_MAX_N:  # (refused inside the solver as "n=401: ...")
            raise ValueError(
                f"compositions must be <= {LAPLACE_MAX_N} for metric='tv' of 'laplace', got "
                f"{compositions}: the exact n-fold Laplace recursion's setup grows as n^4 "
                f"(~35 s at 400 on one CPU core); use {_BOUNDS_HINT}"
            )
    if metric == "tv" and compositions > 1 and spec.name == "geometric":
        # the exact n-fold sum's static size comes from the largest sensitivity
        if not _checks.is_concrete(s_vals):
            raise TypeError(
                "sensitivity must be concrete (not traced) for metric='tv' of 'geometric' "
                "with compositions > 1: its largest value sets the size of the exact sum"
            )
        from jaxdp.membership import geometric_plan

        try:
            dmax = geometric_plan(
                compositions, np.broadcast_to(np.asarray(s_vals), shape), budget.dtype
            )
        except ValueError as e:  # (it names n, the compositions)
            raise ValueError(f"compositions and sensitivity too large: {e}") from None
        spec = dataclasses.replace(spec, max_sensitivity=dmax)
    return _calibrate_jit(
        spec, metric, int(compositions), min(int(max_steps), _checks.MAX_STEPS), budget, s
    )

"""Distributions as pytrees.

Every distribution is an immutable pytree whose float fields may be arrays: a
``Laplace(loc=array[1000], scale=array[1000])`` is a batch of 1000 distributions, and batch
dimensions broadcast between the two distributions of a pair (and ``alpha``). Constructors
validate concrete values (a non-positive scale, a probability vector off the simplex, NaN)
and raise ``ValueError`` naming the argument; reconstruction inside JAX transformations skips
validation, so every class works under ``jit``, ``vmap`` and ``grad``.

Families:

* :class:`Laplace` — density :math:`e^{-|x-\\mu|/b}/(2b)` (the Laplace mechanism, eq. (33)).
* :class:`Gaussian` — :math:`\\mathcal N(\\mu, \\sigma^2)`; ``scale`` is the standard deviation.
* :class:`DiscreteLaplace` — on the integers, :math:`P(k) = \\tanh(1/(2b))\\, e^{-|k-\\mu|/b}`
  with integer :math:`\\mu` (the geometric mechanism).
* :class:`Categorical` — a finite pmf; the last axis of ``probs`` is the support.
* :class:`Density` — any 1-D density given by its log-density (quadrature path).
* :class:`Product` — independent composition of the above.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxdp import _checks
from jaxdp import _fastmath as fm

__all__ = ["Categorical", "Density", "DiscreteLaplace", "Gaussian", "Laplace", "Product"]

#: The quadrature path's default level (:class:`Density`'s ``level``) and the accepted range:
#: below 3 the rules integrate even N(0, 1) only to ~1e-4 (the constructor's mass check
#: would refuse it), and level 10 has ~6500 nodes per finite piece, beyond which float64
#: rounding, not the rule, sets the error.
DEFAULT_QUADRATURE_LEVEL = 5
MIN_QUADRATURE_LEVEL, MAX_QUADRATURE_LEVEL = 3, 10


class Distribution:
    """Base class. Subclasses are immutable (assignment raises
    ``dataclasses.FrozenInstanceError``) and registered as pytrees; they are not
    dataclasses (no ``dataclasses.replace``)."""

    _data_fields: ClassVar[tuple[str, ...]] = ()
    _meta_fields: ClassVar[tuple[str, ...]] = ()
    #: ``(field, n)``: a data field's last ``n`` axes are not batch axes (categories, ...).
    _event_ndims: ClassVar[tuple[tuple[str, int], ...]] = ()
    #: "continuous" (Lebesgue on an interval), "integers" or "finite".
    support_kind: ClassVar[str] = "continuous"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)

        def flatten(d):
            return (
                tuple(getattr(d, f) for f in cls._data_fields),
                tuple(getattr(d, f) for f in cls._meta_fields),
            )

        def unflatten(meta, data):
            obj = object.__new__(cls)
            for f, v in zip(cls._data_fields, data, strict=True):
                object.__setattr__(obj, f, v)
            for f, v in zip(cls._meta_fields, meta, strict=True):
                object.__setattr__(obj, f, v)
            return obj

        jax.tree_util.register_pytree_node(cls, flatten, unflatten)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(*(jnp.shape(getattr(self, f)) for f in self._data_fields)))

    @property
    def dtype(self):
        return jnp.result_type(*(getattr(self, f) for f in self._data_fields))

    def _invalid(self):
        """Where the parameters would fail the constructor's checks, which cannot run on
        traced values (under ``jit``): the divergences and ``chernoff`` return ``nan`` there.
        ``False`` when there is nothing to check."""
        return False

    def _set(self, **fields):
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def _with(self, **fields) -> Distribution:
        """A copy with ``fields`` replaced, without the constructor's checks."""
        new = object.__new__(type(self))
        new._set(**{f: getattr(self, f) for f in (*self._meta_fields, *self._data_fields)})
        new._set(**fields)
        return new

    def _broadcast_batch(self, shape) -> Distribution:
        """This distribution with every parameter broadcast to the batch ``shape`` (event
        axes kept), so that each leaf leads with ``shape``: ready to flatten for ``vmap``."""
        event = dict(self._event_ndims)
        new = object.__new__(type(self))
        new._set(**{f: getattr(self, f) for f in self._meta_fields})
        for f in self._data_fields:
            e = event.get(f, 0)

            def bcast(x, e=e):
                return jnp.broadcast_to(x, (*shape, *jnp.shape(x)[jnp.ndim(x) - e :]))

            new._set(**{f: jax.tree_util.tree_map(bcast, getattr(self, f))})
        return new

    def __setattr__(self, name, value):
        raise dataclasses.FrozenInstanceError(f"{type(self).__name__} is immutable")


class _LocScale(Distribution):
    _data_fields = ("loc", "scale")
    loc: jax.Array
    scale: jax.Array

    def _invalid(self):
        tiny = jnp.finfo(self.scale.dtype).tiny  # (subnormal scales are rejected too)
        return ~(jnp.isfinite(self.loc) & (self.scale >= tiny) & (self.scale < jnp.inf))

    def __init__(self, loc=0.0, scale=1.0):
        name = type(self).__name__
        loc, scale = _checks.as_inexact(loc, scale, names=(f"{name}: loc", f"{name}: scale"))
        _checks.check_finite(f"{name}: loc", loc)
        _checks.check_positive(f"{name}: scale", scale)
        _checks.check_normal(f"{name}: scale", scale)
        _checks.check_broadcast(f"{name}: loc and scale", loc.shape, scale.shape)
        self._set(loc=loc, scale=scale)

    def __repr__(self):
        return f"{type(self).__name__}(loc={self.loc!r}, scale={self.scale!r})"

    def _quad_points(self):
        return self.loc[..., None]

    def _quad_scale(self):
        return self.scale

    @classmethod
    def _log_prob_of(cls, x, params):
        """``log_prob`` at ``x`` of the distribution with ``params = (loc, scale)``: the
        ``log_prob_fn`` of :meth:`_as_density` (one function per class, so that its pytree
        structure, and what JAX caches on it, is the same for every instance)."""
        d = object.__new__(cls)
        d._set(loc=params[0], scale=params[1])
        return d.log_prob(x)

    def _as_density(self, breakpoints) -> Density:
        """This distribution as a :class:`Density` (same ``log_prob``, differentiable in
        ``(loc, scale)``, centre ``loc``) with ``breakpoints`` (``batch + (k,)``) splitting
        its rule, without the constructor's checks: for the quadrature path's second solve
        (``jaxdp.chernoff``), which adds the integrand's peak to the rule. Continuous
        families only."""
        new = object.__new__(Density)
        batch = tuple(np.broadcast_shapes(self.batch_shape, breakpoints.shape[:-1]))
        new._set(
            params=(self.loc, self.scale),
            breakpoints=jnp.broadcast_to(breakpoints, batch + breakpoints.shape[-1:]),
            centre=self.loc,
            scale=self.scale,
            log_prob_fn=self._log_prob_of,
            lower=self.lower,
            upper=self.upper,
            level=None,  # no level of its own: the pair's other member decides
        )
        return new


class Laplace(_LocScale):
    r"""Laplace distribution, density :math:`\frac{1}{2b} e^{-|x-\mu|/b}`.

    Args:
      loc: location :math:`\mu` (finite), any shape (a batch).
      scale: scale :math:`b > 0`, broadcastable with ``loc``.
    """

    lower: ClassVar[float] = -math.inf
    upper: ClassVar[float] = math.inf

    def log_prob(self, x):
        return -jnp.abs(x - self.loc) / self.scale - jnp.log(2.0 * self.scale)


class Gaussian(_LocScale):
    r"""Gaussian distribution :math:`\mathcal N(\mu, \sigma^2)`; ``scale`` is :math:`\sigma`.

    Args:
      loc: mean :math:`\mu` (finite), any shape (a batch).
      scale: standard deviation :math:`\sigma > 0`, broadcastable with ``loc``.
    """

    lower: ClassVar[float] = -math.inf
    upper: ClassVar[float] = math.inf

    def log_prob(self, x):
        z = (x - self.loc) / self.scale
        return -0.5 * z * z - jnp.log(self.scale) - 0.5 * math.log(2.0 * math.pi)


class DiscreteLaplace(_LocScale):
    r"""Discrete Laplace (two-sided geometric) distribution on the integers.

    .. math:: P(k) = \tanh\!\big(\tfrac{1}{2b}\big)\, e^{-|k - \mu|/b}, \quad k \in \mathbb Z,

    with integer ``loc`` :math:`\mu` and ``scale`` :math:`b > 0`. The geometric mechanism with
    privacy parameter :math:`\varepsilon` uses :math:`b = \Delta/\varepsilon`. ``loc`` is stored
    as a float array holding integer values (so batches share one dtype).

    Args:
      loc: location :math:`\mu`, integer-valued (ints or floats), any shape (a batch).
      scale: scale :math:`b > 0`, broadcastable with ``loc``.
    """

    support_kind = "integers"

    def _invalid(self):
        return super()._invalid() | (self.loc != jnp.round(self.loc))

    def __init__(self, loc=0, scale=1.0):
        super().__init__(loc, scale)
        _checks.check_integer("DiscreteLaplace: loc", self.loc)

    def log_prob(self, k):
        from jaxdp._special import logtanh

        return logtanh(0.5 / self.scale) - jnp.abs(k - self.loc) / self.scale


def _log_masses(probs, given=None):
    """``log(probs)``, with tangent 0 (not ``0 * inf = nan``, which no mask downstream removes
    from second derivatives) at zero masses: a double ``where`` keeps 0 away from the log.
    Zero is read from the bits, as :func:`jaxdp._fastmath.log` reads subnormal masses
    (float64 on CPU, where ``jnp.log`` sees them flushed to zero): 5e-324 is log 5e-324.

    Concrete masses (a categorical built eagerly) are logged by numpy instead, in float64
    (correctly rounded nearly always; :func:`jaxdp._fastmath.log` is within 1 ulp), with
    no derivative to keep: eagerly, the jnp version ran ~30 single-op XLA programs, each
    compiled for every new shape (~1 s to build a categorical of a new shape). ``given``, the
    masses as passed, is logged instead where concrete: a float64 mass below the float32
    range (without ``jax_enable_x64``), 1e-50, was rounded to 0 first (log-prob ``-inf`` for
    the float32 -115.13)."""
    if _checks.is_concrete(probs):
        v = np.asarray(probs)
        if given is not None and _checks.is_concrete(given):
            v64 = np.asarray(jax.device_get(given), dtype=np.float64)
        else:
            v64 = v.astype(np.float64)
        with np.errstate(divide="ignore"):
            out = jnp.asarray(np.log(v64).astype(v.dtype))
        if isinstance(probs, jax.Array) and probs.committed:
            out = jax.device_put(out, probs.sharding)
        return out
    uint = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[probs.dtype.itemsize]
    zero = (lax.bitcast_convert_type(probs, uint) << 1) == 0  # +0.0 or -0.0
    return jnp.where(zero, -jnp.inf, fm.log(jnp.where(zero, 1.0, probs)))


class Categorical(Distribution):
    r"""A finite distribution; the last axis of ``probs`` is the support.

    Stored as log-probabilities (``log_probs``; ``-inf`` marks zero mass). Build it from
    probabilities, ``Categorical(probs)``, or from log-probabilities,
    ``Categorical.from_log_probs(log_probs)``. Probabilities must be non-negative and sum to 1
    along the last axis (to within ``1e-12 * max(1, sqrt(k))`` in float64, ``1e-5 *
    max(1, sqrt(k))`` in float32, for ``k`` categories: the rounding of a sum of ``k``
    terms); they are not renormalised silently.

    Args:
      probs: probabilities, shape ``batch_shape + (k,)`` for ``k >= 1`` categories.
    """

    _data_fields = ("log_probs",)
    _event_ndims = (("log_probs", 1),)
    support_kind = "finite"
    log_probs: jax.Array

    def __init__(self, probs):
        given = probs
        (probs,) = _checks.as_inexact(probs, names=("Categorical: probs",))
        self._validate(probs, "Categorical: probs")
        self._set(log_probs=_log_masses(probs, given))

    @classmethod
    def from_log_probs(cls, log_probs) -> Categorical:
        (lp,) = _checks.as_inexact(log_probs, names=("Categorical.from_log_probs: log_probs",))
        name = "Categorical.from_log_probs: log_probs"
        if _checks.is_concrete(lp):
            v = np.asarray(lp)
            if np.isnan(v).any() or (v == np.inf).any():
                raise ValueError(f"{name} contains NaN or +inf")
            # (named as the probabilities' checks: "log_probs must lie in [0, 1]" for a log
            # probability of 0.1, "log_probs must sum to 1" for [0, 0])
            if (v > 0).any():
                raise ValueError(
                    f"{name} must be <= 0 (log-probabilities), got {v[v > 0].flat[0]!s}"
                )
            cls._validate(jnp.exp(lp), "Categorical.from_log_probs: exp(log_probs)")
        obj = object.__new__(cls)
        obj._set(log_probs=lp)
        return obj

    @staticmethod
    def _validate(probs, name):
        if probs.ndim < 1 or probs.shape[-1] < 1:
            raise ValueError(f"{name} needs a non-empty last axis (the support)")
        if _checks.is_concrete(probs):
            v = np.asarray(probs, dtype=np.float64)
            if np.isnan(v).any():
                raise ValueError(f"{name} contains NaN")
            if (v < 0).any() or (v > 1).any():
                raise ValueError(f"{name} must lie in [0, 1]")
            tol = 1e-12 if probs.dtype == jnp.float64 else 1e-5
            total = v.sum(-1)
            if (np.abs(total - 1.0) > tol * max(1, v.shape[-1] ** 0.5)).any():
                bad = total[np.abs(total - 1.0) > tol * max(1, v.shape[-1] ** 0.5)].flat[0]
                # (float: numpy's repr of its own scalars, "got np.float64(0.9)")
                raise ValueError(f"{name} must sum to 1 along the last axis, got {float(bad)!r}")

    @property
    def probs(self):
        return jnp.exp(self.log_probs)

    def _invalid(self):
        lp = self.log_probs  # the checks of _validate: NaN, a mass above 1, the sum
        tol = (1e-12 if lp.dtype == jnp.float64 else 1e-5) * max(1, lp.shape[-1] ** 0.5)
        off = jnp.abs(jnp.sum(jnp.exp(lp), axis=-1) - 1.0) > tol
        return jnp.any(jnp.isnan(lp) | (lp > 0), axis=-1) | off

    @property
    def num_categories(self) -> int:
        return self.log_probs.shape[-1]

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.log_probs.shape[:-1])

    def __repr__(self):
        if not isinstance(self.log_probs, jax.Array | np.ndarray):
            # (not an array: a tree_map'd or eval_shape'd copy, whose exp raised TypeError)
            return f"Categorical(log_probs={self.log_probs!r})"
        return f"Categorical(probs={self.probs!r})"


def _check_mechanism_output(out, shape: tuple[int, ...], want: str) -> None:
    """``out``, what a callable ``mechanism`` returned under :func:`jax.eval_shape`: a pair
    ``(P, Q)`` of distributions whose batch shapes broadcast to ``shape`` (``want`` says
    which shape, in the error). Shared by ``calibrate`` and ``allocate_budget``.

    Raises:
        TypeError: not a pair of distributions (naming what it is).
        ValueError: batch shapes that do not broadcast to ``shape``.
    """
    if not (
        isinstance(out, tuple | list)
        and len(out) == 2
        and all(isinstance(d, Distribution) for d in out)
    ):

        def kind(v):  # (eval_shape gives arrays as ShapeDtypeStructs)
            return "array" if isinstance(v, jax.ShapeDtypeStruct) else type(v).__name__

        got = kind(out)
        if isinstance(out, tuple | list):
            got = f"{got} ({', '.join(map(kind, out))})"
        raise TypeError(f"mechanism must return a pair (P, Q) of jaxdp distributions, got {got}")
    got = [d.batch_shape for d in out]
    try:
        ok = np.broadcast_shapes(*got, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"mechanism must return distributions {want}, got {got[0]} and {got[1]}")


def _call_log_prob(fn, x, params):
    """A :class:`Density`'s ``log_prob_fn`` at ``x``, each ``params`` leaf with a trailing
    axis (none without ``params``)."""
    if params is None:
        return fn(x)
    return fn(x, jax.tree_util.tree_map(lambda p: jnp.asarray(p)[..., None], params))


def _depends_on_x(fn, x, params) -> bool:
    """Whether ``log_prob`` at ``x`` (:func:`_call_log_prob`) reads the values of ``x``, not
    only its shape: from one abstract trace, following ``x`` through the equations (and
    into the jaxprs of calls; any other higher-order primitive that reads ``x`` counts as
    reading it in all its outputs)."""
    from jax.extend import core

    def outputs(jaxpr, read):
        seen = {v for v, r in zip(jaxpr.invars, read, strict=True) if r}
        for eqn in jaxpr.eqns:
            ins = [isinstance(v, core.Var) and v in seen for v in eqn.invars]
            if not any(ins):
                continue
            inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
            inner = getattr(inner, "jaxpr", inner)  # (a ClosedJaxpr's)
            if (
                isinstance(inner, core.Jaxpr)
                and len(inner.invars) == len(ins)
                and len(inner.outvars) == len(eqn.outvars)
            ):
                outs = outputs(inner, ins)
            else:
                outs = [True] * len(eqn.outvars)
            seen.update(v for v, r in zip(eqn.outvars, outs, strict=True) if r)
        return [isinstance(v, core.Var) and v in seen for v in jaxpr.outvars]

    spec = jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))
    closed = jax.make_jaxpr(lambda x: jnp.asarray(_call_log_prob(fn, x, params)))(spec)
    return any(outputs(closed.jaxpr, [True]))


class Density(Distribution):
    r"""Any 1-D density given by its log-density; Chernoff quantities use quadrature.

    Args:
      log_prob: ``log_prob(x)`` or, when ``params`` is given, ``log_prob(x, params)``:
        the normalised log-density, elementwise in ``x`` (``-inf`` outside the support).
        ``x`` has shape ``batch_shape + (n,)`` and every ``params`` leaf is passed with a
        trailing axis of length 1 added, so elementwise code broadcasts. An output computed
        from ``x`` has ``x``'s shape; only one constant in ``x`` (a uniform density) may be
        smaller and broadcast (else ``ValueError`` naming ``log_prob``).
      params: optional pytree of arrays (differentiable; leading axes are a batch). Values
        ``log_prob`` closes over are differentiable too (``jax.grad`` of
        ``chernoff(Density(lambda x: log_p(x, theta)), Q)`` in ``theta``); a batch of
        densities in one ``Density`` takes its batch from ``params``.
      lower, upper: support bounds (Python floats; may be infinite).
      breakpoints: kinks or other points where the integrand is not smooth (a sequence of
        floats or arrays broadcastable to the batch); they split the quadrature.
      centre: a point of high density (default 0); splits the quadrature too.
      scale: a length scale of the density (default 1), used for the infinite tails.
      level: the quadrature rules' step :math:`h = 2^{-\text{level}}`, an integer in 3..10
        (default 5: ~200 tanh-sinh nodes per finite piece, ~260 exp-sinh per tail). Each
        level up doubles the nodes and the cost; the error of these double-exponential
        rules roughly squares, so the change from ``level`` to ``level + 1`` estimates the
        error at ``level``: check a density that bends sharply between its breakpoints
        that way (README, section "Precision", "Limits of the quadrature path"). A pair
        uses the higher level of its densities.

    The density must integrate to 1, and ``centre``, ``scale`` and ``breakpoints`` tell the
    quadrature rule where it lives: with concrete parameters the constructor checks that
    the rule integrates it to 1 to within ``max(1e-7, 64 eps)`` (not under ``jit``). A
    ``nan`` from ``log_prob`` is read as a zero density at that node (as ``(k - 1) log x``
    gives at ``x = 0`` for ``k = 1``): the constructor rejects a ``log_prob`` that is
    ``nan`` at ``centre`` or ``centre -+ scale`` (inside the support, concrete parameters),
    but one that is ``nan`` elsewhere gives wrong numbers, not ``nan``; check it on a grid
    first.
    """

    _data_fields = ("params", "breakpoints", "centre", "scale")
    _meta_fields = ("log_prob_fn", "lower", "upper", "level")
    _event_ndims = (("breakpoints", 1),)
    params: Any
    breakpoints: jax.Array
    centre: jax.Array
    scale: jax.Array
    log_prob_fn: Callable
    lower: float
    upper: float
    level: int | None

    def __init__(
        self,
        log_prob: Callable,
        *,
        params: Any = None,
        lower: float = -math.inf,
        upper: float = math.inf,
        breakpoints: Sequence = (),
        centre=0.0,
        scale=1.0,
        level: int = DEFAULT_QUADRATURE_LEVEL,
    ):
        if not callable(log_prob):
            raise TypeError("Density: log_prob must be callable")
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)):
            raise TypeError(f"Density: level must be an integer, got {level!r}")
        if not MIN_QUADRATURE_LEVEL <= level <= MAX_QUADRATURE_LEVEL:
            raise ValueError(
                f"Density: level must be in {MIN_QUADRATURE_LEVEL}..{MAX_QUADRATURE_LEVEL}, "
                f"got {level}"
            )
        try:
            lower, upper = float(lower), float(upper)
        except (TypeError, ValueError):
            raise TypeError(
                f"Density: lower and upper must be floats, got {lower!r} and {upper!r}"
            ) from None
        if not lower < upper:
            raise ValueError(f"Density: need lower < upper, got lower={lower}, upper={upper}")
        if (
            isinstance(breakpoints, (str, bytes))
            or not hasattr(breakpoints, "__len__")
            or getattr(breakpoints, "ndim", 1) == 0  # (a 0-d array: not iterable)
        ):
            raise TypeError(
                "Density: breakpoints must be a sequence of floats or arrays, got "
                f"{type(breakpoints).__name__}"
            )
        breakpoints = list(breakpoints)
        # one dtype for all: the defaults (centre 0, scale 1) and Python-float breakpoints
        # are weakly typed and follow float32 params (they were float64, and made a float32
        # density float64 under x64)
        leaves, tree = jax.tree_util.tree_flatten(params)
        names = (
            ("Density: params",) * len(leaves)
            + ("Density: breakpoints",) * len(breakpoints)
            + ("Density: centre", "Density: scale")
        )
        *arrays, centre, scale = _checks.as_inexact(
            *leaves, *breakpoints, centre, scale, names=names
        )
        params = jax.tree_util.tree_unflatten(tree, arrays[: len(leaves)])
        bp = arrays[len(leaves) :]
        # each broadcastable to the batch, as documented, so to each other's shape (stacked
        # as given, a float next to an array raised jnp.stack's unnamed shape error)
        _checks.check_broadcast("Density: breakpoints", *(b.shape for b in bp))
        bp = jnp.stack(jnp.broadcast_arrays(*bp), -1) if bp else jnp.zeros((0,), centre.dtype)
        _checks.check_broadcast(  # (was numpy's unnamed error, from batch_shape)
            "Density: params, breakpoints, centre and scale",
            *(leaf.shape for leaf in arrays[: len(leaves)]),
            bp.shape[:-1],
            centre.shape,
            scale.shape,
        )
        _checks.check_finite("Density: breakpoints", bp)
        for leaf in arrays[: len(leaves)]:  # (infinite values may be legal parameters)
            if _checks.is_concrete(leaf) and np.isnan(np.asarray(leaf)).any():
                raise ValueError("Density: params contains NaN")
        _checks.check_positive("Density: scale", scale)
        _checks.check_normal("Density: scale", scale)
        _checks.check_finite("Density: centre", centre)
        self._set(
            params=params,
            breakpoints=bp,
            centre=centre,
            scale=scale,
            log_prob_fn=log_prob,
            lower=lower,
            upper=upper,
            level=int(level),
        )
        self._check_log_prob()

    def _invalid(self):
        """NaN parameters or breakpoints, a non-finite centre, a scale out of range: the
        constructor's checks on traced values (a NaN parameter gave KL inf, TV 1/2, a
        negative Rényi divergence and a "converged" Chernoff information of inf)."""
        tiny = jnp.finfo(self.scale.dtype).tiny
        bad = ~(jnp.isfinite(self.centre) & (self.scale >= tiny) & (self.scale < jnp.inf))
        bad = bad | jnp.any(jnp.isnan(self.breakpoints), axis=-1)
        for leaf in jax.tree_util.tree_leaves(self.params):
            bad = bad | jnp.isnan(leaf)
        return bad

    def _check_log_prob(self):
        """Evaluate ``log_prob`` at ``centre`` and ``centre -+ scale`` (those strictly inside
        the support; concrete parameters and closure only) and reject ``nan``: the
        quadrature reads a ``nan`` as a zero density (see the class doc), so a broken
        ``log_prob`` would otherwise give finite, wrong numbers. Then reject a density that
        the quadrature rule does not integrate to 1 (:meth:`_check_mass`)."""
        if not _checks.is_concrete(self.params, self.centre, self.scale, self.breakpoints):
            return
        offsets = jnp.asarray([-1.0, 0.0, 1.0], self.dtype)
        x = self.centre[..., None] + self.scale[..., None] * offsets
        x = jnp.broadcast_to(x, self.batch_shape + (3,))
        inside = np.asarray((x > self.lower) & (x < self.upper))
        value = self.log_prob(x)
        if not _checks.is_concrete(value):  # it closes over a traced value: cannot check
            return
        bad = np.isnan(np.asarray(value)) & inside
        if bad.any():
            raise ValueError(
                f"Density: log_prob returned nan at x = {np.asarray(x)[bad].flat[0]:.6g}, inside "
                f"the support ({self.lower}, {self.upper})"
            )
        self._check_mass()

    def _check_mass(self):
        """Reject a density whose integral on the quadrature rule is not 1 to within
        ``max(1e-7, 64 eps)``: unnormalised, or not resolved by the rule, which every
        result of the quadrature path would then inherit, silently. The rule is built
        from ``centre``, ``scale`` and ``breakpoints``: a N(30, 1) left at centre 0
        integrates to 0.596, a N(0, 1e-6) left
        at scale 1 to 1 + 5e-6, a Laplace with its kink at 1 and no breakpoint there to
        1 + 2e-4; well-specified densities come out within ~1e-13 (Cauchy) of 1. One
        compiled evaluation of ``log_prob`` on the rule's nodes (~0.2 s per new
        ``log_prob``; concrete parameters only)."""
        from jaxdp.kernels import quadrature  # (it imports this module)

        mass = np.expm1(np.asarray(quadrature.log_mass(self), dtype=np.float64))
        if mass.size == 0:  # an empty batch: nothing to check (argmax of nothing raised)
            return
        tol = max(1e-7, 64 * float(jnp.finfo(self.dtype).eps))
        worst = np.unravel_index(np.argmax(np.abs(mass)), mass.shape) if mass.ndim else ()
        if not abs(mass[worst]) <= tol:
            at = f" (batch index {tuple(int(i) for i in worst)})" if mass.ndim else ""
            raise ValueError(
                f"Density: the quadrature rule integrates exp(log_prob) to "
                f"{1.0 + mass[worst]:.10g}, not 1{at}: log_prob must be normalised, and the "
                "rule is built from centre (a point of high density), scale (its width) and "
                "breakpoints (kinks): set them to match the density"
            )

    @property
    def batch_shape(self) -> tuple[int, ...]:
        shapes = [jnp.shape(x) for x in jax.tree_util.tree_leaves(self.params)]
        shapes += [self.breakpoints.shape[:-1], self.centre.shape, self.scale.shape]
        return tuple(np.broadcast_shapes(*shapes))

    @property
    def dtype(self):
        return jnp.result_type(*jax.tree_util.tree_leaves(self.params), self.centre, float)

    def log_prob(self, x):
        # in the dtype of x and the density: a float32 density whose code promotes
        # (np.log(2 * np.pi) is a strong float64 under x64) made chernoff's loop carry
        # float64 into float32 state (a while_loop TypeError)
        out = _call_log_prob(self.log_prob_fn, x, self.params)
        try:
            out = jnp.asarray(out)
        except (TypeError, ValueError):
            raise TypeError(
                f"Density: log_prob must return a real array, got {type(out).__name__}"
            ) from None
        if not jnp.issubdtype(out.dtype, jnp.number) or jnp.iscomplexobj(out):
            raise TypeError(f"Density: log_prob must return a real array, got dtype {out.dtype}")
        # elementwise in x: a shape that broadcasts to x's (with the batch) and no further.
        # One that did not, (..., n, 1), raised JAX's unnamed shape errors in the kernels or
        # broadcast against the other density's nodes into wrong numbers (under jit, where
        # the constructor checks nothing)
        try:
            want = np.broadcast_shapes(jnp.shape(x), self.batch_shape + (1,))
        except ValueError:  # (x and the batch do not broadcast: nothing to compare with)
            want = None
        if want is not None and np.broadcast_shapes(out.shape, want) != want:
            raise ValueError(
                f"Density: log_prob returned shape {out.shape} for x of shape "
                f"{jnp.shape(x)}: it must be elementwise in x (x's shape, or one that "
                "broadcasts to it)"
            )
        # a shape smaller than x's, (..., 1) or (), broadcasts: right for a value constant in
        # x (a uniform density), wrong for one computed from x (a sum over the last axis,
        # keepdims or not, x[..., :1]), which gave KL 1 or inf for N(0, 1) vs itself under
        # jit and vmap (the constructor's mass check, concrete parameters only, said
        # "integrates exp(log_prob) to 0")
        if (
            want is not None
            and np.broadcast_shapes(out.shape, jnp.shape(x)) != out.shape
            and _depends_on_x(self.log_prob_fn, x, self.params)
        ):
            raise ValueError(
                f"Density: log_prob returned shape {out.shape} for x of shape "
                f"{jnp.shape(x)}, computed from x: it must be elementwise in x (x's shape; "
                "only a value constant in x, a uniform density, may broadcast)"
            )
        return out.astype(jnp.result_type(x, self.dtype))

    def _closed_over(self) -> list:
        """The traced values (under ``jit`` or a derivative) that ``log_prob`` reads without
        taking them as ``params``: ``jax.closure_convert``'s hoisted constants, from one
        trace of ``log_prob`` at the batch shape. Empty for concrete closures."""
        x = jnp.zeros(self.batch_shape + (1,), self.dtype)
        # (a partial of the function alone: closure_convert caches what it converts)
        call = functools.partial(_call_log_prob, self.log_prob_fn)
        return jax.closure_convert(call, x, self.params)[1]

    def _quad_points(self):
        return jnp.concatenate(
            [
                jnp.broadcast_to(self.centre[..., None], self.batch_shape + (1,)),
                jnp.broadcast_to(self.breakpoints, self.batch_shape + self.breakpoints.shape[-1:]),
            ],
            -1,
        )

    def _quad_scale(self):
        return self.scale

    def _with_breakpoints(self, extra) -> Density:
        """This density with ``extra`` (``batch + (k,)``) added to its breakpoints (the
        quadrature rule only: they change no value)."""
        batch = tuple(np.broadcast_shapes(self.breakpoints.shape[:-1], extra.shape[:-1]))
        bp = [jnp.broadcast_to(v, batch + v.shape[-1:]) for v in (self.breakpoints, extra)]
        return self._with(breakpoints=jnp.concatenate(bp, -1).astype(self.breakpoints.dtype))


class Product(Distribution):
    r"""Independent composition :math:`P_1 \otimes \dots \otimes P_m`.

    ``Product(P1, P2, ...)`` composes the given components;
    ``Product.iid(P, n)`` is the ``n``-fold product of ``P`` (stored once, with a count).
    For pairs of products with matching structure, :math:`\log C_\alpha` is the (count-weighted)
    sum of the components' (DESIGN §4: additivity over products).

    Args:
      *components: at least one jaxdp distribution; their batch shapes broadcast.
    """

    _data_fields = ("components",)
    _meta_fields = ("counts",)
    support_kind = "product"
    components: tuple
    counts: tuple[int, ...]

    def __init__(self, *components: Distribution):
        if not components:
            raise ValueError("Product needs at least one component")
        for i, c in enumerate(components):
            if not isinstance(c, Distribution):
                raise TypeError(
                    f"Product: component {i} must be a jaxdp distribution, got {type(c).__name__}"
                )
        shapes = [c.batch_shape for c in components]
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(
                f"Product: the components' batch shapes {shapes} do not broadcast together"
            ) from None
        self._set(components=tuple(components), counts=(1,) * len(components))

    @classmethod
    def iid(cls, dist: Distribution, n: int) -> Product:
        """The ``n``-fold independent product of ``dist``; ``n`` a positive integer below
        ``2**63`` (``2**31`` without ``jax_enable_x64``: the count enters the kernels as an
        integer of JAX's default width)."""
        if not isinstance(dist, Distribution):
            raise TypeError(f"Product.iid: dist must be a jaxdp distribution, got {type(dist)}")
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"Product.iid: n must be a positive integer, got {n!r}")
        # (a count enters the kernels as an integer of JAX's default width, int32 without
        # jax_enable_x64; JAX's overflow error about an argument "x" was raised deep inside
        # the first call)
        bits = 63 if jax.config.jax_enable_x64 else 31
        if n >= 2**bits:
            hint = "" if bits == 63 else " without jax_enable_x64 (2**63 with it)"
            raise ValueError(f"Product.iid: n must be below 2**{bits}{hint}, got {n!r}")
        obj = object.__new__(cls)
        obj._set(components=(dist,), counts=(int(n),))
        return obj

    @classmethod
    def _of(cls, components, counts) -> Product:
        """Components with their counts, unvalidated (for the library's own rewrites)."""
        obj = object.__new__(cls)
        obj._set(components=tuple(components), counts=tuple(int(n) for n in counts))
        return obj

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(*(c.batch_shape for c in self.components)))

    def _invalid(self):
        return functools.reduce(lambda x, y: x | y, (c._invalid() for c in self.components))

    @property
    def dtype(self):
        return jnp.result_type(*(c.dtype for c in self.components))

    def __repr__(self):
        inner = ", ".join(f"{c!r}^{n}" if n > 1 else repr(c) for c, n in self._items())
        return f"Product({inner})"

    def _items(self):
        return tuple(zip(self.components, self.counts, strict=True))

    def _broadcast_batch(self, shape) -> Product:
        return Product._of([c._broadcast_batch(shape) for c in self.components], self.counts)

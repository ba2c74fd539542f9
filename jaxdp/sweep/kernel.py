"""The per-point computation of a sweep: mechanism -> neighbouring pair -> quantities.

:func:`make_kernel` turns a :class:`~jaxdp.sweep.spec.SweepSpec` into a pure function from a
dict of 1-D parameter arrays (one entry per grid axis, all of the same length) to a dict of 1-D
result arrays (one per quantity). It is elementwise: the value at a point depends only on that
point's parameters, which is what makes chunking, padding and sharding exact.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxdp._checks import error_line
from jaxdp.sweep.grid import cast_checked
from jaxdp.sweep.spec import SweepSpec, resolve_mechanism

__all__ = ["check_kernel", "make_kernel", "point_values"]

Kernel = Callable[[Mapping[str, jax.Array], tuple[int, ...]], dict[str, jax.Array]]


def _float_dtype(spec: SweepSpec) -> Any:
    return jnp.dtype(spec.dtype)


def _int_dtype() -> Any:
    return jnp.asarray(0).dtype  # int64 under x64, int32 otherwise


def _axis_values(spec: SweepSpec, axis: Any) -> np.ndarray:
    """The coordinates of ``axis`` as stored and given to the kernel: in the spec's float
    dtype, or, for an integer axis, int64 (int32 without x64: checked). In a float32 sweep
    the kernel computes an integer axis in float32 (:func:`make_kernel`), so a value that
    float32 does not hold exactly is refused.

    Raises:
        ValueError: one line, naming the axis and the value.
    """
    vals = axis.values(_float_dtype(spec))
    if not axis.is_integer:
        return vals
    for v in axis.args:
        _check_exact(spec, axis.name, v)
    info = np.iinfo(_int_dtype())
    big = [v for v in axis.args if not info.min <= v <= info.max]
    if big:  # (without x64: it wrapped, and the mechanism was blamed for -2147483647)
        raise ValueError(
            f"spec: grid parameter '{axis.name}': {big[0]} is outside the range of "
            f"{info.dtype} (jax_enable_x64 is off); give it as a float or enable x64"
        )
    return vals.astype(_int_dtype())


def _check_exact(spec: SweepSpec, name: str, value: int) -> None:
    """Refuse an integer grid value that the spec's float dtype (float32) does not hold."""
    if spec.dtype != "float64":
        dtype = np.dtype(_float_dtype(spec))
        rounded = dtype.type(value)
        if int(rounded) != value:
            raise ValueError(
                f"spec: grid parameter '{name}': {value} is not exact in {dtype.name} (it "
                f"would be {int(rounded)}); use dtype float64"
            )


def _fixed_value(name: str, value: Any, spec: SweepSpec) -> Any:
    """A fixed parameter as a Python scalar (ints stay static) or a 0-d array of the spec dtype.

    A fixed integer is checked as an integer axis is (:func:`_axis_values`): the mechanisms
    compute with it in the spec's dtype (``sensitivity = 16777217`` in a float32 sweep gave the
    points of 16777216, stored beside 16777217)."""
    if isinstance(value, int):
        _check_exact(spec, name, value)
        return value
    return cast_checked(value, _float_dtype(spec), f"fixed parameter {name!r}")


def make_kernel(spec: SweepSpec) -> Kernel:
    """Build the elementwise function evaluated at every grid point.

    Args:
        spec: a parsed spec.

    Returns:
        ``kernel(params, shape) -> results``: ``params`` maps each grid axis name to an array of
        shape ``shape`` (static); ``results`` maps each quantity of ``spec.quantities`` to an
        array of that shape (float quantities in ``spec.dtype``, ``converged`` as bool).
    """
    import jaxdp as jd

    mechanism = resolve_mechanism(spec.mechanism)
    paper = importlib.import_module("jaxdp.paper") if spec.paper_args else None
    fixed = {n: _fixed_value(n, v, spec) for n, v in spec.grid.fixed}
    defaults = dict(spec.defaults)
    dtype = _float_dtype(spec)
    quantities = spec.quantities
    need_chernoff = any(q in ("chernoff", "alpha", "converged") for q in quantities)
    paper_args = dict(spec.paper_args)
    formula_only = set(spec.formula_only)
    # (an integer axis of a float32 sweep: as int64 the mechanism promoted it to float64 under
    # x64 and computed those points in float64, unlike [1.0, 2.0], the same spec; a Python
    # int, a constant the checks try, stays one)
    int_to_float = spec.dtype != "float64"

    def inputs(params: Mapping[str, Any]) -> dict[str, Any]:
        kw = dict(fixed)
        for n, v in params.items():
            kind = getattr(v, "dtype", None)  # (None: a Python number)
            if int_to_float and kind is not None and jnp.issubdtype(kind, jnp.integer):
                v = v.astype(dtype)
            kw[n] = v
        return kw

    def paper_value(q: str, every: Mapping[str, Any]) -> jax.Array:
        args = {}
        for a in paper_args[q]:
            if isinstance(a.source, tuple):
                _, num, den = a.source
                args[a.name] = jnp.asarray(every[num], dtype) / jnp.asarray(every[den], dtype)
            else:
                args[a.name] = every[a.source]
        return getattr(paper, q)(**args)

    def pair(kw: Mapping[str, Any]):
        return mechanism(**{n: v for n, v in kw.items() if n not in formula_only})

    def kernel(params: Mapping[str, jax.Array], shape: tuple[int, ...]) -> dict[str, jax.Array]:
        kw = inputs(params)
        P, Q = pair(kw)
        every = {**defaults, **kw}
        cache: dict[str, Any] = {}
        if need_chernoff:
            r = jd.chernoff(P, Q)
            cache.update(chernoff=r.information, alpha=r.alpha, converged=r.converged)
        out = {}
        for q in quantities:
            if q in cache:
                v = cache[q]
            elif q == "kl_pq":
                v = jd.kl(P, Q)
            elif q == "kl_qp":
                v = jd.kl(Q, P)
            elif q == "tv":
                v = jd.tv(P, Q)
            elif q == "bhattacharyya":
                v = jd.bhattacharyya(P, Q)
            elif q == "hellinger":
                v = jd.hellinger(P, Q)
            elif q.startswith("renyi_"):
                v = jd.renyi(P, Q, float(q[len("renyi_") :]))
            else:
                v = paper_value(q, every)
            v = jnp.asarray(v)
            if q != "converged":
                v = v.astype(dtype)
            out[q] = jnp.broadcast_to(v, shape)
        return out

    def light(params: Mapping[str, Any]) -> None:
        """The cheap part (mechanism and paper formulas), for eager value checks."""
        kw = inputs(params)
        pair(kw)
        every = {**defaults, **kw}
        for q in paper_args:
            try:
                paper_value(q, every)
            except ValueError as e:  # (was "mechanism 'laplace' rejects the grid: delta ...")
                raise ValueError(
                    f"spec: quantity '{q}' rejects the grid: {error_line(e)}"
                ) from None

    kernel.light = light  # type: ignore[attr-defined]
    kernel.pair = lambda params: pair(inputs(params))  # type: ignore[attr-defined]
    return kernel


#: Values per grid point at most in the mechanism's pair of distributions (e.g. 2k for
#: randomized response on k outcomes): every point of a chunk holds them, several times over.
MAX_POINT_VALUES = 2**24


#: Values of the mechanism's pair per eager call of the value checks at most (the points of an
#: axis are checked in slices of this many values).
CHECK_VALUES = 2**22


def _check_point_size(spec: SweepSpec, kernel: Kernel) -> int:
    """Refuse a pair too large per point, from shapes only (nothing is allocated); return the
    number of values of the pair per point (:func:`point_values`)."""
    total = point_values(spec, kernel)
    if total <= MAX_POINT_VALUES:
        return total
    ints = [f"{n} = {v}" for n, v in spec.grid.fixed if isinstance(v, int)]
    ints += [f"{a.name} up to {max(a.args)}" for a in spec.grid.axes if a.is_integer]
    given = f" with {', '.join(ints)}" if ints else ""
    raise ValueError(
        f"spec: mechanism '{spec.mechanism}'{given} holds {total:.3g} values per grid point, "
        f"more than the {MAX_POINT_VALUES} (2**24) a sweep allows: use smaller values"
    )


def _culprit(spec: SweepSpec, kernel: Kernel, structs: dict[str, Any]) -> str | None:
    """The axis whose tracing fails (a parameter that must be a Python constant)."""
    for a in spec.grid.axes:
        trial = {n: s for n, s in structs.items() if n != a.name}
        value = a.values(np.float64)[0]
        const = int(value) if a.is_integer else float(value)

        def fn(p, _n=a.name, _c=const):
            return kernel({**p, _n: _c}, (8,))

        try:
            jax.eval_shape(fn, trial)
        except Exception:
            continue
        return a.name
    return None


def point_values(spec: SweepSpec, kernel: Kernel) -> int:
    """Values of the mechanism's pair per grid point (e.g. ``2k`` for randomized response on
    ``k`` outcomes), from shapes only; 1 where they cannot be found."""
    try:
        first = {a.name: _axis_values(spec, a)[:1] for a in spec.grid.axes}
    except ValueError:  # (check_kernel reports it)
        return 1
    try:
        shapes = jax.eval_shape(kernel.pair, first)  # type: ignore[attr-defined]
    except Exception:  # (check_kernel's eager checks report what is wrong)
        return 1
    return max(1, sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(shapes)))


def check_kernel(spec: SweepSpec, kernel: Kernel) -> dict[str, Any]:
    """Validate the spec against the mechanism before any work; return output dtypes.

    Three cheap checks: the size of the mechanism's pair per point, from shapes alone (at most
    :data:`MAX_POINT_VALUES`, so that a huge ``k`` is refused before anything is allocated);
    the mechanism and the paper formulas (not the core quantities) are called
    eagerly with every value of every axis (one axis at a time, the others at their first
    value, in slices of at most :data:`CHECK_VALUES` values of the pair), so their own value
    checks see every grid value; then the whole kernel is traced
    abstractly (:func:`jax.eval_shape`), which catches shape/type problems and parameters that
    cannot vary over a grid (such as the support size ``k`` of randomized response).

    Raises:
        ValueError: one line, naming the mechanism (or the paper formula that refuses a value)
            and the offending parameter where known.
    """
    first = {}
    axis_values = {}
    for a in spec.grid.axes:
        vals = _axis_values(spec, a)
        axis_values[a.name] = vals
        first[a.name] = vals[:1]

    def reject(e: Exception, what: str = "rejects the grid") -> ValueError:
        msg = error_line(e)
        return ValueError(f"spec: mechanism '{spec.mechanism}' {what}: {msg}")

    per_point = _check_point_size(spec, kernel)
    # (a whole axis at once held axis length x per_point values: 16 GB for randomized
    # response with k = 1000 on an axis of 10**6 points, which the sweep itself runs by chunks)
    step = max(1, CHECK_VALUES // per_point)
    light = kernel.light  # type: ignore[attr-defined]
    try:
        try:
            light(first)
        except (ValueError, TypeError):
            for a in spec.grid.axes:  # an int that must be a Python constant (e.g. k)?
                # (by its first value: k = [2, 3.5] or [2.0, 3.0] gave the mechanism's own
                # "k must be an integer >= 2, got array([2.])", refusing a valid 2)
                v0 = axis_values[a.name][0]
                if np.isfinite(v0) and float(v0).is_integer():
                    try:
                        light({**first, a.name: int(v0)})
                    except (ValueError, TypeError):
                        continue
                    raise ValueError(
                        f"spec: grid parameter '{a.name}' cannot vary for mechanism "
                        f"'{spec.mechanism}' (it must be a constant): give it a single value"
                    ) from None
            raise
        for a in spec.grid.axes:  # every value of each axis, the others at their first
            vals = axis_values[a.name]
            for i in range(0, len(vals), step):
                light({**first, a.name: vals[i : i + step]})
    except ValueError as e:
        if str(e).startswith("spec: "):
            raise
        raise reject(e) from None
    except (TypeError, NotImplementedError) as e:  # (a quantity with no kernel for the pair)
        raise reject(e) from None

    n = 8
    structs = {n_: jax.ShapeDtypeStruct((n,), v.dtype) for n_, v in axis_values.items()}
    try:
        shapes = jax.eval_shape(lambda p: kernel(p, (n,)), structs)
    except (
        jax.errors.ConcretizationTypeError,
        jax.errors.TracerBoolConversionError,
        jax.errors.TracerIntegerConversionError,
    ) as e:
        name = _culprit(spec, kernel, structs)
        if name is not None:
            raise ValueError(
                f"spec: grid parameter '{name}' cannot vary for mechanism '{spec.mechanism}' "
                "(it must be a constant): give it a single value"
            ) from None
        raise reject(e, "cannot be traced") from None
    except (ValueError, TypeError, NotImplementedError) as e:
        # (NotImplementedError: a quantity jaxdp has no kernel for, e.g. TV of a product)
        raise reject(e, "with this grid") from None
    return {q: s.dtype for q, s in shapes.items()}

"""Input validation at the API boundary.

Static problems (types, shapes) raise at trace time. Value problems (a negative scale, a
probability vector off the simplex, ``alpha`` outside ``[0, 1]``) are checked only when the
values are concrete: under ``jit``/``vmap``/``grad`` tracing the checks are skipped and the
kernels' documented NaN policy applies instead (never a Python ``if`` on a traced value).
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
import numpy as np


def error_line(e: BaseException, default: str | None = None) -> str:
    """The first line of an exception's message, for one-line error reports (``default``, or
    the exception's type name, when the message is empty)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else (default or type(e).__name__)


def is_concrete(*xs) -> bool:
    """True when every leaf of ``xs`` is a concrete (non-traced) value."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(xs))


def as_array(x, name: str):
    """``jnp.asarray(x)``, with a ``TypeError`` naming the argument for what JAX cannot
    convert (a string, ``None``, an arbitrary object) or what is not a number (instead of
    JAX's own error from deep inside ``jnp``)."""
    try:
        if x is None or isinstance(x, str | bytes):  # (jnp reads a string as a dtype name)
            raise TypeError
        arr = jnp.asarray(x)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number or array, got {type(x).__name__}") from None
    except OverflowError:  # a Python int beyond JAX's integers (was JAX's message, unnamed)
        raise _integer_range_error(name, jnp.asarray(0).dtype) from None
    check_integer_range(x, name)
    if not (jnp.issubdtype(arr.dtype, jnp.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be a real number or array, got dtype {arr.dtype}")
    return arr


#: The largest iteration cap a solver honours (``max_steps`` above it is read as this): the
#: solvers count iterations in int32 (float32 inputs, or without ``jax_enable_x64``), against
#: which ``max_steps = 2**31`` was wrapped (``calibrate`` ran no iteration under x64 and
#: returned ``achieved = nan``) or raised JAX's OverflowError about an argument "y".
MAX_STEPS = 2**31 - 1


def check_integer_range(x, name: str) -> None:
    """Refuse (naming ``name``) a Python int or numpy integers beyond the integer type JAX
    would store them in (int32 without ``jax_enable_x64``), without converting ``x``: JAX
    narrows numpy integers silently (``np.int64(2**32 + 3)`` was read as 3) and raises its
    own unnamed ``OverflowError`` for a Python int."""
    if isinstance(x, np.ndarray | np.generic) and x.dtype.kind in "iu" and x.size:
        dtype = jax.dtypes.canonicalize_dtype(x.dtype)
        low, high = x.min(), x.max()
    elif isinstance(x, int) and not isinstance(x, bool):
        dtype = jax.dtypes.canonicalize_dtype(int)
        low = high = x
    else:
        return
    info = np.iinfo(dtype)
    if low < info.min or high > info.max:
        raise _integer_range_error(name, dtype)


def _integer_range_error(name: str, dtype) -> ValueError:
    return ValueError(f"{name} holds an integer outside the range of {dtype}; pass it as a float")


def as_inexact(*xs, names=None):
    """Promote arrays once, jointly, to a common inexact dtype (weak types preserved).

    Raises:
      TypeError: an argument is not a real number or array, is complex, or is a float
        narrower than float32 (float16, bfloat16: the kernels read float32 and float64 bit
        layouts); named by ``names``, one per argument, if given.
    """
    labels = names if names else ["parameters"] * len(xs)
    arrays = [as_array(x, name) for x, name in zip(xs, labels, strict=True)]
    for i, x in enumerate(arrays):
        _check_real(labels[i], x)
    dtype = jnp.result_type(*arrays, float)
    out = tuple(jnp.asarray(x, dtype=dtype) for x in arrays)
    for raw, arr in zip(xs, out, strict=True):
        _remember_given(raw, arr)
    return out


#: The values as given of float32 arrays made by :func:`as_inexact` from wider floats that
#: lie outside float32's range (keyed by ``id``, dropped with the array): the checks name
#: those, not the rounded 0 or inf. Without ``jax_enable_x64`` a Python float is float32:
#: ``gaussian(sigma=1e-310)`` said "sigma must be positive and finite, got 0.0".
_GIVEN: dict[int, np.ndarray] = {}


def _remember_given(raw, arr) -> None:
    if arr.dtype != np.float32 or isinstance(raw, jax.Array) or not is_concrete(raw):
        return
    try:
        given = np.asarray(raw)
    except (TypeError, ValueError):
        return
    if given.dtype.kind != "f" or given.dtype.itemsize <= 4 or given.shape != arr.shape:
        return
    fi = np.finfo(np.float32)
    size = np.abs(given)
    if ((size > fi.max) & np.isfinite(size) | (size < fi.tiny) & (size > 0)).any():
        key = id(arr)
        _GIVEN[key] = given
        weakref.finalize(arr, _GIVEN.pop, key, None)


def plain(x):
    """A numpy scalar as the Python number it holds (for a message's ``!r``: numpy 2's repr
    reads "np.int64(1)"); anything else as it is."""
    return x.item() if isinstance(x, np.generic) else x


def written(x, fmt: str = "") -> str:
    """A number as written: ``str`` of a numpy scalar, which keeps its own precision (an
    f-string's format of a float32 -0.1 reads -0.10000000149011612), or ``format(x, fmt)``."""
    return format(x, fmt) if fmt else str(x)


def _got(x, v, bad, fmt: str = "") -> str:
    """The first bad value of ``x`` (values ``v``) as given, with what it became if that
    was float32's 0 or inf (see :func:`as_inexact`)."""
    shown = v[bad].flat[0]
    given = _GIVEN.get(id(x))
    if given is None or given.shape != v.shape:
        return written(shown, fmt)
    value = given[bad].flat[0]
    if value == shown or (np.isfinite(shown) and shown != 0):
        return written(value, fmt)
    hint = "" if jax.config.jax_enable_x64 else "; enable jax_enable_x64 for it"
    return f"{written(value, fmt)} ({shown} as {v.dtype}, outside its range{hint})"


def as_given(raw, converted):
    """The values to validate: ``converted`` where concrete; else ``raw`` (the argument as
    given) where that is concrete, as ``converted``'s dtype: under an outer ``jit`` even a
    constant argument becomes a tracer once converted, and its checks would be skipped."""
    if is_concrete(converted) or not is_concrete(raw):
        return converted
    return np.asarray(jax.device_get(raw), dtype=converted.dtype)


def _check_real(name: str, x) -> None:
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real numbers, got a {x.dtype} array")
    if jnp.issubdtype(x.dtype, jnp.floating) and jnp.finfo(x.dtype).bits < 32:
        raise TypeError(f"{name} must be float32 or float64, got a {x.dtype} array")


def as_order(x, name: str = "order"):
    """A skew or order parameter (``alpha``, a Rényi order) as an inexact array.

    A Python scalar stays weakly typed, as in ``jnp`` arithmetic, so that ``alpha=0.5``
    with float32 distributions computes in float32 also under x64 (through
    :func:`as_inexact` it became a strong float64 that promoted the whole computation).
    """
    x = as_array(x, name)
    _check_real(name, x)  # (a Python complex is weakly typed too)
    return x * 1.0 if x.weak_type else as_inexact(x, names=(name,))[0]


def _values(x):
    return np.asarray(jax.device_get(x))


def check_finite(name: str, x) -> None:
    if is_concrete(x):
        v = _values(x)
        if np.isnan(v).any():
            raise ValueError(f"{name} contains NaN")
        if not np.isfinite(v).all():
            raise ValueError(f"{name} must be finite, got {_got(x, v, ~np.isfinite(v))}")


def all_positive_finite(x) -> bool:
    """Whether every value of the concrete array ``x`` is positive and finite."""
    v = _values(x)
    return bool((np.isfinite(v) & (v > 0)).all())


def check_positive(name: str, x, *, finite: bool = True) -> None:
    """``x > 0`` (and finite, unless ``finite=False``) where concrete; NaN is refused."""
    if is_concrete(x):
        v = _values(x)
        if np.isnan(v).any():
            raise ValueError(f"{name} contains NaN")
        bad = ~((np.isfinite(v) if finite else True) & (v > 0))
        if bad.any():
            what = "positive and finite" if finite else "positive"
            raise ValueError(f"{name} must be {what}, got {_got(x, v, bad)}")


def check_nonnegative(name: str, x, *, finite: bool = True) -> None:
    """``x >= 0`` (and finite, unless ``finite=False``) where concrete; NaN is refused."""
    if is_concrete(x):
        v = _values(x)
        if np.isnan(v).any():
            raise ValueError(f"{name} contains NaN")
        bad = (v < 0) | (~np.isfinite(v) if finite else False)
        if bad.any():
            what = "non-negative and finite" if finite else "non-negative"
            raise ValueError(f"{name} must be {what}, got {_got(x, v, bad)}")


def check_normal(name: str, x) -> None:
    """Reject subnormal values: XLA:CPU flushes them to zero in arithmetic, so a positive
    subnormal scale would silently act as 0 (nan results)."""
    if is_concrete(x):
        v = _values(x)
        tiny = np.finfo(v.dtype).tiny if np.issubdtype(v.dtype, np.floating) else 0
        bad = (v > 0) & (v < tiny)
        if bad.any():
            raise ValueError(
                f"{name} must be at least {tiny:.4g} (the smallest normal {v.dtype} number; "
                f"XLA flushes subnormals to zero), got {_got(x, v, bad, '.4g')}"
            )


def check_integer(name: str, x) -> None:
    if is_concrete(x):
        v = _values(x)
        if (np.round(v) != v).any():
            raise ValueError(
                f"{name} must hold integer values, got {written(v[np.round(v) != v].flat[0])}"
            )


def check_unit_interval(name: str, x) -> None:
    if is_concrete(x):
        v = _values(x)
        if np.isnan(v).any():
            raise ValueError(f"{name} contains NaN")
        bad = (v < 0) | (v > 1)
        if bad.any():
            raise ValueError(f"{name} must lie in [0, 1], got {written(v[bad].flat[0])}")


def check_broadcast(names: str, *shapes) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            f"{names}: batch shapes {', '.join(map(str, shapes))} do not broadcast"
        ) from None

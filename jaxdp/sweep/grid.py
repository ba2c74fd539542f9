"""Sweep grids: a Cartesian product of named axes plus fixed scalars.

A grid is never materialised. Each axis is a short 1-D coordinate array; the points of a chunk
are computed from their flat (C-order) indices with :func:`numpy.unravel_index`, so host memory
is bounded by the chunk size, whatever the size of the grid.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["Axis", "Grid", "canonical_value", "parse_grid"]

_KINDS = ("values", "linspace", "logspace")


@dataclasses.dataclass(frozen=True)
class Axis:
    """One axis of a grid.

    Attributes:
        name: the mechanism parameter this axis sets.
        kind: ``"values"`` (an explicit list), ``"linspace"`` or ``"logspace"``.
        args: the list of values, or ``(start, stop, num)``; for ``logspace`` start and stop
            are base-10 exponents, as in :func:`numpy.logspace`.
    """

    name: str
    kind: str
    args: tuple

    @property
    def size(self) -> int:
        return len(self.args) if self.kind == "values" else int(self.args[2])

    @property
    def is_integer(self) -> bool:
        return self.kind == "values" and all(isinstance(v, int) for v in self.args)

    def values(self, float_dtype: Any) -> np.ndarray:
        """The coordinates of this axis, always computed in float64 first then cast."""
        if self.kind == "values":
            if self.is_integer:
                return np.asarray(self.args, dtype=np.int64)
            out = np.asarray(self.args, dtype=np.float64)
        elif self.kind == "linspace":
            a, b, n = self.args[0], self.args[1], int(self.args[2])
            if math.isfinite(b - a):
                out = np.linspace(a, b, n, dtype=np.float64)
            else:  # (the span overflows: numpy warned twice and gave nan, which the spec never
                # held; halving is exact there, so these are the points linspace means)
                out = np.linspace(a / 2, b / 2, n, dtype=np.float64) * 2
        else:
            out = np.logspace(self.args[0], self.args[1], int(self.args[2]), dtype=np.float64)
        return cast_checked(out, float_dtype, f"grid axis {self.name!r}")

    def canonical(self) -> dict:
        # float, as the axis is evaluated: [1, 2] and [1.0, 2.0] are one sweep
        args = [float(v) for v in self.args]
        if self.kind != "values":
            args = [args[0], args[1], int(self.args[2])]
        return {"name": self.name, self.kind: args}


def cast_checked(values: Any, float_dtype: Any, what: str) -> np.ndarray:
    """``values`` (float64) in ``float_dtype``, refusing any that overflow to inf or flush to 0
    there (numpy's cast warning added two lines to the one-line error, in which the
    mechanism rejected an ``inf`` or ``0.0`` that the spec never held)."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        out = values.astype(float_dtype)
    lost = (np.isfinite(values) & ~np.isfinite(out)) | ((values != 0) & (out == 0))
    if lost.any():
        v = values[lost].flat[0]
        raise ValueError(
            f"{what}: {v:g} is outside the range of {np.dtype(float_dtype).name} (it would "
            f"become {float(out[lost].flat[0])}); use dtype float64"
        )
    return out


@dataclasses.dataclass(frozen=True)
class Grid:
    """A Cartesian product of axes (in spec order) and fixed scalar parameters.

    Attributes:
        axes: the varying parameters, in the order that shapes the results.
        fixed: parameters given a single scalar value, by name (spec order).
    """

    axes: tuple[Axis, ...]
    fixed: tuple[tuple[str, int | float], ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def names(self) -> tuple[str, ...]:
        """All parameter names, in spec order of appearance (axes first, then fixed)."""
        return tuple(a.name for a in self.axes) + tuple(n for n, _ in self.fixed)

    def coords(self, float_dtype: Any) -> dict[str, np.ndarray]:
        """1-D coordinate array of every axis, in axis order."""
        return {a.name: a.values(float_dtype) for a in self.axes}

    def points(self, flat: np.ndarray, coords: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Parameter values of the points with C-order flat indices ``flat``.

        Args:
            flat: 1-D integer array of flat indices in ``[0, size)``.
            coords: the output of :meth:`coords`.

        Returns:
            name -> 1-D array shaped like ``flat``, for every axis.
        """
        if not self.axes:
            return {}
        multi = np.unravel_index(flat, self.shape)
        return {a.name: coords[a.name][i] for a, i in zip(self.axes, multi, strict=True)}

    def canonical(self) -> list[dict]:
        out = [a.canonical() for a in self.axes]
        out += [{"name": n, "value": canonical_value(v)} for n, v in self.fixed]
        return out


def canonical_value(value: Any) -> Any:
    """A fixed grid value in a spec's identity: an integer as the float of equal value, as an
    axis's values are (``sensitivity = 1`` and ``= 1.0`` are one sweep, as ``[1, 2]`` and
    ``[1.0, 2.0]`` are), unless no float equals it (beyond 2**53), when it stays an integer.
    (An integer stays a static Python int in the mechanism, but where a float is accepted too
    it gives the same value; where only an integer is, e.g. ``k``, the float is refused.)"""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**1023:
        if int(float(value)) == value:
            return float(value)
    return value


#: Points per axis at most: each axis's coordinates are held in host memory and checked
#: against the mechanism before the run (~40 bytes a value at peak, by an ad hoc
#: `/usr/bin/time` of `jaxdp sweep --dry-run`); a longer axis can be
#: split into two (e.g. an outer axis of offsets) or into several sweeps.
MAX_AXIS_POINTS = 2**24
#: Points per grid at most: flat point indices stay exact in float64 and int64 arithmetic.
MAX_GRID_POINTS = 2**53


def _number(x: Any, what: str) -> int | float:
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"spec: {what} must be a number, got {x!r}")
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"spec: {what} must be finite, got {x!r}")
    if isinstance(x, int) and abs(x) > 2**63 - 1:
        raise ValueError(f"spec: {what} is outside the 64-bit integer range, got {x!r}")
    return x


def parse_grid(table: Any) -> Grid:
    """Parse the ``[grid]`` table of a spec.

    Each entry is ``name = <scalar>`` (a fixed parameter), ``name = [v0, v1, ...]`` (an axis of
    explicit values), ``name = {linspace = [a, b, n]}`` or ``name = {logspace = [a, b, n]}``
    (``n`` points from ``a`` to ``b`` inclusive; for ``logspace`` from ``10**a`` to ``10**b``).
    A list of integers stays integer (its stored coordinates; a float32 sweep computes it in
    float32); any float makes it float.

    Raises:
        ValueError: a malformed entry, naming it.
    """
    if not isinstance(table, Mapping):
        raise ValueError("spec: [grid] must be a table of parameter = values")
    axes: list[Axis] = []
    fixed: list[tuple[str, int | float]] = []
    for name, value in table.items():
        if not isinstance(name, str):  # (a dict spec; TOML keys are strings)
            raise ValueError(f"spec: grid parameter names must be strings, got {name!r}")
        where = f"grid parameter '{name}'"
        if isinstance(value, Mapping):
            keys = list(value)
            if len(keys) != 1 or keys[0] not in _KINDS:
                raise ValueError(
                    f"spec: {where} must be a scalar, a list, {{linspace = [a, b, n]}} or "
                    f"{{logspace = [a, b, n]}}; got keys {keys}"
                )
            kind = keys[0]
            args = value[kind]
            if kind == "values":
                if not isinstance(args, list):  # (a scalar here was taken as a fixed value)
                    raise ValueError(f"spec: {where}: values needs a list, got {args!r}")
                value = args  # {values = [...]} is accepted as a synonym of a plain list
            else:
                if not isinstance(args, list) or len(args) != 3:
                    raise ValueError(f"spec: {where}: {kind} needs [start, stop, num]")
                a = _number(args[0], f"{where} {kind} start")
                b = _number(args[1], f"{where} {kind} stop")
                n = args[2]
                if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                    raise ValueError(
                        f"spec: {where}: {kind} num must be a positive integer, got {n!r}"
                    )
                # (the top by its power: |exponent| > 308 refused [0, 308.2], whose values
                # reach 1.6e308, finite)
                with np.errstate(over="ignore"):
                    top = np.power(10.0, np.float64(max(a, b)))
                if kind == "logspace" and (min(a, b) < -308 or not np.isfinite(top)):
                    raise ValueError(f"spec: {where}: logspace exponents out of float range")
                axes.append(Axis(name, kind, (float(a), float(b), n)))
                continue
        if isinstance(value, list):
            if not value:
                raise ValueError(f"spec: {where} is an empty list")
            vals = tuple(_number(v, f"{where} entry") for v in value)
            if not all(isinstance(v, int) for v in vals):
                vals = tuple(float(v) for v in vals)
            axes.append(Axis(name, "values", vals))
        else:
            fixed.append((name, _number(value, where)))
    for axis in axes:
        if axis.size > MAX_AXIS_POINTS:
            raise ValueError(
                f"spec: grid parameter '{axis.name}' has {axis.size} points, more than the "
                f"{MAX_AXIS_POINTS} an axis may have (its coordinates are held in memory): "
                "split it into two axes or several sweeps"
            )
    total = math.prod(axis.size for axis in axes)
    if total > MAX_GRID_POINTS:
        raise ValueError(f"spec: the grid has {total:.3g} points, more than 2**53")
    return Grid(tuple(axes), tuple(fixed))

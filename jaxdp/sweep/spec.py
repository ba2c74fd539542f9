"""Sweep specifications: parsing, validation against the mechanism, canonical form and hash.

A spec is a TOML file (or the equivalent dict)::

    mechanism = "adversarial_laplace"        # a function of jaxdp.mechanisms, or "module:function"
    quantities = ["chernoff", "alpha", "kl_pq", "tv", "eq34", "eq35"]
    # renyi_orders = [0.5, 2]                # with "renyi" in quantities
    # dtype = "float64"                      # or "float32"
    # chunk_size = 262144                    # points per chunk (default: by device)
    # title = "Figure 3, finer"              # free text, not part of the spec's identity
    [grid]
    epsilon = { logspace = [-3, 1, 400] }    # base-10 exponents
    shift = [1.0, 2.0, 3.0]
    theta = { linspace = [1.0, 3.0, 50] }
    sensitivity = 1.0                        # a scalar is a fixed parameter, not an axis

Quantities: ``chernoff``, ``alpha`` (its maximiser), ``converged``, ``kl_pq``, ``kl_qp``,
``tv``, ``bhattacharyya``, ``hellinger``, ``renyi_<order>`` (or ``renyi`` with
``renyi_orders``), and the formulas of :mod:`jaxdp.paper` named ``eqNN...``. A paper formula's
arguments come from the mechanism: ``eps`` is its ``epsilon`` (or ``sensitivity / scale``),
``b`` its ``scale`` (or ``sensitivity / epsilon``), any other argument the parameter of the same
name (``shift``, ``theta``); an argument no mechanism has (``delta`` of ``eq40``, ``alpha`` of
``eq56``) may be given in ``[grid]``, where it is passed to the formulas only.

Everything that can be wrong with a spec (unknown key, mechanism, parameter or quantity, a
grid that does not fit the mechanism, a paper formula whose arguments the mechanism does not
have) is reported by :func:`parse_spec` as a one-line ``ValueError`` naming it; values the
mechanism or a formula refuses are found by :func:`jaxdp.sweep.kernel.check_kernel` (every
value of each axis, the other axes at their first value). Both run before any work. Values
refused only in combination, on two axes (e.g. a ``sensitivity`` axis and an ``epsilon`` axis
whose ratio, the Laplace scale, is beyond the float range), are not checked: the points that
combine them hold nan.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from jaxdp.sweep.grid import Grid, parse_grid

__all__ = ["CORE_QUANTITIES", "SweepSpec", "parse_spec"]

#: Quantities computed by the core library from the neighbouring pair ``(P, Q)``.
CORE_QUANTITIES: dict[str, str] = {
    "chernoff": "Chernoff information C(P, Q) = max_a -log C_a(P, Q), nats",
    "alpha": "the maximiser a* of the Chernoff information",
    "converged": "whether the Chernoff solver met its tolerance (bool)",
    "kl_pq": "KL divergence D(P || Q), nats",
    "kl_qp": "KL divergence D(Q || P), nats",
    "tv": "total variation distance = best membership advantage",
    "bhattacharyya": "Bhattacharyya distance -log C_{1/2}(P, Q), nats",
    "hellinger": "Hellinger distance",
    "renyi_<order>": "Renyi divergence D_order(P || Q), nats (or 'renyi' with renyi_orders)",
}

_TOP_KEYS = ("mechanism", "quantities", "grid", "renyi_orders", "dtype", "chunk_size", "title")
_DTYPES = ("float64", "float32")
_PAPER_RE = re.compile(r"^eq\d+\w*$")
_RENYI_RE = re.compile(r"^renyi_(.+)$")
_RESERVED = re.compile(r"^_")


def _order_name(order: float) -> str:
    text = repr(float(order))
    return "renyi_" + (text[:-2] if text.endswith(".0") else text)


@dataclasses.dataclass(frozen=True)
class PaperArg:
    """How a paper formula's argument is obtained from the mechanism parameters.

    ``source`` is a parameter name, or ``("ratio", num, den)`` for ``num / den``.
    """

    name: str
    source: str | tuple[str, str, str]


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A parsed, validated sweep specification.

    Attributes:
        mechanism: the mechanism's name as written in the spec.
        quantities: canonical quantity names, in spec order (``renyi`` expanded).
        grid: the parameter grid.
        dtype: ``"float64"`` or ``"float32"``; the float dtype of parameters and results.
        chunk_size: points per chunk from the spec, or ``None`` for the default.
        title: free text, not part of the spec's identity.
        defaults: mechanism parameters not in the grid that have a default, by name.
        paper_args: for each paper quantity, how its arguments are formed.
        formula_only: grid parameters that only paper formulas take (e.g. ``delta`` for
            ``eq40``); they are not passed to the mechanism.
    """

    mechanism: str
    quantities: tuple[str, ...]
    grid: Grid
    dtype: str = "float64"
    chunk_size: int | None = None
    title: str = ""
    defaults: tuple[tuple[str, Any], ...] = ()
    paper_args: tuple[tuple[str, tuple[PaperArg, ...]], ...] = ()
    formula_only: tuple[str, ...] = ()

    def canonical(self) -> dict:
        """The spec's identity as plain JSON data (chunk size and title excluded)."""
        return {
            "mechanism": self.mechanism,
            "quantities": list(self.quantities),
            "grid": self.grid.canonical(),
            "dtype": self.dtype,
        }

    def digest(self) -> str:
        """SHA-256 of the canonical JSON form."""
        return spec_digest(self.canonical())

    @property
    def shape(self) -> tuple[int, ...]:
        return self.grid.shape

    @property
    def size(self) -> int:
        return self.grid.size


# --------------------------------------------------------------------------- mechanisms


def spec_digest(canonical: Any) -> str:
    """SHA-256 of a spec's canonical form (:meth:`SweepSpec.canonical`) as JSON."""
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def known_mechanisms() -> list[str]:
    """Names of the mechanisms of :mod:`jaxdp.mechanisms` usable in a spec."""
    mod = importlib.import_module("jaxdp.mechanisms")
    names = getattr(mod, "__all__", None) or [
        n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")
    ]
    return sorted(n for n in names if callable(getattr(mod, n, None)))


def resolve_mechanism(name: str) -> Callable:
    """The mechanism function for a spec name (``jaxdp.mechanisms.<name>`` or ``module:func``)."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"spec: cannot import mechanism '{name}' ({e})") from None
        if not callable(fn):
            raise ValueError(f"spec: mechanism '{name}' is not callable")
        return fn
    known = known_mechanisms()
    if name not in known:
        raise ValueError(f"spec: unknown mechanism '{name}' (known: {', '.join(known)})")
    return getattr(importlib.import_module("jaxdp.mechanisms"), name)


def _parameters(fn: Callable) -> tuple[dict[str, inspect.Parameter], bool]:
    sig = inspect.signature(fn)
    params = {
        n: p
        for n, p in sig.parameters.items()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    }
    var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    return params, var_kw


# --------------------------------------------------------------------------- quantities


def _paper_function(name: str) -> Callable | None:
    try:
        paper = importlib.import_module("jaxdp.paper")
    except ModuleNotFoundError as e:  # pragma: no cover - the module ships with jaxdp
        if e.name != "jaxdp.paper":
            raise
        return None
    fn = getattr(paper, name, None)
    return fn if callable(fn) else None


def _paper_names() -> list[str]:
    try:
        paper = importlib.import_module("jaxdp.paper")
    except ModuleNotFoundError:  # pragma: no cover
        return []
    return sorted(n for n, v in vars(paper).items() if _PAPER_RE.match(n) and callable(v))


_EPS = ("eps", "epsilon")
_SCALE = ("b", "scale")


def _paper_args(
    quantity: str, fn: Callable, mechanism: str, available: set[str]
) -> tuple[PaperArg, ...]:
    """Map each argument of a paper formula to the mechanism's parameters.

    ``eps``/``epsilon`` is the mechanism's ``epsilon`` (or ``sensitivity / scale``); ``b``/``scale``
    is the mechanism's ``scale`` (or ``sensitivity / epsilon``, the Laplace scale); any other
    argument is the mechanism parameter of the same name. Arguments with defaults may be absent.
    """
    params, _ = _parameters(fn)
    out = []
    for arg, p in params.items():
        source: str | tuple[str, str, str] | None = None
        if arg in _EPS:
            if "epsilon" in available:
                source = "epsilon"
            elif {"sensitivity", "scale"} <= available:
                source = ("ratio", "sensitivity", "scale")
        elif arg in _SCALE:
            if "scale" in available:
                source = "scale"
            elif {"sensitivity", "epsilon"} <= available:
                source = ("ratio", "sensitivity", "epsilon")
        elif arg in available:
            source = arg
        if source is None:
            if p.default is not inspect.Parameter.empty:
                continue
            raise ValueError(f"spec: quantity '{quantity}' needs {_need(arg, mechanism)}")
        out.append(PaperArg(arg, source))
    return tuple(out)


def _owners(arg: str, exclude: str) -> list[str]:
    """Mechanisms of :mod:`jaxdp.mechanisms` (other than ``exclude``) with a parameter ``arg``."""
    mod = importlib.import_module("jaxdp.mechanisms")
    return [
        m for m in known_mechanisms() if m != exclude and arg in _parameters(getattr(mod, m))[0]
    ]


def _need(arg: str, mechanism: str) -> str:
    if arg in _EPS:
        return f"epsilon, which mechanism '{mechanism}' with this grid does not have"
    if arg in _SCALE:
        return (
            f"a noise scale b (scale, or sensitivity/epsilon), which mechanism '{mechanism}' "
            "with this grid does not have"
        )
    owners = _owners(arg, mechanism)
    if owners:
        return f"'{arg}', a parameter of {', '.join(owners)}, not of mechanism '{mechanism}'"
    return f"'{arg}': give it in [grid]"


def _quantities(raw: Any, renyi_orders: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(q, str) for q in raw):
        raise ValueError("spec: 'quantities' must be a non-empty list of names")
    orders: list[float] | None = None
    if renyi_orders is not None:
        if (
            not isinstance(renyi_orders, list)
            or not renyi_orders
            or any(isinstance(o, bool) or not isinstance(o, int | float) for o in renyi_orders)
        ):
            raise ValueError("spec: 'renyi_orders' must be a non-empty list of numbers")
        orders = [float(o) for o in renyi_orders]
        if "renyi" not in raw:
            raise ValueError("spec: 'renyi_orders' is given but 'renyi' is not in quantities")
    out: list[str] = []
    for q in raw:
        if q == "renyi":
            if orders is None:
                raise ValueError(
                    "spec: quantity 'renyi' needs renyi_orders = [...] (or renyi_2 etc.)"
                )
            names = [_order_name(o) for o in orders]
        elif m := _RENYI_RE.match(q):
            try:
                order = float(m.group(1))
            except ValueError:
                raise ValueError(f"spec: quantity '{q}': cannot read the Renyi order") from None
            names = [_order_name(order)]
        elif q in CORE_QUANTITIES or _PAPER_RE.match(q):
            names = [q]
        else:
            known = [k for k in CORE_QUANTITIES if k != "renyi_<order>"]
            raise ValueError(
                f"spec: unknown quantity '{q}' (known: {', '.join(known)}, renyi_<order>, "
                f"and the paper formulas {', '.join(_paper_names()) or 'eqNN'})"
            )
        for n in names:
            if n.startswith("renyi_"):
                order = float(n[len("renyi_") :])
                if not (math.isfinite(order) and order > 0):
                    raise ValueError(
                        f"spec: quantity '{n}': the Renyi order must be positive and finite"
                    )
            if n in out:
                raise ValueError(f"spec: quantity '{n}' is listed twice")
            out.append(n)
    return tuple(out)


# --------------------------------------------------------------------------- parse


def _plain(value: Any) -> Any:
    """A dict spec's numpy and JAX scalars and arrays, and tuples, as the TOML values they stand
    for (``np.float32(1.0)`` was refused as "must be a number", ``np.linspace(...)`` as an axis
    too, and so were ``jnp.linspace(...)`` and ``jnp.float32(1.0)``)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray | jax.Array):
        return _plain(np.asarray(value).tolist())
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def load_spec_data(spec: Any) -> dict:
    """Read a spec given as a mapping, a TOML file path, or a :class:`SweepSpec`."""
    if isinstance(spec, Mapping):
        return _plain(spec)
    if isinstance(spec, str | os.PathLike):
        try:
            with open(spec, "rb") as f:
                return tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"spec: {os.fspath(spec)} is not valid TOML ({e})") from None
        except UnicodeDecodeError as e:  # (TOML is UTF-8; the message named no file)
            raise ValueError(
                f"spec: {os.fspath(spec)} is not UTF-8 text, as TOML must be (byte "
                f"{e.object[e.start : e.start + 1]!r} at offset {e.start})"
            ) from None
    raise TypeError(f"spec must be a mapping or a path to a TOML file, got {type(spec).__name__}")


def _chunk_size(value: Any) -> int | None:
    """A spec's ``chunk_size``: ``None`` or a positive integer (a numpy integer as an int).

    Raises:
        ValueError: naming it.
    """
    if isinstance(value, np.integer):
        value = int(value)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"spec: chunk_size must be a positive integer, got {value!r}")
    return value


def parse_spec(spec: Any) -> SweepSpec:
    """Parse and validate a sweep spec against its mechanism and quantities.

    Args:
        spec: a :class:`SweepSpec`, a mapping, or a path to a TOML file (see module docstring).

    Returns:
        The validated :class:`SweepSpec`.

    Raises:
        ValueError: one line naming the unknown key, mechanism, parameter or quantity, or the
            grid entry that does not fit the mechanism.
    """
    if isinstance(spec, SweepSpec):  # (dataclasses.replace(spec, chunk_size=-5) ran a sweep
        # of -12 chunks and wrote a results.npz without values; 2.5 ran chunks of 2)
        chunk_size = _chunk_size(spec.chunk_size)
        if chunk_size is spec.chunk_size:
            return spec
        return dataclasses.replace(spec, chunk_size=chunk_size)
    data = load_spec_data(spec)
    for key in data:
        if key not in _TOP_KEYS:
            raise ValueError(f"spec: unknown key '{key}' (known: {', '.join(_TOP_KEYS)})")
    for key in ("mechanism", "quantities", "grid"):
        if key not in data:
            raise ValueError(f"spec: missing key '{key}'")
    mechanism = data["mechanism"]
    if not isinstance(mechanism, str) or not mechanism:
        raise ValueError("spec: 'mechanism' must be a name")
    dtype = data.get("dtype", "float64")
    if dtype not in _DTYPES:
        raise ValueError(f"spec: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    chunk_size = _chunk_size(data.get("chunk_size"))
    title = data.get("title", "")
    if not isinstance(title, str):
        raise ValueError("spec: 'title' must be a string")

    quantities = _quantities(data["quantities"], data.get("renyi_orders"))
    grid = parse_grid(data["grid"])

    fn = resolve_mechanism(mechanism)
    params, var_kw = _parameters(fn)
    paper_fns: dict[str, Callable] = {}
    for q in quantities:
        if _PAPER_RE.match(q):
            pfn = _paper_function(q)
            if pfn is None:
                raise ValueError(
                    f"spec: unknown quantity '{q}' (paper formulas: "
                    f"{', '.join(_paper_names()) or 'none'})"
                )
            paper_fns[q] = pfn
    # Arguments of the requested paper formulas that a grid may set directly (e.g. delta for
    # eq40, alpha for eq56); eps/b are always derived from the mechanism.
    formula_args = {
        a for pfn in paper_fns.values() for a in _parameters(pfn)[0] if a not in _EPS + _SCALE
    }
    names = grid.names
    extra = []
    for n in names:
        if _RESERVED.match(n):
            raise ValueError(f"spec: grid parameter '{n}': names may not start with '_'")
        if n in quantities:
            raise ValueError(f"spec: grid parameter '{n}' has the name of a quantity")
        if n not in params and not var_kw:
            if n in formula_args and not _owners(n, mechanism):
                extra.append(n)
                continue
            raise ValueError(
                f"spec: mechanism '{mechanism}' has no parameter '{n}' "
                f"(parameters: {', '.join(params)})"
            )
    missing = [
        n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in names
    ]
    if missing:
        raise ValueError(
            f"spec: grid lacks parameter '{missing[0]}' required by mechanism '{mechanism}'"
        )
    defaults = tuple(
        (n, p.default)
        for n, p in params.items()
        if n not in names and p.default is not inspect.Parameter.empty and p.default is not None
    )
    available = set(names) | {n for n, _ in defaults}
    paper_args = tuple(
        (q, _paper_args(q, pfn, mechanism, available)) for q, pfn in paper_fns.items()
    )

    return SweepSpec(
        mechanism=mechanism,
        quantities=quantities,
        grid=grid,
        dtype=dtype,
        chunk_size=chunk_size,
        title=title,
        defaults=defaults,
        paper_args=paper_args,
        formula_only=tuple(extra),
    )

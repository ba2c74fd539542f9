"""Chunked, sharded, resumable parameter sweeps (``jaxdp.sweep`` / ``jaxdp sweep``).

A sweep evaluates quantities (Chernoff information, its maximiser, KL, TV, Rényi, and the
paper's closed forms) of a mechanism's neighbouring pair on every point of a Cartesian grid of
its parameters. See :func:`sweep` for running one, :func:`load_sweep` for reading the result,
and :mod:`jaxdp.sweep.spec` for the spec format.

Modules: :mod:`~jaxdp.sweep.spec` (parsing and validation), :mod:`~jaxdp.sweep.grid` (axes and
flat-index coordinates), :mod:`~jaxdp.sweep.kernel` (the per-point computation),
:mod:`~jaxdp.sweep.runner` (chunking, sharding, progress), :mod:`~jaxdp.sweep.storage` (files).
"""

from jaxdp.sweep.runner import SweepResult, SweepRun, default_chunk_size, load_sweep, sweep
from jaxdp.sweep.spec import SweepSpec, parse_spec

__all__ = [
    "SweepResult",
    "SweepRun",
    "SweepSpec",
    "default_chunk_size",
    "load_sweep",
    "parse_spec",
    "sweep",
]

"""Running a sweep: chunking, sharding over every device, progress, resume, results.

The grid (never materialised) is cut into chunks of ``chunk_size`` consecutive flat indices,
the unit written to disk. A chunk is computed by one or more calls of a single compiled
function whose input is ``block_size`` points *per device*: the per-device program has the same
shape whatever the number of devices, so the numbers do not depend on it (bit for bit), and one
compilation serves every chunk. Padding (repeating the chunk's last point) fills the last call
and is dropped on write. Inputs are built per device shard from the flat indices
(:func:`jax.make_array_from_callback`) on a 1-D :class:`jax.sharding.Mesh` of ``jax.devices()``
with a :class:`~jax.sharding.NamedSharding`, so the same code runs on one CPU, several GPUs, or
several hosts after :func:`jax.distributed.initialize` (process 0 does all the file I/O). While
chunk ``i`` computes, chunk ``i - 1`` is copied back and written.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxdp.sweep.kernel import _int_dtype, check_kernel, make_kernel
from jaxdp.sweep.spec import SweepSpec, parse_spec
from jaxdp.sweep.storage import FORMAT, Store, npz_memmap

__all__ = ["SweepResult", "SweepRun", "default_chunk_size", "load_sweep", "sweep"]

#: Points per device in a chunk when the spec and caller do not say.
CPU_POINTS_PER_DEVICE = 2**16
ACCELERATOR_POINTS_PER_DEVICE = 2**20

_TEST_DELAY = "JAXDP_SWEEP_TEST_DELAY"  # seconds to sleep after each chunk (tests only)


class SweepRun(NamedTuple):
    """What :func:`sweep` did.

    Attributes:
        out_dir: the output directory.
        results: path of ``results.npz``.
        shape: the grid shape.
        n_points: number of grid points.
        chunk_size: points per chunk (from the manifest when resuming).
        n_chunks: number of chunks.
        computed: chunks computed by this call (the rest were already on disk).
        seconds: wall time of the compute loop of this call.
        points_per_second: points computed by this call / ``seconds`` (0 if none).
    """

    out_dir: Path
    results: Path
    shape: tuple[int, ...]
    n_points: int
    chunk_size: int
    n_chunks: int
    computed: int
    seconds: float
    points_per_second: float


class SweepResult(NamedTuple):
    """A finished sweep, as returned by :func:`load_sweep`.

    Attributes:
        coords: axis name -> 1-D coordinates, in grid (spec) order.
        values: quantity name -> array shaped ``tuple(len(c) for c in coords.values())``;
            ``values[q][i, j, ...]`` is the quantity at ``coords[axis0][i]``,
            ``coords[axis1][j]``, ...
        fixed: fixed parameter name -> 0-d array.
        manifest: the sweep's manifest (canonical spec, its hash, jaxdp version, chunking).
    """

    coords: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    fixed: dict[str, np.ndarray]
    manifest: dict


def _per_device(devices: list) -> int:
    return CPU_POINTS_PER_DEVICE if devices[0].platform == "cpu" else ACCELERATOR_POINTS_PER_DEVICE


def default_chunk_size(devices: list | None = None) -> int:
    """Default points per chunk: 2**16 per CPU device, 2**20 per accelerator."""
    devices = jax.devices() if devices is None else devices
    return _per_device(devices) * len(devices)


def _jaxdp_version() -> str:
    import jaxdp

    return str(getattr(jaxdp, "__version__", "unknown"))


def _to_host(x: jax.Array) -> np.ndarray:
    if x.is_fully_addressable:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _broadcast(value: np.ndarray) -> np.ndarray:
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.broadcast_one_to_all(value))


class _Inputs:
    """Builds the sharded parameter arrays of one call from flat grid indices."""

    def __init__(self, spec: SweepSpec, sharding: NamedSharding, length: int) -> None:
        self.grid = spec.grid
        self.sharding = sharding
        self.length = length  # points per call, all devices together
        self.coords = spec.grid.coords(np.dtype(spec.dtype))
        int_dtype = np.dtype(_int_dtype())
        for a in spec.grid.axes:
            if a.is_integer:
                self.coords[a.name] = self.coords[a.name].astype(int_dtype)

    def __call__(self, start: int, stop: int) -> dict[str, jax.Array]:
        """Points ``start, start + 1, ...`` (``length`` of them), repeating ``stop - 1`` past it."""
        cache: dict[tuple, dict[str, np.ndarray]] = {}

        def points(index: tuple) -> dict[str, np.ndarray]:
            key = (index[0].start, index[0].stop, index[0].step)
            if key not in cache:
                flat = np.arange(start, start + self.length, dtype=np.int64)[index[0]]
                cache[key] = self.grid.points(np.minimum(flat, stop - 1), self.coords)
            return cache[key]

        return {
            a.name: jax.make_array_from_callback(
                (self.length,),
                self.sharding,
                lambda index, _n=a.name: points(index)[_n],
                dtype=self.coords[a.name].dtype,
            )
            for a in self.grid.axes
        }


_COMPILED: dict[tuple, Any] = {}  # (spec digest, call length, devices) -> compiled function


def _compile(spec: SweepSpec, kernel, inputs: _Inputs, sharding: NamedSharding):
    """The compiled call: one per (spec, points per call, devices), cached in-process.

    The kernel runs under :func:`jax.shard_map`: every device evaluates its own block of
    ``length / n_devices`` points with no communication (a solver's loop stops when *its*
    block has converged), and the per-device program is the same for any number of devices.
    """
    length = inputs.length
    mesh = sharding.mesh
    key = (spec.digest(), length, tuple(mesh.devices.flat), bool(jax.config.jax_enable_x64))
    if key in _COMPILED:
        return _COMPILED[key]
    local = (length // mesh.size,)

    def fn(params):
        return kernel(params, local)

    spec_ = PartitionSpec("points")
    mapped = jax.shard_map(fn, mesh=mesh, in_specs=(spec_,), out_specs=spec_, check_vma=False)
    structs = {
        name: jax.ShapeDtypeStruct((length,), c.dtype, sharding=sharding)
        for name, c in inputs.coords.items()
    }
    # XLA's default compiler options on purpose (not jaxdp.CPU_COMPILER_OPTIONS): with
    # 512-bit vectors, results differ in the last bit between per-device block lengths,
    # which would break the bit-identical result for any number of devices.
    compiled = jax.jit(mapped, out_shardings=sharding).lower(structs).compile()
    if len(_COMPILED) >= 8:
        _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = compiled
    return compiled


def _fits(compiled, devices) -> bool:
    """Whether the compiled chunk leaves room on accelerator memory (unknown -> yes)."""
    try:
        limit = devices[0].memory_stats()["bytes_limit"]
        m = compiled.memory_analysis()
        need = m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes
    except Exception:
        return True
    return 2 * need <= limit  # two chunks may be in flight


def sweep(
    spec: Any,
    out_dir: str | os.PathLike,
    *,
    chunk_size: int | None = None,
    quiet: bool = False,
    csv: bool = False,
) -> SweepRun:
    """Evaluate a spec's quantities on every point of its grid, resumably, into ``out_dir``.

    The grid is processed in chunks of ``chunk_size`` points; each chunk is sharded over all
    ``jax.devices()`` and written atomically to ``out_dir/chunks/`` when done. Calling again
    with the same spec and directory resumes: finished chunks are skipped, and the result is
    identical to an uninterrupted run. At the end the chunks are streamed into
    ``out_dir/results.npz`` (see :func:`load_sweep`).

    Args:
        spec: a mapping, a path to a TOML spec, or a parsed
            :class:`~jaxdp.sweep.spec.SweepSpec` (see :mod:`jaxdp.sweep.spec`).
        out_dir: output directory (created). Must be new/empty or hold this same sweep.
        chunk_size: points per chunk; default: the spec's ``chunk_size``, else the manifest's
            when resuming, else :func:`default_chunk_size`.
        quiet: no progress bar (it is also off when stderr is not a terminal).
        csv: also write ``out_dir/results.csv``, one row per point.

    Returns:
        A :class:`SweepRun` summary.

    Raises:
        ValueError: a bad spec (before any work), float64 asked for without
            ``jax_enable_x64``, or a directory holding something else (a different spec,
            jaxdp version or chunk size).

    Multi-host: call :func:`jax.distributed.initialize` first in every process and run the same
    call everywhere; ``jax.devices()`` then spans all hosts, each process builds only the
    shards of its own devices, and process 0 reads and writes ``out_dir``.
    """
    spec = parse_spec(spec)
    if spec.dtype == "float64" and not jax.config.jax_enable_x64:
        raise ValueError(
            "spec: dtype float64 needs jax_enable_x64 (the jaxdp CLI enables it); "
            "call jax.config.update('jax_enable_x64', True) or set dtype = 'float32'"
        )
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    kernel = make_kernel(spec)
    dtypes = check_kernel(spec, kernel)

    devices = jax.devices()
    n_dev = len(devices)
    n = spec.size
    explicit = chunk_size if chunk_size is not None else spec.chunk_size
    size = min(explicit or default_chunk_size(devices), n)
    # Points per device per call: a whole chunk in one call on the devices of the first run
    # (a multiple of 64 so that no point falls in a vector remainder loop); resumed runs keep
    # the manifest's, so the per-device program never changes.
    block = -(-min(_per_device(devices), -(-size // n_dev)) // 64) * 64
    main = jax.process_index() == 0
    store = Store(out_dir)

    def manifest_for(cs: int, bs: int) -> dict:
        return {
            "format": FORMAT,
            "jaxdp_version": _jaxdp_version(),
            "spec_sha256": spec.digest(),
            "spec": spec.canonical(),
            "title": spec.title,
            "shape": list(spec.shape),
            "axes": [a.name for a in spec.grid.axes],
            "fixed": dict(spec.grid.fixed),
            "quantities": list(spec.quantities),
            "dtypes": {q: np.dtype(d).name for q, d in dtypes.items()},
            "n_points": n,
            "chunk_size": cs,
            "n_chunks": math.ceil(n / cs),
            "block_size": bs,
            "devices": {
                "platform": devices[0].platform,
                "count": n_dev,
                "processes": jax.process_count(),
            },
        }

    lock = store.locked() if main else contextlib.nullcontext()
    with lock:
        status = np.zeros(3, dtype=np.int64)  # (error, chunk size, block size)
        error: Exception | None = None
        if main:
            try:
                manifest = store.prepare(
                    manifest_for(size, block), explicit_chunk_size=bool(explicit)
                )
                status[1:] = manifest["chunk_size"], manifest["block_size"]
            except (ValueError, OSError, KeyError) as e:
                error, status[0] = e, 1
        status = _broadcast(status)
        if error is not None:
            raise error
        if status[0]:
            raise ValueError(f"{out_dir}: process 0 refused the sweep (see its error)")
        size, block = int(status[1]), int(status[2])
        n_chunks = math.ceil(n / size)
        done = _broadcast(store.done_mask(n_chunks) if main else np.zeros(n_chunks, dtype=bool))
        finished = main and store.results_path.exists()
        finished = bool(_broadcast(np.asarray([finished]))[0])

        todo = [] if finished else [int(i) for i in np.flatnonzero(~done)]
        mesh = Mesh(np.asarray(devices), ("points",))
        sharding = NamedSharding(mesh, PartitionSpec("points"))
        inputs = _Inputs(spec, sharding, block * n_dev)
        seconds = 0.0
        if todo:
            compiled = _compile(spec, kernel, inputs, sharding)
            if not _fits(compiled, devices):  # pragma: no cover - accelerators only
                raise ValueError(
                    f"{block} points per device do not fit device memory; use a smaller "
                    "--chunk-size and a new --out"
                )
            seconds = _run_chunks(
                compiled, inputs, store, todo, n, size, n_chunks, quiet or not main, main
            )
        if main and not finished:
            store.write_results(
                quantities=spec.quantities,
                dtypes=dtypes,
                shape=spec.shape,
                coords=inputs.coords,
                fixed={k: np.asarray(v) for k, v in spec.grid.fixed},
                chunk_size=size,
                n_chunks=n_chunks,
            )
        if main and csv and (not finished or not (store.root / "results.csv").exists()):
            store.write_csv(
                quantities=spec.quantities,
                axis_names=[a.name for a in spec.grid.axes],
                points=lambda flat: spec.grid.points(flat, inputs.coords),
                n_points=n,
                chunk_size=size,
                n_chunks=n_chunks,
                float_fmt="%.17g" if spec.dtype == "float64" else "%.9g",
            )
        if jax.process_count() > 1:  # pragma: no cover - multi-host only
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("jaxdp.sweep done")
    computed_points = sum(min(size, n - i * size) for i in todo)
    return SweepRun(
        out_dir=Path(out_dir),
        results=store.results_path,
        shape=spec.shape,
        n_points=n,
        chunk_size=size,
        n_chunks=n_chunks,
        computed=len(todo),
        seconds=seconds,
        points_per_second=computed_points / seconds if seconds > 0 else 0.0,
    )


def _run_chunks(
    compiled,
    inputs: _Inputs,
    store: Store,
    todo: list[int],
    n: int,
    size: int,
    n_chunks: int,
    quiet: bool,
    main: bool,
) -> float:
    from tqdm.auto import tqdm

    delay = float(os.environ.get(_TEST_DELAY, "0") or 0)
    done_points = n - sum(min(size, n - i * size) for i in todo)
    bar = tqdm(
        total=n,
        initial=done_points,
        unit="pt",
        unit_scale=True,
        desc="sweep",
        disable=quiet or not sys.stderr.isatty(),
        file=sys.stderr,
        smoothing=0.1,
    )
    step = inputs.length
    t0 = time.perf_counter()

    def launch(index: int) -> list[dict[str, jax.Array]]:
        start, stop = index * size, min(index * size + size, n)
        calls = []
        for s in range(start, stop, step):
            outs = compiled(inputs(s, stop))
            for v in outs.values():
                if v.is_fully_addressable:
                    v.copy_to_host_async()
            calls.append(outs)
        return calls

    def finish(index: int, calls: list[dict[str, jax.Array]]) -> None:
        length = min(size, n - index * size)
        arrays = {q: np.concatenate([_to_host(c[q]) for c in calls])[:length] for q in calls[0]}
        if main:
            store.write_chunk(index, n_chunks, arrays)
        bar.update(length)
        if delay:
            time.sleep(delay)

    try:
        pending: tuple[int, list[dict[str, jax.Array]]] | None = None
        for index in todo:
            calls = launch(index)
            if pending is not None:
                finish(*pending)
            pending = (index, calls)
        if pending is not None:
            finish(*pending)
    finally:
        bar.close()
    return time.perf_counter() - t0


def load_sweep(out_dir: str | os.PathLike, *, mmap: bool = False) -> SweepResult:
    """Load the finished sweep in ``out_dir`` (its ``results.npz``).

    Args:
        out_dir: the directory given to :func:`sweep` / ``jaxdp sweep --out``.
        mmap: memory-map the arrays instead of reading them (for sweeps larger than memory).

    Returns:
        A :class:`SweepResult` ``(coords, values, fixed, manifest)``.

    Raises:
        FileNotFoundError: the sweep has not finished (no ``results.npz``); run it again to
            resume.
    """
    store = Store(out_dir)
    path = store.results_path
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: the sweep has not finished; run it again to resume"
        )
    manifest = store.read_manifest() or {}
    if mmap:
        data = npz_memmap(path)
    else:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    axes = [str(a) for a in data["_axes"]]
    fixed = [str(a) for a in data["_fixed"]]
    quantities = [str(a) for a in data["_quantities"]]
    return SweepResult(
        coords={a: data[a] for a in axes},
        values={q: data[q] for q in quantities},
        fixed={f: data[f] for f in fixed},
        manifest=manifest,
    )

"""Running a sweep: chunking, sharding over every device, progress, resume, results.

The grid (never materialised) is cut into chunks of ``chunk_size`` consecutive flat indices,
the unit written to disk. A chunk is computed by one or more calls of a single compiled
function whose input is ``block_size`` points *per device*, so one compilation serves every
chunk; a resumed run keeps the manifest's chunk and block sizes. On the same devices a resumed
run is therefore bit-identical to an uninterrupted one. Across device counts (or block sizes)
the results agree to rounding only (~1e-15 relative in float64, a few ulps): XLA compiles and
vectorises the per-device program differently for each mesh and block length, so some
quantities (e.g. geometric ``tv``, randomized-response ``chernoff``, Gaussian ``tv``) differ in
the last bit at some points. Padding (repeating the chunk's last point) fills the last call
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
import shutil
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jaxlib
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxdp._checks import error_line
from jaxdp.sweep.kernel import _axis_values, check_kernel, make_kernel, point_values
from jaxdp.sweep.spec import SweepSpec, parse_spec
from jaxdp.sweep.storage import CSV, FORMAT, MANIFEST, Store, npz_memmap

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


#: Values of the mechanism's pair per point beyond which a device takes proportionally fewer
#: points per call (randomized response with k = 1000, 2000 values a point, held ~9 GB of host
#: memory per chunk of 2**16 points on a CPU).
POINT_VALUES = 256


def _test_delay() -> float:
    """Seconds of ``$JAXDP_SWEEP_TEST_DELAY`` (0 when unset or empty).

    Raises:
        ValueError: naming the variable (was "could not convert string to float: 'abc'" or
            "sleep length must be non-negative", after the manifest was written).
    """
    text = os.environ.get(_TEST_DELAY, "").strip()
    try:
        delay = float(text or 0)
    except ValueError:
        delay = math.nan
    if not 0 <= delay < math.inf:
        raise ValueError(f"{_TEST_DELAY} must be a number of seconds >= 0, got {text!r}")
    return delay


def _per_device(devices: list, point_values: int = 1) -> int:
    base = CPU_POINTS_PER_DEVICE if devices[0].platform == "cpu" else ACCELERATOR_POINTS_PER_DEVICE
    return max(64, base * POINT_VALUES // max(point_values, POINT_VALUES))


def default_chunk_size(devices: list | None = None, *, point_values: int = 1) -> int:
    """Default points per chunk: 2**16 per CPU device, 2**20 per accelerator, proportionally
    fewer (at least 64 per device) for a mechanism whose pair holds more than
    :data:`POINT_VALUES` values per point (``point_values``, e.g. ``2k`` for randomized
    response on ``k`` outcomes)."""
    devices = jax.devices() if devices is None else devices
    return _per_device(devices, point_values) * len(devices)


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


def _fixed_arrays(spec: SweepSpec) -> dict[str, np.ndarray]:
    """The fixed parameters as stored: 0-d arrays, a float in the spec dtype, the value the
    kernel computed with (``np.asarray`` stored a float64 beside the float32 axes and values
    of a float32 sweep); an integer, which the kernel keeps a Python int, as an int64."""
    return {
        k: np.asarray(v) if isinstance(v, int) else np.asarray(v, np.dtype(spec.dtype))
        for k, v in spec.grid.fixed
    }


class _Inputs:
    """Builds the sharded parameter arrays of one call from flat grid indices."""

    def __init__(self, spec: SweepSpec, sharding: NamedSharding, length: int) -> None:
        self.grid = spec.grid
        self.sharding = sharding
        self.length = length  # points per call, all devices together
        self.coords = {a.name: _axis_values(spec, a) for a in spec.grid.axes}

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


_COMPILED: dict[tuple, Any] = {}  # (spec digest, call length, devices, ...) -> compiled function


def _compile(spec: SweepSpec, kernel, inputs: _Inputs, sharding: NamedSharding):
    """The compiled call: one per (spec, points per call, devices), cached in-process.

    The kernel runs under :func:`jax.shard_map`: every device evaluates its own block of
    ``length / n_devices`` points with no communication (a solver's loop stops when *its*
    block has converged), and the per-device program is the same for any number of devices.
    """
    length = inputs.length
    mesh = sharding.mesh
    # (the digest reads a fixed 1 as 1.0; the kernel keeps an int a static Python int)
    fixed_types = tuple(type(v).__name__ for _, v in spec.grid.fixed)
    # (and an axis [1, 2] as [1.0, 2.0], but its coordinates stay int64: another executable)
    axis_dtypes = tuple(c.dtype.str for c in inputs.coords.values())
    key = (
        spec.digest(),
        fixed_types,
        axis_dtypes,
        length,
        tuple(mesh.devices.flat),
        bool(jax.config.jax_enable_x64),
    )
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
    # XLA's default compiler options on purpose (not jaxdp.CPU_COMPILER_OPTIONS, whose
    # 512-bit vectors make results differ in the last bit between block lengths). Results are
    # bit-identical for the same devices and block size (what a resumed run has); across
    # device counts they agree to rounding only (~1e-15 relative), see the module docstring.
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
    with the same spec and directory resumes: finished chunks are skipped, and on the same
    devices the result is bit-identical to an uninterrupted run (on a different number of
    devices, equal to rounding, ~1e-15 relative). At the end the chunks are streamed into
    ``out_dir/results.npz`` (see :func:`load_sweep`). A chunk file or ``results.npz`` damaged
    after it was written (unreadable headers, a missing quantity, a wrong length) is computed
    or rebuilt again, with a one-line note on stderr.

    Host memory is bounded by the chunk size and the longest axis, not by the number of
    chunks: the chunks still to do are enumerated lazily, and a resumed run keeps the finished
    ones as runs of consecutive indices (8 bytes a chunk file while listing them).

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
            ``jax_enable_x64``, a directory holding something else (a different spec,
            jaxdp version or chunk size), a damaged ``manifest.json`` (named), too little
            free disk space in ``out_dir`` for the chunk files and ``results.npz`` (each
            ``n_points`` times the bytes of a point's quantities; before any work), or a chunk
            size whose chunks do not fit in the available host memory (a chunk is held whole,
            about three times its values' bytes, more with ``csv``; before any work, naming
            the largest chunk size that fits).

    Multi-host: call :func:`jax.distributed.initialize` first in every process and run the same
    call everywhere; ``jax.devices()`` then spans all hosts, each process builds only the
    shards of its own devices, and process 0 reads and writes ``out_dir``.
    """
    if not isinstance(out_dir, str | os.PathLike):
        raise TypeError(f"out_dir must be a path, got {type(out_dir).__name__}")
    if not os.fspath(out_dir):  # (Path("") is the current directory)
        raise ValueError("out_dir: empty path")
    spec = parse_spec(spec)
    _test_delay()  # (checked before any work)
    if spec.dtype == "float64" and not jax.config.jax_enable_x64:
        raise ValueError(
            "spec: dtype float64 needs jax_enable_x64 (the jaxdp CLI enables it); "
            "call jax.config.update('jax_enable_x64', True) or set dtype = 'float32'"
        )
    if isinstance(chunk_size, np.integer):  # (was "must be a positive integer, got np.int64(5)")
        chunk_size = int(chunk_size)
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    kernel = make_kernel(spec)
    dtypes = check_kernel(spec, kernel)
    values = point_values(spec, kernel)

    devices = jax.devices()
    n_dev = len(devices)
    n = spec.size
    explicit = chunk_size if chunk_size is not None else spec.chunk_size
    size = min(explicit or default_chunk_size(devices, point_values=values), n)
    # Points per device per call: a whole chunk in one call on the devices of the first run
    # (a multiple of 64 so that no point falls in a vector remainder loop); resumed runs keep
    # the manifest's, so the per-device program never changes.
    block = -(-min(_per_device(devices, values), -(-size // n_dev)) // 64) * 64
    main = jax.process_index() == 0
    store = Store(out_dir)

    def manifest_for(cs: int, bs: int) -> dict:
        return {
            "format": FORMAT,
            "jaxdp_version": _jaxdp_version(),
            # (informational: a resume checks the jaxdp version only)
            "jax_version": jax.__version__,
            "jaxlib_version": jaxlib.__version__,
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
                _check_space(store, n * sum(np.dtype(d).itemsize for d in dtypes.values()))
                if explicit or store.read_manifest() is None:  # (resumed: the manifest's)
                    _check_memory(spec, dtypes, size, _chunk_source(spec, chunk_size), csv)
                manifest = store.prepare(
                    manifest_for(size, block), explicit_chunk_size=bool(explicit)
                )
                if manifest["chunk_size"] != size:  # (resumed with the manifest's chunk size)
                    cs = manifest["chunk_size"]
                    where = f"{store.root / MANIFEST}: chunk_size {cs:,}"
                    _check_memory(spec, dtypes, cs, where, csv, resumed=True)
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
        finished = False
        if main and store.results_path.is_dir():
            raise ValueError(f"{store.results_path} is a directory, not a results file; remove it")
        if main and csv and (store.root / CSV).is_dir():  # (was OSError's "[Errno 21] Is a
            # directory: '.../.results.csv.tmp.123' -> ...", after the whole sweep had run)
            raise ValueError(f"{store.root / CSV} is a directory, not a CSV file; remove it")
        if main and store.results_path.exists():
            why = store.results_problem(spec.quantities, spec.shape)
            finished = why is None
            if not finished:
                _note(f"{store.results_path} is unreadable ({why}): rebuilding it")
        finished = bool(_broadcast(np.asarray([finished]))[0])
        runs = np.asarray([[0, n_chunks]], dtype=np.int64)  # finished: nothing to do
        if not finished:
            runs = _broadcast_runs(_done_runs(store, spec, n, size, n_chunks) if main else None)
        todo = _Todo(runs, n, size, n_chunks)
        mesh = Mesh(np.asarray(devices), ("points",))
        sharding = NamedSharding(mesh, PartitionSpec("points"))
        inputs = _Inputs(spec, sharding, block * n_dev)
        seconds = 0.0
        if todo.chunks:
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
                fixed=_fixed_arrays(spec),
                chunk_size=size,
                n_chunks=n_chunks,
            )
        if main and csv and (not finished or not (store.root / "results.csv").exists()):
            stored = None
            if finished:
                # the CSV from results.npz (checked above, CRCs too), memory-mapped: the chunk
                # files may have been deleted after the run (README; it said "chunks/000000.npz
                # is damaged ... run again") or damaged since (it said so too, with numpy's
                # "contains pickled (object) data" for a file that was not an npz)
                stored = {
                    q: v.reshape(-1) for q, v in load_sweep(store.root, mmap=True).values.items()
                }
            store.write_csv(
                quantities=spec.quantities,
                stored=stored,
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
    return SweepRun(
        out_dir=Path(out_dir),
        results=store.results_path,
        shape=spec.shape,
        n_points=n,
        chunk_size=size,
        n_chunks=n_chunks,
        computed=todo.chunks,
        seconds=seconds,
        points_per_second=todo.points / seconds if seconds > 0 else 0.0,
    )


def _check_space(store: Store, result_bytes: int) -> None:
    """Refuse a sweep whose chunk files and ``results.npz`` (``result_bytes`` each, the chunks
    already written counted as done) do not fit in the free space of its directory: a grid
    of 2**48 points ran on, filling the disk 15 GB a minute, until a write failed."""
    if store.results_path.exists():  # (finished, or a damaged one is rebuilt in its place)
        return
    written = 0
    if store.chunks.is_dir():
        with os.scandir(store.chunks) as entries:
            written = sum(e.stat().st_size for e in entries if e.is_file())
    need = 2 * result_bytes - written
    free = shutil.disk_usage(store.root).free
    if need > free:
        raise ValueError(
            f"{store.root}: the sweep needs {need / 1e9:.3g} GB more disk space (its chunk "
            f"files and results.npz, {result_bytes / 1e9:.3g} GB each), {free / 1e9:.3g} GB "
            "are free there; use a smaller grid or another --out"
        )


#: Host bytes per value of a chunk while it is computed and written: the outputs of two chunks
#: in flight (the next one computes while one is written) and one chunk's concatenated copy.
_CHUNK_COPIES = 3
#: Host bytes per cell of ``results.csv`` while a chunk of it is formatted (a Python float
#: object and two pointers to it).
_CSV_CELL_BYTES = 40


def _available_memory() -> int | None:
    """Bytes of memory this process may still allocate (``None``: unknown): Linux's
    ``MemAvailable``, less where a cgroup limit (a container, a batch job) leaves less."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit, usage in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        try:
            with open(limit) as f, open(usage) as g:
                found.append(int(f.read()) - int(g.read()))
        except (OSError, ValueError):  # (absent, or "max": no limit)
            pass
    return max(0, min(found)) if found else None


def _chunk_source(spec: SweepSpec, chunk_size: int | None) -> str:
    """Where a sweep's chunk size comes from, for :func:`_check_memory`'s message."""
    if chunk_size is not None:
        return f"chunk_size (--chunk-size) {chunk_size:,}"
    if spec.chunk_size is not None:
        return f"spec: chunk_size {spec.chunk_size:,}"
    return "the default chunk size"


def _check_memory(
    spec: SweepSpec, dtypes: dict, size: int, source: str, csv: bool, *, resumed: bool = False
) -> None:
    """Refuse a chunk size whose chunks do not fit in the host's available memory (a
    ``--chunk-size`` of 10**12 on a grid of 2**31 points ran out of memory without a message,
    or was killed by the kernel): chunks are held whole in host memory while written.

    Raises:
        ValueError: naming ``source`` (where the chunk size came from) and the largest chunk
            size that fits.
    """
    available = _available_memory()
    if available is None:
        return
    per_point = _CHUNK_COPIES * sum(np.dtype(d).itemsize for d in dtypes.values())
    if csv:
        cells = len(spec.grid.axes) + len(spec.quantities)
        per_point = max(per_point, _CSV_CELL_BYTES * cells)
    need = size * per_point
    if need > available:
        most = max(1, available // per_point)
        where = "in a new --out" if resumed else "(--chunk-size, chunk_size=)"
        raise ValueError(
            f"{source}: a chunk of {size:,} point{'s' * (size != 1)} needs about "
            f"{need / 1e9:.3g} GB of host memory, {available / 1e9:.3g} GB are available; use "
            f"a chunk size of at most {most:,} point{'s' * (most != 1)} {where}"
        )


def _note(message: str) -> None:
    print(f"jaxdp: note: {message}", file=sys.stderr)


def _done_runs(store: Store, spec: SweepSpec, n: int, size: int, n_chunks: int) -> np.ndarray:
    """The finished chunks as ``[start, stop)`` runs (process 0); damaged ones are not done.

    A chunk file is checked from its headers (every quantity there, of the right length, a
    number); one that fails counts as not done, is reported in one line on stderr, and is
    computed again (the new file replaces it atomically).
    """

    def problem(index: int, path: Path) -> str | None:
        length = min(size, n - index * size)
        return store.chunk_problem(path, dict.fromkeys(spec.quantities, length))

    runs, damaged = store.done_runs(n_chunks, problem)
    for path, _ in damaged:
        if path.is_dir():  # (cannot be replaced by a file)
            raise ValueError(f"{path} is a directory, not a chunk file; remove it")
    if damaged:
        path, why = min(damaged)
        more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
        _note(f"{path} is unreadable ({why}){more}: computing it again")
    return runs


def _broadcast_runs(runs: np.ndarray | None) -> np.ndarray:
    """Process 0's runs of finished chunks, on every process."""
    if jax.process_count() == 1:
        assert runs is not None
        return runs
    count = int(_broadcast(np.asarray([0 if runs is None else len(runs)], np.int64))[0])
    if count == 0:
        return np.zeros((0, 2), dtype=np.int64)
    return _broadcast(np.zeros((count, 2), np.int64) if runs is None else runs)


class _Todo:
    """The chunks still to compute, in order, without listing them (memory: the done runs)."""

    def __init__(self, runs: np.ndarray, n: int, size: int, n_chunks: int) -> None:
        self.runs = runs
        done = int(np.sum(runs[:, 1] - runs[:, 0]))
        last_done = len(runs) > 0 and int(runs[-1, 1]) == n_chunks
        done_points = done * size - (n_chunks * size - n if last_done else 0)
        self.chunks = n_chunks - done
        self.points = n - done_points
        self.n_chunks = n_chunks

    def __iter__(self) -> Iterator[int]:
        start = 0
        for row in self.runs:
            yield from range(start, int(row[0]))
            start = int(row[1])
        yield from range(start, self.n_chunks)


def _run_chunks(
    compiled,
    inputs: _Inputs,
    store: Store,
    todo: _Todo,
    n: int,
    size: int,
    n_chunks: int,
    quiet: bool,
    main: bool,
) -> float:
    from tqdm.auto import tqdm

    delay = _test_delay()
    bar = tqdm(
        total=n,
        initial=n - todo.points,
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
        FileNotFoundError: no sweep was started in ``out_dir`` (no manifest), or it has not
            finished (no ``results.npz``; run it again to resume).
        ValueError: ``results.npz`` or ``manifest.json`` is damaged (the message names it;
            running the sweep again rebuilds ``results.npz``).
    """
    if not isinstance(out_dir, str | os.PathLike):
        raise TypeError(f"out_dir must be a path, got {type(out_dir).__name__}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise NotADirectoryError(f"out_dir {os.fspath(out_dir)} is a file, not a sweep directory")
    store = Store(out_dir)
    path = store.results_path
    if not path.exists():
        # (a directory without a manifest never held a sweep: "run it again to resume" would
        # send the user to resume something that does not exist)
        if not (store.root / MANIFEST).exists():
            raise FileNotFoundError(
                f"no sweep in {os.fspath(out_dir)} (no {MANIFEST}): run jaxdp sweep there first"
            )
        raise FileNotFoundError(
            f"{path} does not exist: the sweep has not finished; run it again to resume"
        )
    manifest = store.read_manifest() or {}
    try:
        if not zipfile.is_zipfile(path):  # (np.load would take it for a pickle)
            raise ValueError("not an npz file")
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
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        why = error_line(e)
        if isinstance(e, KeyError):
            why = f"no array {why}"
        raise ValueError(
            f"{path} is damaged ({why}); run the sweep again to rebuild it from its chunks"
        ) from None

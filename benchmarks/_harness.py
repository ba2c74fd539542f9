"""Timing and reporting utilities shared by the benchmark programs.

Nothing here imports JAX at module import time: :func:`pin_one_core` must be able to set
``XLA_FLAGS`` and re-execute the process before JAX is loaded.

* :func:`pin_one_core` — re-exec under ``taskset -c 0`` with single-threaded XLA CPU flags.
* :func:`compile_jit` — trace/lower and compile a jitted function separately from running it.
* :func:`time_call` — warm-up, ``block_until_ready``, inner repetitions sized to a minimum
  sample time, median (and min/max) of several samples.
* :func:`interleaved` — the same for several calls at once, in alternating rounds (ratios).
* :func:`count_ops` — transcendental operations per element in the optimised HLO, split into
  the ``while`` loop body (per iteration) and the rest.
* :func:`op_throughput` — measured elements/s of each elementwise transcendental op.
* :func:`machine_info`, :func:`write_json`, :func:`md_table`, :func:`fmt` — reporting.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ONE_CORE_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
_PINNED_ENV = "JAXDP_BENCH_PINNED"


# --------------------------------------------------------------------------- process setup


def pin_one_core(argv: list[str] | None = None) -> bool:
    """Make this process run on one CPU core; call before importing JAX.

    Sets ``XLA_FLAGS`` (single-threaded Eigen, one intra-op thread) and re-executes the
    interpreter under ``taskset -c 0`` unless already pinned (to any single CPU). Returns
    ``True`` when the process is (now) pinned, ``False`` when ``taskset`` is unavailable (the
    flags are still set). Child processes inherit both the affinity and the environment.
    """
    if "jax" in sys.modules:
        raise RuntimeError("pin_one_core() must run before jax is imported")
    flags = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " " + ONE_CORE_XLA_FLAGS).strip()
    if os.environ.get(_PINNED_ENV) == "1":
        return True
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) == 1:
        return True  # already on one CPU (run.py's second lane): stay there
    taskset = shutil.which("taskset")
    if taskset is None:
        return False
    os.environ[_PINNED_ENV] = "1"
    args = [taskset, "-c", "0", sys.executable, *(sys.argv if argv is None else argv)]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(taskset, args)
    return True  # pragma: no cover (exec does not return)


def repo_on_path() -> None:
    """Make ``import jaxdp`` resolve to this checkout and ``benchmarks``/``tests`` importable."""
    for p in (str(REPO), str(REPO / "benchmarks")):
        if p not in sys.path:
            sys.path.insert(0, p)


# --------------------------------------------------------------------------- timing


def block(x):
    """``jax.block_until_ready`` on any pytree (numpy results pass through)."""
    import jax

    return jax.block_until_ready(x)


_cache_hits: list[str] = []  # one entry per executable JAX loaded from its persistent cache


def _count_cache_hits(event: str, **_kw) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _cache_hits.append(event)


_listening = False


def compile_jit(fn, *args, reload: bool = False, **jit_kwargs):
    """Jit ``fn`` afresh, trace+lower and compile for ``args``; return timings and executable.

    With ``reload=True`` and JAX's persistent compilation cache enabled
    (``jaxdp.enable_compile_cache``), it then drops JAX's in-memory caches and traces,
    lowers and compiles once more: what a later process pays when the executable is on disk.

    Returns:
      ``(compiled, timings)``: the executable (called as ``compiled(*args)``) and a dict
      with ``trace_lower_s``, ``compile_s``, ``cold_cache_hits`` (executables the first
      compile took from the persistent cache; 0 for a true compile) and, with ``reload``,
      ``reload_s`` (trace+lower+load) and ``reload_cache_hits``.
    """
    import jax

    import jaxdp

    global _listening
    if not _listening:
        jax.monitoring.register_event_listener(_count_cache_hits)
        _listening = True
    # what jaxdp's own entry points compile with: decided by the arguments' device, so the
    # CPU side of a GPU run gets the CPU options too
    if jaxdp._jit.platform(args) == "cpu":
        jit_kwargs.setdefault("compiler_options", jaxdp.CPU_COMPILER_OPTIONS)
    hits = len(_cache_hits)
    with _no_gc():
        t0 = time.perf_counter()
        lowered = jax.jit(fn, **jit_kwargs).lower(*args)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
    out = {
        "trace_lower_s": t1 - t0,
        "compile_s": t2 - t1,
        "cold_cache_hits": len(_cache_hits) - hits,
    }
    if reload and jax.config.jax_compilation_cache_dir:
        jax.clear_caches()
        hits = len(_cache_hits)
        with _no_gc():
            t0 = time.perf_counter()
            jax.jit(fn, **jit_kwargs).lower(*args).compile()
            out["reload_s"] = time.perf_counter() - t0
        out["reload_cache_hits"] = len(_cache_hits) - hits
    return compiled, out


@contextlib.contextmanager
def _no_gc():
    """Python's garbage collector off while timing (as :mod:`timeit` does): tracing allocates
    many small objects, and a late benchmark's large heap made collections, not jaxdp, a
    visible part of its trace time."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _warm_up(fn, args, min_sample_s, max_inner):
    """One blocking call of ``fn(*args)``; its time sizes the inner loop of a sample so that
    the sample lasts about ``min_sample_s``. Returns ``(inner, output)``."""
    t0 = time.perf_counter()
    out = block(fn(*args))
    first = time.perf_counter() - t0
    return int(min(max_inner, max(1, math.ceil(min_sample_s / max(first, 1e-9))))), out


def _sample(fn, args, inner):
    """Mean wall time of ``inner`` back-to-back calls (blocking on the last); and its output."""
    t0 = time.perf_counter()
    for _ in range(inner):
        out = fn(*args)
    block(out)
    return (time.perf_counter() - t0) / inner, out


def time_call(fn, *args, repeats: int = 5, min_sample_s: float = 0.02, max_inner: int = 1000):
    """Median wall time of ``fn(*args)`` (blocking on the result).

    One warm-up call (its time sizes the inner loop), then ``repeats`` samples, each the mean
    over ``inner`` back-to-back calls with ``inner`` chosen so a sample lasts about
    ``min_sample_s`` (amortises dispatch for tiny batches).

    Returns:
      dict with ``median_s``, ``min_s``, ``max_s`` (per call), ``repeats``, ``inner``,
      ``samples_s`` and ``result`` (the last output).
    """
    inner, out = _warm_up(fn, args, min_sample_s, max_inner)
    samples = []
    for _ in range(repeats):
        t, out = _sample(fn, args, inner)
        samples.append(t)
    return {
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "repeats": repeats,
        "inner": inner,
        "samples_s": samples,
        "result": out,
    }


def interleaved(
    calls, *, rounds: int = 9, min_sample_s: float = 0.02, max_inner: int = 1000
) -> list[float]:
    """Median wall time per call of each ``(fn, args)`` in ``calls``, sampled as in
    :func:`time_call` but in alternating rounds (one sample of each per round), so that a
    slow spell of a shared machine hits all of them alike: compare the ratios of the
    results."""
    inners = [_warm_up(fn, args, min_sample_s, max_inner)[0] for fn, args in calls]
    samples = [[] for _ in calls]
    for _ in range(rounds):
        for (fn, args), inner, out in zip(calls, inners, samples, strict=True):
            out.append(_sample(fn, args, inner)[0])
    return [statistics.median(s) for s in samples]


def time_python(fn, *, repeats: int = 3):
    """Median wall time of a plain-Python/numpy call ``fn()`` (no warm-up beyond one call)."""
    fn()
    samples = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(samples), "min_s": min(samples), "result": out}


# --------------------------------------------------------------------------- op counting

#: HLO opcode -> short name of the elementwise "expensive" operations we count.
TRANSCENDENTAL_HLO = {
    "exponential": "exp",
    "exponential-minus-one": "expm1",
    "log": "log",
    "log-plus-one": "log1p",
    "tanh": "tanh",
    "logistic": "logistic",
    "erf": "erf",
    "power": "pow",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "cbrt": "cbrt",
    "sine": "sin",
    "cosine": "cos",
    "atan2": "atan2",
    "divide": "div",
}

_COMP_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\))?\s*(?:->\s*.*)?\{\s*$")
_OP_LINE = re.compile(
    r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<shape>[a-z]+\d*\[[\d,]*\](?:\{[^}]*\})?)\s+"
    r"(?P<op>[a-z][a-z0-9\-]*)\("
)
_ANY_OP = re.compile(r"=\s*(?:\(.*?\)|\S+)\s+(?P<op>[a-z][a-z0-9\-]*)\(")
_CALLS = re.compile(
    r"(calls|body|condition|to_apply|branch_computations|called_computations)="
    r"(\{[^}]*\}|%?[\w.\-]+)"
)


def _parse_hlo(text: str):
    comps: dict[str, dict] = {}
    entry = None
    cur = None
    for line in text.splitlines():
        stripped = line.strip()
        if cur is None:
            m = _COMP_HEADER.match(stripped)
            if m and not stripped.startswith("HloModule"):
                cur = m.group(1)
                comps[cur] = {"ops": Counter(), "calls": [], "while": [], "static": []}
                if stripped.startswith("ENTRY"):
                    entry = cur
            continue
        if stripped == "}":
            cur = None
            continue
        m = _OP_LINE.match(line)
        op = None
        if m:
            op = m.group("op")
            dims = re.search(r"\[([\d,]*)\]", m.group("shape")).group(1)
            size = math.prod(int(d) for d in dims.split(",") if d) if dims else 1
            if op in TRANSCENDENTAL_HLO:
                comps[cur]["ops"][TRANSCENDENTAL_HLO[op]] += size
        else:
            m2 = _ANY_OP.search(line)
            op = m2.group("op") if m2 else None
        trip = re.search(r'known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"', line)
        for kind, target in _CALLS.findall(line):
            names = [t.strip().lstrip("%") for t in target.strip("{}").split(",") if t.strip()]
            if op == "while" and kind == "body" and trip:
                # a static loop (e.g. lax.map over chunks): its body runs trip times
                comps[cur]["static"].extend((n, int(trip.group(1))) for n in names)
            elif op == "while" and kind == "body":
                comps[cur]["while"].extend(names)
            elif op == "while" and kind == "condition":
                comps[cur]["calls"].extend(names)
            else:
                comps[cur]["calls"].extend(names)
    return comps, entry


def _total(comps, name, seen=()):
    """(ops outside, ops inside data-dependent loops) reachable from computation ``name``.

    Loops with a static trip count (XLA's ``known_trip_count``, e.g. ``lax.map`` over
    chunks) multiply their body; a data-dependent ``while`` (the Newton loop) is "inside".
    """
    if name not in comps or name in seen:
        return Counter(), Counter()
    c = comps[name]
    outside, inside = Counter(c["ops"]), Counter()
    for callee in c["calls"]:
        o, i = _total(comps, callee, (*seen, name))
        outside += o
        inside += i
    for body in c["while"]:  # data-dependent loop: the Newton iteration
        o, i = _total(comps, body, (*seen, name))
        inside += o + i
    for body, trips in c["static"]:
        o, i = _total(comps, body, (*seen, name))
        outside += Counter({k: v * trips for k, v in o.items()})
        inside += Counter({k: v * trips for k, v in i.items()})
    return outside, inside


def count_ops(compiled, n_items: int) -> dict:
    """Transcendental ops per item in an optimised executable (after XLA's CSE/fusion).

    Args:
      compiled: a ``jax.stages.Compiled`` (from :func:`compile_jit`).
      n_items: the batch size; counts are element counts divided by it.

    Returns:
      ``{"outside": {op: per_item}, "loop_body": {op: per_item}, "static_trip_counts": [...],
      "source": "hlo"}`` (``static_trip_counts``: trip counts of static loops, e.g. the number
      of chunks a batch is split into); empty dicts if the HLO text could not be parsed.
    """
    try:
        text = compiled.as_text()
        comps, entry = _parse_hlo(text)
        outside, inside = _total(comps, entry)
    except Exception as e:  # best effort: report instead of failing the benchmark
        return {"outside": {}, "loop_body": {}, "source": f"unparsed ({type(e).__name__})"}
    static = [t for c in comps.values() for _, t in c["static"]]
    return {
        "outside": {k: v / n_items for k, v in sorted(outside.items())},
        "loop_body": {k: v / n_items for k, v in sorted(inside.items())},
        "static_trip_counts": static,
        "source": "hlo",
    }


def op_throughput(dtype, *, n: int = 1_000_000, repeats: int = 5, ops=None) -> dict[str, float]:
    """Measured seconds per element of each counted op, as a standalone jitted kernel.

    Each op is applied to ``n`` elements in ``[0.1, 2]`` (``atan2``/``pow``/``div`` get two
    such inputs); ``ops`` restricts the set. Returns ``{op: seconds_per_element}`` (the
    copy/loop overhead of a memory-bound elementwise kernel is included; ``add`` shows that
    floor).
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    x = jnp.linspace(0.1, 2.0, n, dtype=dtype)
    y = jnp.linspace(2.0, 0.1, n, dtype=dtype)
    unary = {
        "exp": jnp.exp,
        "expm1": jnp.expm1,
        "log": jnp.log,
        "log1p": jnp.log1p,
        "tanh": jnp.tanh,
        "logistic": jax.nn.sigmoid,
        "erf": lax.erf,
        "sqrt": jnp.sqrt,
        "rsqrt": lax.rsqrt,
        "cbrt": jnp.cbrt,
        "sin": jnp.sin,
        "cos": jnp.cos,
        "add": lambda v: v + 1.0,
    }
    binary = {"pow": lax.pow, "atan2": jnp.arctan2, "div": lax.div}
    if ops is not None:
        unary = {k: v for k, v in unary.items() if k in ops}
        binary = {k: v for k, v in binary.items() if k in ops}
    out = {}
    for name, f in unary.items():
        c, _ = compile_jit(f, x)
        out[name] = time_call(c, x, repeats=repeats)["median_s"] / n
    for name, f in binary.items():
        c, _ = compile_jit(f, x, y)
        out[name] = time_call(c, x, y, repeats=repeats)["median_s"] / n
    return out


def predicted_seconds(ops: dict, trips: float, per_op: dict) -> float:
    """Seconds per item if the kernel did nothing but its counted ops (``trips`` loop trips)."""
    total = 0.0
    for k, v in ops.get("outside", {}).items():
        total += v * per_op.get(k, 0.0)
    for k, v in ops.get("loop_body", {}).items():
        total += trips * v * per_op.get(k, 0.0)
    return total


# --------------------------------------------------------------------------- machine info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0:
            dirty = subprocess.run(
                # the results being written by this very run do not make the code dirty
                [
                    "git",
                    "-C",
                    str(REPO),
                    "status",
                    "--porcelain",
                    "--untracked-files=no",
                    "--",
                    ".",
                    ":(exclude)benchmarks/results",
                ],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def _gpu_names() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    except (OSError, subprocess.SubprocessError):
        return []


def machine_info() -> dict:
    """Where and with what a benchmark ran (CPU, cores, affinity, JAX, devices, flags)."""
    info = {
        "date_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "git_commit": _git_commit(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "gpus": _gpu_names(),
    }
    try:
        info["cpu_affinity"] = sorted(os.sched_getaffinity(0))
    except AttributeError:
        info["cpu_affinity"] = None
    if "jax" in sys.modules:
        import jax
        import jaxlib

        info["jax"] = jax.__version__
        info["jaxlib"] = jaxlib.__version__
        info["backend"] = jax.default_backend()
        info["devices"] = [str(d) for d in jax.devices()]
        info["x64"] = bool(jax.config.jax_enable_x64)
    for mod in ("numpy", "scipy", "mpmath", "optax"):
        if mod in sys.modules:
            info[mod] = getattr(sys.modules[mod], "__version__", None)
    return info


def machine_line(info: dict) -> str:
    """One-line description of the machine for tables."""
    cores = info.get("cpu_affinity")
    core_txt = (
        f"{len(cores)} of {info.get('cpu_count')} cores"
        if cores
        else f"{info.get('cpu_count')} cores"
    )
    parts = [info.get("cpu", "?"), core_txt]
    if info.get("gpus"):
        parts.append("GPU: " + "; ".join(info["gpus"]))
    parts.append(f"jax {info.get('jax', '?')} ({info.get('backend', '?')})")
    if info.get("git_commit"):
        parts.append(f"jaxdp @ {info['git_commit']}")
    parts.append(info.get("date_utc", ""))
    return ", ".join(p for p in parts if p)


# --------------------------------------------------------------------------- output


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, (bool, int, str)) or x is None:
        return x
    if hasattr(x, "tolist"):
        return _jsonable(x.tolist())
    return str(x)


def write_json(path: Path | str, payload: dict) -> Path:
    """Write ``payload`` as JSON (NaN/inf as strings), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_jsonable(payload), indent=1) + "\n")
    tmp.replace(path)
    return path


def write_text(path: Path | str, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def fmt(x, digits: int = 3) -> str:
    """Compact number formatting for tables (``-`` for None, ``nan``/``inf`` spelled out)."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, str):
        return x
    if isinstance(x, int) and abs(x) < 10**6:
        return str(x)
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e5:
        return f"{x:.{digits}g}"
    return f"{x:.{max(digits - 1, 1)}e}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")


def md_table(headers: list[str], rows: list[list]) -> str:
    """A GitHub markdown table (cells formatted with :func:`fmt`)."""
    cells = [[fmt(c) for c in row] for row in rows]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(out) + "\n"


def command_line() -> str:
    """The command that produced the current run, relative to the repository root."""
    args = [a for a in sys.argv]
    try:
        args[0] = str(Path(args[0]).resolve().relative_to(REPO))
    except ValueError:
        pass
    return "python " + " ".join(args)

"""Tests of jaxdp.sweep: spec validation, chunked/sharded evaluation, resume after SIGKILL.

Multi-device runs use ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` in a subprocess
(the flag must be set before JAX starts). Every subprocess runs the real CLI,
``python -m jaxdp.cli sweep``; ``JAXDP_SWEEP_TEST_DELAY`` slows it down so that it can be killed
mid-run.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdp as jd
from jaxdp import cli, mechanisms, paper
from jaxdp.sweep import load_sweep, parse_spec, sweep
from jaxdp.sweep.storage import Store

# 16 x 3 x 5 = 240 points; chunks of 16 -> 15 chunk files. Each chunk is one call of 64 points
# per device (the block is rounded up to 64), so most of every call is padding: that is fine
# and exercises the padding path on every chunk.
SPEC_TOML = """\
mechanism = "adversarial_laplace"
quantities = ["chernoff", "alpha", "kl_pq", "kl_qp", "tv", "eq34", "eq35", "eq22"]
[grid]
epsilon = { logspace = [-2, 1, 16] }
shift = [1.0, 2.0, 3.0]
theta = { linspace = [1.0, 3.0, 5] }
sensitivity = 1.0
"""
SPEC = {
    "mechanism": "adversarial_laplace",
    "quantities": ["chernoff", "alpha", "kl_pq", "kl_qp", "tv", "eq34", "eq35", "eq22"],
    "grid": {
        "epsilon": {"logspace": [-2, 1, 16]},
        "shift": [1.0, 2.0, 3.0],
        "theta": {"linspace": [1.0, 3.0, 5]},
        "sensitivity": 1.0,
    },
}
SHAPE = (16, 3, 5)
CHUNK = 16
N_CHUNKS = 15


def _session_dir(tmp_path_factory) -> Path:
    """This pytest session's temporary root, shared by its xdist workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    """A persistent XLA compilation cache shared by the subprocesses (and xdist workers)."""
    path = _session_dir(tmp_path_factory) / "jaxdp-sweep-xla-cache"
    path.mkdir(exist_ok=True)
    return path


def _env(devices: int, cache: Path, delay: float = 0.0) -> dict[str, str]:
    env = dict(os.environ)
    env["JAX_COMPILATION_CACHE_DIR"] = str(cache)
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    root = str(Path(jd.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("JAXDP_SWEEP_TEST_DELAY", None)
    if delay:
        env["JAXDP_SWEEP_TEST_DELAY"] = str(delay)
    return env


def _cli(spec: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "jaxdp.cli", "sweep", str(spec), "--out", str(out), *extra]


def _run_cli(
    spec: Path, out: Path, devices: int, cache: Path, *extra: str
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        _cli(spec, out, "--chunk-size", str(CHUNK), "--quiet", *extra),
        env=_env(devices, cache),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "spec.toml"
    path.write_text(SPEC_TOML)
    return path


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """An uninterrupted single-device, in-process run of SPEC (computed once per session and
    shared by the xdist workers: the first one to take the lock computes it)."""
    shared = _session_dir(tmp_path_factory)
    out = shared / "jaxdp-sweep-clean"
    with open(shared / "jaxdp-sweep-clean.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "results.npz").exists():
            run = sweep(SPEC, out, chunk_size=CHUNK, quiet=True)
            assert run.computed == N_CHUNKS and run.n_chunks == N_CHUNKS and run.shape == SHAPE
    return load_sweep(out)


def _assert_same(a, b) -> None:
    assert list(a.values) == list(b.values) and list(a.coords) == list(b.coords)
    for name in a.coords:
        np.testing.assert_array_equal(a.coords[name], b.coords[name], err_msg=name)
    for name in a.values:
        assert a.values[name].dtype == b.values[name].dtype
        np.testing.assert_array_equal(a.values[name], b.values[name], err_msg=name)


# --------------------------------------------------------------------------- results


def test_toml_and_dict_specs_agree(spec_file):
    assert parse_spec(spec_file).digest() == parse_spec(SPEC).digest()


def test_layout_coords_and_dtypes(clean):
    assert list(clean.coords) == ["epsilon", "shift", "theta"]
    np.testing.assert_array_equal(clean.coords["epsilon"], np.logspace(-2, 1, 16))
    np.testing.assert_array_equal(clean.coords["theta"], np.linspace(1.0, 3.0, 5))
    np.testing.assert_array_equal(clean.coords["shift"], [1.0, 2.0, 3.0])
    assert clean.fixed == {"sensitivity": np.asarray(1.0)}
    assert list(clean.values) == SPEC["quantities"]
    for v in clean.values.values():
        assert v.shape == SHAPE and v.dtype == np.float64
        assert np.all(np.isfinite(v))
    assert clean.manifest["spec_sha256"] == parse_spec(SPEC).digest()
    assert clean.manifest["jaxdp_version"] == jd.__version__


def test_matches_direct_library_calls(clean):
    """Random grid points against eager calls of the mechanism, core and paper functions."""
    rng = np.random.default_rng(0)
    idx = tuple(rng.integers(0, n, size=12) for n in SHAPE)
    eps = clean.coords["epsilon"][idx[0]]
    shift = clean.coords["shift"][idx[1]]
    theta = clean.coords["theta"][idx[2]]

    @jax.jit
    def direct(eps, shift, theta):
        P, Q = mechanisms.adversarial_laplace(eps, sensitivity=1.0, shift=shift, theta=theta)
        r = jd.chernoff(P, Q)
        return {
            "chernoff": r.information,
            "alpha": r.alpha,
            "kl_pq": jd.kl(P, Q),
            "kl_qp": jd.kl(Q, P),
            "tv": jd.tv(P, Q),
            "eq34": paper.eq34(shift, 1.0 / eps, theta),
            "eq35": paper.eq35(shift, 1.0 / eps, theta),
            "eq22": paper.eq22(eps),
        }

    expected = direct(eps, shift, theta)
    for name, want in expected.items():
        np.testing.assert_allclose(
            clean.values[name][idx], np.asarray(want), rtol=1e-13, atol=0, err_msg=name
        )
    # theta = 1 is equal-scale Laplace: C = t/2 - log(1 + t/2), t = shift * eps, a* = 1/2.
    t = clean.coords["shift"][None, :] * clean.coords["epsilon"][:, None]
    np.testing.assert_allclose(
        clean.values["chernoff"][:, :, 0], t / 2 - np.log1p(t / 2), rtol=1e-12, atol=0
    )
    np.testing.assert_allclose(clean.values["alpha"][:, :, 0], 0.5, rtol=1e-12)


def test_csv_and_float32(tmp_path):
    spec = {
        "mechanism": "laplace",
        "quantities": ["kl_pq", "tv"],
        "dtype": "float32",
        "grid": {"epsilon": {"linspace": [0.5, 2.0, 7]}, "sensitivity": [1, 2]},
    }
    run = sweep(spec, tmp_path / "f32", chunk_size=5, quiet=True, csv=True)
    assert run.n_chunks == 3 and run.shape == (7, 2)
    res = load_sweep(tmp_path / "f32")
    assert res.values["kl_pq"].dtype == np.float32
    assert res.coords["sensitivity"].dtype.kind == "i"
    rows = np.loadtxt(tmp_path / "f32" / "results.csv", delimiter=",", skiprows=1)
    header = (tmp_path / "f32" / "results.csv").read_text().splitlines()[0]
    assert header == "epsilon,sensitivity,kl_pq,tv"
    assert rows.shape == (14, 4)
    grid_e, grid_s = np.meshgrid(res.coords["epsilon"], res.coords["sensitivity"], indexing="ij")
    np.testing.assert_array_equal(rows[:, 0], grid_e.ravel().astype(np.float64))
    np.testing.assert_array_equal(rows[:, 1], grid_s.ravel())
    np.testing.assert_array_equal(rows[:, 2].astype(np.float32), res.values["kl_pq"].ravel())
    # Laplace, sensitivity s, scale s/eps: KL = eps - 1 + e^-eps, TV = 1 - e^(-eps/2), any s.
    e = res.coords["epsilon"].astype(np.float64)[:, None] + np.zeros(2)
    np.testing.assert_allclose(res.values["kl_pq"], e + np.expm1(-e), rtol=1e-5)
    np.testing.assert_allclose(res.values["tv"], -np.expm1(-e / 2), rtol=1e-6)


def test_renyi_orders_and_mmap(tmp_path):
    spec = {
        "mechanism": "laplace",
        "quantities": ["renyi", "kl_pq"],
        "renyi_orders": [0.5, 2],
        "grid": {"epsilon": [0.5, 1.0, 2.0]},
    }
    assert parse_spec(spec).quantities == ("renyi_0.5", "renyi_2", "kl_pq")
    sweep(spec, tmp_path / "r", quiet=True)
    res = load_sweep(tmp_path / "r", mmap=True)
    eps = np.array([0.5, 1.0, 2.0])
    P, Q = mechanisms.laplace(1.0, epsilon=jnp.asarray(eps))
    np.testing.assert_allclose(res.values["renyi_2"], jd.renyi(P, Q, 2.0), rtol=1e-12)
    np.testing.assert_allclose(res.values["renyi_0.5"], jd.renyi(P, Q, 0.5), rtol=1e-12)


def test_paper_formulas_take_grid_and_derived_parameters(tmp_path):
    # eq40 takes (eps, delta): eps from the mechanism (sensitivity / scale here), delta from
    # the grid; eq22 takes eps only.
    spec = {
        "mechanism": "laplace",
        "quantities": ["eq40", "eq22", "tv"],
        "grid": {"scale": [0.5, 1.0, 4.0], "delta": [0.0, 1e-3], "sensitivity": 2.0},
    }
    assert parse_spec(spec).formula_only == ("delta",)
    sweep(spec, tmp_path / "e", quiet=True)
    res = load_sweep(tmp_path / "e")
    eps = 2.0 / res.coords["scale"]
    np.testing.assert_array_equal(
        res.values["eq40"], paper.eq40(eps[:, None], res.coords["delta"][None, :])
    )
    np.testing.assert_array_equal(res.values["eq22"], np.repeat(paper.eq22(eps)[:, None], 2, 1))
    np.testing.assert_allclose(res.values["tv"][:, 0], -np.expm1(-eps / 2), rtol=1e-14)


# --------------------------------------------------------------------------- scale


def test_multidevice_equals_single_device(spec_file, clean, cache_dir, tmp_path):
    out = tmp_path / "four"
    _run_cli(spec_file, out, 4, cache_dir, "--csv")
    four = load_sweep(out)
    assert four.manifest["devices"]["count"] == 4
    _assert_same(four, clean)
    assert (out / "results.csv").exists()


def test_sigkill_then_resume_equals_clean_run(spec_file, clean, cache_dir, tmp_path):
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        _cli(spec_file, out, "--chunk-size", str(CHUNK)),
        env=_env(4, cache_dir, delay=0.4),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    chunks = out / "chunks"
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if chunks.is_dir() and len(list(chunks.glob("*.npz"))) >= 3:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "results.npz").exists()
    before = {p.name: p.stat() for p in chunks.glob("*.npz")}
    assert 3 <= len(before) < N_CHUNKS

    _run_cli(spec_file, out, 4, cache_dir)  # resume in a fresh process

    after = {p.name: p.stat() for p in chunks.glob("*.npz")}
    assert sorted(after) == [f"{i:06d}.npz" for i in range(N_CHUNKS)]
    for name, st in before.items():  # finished chunks were skipped, not recomputed
        assert (after[name].st_ino, after[name].st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert not [p for p in out.rglob(".*") if ".tmp." in p.name]
    for i in range(N_CHUNKS):
        with np.load(chunks / f"{i:06d}.npz") as z:
            assert all(z[q].shape == (CHUNK,) for q in SPEC["quantities"])
    _assert_same(load_sweep(out), clean)


def test_two_processes_with_jax_distributed(tmp_path, cache_dir):
    """Two processes x 2 CPU devices after jax.distributed.initialize == one device."""
    spec = {
        "mechanism": "laplace",
        "quantities": ["kl_pq", "tv", "eq22"],
        "grid": {"epsilon": {"logspace": [-2, 1, 9]}, "sensitivity": [1.0, 2.0, 3.0]},
    }
    spec_file = tmp_path / "cheap.toml"
    spec_file.write_text(
        'mechanism = "laplace"\nquantities = ["kl_pq", "tv", "eq22"]\n[grid]\n'
        "epsilon = { logspace = [-2, 1, 9] }\nsensitivity = [1.0, 2.0, 3.0]\n"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "mh"
    procs = [
        subprocess.Popen(
            _cli(spec_file, out, "--chunk-size", "4", "--quiet", "--distributed")
            + ["--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
            + ["--process-id", str(i)],
            env=_env(2, cache_dir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    sweep(spec, tmp_path / "one", chunk_size=4, quiet=True)
    both = load_sweep(out)
    assert both.manifest["devices"] == {"platform": "cpu", "count": 4, "processes": 2}
    _assert_same(both, load_sweep(tmp_path / "one"))


def test_rerun_of_finished_sweep_does_nothing(tmp_path):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0]}}
    first = sweep(spec, tmp_path / "s", quiet=True)
    stamp = (tmp_path / "s" / "results.npz").stat().st_mtime_ns
    again = sweep(spec, tmp_path / "s", quiet=True)
    assert (first.computed, again.computed) == (1, 0)
    assert (tmp_path / "s" / "results.npz").stat().st_mtime_ns == stamp


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch, capsys):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0, 3.0]}}
    sweep(spec, tmp_path / "a", chunk_size=1)  # stderr is captured: not a terminal
    assert capsys.readouterr().err == ""
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    sweep(spec, tmp_path / "b", chunk_size=1, quiet=True)
    assert term.getvalue() == ""
    sweep(spec, tmp_path / "c", chunk_size=1)
    shown = term.getvalue()
    assert re.search(r"100%.*3(\.00)?/3(\.00)? .*pt/s", shown), shown


def test_padding_of_last_chunk_is_dropped(tmp_path):
    # 7 points in chunks of 3: the last chunk holds 1 point padded to 3.
    spec = {
        "mechanism": "laplace",
        "quantities": ["kl_pq"],
        "grid": {"epsilon": [0.25 * k for k in range(1, 8)]},
    }
    sweep(spec, tmp_path / "p", chunk_size=3, quiet=True)
    with np.load(tmp_path / "p" / "chunks" / "000002.npz") as z:
        assert z["kl_pq"].shape == (1,)
    eps = np.array([0.25 * k for k in range(1, 8)])
    want = eps + np.expm1(-eps)  # KL of Laplace(0, 1/eps) vs Laplace(1, 1/eps) = t - 1 + e^-t
    np.testing.assert_allclose(load_sweep(tmp_path / "p").values["kl_pq"], want, rtol=1e-12)


# --------------------------------------------------------------------------- refusals


def test_different_spec_same_dir_is_refused(tmp_path):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0]}}
    sweep(spec, tmp_path / "d", quiet=True)
    other = dict(spec, grid={"epsilon": [1.0, 3.0]})
    with pytest.raises(ValueError, match=r"different spec \(grid parameter 'epsilon' differs\)"):
        sweep(other, tmp_path / "d", quiet=True)
    with pytest.raises(ValueError, match="quantities differs"):
        sweep(dict(spec, quantities=["kl_pq"]), tmp_path / "d", quiet=True)
    with pytest.raises(ValueError, match="chunk_size=2, not 1"):
        sweep(spec, tmp_path / "d", chunk_size=1, quiet=True)
    assert load_sweep(tmp_path / "d").values["tv"].shape == (2,)


def test_foreign_or_busy_directory_is_refused(tmp_path):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}}
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds no jaxdp sweep"):
        sweep(spec, tmp_path / "f", quiet=True)
    with Store(tmp_path / "b").locked(), pytest.raises(ValueError, match="in use"):
        sweep(spec, tmp_path / "b", quiet=True)
    with pytest.raises(FileNotFoundError, match="has not finished"):
        load_sweep(tmp_path / "b")


def test_float64_needs_x64(tmp_path):
    jax.config.update("jax_enable_x64", False)
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}}
    try:
        with pytest.raises(ValueError, match="jax_enable_x64"):
            sweep(spec, tmp_path / "x", quiet=True)
    finally:
        jax.config.update("jax_enable_x64", True)
    assert not (tmp_path / "x").exists()


BAD_SPECS = [
    ({"mechanism": "lapalce"}, "unknown mechanism 'lapalce'"),
    ({"grid": {"epsilon": [1.0], "shift": [1.0]}}, "has no parameter 'shift'"),
    ({"grid": {"sensitivity": 1.0, "scale": 2.0, "epsilon": 1.0}}, "rejects the grid"),
    ({"quantities": ["chernof"]}, "unknown quantity 'chernof'"),
    ({"quantities": ["eq99"]}, "unknown quantity 'eq99'"),
    ({"quantities": ["eq34"]}, "quantity 'eq34' needs 'shift', a parameter of adversarial_laplace"),
    ({"quantities": ["eq40"]}, "quantity 'eq40' needs 'delta': give it in \\[grid\\]"),
    ({"grid": {"epsilon": [1.0], "delta": [0.1]}}, "has no parameter 'delta'"),
    ({"quantities": ["eq40"], "grid": {"epsilon": [1.0], "delta": [2.0]}}, "delta must be"),
    ({"mechanism": "gaussian", "grid": {"sigma": [1.0]}, "quantities": ["eq22"]}, "needs epsilon"),
    (
        {"mechanism": "randomized_response", "grid": {"epsilon": [1.0], "k": [2, 3]}},
        "grid parameter 'k' cannot vary",
    ),
    ({"grid": {"epsilon": [1.0, -1.0]}}, "rejects the grid: epsilon must be positive"),
    ({"quantities": ["tv", "tv"]}, "quantity 'tv' is listed twice"),
    ({"quantities": ["renyi"]}, "'renyi' needs renyi_orders"),
    ({"quantities": ["renyi_x"]}, "quantity 'renyi_x'"),
    ({"quantities": ["renyi_-1"]}, "order must be positive"),
    ({"grid": {"epsilon": {"linspace": [0.1, 1.0]}}}, "linspace needs \\[start, stop, num\\]"),
    ({"grid": {"epsilon": {"logspace": [0, 1, 0]}}}, "num must be a positive integer"),
    ({"grid": {"epsilon": {"range": [0, 1]}}}, "grid parameter 'epsilon' must be"),
    ({"grid": {"epsilon": []}}, "'epsilon' is an empty list"),
    ({"grid": {"epsilon": ["a"]}}, "must be a number"),
    ({"grid": {"sensitivity": [1.0]}}, None),  # laplace itself refuses: no epsilon nor scale
    ({"dtype": "float16"}, "dtype must be one of"),
    ({"chunk_size": 0}, "chunk_size must be a positive integer"),
    ({"colour": "blue"}, "unknown key 'colour'"),
    # too large: refused before anything is allocated (np.linspace of 1e12 points, or a
    # done-mask of 1e16 chunks, ended in a MemoryError traceback; a huge integer in
    # "Python int too large to convert to C long")
    ({"grid": {"epsilon": {"linspace": [1, 2, 10**12]}}}, "has 1000000000000 points, more"),
    (
        {
            "mechanism": "adversarial_laplace",
            "grid": {name: {"linspace": [1, 2, 10**5]} for name in ("epsilon", "shift", "theta")}
            | {"sensitivity": {"linspace": [1, 2, 10**4]}},
        },
        r"the grid has 1e\+19 points",
    ),
    ({"grid": {"epsilon": [1, 10**20]}}, "outside the 64-bit integer range"),
]


@pytest.mark.parametrize(("change", "message"), BAD_SPECS)
def test_spec_errors_are_one_line_and_early(change, message, tmp_path):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}}
    spec.update(change)
    with pytest.raises(ValueError, match=message) as info:
        sweep(spec, tmp_path / "never", quiet=True)
    assert "\n" not in str(info.value) and str(info.value).startswith("spec: ")
    assert not (tmp_path / "never").exists()


def test_missing_required_parameter(tmp_path):
    spec = {
        "mechanism": "adversarial_laplace",
        "quantities": ["tv"],
        "grid": {"epsilon": [1.0], "shift": 1.0},
    }
    with pytest.raises(ValueError, match="lacks parameter 'theta'"):
        parse_spec(spec)


def test_cli_reports_spec_error_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC_TOML.replace('"eq35"', '"eq53"'))
    assert cli.main(["sweep", str(bad), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxdp: error: spec: unknown quantity 'eq53'") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
    notoml = tmp_path / "x.toml"
    notoml.write_text("mechanism = \n")
    assert cli.main(["sweep", str(notoml), "--out", str(tmp_path / "o")]) == 2
    assert "is not valid TOML" in capsys.readouterr().err


def test_cli_dry_run(spec_file, tmp_path, capsys):
    assert cli.main(["sweep", str(spec_file), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    assert "16 x 3 x 5 = 240 points" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()


def test_manifest_is_plain_json(clean):
    text = json.dumps(clean.manifest)
    assert '"chunk_size": 16' in text and '"n_chunks": 15' in text

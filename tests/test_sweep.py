"""Tests of jaxdp.sweep: spec validation, chunked/sharded evaluation, resume after SIGKILL.

Multi-device runs use ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` in a subprocess
(the flag must be set before JAX starts). Every subprocess runs the real CLI,
``python -m jaxdp.cli sweep``; ``JAXDP_SWEEP_TEST_DELAY`` slows it down so that it can be killed
mid-run.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
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
    flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env["XLA_FLAGS"] = flags.strip()
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


@pytest.fixture(scope="module")
def four(spec_file, cache_dir, tmp_path_factory) -> Path:
    """An uninterrupted 4-device CLI run of SPEC (with --csv), shared like ``clean``."""
    shared = _session_dir(tmp_path_factory)
    out = shared / "jaxdp-sweep-four"
    with open(shared / "jaxdp-sweep-four.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "results.npz").exists():
            _run_cli(spec_file, out, 4, cache_dir, "--csv")
    return out


def _assert_same(a, b, *, rtol: float = 0.0) -> None:
    """Same layout and coordinates; values bit for bit (``rtol=0``) or to ``rtol``."""
    assert list(a.values) == list(b.values) and list(a.coords) == list(b.coords)
    for name in a.coords:
        np.testing.assert_array_equal(a.coords[name], b.coords[name], err_msg=name)
    for name in a.values:
        assert a.values[name].dtype == b.values[name].dtype
        if rtol == 0.0 or a.values[name].dtype == bool:
            np.testing.assert_array_equal(a.values[name], b.values[name], err_msg=name)
        else:
            np.testing.assert_allclose(
                a.values[name], b.values[name], rtol=rtol, atol=0, err_msg=name
            )


# Across device counts the per-device program is compiled for a different mesh (and, unless
# the chunk fits, a different block length), and XLA may vectorise it differently: results
# agree to rounding, not bit for bit (QA saw ~5e-16 relative for geometric/Gaussian TV and
# randomized-response Chernoff; the specs here happen to agree exactly today). Only a resume
# on the same devices is promised to be bit-identical.
ACROSS_DEVICES_RTOL = 1e-14


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
    assert clean.manifest["jax_version"] == jax.__version__
    assert clean.manifest["jaxlib_version"] == jaxlib.__version__


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


def test_float32_sweep_stores_fixed_parameters_in_float32(tmp_path):
    # the fixed parameters were stored float64 beside float32 axes and values
    spec = {
        "mechanism": "laplace",
        "quantities": ["tv"],
        "dtype": "float32",
        "grid": {"epsilon": [0.5, 1.0], "sensitivity": 0.1},
    }
    sweep(spec, tmp_path / "f32", quiet=True)
    res = load_sweep(tmp_path / "f32")
    assert res.coords["epsilon"].dtype == res.values["tv"].dtype == np.float32
    assert res.fixed["sensitivity"].dtype == np.float32
    assert res.fixed["sensitivity"] == np.float32(0.1)


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
    csv = (tmp_path / "f32" / "results.csv").read_text()
    # a chunk file damaged after the run: the CSV from results.npz too (it said
    # "chunks/000001.npz is damaged (This file contains pickled (object) data ...); delete it")
    (tmp_path / "f32" / "chunks" / "000001.npz").write_bytes(b"garbage")
    (tmp_path / "f32" / "results.csv").unlink()
    sweep(spec, tmp_path / "f32", quiet=True, csv=True)
    assert (tmp_path / "f32" / "results.csv").read_text() == csv
    # chunk files deleted (README): the CSV again, from results.npz (it said "chunks/0.npz is
    # damaged ... run the sweep again")
    shutil.rmtree(tmp_path / "f32" / "chunks")
    (tmp_path / "f32" / "results.csv").unlink()
    sweep(spec, tmp_path / "f32", quiet=True, csv=True)
    assert (tmp_path / "f32" / "results.csv").read_text() == csv


def test_csv_keeps_integer_axis_values_beyond_2_53(tmp_path):
    # the CSV table went through float64: 2**53 + 1 was written as 9007199254740992 (and
    # 2**62 + 1 as 4611686018427387904), values results.npz holds exactly
    ints = [1, 2**53 + 1, 2**62 + 1]
    grid = {"sensitivity": ints, "epsilon": 1.0}
    sweep({"mechanism": "geometric", "quantities": ["tv"], "grid": grid}, tmp_path / "g", csv=True)
    np.testing.assert_array_equal(load_sweep(tmp_path / "g").coords["sensitivity"], ints)
    rows = (tmp_path / "g" / "results.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == ints


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


def test_multidevice_equals_single_device_to_rounding(clean, four):
    res = load_sweep(four)
    assert res.manifest["devices"]["count"] == 4
    _assert_same(res, clean, rtol=ACROSS_DEVICES_RTOL)
    assert (four / "results.csv").exists()


def test_sigkill_then_resume_equals_clean_run(spec_file, four, cache_dir, tmp_path):
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
    # same devices (4) and chunk size as the uninterrupted run: bit for bit
    _assert_same(load_sweep(out), load_sweep(four))


def test_two_processes_with_jax_distributed(tmp_path, cache_dir):
    """Two processes x 2 CPU devices after jax.distributed.initialize == one device (to
    rounding: a different device count, see ACROSS_DEVICES_RTOL)."""
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
    _assert_same(both, load_sweep(tmp_path / "one"), rtol=ACROSS_DEVICES_RTOL)


def test_rerun_of_finished_sweep_does_nothing(tmp_path):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0]}}
    first = sweep(spec, tmp_path / "s", quiet=True)
    stamp = (tmp_path / "s" / "results.npz").stat().st_mtime_ns
    again = sweep(spec, tmp_path / "s", quiet=True)
    assert (first.computed, again.computed) == (1, 0)
    assert (tmp_path / "s" / "results.npz").stat().st_mtime_ns == stamp


def test_integer_and_float_axes_of_one_spec_in_one_process(tmp_path):
    # [1, 2] and [1.0, 2.0] are one spec (one digest), but the axis is int64 in the first and
    # float64 in the second: the in-process cache of compiled calls handed the second sweep
    # the first one's executable (TypeError: "compiled with int64[64] and called with
    # float64[64]")
    grid = {"epsilon": 1.0}
    ints = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"sensitivity": [1, 2], **grid}}
    floats = dict(ints, grid={"sensitivity": [1.0, 2.0], **grid})
    sweep(ints, tmp_path / "i", quiet=True)
    sweep(floats, tmp_path / "f", quiet=True)
    a, b = load_sweep(tmp_path / "i"), load_sweep(tmp_path / "f")
    assert a.coords["sensitivity"].dtype == np.int64
    assert b.coords["sensitivity"].dtype == np.float64
    np.testing.assert_array_equal(a.values["tv"], b.values["tv"])


def test_float32_sweep_computes_an_integer_axis_in_float32(tmp_path):
    # the axis stayed int64 under x64 and the mechanism promoted it to float64: the points
    # were computed in float64 and rounded, unlike those of [1.0, 2.0], the same spec (one
    # digest), and unlike the float32 pair's (kl_pq at epsilon = 2: 1.1353353 vs 1.1353352)
    base = {"mechanism": "laplace", "quantities": ["kl_pq"], "dtype": "float32"}
    sweep(dict(base, grid={"epsilon": [1, 2]}), tmp_path / "i", quiet=True)
    sweep(dict(base, grid={"epsilon": [1.0, 2.0]}), tmp_path / "f", quiet=True)
    a, b = load_sweep(tmp_path / "i"), load_sweep(tmp_path / "f")
    assert a.coords["epsilon"].dtype == np.int64 and a.values["kl_pq"].dtype == np.float32
    np.testing.assert_array_equal(a.values["kl_pq"], b.values["kl_pq"])
    want = jd.kl(*mechanisms.laplace(epsilon=np.float32(2)))
    assert a.values["kl_pq"][1] == want
    with pytest.raises(ValueError, match=r"^spec: grid parameter 'epsilon': 16777217 is not exact"):
        sweep(dict(base, grid={"epsilon": [1, 2**24 + 1]}), tmp_path / "x", quiet=True)
    # a fixed integer too (its points were those of 16777216, stored beside 16777217)
    grid = {"epsilon": [1.0], "sensitivity": 2**24 + 1}
    with pytest.raises(ValueError, match=r"^spec: grid parameter 'sensitivity': 16777217 is not"):
        sweep(dict(base, grid=grid), tmp_path / "x", quiet=True)
    assert not (tmp_path / "x").exists()


def test_csv_path_that_is_a_directory_is_refused_before_any_work(tmp_path):
    # was OSError's "[Errno 21] Is a directory: '.../.results.csv.tmp.123' -> ...", raised
    # when the CSV was written, after every chunk had been computed
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0]}}
    out = tmp_path / "s"
    sweep(spec, out, quiet=True)
    (out / "results.npz").unlink()
    for chunk in (out / "chunks").iterdir():
        chunk.unlink()
    (out / "results.csv").mkdir()
    with pytest.raises(ValueError, match=r"results.csv is a directory, not a CSV file; remove it$"):
        sweep(spec, out, quiet=True, csv=True)
    assert not any((out / "chunks").iterdir())


def test_chunks_path_that_is_a_file_is_refused_in_one_line(tmp_path):
    # was mkdir's "[Errno 17] File exists: '.../chunks'"
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0]}}
    out = tmp_path / "s"
    sweep(spec, out, quiet=True)
    (out / "results.npz").unlink()
    shutil.rmtree(out / "chunks")
    (out / "chunks").write_text("")
    with pytest.raises(ValueError, match=r"chunks is a file, not the chunk directory; remove it$"):
        sweep(spec, out, quiet=True)


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
    with pytest.raises(
        ValueError,
        match=r"different spec \(grid parameter 'epsilon' differs: values \[1.0, 2.0\] "
        r"there, values \[1.0, 3.0\] here\)",
    ):
        sweep(other, tmp_path / "d", quiet=True)
    with pytest.raises(ValueError, match="quantities differs"):
        sweep(dict(spec, quantities=["kl_pq"]), tmp_path / "d", quiet=True)
    with pytest.raises(ValueError, match=r"chunk_size=2, not 1; resume without a chunk size"):
        sweep(spec, tmp_path / "d", chunk_size=1, quiet=True)
    # an axis is evaluated in floating point: integer values are the same sweep (resumed)
    assert sweep(dict(spec, grid={"epsilon": [1, 2]}), tmp_path / "d", quiet=True).computed == 0
    # so is a fixed value: 1 and 1.0 are one sweep (1.0 then 1 was refused, QA pass) ...
    fixed = dict(spec, grid={"epsilon": [1.0], "sensitivity": 1.0})
    sweep(fixed, tmp_path / "f", quiet=True)
    as_int = dict(fixed, grid={"epsilon": [1.0], "sensitivity": 1})
    assert sweep(as_int, tmp_path / "f", quiet=True).computed == 0
    # ... also with a manifest written before that, which held the integer as written
    path = tmp_path / "f" / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["spec"]["grid"][1] == {"name": "sensitivity", "value": 1.0}
    manifest["spec"]["grid"][1]["value"] = 1
    text = json.dumps(manifest["spec"], sort_keys=True, separators=(",", ":"))
    manifest["spec_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    path.write_text(json.dumps(manifest))
    assert sweep(as_int, tmp_path / "f", quiet=True).computed == 0
    assert sweep(fixed, tmp_path / "f", quiet=True).computed == 0
    # and the refusal of another value names the parameter (it said only "spec differs")
    with pytest.raises(ValueError, match=r"'sensitivity' differs: 1 there, 2.0 here"):
        sweep(dict(fixed, grid={"epsilon": [1.0], "sensitivity": 2}), tmp_path / "f", quiet=True)
    assert load_sweep(tmp_path / "d").values["tv"].shape == (2,)


def test_foreign_or_busy_directory_is_refused(tmp_path):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}}
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds no jaxdp sweep"):
        sweep(spec, tmp_path / "f", quiet=True)
    assert os.listdir(tmp_path / "f") == ["notes.txt"]  # (a stray .lock was left there)
    with Store(tmp_path / "b").locked(), pytest.raises(ValueError, match="in use"):
        sweep(spec, tmp_path / "b", quiet=True)
    with pytest.raises(ValueError, match=r"notes.txt is a file, not a directory; use a new"):
        sweep(spec, tmp_path / "f" / "notes.txt", quiet=True)  # (was "[Errno 17] File exists")
    # no manifest: nothing was ever started there (it said "has not finished; run it again
    # to resume", also for a directory that does not exist: QA pass)
    for d in ("b", "f", "nowhere"):
        with pytest.raises(FileNotFoundError, match=r"^no sweep in .*run jaxdp sweep there"):
            load_sweep(tmp_path / d)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="has not finished"):
        load_sweep(tmp_path / "b")
    # (a pathlib TypeError, and "<file>/results.npz ... has not finished")
    with pytest.raises(TypeError, match=r"^out_dir must be a path, got NoneType"):
        load_sweep(None)
    with pytest.raises(NotADirectoryError, match="is a file, not a sweep directory"):
        load_sweep(tmp_path / "f" / "notes.txt")


def test_grid_larger_than_the_free_disk_space_is_refused(tmp_path, monkeypatch):
    # 2**21 points x 8 bytes, twice (chunk files, then results.npz), on a disk with 10 MB
    # free (a grid of 2**48 points started and wrote chunk files until the disk was full)
    spec = {
        "mechanism": "laplace",
        "quantities": ["tv"],
        "grid": {"epsilon": {"linspace": [1, 2, 2**20]}, "sensitivity": [1.0, 2.0]},
    }
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=10**7))
    with pytest.raises(ValueError, match=r"needs 0\.0336 GB more disk space .* 0\.01 GB are free"):
        sweep(spec, tmp_path / "big", quiet=True)
    assert not (tmp_path / "big").exists()  # (an empty "big" holding a .lock was left)
    # a resumed sweep counts its finished chunk files as written
    small = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0]}}
    sweep(small, tmp_path / "small", quiet=True)
    (tmp_path / "small" / "results.npz").unlink()
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=16))
    assert sweep(small, tmp_path / "small", quiet=True).computed == 0


def test_refused_or_interrupted_sweep_leaves_the_directory_as_it_was(tmp_path, monkeypatch):
    # refused after the directory was prepared (here: the disk space), a sweep left a new,
    # empty --out holding a .lock (and the directories above it); an existing directory keeps
    # only what it held, and the lock is released: the same directory runs a sweep after
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0]}}
    usage = shutil.disk_usage(tmp_path)
    with monkeypatch.context() as m:
        m.setattr(shutil, "disk_usage", lambda path: usage._replace(free=0))
        with pytest.raises(ValueError, match="more disk space"):
            sweep(spec, tmp_path / "new" / "deeper", quiet=True)
        assert os.listdir(tmp_path) == []
        (tmp_path / "empty").mkdir()
        (tmp_path / "stale").mkdir()
        (tmp_path / "stale" / ".lock").write_text("")  # (not ours: kept)
        for d in ("empty", "stale"):
            with pytest.raises(ValueError, match="more disk space"):
                sweep(spec, tmp_path / d, quiet=True)
        assert os.listdir(tmp_path / "empty") == []
        assert os.listdir(tmp_path / "stale") == [".lock"]
    # Ctrl-C before the manifest: the same; after it: the sweep stays, unlocked, to resume
    with monkeypatch.context() as m:
        m.setattr(Store, "prepare", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            sweep(spec, tmp_path / "new", quiet=True)
    assert sorted(os.listdir(tmp_path)) == ["empty", "stale"]
    with monkeypatch.context() as m:
        m.setattr(Store, "write_chunk", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            sweep(spec, tmp_path / "empty", chunk_size=1, quiet=True)
    assert sorted(os.listdir(tmp_path / "empty")) == [".lock", "chunks", "manifest.json"]
    assert sweep(spec, tmp_path / "empty", quiet=True).computed == 2


def test_chunk_size_beyond_the_available_memory_is_refused(tmp_path, monkeypatch, capsys):
    # a --chunk-size of 10**12 on a grid of 2**31 points ran out of memory without a message
    # (chunks are held whole in host memory): refused before any work, naming its source,
    # with the largest chunk size that fits; here 256 points of one float64 (3 copies) fit
    runner = sys.modules["jaxdp.sweep.runner"]

    monkeypatch.setattr(runner, "_available_memory", lambda: 8 * 3 * 256)
    spec = {
        "mechanism": "laplace",
        "quantities": ["tv"],
        "grid": {"epsilon": {"linspace": [1, 2, 1000]}},
    }
    big = r"a chunk of 1,000 points needs about 2.4e-05 GB .* at most 256 points"
    with pytest.raises(ValueError, match=rf"^chunk_size \(--chunk-size\) 1,000,000,000,000: {big}"):
        sweep(spec, tmp_path / "o", chunk_size=10**12, quiet=True)
    with pytest.raises(ValueError, match=rf"^spec: chunk_size 1,000: {big}"):
        sweep(dict(spec, chunk_size=1000), tmp_path / "o", quiet=True)
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match=r"at most 76 points"):  # (results.csv: 2 cells a point)
        sweep(spec, tmp_path / "o", chunk_size=100, csv=True, quiet=True)
    toml = tmp_path / "s.toml"
    toml.write_text('mechanism = "laplace"\nquantities = ["tv"]\n[grid]\nepsilon = [1.0, 2.0]\n')
    argv = ["sweep", str(toml), "--out", str(tmp_path / "o"), "--chunk-size", str(10**12)]
    monkeypatch.setattr(runner, "_available_memory", lambda: 8)
    assert cli.main(argv) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith("jaxdp: error: chunk_size (--chunk-size) 1,000,000,000,000: a chunk")
    assert not (tmp_path / "o").exists()
    # a resumed sweep keeps its manifest's chunk size: that one is checked (not the default)
    monkeypatch.setattr(runner, "_available_memory", lambda: 10**9)
    sweep(toml, tmp_path / "o", chunk_size=1, quiet=True)
    (tmp_path / "o" / "results.npz").unlink()
    monkeypatch.setattr(runner, "_available_memory", lambda: 24)
    assert sweep(toml, tmp_path / "o", quiet=True).computed == 0
    monkeypatch.setattr(runner, "_available_memory", lambda: 8)
    with pytest.raises(
        ValueError,
        match=r"manifest.json: chunk_size 1: a chunk of 1 point .* at most 1 point in a new",
    ):
        sweep(toml, tmp_path / "o", quiet=True)


def test_dry_run_refuses_a_chunk_size_the_run_refuses(tmp_path, monkeypatch, capsys):
    # (it said "... 1 chunk(s) of 8" with too little memory for them, which the run refuses)
    spec = tmp_path / "s.toml"
    spec.write_text(
        'mechanism = "laplace"\nquantities = ["tv"]\n[grid]\nepsilon = [1, 2, 3, 4, 5, 6, 7, 8]\n'
    )
    # (one float64 quantity, 3 copies: 2 points fit)
    monkeypatch.setattr(sys.modules["jaxdp.sweep.runner"], "_available_memory", lambda: 3 * 8 * 2)
    argv = ["sweep", str(spec), "--dry-run", "--chunk-size", str(10**12)]
    assert cli.main(argv) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert re.match(
        r"jaxdp: error: chunk_size \(--chunk-size\) 1,000,000,000,000: a chunk of 8 ", err
    )
    assert cli.main([*argv[:-1], "2"]) == 0
    assert "4 chunk(s) of 2" in capsys.readouterr().out


def test_parsed_spec_with_a_bad_chunk_size_is_refused(tmp_path):
    # a SweepSpec is public and frozen: dataclasses.replace(spec, chunk_size=-5) ran a sweep of
    # -12 chunks ("computed=-12") and wrote a results.npz without values; 2.5 ran chunks of 2
    import dataclasses

    spec = parse_spec({"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}})
    for bad in (-5, 0, 2.5, True):
        with pytest.raises(
            ValueError, match=rf"^spec: chunk_size must be a positive integer, got {bad!r}$"
        ):
            sweep(dataclasses.replace(spec, chunk_size=bad), tmp_path / "o", quiet=True)
    assert not (tmp_path / "o").exists()
    assert parse_spec(dataclasses.replace(spec, chunk_size=np.int64(3))).chunk_size == 3


def test_float64_needs_x64(tmp_path):
    jax.config.update("jax_enable_x64", False)
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}}
    try:
        with pytest.raises(ValueError, match="jax_enable_x64"):
            sweep(spec, tmp_path / "x", quiet=True)
    finally:
        jax.config.update("jax_enable_x64", True)
    assert not (tmp_path / "x").exists()


def test_integer_axis_beyond_int32_without_x64(tmp_path):
    # a float32 sweep without x64: 2**31 + 1 wrapped to -2**31 + 1, and the mechanism was
    # blamed for it ("sensitivity must be positive and finite, got -2147483647.0"); the axis
    # is float32 now, which does not hold 2**31 + 1
    spec = {
        "mechanism": "geometric",
        "quantities": ["tv"],
        "dtype": "float32",
        "grid": {"epsilon": [1.0], "sensitivity": [1, 2**31 + 1]},
    }
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(
            ValueError,
            match=r"^spec: grid parameter 'sensitivity': 2147483649 is not exact in float32 "
            r"\(it would be 2147483648\); use dtype float64$",
        ):
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
    # (a formula's refusal: was "mechanism 'laplace' rejects the grid: delta must be ...")
    (
        {"quantities": ["eq40"], "grid": {"epsilon": [1.0], "delta": [2.0]}},
        "^spec: quantity 'eq40' rejects the grid: delta must be",
    ),
    ({"mechanism": "gaussian", "grid": {"sigma": [1.0]}, "quantities": ["eq22"]}, "needs epsilon"),
    *[
        (
            {"mechanism": "randomized_response", "grid": {"epsilon": [1.0], "k": k}},
            "grid parameter 'k' cannot vary",
        )
        # (the last two were "k must be an integer >= 2, got array([2.])")
        for k in ([2, 3], [2, 3.5], [2.0, 3.0])
    ],
    ({"grid": {"epsilon": [1.0, -1.0]}}, "rejects the grid: epsilon must be positive"),
    ({"quantities": ["tv", "tv"]}, "quantity 'tv' is listed twice"),
    ({"quantities": ["renyi"]}, "'renyi' needs renyi_orders"),
    ({"quantities": ["renyi_x"]}, "quantity 'renyi_x'"),
    ({"quantities": ["renyi_-1"]}, "order must be positive"),
    # (was "must be positive": inf is, but jaxdp.renyi takes finite orders only)
    (
        {"quantities": ["renyi_inf"]},
        "quantity 'renyi_inf': the Renyi order must be positive and finite",
    ),
    ({"grid": {"epsilon": {"linspace": [0.1, 1.0]}}}, "linspace needs \\[start, stop, num\\]"),
    ({"grid": {"epsilon": {"logspace": [0, 1, 0]}}}, "num must be a positive integer"),
    ({"grid": {"epsilon": {"logspace": [0, 308.3, 2]}}}, "logspace exponents out of float"),
    # up to 1.6e308, finite: was refused as "logspace exponents out of float range"
    ({"grid": {"epsilon": {"logspace": [0, 308.2, 2]}}}, "noise scale sensitivity/epsilon"),
    ({"grid": {"epsilon": {"range": [0, 1]}}}, "grid parameter 'epsilon' must be"),
    # (was taken as the fixed value 3)
    ({"grid": {"epsilon": {"values": 3}}}, "grid parameter 'epsilon': values needs a list"),
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
    # 2e12 values per point: refused from shapes alone (was a RESOURCE_EXHAUSTED traceback)
    (
        {"mechanism": "randomized_response", "grid": {"epsilon": [1.0], "k": 10**12}},
        r"with k = 1000000000000 holds 2e\+12 values per grid point",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD_SPECS)
def test_spec_errors_are_one_line_and_early(change, message, tmp_path):
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}}
    spec.update(change)
    with pytest.raises(ValueError, match=message) as info:
        sweep(spec, tmp_path / "never", quiet=True)
    assert "\n" not in str(info.value) and str(info.value).startswith("spec: ")
    assert not (tmp_path / "never").exists()


def test_bad_out_dir_or_grid_name_is_named(tmp_path, monkeypatch):
    # out_dir 5 or None: pathlib's "expected str, bytes or os.PathLike object, not int";
    # out_dir "": the sweep went into the current directory; a grid name 3: re's "expected
    # string or bytes-like object, got 'int'"
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0]}}
    for out in (5, None):
        with pytest.raises(TypeError, match="out_dir must be a path"):
            sweep(spec, out, quiet=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="out_dir: empty path"):
        sweep(spec, "", quiet=True)
    with pytest.raises(ValueError, match="grid parameter names must be strings, got 3"):
        sweep(dict(spec, grid={"epsilon": [1.0], 3: 1.0}), tmp_path / "g", quiet=True)
    assert os.listdir(tmp_path) == []


def test_dict_spec_takes_numpy_values_and_tuples(tmp_path):
    # np.float32 / np.int64 scalars, numpy arrays and tuples were refused as "must be a number"
    # (or "a positive integer"); np.float64 alone passed, being a float
    plain = {
        "mechanism": "laplace",
        "quantities": ["tv", "kl_pq"],
        "chunk_size": 4,
        "grid": {"epsilon": [0.5, 1.0], "sensitivity": {"linspace": [1.0, 2.0, 3]}},
    }
    numpy = {
        "mechanism": "laplace",
        "quantities": ("tv", np.str_("kl_pq")),
        "chunk_size": np.int64(4),
        "grid": {
            "epsilon": np.asarray([0.5, 1.0], np.float32),
            "sensitivity": {"linspace": (np.float32(1), np.int32(2), np.int64(3))},
        },
    }
    assert parse_spec(numpy) == parse_spec(plain)
    # JAX arrays and scalars too (refused as "must be a number, got Array([0.5, 1.], ...)")
    grid = {"epsilon": jnp.asarray([0.5, 1.0]), "sensitivity": {"linspace": [1.0, jnp.int32(2), 3]}}
    assert parse_spec(dict(plain, grid=grid)) == parse_spec(plain)
    # and sweep's own chunk_size
    spec = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0, 3.0]}}
    assert sweep(spec, tmp_path / "n", chunk_size=np.int64(2), quiet=True).n_chunks == 2
    with pytest.raises(ValueError, match=r"chunk_size must be a positive integer, got np.True_"):
        sweep(spec, tmp_path / "b", chunk_size=np.bool_(True), quiet=True)
    with pytest.raises(ValueError, match="'epsilon' entry must be a number, got True"):
        parse_spec(dict(plain, grid={"epsilon": np.asarray([True])}))


def test_linspace_whose_span_overflows():
    # -1e308 .. 1e308: numpy's linspace warned twice (two more lines of stderr) and gave nan,
    # which the mechanism then rejected ("shift contains NaN")
    spec = {
        "mechanism": "adversarial_laplace",
        "quantities": ["tv"],
        "grid": {"epsilon": 1.0, "theta": 1.0, "shift": {"linspace": [-1e308, 1e308, 5]}},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shift = parse_spec(spec).grid.coords(np.float64)["shift"]
    np.testing.assert_array_equal(shift, [-1e308, -5e307, 0.0, 5e307, 1e308])


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
    # a file that is not UTF-8: the message named no file (QA pass)
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes(b"\xffmechanism = 'laplace'\n")
    assert cli.main(["sweep", str(latin1), "--out", str(tmp_path / "o")]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"jaxdp: error: spec: {latin1} is not UTF-8 text") and "\\xff" in err
    assert not (tmp_path / "o").exists()


def test_cli_dry_run(spec_file, tmp_path, capsys):
    assert cli.main(["sweep", str(spec_file), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    assert "16 x 3 x 5 = 240 points" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()


def test_manifest_is_plain_json(clean):
    text = json.dumps(clean.manifest)
    assert '"chunk_size": 16' in text and '"n_chunks": 15' in text


# --------------------------------------------------------------------------- damage, memory

# 3 points in chunks of 1 (as in test_progress_bar_only_on_a_terminal: the same compiled call)
TINY = {"mechanism": "laplace", "quantities": ["tv"], "grid": {"epsilon": [1.0, 2.0, 3.0]}}
TINY_TOML = """\
mechanism = "laplace"
quantities = ["tv"]
chunk_size = 1
[grid]
epsilon = [1.0, 2.0, 3.0]
"""


@pytest.fixture
def tiny(tmp_path) -> tuple[Path, Path, np.ndarray]:
    """A finished TINY sweep: (spec file, output directory, its tv values)."""
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY_TOML)
    out = tmp_path / "tiny"
    assert cli.main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    return spec, out, load_sweep(out).values["tv"]


def _damage_truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b""),  # was EOFError: a traceback
        _damage_truncate,  # was zipfile.BadZipFile: a traceback
        lambda p: p.write_bytes(np.random.default_rng(0).bytes(600)),  # was "pickled data"
        lambda p: np.savez(p, kl_pq=np.zeros(1)),  # no 'tv': was a KeyError, name only
        lambda p: np.savez(p, tv=np.zeros(1, dtype=object)),  # was "pickled (object) data"
    ],
    ids=["empty", "truncated", "random", "no-quantity", "objects"],
)
def test_damaged_chunk_is_computed_again(tiny, damage, capsys):
    spec, out, want = tiny
    (out / "results.npz").unlink()
    damage(out / "chunks" / "000001.npz")
    capsys.readouterr()
    assert cli.main(["sweep", str(spec), "--out", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    chunk = str(out / "chunks" / "000001.npz")
    assert err[0].startswith(f"jaxdp: note: {chunk} is unreadable (")
    assert err[0].endswith(": computing it again") and len(err) == 2  # (and "wrote ...")
    assert "1 chunk" not in err[1] and "already done" not in err[1]
    np.testing.assert_array_equal(load_sweep(out).values["tv"], want)
    assert Store(out).chunk_problem(Path(chunk), {"tv": 1}) is None


def _flip_last_byte(path: Path, member: str) -> None:
    """Change the last byte of an npz member's values (its header and the zip's intact)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    start = info.header_offset + 30 + name_len + extra_len
    data[start + info.compress_size - 1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_chunk_damaged_inside_its_data(tiny, capsys):
    # headers intact, one byte of the values changed: the CRC tells (was a BadZipFile traceback
    # when results.npz was written)
    spec, out, want = tiny
    (out / "results.npz").unlink()
    chunk = out / "chunks" / "000002.npz"
    _flip_last_byte(chunk, "tv.npy")
    with pytest.raises(ValueError) as e:  # (a chunk too large to check in full up front)
        Store(out).read_chunk(2, 3, "tv", 1)
    assert str(e.value) == (
        f"{chunk} is damaged (Bad CRC-32 for file 'tv.npy'); delete it and run the sweep "
        "again to recompute it"
    )
    capsys.readouterr()
    assert cli.main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"jaxdp: note: {chunk} is unreadable (Bad CRC-32 for file 'tv.npy'): computing it again"
    ]
    np.testing.assert_array_equal(load_sweep(out).values["tv"], want)


def test_damaged_results_npz_is_rebuilt(tiny, capsys):
    spec, out, want = tiny
    results = out / "results.npz"
    results.write_text("junk\n")
    with pytest.raises(ValueError, match=re.escape(f"{results} is damaged (not an npz file)")):
        load_sweep(out)
    capsys.readouterr()
    run = sweep(spec, out, quiet=True)  # was: "all chunks were already done", nothing fixed
    assert run.computed == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"jaxdp: note: {results} is unreadable (File is not a zip file): rebuilding it"]
    np.testing.assert_array_equal(load_sweep(out).values["tv"], want)
    # bytes changed inside the values, headers intact: passed as finished ("all chunks were
    # already done") while load_sweep refused it
    _flip_last_byte(results, "tv.npy")
    with pytest.raises(ValueError, match="Bad CRC-32"):
        load_sweep(out)
    capsys.readouterr()
    assert sweep(spec, out, quiet=True).computed == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"jaxdp: note: {results} is unreadable (Bad CRC-32 for file 'tv.npy'): rebuilding it"
    ]
    np.testing.assert_array_equal(load_sweep(out).values["tv"], want)
    # (that small a member is read whole with its header, which checks its CRC: a member
    # larger than the zip reader's buffer passed until every member's CRC was checked)
    store = Store(out.parent / "big")
    store.root.mkdir()
    big = store.results_path
    strings = {k: np.array([], dtype="<U1") for k in ("_axes", "_fixed", "_quantities")}
    np.savez(big, tv=np.zeros(10**5), **strings)
    assert store.results_problem(["tv"], (10**5,)) is None
    _flip_last_byte(big, "tv.npy")
    assert store.results_problem(["tv"], (10**5,)) == "Bad CRC-32 for file 'tv.npy'"
    # a hand-edited chunk or block size: one line naming the manifest (0 divided by zero,
    # -5 wrote empty arrays as the results, 'abc' failed in int() unnamed)
    manifest = out / "manifest.json"
    good = manifest.read_text()
    for key, value in (
        ("chunk_size", 0),
        ("chunk_size", -5),
        ("chunk_size", "abc"),
        ("block_size", None),
    ):
        manifest.write_text(json.dumps({**json.loads(good), key: value}))
        assert cli.main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line == (
            f"jaxdp: error: {manifest} is damaged ({key} is {value!r}, not a positive integer); "
            "restore it or use a new --out"
        )
    manifest.write_text(good)
    # damaged and its chunks gone: computed again
    results.write_bytes(results.read_bytes()[:-10])
    for p in (out / "chunks").iterdir():
        p.unlink()
    assert sweep(spec, out, quiet=True).computed == 3
    np.testing.assert_array_equal(load_sweep(out, mmap=True).values["tv"], want)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "Expecting value"),  # was json's message without the file name
        ("{not json", "Expecting property name"),
        ("[1, 2]", "a JSON list, not an object"),  # was an AttributeError traceback
    ],
)
def test_damaged_manifest_is_named_in_one_line(tmp_path, text, why, capsys):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY_TOML)
    out = tmp_path / "m"
    (out / "chunks").mkdir(parents=True)
    (out / "manifest.json").write_text(text)
    assert cli.main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"jaxdp: error: {out / 'manifest.json'} is damaged")
    assert why in err[0]
    (out / "results.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=re.escape(str(out / "manifest.json"))):
        load_sweep(out)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("x", "its manifest's spec is a JSON str"),  # was an AttributeError traceback
        ({"grid": "abc"}, "grid parameter 'epsilon' differs: absent there"),
        (
            {"grid": [1, {"name": "epsilon", "value": 1}]},
            "grid parameter 'epsilon' differs: 1 there, values [1.0, 2.0, 3.0] here",
        ),
    ],
)
def test_hand_edited_manifest_spec_is_refused_in_one_line(tmp_path, spec, why, capsys):
    from jaxdp.sweep.spec import parse_spec
    from jaxdp.sweep.storage import FORMAT

    spec_file = tmp_path / "tiny.toml"
    spec_file.write_text(TINY_TOML)
    out = tmp_path / "m"
    (out / "chunks").mkdir(parents=True)
    if isinstance(spec, dict):  # the rest of the spec as it is
        spec = {**parse_spec(str(spec_file)).canonical(), **spec}
    manifest = {"format": FORMAT, "spec_sha256": "0", "spec": spec}
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert cli.main(["sweep", str(spec_file), "--out", str(out), "--quiet"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("jaxdp: error: ") and f"a different spec ({why}" in err, err


def test_memory_does_not_grow_with_the_number_of_chunks(tmp_path, monkeypatch):
    """2**21 chunks of one point: the chunks to do are enumerated lazily (the old list of every
    remaining chunk index took ~45 bytes a chunk, ~90 MB here, 200 GB for 2**32 chunks)."""
    import tracemalloc

    from jaxdp.sweep import runner

    spec = {
        "mechanism": "laplace",
        "quantities": ["tv"],
        "grid": {
            "epsilon": {"linspace": [1, 2, 2**11]},
            "sensitivity": {"linspace": [1, 2, 2**10]},
        },
    }
    out = tmp_path / "big"
    seen: list[int] = []

    class Stop(Exception):
        pass

    def run_chunks(compiled, inputs, store, todo, *args):
        for index in todo:
            seen.append(index)
            if len(seen) == 4:
                raise Stop

    monkeypatch.setattr(runner, "_compile", lambda *args: None)  # nothing is computed
    monkeypatch.setattr(runner, "_run_chunks", run_chunks)
    with pytest.raises(Stop):  # (creates the directory)
        sweep(spec, out, chunk_size=1, quiet=True)
    store = Store(out)
    for i in (0, 1, 2, 5):  # finished chunks are skipped
        store.write_chunk(i, 2**21, {"tv": np.zeros(1)})
    seen.clear()
    tracemalloc.start()
    try:
        with pytest.raises(Stop):
            sweep(spec, out, quiet=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen == [3, 4, 6, 7]
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB"


# --------------------------------------------------------------------------- --distributed


@pytest.fixture
def initialize(monkeypatch):
    """Stands in for jax.distributed.initialize: records its keywords, raises what it is given."""
    calls: list[dict] = []
    raises: list[Exception] = []

    def fake(**kwargs):
        calls.append(kwargs)
        if raises:
            raise raises[0]

    monkeypatch.setattr(jax.distributed, "initialize", fake)
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    return calls, raises


def _distributed(tmp_path, *flags: str) -> list[str]:
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY_TOML)
    return ["sweep", str(spec), "--out", str(tmp_path / "d"), "--quiet", "--distributed", *flags]


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        # were: IndexError traceback, IndexError traceback, a segfault (exit 139), JAX's error
        (["--coordinator", "localhost"], None, "--coordinator must be HOST:PORT"),
        ([], "nohost", "JAX_COORDINATOR_ADDRESS must be HOST:PORT"),
        (["--coordinator", "localhost:abc"], None, "got 'localhost:abc'"),
        (["--coordinator", "localhost:70000"], None, "port from 1 to 65535"),
        (["--coordinator", "h:1", "--num-processes", "2", "--process-id", "2"], None, "less than"),
        (["--init-timeout", "0"], None, "--init-timeout must be a positive integer"),
    ],
)
def test_distributed_bad_address_is_one_line(
    tmp_path, initialize, monkeypatch, capsys, flags, env, message
):
    calls, _ = initialize
    if env is not None:
        monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", env)
    assert cli.main(_distributed(tmp_path, *flags)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxdp: error: ") and message in err[0], err
    assert calls == []  # refused before JAX saw it
    assert not (tmp_path / "d").exists()


def test_distributed_bad_arguments_are_refused_before_initialize(tmp_path, initialize, capsys):
    # a process other than 0 waited for the coordinator, up to --init-timeout seconds, before
    # it said that the spec did not exist, --chunk-size was 0 or --out was missing
    calls, _ = initialize
    flags = ["--coordinator", "127.0.0.1:1", "--num-processes", "2", "--process-id", "1"]
    argv = _distributed(tmp_path, *flags, "--init-timeout", "1")
    missing = [*argv[:1], str(tmp_path / "nope.toml"), *argv[2:]]
    for bad, message in (
        ([*argv, "--chunk-size", "0"], "--chunk-size must be positive, got 0"),
        (missing, "nope.toml' does not exist"),
        ([a for a in argv if a not in ("--out", str(tmp_path / "d"))], "--out DIR is required"),
    ):
        assert cli.main(bad) == 2
        (err,) = capsys.readouterr().err.strip().splitlines()
        assert message in err
    assert calls == []


def test_distributed_unreachable_coordinator_times_out(tmp_path, initialize, capsys):
    # JAX would retry for 300 s, then abort the process with a C++ stack trace
    calls, _ = initialize
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # (closed again: nothing listens there)
    flags = ["--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", "1"]
    t0 = time.monotonic()
    assert cli.main(_distributed(tmp_path, *flags, "--init-timeout", "1")) == 2
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"jaxdp: error: --coordinator 127.0.0.1:{port}: no coordinator (process 0) answered "
        "within 1 s; start process 0 first, check the address, or raise --init-timeout"
    ]
    assert calls == []


def test_distributed_initialize_errors_are_one_line(tmp_path, initialize, capsys):
    calls, raises = initialize
    raises.append(ValueError("coordinator_address should be defined."))
    assert cli.main(_distributed(tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--distributed: no cluster found" in err[0]
    assert "--coordinator HOST:PORT" in err[0]
    assert calls == [{"initialization_timeout": 120}]
    raises[0] = RuntimeError("distributed.initialize should only be called once.")
    flags = ["--coordinator", "127.0.0.1:1234", "--num-processes", "1", "--process-id", "0"]
    assert cli.main(_distributed(tmp_path, *flags, "--init-timeout", "7")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "jaxdp: error: --distributed: jax.distributed.initialize failed: "
        "distributed.initialize should only be called once."
    ]
    assert calls[-1] == {
        "coordinator_address": "127.0.0.1:1234",
        "num_processes": 1,
        "process_id": 0,
        "initialization_timeout": 7,
    }


def test_huge_support_is_refused_before_allocating(tmp_path, capsys):
    # randomized response with k = 10**12: a dry run allocated 8 TB (RESOURCE_EXHAUSTED traceback)
    spec = tmp_path / "rr.toml"
    spec.write_text(
        'mechanism = "randomized_response"\nquantities = ["chernoff"]\n[grid]\n'
        "epsilon = [1.0, 2.0]\nk = 1000000000000\n"
    )
    assert cli.main(["sweep", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "jaxdp: error: spec: mechanism 'randomized_response' with k = 1000000000000 holds "
        "2e+12 values per grid point, more than the 16777216 (2**24) a sweep allows: use "
        "smaller values"
    ]


def test_value_checks_hold_a_bounded_number_of_values(monkeypatch):
    # every value of an axis was checked in one eager call: axis length x 2k values (16 GB for
    # randomized response with k = 1000 on an axis of 10**6 points, before any work)
    from jaxdp.sweep import kernel as kernel_mod

    monkeypatch.setattr(kernel_mod, "CHECK_VALUES", 64, raising=False)
    spec = parse_spec(
        {
            "mechanism": "randomized_response",
            "quantities": ["tv"],
            "grid": {"epsilon": {"linspace": [0.0, 3.0, 20]}, "k": 4},
        }
    )
    kernel = kernel_mod.make_kernel(spec)
    seen = []
    light = kernel.light
    kernel.light = lambda params: seen.append(len(params["epsilon"])) or light(params)
    kernel_mod.check_kernel(spec, kernel)
    assert seen[0] == 1 and sum(seen[1:]) == 20 and max(seen) * 8 <= 64  # (2k values a point)
    # a value refused in the last slice is still found
    spec = parse_spec(
        {
            "mechanism": "randomized_response",
            "quantities": ["tv"],
            "grid": {"epsilon": [0.5] * 19 + [-1.0], "k": 4},
        }
    )
    with pytest.raises(ValueError, match="rejects the grid: epsilon must be"):
        kernel_mod.check_kernel(spec, kernel_mod.make_kernel(spec))


def test_default_chunk_holds_a_bounded_number_of_values(tmp_path, monkeypatch, capsys):
    # the default was 2**16 points per CPU device whatever the pair: randomized response with
    # k = 1000 (2000 values a point) held ~9 GB of host memory per chunk
    from jaxdp.sweep import runner

    # 200 points of k = 64 (128 values a point) with 128 points per device by default: 64
    monkeypatch.setattr(runner, "CPU_POINTS_PER_DEVICE", 128)
    monkeypatch.setattr(runner, "POINT_VALUES", 64, raising=False)
    spec = {
        "mechanism": "randomized_response",
        "quantities": ["tv"],
        "grid": {"epsilon": {"linspace": [0.0, 2.0, 200]}, "k": 64},
    }
    path = tmp_path / "rr.toml"
    path.write_text(
        'mechanism = "randomized_response"\nquantities = ["tv"]\n[grid]\n'
        "epsilon = {linspace = [0.0, 2.0, 200]}\nk = 64\n"
    )
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0
    assert "4 chunk(s) of 64" in capsys.readouterr().out
    run = sweep(spec, tmp_path / "rr", quiet=True)
    assert (run.chunk_size, run.n_chunks) == (64, 4)
    P, Q = mechanisms.randomized_response(jnp.linspace(0.0, 2.0, 200), k=64)
    np.testing.assert_allclose(load_sweep(tmp_path / "rr").values["tv"], jd.tv(P, Q), rtol=1e-14)
    monkeypatch.undo()
    cpu = jax.devices("cpu")
    assert runner.default_chunk_size(cpu[:1]) == 2**16
    assert runner.default_chunk_size(cpu[:1], point_values=2000) == 2**16 * 256 // 2000
    assert runner.default_chunk_size(cpu[:1], point_values=2**24) == 64


def test_float32_grid_values_out_of_range_are_refused_in_one_line(tmp_path, capsys):
    # numpy's cast warning took two more lines of stderr, and the mechanism then rejected an
    # inf (or 0.0) that the spec never held (QA pass)
    base = {"mechanism": "laplace", "quantities": ["tv"], "dtype": "float32"}
    for grid, msg in (
        ({"epsilon": [1e200]}, r"grid axis 'epsilon': 1e\+200 is outside the range of float32"),
        ({"epsilon": {"linspace": [1e-3, 1e39, 3]}}, r"'epsilon': 5e\+38 .* become inf"),
        ({"epsilon": {"logspace": [-50, 0, 3]}}, r"'epsilon': 1e-50 .* become 0\.0"),
    ):
        with pytest.raises(ValueError, match=msg):
            sweep({**base, "grid": grid}, tmp_path / "d", quiet=True)
        assert not (tmp_path / "d").exists()
    with pytest.raises(ValueError, match=r"fixed parameter 'sensitivity': 1e\+300"):
        sweep(
            {**base, "grid": {"epsilon": [1.0], "sensitivity": 1e300}}, tmp_path / "d", quiet=True
        )

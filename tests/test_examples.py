"""The scripts in ``examples/`` run (with small sizes) and print correct numbers.

Each example exposes ``main(argv)``; it is loaded from its file and run in-process (sharing
this process's JAX start-up), and its returned numbers and printed output are checked against
closed forms evaluated independently with mpmath.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# (a script's own folder is on sys.path when it runs; the examples import _argtypes from it)
sys.path.insert(0, str(EXAMPLES))
mp.mp.dps = 40


def _load(name):
    path = EXAMPLES / f"{name}.py"
    if not path.exists():
        pytest.fail(f"missing example {path}")
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def laplace_c(t):
    """Chernoff information of Lap(0, b) vs Lap(s, b), t = s/b (alpha* = 1/2)."""
    t = mp.mpf(t)
    return t / 2 - mp.log(1 + t / 2)


def test_every_example_is_tested():
    tested = {"calibrate_laplace", "membership_composed", "large_sweep", "gradients"}
    # (a leading underscore: a module the examples share, not an example)
    assert {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_")} == tested


def test_calibrate_laplace(capsys):
    out = _load("calibrate_laplace").main(["--budget", "0.05", "0.5", "--compositions", "3"])
    text = capsys.readouterr().out
    assert "scale for a Chernoff budget" in text and len(text.strip().splitlines()) == 4
    assert out.converged.all()
    for c, b, achieved in zip(out.budget, out.scale, out.achieved, strict=True):
        t = mp.findroot(lambda t, c=c: 3 * laplace_c(t) - c, 1.0)  # 3-fold: C is additive
        assert abs(b - 1 / t) <= 1e-9 * (1 / t)
        assert abs(achieved - c) <= 1e-9 * c  # engine check of the n-fold product
        assert f"{b:.8g}" in text
    assert np.allclose(out.advantage_bound, np.sqrt(-np.expm1(-2 * out.budget)), rtol=1e-14)


def test_membership_composed(capsys):
    out = _load("membership_composed").main(["--k", "2", "--eps", "0.5", "--eps-rr", "1.0"])
    text = capsys.readouterr().out
    c_lap = laplace_c(0.5)
    c_rr = mp.log(mp.cosh(mp.mpf(1) / 2))
    assert math.isclose(out.chernoff_parts[0], c_lap, rel_tol=1e-10)
    assert math.isclose(out.chernoff_parts[1], c_rr, rel_tol=1e-10)
    # all parts symmetric (alpha* = 1/2), so the composed information is the sum
    c = 2 * c_lap + c_rr
    assert math.isclose(out.chernoff, c, rel_tol=1e-10) and math.isclose(out.alpha, 0.5)
    assert math.isclose(out.advantage_bound, mp.sqrt(1 - mp.exp(-2 * c)), rel_tol=1e-12)
    assert out.eps_total == 2.0
    assert math.isclose(out.paper_bounds["(42) Bayes security"], mp.tanh(1), rel_tol=1e-14)
    # Exact advantage of two Laplace releases, TV = E_P[(1 - e^{-L})_+], L = l1 + l2, from
    # the law of the per-release loss l = eps(|x - 1| - |x|) under P = Lap(0, 1/eps): an atom
    # eps (mass 1/2), an atom -eps (mass e^-eps / 2), and eps(1 - 2u) with density
    # (eps/2) e^{-eps u} for u in (0, 1). Only the pairs with L > 0 contribute.
    eps = mp.mpf("0.5")
    h = eps / 2
    tv = (
        mp.mpf(1) / 4 * (1 - mp.exp(-2 * eps))  # both atoms +eps
        + mp.quad(lambda u: h * mp.exp(-eps * u) * (1 - mp.exp(-2 * eps * (1 - u))), [0, 1])
        # ^ one atom +eps, the other continuous (two orders x 1/2)
        + mp.quad(lambda v: v * h**2 * mp.exp(-eps * v) * (1 - mp.exp(-2 * eps * (1 - v))), [0, 1])
        # ^ both continuous, v = u1 + u2 < 1 (triangle: density of v is v)
    )
    assert math.isclose(out.laplace_exact, tv, rel_tol=1e-8)
    assert out.laplace_exact <= out.laplace_bound
    assert f"C = {out.chernoff:.10g}" in text and "not an upper bound" in text


def test_gradients(capsys):
    # (theta = 1e-3: a finite-difference step of 1e-5 was 1% of it, 3.5e-5 off the exact slope)
    out = _load("gradients").main(["--batch", "5", "--theta", "0.001"])
    text = capsys.readouterr().out
    assert math.isclose(out.laplace_dC_db, -0.025, rel_tol=1e-10)  # b = 2: t = 1/2
    assert math.isclose(out.gaussian_dC_dsigma, -1 / (4 * 1.5**3), rel_tol=1e-10)
    assert out.laplace_dC_db_closed_form == pytest.approx(-0.025, rel=1e-14)
    for g, fd in zip(out.attack_grad, out.attack_fd, strict=True):
        assert math.isclose(g, fd, rel_tol=1e-6)
    assert math.isclose(out.alpha_dtheta, out.alpha_dtheta_fd, rel_tol=1e-5)
    # the batch against the closed form d/db [t/2 - log(1 + t/2)], t = 1/b, via mpmath diff
    for b, g in zip(out.batch_scales, out.batch_grads, strict=True):
        ref = mp.diff(lambda b: laplace_c(1 / b), mp.mpf(float(b)))
        assert math.isclose(g, ref, rel_tol=1e-10)
    assert "dC/db" in text and "finite diff." in text


def test_large_sweep(tmp_path, capsys):
    out = _load("large_sweep").main(["--points", "600", "--out", str(tmp_path / "sw")])
    text = capsys.readouterr().out
    assert out.n_points == int(np.prod(out.shape)) and 400 <= out.n_points <= 600
    assert out.all_converged and out.max_eq34_rel_err < 1e-12
    assert 1.0 < out.max_eq35_ratio <= 4.0 + 1e-12  # theta = 1: between 1 and 4
    from jaxdp.sweep import load_sweep

    res = load_sweep(tmp_path / "sw")
    eps, shifts, thetas = (res.coords[k] for k in ("epsilon", "shift", "theta"))
    assert thetas[0] == 1.0
    for i in (0, len(eps) // 2, len(eps) - 1):
        for j, shift in enumerate(shifts):
            ref = laplace_c(mp.mpf(float(shift)) * mp.mpf(float(eps[i])))
            assert math.isclose(res.values["chernoff"][i, j, 0], ref, rel_tol=1e-10)
    assert "points/s" in text


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("calibrate_laplace", ["--budget", "0.1", "0"]),  # scale inf: "C at b" printed nan
        ("calibrate_laplace", ["--compositions", "0"]),  # a traceback
        ("calibrate_laplace", ["--sensitivity", "-1"]),
        ("membership_composed", ["--eps", "0"]),  # "ValueError: c contains NaN"
        ("membership_composed", ["--eps", "inf"]),
        ("membership_composed", ["--k", "0"]),
        ("membership_composed", ["--k", "401"]),  # ~40 s; at 1000, ~20 minutes and 2.2 GB
        ("membership_composed", ["--eps-rr", "nan"]),
        ("gradients", ["--batch", "0"]),  # IndexError
        ("gradients", ["--sigma", "0"]),  # ZeroDivisionError
        ("gradients", ["--scale", "-1"]),  # printed dC/db = 0 and an alpha for no pair
        ("gradients", ["--theta", "-1"]),
        ("gradients", ["--shift", "nan"]),
        ("large_sweep", ["--points", "-5"]),  # math domain error
        ("large_sweep", ["--points", "0"]),  # swept 16 points
        ("large_sweep", ["--chunk-size", "0"]),
    ],
)
def test_bad_arguments_are_refused_in_one_line(name, argv, capsys):
    with pytest.raises(SystemExit) as e:
        _load(name).main(argv)
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"error: argument {argv[0]}: must be " in captured.err.strip().splitlines()[-1]


def test_large_sweep_refuses_an_unusable_out_in_one_line(tmp_path, capsys):
    # (an --out holding something else, or another spec's sweep, was a ValueError traceback)
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as e:
        _load("large_sweep").main(["--points", "20", "--out", str(tmp_path / "sw")])
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "holds no jaxdp sweep" in captured.err.strip().splitlines()[-1]

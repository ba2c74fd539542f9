"""Smoke test of the accuracy benchmark program (``benchmarks/bench_accuracy.py --tiny``).

Runs the program in a subprocess on tiny sizes (Laplace pairs, a 40-point eps grid, the
quadrature at its default level) and checks that its JSON holds real numbers that pass the
benchmark's own accuracy thresholds, and that the paper-formula section finds the break points
known from the mpmath analysis (``jaxdp/paper.py`` docstrings). A few cheap checks of the
other programs' options follow (no timing: steps recorded or ``--help``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "bench_accuracy.py"


def _load(path: Path, name: str):
    """The benchmark program at ``path`` imported as module ``name`` (not run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pytestmark = [
    pytest.mark.skipif(not SCRIPT.exists(), reason="no benchmarks/ in this checkout"),
    pytest.mark.slow,  # one subprocess; its time is XLA compiling chernoff and quadrature
]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, str(SCRIPT), "--tiny", "--families", "Laplace"]
    proc = subprocess.run(
        [*cmd, "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "accuracy.json").read_text()), (out / "accuracy.md").read_text()


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def test_accuracy_checks_pass(bench):
    res, _ = bench
    names = {c["name"] for c in res["checks"]}
    assert {"float64 max rel error vs mpmath", "float32 max rel error vs mpmath"} <= names
    assert any(n.startswith("max_chernoff_eps_dp vs chernoff(RR)") for n in names)
    assert any(n.startswith("quadrature at default level") for n in names)
    assert any(n.startswith("tv on the quadrature path") for n in names)
    for c in res["checks"]:
        assert c["pass"] is True, c
        if c["value"] is not True:
            assert _finite(c["value"]) and c["value"] <= c["threshold"], c


def test_mpmath_section_has_real_numbers(bench):
    res, _ = bench
    mpm = res["mpmath"]
    cases = mpm["cases"]
    assert {c["family"] for c in cases} == {"Laplace"}
    assert {c["dtype"] for c in cases} == {"float64", "float32"}
    assert len(cases) >= 2 * 9  # the edge cases, both dtypes
    th = res["thresholds"]
    for c in cases:
        assert _finite(c["reference"]) and c["reference"] >= 0, c
        assert _finite(c["jaxdp"]) and _finite(c["rel_err"]), c
        assert 0 <= c["reference_alpha"] <= 1, c
        assert c["rel_err"] <= th[f"{c['dtype']}_max_rel"], c
    # the edge cases really are extreme: tiny and huge information, alpha* near an end
    refs = [c["reference"] for c in cases if c["dtype"] == "float64"]
    assert min(refs) < 1e-15 and max(refs) > 1e3
    alphas = [c["reference_alpha"] for c in cases if c["dtype"] == "float64"]
    assert min(alphas) < 0.1 and max(alphas) > 0.9
    # equal-scale Laplace with shift 1: C = t/2 - log(1 + t/2), t = 1
    (lap,) = [c for c in cases if c["case"] == "equal scales, shift 1" and c["dtype"] == "float64"]
    assert lap["reference"] == pytest.approx(0.5 - math.log(1.5), rel=1e-15)
    assert mpm["float64"]["max_rel"] <= th["float64_max_rel"]
    assert mpm["float32"]["median_rel"] <= th["float32_median_rel"]


def test_paper_section_finds_known_breaks(bench):
    res, _ = bench
    rows = {r["name"]: r for r in res["paper"]["formulas"]}
    # printed identities: eq22 == eps tanh(eps/2) (sup KL), eq42 == tanh(eps/2) (sup TV)
    for name in ("eq22", "eq42"):
        assert rows[name]["fails_on"] == []
        assert abs(rows[name]["rel_gap"]["max"]) < 1e-14
    # claimed upper bounds that fail from a threshold on (mpmath values in jaxdp/paper.py)
    for name, start in (("eq31_max", 0.5424595944), ("eq32_max", 0.4856147248)):
        (interval,) = rows[name]["fails_on"]
        assert interval[0] == pytest.approx(start, rel=1e-4)
        assert interval[1] == pytest.approx(20.0)
    assert rows["eq72"]["fails_on"][0][1] == pytest.approx(0.2713186701, rel=1e-4)
    # (35) is wrong at theta = 1 everywhere: 4x too large for small t, 2x for large t
    eq35 = rows["eq35 (shift=1, theta=1)"]
    assert eq35["holds_fraction"] == 0.0
    assert 1.0 < eq35["rel_gap"]["min"] < eq35["rel_gap"]["max"] <= 3.0 + 1e-6
    assert rows["eq34 (shift=1, theta=1)"]["fails_on"] == []


def test_quadrature_section(bench):
    res, md = bench
    (row,) = res["quadrature"]["rows"]  # --tiny: the default level only
    assert row["level"] == res["quadrature"]["default_level"]
    # both rules: jd.log_bc's (plain pieces also ended at the integrand's peaks) and the
    # plain rule of jd.chernoff, each with its own node count (the count once described
    # the plain rule beside the errors of the other)
    for rule in ("", "plain_"):
        assert _finite(row[f"{rule}Laplace_float64"]) and row[f"{rule}Laplace_float64"] < 1e-12
    assert row["nodes_per_pair"] > row["plain_nodes_per_pair"] > 0
    for header in ("## jaxdp.chernoff vs mpmath", "## The paper's formulas", "## Quadrature"):
        assert header in md


def test_families_without_a_quadrature_pair_do_not_crash_the_checks(tmp_path):
    # --families DiscreteLaplace (or Categorical) leaves the quadrature section, on by
    # default, without an error column: the checks took max() of nothing, a ValueError after
    # all the work, and no accuracy.json was written
    mod = _load(SCRIPT, "_bench_accuracy_smoke")
    argv = ["--tiny", "--families", "DiscreteLaplace", "--sections", "quadrature"]
    assert mod.main([*argv, "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "accuracy.json").read_text())
    assert res["quadrature"]["rows"] and res["checks"] == []


def test_kernels_script_imports_this_checkouts_jaxdp(tmp_path):
    # kernels.py imported whichever jaxdp came first on the path (its own folder is
    # benchmarks/, so an installed jaxdp, not this checkout's): "run it at two commits" timed
    # the same installed tree twice. A decoy jaxdp first on PYTHONPATH must not be imported.
    decoy = tmp_path / "jaxdp"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('decoy jaxdp imported')\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "kernels.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_run_accuracy_only_runs_the_accuracy_suite_alone(tmp_path, monkeypatch):
    # run.py --accuracy-only also started bench_calibrate.py (a timed suite) and
    # bench_sweep.py (1e6 and 1e7 points, minutes): the steps are recorded, not run
    run = _load(REPO / "benchmarks" / "run.py", "_bench_run_smoke")
    scripts = []

    def fake_run(cmd, log, timeout=None, cpu=None, background=False):
        scripts.append(Path(cmd[1]).name)
        log.append({"command": " ".join(cmd[1:]), "rc": 0, "seconds": 0.0})
        return 0

    monkeypatch.setattr(run, "_run", fake_run)
    assert run.main(["--accuracy-only", "--out", str(tmp_path)]) == 0
    assert scripts == ["bench_accuracy.py"]


def test_an_unknown_section_is_refused(tmp_path, capsys):
    # --sections mpmth (a typo) ran no section and wrote an empty report with exit 0, its
    # checks all "passed"; now refused like an unknown family
    mod = _load(SCRIPT, "_bench_accuracy_sections")
    with pytest.raises(SystemExit) as exc:
        mod.main(["--tiny", "--sections", "paper,mpmth", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "unknown section 'mpmth'" in capsys.readouterr().err
    assert not (tmp_path / "accuracy.json").exists()


def test_speed_refuses_a_family_that_matches_no_kernel(tmp_path, capsys):
    # bench_speed.py --families Lapalce (a typo) measured nothing and wrote empty results,
    # exit 0; refused now, before JAX is set up
    mod = _load(REPO / "benchmarks" / "bench_speed.py", "_bench_speed_smoke")
    with pytest.raises(SystemExit) as exc:
        mod.main(["--quick", "--families", "Lapalce", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "no kernel name starts with 'Lapalce'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_compare_trees_family_names():
    # a bare "Categorical" stands for every --cat-sizes k (it was the last k only)
    mod = _load(REPO / "benchmarks" / "compare_trees.py", "compare_trees_under_test")
    known = ["Laplace", "Categorical k=3", "Categorical k=10", "Quadrature (Laplace vs Gaussian)"]
    assert mod.family_names("Categorical,Quadrature", known) == [
        "Categorical k=3",
        "Categorical k=10",
        "Quadrature (Laplace vs Gaussian)",
    ]
    assert mod.family_names("Laplace,Categorical k=10", known) == ["Laplace", "Categorical k=10"]
    with pytest.raises(ValueError, match="unknown family 'Foo'"):
        mod.family_names("Foo", known)

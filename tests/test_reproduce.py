"""``jaxdp reproduce``: files, figures, the findings table against mpmath, and bad input.

The command runs once (``--quick``, in-process, in one test) into a directory that already holds
another file; the table's numbers are then checked against independent 50-digit mpmath values of the
printed formulas and of the exact quantities (never against the library itself).
"""

from __future__ import annotations

import csv
import os

import matplotlib.image
import mpmath as mp
import numpy as np
import pytest

from jaxdp import cli, report
from jaxdp.commands import reproduce

mp.mp.dps = 50
RTOL = 1e-9  # table ends are located to ~1e-12 relative; grid values are float64


def test_reproduce_quick(tmp_path):
    """One run (the expensive part), then every check on its output.

    A single test function, so that ``pytest -n 2`` does not run the command once per worker.
    """
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("not jaxdp's")  # an existing DIR is reused, nothing lost
    rc = cli.main(["reproduce", "--out", str(out), "--quick", "--quiet"])
    assert rc == 0
    with open(out / "paper_vs_exact.csv", newline="") as fh:
        reproduced = (out, list(csv.DictReader(fh)))
    for check in (
        _check_files_written_and_other_files_kept,
        _check_table_has_every_paper_formula,
        _check_chernoff_cuff_row,
        _check_upper_bounds_31_32_72,
        _check_alpha_rows,
        _check_laplace_rows,
        _check_membership_rows,
    ):
        check(reproduced)


def _row(rows, prefix):
    hits = [r for r in rows if r["formula"].startswith(prefix)]
    assert len(hits) == 1, (prefix, [r["formula"] for r in rows])
    return hits[0]


def _intervals(row):
    out = {}
    for item in filter(None, row["fail_intervals"].split(";")):
        reason, lo, hi = item.rsplit(":", 2)
        out.setdefault(reason, []).append((float(lo), float(hi)))
    return out


def _close(a, b, rtol=RTOL):
    return abs(float(a) - float(b)) <= rtol * abs(float(b))


# -- printed formulas and exact quantities, literally, in mpmath ------------------------------


def logcosh_half(e):
    return mp.log(mp.cosh(e / 2))


def eq30_max(e):  # (30) at alpha -> 0
    return mp.log(1) - mp.log(mp.exp(e) - mp.exp(-e))


def eq31_max(e):  # (31) is convex in alpha: max of the end points 0 and 1
    return max(a + e * (a + 1) - mp.log(mp.exp(2 * e * (a + 1)) - 1) for a in (0, 1))


def eq72(e):
    return (1 / (2 * e) + mp.mpf(1) / 2) * mp.log((1 + e) / (1 - e)) - 1 + mp.log(2 * e / (1 - e))


def eq43(e):
    return 1 / (2 * e) * mp.log((4 * e + 2) / (e + 1)) - 1


def rr_tv(e, n):
    p = mp.exp(e) / (1 + mp.exp(e))
    q = 1 - p
    return mp.fsum(
        mp.binomial(n, k) * max(p**k * q ** (n - k) - q**k * p ** (n - k), 0) for k in range(n + 1)
    )


# -- files -------------------------------------------------------------------------------------


def _check_files_written_and_other_files_kept(reproduced):
    out, _ = reproduced
    assert (out / "keep.txt").read_text() == "not jaxdp's"
    for name in ("fig2", "fig3", "fig4", "fig5"):
        png, pdf = out / f"{name}.png", out / f"{name}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width = matplotlib.image.imread(png).shape[:2]
        assert width >= 1500 and height >= 800, (name, width, height)
        assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 10_000
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]  # atomic writes left nothing
    md = (out / "paper_vs_exact.md").read_text()
    assert md.count("\n| ") == len(reproduced[1]) + 1  # header + one line per formula


# -- the table against mpmath ------------------------------------------------------------------


def _check_table_has_every_paper_formula(reproduced):
    _, rows = reproduced
    text = " ".join(r["formula"] for r in rows)
    for eq in ("(22)", "(30)", "(31)", "(32)", "(72)", "(56)", "(69)", "(43)", "(34)", "(35)"):
        assert eq in text
    for eq in ("(38)", "(39)", "(40)", "(41)", "(42)", "UB I", "UB II", "alpha = 0.5"):
        assert eq in text
    for r in rows:  # the largest gap is the gap at the reported point
        if r["max_abs_rel_gap"] != "nan" and float(r["exact_at_x"]) != 0:
            gap = abs(float(r["paper_at_x"]) - float(r["exact_at_x"])) / abs(float(r["exact_at_x"]))
            assert _close(gap, float(r["max_abs_rel_gap"]), 1e-12)


def _check_chernoff_cuff_row(reproduced):
    r = _row(reproduced[1], "(30) max over alpha")
    x = mp.mpf(r["at_x"])
    assert _close(r["paper_at_x"], eq30_max(x), 1e-12)
    assert _close(r["exact_at_x"], logcosh_half(x), 1e-12)
    iv = _intervals(r)
    below = mp.findroot(lambda e: eq30_max(e) - logcosh_half(e), 0.47)
    negative = mp.asinh(mp.mpf(1) / 2)  # -log(2 sinh eps) = 0
    assert len(iv["below exact"]) == 1 and _close(iv["below exact"][0][0], below)
    assert _close(iv["negative"][0][0], negative)
    assert iv["below exact"][0][1] == float(r["grid_max"])


def _check_upper_bounds_31_32_72(reproduced):
    rows = reproduced[1]
    iv = _intervals(_row(rows, "(31) C_ubI"))
    assert _close(
        iv["below exact"][0][0], mp.findroot(lambda e: eq31_max(e) - logcosh_half(e), 0.54)
    )
    assert _close(iv["negative"][0][0], mp.asinh(mp.e / 2) / 2)
    iv = _intervals(_row(rows, "(32) C_ubII"))
    assert _close(iv["negative"][0][0], 0.5)  # -log(2 eps) < 0 iff eps > 1/2
    assert _close(
        iv["below exact"][0][0], mp.findroot(lambda e: -mp.log(2 * e) - logcosh_half(e), 0.48)
    )
    r = _row(rows, "(72) C*_ub")
    iv = _intervals(r)
    assert iv["negative"][0][0] == float(r["grid_min"])
    assert _close(iv["negative"][0][1], mp.findroot(eq72, 0.27))
    assert _close(iv["below exact"][0][1], mp.findroot(lambda e: eq72(e) - logcosh_half(e), 0.271))
    assert _close(iv["undefined"][0][0], 1.0)


def _check_alpha_rows(reproduced):
    iv = _intervals(_row(reproduced[1], "(43) alpha*_alt"))
    (lo_run, hi_run) = iv["outside (0, 1]"]
    assert _close(lo_run[1], mp.findroot(lambda e: eq43(e) - 1, 0.2))
    assert _close(hi_run[0], mp.findroot(eq43, 0.49))
    r = _row(reproduced[1], "(69) alpha*_ubII")  # atanh(eps)/eps > 1 on all of (0, 1)
    iv = _intervals(r)
    assert iv["outside (0, 1]"] == [(float(r["grid_min"]), pytest.approx(1.0, rel=RTOL))]
    assert _close(iv["undefined"][0][0], 1.0)
    # alpha*_ubI = atanh(eps)/eps - 1 leaves (0, 1] on (0.9575.., 1): a quick grid may miss it
    iv = _intervals(_row(reproduced[1], "alpha*_ubI"))
    atanh_root = mp.findroot(lambda e: mp.atanh(e) / e - 2, 0.95)
    for lo, _ in iv.get("outside (0, 1]", []):
        assert _close(lo, atanh_root)


def _check_laplace_rows(reproduced):
    rows = reproduced[1]
    r = _row(rows, "(34) KL")
    assert float(r["max_abs_rel_gap"]) < 1e-12 and r["fail_intervals"] == ""
    r = _row(rows, "(35) Chernoff, Laplace attack, theta = 1 ")
    x = mp.mpf(r["at_x"])
    # the worst point is one of the shifts 1, 2, 3 (s = 1, b = 1/eps): t = shift * eps
    matches = [
        t
        for t in (x, 2 * x, 3 * x)
        if _close(r["exact_at_x"], t / 2 - mp.log(1 + t / 2), 1e-10)
        and _close(r["paper_at_x"], t - mp.log(1 + t), 1e-10)
    ]
    assert matches
    assert 1 < float(r["min_rel_gap"]) and float(r["max_rel_gap"]) <= 3.0 + 1e-9
    assert _intervals(r)["differs"][0] == (float(r["grid_min"]), float(r["grid_max"]))


def _check_membership_rows(reproduced):
    rows = reproduced[1]
    r = _row(rows, "(42) Bayes security, n = 3")
    x = mp.mpf(r["at_x"])
    assert _close(r["exact_at_x"], rr_tv(x, 3), 1e-10)
    assert _close(r["paper_at_x"], mp.tanh(3 * x / 2), 1e-12)
    assert r["fail_intervals"] == ""
    r = _row(rows, "(42) Bayes security, n = 1")
    assert float(r["max_abs_rel_gap"]) < 1e-13
    r = _row(rows, "(41) Theorem 5, Chernoff-DP reading")
    c = mp.mpf(r["at_x"])
    assert _close(r["exact_at_x"], mp.sqrt(1 - mp.exp(-2 * c)), 1e-12)
    assert _close(r["paper_at_x"], 1 - mp.exp(-c), 1e-12)
    assert _intervals(r)["below exact"] == [(float(r["grid_min"]), float(r["grid_max"]))]
    r = _row(rows, "(22) KL bound")
    x = mp.mpf(r["at_x"])
    assert _close(r["exact_at_x"], x * mp.tanh(x / 2), 1e-13) and r["fail_intervals"] == ""


# -- bad input ---------------------------------------------------------------------------------


def _error(capsys, argv):
    rc = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith("jaxdp: error: "), err
    return err


def test_out_is_a_file(tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("x")
    err = _error(capsys, ["reproduce", "--out", str(f)])
    assert "--out" in err and "not a directory" in err
    assert f.read_text() == "x"


def test_out_under_a_file(tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("x")
    err = _error(capsys, ["reproduce", "--out", str(f / "sub")])
    assert "--out" in err and "cannot create" in err


def test_a_target_that_is_a_directory(tmp_path, capsys):
    # found at its rename, after fig2 was written, named by the temporary file (QA pass)
    (tmp_path / "fig3.png").mkdir()
    err = _error(capsys, ["reproduce", "--out", str(tmp_path), "--formats", "png"])
    assert f"--out: '{tmp_path / 'fig3.png'}' is a directory, not a file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig3.png"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can write anywhere")
def test_out_unwritable(tmp_path, capsys):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        err = _error(capsys, ["reproduce", "--out", str(d)])
        assert "--out" in err and "cannot write" in err
    finally:
        d.chmod(0o700)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_out_in_proc(capsys):  # nobody, root included, can create a directory there
    err = _error(capsys, ["reproduce", "--out", "/proc/jaxdp-reproduce-test"])
    assert "--out" in err and "cannot create" in err


def test_bad_options(tmp_path, capsys):
    assert "--points" in _error(capsys, ["reproduce", "--out", str(tmp_path), "--points", "3"])
    # 1e10 points aborted the process inside XLA (exit 134); 1e20 gave an error about an
    # integer too large for C without naming --points (QA pass)
    for huge in ("10000000000", "1" + "0" * 20):
        err = _error(capsys, ["reproduce", "--out", str(tmp_path), "--points", huge])
        assert f"--points {huge} is too large: at most 1000000" in err
    assert "--formats" in _error(capsys, ["reproduce", "--out", str(tmp_path), "--formats", "bmp"])


def test_repeated_formats_are_written_once():
    # "png,png" drew and wrote every figure twice, and the summary counted 10 files for 6
    assert reproduce._formats("png, PNG,pdf,png") == ("png", "pdf")


def test_table_says_how_coarse_its_grid_is():
    # --quick (40 points, a factor 1.27 apart) misses alpha*_ubI > 1 on (0.9575, 1); the table
    # listed the other failures as if complete
    f = report.Finding("f", "c", "e", "range", "eps", (1e-3, 10.0, 40), 1, 1, 1, 1, 0, 1, (), "")
    assert "a factor 1.27 apart here) can be missed" in report.table_markdown([f])


def test_float32_tables_do_not_report_rounding_as_failures():
    # a float32 grid (the library without jax_enable_x64) was judged with the float64
    # tolerances: float32 rounding, 2.3e-7 in (42) and 3.4e-6 in (34), listed as failures
    p, e = np.array([1 - 3e-6, 1 - 3e-4]), np.ones(2)
    for kind, reason in (("upper bound", "below exact"), ("value", "differs")):
        f32 = dict(report._predicates(kind, "float32"))[reason]
        f64 = dict(report._predicates(kind, "float64"))[reason]
        assert list(f32(p, e)) == [False, True] and list(f64(p, e)) == [True, True]
    f = report.Finding("f", "c", "e", "range", "eps", (1e-3, 10.0, 40), 1, 1, 1, 1, 0, 1, (), "")
    text = report.table_markdown([f], dtype="float32")
    assert "below the exact value (relative 1e-05)" in text and "(relative 3e-05)" in text


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        # (a decreasing grid and nan/inf ends were returned as grids; lo <= 0 said "math
        # domain error", a non-integer count "'float' object cannot be interpreted as an
        # integer", both naming nothing; QA pass)
        ({"lo": 10.0, "hi": 1.0}, ValueError, "lo and hi must satisfy 0 < lo < hi"),
        ({"lo": 0.0}, ValueError, "lo and hi must satisfy 0 < lo < hi"),
        ({"lo": float("nan")}, ValueError, "lo and hi must satisfy 0 < lo < hi"),
        ({"hi": float("inf")}, ValueError, "lo and hi must satisfy 0 < lo < hi"),
        # (a subnormal lo gave a first grid point 0, as did lo at the smallest normal float)
        ({"lo": 1e-320}, ValueError, "lo and hi must lie inside the normal range"),
        ({"lo": 2.2250738585072014e-308}, ValueError, "lo and hi must lie inside the normal"),
        ({"points": 8.5}, TypeError, "points must be an integer"),
        ({"points": True}, TypeError, "points must be an integer"),
        ({"points": 1}, ValueError, "points must be >= 2"),
    ],
)
def test_eps_grid_refuses_what_is_not_a_log_grid(kwargs, error, match):
    with pytest.raises(error, match=match):
        report.eps_grid(**{"points": 8, **kwargs})


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: report.fig2_data([-1.0, 1.0]), "eps must be positive"),
        (lambda: report.fig2_data([float("nan")]), "eps contains NaN"),
        (lambda: report.fig3_data([1.0], sensitivity=-1.0), "sensitivity must be positive"),
        (lambda: report.fig3_data([1.0], thetas=[-1.0]), "thetas must be positive"),
        (lambda: report.fig3_data([1.0], shifts=[float("inf")]), "shifts must be finite"),
        # (their noise scales outside the float range gave nan curves)
        (lambda: report.fig3_data([1e-320, 1.0]), "noise scale sensitivity/epsilon"),
        (lambda: report.fig3_data([1.0], thetas=[1e-320]), "noise scale theta"),
        (lambda: report.membership_data([0.0], 1), "eps must be positive"),
        (lambda: report.membership_data([1.0], 1, delta=2.0), r"delta must lie in \[0, 1\]"),
    ],
)
def test_curve_data_refuse_bad_inputs_naming_them(call, match):
    # they returned nan curves (or, for a negative theta, curves of a mirrored pair)
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "call, error, match",
    [
        # (a single shift failed as "Too many indices: array is 0-dimensional", a single eps
        # in fig3_data too; a string as JAX's "Value 'a' with dtype <U1 is not a valid JAX
        # array type" or numpy's "could not convert string to float"; an array sensitivity
        # as adversarial_laplace's batch shapes that do not broadcast)
        (lambda: report.fig3_data([1.0], shifts=1.0), ValueError, "shifts must be a sequence"),
        (lambda: report.fig3_data([1.0], thetas=[[1.0]]), ValueError, "thetas must be a seq"),
        (lambda: report.fig3_data(1.0), ValueError, "eps must be a sequence"),
        (lambda: report.fig3_data([1.0], sensitivity=[1.0, 2.0]), ValueError, "sensitivity"),
        (lambda: report.fig3_data([1.0], shifts="a"), TypeError, "shifts must be a real"),
        (lambda: report.fig2_data("a"), TypeError, "eps must be a real"),
        (lambda: report.fig2_data([[1.0, 2.0]]), ValueError, "eps must be a sequence"),
        (lambda: report.membership_data([1.0], 1, delta="a"), TypeError, "delta must be a real"),
        (lambda: report.membership_data([1.0], 1, delta=[0.1]), ValueError, "delta must be a"),
    ],
)
def test_curve_data_refuse_bad_types_and_shapes_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_membership_data_checks_n_before_its_cache():
    # True and 1.0 hit the cached family of n = 1 and passed; [1] was "unhashable type"
    report.membership_data([1.0], 1)
    for n in (True, 1.0, [1]):
        with pytest.raises(TypeError, match="n must be a Python int"):
            report.membership_data([1.0], n)

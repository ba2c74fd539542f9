"""The opt-in persistent compilation cache (``jaxdp.enable_compile_cache``) and the CLI's use
of it. Enabling the cache is process-wide JAX configuration, so every test that enables it
runs in a subprocess; the in-process tests only check errors raised before anything is set.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import jaxdp as jd
from jaxdp.cli import main

pytestmark = pytest.mark.slow  # subprocesses, each compiling the Laplace solver once

# Enables the cache in `sys.argv[1]`, solves three Laplace pairs and prints the results
# (repr, every digit) and how many executables came from the cache.
_PROGRAM = """
import sys
import jax
jax.config.update("jax_enable_x64", True)
import jaxdp as jd
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None
)
print(jd.enable_compile_cache(sys.argv[1]))
r = jd.chernoff(jd.Laplace(0.0, jax.numpy.array([1.0, 2.0, 0.5])), jd.Laplace(1.0, 1.5))
print(repr(r.information.tolist()), repr(r.alpha.tolist()))
print(len(hits))
"""


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JAXDP_COMPILE_CACHE", None)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    root = str(Path(jd.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["JAX_PLATFORMS"] = "cpu"
    env.update(extra)
    return env


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], env=_env(**env), capture_output=True, text=True, timeout=240
    )


def _python(*args: str, **env: str) -> list[str]:
    proc = _run(*args, **env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_second_process_loads_the_solver_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first = _python("-c", _PROGRAM, str(cache))
    assert first[0] == str(cache)
    assert any(cache.iterdir())
    second = _python("-c", _PROGRAM, str(cache))
    assert int(second[2]) > int(first[2])
    assert second[1] == first[1]  # the loaded executable computes the same bits


def test_cli_uses_the_default_directory_unless_told_not_to(tmp_path):
    cmd = ("-m", "jaxdp.cli", "chernoff", "laplace", "--epsilon", "1", "--json")
    _python("-m", "jaxdp.cli", "--no-compile-cache", *cmd[2:], XDG_CACHE_HOME=str(tmp_path))
    assert not (tmp_path / "jaxdp").exists()
    _python(*cmd, XDG_CACHE_HOME=str(tmp_path / "x"), JAXDP_COMPILE_CACHE="off")
    assert not (tmp_path / "x").exists()
    _python(*cmd, XDG_CACHE_HOME=str(tmp_path))
    (d,) = (tmp_path / "jaxdp").iterdir()
    assert d.name.startswith("xla-") and any(d.iterdir())
    assert d.stat().st_mode & 0o077 == 0  # private to the user: the cache is trusted code
    assert (
        str(d)
        == _python(
            "-c",
            "import jaxdp; print(jaxdp.default_compile_cache_dir())",
            XDG_CACHE_HOME=str(tmp_path),
        )[0]
    )


def test_cli_deletes_an_entry_cut_short_instead_of_warning_forever(tmp_path):
    cmd = ("-m", "jaxdp.cli", "chernoff", "laplace", "--epsilon", "1", "--json")
    cache = tmp_path / "c"
    first = _python(*cmd, JAXDP_COMPILE_CACHE=str(cache))
    solver = sorted(cache.glob("jit__chernoff_dispatch-*-cache"))
    assert len(solver) == 1
    data = solver[0].read_bytes()
    solver[0].write_bytes(data[: len(data) // 2])  # a write cut short
    proc = _run(*cmd, JAXDP_COMPILE_CACHE=str(cache))
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == first  # recompiled: same answer
    (note,) = proc.stderr.strip().splitlines()  # one line, no UserWarning
    assert note.startswith("jaxdp: note: removed unreadable compile-cache entries for ")
    assert "jit__chernoff_dispatch" in note
    assert not solver[0].exists()
    _python(*cmd, JAXDP_COMPILE_CACHE=str(cache))  # stores a whole entry again
    assert solver[0].exists()
    again = _run(*cmd, JAXDP_COMPILE_CACHE=str(cache))
    assert again.returncode == 0 and again.stderr == ""  # read back without complaint


def test_other_warnings_pass_through_repairing(tmp_path):
    import warnings

    from jaxdp.compile_cache import repairing

    keep = tmp_path / "jit_g-0-cache"
    drop = tmp_path / "jit_f-abc-cache"
    keep.write_bytes(b"x")
    drop.write_bytes(b"x")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with repairing(str(tmp_path)) as damaged:
            warnings.warn(
                "Error reading persistent compilation cache entry for 'jit_f': bad", stacklevel=1
            )
            warnings.warn("something else", stacklevel=1)
    assert damaged == {"jit_f": None}
    assert [str(w.message) for w in seen] == ["something else"]
    assert keep.exists() and not drop.exists()


def test_bad_arguments_are_refused_before_anything_is_set(tmp_path):
    before = jax.config.jax_compilation_cache_dir
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.raises(ValueError, match="path"):
        jd.enable_compile_cache(not_a_dir)
    with pytest.raises(ValueError, match="path"):
        jd.enable_compile_cache(not_a_dir / "sub")
    with pytest.raises(ValueError, match="path"):
        jd.enable_compile_cache("")
    # (was os.fspath's "expected str, bytes or os.PathLike object, not int"; a bytes path
    # created the directory, then JAX refused it: "new string config value must be None or
    # of type str", naming nothing; now read as the str path, QA pass)
    with pytest.raises(TypeError, match=r"path must be a str, bytes or os\.PathLike, got int"):
        jd.enable_compile_cache(123)
    with pytest.raises(ValueError, match=f"directory {re.escape(repr(str(not_a_dir)))}:"):
        jd.enable_compile_cache(os.fsencode(not_a_dir))
    # a path that is not UTF-8 was created and set: every later jit then failed with JAX's
    # "(): incompatible function arguments" (the CLI's JAXDP_COMPILE_CACHE too)
    for bad in (os.fsencode(tmp_path) + b"/x\xff", os.fsdecode(os.fsencode(tmp_path) + b"/y\xff")):
        with pytest.raises(ValueError, match="is not valid UTF-8"):
            jd.enable_compile_cache(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    for t in (-1.0, float("nan"), float("inf"), "soon", None, True):
        with pytest.raises(ValueError, match="min_compile_time_s"):
            jd.enable_compile_cache(tmp_path, min_compile_time_s=t)
    assert jax.config.jax_compilation_cache_dir == before


def test_cli_reports_an_unusable_cache_variable_in_one_line(tmp_path, monkeypatch, capsys):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("JAXDP_COMPILE_CACHE", str(not_a_dir))
    assert main(["chernoff", "laplace", "--epsilon", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxdp: error: JAXDP_COMPILE_CACHE: ")
    assert str(not_a_dir) in err[0]


def test_no_home_directory_means_no_default_cache_not_one_in_the_working_directory(
    tmp_path, monkeypatch
):
    import pwd

    from jaxdp import cli

    def no_entry(uid):
        raise KeyError(uid)

    # an arbitrary uid in a container: no $HOME, no passwd entry ("~" stays "~")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    monkeypatch.delenv("JAXDP_COMPILE_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    before = jax.config.jax_compilation_cache_dir  # (conftest's cache for the test run)
    jax.config.update("jax_compilation_cache_dir", None)  # as in a user's fresh process
    try:
        for xdg in (None, "", "relative/cache"):  # a relative one is ignored (XDG spec)
            if xdg is None:
                monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
            else:
                monkeypatch.setenv("XDG_CACHE_HOME", xdg)
            with pytest.raises(ValueError, match="no home directory"):
                jd.default_compile_cache_dir()
            with pytest.raises(ValueError, match="no home directory"):
                jd.enable_compile_cache()
            assert cli._compile_cache() is None  # the CLI runs without a cache
            assert jax.config.jax_compilation_cache_dir is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jd.default_compile_cache_dir().startswith(str(tmp_path / "xdg" / "jaxdp" / "xla-"))


def test_help_of_no_compile_cache_does_not_promise_more_than_it_does(capsys):
    # with $JAX_COMPILATION_CACHE_DIR set, `jaxdp --no-compile-cache chernoff ...` still
    # writes jit__chernoff_dispatch-*-cache there (JAX's own cache is left alone, as the README
    # says); the help said "do not load or save compiled solvers on disk"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "do not load or save" not in text
    assert "$JAX_COMPILATION_CACHE_DIR) is left on, also with this flag" in text
    assert "``" not in text  # (the description was the module docstring's reST first line)


def test_cli_does_not_report_an_entry_it_could_not_remove_as_removed(tmp_path, monkeypatch, capsys):
    # an unreadable entry that cannot be deleted (here a directory; also another user's
    # entry in a shared directory with the sticky bit) was reported as "removed", on every
    # run (QA pass)
    import warnings

    from jaxdp import cli
    from jaxdp.commands import bench

    (tmp_path / "jit_f-abc-cache").write_bytes(b"x")
    (tmp_path / "jit_g-abc-cache").mkdir()

    def run(args):
        for name in ("jit_f", "jit_g"):
            msg = f"Error reading persistent compilation cache entry for '{name}': bad"
            warnings.warn(msg, stacklevel=1)
        return 0

    monkeypatch.setattr(cli, "_compile_cache", lambda: str(tmp_path))
    monkeypatch.setattr(bench, "run", run)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["bench"]) == 0
    removed, kept = capsys.readouterr().err.splitlines()
    assert removed == (
        f"jaxdp: note: removed unreadable compile-cache entries for jit_f from {tmp_path}"
    )
    prefix = "jaxdp: note: could not remove unreadable compile-cache entries for jit_g ("
    assert kept.startswith(prefix)  # (the reason: "Is a directory" on Linux)
    assert kept.endswith(f") from {tmp_path}; delete them by hand")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jit_g-abc-cache"]

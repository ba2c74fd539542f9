"""The documentation says what the code does: docstrings render as written, cite what exists."""

import doctest
import importlib
import inspect
import math
import pkgutil
import re
from pathlib import Path

import pytest

import jaxdp

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _documented_objects():
    for info in pkgutil.walk_packages(jaxdp.__path__, "jaxdp."):
        module = importlib.import_module(info.name)
        yield info.name, module
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{info.name}.{name}", obj
                if inspect.isclass(obj):
                    for attr, member in vars(obj).items():
                        if inspect.isfunction(member):
                            yield f"{info.name}.{name}.{attr}", member


def test_docstrings_have_no_control_characters():
    # a non-raw docstring turns "\varepsilon" into a vertical tab and "arepsilon"
    bad = [name for name, obj in _documented_objects() if _CONTROL.search(obj.__doc__ or "")]
    assert bad == []


def test_readme_sections_cited_by_docstrings_exist():
    readme = Path(__file__).resolve().parent.parent / "README.md"
    if not readme.exists():  # tests run against an installed package without its checkout
        pytest.skip("no README.md beside tests/")
    text = readme.read_text(encoding="utf-8")
    headings = set(re.findall(r"^#+ (.+?)\s*$", text, re.M))
    cited = []
    for name, obj in _documented_objects():
        doc = " ".join((obj.__doc__ or "").split())
        cited += [(name, s) for s in re.findall(r"the ([A-Z][\w ]*?) in the README", doc)]
        for section, item in re.findall(r'README, section "([^"]+)"(?:, "([^"]+)")?', doc):
            cited.append((name, section))
            if item:
                assert item in text, (name, item)
    assert [c for c in cited if c[1] not in headings] == []


def _section_names(doc, section):
    """The names a Google-style ``section`` documents (``a:``, ``a, b:``, ``*a:``), or None."""
    lines = doc.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() == f"{section}:"]
    if not heads:
        return None
    names, indent = [], None
    for line in lines[heads[0] + 1 :]:
        if not line.strip():
            continue
        here = len(line) - len(line.lstrip())
        indent = here if indent is None else indent
        if here < indent:
            break
        m = re.match(r"\s*(\**\w+(?:, \**\w+)*):", line)
        if here == indent and m:
            names += [n.lstrip("*") for n in m.group(1).split(", ")]
    return names


def test_public_names_document_their_arguments_and_results():
    # (kl, renyi, tv, bhattacharyya, hellinger, Gaussian, ... had no Args or Returns)
    missing = []
    for name in jaxdp.__all__:
        obj = getattr(jaxdp, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        doc = inspect.getdoc(obj) or ""
        params = list(inspect.signature(obj).parameters)
        section = "Attributes" if hasattr(obj, "_fields") else "Args"
        documented = _section_names(doc, section) or []
        missing += [f"{name}: {section} {p}" for p in params if p not in documented]
        if inspect.isfunction(obj) and _section_names(doc, "Returns") is None:
            missing.append(f"{name}: Returns")
    assert missing == []


def test_docstring_examples_run():
    # calibrate's Example skipped its first line only, so its second raised NameError when
    # run; every ``>>>`` example in the package now runs here (float64: conftest's x64)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(verbose=False)
    for info in pkgutil.walk_packages(jaxdp.__path__, "jaxdp."):
        module = importlib.import_module(info.name)
        for test in finder.find(module, info.name):
            runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_readme_quickstart_runs_and_prints_what_its_comments_say(capsys):
    readme = Path(__file__).resolve().parent.parent / "README.md"
    if not readme.exists():
        pytest.skip("no README.md beside tests/")
    blocks = re.findall(r"^```python\n(.*?)^```", readme.read_text(encoding="utf-8"), re.M | re.S)
    assert blocks, "README has no python block"
    exec(compile(blocks[0], "README.md", "exec"), {})  # (its x64 switch: on in tests anyway)
    lines = capsys.readouterr().out.splitlines()
    info, alpha, converged = lines[0].split()
    c = 0.5 - math.log(1.5)  # Lap(0, 1) vs Lap(1, 1)
    assert (float(info), float(alpha), converged) == (pytest.approx(c, rel=1e-14), 0.5, "True")
    kl, tv = map(float, lines[1].split())
    assert kl == pytest.approx(math.exp(-1), rel=1e-14)
    assert tv == pytest.approx(1 - math.exp(-0.5), rel=1e-14)
    assert float(lines[2]) == pytest.approx(math.sqrt(-math.expm1(-2 * c)), rel=1e-14)
    b = float(lines[3])  # 10 (t/2 - log(1 + t/2)) = 0.1, t = 1/b
    assert 10 * (0.5 / b - math.log1p(0.5 / b)) == pytest.approx(0.1, rel=1e-12)
    # only Q's scale moves: half the slope -1/6 of t/2 - log(1 + t/2) in b, t = 1/b
    assert float(lines[4]) == pytest.approx(-1 / 12, rel=1e-12)

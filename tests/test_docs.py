"""The documentation says what the code does: docstrings render as written."""

import importlib
import inspect
import pkgutil
import re

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

"""Sub-commands of the ``jaxdp`` CLI, one module each (see :mod:`jaxdp.cli`)."""

import math
import os
import tempfile


def json_number(x: float):
    """``x`` for JSON output: finite numbers as they are, ``nan``/``inf``/``-inf`` as strings
    (strict JSON has no non-finite numbers; ``json.dumps`` would write ``Infinity``)."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def as_given(x: float) -> str:
    """``x`` for a table, as the user typed it: the shortest text that reads back as the same
    float, without a trailing ``.0`` (a fixed number of significant digits showed different
    inputs, e.g. 1 and 1.000000001, as the same number)."""
    return repr(float(x)).removesuffix(".0")


def prepare_out_dir(path: str) -> str:
    """Create the ``--out`` directory ``path`` if needed and check that files can be written
    there; return ``path``.

    Raises:
        ValueError: one line naming ``--out``: empty, a file, cannot be created or written.
    """
    if not path:
        raise ValueError("--out: empty path")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--out: {path!r} exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--out: cannot create directory {path!r}: {e.strerror or e}") from None
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise ValueError(f"--out: cannot write to {path!r}: {e.strerror or e}") from None
    return path

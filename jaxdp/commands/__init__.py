"""Sub-commands of the ``jaxdp`` CLI, one module each (see :mod:`jaxdp.cli`)."""

import math


def json_number(x: float):
    """``x`` for JSON output: finite numbers as they are, ``nan``/``inf``/``-inf`` as strings
    (strict JSON has no non-finite numbers; ``json.dumps`` would write ``Infinity``)."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))

"""``python -m jaxdp``: the ``jaxdp`` command (:mod:`jaxdp.cli`), with the console script's
Ctrl-C handling (``_jaxdp_launcher``; installed beside the package) where it is importable."""

import sys

if __name__ == "__main__":  # (imported, e.g. by a scan of the package's modules: nothing)
    try:
        from _jaxdp_launcher import main
    except ImportError:  # a source tree on sys.path without the installed launcher module
        from jaxdp.cli import main

    sys.exit(main())

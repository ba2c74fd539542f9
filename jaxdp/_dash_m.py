"""``python -m jaxdp``: the console script's Ctrl-C handling from the start.

Python imports the package, and with it JAX (~2 s), before it runs ``jaxdp/__main__.py``, so
the SIGINT handler of ``_jaxdp_launcher`` installed there came too late: Ctrl-C in those
seconds printed a 35-line traceback (exit 1), or was swallowed in one of JAX's garbage-collection
callbacks and the command ran to its end (exit 0). While it locates the module of ``-m``, Python
sets ``sys.argv[0]`` to ``"-m"``, which a process sees while importing jaxdp only when it runs
``python -m jaxdp`` (or ``jaxdp.cli``): this module, imported first by ``jaxdp/__init__.py``,
installs the handler then, and otherwise does nothing.
"""

import sys

if getattr(sys, "argv", [])[:1] == ["-m"]:
    try:
        from _jaxdp_launcher import install
    except ImportError:  # a source tree on sys.path without the installed launcher module
        pass
    else:
        install()

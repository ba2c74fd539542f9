"""``python -m jaxdp``: the console script's Ctrl-C handling from the start.

Python imports the package, and with it JAX (~2 s), before it runs ``jaxdp/__main__.py``, so
the SIGINT handler of ``_jaxdp_launcher`` installed there came too late: Ctrl-C in those
seconds printed a 35-line traceback (exit 1), or was swallowed in one of JAX's garbage-collection
callbacks and the command ran to its end (exit 0). While it locates the module of ``-m``, Python
sets ``sys.argv[0]`` to ``"-m"``; this module, imported first by ``jaxdp/__init__.py``,
installs the handler then, and only when the interpreter's own command line
(``sys.orig_argv``) names ``jaxdp`` or ``jaxdp.cli`` after ``-m``: a user's
``python -m theirpackage`` whose package imports jaxdp keeps its own SIGINT handling.
"""

import sys


def _dash_m_target(orig_argv) -> str | None:
    """The module named by ``-m`` in an interpreter command line (``-m NAME``, ``-mNAME``,
    ``-Im NAME``), or None when the interpreter runs a script, ``-c`` or stdin instead."""
    args = iter(orig_argv[1:])
    for arg in args:
        if arg == "--check-hash-based-pycs":
            next(args, None)
        if arg == "--" or not arg.startswith("-") or arg == "-":
            return None
        if arg.startswith("--"):
            continue
        for j, flag in enumerate(arg[1:], start=2):
            if flag in "mcWX":  # the rest of the word, or the next one, is its value
                value = arg[j:] or next(args, None)
                if flag == "m":
                    return value
                if flag == "c":
                    return None
                break
    return None


if getattr(sys, "argv", [])[:1] == ["-m"] and _dash_m_target(getattr(sys, "orig_argv", [])) in (
    "jaxdp",
    "jaxdp.cli",
):
    try:
        from _jaxdp_launcher import install
    except ImportError:  # a source tree on sys.path without the installed launcher module
        pass
    else:
        install()

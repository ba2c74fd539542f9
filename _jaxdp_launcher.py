"""Entry point of the ``jaxdp`` console script; a module outside the package on purpose.

Ctrl-C must end a command with one line (``jaxdp: error: interrupted``) and exit status 2
wherever it lands, and ``KeyboardInterrupt`` cannot promise that:

* while Python imports jaxdp and JAX (~2 s) no code of the package runs yet, so the
  interpreter printed its traceback; only a module outside the package can install a handler
  that early;
* raised inside one of JAX's garbage-collection callbacks, Python ignores it ("Exception
  ignored in: <function _xla_gc_callback ...>") and the command ran on to the end;
* after the one line, the interpreter's shutdown raced XLA's running threads and the process
  died of SIGSEGV (exit 139 in 5 of 6 tries).

So here SIGINT ends the process at once, after flushing what was printed, without unwinding
or interpreter shutdown. That leaves what SIGKILL leaves: a sweep resumes from its finished
chunks (its directory lock is an ``flock``, released by the kernel). ``jaxdp.cli.main``
called in-process keeps Python's handler and reports a ``KeyboardInterrupt`` the same way.
"""

import os
import signal
import sys


def _interrupted(signum, frame):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a write in progress (reentrant), a closed pipe
            pass
    try:
        os.write(2, b"jaxdp: error: interrupted\n")
    finally:
        os._exit(2)


def install() -> None:
    """Make SIGINT end the process as described above (also used by ``jaxdp/_dash_m.py``)."""
    signal.signal(signal.SIGINT, _interrupted)


def main() -> int:
    install()
    from jaxdp.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())

"""The ``jaxdp`` command line.

Each sub-command lives in its own module under :mod:`jaxdp.commands` and exposes
``add_parser(subparsers)`` and ``run(args) -> int``. Sub-command modules are imported lazily so
that ``jaxdp --help`` stays fast. The CLI works in float64 (it enables ``jax_enable_x64``
explicitly, as the library itself never does).

Compile cache: the CLI turns on JAX's persistent compilation cache (see
:mod:`jaxdp.compile_cache`), so a second run loads the solvers instead of compiling them again
(``jaxdp chernoff laplace --epsilon 1``: 2.9 s -> 1.5 s). The directory is
``$JAXDP_COMPILE_CACHE`` if set (``off``, ``none``, ``no``, ``false``, ``0`` or empty disable
it), else JAX's own ``$JAX_COMPILATION_CACHE_DIR`` if set, else
:func:`jaxdp.default_compile_cache_dir`; the flag ``--no-compile-cache`` (before or after the
command's name) disables it for one run. An unusable default directory only means no
cache; an unusable ``$JAXDP_COMPILE_CACHE`` is an error. Entries JAX cannot read (cut short
by a process killed while writing them) are deleted after the run, with a one-line note,
instead of being warned about on every run (:func:`jaxdp.compile_cache.repairing`).

Errors: any ``ValueError``/``TypeError``/``OSError``/``OverflowError``/``MemoryError``, or a
JAX runtime error (``jax.errors.JaxRuntimeError``, e.g. XLA's ``RESOURCE_EXHAUSTED`` when an
array does not fit memory), raised while parsing or running a command is printed as a single
line ``jaxdp: error: ...`` on stderr with exit status 2; no traceback. So is a backend JAX
cannot start (``JAX_PLATFORMS=cuda`` on a host without an NVIDIA GPU), found before the
command runs. So is Ctrl-C
(``jaxdp: error: interrupted``), wherever it lands (the console script's entry point,
``_jaxdp_launcher``, installs the handler before jaxdp and JAX are imported). Output into a
pipe whose reader has gone (``| head -1``) ends the command quietly with status 141, as
SIGPIPE ends ``cat``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Sequence

from jaxdp._checks import error_line

CACHE_ENV = "JAXDP_COMPILE_CACHE"

# name -> (module, one-line help). Order is the order shown by ``jaxdp --help``.
COMMANDS: dict[str, tuple[str, str]] = {
    "reproduce": ("jaxdp.commands.reproduce", "regenerate the paper's figures with exact curves"),
    "chernoff": ("jaxdp.commands.chernoff", "exact Chernoff information of a mechanism pair"),
    "calibrate": (
        "jaxdp.commands.calibrate",
        "noise scale (or epsilon) for a Chernoff/KL/TV budget",
    ),
    "sweep": ("jaxdp.commands.sweep", "chunked, sharded, resumable parameter sweep"),
    "bench": ("jaxdp.commands.bench", "run the benchmark suite"),
}


class _StoreOnce(argparse.Action):
    """``store`` that refuses a second occurrence: ``--sensitivity 1 --sensitivity 2``
    silently kept the last value."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_jaxdp_seen", set())
        if self.dest in seen:
            parser.error(f"argument {option_string}: given more than once")
        seen.add(self.dest)
        setattr(namespace, self.dest, values)


class _Parser(argparse.ArgumentParser):
    # argparse takes "-1" and "-.5" for negative numbers but "-1e5" for an option, so that
    # `--shift -1e5` said "expected one argument": also scientific notation and -inf/-nan (no
    # option of jaxdp looks like a number; subparsers are built with this class too)
    _NEGATIVE_NUMBER = re.compile(
        r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = self._NEGATIVE_NUMBER

    def error(self, message: str) -> None:  # one line, non-zero exit, no usage dump
        raise SystemExit(_fail(message))

    def add_argument(self, *args, **kwargs):
        return super().add_argument(*args, **_once(args, kwargs))

    def add_argument_group(self, *args, **kwargs):
        # (a group's options, e.g. sweep's --coordinator, bypassed add_argument above: given
        # twice, the last one was used, silently)
        group = super().add_argument_group(*args, **kwargs)
        add = group.add_argument
        group.add_argument = lambda *a, **kw: add(*a, **_once(a, kw))
        return group


def _once(args: tuple, kwargs: dict) -> dict:
    """Every single-valued option is given at most once (repeatable ones use "append")."""
    if args and args[0].startswith("--") and kwargs.get("action", "store") == "store":
        kwargs = {**kwargs, "action": _StoreOnce}
    return kwargs


def _fail(message: str) -> int:
    print(f"jaxdp: error: {message}", file=sys.stderr)
    return 2


def _available() -> dict[str, object]:
    modules = {}
    for name, (module_name, _) in COMMANDS.items():
        try:
            modules[name] = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    # (not the module docstring's first line: its reST markup showed as ``jaxdp``)
    parser = _Parser(
        prog="jaxdp",
        description="Exact Chernoff information and divergences for differential privacy.",
    )
    from jaxdp import __version__

    parser.add_argument("--version", action="version", version=f"jaxdp {__version__}")
    no_cache_help = (
        "do not use jaxdp's on-disk cache of compiled solvers (default: "
        "$JAXDP_COMPILE_CACHE, else $JAX_COMPILATION_CACHE_DIR, else "
        "$XDG_CACHE_HOME/jaxdp/xla-<host>, ~/.cache/jaxdp/xla-<host> when unset; "
        "JAXDP_COMPILE_CACHE=off also disables it); a cache of JAX's own "
        "($JAX_COMPILATION_CACHE_DIR) is left on, also with this flag"
    )
    parser.add_argument("--no-compile-cache", action="store_true", help=no_cache_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in _available().items():
        p = sub.add_parser(name, help=COMMANDS[name][1], description=COMMANDS[name][1])
        module.add_parser(p)
        # also after the command's name ('jaxdp chernoff ... --no-compile-cache' was an
        # unrecognized argument); SUPPRESS: absent there, the top-level value stands
        p.add_argument(
            "--no-compile-cache", action="store_true", default=argparse.SUPPRESS, help=no_cache_help
        )
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # (Ctrl-C while the command modules load, or in the parser: one line too. The console
    # script enters through _jaxdp_launcher, whose SIGINT handler ends the process at once
    # from the start, also while Python imports jaxdp; see its docstring for why)
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return _fail("interrupted")
    if getattr(args, "_run", None) is None:  # one line, as for every other usage error
        return _fail(f"a command is required: {', '.join(COMMANDS)} (jaxdp --help)")
    try:
        from jaxdp.compile_cache import repairing

        cache = None if args.no_compile_cache else _compile_cache()
        if not getattr(args, "distributed", False):  # (it must come before the backend)
            _start_backend()
        with contextlib.nullcontext({}) if cache is None else repairing(cache) as damaged:
            status = int(args._run(args) or 0)
        if removed := sorted(name for name, why in damaged.items() if why is None):
            print(
                f"jaxdp: note: removed unreadable compile-cache entries for "
                f"{', '.join(removed)} from {cache}",
                file=sys.stderr,
            )
        if kept := sorted((name, why) for name, why in damaged.items() if why is not None):
            # (were reported as removed, and warned about again on every run)
            names = ", ".join(f"{name} ({why})" for name, why in kept)
            print(
                f"jaxdp: note: could not remove unreadable compile-cache entries for {names} "
                f"from {cache}; delete them by hand",
                file=sys.stderr,
            )
        return status
    except KeyboardInterrupt:
        return _fail("interrupted")
    except BrokenPipeError:  # (was "jaxdp: error: [Errno 32] Broken pipe")
        return _reader_gone()
    except (ValueError, TypeError, OSError, KeyError, OverflowError) as e:
        msg = error_line(e)
        return _fail(msg)
    except MemoryError as e:  # (numpy's allocation errors say how much and for what shape)
        msg = error_line(e, "no details")
        return _fail(f"out of memory: {msg}")
    except _jax_runtime_errors() as e:  # XLA's own failures, e.g. RESOURCE_EXHAUSTED
        msg = error_line(e)
        if "RESOURCE_EXHAUSTED" in msg:
            return _fail(f"out of memory: {msg}")
        return _fail(f"XLA: {msg}")


def _reader_gone() -> int:
    """The reader of stdout went away (``jaxdp chernoff ... | head -1``): stop quietly, as
    ``cat`` does, with the status of a process ended by SIGPIPE; what is left in stdout's
    buffer goes to /dev/null instead of failing again when Python exits."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 128 + 13  # (13: SIGPIPE)


def _start_backend() -> None:
    """Start JAX's backend before the command runs.

    Raises:
        ValueError: JAX cannot start it, naming ``$JAX_PLATFORMS`` when set (e.g. ``cuda``
            on a host without an NVIDIA GPU, or a backend not installed: a 40-line
            traceback from the command's first array, JAX's ``RuntimeError`` or, for
            ``cuda``, a bare ``AssertionError``).
    """
    import jax

    try:
        jax.devices()
    except (RuntimeError, AssertionError) as e:
        why = error_line(e, "no device of that kind found")
        where = f" (JAX_PLATFORMS={p!r})" if (p := os.environ.get("JAX_PLATFORMS")) else ""
        raise ValueError(f"JAX cannot start its backend{where}: {why}") from None


def _jax_runtime_errors() -> tuple[type[BaseException], ...]:
    """JAX's runtime error class(es): ``jax.errors.JaxRuntimeError`` (older: jaxlib's
    ``XlaRuntimeError``)."""
    import jax

    found = getattr(jax.errors, "JaxRuntimeError", None)
    if found is None:  # pragma: no cover - older jax
        from jax._src.lib import xla_client

        found = xla_client.XlaRuntimeError
    return (found,)


def _compile_cache() -> str | None:
    """Turn on the persistent compilation cache as documented above; return its directory
    (``None``: no cache, or the user's own JAX cache, which is left alone)."""
    import jax

    from jaxdp.compile_cache import enable_compile_cache

    env = os.environ.get(CACHE_ENV)
    if env is not None:
        # ('none' made a cache directory named ./none)
        if env.strip().lower() in ("", "0", "off", "none", "no", "false"):
            return None
        try:
            return enable_compile_cache(env)
        except ValueError as e:
            raise ValueError(f"{CACHE_ENV}: {str(e).removeprefix('path: ')}") from None
    if jax.config.jax_compilation_cache_dir:  # the user's own JAX cache settings stand
        return None
    try:
        return enable_compile_cache()
    except ValueError:  # no writable cache directory: run without one
        return None


if __name__ == "__main__":
    sys.exit(main())

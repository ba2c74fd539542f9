"""Opt-in persistent compilation cache for jaxdp's compiled solvers.

XLA:CPU takes 1-4 s to compile one jaxdp entry point for one batch shape (``chernoff`` on
Laplace pairs ~1.3 s, discrete Laplace ~3 s; ``benchmarks/kernels.py`` measures it), most
of it in LLVM and XLA's fusion emitters. JAX's persistent compilation cache writes each
executable to disk; a later process that traces the same computation loads it instead and
pays 0.2-0.8 s in all, mostly Python tracing (the ``from disk cache s`` column of
``benchmarks/bench_speed.py``). The cache is process-wide JAX configuration, so the
library never turns it on by itself: call :func:`enable_compile_cache`, or use the ``jaxdp``
command line, which enables it (see its ``--help``).

The cache is trusted code: anyone who can write to the directory can make your JAX process
run code of theirs. The default directory is private to the user (mode 0700).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import math
import os
import platform
import re
import warnings
from collections.abc import Iterator

__all__ = ["default_compile_cache_dir", "enable_compile_cache"]


def _host_tag() -> str:
    """Short hash of what a cached executable depends on beyond the computation itself:
    the jax/jaxlib versions and, for XLA:CPU code, the host CPU's instruction sets (a home
    directory shared across a cluster must not hand AVX-512 code to an older node)."""
    import jax
    import jaxlib

    parts = [jax.__version__, getattr(jaxlib, "__version__", ""), platform.machine()]
    try:
        with open("/proc/cpuinfo") as f:
            parts += sorted({line for line in f if line.startswith(("flags", "Features"))})
    except OSError:  # not Linux: the processor name is the best portable stand-in
        parts.append(platform.processor())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def default_compile_cache_dir() -> str:
    """``$XDG_CACHE_HOME/jaxdp/xla-<host>`` (``~/.cache`` when unset or, as the XDG spec
    says, not an absolute path), where ``<host>`` hashes the jax/jaxlib versions and the
    CPU's instruction sets.

    Returns:
      The directory, an absolute path (not created here).

    Raises:
      ValueError: there is no home directory (``$HOME`` unset and the user has no passwd
        entry, as for an arbitrary uid in a container) and ``$XDG_CACHE_HOME`` is not set.
    """
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        # without $HOME and a passwd entry, expanduser leaves "~" as is: a relative path,
        # and the cache went to a directory named "~" in the working directory
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            raise ValueError(
                "no home directory for the compile cache: set $XDG_CACHE_HOME or pass a path"
            )
        base = os.path.join(home, ".cache")
    return os.path.join(base, "jaxdp", f"xla-{_host_tag()}")


def enable_compile_cache(
    path: str | bytes | os.PathLike | None = None, *, min_compile_time_s=0.0
) -> str:
    """Turn on JAX's persistent compilation cache for this process, in ``path``.

    Args:
      path: directory for the compiled executables (created, mode 0700, if missing);
        default :func:`default_compile_cache_dir`. An explicit path is used as given: do
        not share it between machines with different CPUs.
      min_compile_time_s: cache only executables whose compilation took at least this
        long (JAX's own default is 1 s, which skips some of jaxdp's kernels).

    Returns:
      The directory in use.

    Raises:
      ValueError: ``path`` cannot be created, is not a writable directory or is not valid
        UTF-8 (or is not given, and there is no home directory: see
        :func:`default_compile_cache_dir`), or
        ``min_compile_time_s`` is negative or not finite.
      TypeError: ``path`` is not a str, bytes or path-like object.
    """
    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    try:
        t = float(min_compile_time_s)
    except (TypeError, ValueError):
        t = math.nan
    if isinstance(min_compile_time_s, bool) or not math.isfinite(t) or t < 0:
        raise ValueError(f"min_compile_time_s must be finite and >= 0, got {min_compile_time_s!r}")
    try:  # (bytes too: JAX's config takes only str, and refused them unnamed)
        path = default_compile_cache_dir() if path is None else os.fsdecode(path)
    except TypeError:
        raise TypeError(
            f"path must be a str, bytes or os.PathLike, got {type(path).__name__}"
        ) from None
    if not path:
        raise ValueError("path must be a directory, got an empty string")
    try:  # (JAX's C++ options take only UTF-8: with such a path set, every later jit failed
        # with "(): incompatible function arguments", naming nothing)
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"path: {os.fsencode(path)!r} is not valid UTF-8, which JAX's cache needs"
        ) from None
    path = os.path.abspath(os.path.expanduser(path))
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as e:
        raise ValueError(f"path: cannot create compile cache directory {path!r}: {e}") from None
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"path: {path!r} is not a writable directory")
    if jax.config.jax_compilation_cache_dir != path:
        cc.set_cache_dir(path)
        cc.reset_cache()  # JAX opens its cache once per process; reopen it at the new path
    jax.config.update("jax_persistent_cache_min_compile_time_secs", t)
    return path


_UNREADABLE = re.compile(r"Error reading persistent compilation cache entry for '([^']+)'")


@contextlib.contextmanager
def repairing(path: str) -> Iterator[dict[str, str | None]]:
    """Within the block, JAX's warnings about cache entries it cannot read are collected
    instead of shown, and afterwards every entry of those computations is deleted from
    ``path``; yields a dict (filled when the block ends) from each of their names to
    ``None`` when its entries are gone, or to why one of them could not be deleted (e.g.
    ``"Is a directory"``, or an entry of another user in a shared directory with the sticky
    bit set: reported as removed, it was warned about on every run).

    JAX writes an entry in place and never rewrites one that exists, so an entry cut short
    (a process killed while writing it, two processes writing it at once) would otherwise
    be warned about, and recompiled, on every later run. Other warnings pass through.
    """
    damaged: dict[str, str | None] = {}
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        m = _UNREADABLE.match(str(message))
        if m is None:
            shown(message, category, filename, lineno, file, line)
        else:
            damaged[m.group(1)] = None

    warnings.showwarning = show
    try:
        yield damaged
    finally:
        warnings.showwarning = shown
        for name in damaged:  # module names are identifiers: "<name>-<hash>-cache/-atime"
            for entry in glob.glob(os.path.join(glob.escape(path), glob.escape(name) + "-*")):
                try:
                    os.remove(entry)
                except FileNotFoundError:  # (removed meanwhile, e.g. by another process)
                    pass
                except OSError as e:
                    damaged[name] = damaged[name] or e.strerror or type(e).__name__

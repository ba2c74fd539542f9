"""Test configuration: float64 is the reference precision, so tests enable x64 explicitly."""

import os
import shutil
import tempfile

import jax
from hypothesis import settings

# Tests call the CLI in-process; it must not turn on the persistent compilation cache (a
# process-wide JAX setting) or write to the user's cache directory. test_compile_cache.py
# covers the cache in subprocesses.
os.environ["JAXDP_COMPILE_CACHE"] = "off"

jax.config.update("jax_enable_x64", True)

# Property tests draw the same examples on every run, so CI is reproducible.
settings.register_profile("jaxdp", derandomize=True)
settings.load_profile("jaxdp")


# One persistent compilation cache per test run, shared by the xdist workers: tests of one
# module run in both workers and compile the same programs (the module-level solved
# batches, the reference cases' gradients); the second worker loads them instead. Created
# by the controlling process before it starts the workers (they inherit the variable) and
# removed when the run ends. Tests of the cache itself run in subprocesses of their own.
_RUN_CACHE = "JAXDP_TEST_RUN_XLA_CACHE"


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controlling process (or a run without -n)
        config._jaxdp_run_cache = os.environ[_RUN_CACHE] = tempfile.mkdtemp(prefix="jaxdp-xla-")
    path = os.environ.get(_RUN_CACHE)  # (a worker on another host has none: no cache)
    if path:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)


def pytest_unconfigure(config):
    path = getattr(config, "_jaxdp_run_cache", None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)

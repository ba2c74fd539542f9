"""Test configuration: float64 is the reference precision, so tests enable x64 explicitly."""

import os
import shutil
import subprocess
import sys
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


# The suite compiles ~2700 programs and spends most of its time in XLA:CPU. Two compiler
# options cut that time, at the cost of slower programs, which tests on a few pairs never
# notice: XLA's older elemental emitters instead of the MLIR fusion emitters (whole suite on
# 2 cores: 555 -> 342 s at e6760a1; programs 2-3.5x slower), and LLVM without its expensive
# passes (test_density_gradients.py alone: 84 -> 71 CPU-s). Users get the defaults (what
# jaxdp is tuned and benchmarked with). tests/test_default_emitters.py checks that both give
# the same numbers, to the last bit, on every solver path. (LLVM at -O0 would cut another 20%
# but changes the last bits of some results, and a float32 allocation 9% off with the
# default options came out right: the tests would check programs users never run.)
# JAXDP_TEST_DEFAULT_EMITTERS=1 runs the suite with the default options.
FAST_COMPILE_FLAGS = (
    "--xla_cpu_use_fusion_emitters=false",
    "--xla_llvm_disable_expensive_passes=true",
)


def _use_fast_compile_flags() -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    names = [f.lstrip("-").partition("=")[0] for f in FAST_COMPILE_FLAGS]
    if os.environ.get("JAXDP_TEST_DEFAULT_EMITTERS") or any(n in flags for n in names):
        return
    flags = " ".join([flags, *FAST_COMPILE_FLAGS]).strip()
    # XLA aborts the process on a flag it does not know (a jaxlib without the option): try it
    # in a subprocess first. The workers inherit the variable; JAX reads it when it starts a
    # backend, which no test has done yet.
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"],
            env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired):  # no answer: the default options then
        return
    if probe.returncode == 0:
        os.environ["XLA_FLAGS"] = flags


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controlling process (or a run without -n)
        _use_fast_compile_flags()
        config._jaxdp_run_cache = os.environ[_RUN_CACHE] = tempfile.mkdtemp(prefix="jaxdp-xla-")
    path = os.environ.get(_RUN_CACHE)  # (a worker on another host has none: no cache)
    if path:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)


def pytest_unconfigure(config):
    path = getattr(config, "_jaxdp_run_cache", None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)

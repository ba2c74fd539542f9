"""Test configuration: float64 is the reference precision, so tests enable x64 explicitly."""

import os

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

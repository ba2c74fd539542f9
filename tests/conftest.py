"""Test configuration: float64 is the reference precision, so tests enable x64 explicitly."""

import jax
from hypothesis import settings

jax.config.update("jax_enable_x64", True)

# Property tests draw the same examples on every run, so CI is reproducible.
settings.register_profile("jaxdp", derandomize=True)
settings.load_profile("jaxdp")

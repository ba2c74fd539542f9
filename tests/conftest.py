"""Test configuration: float64 is the reference precision, so tests enable x64 explicitly."""

import jax

jax.config.update("jax_enable_x64", True)

"""Autodiff references shared by the kernel tests: the value of ``log C_a`` and its first
three derivatives in ``a`` by nested forward-mode differentiation of ``raw_log_bc`` (the
hand-written ``value_derivs`` of the kernels are tested equal to these)."""

import jax
import jax.numpy as jnp

from jaxdp.coefficient import raw_log_bc


@jax.jit
def autodiff3(P, Q, a):
    """``(log C_a, d/da, d2/da2, d3/da3)`` elementwise, by nested ``jax.jvp``."""

    def f(t):
        return raw_log_bc(P, Q, t)

    ones = jnp.ones_like(a)
    d1 = lambda t: jax.jvp(f, (t,), (ones,))[1]  # noqa: E731
    d2 = lambda t: jax.jvp(d1, (t,), (ones,))[1]  # noqa: E731
    return f(a), d1(a), d2(a), jax.jvp(d2, (a,), (ones,))[1]

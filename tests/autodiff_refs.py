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

    # one nest of jvps whose primal outputs carry the lower orders: tracing f, d1, d2 and
    # d3 on their own traced (and compiled) 15 copies of log_bc's code against 8 (discrete
    # Laplace: 10.5 -> 7.9 s of compile, ad hoc timing, the same bits)
    ones = jnp.ones_like(a)
    g1 = lambda t: jax.jvp(f, (t,), (ones,))  # noqa: E731
    g2 = lambda t: jax.jvp(g1, (t,), (ones,))  # noqa: E731
    ((value, d1), (_, d2)), (_, (_, d3)) = jax.jvp(g2, (a,), (ones,))
    return value, d1, d2, d3


def assert_nan_gradients_exactly_where_invalid(grads, x, fill):
    """``grads(x)``, a dict of gradient arrays, is ``nan`` at ``x[::2]`` (the invalid
    elements) and, at ``x[1::2]``, equal to the gradients of a batch without invalid
    elements (those replaced by ``fill``), which are finite: a mask, not a ``where``, gives
    ``nan`` derivatives at invalid traced arguments without touching their neighbours."""
    import numpy as np

    valid = grads(np.where(np.arange(len(x)) % 2, x, fill))
    for name, g in grads(x).items():
        assert np.all(np.isnan(g[::2])), (name, g)
        assert np.all(np.isfinite(valid[name])), (name, valid[name])
        np.testing.assert_array_equal(g[1::2], valid[name][1::2], err_msg=name)

"""``jax.jit`` with jaxdp's compiler options for the CPU backend.

XLA:CPU vectorizes for 256-bit registers by default, even on CPUs with AVX-512. The
elementwise kernels here (long chains of fused arithmetic per distribution pair) run
15-25% faster with 512-bit vectors where the CPU has them (measured on the Chernoff
solver, one core, batch 1e5: ``benchmarks/bench_speed.py``); on CPUs without AVX-512 the
hint changes nothing. The option is attached to jaxdp's own compiled entry points only
(no global configuration is touched), and only when compiling for the CPU backend. A
caller who wraps jaxdp functions in their own ``jax.jit`` compiles them with *their*
options; pass ``compiler_options=jaxdp.CPU_COMPILER_OPTIONS`` there to keep the gain.
"""

from __future__ import annotations

import functools

import jax

__all__ = ["CPU_COMPILER_OPTIONS", "jit"]

#: XLA compiler options jaxdp uses for its own CPU compilations.
CPU_COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}


def jit(fun=None, **jit_kwargs):
    """Like :func:`jax.jit` (usable as a decorator, with or without arguments), adding
    :data:`CPU_COMPILER_OPTIONS` when called at top level with the CPU as default backend.

    Inside another transformation (an outer ``jit``, ``vmap``, ``grad``) JAX accepts no
    compiler options on a nested ``jit``, so the plain one is used there.
    """
    if fun is None:
        return functools.partial(jit, **jit_kwargs)
    plain = jax.jit(fun, **jit_kwargs)
    cpu = jax.jit(fun, compiler_options=CPU_COMPILER_OPTIONS, **jit_kwargs)

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if jax.default_backend() != "cpu" or any(isinstance(x, jax.core.Tracer) for x in leaves):
            return plain(*args, **kwargs)
        try:
            return cpu(*args, **kwargs)
        except ValueError as e:  # traced with concrete arguments (closed-over constants)
            if "compiler_options" not in str(e):
                raise
            return plain(*args, **kwargs)

    return wrapper

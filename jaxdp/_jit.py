"""``jax.jit`` with jaxdp's compiler options for the CPU backend.

XLA:CPU vectorizes for 256-bit registers by default, even on CPUs with AVX-512. The
elementwise kernels here (long chains of fused arithmetic per distribution pair) run
15-25% faster with 512-bit vectors where the CPU has them (measured on the Chernoff
solver, one core, batch 1e5: ``benchmarks/bench_speed.py``); on CPUs without AVX-512 the
hint changes nothing. The option is attached to jaxdp's own compiled entry points only
(no global configuration is touched), and only when compiling for the CPU backend (also on
a GPU host, for arrays put on a CPU device). A
caller who wraps jaxdp functions in their own ``jax.jit`` compiles them with *their*
options; pass ``compiler_options=jaxdp.CPU_COMPILER_OPTIONS`` there to keep the gain.
"""

from __future__ import annotations

import functools

import jax

__all__ = ["CPU_COMPILER_OPTIONS", "jit"]

#: XLA compiler options jaxdp uses for its own CPU compilations.
CPU_COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}


def platform(args) -> str:
    """The platform a top-level ``jax.jit`` call on ``args`` compiles for: that of the first
    array committed to a device (``jax.device_put`` to one), else the default device's
    (``jax.default_device``, then the default backend). On a GPU host, arrays put on a CPU
    device are solved by XLA:CPU, and need its options too."""
    for x in jax.tree_util.tree_leaves(args):
        if isinstance(x, jax.Array) and x.committed:
            return next(iter(x.devices())).platform
    default = jax.config.jax_default_device
    if default is not None:
        return default if isinstance(default, str) else default.platform
    return jax.default_backend()


def jit(fun=None, **jit_kwargs):
    """Like :func:`jax.jit` (usable as a decorator, with or without arguments), adding
    :data:`CPU_COMPILER_OPTIONS` when called at top level for the CPU (:func:`platform`).

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
        if any(isinstance(x, jax.core.Tracer) for x in leaves) or platform(leaves) != "cpu":
            return plain(*args, **kwargs)
        try:
            return cpu(*args, **kwargs)
        except ValueError as e:  # traced with concrete arguments (closed-over constants)
            if "compiler_options" not in str(e):
                raise
            return plain(*args, **kwargs)

    wrapper._jaxdp_variants = {"plain": plain, "cpu": cpu}  # for tests
    return wrapper

"""Closed-form and quadrature kernels, one module per family pair.

Every kernel module exposes ``log_bc(P, Q, a)`` (valid for ``a`` in ``[0, 1]`` and, where the
integral converges, for ``a > 1``: Rényi orders above 1; ``+inf`` where it diverges),
``kl(P, Q)`` and ``tv(P, Q)``. Inputs are already validated and broadcast by the caller.
"""

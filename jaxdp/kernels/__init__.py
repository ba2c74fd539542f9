"""Closed-form and quadrature kernels, one module per family pair.

Every kernel module exposes ``log_bc(P, Q, a)`` (valid for ``a`` in ``[0, 1]`` and, where the
integral converges, for ``a > 1``: Rényi orders above 1; ``+inf`` where it diverges),
``kl(P, Q)`` and ``tv(P, Q)``. Inputs are already validated and broadcast by the caller.
A module whose ``log_bc`` carries a separate branch for ``a > 1`` may add
``log_bc_unit(P, Q, a)``, the same values for ``a`` in ``[0, 1]`` without it: the solver,
``jaxdp.log_bc`` and the envelope theorem's gradient use it (Laplace and discrete Laplace,
whose gradients otherwise differentiate a branch they then discard). A module may add
``log_bc_solver(P, Q, a)`` too, a cheaper rule for the Chernoff solver's own evaluations
(quadrature: without the integrand's peaks as breakpoints; the solver adds them itself).
"""

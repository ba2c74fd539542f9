r"""Same-family components of a :class:`~jaxdp.Product`, stacked and summed by one kernel.

Additivity over products (DESIGN §4),
:math:`\log C_a(\otimes_i P_i, \otimes_i Q_i) = \sum_i n_i \log C_a(P_i, Q_i)`, makes a
product's kernel a sum over its components. Summed one component at a time, every
component puts its own copy of its family's kernel into the compiled program, and XLA:CPU
pays for each (the chernoff of 8 distinct Laplace pairs compiled 177 kernels, of 2 pairs 51;
``tests/test_composition.py`` asserts that both now compile as many). Components of one
family (Laplace, Gaussian, discrete Laplace, categorical with one number of categories) are
instead stacked into a :class:`Stack`: one distribution of that family whose parameters
carry the components on a leading axis (in front of the batch axes; the categories stay
last), whose kernel (:func:`kernel`) evaluates the family's kernel once over that axis and
sums it with the counts as weights. :func:`jaxdp.coefficient.group_product` builds the stacks.

A stack holds its components already standardized (``jaxdp.coefficient.standardize``), as
the family kernels expect their inputs (KL's Laplace and Gaussian stacks: some as they are,
as ``jaxdp.kl`` reads single pairs, its kernels being made of ratios); its kernel is only
ever reached through a :class:`~jaxdp.Product`, whose solver never asks a component for a
starting point or a swap.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from jaxdp.distributions import Distribution

__all__ = ["Stack", "kernel"]


class Stack(Distribution):
    """``m`` distributions of one family as one: ``base`` has parameters of shape
    ``(m, *batch_shape)``; ``weights`` (static) are the components' counts."""

    _data_fields = ("base",)
    _meta_fields = ("weights",)
    support_kind: ClassVar[str] = "stack"
    base: Distribution
    weights: tuple[int, ...]

    def __init__(self, base: Distribution, weights):
        self._set(base=base, weights=tuple(int(w) for w in weights))

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.base.batch_shape[1:])

    @property
    def dtype(self):
        return self.base.dtype

    def _invalid(self):
        """Where any component has parameters its constructor would have rejected (one
        check over the stack: chernoff masks the grouped pair; without it, a NaN or negative
        categorical mass of a stacked component gave a finite, "converged" information).
        The components are standardized, which keeps an invalid scale or location invalid
        (a NaN location of ``P`` moves into ``Q``'s)."""
        bad = self.base._invalid()
        if bad is False:
            return False
        return jnp.any(bad, axis=0)

    def __repr__(self):
        return f"Stack({self.base!r}, weights={self.weights})"


class _StackKernel:
    """A family kernel summed over a stack's leading axis (see the module docstring)."""

    def __init__(self, base, weights, nb):
        self.base, self.nb = base, nb
        self.weights = np.asarray(weights, np.float64).reshape((-1,) + (1,) * nb)
        self.SAME_SUPPORT = getattr(base, "SAME_SUPPORT", False)
        self.SIGNED_STEP = getattr(base, "SIGNED_STEP", True)
        # the solver asks for these with hasattr: present only where the family has them
        self.log_bc_unit = self._log_bc_unit if hasattr(base, "log_bc_unit") else self.log_bc
        for name in ("derivs_setup", "derivs", "value_derivs"):
            if hasattr(base, name):
                setattr(self, name, getattr(self, "_" + name))

    def _sum(self, x):
        """``sum_i w_i x_i`` over the stack axis (in front of the batch axes)."""
        return jnp.sum(self.weights.astype(x.dtype) * x, axis=x.ndim - self.nb - 1)

    def _call(self, fn, args, a):
        # alpha broadcasts over the batch (it may have fewer axes) and may carry leading axes
        # of its own (the two end points): a new axis in front of its batch axes meets the
        # stack axis
        a = jnp.asarray(a)
        a = a.reshape((1,) * (self.nb - a.ndim) + a.shape)
        out = fn(*args, jnp.expand_dims(a, a.ndim - self.nb))
        if isinstance(out, tuple):
            return tuple(self._sum(x) for x in out)
        return self._sum(out)

    def log_bc(self, P, Q, a):
        return self._call(self.base.log_bc, (P.base, Q.base), a)

    def _log_bc_unit(self, P, Q, a):
        return self._call(self.base.log_bc_unit, (P.base, Q.base), a)

    def kl(self, P, Q):
        return self._sum(self.base.kl(P.base, Q.base))

    def _derivs_setup(self, P, Q):
        return self.base.derivs_setup(P.base, Q.base)

    def _derivs(self, consts, a):
        return self._call(self.base.derivs, (consts,), a)

    def _value_derivs(self, consts, a):
        return self._call(self.base.value_derivs, (consts,), a)[:3]


@functools.cache
def kernel(base, weights: tuple[int, ...], nb: int) -> _StackKernel:
    """The kernel of a :class:`Stack` pair with ``nb`` batch dimensions whose components'
    kernel module is ``base`` (one object per argument set, so that traced functions keyed
    on it are reused)."""
    return _StackKernel(base, weights, nb)

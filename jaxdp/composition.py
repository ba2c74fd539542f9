r"""Exact composition of Chernoff information (the paper's Corollary 1.2, made exact).

For independent mechanisms with pairs :math:`(P_j, Q_j)`, the composed pair is the product
and :math:`\log C_\alpha` adds (eq. (48)), so the exact composed Chernoff information is

.. math:: C\Big(\bigotimes_j P_j, \bigotimes_j Q_j\Big) = \max_{\alpha\in[0,1]} \sum_j
          -\log C_\alpha(P_j, Q_j) \;\le\; \sum_j \max_\alpha -\log C_\alpha(P_j, Q_j),

a common :math:`\alpha` instead of one per mechanism. Corollary 1.2's budget
:math:`\sum_j \varepsilon_j` is the right-hand side; equality holds when every pair has the
same optimal :math:`\alpha^*` (e.g. identical or symmetric mechanisms, :math:`\alpha^*=1/2`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxdp.chernoff import chernoff
from jaxdp.coefficient import check_pair
from jaxdp.distributions import Distribution, Product

__all__ = ["CompositionResult", "compose"]


class CompositionResult(NamedTuple):
    """Exact composed Chernoff information beside the paper's sum (Corollary 1.2).

    Attributes:
      exact: :math:`\\max_\\alpha \\sum_j -\\log C_\\alpha(P_j, Q_j)` (nats).
      alpha: the common optimal :math:`\\alpha^*`.
      paper_sum: :math:`\\sum_j C(P_j, Q_j)`, the Corollary 1.2 budget.
      gain: ``paper_sum - exact`` (>= 0): budget the exact composition leaves unspent;
        0 where the exact information is infinite (a pair with disjoint supports: the
        paper's sum is infinite too, and their difference means nothing).
      individual: a tuple of each pair's own Chernoff information.
    """

    exact: jax.Array
    alpha: jax.Array
    paper_sum: jax.Array
    gain: jax.Array
    individual: tuple


def compose(pairs: Sequence[tuple[Distribution, Distribution]]) -> CompositionResult:
    """Exact Chernoff information of independently composed mechanisms.

    Args:
      pairs: ``[(P_1, Q_1), (P_2, Q_2), ...]``, each a neighbouring output pair (e.g. from
        :mod:`jaxdp.mechanisms`); families may differ and batch shapes broadcast.

    Returns:
      :class:`CompositionResult`; differentiable like :func:`jaxdp.chernoff`.
    """
    try:
        pairs = list(pairs)
    except TypeError:
        raise TypeError(
            f"pairs must be a sequence of (P, Q) pairs, got {type(pairs).__name__}"
        ) from None
    if not pairs:
        raise ValueError("pairs must hold at least one (P, Q) pair")
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise TypeError(f"pairs[{i}] must be a (P, Q) pair")
        for name, d in zip("PQ", pair, strict=True):
            if not isinstance(d, Distribution):
                raise TypeError(
                    f"pairs[{i}]: {name} must be a jaxdp distribution, got {type(d).__name__}"
                )
        try:  # (named "P, Q" or "Product component i", the composed pair built below)
            check_pair(*pair)
        except (TypeError, ValueError) as e:
            raise type(e)(f"pairs[{i}]: {e}") from None
    shapes = [np.broadcast_shapes(p.batch_shape, q.batch_shape) for p, q in pairs]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            f"pairs: the pairs' batch shapes {shapes} do not broadcast together"
        ) from None
    joint = chernoff(Product(*(p for p, _ in pairs)), Product(*(q for _, q in pairs)))
    individual = tuple(chernoff(p, q).information for p, q in pairs)
    total = sum(individual)
    # (inf - inf where a pair is disjoint: nan)
    gain = jnp.where(jnp.isinf(joint.information), 0.0, total - joint.information)
    return CompositionResult(
        exact=joint.information,
        alpha=joint.alpha,
        paper_sum=total,
        # >= 0 (each pair's own maximum is at least its term at the common alpha*); rounding
        # made it -1 ulp in float32 where the alphas coincide
        gain=jnp.where(gain < 0, jnp.zeros_like(gain), gain),
        individual=individual,
    )

"""jaxdp: exact, batched, differentiable Chernoff information for differential privacy.

The public names are re-exported here explicitly; see ``__all__``.
"""

from jaxdp import mechanisms
from jaxdp.chernoff import ChernoffResult, chernoff
from jaxdp.coefficient import log_bc
from jaxdp.distributions import (
    Categorical,
    Density,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Product,
)
from jaxdp.divergences import bhattacharyya, hellinger, kl, renyi, tv
from jaxdp.sweep import SweepResult, SweepRun, load_sweep, sweep

__version__ = "0.1.0"

__all__ = [
    "Categorical",
    "ChernoffResult",
    "Density",
    "DiscreteLaplace",
    "Gaussian",
    "Laplace",
    "Product",
    "SweepResult",
    "SweepRun",
    "__version__",
    "bhattacharyya",
    "chernoff",
    "hellinger",
    "kl",
    "load_sweep",
    "log_bc",
    "mechanisms",
    "renyi",
    "sweep",
    "tv",
]

"""jaxdp: exact, batched, differentiable Chernoff information for differential privacy.

The public names are re-exported here explicitly; see ``__all__``. Submodules
:mod:`jaxdp.mechanisms` (DP mechanisms as neighbouring pairs) and :mod:`jaxdp.paper` (the
paper's closed forms, by equation number) are part of the public API too.
"""

# (_dash_m first, before JAX is imported: Ctrl-C of `python -m jaxdp`, see its docstring)
from jaxdp import _dash_m, mechanisms, paper  # noqa: F401
from jaxdp._jit import CPU_COMPILER_OPTIONS
from jaxdp.allocation import AllocationResult, allocate_budget
from jaxdp.calibrate import CalibrationResult, calibrate
from jaxdp.chernoff import ChernoffResult, chernoff
from jaxdp.classification import ErrorExponentEstimate, simulate_error_exponent
from jaxdp.coefficient import log_bc
from jaxdp.compile_cache import default_compile_cache_dir, enable_compile_cache
from jaxdp.composition import CompositionResult, compose
from jaxdp.conversions import (
    max_chernoff_eps_dp,
    max_kl_eps_dp,
    max_neg_log_bc_eps_dp,
    max_tv_chernoff,
    max_tv_eps_delta_dp,
    max_tv_eps_dp,
    max_tv_eps_dp_chernoff_bound,
)
from jaxdp.distributions import (
    Categorical,
    Density,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Product,
)
from jaxdp.divergences import bhattacharyya, hellinger, kl, renyi, tv
from jaxdp.membership import (
    LaplaceAdvantage,
    MembershipBounds,
    best_advantage_gaussian,
    best_advantage_geometric,
    best_advantage_laplace,
    best_advantage_randomized_response,
    membership_bounds,
)
from jaxdp.sweep import SweepResult, SweepRun, load_sweep, sweep

__version__ = "0.1.0"

__all__ = [
    "CPU_COMPILER_OPTIONS",
    "AllocationResult",
    "CalibrationResult",
    "Categorical",
    "ChernoffResult",
    "CompositionResult",
    "Density",
    "DiscreteLaplace",
    "ErrorExponentEstimate",
    "Gaussian",
    "Laplace",
    "LaplaceAdvantage",
    "MembershipBounds",
    "Product",
    "SweepResult",
    "SweepRun",
    "__version__",
    "allocate_budget",
    "best_advantage_gaussian",
    "best_advantage_geometric",
    "best_advantage_laplace",
    "best_advantage_randomized_response",
    "bhattacharyya",
    "calibrate",
    "chernoff",
    "compose",
    "default_compile_cache_dir",
    "enable_compile_cache",
    "hellinger",
    "kl",
    "load_sweep",
    "log_bc",
    "max_chernoff_eps_dp",
    "max_kl_eps_dp",
    "max_neg_log_bc_eps_dp",
    "max_tv_chernoff",
    "max_tv_eps_delta_dp",
    "max_tv_eps_dp",
    "max_tv_eps_dp_chernoff_bound",
    "mechanisms",
    "membership_bounds",
    "paper",
    "renyi",
    "simulate_error_exponent",
    "sweep",
    "tv",
]

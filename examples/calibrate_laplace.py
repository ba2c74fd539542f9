"""Calibrate a Laplace mechanism to a Chernoff-information budget.

For each budget ``c`` (nats) this finds the Laplace scale ``b`` such that ``n`` independent
releases of ``f(x) + Lap(0, b)`` (sensitivity ``s``) have Chernoff information exactly ``c``
between neighbouring inputs, then checks the answer with the engine and reports what the
budget means for a membership-inference attacker (best advantage <= sqrt(1 - e^{-2c})).

    python examples/calibrate_laplace.py --budget 0.01 0.1 1 --compositions 10

All budgets are solved in one batched, jitted call (``jaxdp.calibrate``).
"""

from __future__ import annotations

import argparse
from typing import NamedTuple

import _argtypes as argtypes  # (examples/_argtypes.py, beside this script)
import jax
import numpy as np


class Calibrated(NamedTuple):
    budget: np.ndarray  # nats, for the n-fold composition
    scale: np.ndarray  # Laplace scale b
    epsilon: np.ndarray  # the pure-DP parameter s/b of one release
    achieved: np.ndarray  # engine's Chernoff information of the n-fold pair at b
    advantage_bound: np.ndarray  # sqrt(1 - exp(-2 c)): tight bound on membership advantage
    converged: np.ndarray


def main(argv: list[str] | None = None) -> Calibrated:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=argtypes.positive, nargs="+", default=[0.01, 0.1, 1.0])
    parser.add_argument(
        "--compositions", type=argtypes.count, default=1, help="number of releases n"
    )
    parser.add_argument("--sensitivity", type=argtypes.positive, default=1.0)
    args = parser.parse_args(argv)

    jax.config.update("jax_enable_x64", True)  # user code may; the library never does
    import jax.numpy as jnp

    import jaxdp as jd
    from jaxdp.calibrate import calibrate
    from jaxdp.conversions import max_tv_chernoff
    from jaxdp.mechanisms import laplace

    budget = jnp.asarray(args.budget)
    n, s = args.compositions, args.sensitivity
    r = calibrate("laplace", budget, sensitivity=s, compositions=n)

    # Independent check with the engine: the n-fold product's Chernoff information at b.
    @jax.jit
    def composed_chernoff(scale):
        P, Q = laplace(s, scale=scale)
        return jd.chernoff(jd.Product.iid(P, n), jd.Product.iid(Q, n)).information

    out = Calibrated(
        budget=np.asarray(budget),
        scale=np.asarray(r.parameter),
        epsilon=np.asarray(s / r.parameter),
        achieved=np.asarray(composed_chernoff(r.parameter)),
        advantage_bound=np.asarray(max_tv_chernoff(budget)),
        converged=np.asarray(r.converged),
    )
    print(f"Laplace mechanism, sensitivity {s:g}, {n} release(s): scale for a Chernoff budget")
    print(f"{'budget c (nats)':>16} {'scale b':>14} {'eps = s/b':>12} {'C at b':>14} {'adv <=':>9}")
    for row in zip(*out[:5], strict=True):
        c, b, e, a, adv = map(float, row)
        print(f"{c:16.6g} {b:14.8g} {e:12.6g} {a:14.8g} {adv:9.4f}")
    if not out.converged.all():
        print("warning: some budgets did not converge")
    return out


if __name__ == "__main__":
    main()

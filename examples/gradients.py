"""Gradients of the Chernoff information with respect to mechanism parameters.

``jaxdp.chernoff`` is differentiable: the information by the envelope theorem
(dC/dθ = ∂f/∂θ at the optimal α*), the optimal α* itself by the implicit function theorem.
This script differentiates

* the Laplace mechanism's C with respect to its scale b (closed form to compare with:
  C = t/2 - log(1 + t/2), t = s/b),
* the Gaussian mechanism's C with respect to σ (C = s²/(8σ²)),
* the paper's attacked Laplace pair Lap(0, b) vs Lap(shift, θ b) with respect to θ and the
  shift (no closed form: compared with central finite differences), and α* with respect to θ,

then evaluates a whole batch of gradients in one vmapped, jitted call.

    python examples/gradients.py --batch 1000
"""

from __future__ import annotations

import argparse
from typing import NamedTuple

import _argtypes as argtypes  # (examples/_argtypes.py, beside this script)
import numpy as np


class Gradients(NamedTuple):
    laplace_dC_db: float
    laplace_dC_db_closed_form: float
    gaussian_dC_dsigma: float
    gaussian_dC_dsigma_closed_form: float
    attack_grad: tuple[float, float]  # dC/dtheta, dC/dshift
    attack_fd: tuple[float, float]  # central finite differences
    alpha_dtheta: float
    alpha_dtheta_fd: float
    batch_scales: np.ndarray
    batch_grads: np.ndarray  # dC/db on the batch


def main(argv: list[str] | None = None) -> Gradients:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=argtypes.positive, default=2.0, help="Laplace scale b")
    parser.add_argument("--sigma", type=argtypes.positive, default=1.5, help="Gaussian sigma")
    parser.add_argument(
        "--theta", type=argtypes.positive, default=2.0, help="scale ratio of the attack"
    )
    parser.add_argument(
        "--shift", type=argtypes.finite, default=1.0, help="mean shift of the attack"
    )
    parser.add_argument(
        "--batch", type=argtypes.count, default=1000, help="size of the vmapped batch"
    )
    args = parser.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import jaxdp as jd

    s = 1.0

    def laplace_c(b):
        return jd.chernoff(jd.Laplace(0.0, b), jd.Laplace(s, b)).information

    def gaussian_c(sigma):
        return jd.chernoff(jd.Gaussian(0.0, sigma), jd.Gaussian(s, sigma)).information

    def attack(params):
        theta, shift = params
        b = args.scale
        return jd.chernoff(jd.Laplace(0.0, b), jd.Laplace(shift, theta * b))

    b, sig = args.scale, args.sigma
    t = s / b
    # One vmapped, jitted call: dC/db at b and on a batch of scales.
    scales = jnp.concatenate([jnp.array([b]), jnp.geomspace(0.1, 10.0, args.batch)])
    grads = np.asarray(jax.jit(jax.vmap(jax.grad(laplace_c)))(scales))
    dlap, batch = float(grads[0]), grads[1:]
    dlap_cf = -(t / b) * 0.5 * (t / 2) / (1 + t / 2)  # d/db of t/2 - log(1 + t/2), t = s/b
    dgau = float(jax.jit(jax.grad(gaussian_c))(sig))
    dgau_cf = -(s**2) / (4 * sig**3)

    # Jacobian of (C, alpha*) with respect to (theta, shift), forward mode, one call.
    p = jnp.array([args.theta, args.shift])
    jac = np.asarray(
        jax.jit(jax.jacfwd(lambda q: jnp.stack([attack(q).information, attack(q).alpha])))(p)
    )
    g, ga = jac[0], float(jac[1, 0])
    # Central finite differences, all five points in one batched call.
    # Steps relative to theta and to the shift's scale (a fixed 1e-5 was 1% of theta = 1e-3:
    # "finite diff." -850.345 against the exact -850.3156 there)
    h, k = 1e-5 * args.theta, 1e-5 * max(abs(args.shift), args.scale)
    pts = p + jnp.array([[0, 0], [h, 0], [-h, 0], [0, k], [0, -k]])
    both = jax.jit(jax.vmap(lambda q: (attack(q).information, attack(q).alpha)))(pts)
    info, alpha = np.asarray(both[0]), np.asarray(both[1])
    fd = (float((info[1] - info[2]) / (2 * h)), float((info[3] - info[4]) / (2 * k)))
    fd_alpha = float((alpha[1] - alpha[2]) / (2 * h))

    out = Gradients(
        dlap,
        dlap_cf,
        dgau,
        dgau_cf,
        (float(g[0]), float(g[1])),
        fd,
        ga,
        fd_alpha,
        np.asarray(scales[1:]),
        batch,
    )
    print(f"Laplace, s = {s:g}, b = {b:g}:   dC/db     = {dlap:.12g} (closed form {dlap_cf:.12g})")
    print(f"Gaussian, s = {s:g}, σ = {sig:g}: dC/dσ     = {dgau:.12g} (closed form {dgau_cf:.12g})")
    print(
        f"attack Lap(0, b) vs Lap({args.shift:g}, θ b), θ = {args.theta:g}: "
        f"dC/dθ = {g[0]:.10g} (finite diff. {fd[0]:.10g}), "
        f"dC/dshift = {g[1]:.10g} (finite diff. {fd[1]:.10g})"
    )
    print(f"  optimal α* = {alpha[0]:.10g}, dα*/dθ = {ga:.10g} (finite diff. {fd_alpha:.10g})")
    print(
        f"batch: dC/db on {args.batch} scales in [0.1, 10] (one vmapped call): "
        f"from {batch[0]:.6g} to {batch[-1]:.6g}"
    )
    return out


if __name__ == "__main__":
    main()

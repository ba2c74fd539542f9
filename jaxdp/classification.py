r"""Adversarial classification, measured: the error exponent of the optimal test (eq. (15)).

The defender of the paper's Section V observes ``M`` i.i.d. outputs and decides between
:math:`P` (no attack) and :math:`Q` (attack) with equal priors. The optimal (MAP /
likelihood-ratio) test has average error (eq. (12) with :math:`\pi = 1/2`)

.. math::

   P_e(M) = \tfrac12\big(P^M(S_M < 0) + Q^M(S_M \ge 0)\big)
          = \tfrac12 \int \min(p^{\otimes M}, q^{\otimes M}),
   \qquad S_M = \sum_{i=1}^M \log\frac{p(x_i)}{q(x_i)},

and Chernoff's theorem (eq. (15)) says :math:`-\tfrac1M \log P_e(M) \to C(P, Q)`. This
module estimates :math:`P_e(M)` by Monte Carlo for Laplace pairs (any locations and scales,
so the paper's scale ratio :math:`\theta \ne 1` is covered), for ``M`` far beyond what plain
Monte Carlo can reach (:math:`P_e \sim e^{-CM}`), by importance sampling from the tilted
("geometric mixture") law :math:`p_\alpha = p^\alpha q^{1-\alpha}/C_\alpha` at
:math:`\alpha = \alpha^*` — the exponentially tilted measure under which the Chernoff bound
is tight.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxdp import _checks
from jaxdp import _special as sp
from jaxdp.chernoff import chernoff
from jaxdp.coefficient import log_bc
from jaxdp.distributions import Laplace

__all__ = ["ErrorExponentEstimate", "simulate_error_exponent"]


class ErrorExponentEstimate(NamedTuple):
    r"""Monte-Carlo estimate of the optimal test's error and its exponent.

    Every field except ``Ms`` has shape ``batch + (len(Ms),)`` (``alpha`` and
    ``information``: ``batch``), where ``batch`` is the pair's broadcast batch shape.

    Attributes:
        Ms: the numbers of observations, shape ``(len(Ms),)`` (int).
        error_prob: :math:`\hat P_e(M)` (0 where it underflows the dtype; use
            ``log_error_prob``).
        ci_low, ci_high: confidence interval for :math:`P_e(M)`.
        log_error_prob: :math:`\log \hat P_e(M)`.
        exponent: :math:`-\log \hat P_e(M) / M` (nats per observation).
        exponent_low, exponent_high: confidence interval for the exponent
            (``-log(ci_high)/M``, ``-log(ci_low)/M``).
        relative_se: estimated standard error of :math:`\hat P_e` divided by :math:`\hat P_e`.
        alpha: the tilt :math:`\alpha` used.
        information: :math:`-\log C_\alpha(P, Q)`; equals the Chernoff information
            :math:`C(P, Q)` when ``alpha`` is :math:`\alpha^*` (the default).
    """

    Ms: jax.Array
    error_prob: jax.Array
    ci_low: jax.Array
    ci_high: jax.Array
    log_error_prob: jax.Array
    exponent: jax.Array
    exponent_low: jax.Array
    exponent_high: jax.Array
    relative_se: jax.Array
    alpha: jax.Array
    information: jax.Array


def _log_exprel(z):
    r""":math:`\log((e^z - 1)/z)`, stable for all real ``z`` (0 at ``z = 0``)."""
    pos = z > 0
    # (e^z - 1)/z = e^z psi(z) for z > 0, psi(-z) for z <= 0; psi(y) = (1 - e^{-y})/y in (0, 1]
    return jnp.where(pos, z, 0.0) + jnp.log(sp.psi(jnp.abs(z)))


def _tilted_sampler(m0, b0, m1, b1, a):
    r"""Exact sampler for :math:`p_a \propto p^a q^{1-a}` of a Laplace pair (scalars).

    :math:`\log(p^a q^{1-a})` is, up to a constant, :math:`g(x) = -a|x - m_0|/b_0 -
    (1-a)|x - m_1|/b_1`: linear on the three pieces cut at the two locations, with slope
    :math:`+\lambda` on the left, :math:`-\lambda` on the right
    (:math:`\lambda = a/b_0 + (1-a)/b_1 > 0`) and :math:`(g(h) - g(l))/(h - l)` between.
    Inverse-CDF sampling with one uniform per draw: the uniform picks the piece (with
    probability proportional to its mass) and, rescaled, inverts that piece's (truncated)
    exponential CDF. Returns ``sample(key, n)``.
    """
    lo, hi = jnp.minimum(m0, m1), jnp.maximum(m0, m1)
    width = hi - lo

    def g(x):
        return -a * jnp.abs(x - m0) / b0 - (1.0 - a) * jnp.abs(x - m1) / b1

    lam = a / b0 + (1.0 - a) / b1
    g_lo, g_hi = g(lo), g(hi)
    z = g_hi - g_lo  # total log-change across the middle piece
    has_mid = width > 0
    log_mid = g_lo + jnp.log(jnp.where(has_mid, width, 1.0)) + _log_exprel(z)
    logits = jnp.stack(
        [g_lo - jnp.log(lam), jnp.where(has_mid, log_mid, -jnp.inf), g_hi - jnp.log(lam)]
    )

    probs = jax.nn.softmax(logits)
    p_left, p_mid, p_right = probs[0], probs[1], probs[2]

    def sample(key, n):
        # One uniform per draw: pick the piece by u, then reuse the rescaled u inside it.
        dtype = lo.dtype
        tiny = jnp.finfo(dtype).tiny
        u = jax.random.uniform(key, (n,), dtype)
        left = u < p_left
        right = u >= p_left + p_mid
        v_left = jnp.maximum(u / jnp.where(p_left > 0, p_left, 1.0), tiny)
        v_right = jnp.maximum((1.0 - u) / jnp.where(p_right > 0, p_right, 1.0), tiny)
        v_mid = jnp.clip((u - p_left) / jnp.where(p_mid > 0, p_mid, 1.0), 0.0, 1.0)
        # Middle: density prop. to e^{z t} on t in [0, 1]. For z <= 0 invert directly,
        # t = log1p(v expm1(z))/z; for z > 0 use the reflection t = 1 - t'(1 - v, -z).
        neg = z <= 0
        v = jnp.where(neg, v_mid, 1.0 - v_mid)
        zn = -jnp.abs(z)
        zs = jnp.where(zn == 0, -1.0, zn)
        t0 = jnp.where(zn == 0, v, jnp.log1p(v * jnp.expm1(zs)) / zs)
        t = jnp.clip(jnp.where(neg, t0, 1.0 - t0), 0.0, 1.0)
        return jnp.where(
            left,
            lo + jnp.log(v_left) / lam,
            jnp.where(right, hi - jnp.log(v_right) / lam, lo + width * t),
        )

    return sample


def _is_moments(m0, b0, m1, b1, a, key, steps, *, n_samples: int, m_max: int):
    """Sums of the IS ratio ``R`` and ``R**2`` at the path lengths ``steps + 1`` (one pair;
    ``steps`` sorted, distinct, below ``m_max``). Only these are kept: the sums for every
    ``M = 1..m_max`` (and the scan's index array) took ``O(m_max)`` memory, ~34 GB for
    ``Ms = [2**31]``."""
    sample = _tilted_sampler(m0, b0, m1, b1, a)
    log_b = jnp.log(b1) - jnp.log(b0)
    last = steps.shape[0] - 1

    def step(carry, _):
        s, m, k, acc_r, acc_r2 = carry
        x = sample(jax.random.fold_in(key, m), n_samples)
        s = s + (log_b - jnp.abs(x - m0) / b0 + jnp.abs(x - m1) / b1)
        # min(p^M, q^M) / (p^a q^(1-a))^M = exp(min((1 - a) S, -a S)) <= 1
        r = jnp.exp(jnp.minimum((1.0 - a) * s, -a * s))
        kk = jnp.minimum(k, last)
        hit = steps[kk] == m
        acc_r = acc_r.at[kk].set(jnp.where(hit, jnp.sum(r), acc_r[kk]))
        acc_r2 = acc_r2.at[kk].set(jnp.where(hit, jnp.sum(r * r), acc_r2[kk]))
        return (s, m + 1, k + hit, acc_r, acc_r2), None

    s0 = jnp.zeros((n_samples,), m0.dtype)
    acc = jnp.zeros(steps.shape, m0.dtype)
    m = jnp.zeros((), steps.dtype)
    carry, _ = jax.lax.scan(step, (s0, m, m, acc, acc), None, length=m_max)
    return carry[3], carry[4]


@jax.jit
def _optimal_tilt(P, Q):
    """``(alpha*, log C_{alpha*})`` from :func:`jaxdp.chernoff` (jitted: compiled once)."""
    r = chernoff(P, Q)
    return r.alpha, -r.information


_log_bc_jit = jax.jit(log_bc)


@functools.partial(jax.jit, static_argnames=("n_samples", "m_max"))
def _is_moments_batched(m0, b0, m1, b1, a, keys, steps, *, n_samples: int, m_max: int):
    """:func:`_is_moments` vmapped over a flat batch of pairs (``steps`` shared)."""
    one = functools.partial(_is_moments, n_samples=n_samples, m_max=m_max)
    return jax.vmap(one, in_axes=(0, 0, 0, 0, 0, 0, None))(m0, b0, m1, b1, a, keys, steps)


def _check_key(key) -> None:
    """One PRNG key: a typed key array of shape ``()`` (``jax.random.key``) or a raw
    ``uint32`` key of shape ``(2,)`` (``jax.random.PRNGKey``); JAX's own errors for anything
    else (a batch of keys too) come from deep inside ``random.split`` and name no argument."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if jnp.shape(key) == ():
            return
    elif dtype == jnp.uint32 and jnp.shape(key) == (2,):
        return
    raise TypeError(
        "key must be a JAX PRNG key, a single one (jax.random.key(seed) or "
        f"jax.random.PRNGKey(seed); jax.vmap for a batch), got {key!r}"
    )


def simulate_error_exponent(
    P: Laplace,
    Q: Laplace,
    Ms: Sequence[int],
    *,
    key: jax.Array,
    n_samples: int = 100_000,
    alpha=None,
    confidence: float = 0.95,
) -> ErrorExponentEstimate:
    r"""Importance-sampling estimate of the optimal test's error :math:`P_e(M)` (eq. (15)).

    For each ``M`` in ``Ms`` it estimates :math:`P_e(M) = \tfrac12\int\min(p^{\otimes M},
    q^{\otimes M})`, the average error of the MAP test with equal priors (eq. (12),
    :math:`\pi = 1/2`; ties :math:`S_M = 0`, which have positive probability for equal
    scales, may be broken either way since :math:`p^{\otimes M} = q^{\otimes M}` there),
    and the exponent
    :math:`-\log P_e(M)/M`, which tends to :math:`C(P, Q)` (eq. (15)); its finite-``M``
    excess is :math:`\tfrac{\log M}{2M} + O(1/M)` (Bahadur-Rao).

    **Estimator.** Draw :math:`x_1..x_M` i.i.d. from the tilted law :math:`p_\alpha =
    p^\alpha q^{1-\alpha}/C_\alpha` (sampled exactly, piecewise-exponential inverse CDF).
    With :math:`S = \sum \log(p/q)(x_i)`,
    :math:`dP^M/dP_\alpha^M = C_\alpha^M e^{(1-\alpha)S}` and
    :math:`dQ^M/dP_\alpha^M = C_\alpha^M e^{-\alpha S}`, so

    .. math::

       P_e(M) = \tfrac12 C_\alpha^M\, \mathbb{E}_{p_\alpha}[R],\qquad
       R = e^{\min((1-\alpha)S,\, -\alpha S)} \in (0, 1].

    :math:`R` is continuous at :math:`S = 0`, so exact ties that floating point scatters to
    :math:`\pm 10^{-16}` do not bias it (a thresholded plain Monte Carlo of
    :math:`P(S<0) + Q(S\ge0)` is biased by them). It is unbiased for any
    :math:`\alpha \in (0, 1)`; at :math:`\alpha^*` the tilted mean
    of :math:`S` is 0 and the relative variance grows only like :math:`\sqrt M` (plain Monte
    Carlo needs :math:`\sim e^{CM}` samples). One simulated path of length ``max(Ms)`` per
    sample serves every ``M`` (estimates for different ``M`` are correlated; each is
    unbiased). Cost ``n_samples * max(Ms)`` draws per pair; memory ``O(n_samples + len(Ms))``
    per pair (only the requested ``M``'s sums are kept).

    **Confidence interval**: normal approximation on the mean of :math:`R` on the log scale
    (delta method), :math:`\hat P_e\, e^{\pm z\,\widehat{\mathrm{se}}/\hat P_e}`, which stays
    positive; the exponent interval is its image under :math:`-\log(\cdot)/M`.

    Args:
        P, Q: :class:`jaxdp.Laplace` distributions (batch shapes broadcast; one independent
            simulation per pair, vmapped).
        Ms: numbers of observations (positive Python ints, static).
        key: a JAX PRNG key.
        n_samples: Monte-Carlo paths per pair (static).
        alpha: tilt in ``(0, 1)``, broadcastable to the batch; default
            ``jaxdp.chernoff(P, Q).alpha`` (the optimal :math:`\alpha^*`).
        confidence: two-sided confidence level of the intervals.

    Returns:
        :class:`ErrorExponentEstimate`.

    Works eagerly and under ``jax.jit``/``jax.vmap`` with ``P``, ``Q``, ``key`` (and
    ``alpha``) traced; ``Ms``, ``n_samples`` and ``confidence`` are static. Value checks on
    ``alpha`` are skipped under tracing. Not differentiable (gradients are stopped).
    """
    for name, d in (("P", P), ("Q", Q)):
        if not isinstance(d, Laplace):
            raise TypeError(f"{name} must be a jaxdp.Laplace, got {type(d).__name__}")
    try:
        ms = tuple(Ms)
    except TypeError:
        raise TypeError(f"Ms must be a non-empty sequence of Python ints, got {Ms!r}") from None
    _check_key(key)
    if not ms or any(isinstance(m, bool) or not isinstance(m, (int, np.integer)) for m in ms):
        raise TypeError(f"Ms must be a non-empty sequence of Python ints, got {Ms!r}")
    if min(ms) < 1:
        raise ValueError(f"Ms must be >= 1, got {min(ms)}")
    if (
        isinstance(n_samples, bool)
        or not isinstance(n_samples, (int, np.integer))  # (a numpy int too, as in Ms)
        or n_samples < 2
    ):
        raise ValueError(f"n_samples must be an int >= 2, got {_checks.plain(n_samples)!r}")
    n_samples = int(n_samples)
    try:  # (a concrete 0-d array too; a string, None, a list or a complex named nothing)
        if isinstance(confidence, str | bytes):
            raise TypeError
        level = float(confidence)
    except (TypeError, ValueError):
        raise TypeError(
            f"confidence must be a real number in (0, 1) (static), got {confidence!r}"
        ) from None
    if not 0.0 < level < 1.0:  # (level: np.float64(1.5) read "got np.float64(1.5)")
        raise ValueError(f"confidence must lie in (0, 1), got {level!r}")
    shape = _checks.check_broadcast("P, Q", P.batch_shape, Q.batch_shape)
    dtype = jnp.result_type(P.dtype, Q.dtype, float)
    if alpha is None:
        a, log_ca = _optimal_tilt(P, Q)
    else:
        a = _checks.as_order(alpha, "alpha")
        if _checks.is_concrete(a):
            v = np.asarray(a)
            if not np.all((v > 0) & (v < 1)):
                raise ValueError("alpha must lie in the open interval (0, 1)")
        shape = _checks.check_broadcast("P, Q, alpha", shape, a.shape)
        log_ca = _log_bc_jit(P, Q, a)
    a = jax.lax.stop_gradient(jnp.broadcast_to(jnp.asarray(a, dtype), shape))
    log_ca = jax.lax.stop_gradient(jnp.broadcast_to(jnp.asarray(log_ca, dtype), shape))

    def flat(x):
        return jax.lax.stop_gradient(jnp.broadcast_to(jnp.asarray(x, dtype), shape).reshape(-1))

    size = math.prod(shape)
    keys = jax.random.split(key, size)
    m_max = max(ms)
    steps, idx = np.unique(np.asarray(ms, np.int64) - 1, return_inverse=True)
    sum_r, sum_r2 = _is_moments_batched(
        flat(P.loc),
        flat(P.scale),
        flat(Q.loc),
        flat(Q.scale),
        a.reshape(-1),
        keys,
        jnp.asarray(steps, int),  # the index dtype of the path steps (int32 without x64)
        n_samples=n_samples,
        m_max=m_max,
    )
    sum_r = sum_r[:, idx].reshape(shape + (len(ms),))
    sum_r2 = sum_r2[:, idx].reshape(shape + (len(ms),))
    n = float(n_samples)
    mean = sum_r / n
    var = jnp.maximum(sum_r2 / n - mean * mean, 0.0) * (n / (n - 1.0))
    rse = jnp.sqrt(var / n) / mean
    m_arr = jnp.asarray(ms, dtype)
    log_pe = math.log(0.5) + m_arr * log_ca[..., None] + jnp.log(mean)
    # a traced alpha outside (0, 1) gives nan everywhere (log C_alpha is nan there); the
    # samples' spread alone was a finite number of no experiment
    rse = jnp.where(jnp.isnan(log_pe), jnp.nan, rse)
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2.0)
    log_lo, log_hi = log_pe - z * rse, log_pe + z * rse
    return ErrorExponentEstimate(
        Ms=jnp.asarray(ms),
        error_prob=jnp.exp(log_pe),
        ci_low=jnp.exp(log_lo),
        ci_high=jnp.exp(log_hi),
        log_error_prob=log_pe,
        exponent=-log_pe / m_arr,
        exponent_low=-log_hi / m_arr,
        exponent_high=-log_lo / m_arr,
        relative_se=rse,
        alpha=a,
        information=-log_ca,
    )

"""Policy losses for off-policy (stale) batches: a staleness-adaptive trust region and DPPO's divergence mask.

With asynchronous training (``t1train/async_rl.py``) an episode may have been sampled by a policy one or more
optimizer steps older than the one being trained, and a long episode may even have been sampled by several (its
later turns on newer weights). Every sampled token keeps the log-prob of the distribution it was drawn from
(``Turn.logprobs``, the batch's ``sampling_per_token_logps``: mu below), so the staleness of each token is measured
directly, whichever version sampled it:

    d = stop_grad(log pi_train(y|s) - log mu_rollout(y|s))          per sampled token

Three ways to train on such tokens, selected by ``off_policy_loss`` in :class:`t1train.trainer_config.T1Config`:

``ppo`` (default)
    TRL's clipped loss on the ratio pi / pi_old, with the truncated importance weight pi_old / mu folded into the
    advantages (``ppo.off_policy_weights``, ``off_policy_correction``). Unchanged by this module.
``adaptive_trust_region``
    The staleness-adaptive trust region ("Stale but Stable", arXiv 2607.18722, as summarized in t1's design
    notes): PPO's clipped loss on the ratio to the *sampler*, r = pi / mu = exp(d), so the trust region is
    centred on the policy that sampled each token. q is the 0.9-quantile of |d| over the batch's action tokens.
    A token with |d| <= q (or every token when q = 0) keeps PPO's interval [1 - eps_low, 1 + eps_high]; a token
    above it has the *outward* side of its interval shrunk by a kernel scale s in (0, 1]: the upper end when
    d > 0 (the policy already moved up on this token since it was sampled), the lower end when d < 0. The inward
    side never changes. The ratio is the importance weight, so the advantages must not carry one
    (``off_policy_correction: none``); ``c = 1`` is PPO's clipped loss against the sampler exactly.
``dppo``
    DPPO's divergence mask ("Rethinking the Trust Region in LLM RL", arXiv 2602.04879): no ratio clipping; a
    token is dropped when a divergence D between pi and mu on the sampled token exceeds delta *and* the update
    would push further in the direction it already moved (A > 0 and pi > mu, or A <= 0 and pi < mu). The loss is
    ``-A * stop_grad(min(pi / mu, C)) * mask * log pi``: the importance ratio against the sampler is part of
    the loss, so the advantages must not carry it a second time (``off_policy_correction: none``).

The kernel of the adaptive trust region
---------------------------------------
The paper's exact kernel was not verified (t1's notes found one summary saying a Hill kernel with exponent 2,
another a Gaussian). t1 uses a Hill-type kernel of exponent 2 on the excess of |d| over q, with a floor c:

    u = |d| / q >= 1 for a gated token,   s = c + (1 - c) / (1 + (u - 1)^2)

so s = 1 at the gate (no jump where a token crosses q), s falls towards c as |d| grows (s = (1 + c) / 2 at
|d| = 2q), and ``c = 1`` gives s = 1 everywhere: plain PPO, exactly. c must be in (0, 1]; smaller c means a
tighter trust region for the stalest tokens.

Example:
    >>> import torch
    >>> logps = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    >>> sampler = torch.log(torch.tensor([[0.5, 0.125, 0.9]]))   # d = 0, log 4, log(5/9): median |d| = 0.588
    >>> lower, upper, stats = adaptive_clip_bounds(logps, sampler, torch.ones(1, 3), 0.2, 0.2, c=0.5, level=0.5)
    >>> [round(x, 4) for x in upper[0].tolist()], [round(x, 4) for x in lower[0].tolist()]  # token 1: s = 0.676
    ([1.2, 1.1351, 1.2], [0.8, 0.8, 0.8])
"""

from __future__ import annotations

import math

import torch

OFF_POLICY_LOSSES = ("ppo", "adaptive_trust_region", "dppo")
DIVERGENCES = ("tv", "kl")
DEFAULT_DELTA = {"tv": 0.15, "kl": 0.05}
"""DPPO's thresholds from the paper's defaults: binary TV 0.15, binary KL 0.05."""


# ------------------------------------------------------------------------------------------------ staleness
def staleness(trainer_logps: torch.Tensor, sampler_logps: torch.Tensor) -> torch.Tensor:
    """Per-token ``d = log pi_train - log mu_rollout``, without gradient (tokens the sampler could not score, NaN,
    count as d = 0).

    Example:
        >>> staleness(torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, float("nan")]])).tolist()
        [[0.5, 0.0]]
    """
    return torch.nan_to_num((trainer_logps - sampler_logps).detach(), nan=0.0)


def staleness_quantile(d: torch.Tensor, mask: torch.Tensor, level: float = 0.9) -> torch.Tensor:
    """The ``level``-quantile of ``|d|`` over the tokens of ``mask`` (linear interpolation, ``torch.quantile``'s);
    0 when the mask is empty.

    Example:
        >>> d = torch.tensor([[0.0, -0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, 0.8, -0.9, 7.0]])
        >>> mask = torch.tensor([[1.0] * 10 + [0.0]])                # the last token is not an action
        >>> round(staleness_quantile(d, mask).item(), 4)            # position 0.9 * 9 = 8.1 of the sorted |d|
        0.81
    """
    values = d.abs()[mask.bool()]
    if values.numel() == 0:
        return d.new_zeros(())
    return torch.quantile(values.float(), level).to(d.dtype)


def contraction(abs_d: torch.Tensor, q: torch.Tensor | float, c: float) -> torch.Tensor:
    """The kernel scale s in (0, 1] of each token (see the module docstring): 1 where ``|d| <= q`` or ``q == 0``,
    else ``c + (1 - c) / (1 + (|d| / q - 1)^2)``.

    Example:
        >>> [round(x, 4) for x in contraction(torch.tensor([0.1, 0.2, 0.4, 100.0]), 0.2, c=0.5).tolist()]
        [1.0, 1.0, 0.75, 0.5]
        >>> contraction(torch.tensor([0.1, 5.0]), 0.0, c=0.5).tolist()  # q = 0: no token is gated
        [1.0, 1.0]
    """
    if not 0.0 < c <= 1.0:
        raise ValueError(f"the trust region's floor c must be in (0, 1], got {c}")
    q = torch.as_tensor(q, dtype=abs_d.dtype, device=abs_d.device)
    gated = (abs_d > q) & (q > 0)
    excess = abs_d / torch.where(q > 0, q, torch.ones_like(q)) - 1.0
    scale = c + (1.0 - c) / (1.0 + excess**2)
    return torch.where(gated, scale, torch.ones_like(abs_d))


# ------------------------------------------------------------------------------------------------ adaptive TR
def adaptive_clip_bounds(
    trainer_logps: torch.Tensor,
    sampler_logps: torch.Tensor,
    mask: torch.Tensor,
    epsilon_low: float,
    epsilon_high: float,
    c: float,
    level: float = 0.9,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clip interval ``[lower, upper]`` of the staleness-adaptive trust region, and its statistics.

    ``stats``: ``lower_radius``/``upper_radius`` (mean of ``1 - lower`` and ``upper - 1`` over ``mask``),
    ``gate_rate`` (share of the mask's tokens above the quantile), ``min_contraction`` (smallest s, 1 when no token
    is gated), ``quantile`` (q). All are tensors without gradient.
    """
    d = staleness(trainer_logps, sampler_logps)
    q = staleness_quantile(d, mask, level)
    active = mask.bool()
    scale = torch.where(active, contraction(d.abs(), q, c), torch.ones_like(d))  # padding and observations: 1
    lower = torch.where(d < 0, 1.0 - epsilon_low * scale, torch.full_like(d, 1.0 - epsilon_low))
    upper = torch.where(d > 0, 1.0 + epsilon_high * scale, torch.full_like(d, 1.0 + epsilon_high))
    m = mask.to(d.dtype)
    n = m.sum().clamp(min=1.0)
    stats = {
        "lower_radius": ((1.0 - lower) * m).sum() / n,
        "upper_radius": ((upper - 1.0) * m).sum() / n,
        "gate_rate": ((scale < 1.0).to(d.dtype) * m).sum() / n,
        "min_contraction": scale[active].min() if active.any() else d.new_ones(()),
        "quantile": q,
    }
    return lower, upper, stats


def clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, lower: torch.Tensor | float, upper: torch.Tensor | float
) -> torch.Tensor:
    """PPO's per-token loss ``-min(r * A, clip(r, lower, upper) * A)`` with per-token (or scalar) bounds.

    Example:
        >>> clipped_surrogate(torch.tensor([1.5, 0.5]), torch.tensor([1.0, -1.0]), 0.8, 1.2).tolist()
        [-1.2000000476837158, 0.800000011920929]
    """
    lower = torch.as_tensor(lower, dtype=ratio.dtype, device=ratio.device)
    upper = torch.as_tensor(upper, dtype=ratio.dtype, device=ratio.device)
    clipped = torch.minimum(torch.maximum(ratio, lower), upper)
    return -torch.minimum(ratio * advantages, clipped * advantages)


def adaptive_trust_region_loss(
    logps: torch.Tensor,
    sampler_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    c: float = 0.5,
    level: float = 0.9,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token loss ``[B, T]`` of the staleness-adaptive trust region (module docstring) and its statistics.

    ``logps``: the current policy's log-probs (with gradient); ``sampler_logps``: mu, the log-probs the tokens
    were sampled with. The ratio is ``pi / mu``; d is measured on ``logps`` (detached). ``c = 1`` gives PPO's
    clipped loss with mu as the old policy, exactly.

    Example:
        >>> lp = torch.log(torch.tensor([[0.6, 0.6, 0.6]])); mu = torch.log(torch.tensor([[0.3, 0.5, 0.55]]))
        >>> loss, stats = adaptive_trust_region_loss(lp, mu, torch.ones(1, 3), torch.ones(1, 3), c=0.5)
        >>> [round(x, 4) for x in loss[0].tolist()], round(stats["gate_rate"].item(), 2)  # token 0: d = log 2 > q
        ([-1.1971, -1.2, -1.0909], 0.33)
    """
    lower, upper, stats = adaptive_clip_bounds(logps, sampler_logps, mask, epsilon_low, epsilon_high, c, level)
    ratio = torch.exp((logps - torch.nan_to_num(sampler_logps.detach(), nan=0.0)).clamp(max=20.0))
    return clipped_surrogate(ratio, advantages, lower, upper), stats


# ------------------------------------------------------------------------------------------------ DPPO
def binary_divergence(logps: torch.Tensor, sampler_logps: torch.Tensor, kind: str = "tv") -> torch.Tensor:
    """Divergence between the current policy pi and the sampler mu on the sampled token, each seen as a Bernoulli
    (this token or any other): ``tv`` is ``|pi - mu|``; ``kl`` is ``KL(mu || pi) = mu log(mu / pi) + (1 - mu)
    log((1 - mu) / (1 - pi))``. (The direction of DPPO's binary KL was not verified; t1 takes the sampler's
    distribution as the reference, as the importance ratio does.) No gradient.

    Example:
        >>> lp, mu = torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.25]))
        >>> binary_divergence(lp, mu, "tv").tolist()
        [0.25]
        >>> round(binary_divergence(lp, mu, "kl").item(), 4)  # 0.25 ln 0.5 + 0.75 ln 1.5
        0.1308
    """
    if kind not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {DIVERGENCES}, got {kind!r}")
    lp, lmu = logps.detach().double(), torch.nan_to_num(sampler_logps.detach().double(), nan=0.0)
    pi, mu = lp.exp(), lmu.exp()
    if kind == "tv":
        return (pi - mu).abs().to(logps.dtype)
    tiny = 1e-12
    log1m_pi = torch.log1p(-pi.clamp(max=1.0 - tiny))
    log1m_mu = torch.log1p(-mu.clamp(max=1.0 - tiny))
    kl = mu * (lmu - lp) + (1.0 - mu) * (log1m_mu - log1m_pi)
    return kl.clamp(min=0.0).to(logps.dtype)


def dppo_mask(
    logps: torch.Tensor,
    sampler_logps: torch.Tensor,
    advantages: torch.Tensor,
    delta: float,
    kind: str = "tv",
) -> torch.Tensor:
    """1 for the tokens DPPO keeps, 0 for those it drops: ``D > delta`` and the token already moved the way its
    advantage pushes (A > 0 and pi > mu, or A <= 0 and pi < mu). ``delta = inf`` keeps every token.

    Example:
        >>> lp = torch.log(torch.tensor([[0.6, 0.6, 0.2, 0.2]])); mu = torch.log(torch.tensor([[0.3, 0.3, 0.5, 0.5]]))
        >>> dppo_mask(lp, mu, torch.tensor([[1.0, -1.0, 1.0, -1.0]]), delta=0.15).tolist()  # |pi - mu| = 0.3
        [[0.0, 1.0, 1.0, 0.0]]
    """
    divergence = binary_divergence(logps, sampler_logps, kind)
    moved_up = logps.detach() > torch.nan_to_num(sampler_logps, nan=0.0)
    moved_down = logps.detach() < torch.nan_to_num(sampler_logps, nan=0.0)
    too_far = divergence > delta
    drop = too_far & torch.where(advantages > 0, moved_up, moved_down)
    return (~drop).to(logps.dtype)


def dppo_loss(
    logps: torch.Tensor,
    sampler_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    delta: float | None = None,
    kind: str = "tv",
    ratio_cap: float = 20.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token DPPO loss ``-A * stop_grad(min(pi / mu, C)) * keep * log pi`` ``[B, T]`` and its statistics
    (``masked_rate``: share of the ``mask``'s tokens dropped; ``divergence``: their mean D; ``ratio_mean``).
    ``delta`` defaults to the paper's (TV 0.15, KL 0.05). With ``delta = inf`` (and no cap hit) its gradient is
    PPO's unclipped surrogate ``-A * pi / mu`` against the sampler.

    Example:
        >>> lp = torch.log(torch.tensor([[0.5, 0.5]])); mu = torch.log(torch.tensor([[0.25, 0.5]]))
        >>> loss, stats = dppo_loss(lp, mu, torch.tensor([[1.0, 1.0]]), torch.ones(1, 2))
        >>> [round(x, 4) for x in loss[0].tolist()], stats["masked_rate"].item()  # token 0: |0.5-0.25| > 0.15
        ([0.0, 0.6931], 0.5)
    """
    delta = DEFAULT_DELTA[kind] if delta is None else delta
    if delta <= 0 or math.isnan(delta):
        raise ValueError(f"dppo's delta must be > 0, got {delta}")
    keep = dppo_mask(logps, sampler_logps, advantages, delta, kind)
    ratio = torch.exp((logps.detach() - torch.nan_to_num(sampler_logps, nan=0.0)).clamp(max=20.0))
    weight = ratio.clamp(max=ratio_cap)
    loss = -advantages * weight * keep * logps
    m = mask.to(logps.dtype)
    n = m.sum().clamp(min=1.0)
    stats = {
        "masked_rate": ((1.0 - keep) * m).sum() / n,
        "divergence": (binary_divergence(logps, sampler_logps, kind) * m).sum() / n,
        "ratio_mean": (weight * m).sum() / n,
    }
    return loss, stats

"""PPO pieces for multi-turn agent trajectories: rewards on action tokens, GAE that skips observation tokens,
value loss, explained variance, truncated importance sampling against the sampler.

All functions take ``[batch, completion]`` tensors aligned with the completion (every token after the first
prompt) and an ``action_mask`` that is 1 on tokens the policy sampled and 0 on observation/bridge tokens and
padding. Observation tokens are not actions: they get no advantage, no value target, and GAE steps over them as
if they were not there (the "next state" of the last token of a turn is the first token of the next turn).

Example:
    >>> import torch
    >>> mask = torch.tensor([[1., 1., 0., 0., 1.]])      # turn 0: 2 tokens, observation: 2 tokens, turn 1: 1 token
    >>> rewards = torch.tensor([[0., 0., 0., 0., 3.]])   # the episode's reward on its last action token
    >>> values = torch.zeros(1, 5)
    >>> adv, ret = gae(rewards, values, mask, gamma=1.0, lam=1.0)
    >>> ret.tolist()
    [[3.0, 3.0, 0.0, 0.0, 3.0]]
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Reduce = Callable[[torch.Tensor], torch.Tensor]
"""Sums a tensor over the processes of a multi-process run (identity on one process)."""

OFF_POLICY_MODES = ("none", "token_truncate", "sequence_truncate", "token_mask", "sequence_mask")


# ------------------------------------------------------------------------------------------------ rewards
def place_rewards(
    action_mask: torch.Tensor,
    episode_rewards: torch.Tensor,
    turn_ends: list[list[int]] | None = None,
    turn_rewards: list[list[float]] | None = None,
) -> torch.Tensor:
    """Token-level rewards ``[B, T]``: each episode's reward on its last action token.

    With ``turn_ends``/``turn_rewards`` (per episode: completion index of each turn's last sampled token and the
    reward the env gave for that turn), each turn's reward goes on its own last token and whatever remains of the
    episode reward (``episode_rewards - sum(turn_rewards)``, e.g. extra reward functions) on the last action token.

    Example:
        >>> m = torch.tensor([[1., 0., 1., 1., 0.]])
        >>> place_rewards(m, torch.tensor([2.0])).tolist()
        [[0.0, 0.0, 0.0, 2.0, 0.0]]
        >>> place_rewards(m, torch.tensor([2.0]), [[0, 3]], [[0.5, 1.0]]).tolist()
        [[0.5, 0.0, 0.0, 1.5, 0.0]]
    """
    rewards = torch.zeros_like(action_mask, dtype=torch.float32)
    positions = torch.arange(action_mask.shape[1], device=action_mask.device)
    last = torch.where(action_mask.bool(), positions, -1).max(dim=1).values  # -1: no action token at all
    for b in range(action_mask.shape[0]):
        if last[b] < 0:
            continue
        remaining = float(episode_rewards[b])
        if turn_ends is not None and turn_rewards is not None:
            for pos, r in zip(turn_ends[b], turn_rewards[b]):
                rewards[b, pos] += r
                remaining -= r
        rewards[b, last[b]] += remaining
    return rewards


# ------------------------------------------------------------------------------------------------ advantages
def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    action_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
    bootstrap: torch.Tensor | None = None,
    bootstrap_advantage: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over action tokens only; returns ``(advantages, returns)``.

    Non-action positions are skipped: they carry neither the value nor the accumulated advantage, so the value
    that bootstraps the last token of turn ``t`` is the value of the first token of turn ``t+1``. After the last
    action token of a row the episode has ended (bootstrap value 0), unless ``bootstrap`` ``[B]`` gives the value
    of the state after the row: a segment that the episode continues in another row (:func:`segment_gae`) passes
    the value of the next segment's first action token, and ``bootstrap_advantage`` ``[B]`` that token's advantage
    (default zeros). ``lam=1`` gives Monte-Carlo returns (the critic's warm-start target); both outputs are 0
    outside ``action_mask``.

    Example:
        >>> m = torch.tensor([[1., 0., 1.]])
        >>> adv, ret = gae(torch.tensor([[0., 0., 1.]]), torch.tensor([[0.5, 9., 0.25]]), m, gamma=1.0, lam=1.0)
        >>> adv.tolist(), ret.tolist()
        ([[0.5, 0.0, 0.75]], [[1.0, 0.0, 1.0]])
        >>> adv, ret = gae(torch.zeros(1, 3), torch.tensor([[0.5, 9., 0.25]]), m, 1.0, 1.0, torch.tensor([2.0]))
        >>> adv.tolist(), ret.tolist()
        ([[1.5, 0.0, 1.75]], [[2.0, 0.0, 2.0]])
    """
    mask = action_mask.to(values.dtype)
    batch, length = values.shape
    advantages = torch.zeros_like(values)
    next_value = values.new_zeros(batch) if bootstrap is None else bootstrap.to(values.dtype)
    next_adv = values.new_zeros(batch) if bootstrap_advantage is None else bootstrap_advantage.to(values.dtype)
    for t in reversed(range(length)):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        advantages[:, t] = torch.where(m.bool(), adv_t, 0.0)
        next_adv = torch.where(m.bool(), adv_t, next_adv)
        next_value = torch.where(m.bool(), values[:, t], next_value)
    returns = (advantages + values) * mask
    return advantages, returns


def segment_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    action_mask: torch.Tensor,
    next_row: list[int],
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`gae` over episodes split into several rows (one per segment, ``t1train/trajectory.py``).

    ``next_row[b]`` is the row of the segment that follows row ``b`` in its episode (-1 for an episode's last
    segment and for a one-row episode). Rows are processed from the last segment backwards; each earlier row
    bootstraps from the value and the advantage of the next row's first action token, so an episode's advantages
    and returns are what :func:`gae` gives over its action tokens laid end to end, while each value comes from the
    critic reading that segment's own context. With every ``next_row`` -1 this is :func:`gae`.

    Example:
        >>> m = torch.tensor([[1., 0., 1.], [1., 1., 0.]])  # row 0: segment 0 (2 actions); row 1: segment 1
        >>> adv, ret = segment_gae(torch.tensor([[0., 0., 0.], [0., 1., 0.]]), torch.zeros(2, 3), m, [1, -1], lam=1.0)
        >>> ret.tolist()
        [[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
    """
    rows = len(next_row)
    depth = [0] * rows  # how many segments follow each row in its episode
    for b in range(rows):
        nxt = next_row[b]
        while nxt >= 0:
            depth[b] += 1
            nxt = next_row[nxt]
    positions = torch.arange(action_mask.shape[1], device=action_mask.device)
    first = torch.where(action_mask.bool(), positions, action_mask.shape[1]).min(dim=1).values  # first action token
    advantages = torch.zeros_like(values)
    for level in range(max(depth, default=0) + 1):
        idx = [b for b in range(rows) if depth[b] == level]
        boot_v, boot_a = values.new_zeros(len(idx)), values.new_zeros(len(idx))
        for i, b in enumerate(idx):
            nxt = next_row[b]
            if nxt >= 0 and first[nxt] < action_mask.shape[1]:
                boot_v[i], boot_a[i] = values[nxt, first[nxt]], advantages[nxt, first[nxt]]
        adv, _ = gae(rewards[idx], values[idx], action_mask[idx], gamma, lam, boot_v, boot_a)
        advantages[idx] = adv
    return advantages, (advantages + values) * action_mask.to(values.dtype)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, reduce: Reduce | None = None) -> torch.Tensor:
    """Mean of ``x`` over ``mask``. ``reduce`` sums a tensor over every process of a multi-process run (e.g.
    ``accelerator.reduce(t, "sum")``): the mean is then over every process's batch, not this process's part."""
    if reduce is None:
        return (x * mask).sum() / mask.sum().clamp(min=1.0)
    total = reduce(torch.stack([(x * mask).sum(), mask.sum().to(x.dtype)]))
    return total[0] / total[1].clamp(min=1.0)


def masked_whiten(
    x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, reduce: Reduce | None = None
) -> torch.Tensor:
    """Normalize ``x`` to unit variance (and zero mean) over ``mask``; 0 outside it. With ``reduce`` (see
    :func:`masked_mean`) the statistics are the whole batch's, over all processes."""
    mean = masked_mean(x, mask, reduce)
    var = masked_mean((x - mean) ** 2, mask, reduce)
    out = (x - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        out = out + mean
    return out * mask


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, reduce: Reduce | None = None
) -> float:
    """``1 - Var(returns - values) / Var(returns)`` over ``mask``: 1 is perfect, 0 is as good as a constant,
    negative is worse. ``nan`` when the returns do not vary.

    Example:
        >>> r = torch.tensor([[1., 2., 3.]]); m = torch.ones(1, 3)
        >>> explained_variance(r, r, m), explained_variance(torch.full((1, 3), 2.), r, m)
        (1.0, 0.0)
    """
    var_r = masked_mean((returns - masked_mean(returns, mask, reduce)) ** 2, mask, reduce)
    if var_r.item() < 1e-12:
        return float("nan")
    diff = returns - values
    var_d = masked_mean((diff - masked_mean(diff, mask, reduce)) ** 2, mask, reduce)
    return float(1.0 - var_d / var_r)


# ------------------------------------------------------------------------------------------------ critic loss
def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None,
    normalizer: torch.Tensor | float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped value loss ``0.5 * max((V - R)^2, (V_clipped - R)^2)``, mean over ``mask``; returns
    ``(loss, clip_fraction)``. ``clip=None`` turns clipping off (plain squared error).

    ``normalizer``: divide the masked sum by it instead of by this batch's token count. The trainer passes the
    action tokens of the whole generation batch per process and accumulation step (TRL's ``dapo`` normalizer), so
    the gradient is the same whether the batch runs in one micro-batch on one process or is split over several."""
    unclipped = (values - returns) ** 2
    if clip is None:
        per_token = unclipped
        clip_fraction = values.new_zeros(())
    else:
        clipped_values = old_values + (values - old_values).clamp(-clip, clip)
        clipped = (clipped_values - returns) ** 2
        per_token = torch.maximum(unclipped, clipped)
        clip_fraction = masked_mean((clipped > unclipped).float(), mask)
    if normalizer is None:
        return 0.5 * masked_mean(per_token, mask), clip_fraction
    return 0.5 * (per_token * mask).sum() / normalizer, clip_fraction


# ------------------------------------------------------------------------------------------------ off-policy
def off_policy_weights(
    trainer_logps: torch.Tensor,
    sampler_logps: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_truncate",
    clip: float = 2.0,
) -> torch.Tensor | None:
    """Importance weights ``pi_trainer / pi_sampler`` that correct for the sampler not being the trainer.

    ``token_*`` gives one weight per token ``[B, T]``, ``sequence_*`` one per episode ``[B, 1]`` (the product of
    the token ratios). ``*_truncate`` caps the weight at ``clip`` (truncated IS); ``*_mask`` zeroes tokens or
    episodes whose weight exceeds ``clip`` or falls below ``1/clip``. ``none`` returns None. The weights are
    constants (no gradient): multiply them into the advantages.

    Example:
        >>> lp = torch.log(torch.tensor([[0.5, 0.9]])); slp = torch.log(torch.tensor([[0.1, 0.9]]))
        >>> off_policy_weights(lp, slp, torch.ones(1, 2), "token_truncate", 2.0).tolist()
        [[2.0, 1.0]]
    """
    if mode == "none":
        return None
    if mode not in OFF_POLICY_MODES:
        raise ValueError(f"off-policy mode must be one of {OFF_POLICY_MODES}, got {mode!r}")
    diff = torch.nan_to_num((trainer_logps - sampler_logps).detach(), nan=0.0) * mask
    if mode.startswith("sequence"):
        diff = diff.sum(dim=1, keepdim=True)
    ratio = torch.exp(diff.clamp(max=20.0))
    if mode.endswith("truncate"):
        return ratio.clamp(max=clip)
    keep = (ratio <= clip) & (ratio >= 1.0 / clip)
    return keep.to(ratio.dtype)

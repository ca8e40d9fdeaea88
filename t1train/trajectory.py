"""Trajectory: one episode as the trainer sees it, in token ids.

Layout of the training sequence (``Trajectory.token_ids()``)::

    prompt_ids | turn 0 sampled_ids | turn 0 bridge_ids | turn 1 sampled_ids | ... | turn N-1 sampled_ids [| bridge]
      mask 0        mask 1              mask 0              mask 1                     mask 1

``prompt_ids`` is the rendered system + instruction (with the generation prompt). Each turn's ``sampled_ids`` are
the engine's output, unchanged (loss mask 1, with the sampler's log-probs and, for MoE models, the routed experts
``[tokens, moe_layers, top_k]``). ``bridge_ids`` are the template's close of the assistant turn, the observation
message and the next generation prompt (loss mask 0); see ``t1train/tito.py``. The last turn has no bridge unless
the episode continued past it (e.g. it was cut by the context limit).

On disk: one JSON object per line (``save_jsonl`` / ``load_jsonl``), the full per-turn record. Runs write the
file one finished episode at a time (``t1train.storage.EpisodeLog``), so a killed run keeps what it finished. For
training, ``to_dataset`` flattens each episode into aligned columns (``input_ids``, ``loss_mask``,
``sampler_logprobs``, ...) of a ``datasets.Dataset``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from t1train.storage import read_jsonl, write_text_atomic

FORMAT_VERSION = 1


@dataclass
class Turn:
    """One assistant turn and what followed it."""

    prompt_len: int
    """Length of the prompt the engine continued from; the sampled ids start at this position."""
    sampled_ids: list[int]
    """The engine's sampled ids (loss mask 1)."""
    logprobs: list[float]
    """Sampler log-probs of ``sampled_ids`` (see ``t1train/engines/base.py``)."""
    finish_reason: str
    """``"stop"``, ``"length"`` or ``"abort"``."""
    bridge_ids: list[int] = field(default_factory=list)
    """Template ids after the sampled ids (loss mask 0): close, observation message, next generation prompt."""
    routed_experts: list[list[list[int]]] | None = None
    """``[len(sampled_ids), moe_layers, top_k]`` when the engine returned routing."""
    action: dict = field(default_factory=dict)
    """The parsed action: ``{"kind": "command", "command": ...}``, ``{"kind": "submit"}`` or ``{"kind": "none"}``."""
    observation: str = ""
    """The observation message text that followed the turn."""
    reward: float = 0.0
    """Reward the env returned for this turn's step (the final reward arrives on the last step)."""
    env_info: dict = field(default_factory=dict)
    """Per-step env info kept for analysis (exit code, duration, timed_out, ...)."""
    weight_version: str | None = None
    """Engine weight version the turn was sampled with."""
    prompt_routed_experts: list[list[list[int]]] | None = None
    """Routing of the turn's prompt positions ``[routed_experts_start, prompt_len - 1)``: the positions no earlier
    turn covered (the previous turn's last sampled token and the bridge). Together with ``routed_experts`` they
    give every position of the training sequence a row (``Trajectory.routed_experts_by_position``)."""
    routed_experts_start: int | None = None
    """First position ``prompt_routed_experts`` covers."""


@dataclass
class Trajectory:
    """One episode."""

    task_id: str
    seed: int | None
    prompt_ids: list[int]
    turns: list[Turn] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    """The conversation as text (system, instruction, assistant turns decoded, observations); for reading and for
    the re-tokenize baseline. Never used to build ids."""
    reward: float = 0.0
    """Episode reward (sum of per-turn rewards; with t1env: number of passing checks by default)."""
    termination: str = ""
    """Why the episode ended: ``submit``, ``env_truncated``, ``max_turns``, ``context_limit``, ``aborted``, ``error``."""
    checks: dict = field(default_factory=dict)
    """The verifier's per-check results and totals from the final env info (``checks``, ``passed``, ``total``,
    ``resolved``)."""
    drift_events: list[dict] = field(default_factory=list)
    """Turns whose bridge was repaired (``t1train.tito.DriftEvent``)."""
    error: str | None = None
    metadata: dict = field(default_factory=dict)

    # ---------------------------------------------------------------- training view
    def token_ids(self) -> list[int]:
        ids = list(self.prompt_ids)
        for turn in self.turns:
            ids += turn.sampled_ids
            ids += turn.bridge_ids
        return ids

    def loss_mask(self) -> list[int]:
        mask = [0] * len(self.prompt_ids)
        for turn in self.turns:
            mask += [1] * len(turn.sampled_ids)
            mask += [0] * len(turn.bridge_ids)
        return mask

    def sampler_logprobs(self) -> list[float]:
        """Aligned with ``token_ids()``; 0.0 outside the loss region."""
        lps = [0.0] * len(self.prompt_ids)
        for turn in self.turns:
            lps += turn.logprobs
            lps += [0.0] * len(turn.bridge_ids)
        return lps

    def routed_experts(self) -> list[list[list[int]]] | None:
        """Routed experts of the loss-region tokens, in order (``[loss_tokens, moe_layers, top_k]``), or None."""
        if not self.turns or any(t.routed_experts is None for t in self.turns):
            return None
        return [row for t in self.turns for row in t.routed_experts]

    def routed_experts_by_position(self) -> tuple[list[list[list[int]]], list[bool]] | None:
        """The sampler's routing for every position of ``token_ids()``: ``(rows, recorded)``.

        Row ``p`` holds the experts the sampler's forward chose for the token at position ``p`` (its input), which
        is what R3 replays (``t1train/r3.py``). Positions no forward consumed (the last token, unless the episode
        continued) and those a turn did not return are ``recorded=False`` (zeros), and the trainer routes them
        live. Where turns overlap, the first record wins (as SGLang's radix cache reuses the first computation).
        None if no turn carries routing.
        """
        if not any(t.routed_experts for t in self.turns):
            return None
        width = next(len(t.routed_experts[0]) for t in self.turns if t.routed_experts)
        top_k = len(next(t.routed_experts[0][0] for t in self.turns if t.routed_experts))
        n = len(self.token_ids())
        rows: list = [None] * n
        for turn in self.turns:
            if not turn.routed_experts:
                continue
            prompt_rows = turn.prompt_routed_experts or []
            start = turn.routed_experts_start if turn.routed_experts_start is not None else turn.prompt_len - 1
            if start + len(prompt_rows) != turn.prompt_len - 1:
                raise ValueError(
                    f"turn at {turn.prompt_len}: {len(prompt_rows)} prompt routing rows from position "
                    f"{start} do not end at the last prompt position"
                )
            for p, row in enumerate(prompt_rows + turn.routed_experts, start=start):
                if p < n and rows[p] is None:
                    rows[p] = row
        blank = [[0] * top_k for _ in range(width)]
        return [r if r is not None else blank for r in rows], [r is not None for r in rows]

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    # ---------------------------------------------------------------- serialization
    def to_dict(self) -> dict:
        data = asdict(self)
        data["format_version"] = FORMAT_VERSION
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Trajectory:
        data = dict(data)
        version = data.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"trajectory format version {version} is not {FORMAT_VERSION}; re-run the rollout")
        data["turns"] = [Turn(**t) for t in data.get("turns", [])]
        return cls(**data)


def save_jsonl(trajectories: list[Trajectory], path: str | Path, append: bool = False) -> None:
    """Write trajectories as JSONL. A new file replaces the old one atomically (a crash leaves the old file or the
    new one); ``append=True`` adds lines and fsyncs them. To write episode by episode while a run goes on, use
    :class:`t1train.storage.EpisodeLog`."""
    lines = "".join(json.dumps(traj.to_dict()) + "\n" for traj in trajectories)
    if not append:
        write_text_atomic(path, lines)
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())


def load_jsonl(path: str | Path) -> list[Trajectory]:
    """Read a JSONL file of trajectories. A torn last line (its writer was killed mid-line) is skipped with a
    warning; damage anywhere else is an error naming the line."""
    return [Trajectory.from_dict(record) for record in read_jsonl(path)]


def training_record(traj: Trajectory) -> dict:
    """The flat, aligned view of one episode that a trainer consumes.

    ``routed_experts_by_position``/``routing_recorded`` align with ``input_ids`` (R3; see
    ``Trajectory.routed_experts_by_position``); ``routed_experts`` keeps only the loss-region rows."""
    by_position = traj.routed_experts_by_position()
    return {
        "task_id": traj.task_id,
        "seed": traj.seed,
        "input_ids": traj.token_ids(),
        "loss_mask": traj.loss_mask(),
        "sampler_logprobs": traj.sampler_logprobs(),
        "routed_experts": traj.routed_experts(),
        "routed_experts_by_position": by_position[0] if by_position else None,
        "routing_recorded": by_position[1] if by_position else None,
        "turn_rewards": [t.reward for t in traj.turns],
        "reward": traj.reward,
        "num_turns": traj.num_turns,
        "termination": traj.termination,
        "passed": traj.checks.get("passed"),
        "total": traj.checks.get("total"),
        "resolved": traj.checks.get("resolved"),
        "num_drift_events": len(traj.drift_events),
    }


def to_dataset(trajectories: list[Trajectory]):
    """A ``datasets.Dataset`` with one row per episode (see :func:`training_record`)."""
    import datasets  # the train extra: only when trajectories become a dataset

    return datasets.Dataset.from_list([training_record(t) for t in trajectories])


def load_dataset(path: str | Path):
    """Load a trajectories JSONL file straight into the flat training view."""
    return to_dataset(load_jsonl(path))

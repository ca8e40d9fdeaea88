"""Trajectory: one episode as the trainer sees it, in token ids, as one or more segments.

Layout of one segment's training sequence (``SegmentView.token_ids()``)::

    prompt_ids | turn 0 sampled_ids | turn 0 bridge_ids | turn 1 sampled_ids | ... | turn N-1 sampled_ids [| bridge]
      mask 0        mask 1              mask 0              mask 1                     mask 1

A segment's ``prompt_ids`` are exactly the ids the sampler saw as its first prompt: for segment 0 the rendered
system + instruction (with the generation prompt); for a later segment the context the rollout rebuilt when the
conversation no longer fit (``t1train/rollout.py``, ``context_policy``: the instruction plus the last turns, or a
summary). Each turn's ``sampled_ids`` are the engine's output, unchanged (loss mask 1, with the sampler's log-probs
and, for MoE models, the routed experts ``[tokens, moe_layers, top_k]``). ``bridge_ids`` are the template's close of
the assistant turn, the observation message and the next generation prompt (loss mask 0); see
``t1train/tito.py``. A segment's last turn has no bridge unless the segment continued past it (e.g. the episode was
cut by the context limit). ``Turn.prompt_len`` and the routing positions are relative to the turn's own segment.

Most episodes have one segment, and ``Trajectory.token_ids()`` etc. are that segment's view. With several segments
there is no single training sequence: those methods raise, and callers go through ``Trajectory.segment_views()``
(one training row per segment; the episode's reward and advantage are shared by its segments).

On disk: one JSON object per line (``save_jsonl`` / ``load_jsonl``), the full per-turn record (format version 2:
``segments`` added; a version-1 line loads as one segment). Runs write the file one finished episode at a time
(``t1train.storage.EpisodeLog``), so a killed run keeps what it finished. For training, ``to_dataset`` flattens
each segment into aligned columns (``input_ids``, ``loss_mask``, ``sampler_logprobs``, ...) of a
``datasets.Dataset``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from t1train.storage import read_jsonl, write_text_atomic

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


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

    @classmethod
    def sampled(cls, prompt_len: int, gen) -> Turn:
        """The turn an engine sampled (a ``t1train.engines.base.Generation``) from a prompt of ``prompt_len`` ids:
        its ids, log-probs, routing and weight version, unchanged."""
        return cls(
            prompt_len=prompt_len,
            sampled_ids=list(gen.token_ids),
            logprobs=list(gen.logprobs),
            finish_reason=gen.finish_reason,
            routed_experts=gen.routed_experts,
            weight_version=gen.weight_version,
            prompt_routed_experts=gen.prompt_routed_experts,
            routed_experts_start=gen.routed_experts_start,
        )


@dataclass
class Segment:
    """Where one context starts: the prompt the sampler saw and the first turn sampled under it."""

    prompt_ids: list[int]
    """The exact ids the sampler saw as the segment's first prompt (loss mask 0)."""
    first_turn: int
    """Index into ``Trajectory.turns`` of the segment's first turn."""
    reason: str = "start"
    """Why the segment began: ``"start"`` (segment 0), ``"drop_observations"``, ``"summary"`` (context policies,
    ``t1train/rollout.py``), ``"non_prefix"`` (the serve endpoint got a conversation that does not extend the last
    one)."""


def _token_ids(prompt_ids: list[int], turns: list[Turn]) -> list[int]:
    ids = list(prompt_ids)
    for turn in turns:
        ids += turn.sampled_ids
        ids += turn.bridge_ids
    return ids


def _loss_mask(prompt_ids: list[int], turns: list[Turn]) -> list[int]:
    mask = [0] * len(prompt_ids)
    for turn in turns:
        mask += [1] * len(turn.sampled_ids)
        mask += [0] * len(turn.bridge_ids)
    return mask


def _sampler_logprobs(prompt_ids: list[int], turns: list[Turn]) -> list[float]:
    lps = [0.0] * len(prompt_ids)
    for turn in turns:
        lps += turn.logprobs
        lps += [0.0] * len(turn.bridge_ids)
    return lps


def _routed_experts(turns: list[Turn]) -> list[list[list[int]]] | None:
    if not turns or any(t.routed_experts is None for t in turns):
        return None
    return [row for t in turns for row in t.routed_experts]


def _routed_experts_by_position(
    prompt_ids: list[int], turns: list[Turn]
) -> tuple[list[list[list[int]]], list[bool]] | None:
    if not any(t.routed_experts for t in turns):
        return None
    width = next(len(t.routed_experts[0]) for t in turns if t.routed_experts)
    top_k = len(next(t.routed_experts[0][0] for t in turns if t.routed_experts))
    n = len(prompt_ids) + sum(len(t.sampled_ids) + len(t.bridge_ids) for t in turns)
    rows: list = [None] * n
    for turn in turns:
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


@dataclass
class SegmentView:
    """One segment's training sequence: its prompt and its turns (views into the trajectory's lists)."""

    index: int
    prompt_ids: list[int]
    turns: list[Turn]
    reason: str = "start"
    first_turn: int = 0

    def token_ids(self) -> list[int]:
        return _token_ids(self.prompt_ids, self.turns)

    def loss_mask(self) -> list[int]:
        return _loss_mask(self.prompt_ids, self.turns)

    def sampler_logprobs(self) -> list[float]:
        """Aligned with ``token_ids()``; 0.0 outside the loss region."""
        return _sampler_logprobs(self.prompt_ids, self.turns)

    def routed_experts(self) -> list[list[list[int]]] | None:
        """Routed experts of the loss-region tokens, in order (``[loss_tokens, moe_layers, top_k]``), or None."""
        return _routed_experts(self.turns)

    def routed_experts_by_position(self) -> tuple[list[list[list[int]]], list[bool]] | None:
        """The sampler's routing for every position of ``token_ids()``: ``(rows, recorded)``.

        Row ``p`` holds the experts the sampler's forward chose for the token at position ``p`` (its input), which
        is what R3 replays (``t1train/r3.py``). Positions no forward consumed (the last token, unless the segment
        continued) and those a turn did not return are ``recorded=False`` (zeros), and the trainer routes them
        live. Where turns overlap, the first record wins (as SGLang's radix cache reuses the first computation).
        None if no turn carries routing.
        """
        return _routed_experts_by_position(self.prompt_ids, self.turns)


_MULTI_SEGMENT = (
    "trajectory of {task} has {n} segments (its context was rebuilt mid-episode); there is no single training "
    "sequence: use Trajectory.segment_views() and take {what} per segment"
)


@dataclass
class Trajectory:
    """One episode."""

    task_id: str
    seed: int | None
    prompt_ids: list[int]
    """Segment 0's prompt: the rendered system + instruction."""
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
    segments: list[Segment] = field(default_factory=list)
    """The contexts the episode was sampled under, in order (see the module docstring); empty means one segment
    from ``prompt_ids``."""

    def __post_init__(self):
        if not self.segments:
            self.segments = [Segment(self.prompt_ids, 0, "start")]
        self.segments = [s if isinstance(s, Segment) else Segment(**s) for s in self.segments]
        first = self.segments[0]
        if first.first_turn != 0 or first.prompt_ids != self.prompt_ids:
            raise ValueError(
                f"trajectory of {self.task_id}: segment 0 must start at turn 0 with the trajectory's prompt_ids "
                f"(got first_turn {first.first_turn}, {len(first.prompt_ids)} vs {len(self.prompt_ids)} prompt ids)"
            )
        starts = [s.first_turn for s in self.segments]
        if starts != sorted(starts) or len(set(starts)) != len(starts):
            raise ValueError(f"trajectory of {self.task_id}: segment first_turn values {starts} must increase")

    # ---------------------------------------------------------------- training view
    def segment_views(self) -> list[SegmentView]:
        """One view per segment, in order: its prompt ids and its turns (``turns[first_turn:next first_turn]``)."""
        views = []
        for i, seg in enumerate(self.segments):
            end = self.segments[i + 1].first_turn if i + 1 < len(self.segments) else len(self.turns)
            views.append(SegmentView(i, seg.prompt_ids, self.turns[seg.first_turn : end], seg.reason, seg.first_turn))
        return views

    @property
    def num_segments(self) -> int:
        return len(self.segments)

    def _only_segment(self, what: str) -> SegmentView:
        if len(self.segments) != 1:
            raise ValueError(_MULTI_SEGMENT.format(task=self.task_id, n=len(self.segments), what=what))
        return self.segment_views()[0]

    def token_ids(self) -> list[int]:
        """The training sequence of a one-segment episode (``SegmentView.token_ids``)."""
        return self._only_segment("token_ids()").token_ids()

    def loss_mask(self) -> list[int]:
        return self._only_segment("loss_mask()").loss_mask()

    def sampler_logprobs(self) -> list[float]:
        """Aligned with ``token_ids()``; 0.0 outside the loss region."""
        return self._only_segment("sampler_logprobs()").sampler_logprobs()

    def routed_experts(self) -> list[list[list[int]]] | None:
        """Routed experts of the loss-region tokens, in order (``[loss_tokens, moe_layers, top_k]``), or None."""
        return self._only_segment("routed_experts()").routed_experts()

    def routed_experts_by_position(self) -> tuple[list[list[list[int]]], list[bool]] | None:
        """See ``SegmentView.routed_experts_by_position``."""
        return self._only_segment("routed_experts_by_position()").routed_experts_by_position()

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
        if version not in READABLE_VERSIONS:
            raise ValueError(
                f"trajectory format version {version} is not one of {READABLE_VERSIONS}; re-run the rollout"
            )
        data["turns"] = [Turn(**t) for t in data.get("turns", [])]
        data["segments"] = [Segment(**s) for s in data.get("segments", [])]  # version 1: none, one from prompt_ids
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


def training_records(traj: Trajectory) -> list[dict]:
    """The flat, aligned views of one episode that a trainer consumes: one per segment.

    ``routed_experts_by_position``/``routing_recorded`` align with ``input_ids`` (R3; see
    ``SegmentView.routed_experts_by_position``); ``routed_experts`` keeps only the loss-region rows.
    ``turn_rewards`` are the segment's turns'; ``reward``, ``num_turns`` and the check counts are the episode's."""
    records = []
    for view in traj.segment_views():
        by_position = view.routed_experts_by_position()
        records.append(
            {
                "task_id": traj.task_id,
                "seed": traj.seed,
                "input_ids": view.token_ids(),
                "loss_mask": view.loss_mask(),
                "sampler_logprobs": view.sampler_logprobs(),
                "routed_experts": view.routed_experts(),
                "routed_experts_by_position": by_position[0] if by_position else None,
                "routing_recorded": by_position[1] if by_position else None,
                "turn_rewards": [t.reward for t in view.turns],
                "reward": traj.reward,
                "num_turns": traj.num_turns,
                "termination": traj.termination,
                "passed": traj.checks.get("passed"),
                "total": traj.checks.get("total"),
                "resolved": traj.checks.get("resolved"),
                "num_drift_events": len(traj.drift_events),
                "segment": view.index,
                "num_segments": traj.num_segments,
            }
        )
    return records


def training_record(traj: Trajectory) -> dict:
    """The flat view of a one-segment episode (:func:`training_records`' only record); several segments raise."""
    records = training_records(traj)
    if len(records) != 1:
        raise ValueError(_MULTI_SEGMENT.format(task=traj.task_id, n=len(records), what="training_records(traj)"))
    return records[0]


def to_dataset(trajectories: list[Trajectory]):
    """A ``datasets.Dataset`` with one row per segment (see :func:`training_records`)."""
    import datasets  # the train extra: only when trajectories become a dataset

    return datasets.Dataset.from_list([r for t in trajectories for r in training_records(t)])


def load_dataset(path: str | Path):
    """Load a trajectories JSONL file straight into the flat training view."""
    return to_dataset(load_jsonl(path))

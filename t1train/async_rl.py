"""Asynchronous training: a producer keeps playing episodes while the optimizer runs.

Synchronous training (the default) plays a whole batch, trains on it, syncs the weights, and repeats: the optimizer
waits for the slowest episode of every batch, and the sampler waits for every optimizer step. With ``async`` set
in the trainer's YAML::

    train:
      async:
        max_staleness: 2      # train on an episode at most 2 policy versions older than the policy being trained
        stale: drop           # drop | downweight

a producer thread runs the agent loop (:class:`t1train.rollout.RolloutRunner`, the same envs, executor and engine
as a synchronous run) without stopping, and the trainer's generation step takes finished episodes from its queue.

Story of one episode and one step
---------------------------------
1. **Admission.** The producer starts a group (``num_generations`` episodes of one ``(task, seed)`` row of the
   train set, rows in a seeded random order, epoch after epoch) whenever fewer than
   ``(version + 1 + max_staleness) * groups_per_step`` groups have been started and not dropped, where
   ``version`` is the number of optimizer steps taken (the policy the trainer trains now). So it runs at most
   ``max_staleness`` steps ahead; ``max_staleness: 0`` is the synchronous schedule.
2. **Sampling.** Every turn records the engine's ``weight_version`` when it was sampled (``Turn.weight_version``)
   and the log-prob of each sampled token under the distribution it was drawn from (``Turn.logprobs``). The
   trainer updates the engine's weights *between* generate calls (the HF engine takes them under its lock; an
   SGLang server loads them from disk): episodes in flight are never stopped, so a long episode may play its later
   turns on newer weights. Nothing is lost by that: the importance weights and the off-policy losses
   (``t1train/offpolicy.py``) compare the trainer's log-prob with the sampler's log-prob *of each token*, so each
   token is corrected for the policy that actually sampled it.
3. **Staleness.** When the trainer at version ``v`` takes a finished group, each episode's staleness is ``v``
   minus the *oldest* version among its turns (the policy it started with). A group with an episode staler than
   ``max_staleness`` is **dropped** (``stale: drop``, the default: counted, logged to ``trajectories.jsonl`` with
   phase ``train-stale``, and its slot given back to the producer) or **down-weighted** (``stale: downweight``:
   trained on with its advantages multiplied by ``stale_weight ** (staleness - max_staleness)``, counted).
4. **Health.** Every step logs the staleness histogram of the episodes trained on (``async/staleness_K``:
   episodes K versions behind), the episodes dropped and down-weighted, the **trainer idle fraction** (share of
   the step's wall time the trainer waited for episodes) and the **sampler idle fraction** (share of the step's
   wall time no episode was in flight because admission was closed).

A group is the unit of admission, staleness and dropping, so GRPO's groups always arrive whole. When training
ends, the producer stops at its next generate call: the episodes in flight are abandoned (their sandboxes closed),
not played to the end.

Example:
    ``tests/t1train/test_async_rl.py`` runs :class:`AsyncRollouts` with the tiny model and a scripted env, and
    trains 3 asynchronous steps; ``bench/async_rl.py`` compares sync and async on a mixed-length workload.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from t1train.rollout import EpisodeSpec
from t1train.trajectory import Trajectory

STALE_POLICIES = ("drop", "downweight")


@dataclass
class AsyncConfig:
    """The ``async:`` mapping of a training YAML (``T1Config.async_rl``)."""

    max_staleness: int = 1
    """Train on episodes at most this many optimizer steps (policy versions) older than the policy being trained;
    the producer runs at most this many steps ahead."""
    stale: str = "drop"
    """An episode staler than ``max_staleness`` (a long one that finished late): ``drop`` its group or
    ``downweight`` it."""
    stale_weight: float = 0.5
    """``stale: downweight``: advantages times ``stale_weight ** (staleness - max_staleness)``."""

    def __post_init__(self):
        if isinstance(self.max_staleness, bool) or not isinstance(self.max_staleness, int) or self.max_staleness < 0:
            raise ValueError(f"async.max_staleness must be an integer >= 0, got {self.max_staleness!r}")
        if self.stale not in STALE_POLICIES:
            raise ValueError(f"async.stale must be one of {', '.join(STALE_POLICIES)}, got {self.stale!r}")
        if not 0.0 < self.stale_weight <= 1.0:
            raise ValueError(f"async.stale_weight must be in (0, 1], got {self.stale_weight!r}")

    @classmethod
    def from_mapping(cls, mapping: dict) -> AsyncConfig:
        """From the YAML's ``async:`` mapping; an unknown key is an error naming the known ones."""
        if not isinstance(mapping, dict):
            raise ValueError(f"async must be a mapping (e.g. {{max_staleness: 2}}), got {type(mapping).__name__}")
        known = [f.name for f in dataclasses.fields(cls)]
        for key in mapping:
            if key not in known:
                raise ValueError(f"async.{key}: unknown key (known: {', '.join(known)})")
        return cls(**mapping)


# ------------------------------------------------------------------------------------------------ versions
def turn_versions(traj: Trajectory) -> list[int]:
    """The policy version of each turn (the engine's ``weight_version``, an integer: the optimizer steps taken);
    turns whose engine reported none are left out."""
    out = []
    for turn in traj.turns:
        try:
            out.append(int(turn.weight_version))
        except (TypeError, ValueError):
            continue
    return out


def episode_staleness(traj: Trajectory, version: int) -> int:
    """How many versions the policy ``version`` is ahead of the oldest policy that sampled ``traj`` (0 for an
    episode with no versioned turn, e.g. one that failed before its first turn)."""
    versions = turn_versions(traj)
    return max(0, version - min(versions)) if versions else 0


@dataclass
class Group:
    """One ``(task, seed)`` row played ``num_generations`` times."""

    index: int
    spec: EpisodeSpec
    trajectories: list[Trajectory | None]

    def staleness(self, version: int) -> int:
        return max(episode_staleness(t, version) for t in self.trajectories)


@dataclass
class TakenBatch:
    """What :meth:`AsyncRollouts.take` hands the trainer for one step."""

    groups: list[Group]
    weights: list[float]
    """Per episode, in order: 1, or the down-weight of a stale one."""
    dropped: list[Group]
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for g in self.groups for t in g.trajectories]


# ------------------------------------------------------------------------------------------------ producer
class ProducerStopped(Exception):
    """Raised into the producer's agent loop by :class:`StoppableEngine` once the producer is stopped."""


class StoppableEngine:
    """The producer's view of an engine: every attribute is the engine's, but ``generate`` raises
    :class:`ProducerStopped` once ``stopped()`` is true, which ends the agent loop (it closes its envs)."""

    def __init__(self, engine, stopped: Callable[[], bool]):
        self._engine, self._stopped = engine, stopped

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def generate(self, *args, **kwargs):
        if self._stopped():
            raise ProducerStopped()
        return self._engine.generate(*args, **kwargs)


class AsyncRollouts:
    """A producer thread that plays groups of episodes continuously, and the queue the trainer takes them from.

    Args:
        play: ``play(more, on_episode)`` runs the agent loop until nothing is in flight and ``more()`` gives no
            episode: ``RolloutRunner(engine, ...).run([], on_episode, more)``, with the engine wrapped by
            :meth:`stoppable` so that :meth:`stop` does not wait for the episodes in flight.
        rows: the train set's ``(task, seed)`` rows.
        num_generations: episodes per group.
        groups_per_step: groups the trainer takes per step.
        config: the staleness settings.
        seed: seeds the order of the rows.
        clock: a monotonic clock (seconds).
    """

    def __init__(
        self,
        play: Callable[[Callable[[], list[EpisodeSpec]], Callable[[int, Trajectory], None]], object],
        rows: list[tuple[str, int]],
        num_generations: int,
        groups_per_step: int,
        config: AsyncConfig,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not rows:
            raise ValueError("the train set is empty: nothing to play")
        self.play, self.rows, self.config, self.clock = play, list(rows), config, clock
        self.num_generations, self.groups_per_step = num_generations, groups_per_step
        self._rng = random.Random(seed)
        self._order: list[tuple[str, int]] = []
        self._cond = threading.Condition()
        self._version = 0
        self._started = 0  # groups started
        self._dropped_groups = 0
        self._episodes_started = 0
        self._groups: dict[int, Group] = {}  # in flight
        self._call_slots: list[tuple[int, int]] = []  # this play() call's episode index -> (group, member)
        self._finished: collections.deque[Group] = collections.deque()
        self._stop = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._idle_s = 0.0  # time with nothing in flight because admission was closed
        self._idle_since: float | None = None
        self._t_start: float | None = None
        self._last_take_end: float | None = None
        self._last_idle_total = 0.0
        self.totals = collections.Counter()  # dropped_episodes, downweighted_episodes, trained_episodes, ...

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self._thread is not None:
            return
        self._t_start = self._last_take_end = self.clock()
        self._thread = threading.Thread(target=self._produce, name="t1-async-producer", daemon=True)
        self._thread.start()

    def stoppable(self, engine) -> StoppableEngine:
        """``engine`` for the producer's agent loop: its generate calls fail once :meth:`stop` is called."""
        return StoppableEngine(engine, lambda: self._stop)

    def stop(self) -> None:
        """Stop admitting groups and end the agent loop at its next generate call (with an engine from
        :meth:`stoppable`; else once the episodes in flight finish); their sandboxes are closed."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # ---------------------------------------------------------------- producer side (its own thread)
    def _may_start(self) -> bool:
        limit = (self._version + 1 + self.config.max_staleness) * self.groups_per_step
        return self._started - self._dropped_groups < limit

    def _produce(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._stop and not self._may_start():
                        self._idle_since = self.clock()
                        self._cond.notify_all()  # wait_idle()
                        self._cond.wait()
                        self._idle_s += self.clock() - self._idle_since
                        self._idle_since = None
                    if self._stop:
                        return
                    self._call_slots = []
                self.play(self._more, self._on_episode)
        except ProducerStopped:
            return
        except BaseException as err:  # noqa: BLE001 - handed to the trainer's take()
            with self._cond:
                self._error = err
                self._cond.notify_all()

    def _next_row(self) -> tuple[str, int]:
        if not self._order:
            self._order = list(self.rows)
            self._rng.shuffle(self._order)
        return self._order.pop()

    def _more(self) -> list[EpisodeSpec]:
        """The runner asks for episodes: one more group if admission allows it."""
        with self._cond:
            if self._stop or not self._may_start():
                return []
            task, seed = self._next_row()
            index = self._started
            self._started += 1
            spec = EpisodeSpec(task, seed)
            self._groups[index] = Group(index, spec, [None] * self.num_generations)
            specs = []
            for member in range(self.num_generations):
                self._call_slots.append((index, member))
                specs.append(dataclasses.replace(spec, sampling_index=self._episodes_started))
                self._episodes_started += 1
            return specs

    def _on_episode(self, index: int, traj: Trajectory) -> None:
        with self._cond:
            group_index, member = self._call_slots[index]
            group = self._groups[group_index]
            group.trajectories[member] = traj
            traj.metadata["weight_versions"] = sorted(set(turn_versions(traj)))
            if all(t is not None for t in group.trajectories):
                del self._groups[group_index]
                self._finished.append(group)
                self._cond.notify_all()

    # ---------------------------------------------------------------- trainer side
    def set_version(self, version: int) -> None:
        """The trainer took its ``version``-th optimizer step and the engine has its weights: admit more groups."""
        with self._cond:
            self._version = version
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until the producer waits for admission with nothing in flight (tests use it to make staleness
        deterministic); False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._error is not None or (self._idle_since is not None and not self._groups), timeout
            )

    def take(self, version: int) -> TakenBatch:
        """``groups_per_step`` groups for the trainer at ``version`` (blocks until they are finished), with the
        stale ones dropped or down-weighted as configured, and this step's async metrics."""
        cfg = self.config
        self.start()
        self.set_version(version)
        t0 = self.clock()
        groups: list[Group] = []
        weights: list[float] = []
        dropped: list[Group] = []
        histogram = collections.Counter()
        downweighted = 0
        with self._cond:
            while len(groups) < self.groups_per_step:
                self._cond.wait_for(lambda: self._finished or self._error is not None)
                if self._error is not None:
                    raise RuntimeError(f"the async rollout producer failed: {self._error!r}") from self._error
                group = self._finished.popleft()
                staleness = group.staleness(version)
                for t in group.trajectories:
                    t.metadata["staleness"] = episode_staleness(t, version)
                if staleness > cfg.max_staleness and cfg.stale == "drop":
                    dropped.append(group)
                    self._dropped_groups += 1  # its slot goes back to the producer
                    self._cond.notify_all()
                    continue
                groups.append(group)
                for t in group.trajectories:
                    s = t.metadata["staleness"]
                    histogram[s] += 1
                    weight = cfg.stale_weight ** (s - cfg.max_staleness) if s > cfg.max_staleness else 1.0
                    downweighted += weight < 1.0
                    t.metadata["stale_weight"] = weight
                    weights.append(weight)
            now = self.clock()
            idle_total = self._idle_s + (now - self._idle_since if self._idle_since is not None else 0.0)
        waited = now - t0
        span = max(now - self._last_take_end, 1e-9)
        sampler_idle = idle_total - self._last_idle_total
        self._last_take_end, self._last_idle_total = now, idle_total
        n_dropped = sum(len(g.trajectories) for g in dropped)
        self.totals.update(
            trained_episodes=len(weights),
            dropped_episodes=n_dropped,
            downweighted_episodes=downweighted,
            wait_s=waited,
        )
        metrics = {f"async/staleness_{k}": float(histogram.get(k, 0)) for k in range(cfg.max_staleness + 1)}
        if any(k > cfg.max_staleness for k in histogram):
            metrics["async/staleness_over"] = float(sum(c for k, c in histogram.items() if k > cfg.max_staleness))
        metrics.update(
            {
                "async/staleness_mean": sum(k * c for k, c in histogram.items()) / max(1, len(weights)),
                "async/staleness_max": float(max(histogram, default=0)),
                "async/dropped_episodes": float(n_dropped),
                "async/dropped_episodes_total": float(self.totals["dropped_episodes"]),
                "async/downweighted_episodes": float(downweighted),
                "async/trainer_idle_fraction": min(1.0, waited / span),
                "async/sampler_idle_fraction": min(1.0, max(0.0, sampler_idle) / span),
            }
        )
        return TakenBatch(groups, weights, dropped, metrics)

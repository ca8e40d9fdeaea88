"""The agent loop: run many t1 episodes concurrently with an Engine and record TITO trajectories.

Story of one episode
--------------------
1. ``env.reset(seed)`` gives the task instruction; the prompt is ``system + instruction`` rendered with the
   model's chat template (``Tito.prompt_ids``).
2. The engine samples a turn from the prompt ids. The text of the turn is parsed for an action (the ``text``
   protocol of ``t1env/agent/protocol.py``: a ``bash`` tool call, a fenced ```` ```bash ```` block, or ``SUBMIT``).
3. A command goes to ``env.step(command)``; its output (plus ``[exit code: N]``) becomes the next message. No
   action: the next message restates the action format, and the env is not stepped.
4. The next prompt is the previous prompt ids + the sampled ids + the bridge ids of the new message (TITO).
5. The episode ends on submit (the env runs the verifier; reward = passing checks), when the env truncates
   (its turn or time limit), at ``max_turns``, or before the context would overflow (``max_context_tokens``). On
   the last two the loop submits on the agent's behalf when ``submit_on_limit`` is set, so the verifier's partial
   credit is still collected.

Concurrency
-----------
One thread (the caller's) owns the engine calls and the token bookkeeping; env calls (``reset``, ``step``,
``close``: sandbox start, shell commands, verification) run in a thread pool. Episodes waiting for the model are
batched into one ``engine.generate`` call; while it runs, other episodes' commands keep executing. An engine with
``max_concurrency > 1`` (SGLang) gets several generate calls in flight, so a slow batch does not hold back
episodes that are ready.

The system prompt, the parser, the observation format and the turn and context rules are the protocol's
(:class:`t1env.agent.protocol.Protocol`, built from :class:`RolloutConfig` by :meth:`RolloutConfig.agent_protocol`):
``t1env eval --agent hf`` uses the same ones on a checkpoint trained here (``docs/protocol.md``).

Example:
    See ``docs/training.md``; ``t1train rollout --config t1train/configs/rollout-tiny.yaml`` runs this end to end.
"""

from __future__ import annotations

import collections
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable

from t1env.agent.protocol import (
    COMMAND,
    PROTOCOLS,
    SUBMIT,
    TEXT_SYSTEM_PROMPT,
    TRUNCATED_TURNS,
    Protocol,
    format_observation,  # noqa: F401 - re-exported for callers of t1train.rollout.format_observation
)
from t1train.engines.base import FINISH_ABORT, FINISH_LENGTH, Engine, Generation, SamplingParams, episode_seed
from t1train.tito import Tito, loss_region_drift, retokenize_drift, retokenize_drift_per_turn
from t1train.trajectory import Trajectory, Turn

DEFAULT_SYSTEM_PROMPT = TEXT_SYSTEM_PROMPT  # the text protocol's: one home, t1env/agent/protocol.py


@dataclass
class RolloutConfig:
    """How the agent loop runs episodes."""

    concurrency: int = 8
    """Episodes in flight at once (each holds a sandbox)."""
    max_turns: int = 32
    """Assistant turns per episode (the env may truncate earlier with its own limit)."""
    max_context_tokens: int = 8192
    """End the episode when the prompt plus ``max_new_tokens`` would exceed this."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    """System message rendered before the task instruction (empty: none)."""
    observation_role: str = "user"
    """Role of observation messages (``user`` or ``tool``; the template must support it)."""
    max_observation_chars: int = 8000
    """Longer observations keep their head and tail."""
    submit_on_limit: bool = True
    """At ``max_turns`` or the context limit, submit for the agent so the verifier still scores the episode."""
    return_routed_experts: bool = False
    """Ask the engine for MoE routing per sampled token (for R3)."""
    on_non_prefix: str = "repair"
    """What to do when the chat template is not prefix-preserving: ``repair`` (record drift events) or ``error``."""
    chat_template: str | None = None
    """Override the tokenizer's chat template (a Jinja string)."""
    truncated_turns: str = "act"
    """A turn cut by ``max_new_tokens`` before it ended: ``act`` runs the action it holds (if any); ``reject`` does
    not run it and answers that the turn was cut (the turn still counts). ``reject`` keeps RL from drifting into
    turns that never end: under ``act``, text after the action costs nothing until it is cut."""
    executor: str = "inprocess"
    """Where the envs' sandboxes run: ``inprocess`` (here) or ``ray`` (Ray workers; ``t1env.executor``)."""
    ray_address: str | None = "auto"
    """With ``executor: ray``: the cluster to join (``auto``: the one ``ray start`` made on this machine)."""
    protocol: str = "text"
    """The agent protocol style (``docs/protocol.md``). The rollout speaks ``text``: the model writes its action in
    its reply (``tools``, native tool calling, is for ``t1env eval --agent openai`` and ``TerminalToolEnv``)."""

    def __post_init__(self):
        if self.concurrency < 1 or self.max_turns < 1:
            raise ValueError("concurrency and max_turns must be >= 1")
        if self.executor not in ("inprocess", "ray"):
            raise ValueError(f"executor must be 'inprocess' or 'ray', got {self.executor!r}")
        check_truncated_turns(self.truncated_turns)
        if self.observation_role not in ("user", "tool"):
            raise ValueError(f"observation_role must be 'user' or 'tool', got {self.observation_role!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        if self.protocol != "text":
            raise ValueError(
                f"protocol {self.protocol!r}: the rollout trains with protocol: text (the model writes "
                "its action in its reply); tools is for t1env eval --agent openai and TerminalToolEnv"
            )

    def agent_protocol(self, max_new_tokens: int | None = None) -> Protocol:
        """The protocol this loop speaks (what a checkpoint trained with it records, ``t1_protocol.json``)."""
        return Protocol(
            name=self.protocol,
            system_prompt=self.system_prompt,
            observation_role=self.observation_role,
            max_observation_chars=self.max_observation_chars,
            max_new_tokens=max_new_tokens,
            max_context_tokens=self.max_context_tokens,
            max_turns=self.max_turns,
            truncated_turns=self.truncated_turns,
            chat_template=self.chat_template,
        )


def check_truncated_turns(mode: str) -> None:
    if mode not in TRUNCATED_TURNS:
        raise ValueError(f"truncated_turns must be 'act' or 'reject', got {mode!r}")


@dataclass
class EpisodeSpec:
    """Which episode to run: a task id and a reset seed."""

    task: str
    seed: int | None = None
    sampling_index: int | None = None
    """Which per-episode sampling stream the episode draws from when ``SamplingParams.seed`` is set (default: its
    position in the list given to ``run``). A resumed run passes each episode's index in the whole run, so it
    samples what an uninterrupted run would have."""


def make_env_factory(
    backend: str = "local", task_dirs: list[str] | None = None, executor=None, **kwargs: Any
) -> Callable[[str], Any]:
    """``make_env(task) -> T1Terminal-v0`` env, as the runner (``t1train rollout``, the trainer, SFT) makes them.

    ``task`` is a task id or a path to a task package; ``kwargs`` go to ``gym.make`` (``reward_mode``,
    ``max_turns``, ...). Each env plays one episode and is closed, so ``prestart`` is off unless asked for: a
    prestarted spare sandbox would never be used. ``executor`` (``t1env.executor.make_executor``): a Ray executor
    makes each env on a Ray worker instead (same arguments, same API).
    """
    import gymnasium as gym

    import t1env  # noqa: F401  (registers T1Terminal-v0)

    kwargs.setdefault("prestart", False)
    if executor is not None and executor.name != "inprocess":
        return lambda task: executor.make_env(task=task, backend=backend, task_dirs=task_dirs, **kwargs)

    def make_env(task: str):
        return gym.make("T1Terminal-v0", task=task, backend=backend, task_dirs=task_dirs, **kwargs)

    return make_env


# ------------------------------------------------------------------------------------------------ episode state
@dataclass
class _Episode:
    spec: EpisodeSpec
    t_start: float = 0.0
    env: Any = None
    traj: Trajectory | None = None
    ids: list[int] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    pending_turn: Turn | None = None
    pending_generation: Generation | None = None
    submitted_for_agent: bool = False
    closed: bool = False


class RolloutRunner:
    """Runs episodes with one engine and a factory of t1 envs. See the module docstring.

    Args:
        engine: an Engine (``HFEngine``, ``SGLangEngine``).
        tokenizer: the model's tokenizer (its chat template renders the prompts).
        make_env: ``make_env(task_id) -> env`` with the Gymnasium API of ``T1Terminal-v0``.
        sampling: sampling parameters for every turn.
        config: loop settings.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer,
        make_env: Callable[[str], Any],
        sampling: SamplingParams,
        config: RolloutConfig | None = None,
    ):
        self.engine = engine
        self.tokenizer = tokenizer
        self.make_env = make_env
        self.sampling = sampling
        self.config = config or RolloutConfig()
        self.protocol = self.config.agent_protocol(sampling.max_new_tokens)
        self.tito = Tito(tokenizer, self.config.chat_template, self.config.on_non_prefix)
        self.tito.check_template_or_warn(self.config.observation_role)

    # ---------------------------------------------------------------- env side (runs in worker threads)
    def _start(self, ep: _Episode) -> _Episode:
        ep.env = self.make_env(ep.spec.task)
        obs, info = ep.env.reset(seed=ep.spec.seed)
        messages = self.protocol.first_messages(obs)
        ep.history = messages
        ep.ids = self.tito.prompt_ids(messages)
        ep.traj = Trajectory(
            task_id=info.get("task_id", ep.spec.task),
            seed=ep.spec.seed,
            prompt_ids=list(ep.ids),
            messages=list(messages),
        )
        return ep

    @staticmethod
    def _step(ep: _Episode, action) -> tuple:
        return ep.env.step(action)

    @staticmethod
    def _close(ep: _Episode) -> None:
        if ep.env is not None and not ep.closed:
            ep.env.close()
            ep.closed = True

    # ---------------------------------------------------------------- main loop
    def run(
        self, episodes: list[EpisodeSpec], on_episode: Callable[[int, Trajectory], None] | None = None
    ) -> list[Trajectory]:
        """Run all episodes; return their trajectories in the order given.

        ``on_episode(index, trajectory)`` is called (in the caller's thread) as soon as each episode has finished,
        before its sandbox is closed: write it to disk there, and a run that dies later keeps it. However the run
        ends (an engine error, an exception from ``on_episode``, Ctrl-C), every env it made is closed before
        ``run`` returns or raises.
        """
        cfg = self.config
        queue = collections.deque(enumerate(episodes))
        results: dict[int, Trajectory] = {}
        slot: dict[int, int] = {}  # id(episode) -> index in `episodes`
        ready: list[_Episode] = []  # episodes waiting for the model
        futures: dict[Future, tuple[str, Any]] = {}
        started: list[_Episode] = []
        active = 0
        gens_in_flight = 0
        pool = ThreadPoolExecutor(max_workers=cfg.concurrency + max(1, self.engine.max_concurrency))

        def finish(ep: _Episode) -> None:
            nonlocal active
            ep.traj.metadata["elapsed_s"] = round(time.monotonic() - ep.t_start, 3)
            results[slot[id(ep)]] = ep.traj
            futures[pool.submit(self._close, ep)] = ("close", ep)
            active -= 1
            if on_episode is not None:
                on_episode(slot[id(ep)], ep.traj)

        try:
            while queue or futures or ready:
                # -- start episodes up to the concurrency limit (sandbox start + reset run in the pool)
                while queue and active < cfg.concurrency:
                    i, spec = queue.popleft()
                    ep = _Episode(spec, t_start=time.monotonic())
                    slot[id(ep)] = i
                    started.append(ep)
                    futures[pool.submit(self._start, ep)] = ("start", ep)
                    active += 1
                # -- batch every episode that waits for the model into one generate call
                if ready and gens_in_flight < max(1, self.engine.max_concurrency):
                    batch, ready = ready, []
                    # with routing: each prompt's rows from the first position no earlier turn covered (R3)
                    extra = (
                        {"routed_experts_start": [_routing_start(ep) for ep in batch]}
                        if cfg.return_routed_experts
                        else {}
                    )
                    if self.sampling.seed is not None:  # per episode and turn: independent of batching
                        extra["seeds"] = [
                            episode_seed(self.sampling.seed, _sampling_index(ep, slot), len(ep.traj.turns))
                            for ep in batch
                        ]
                    fut = pool.submit(
                        self.engine.generate,
                        [ep.ids for ep in batch],
                        self.sampling,
                        cfg.return_routed_experts,
                        **extra,
                    )
                    futures[fut] = ("generate", batch)
                    gens_in_flight += 1
                if not futures:
                    continue
                done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                for fut in done:
                    kind, payload = futures.pop(fut)
                    if kind == "generate":
                        gens_in_flight -= 1
                        for ep, gen in zip(payload, fut.result()):  # engine errors are fatal: raise
                            if self._on_generation(ep, gen, futures, pool, ready):
                                finish(ep)
                        continue
                    if kind == "close":
                        continue  # a failing close must not end the run
                    ep = payload
                    if fut.exception() is not None:  # the env failed: this episode ends, the others go on
                        self._fail(ep, fut.exception())
                        finish(ep)
                    elif kind == "start":
                        if self._fits(ep):
                            ready.append(ep)
                        elif self._end_early(ep, "context_limit", futures, pool):
                            finish(ep)
                    elif kind == "step" and self._on_step(ep, fut.result(), futures, pool, ready):
                        finish(ep)
        finally:
            # stopped by an error: drop the work not yet started, but let queued closes run (a cancelled close
            # would leak a finished episode's sandbox), then close whatever is still open
            for fut, (kind, _) in list(futures.items()):
                if kind != "close":
                    fut.cancel()
            pool.shutdown(wait=True)
            for ep in started:
                try:
                    self._close(ep)  # a no-op for the envs already closed
                except Exception:  # noqa: BLE001 - best effort while unwinding
                    pass
        return [results[i] for i in range(len(episodes))]

    # ---------------------------------------------------------------- bookkeeping (main thread)
    @staticmethod
    def _fail(ep: _Episode, err: BaseException) -> None:
        if ep.traj is None:
            ep.traj = Trajectory(task_id=ep.spec.task, seed=ep.spec.seed, prompt_ids=[])
        ep.traj.termination = "error"
        ep.traj.error = "".join(traceback.format_exception_only(type(err), err)).strip()

    def _on_generation(self, ep: _Episode, gen: Generation, futures, pool, ready) -> bool:
        """Record the sampled turn and act on it. Returns True when the episode is finished."""
        traj = ep.traj
        turn = Turn(
            prompt_len=len(ep.ids),
            sampled_ids=list(gen.token_ids),
            logprobs=list(gen.logprobs),
            finish_reason=gen.finish_reason,
            routed_experts=gen.routed_experts,
            weight_version=gen.weight_version,
            prompt_routed_experts=gen.prompt_routed_experts,
            routed_experts_start=gen.routed_experts_start,
        )
        traj.turns.append(turn)
        ep.ids = ep.ids + turn.sampled_ids
        text = self.tito.assistant_text(gen)
        traj.messages.append({"role": "assistant", "content": text})
        if gen.finish_reason == FINISH_ABORT:
            traj.termination = "aborted"
            return True

        action = self.protocol.parse(text, cut=gen.finish_reason == FINISH_LENGTH)
        turn.action = action.to_dict()
        ep.pending_turn, ep.pending_generation = turn, gen
        if action.kind == SUBMIT:
            futures[pool.submit(self._step, ep, {"submit": True})] = ("step", ep)
        elif action.kind == COMMAND:
            futures[pool.submit(self._step, ep, action.command)] = ("step", ep)
        elif self._at_limit(ep):
            return self._end_early(ep, "max_turns", futures, pool)
        elif not self._continue(ep, self.protocol.answer_message(action), ready):
            return self._end_early(ep, "context_limit", futures, pool)
        return False

    def _on_step(self, ep: _Episode, step: tuple, futures, pool, ready) -> bool:
        obs, reward, terminated, truncated, info = step
        traj, turn = ep.traj, ep.pending_turn
        if ep.submitted_for_agent:  # the loop's own submit at a limit: not an agent turn
            traj.reward += float(reward)
            if turn is not None:
                turn.reward += float(reward)
            self._record_checks(traj, info)
            return True
        turn.reward = float(reward)
        turn.env_info = {k: info[k] for k in ("exit_code", "duration", "timed_out", "output_truncated") if k in info}
        traj.reward += float(reward)
        if terminated or truncated:
            traj.termination = "submit" if terminated else "env_truncated"
            turn.observation = obs
            self._record_checks(traj, info)
            return True
        if self._at_limit(ep):
            return self._end_early(ep, "max_turns", futures, pool)
        if not self._continue(ep, self.protocol.observation_message(obs, info), ready):
            return self._end_early(ep, "context_limit", futures, pool)
        return False

    def _at_limit(self, ep: _Episode) -> bool:
        return self.protocol.at_turn_limit(len(ep.traj.turns))

    def _fits(self, ep: _Episode) -> bool:
        return self.protocol.fits(len(ep.ids))

    def _end_early(self, ep: _Episode, reason: str, futures, pool) -> bool:
        """End at a loop limit; submit for the agent if configured. Returns True when nothing is left to wait for."""
        ep.traj.termination = reason
        if self.config.submit_on_limit:
            ep.submitted_for_agent = True
            futures[pool.submit(self._step, ep, {"submit": True})] = ("step", ep)
            return False
        return True

    def _continue(self, ep: _Episode, message: dict, ready: list) -> bool:
        """Append the observation message via the TITO bridge and queue the episode for generation.
        Returns False when the next turn would not fit in the context."""
        turn, gen, traj = ep.pending_turn, ep.pending_generation, ep.traj
        history = traj.messages[:-1]  # the conversation as the model saw it before this turn
        bridge = self.tito.bridge(history, gen, [message], turn_index=len(traj.turns) - 1)
        turn.bridge_ids = bridge.ids
        turn.observation = message["content"]
        if bridge.drift is not None:
            traj.drift_events.append(bridge.drift.to_dict())
        traj.messages.append(message)
        ep.ids = ep.ids + bridge.ids
        # the prefix property, in token space: the next prompt extends the sequence the trainer will see
        if ep.ids != traj.token_ids():
            raise AssertionError("TITO bookkeeping: the next prompt is not the trajectory's token sequence")
        if not self._fits(ep):
            return False
        ready.append(ep)
        return True

    @staticmethod
    def _record_checks(traj: Trajectory, info: dict) -> None:
        traj.checks = {k: info[k] for k in ("checks", "passed", "total", "resolved") if k in info}


# ------------------------------------------------------------------------------------------------ metrics
def rollout_metrics(trajectories: list[Trajectory], tokenizer, chat_template: str | None = None) -> dict:
    """Per-batch numbers: reward, turns, tokens, and token drift in the loss region.

    ``tito_drift_tokens`` is the loss-region drift of the TITO sequences (must be 0);
    ``retokenize_drift_tokens`` is what a decode-and-re-tokenize pipeline would have had on the same rollouts,
    and ``retokenize_drift_turns`` how many assistant turns it would have gotten wrong.
    """
    n = max(1, len(trajectories))
    ok = [t for t in trajectories if t.termination != "error"]
    tito = sum(loss_region_drift(t) for t in ok)
    baseline = baseline_turns = loss_tokens = turns = 0
    for t in ok:
        d, total = retokenize_drift(t, tokenizer, chat_template)
        baseline += d
        loss_tokens += total
        turns += t.num_turns
        baseline_turns += _turns_with_retokenize_drift(t, tokenizer, chat_template)
    terminations = collections.Counter(t.termination for t in trajectories)
    return {
        "episodes": len(trajectories),
        "reward_mean": sum(t.reward for t in trajectories) / n,
        "resolved_rate": sum(bool(t.checks.get("resolved")) for t in trajectories) / n,
        "turns_mean": sum(t.num_turns for t in trajectories) / n,
        "tokens_total": sum(len(t.token_ids()) for t in ok),
        "loss_tokens": loss_tokens,
        "tito_drift_tokens": tito,
        "retokenize_drift_tokens": baseline,
        "retokenize_drift_turns": baseline_turns,
        "assistant_turns": turns,
        "drift_events": sum(len(t.drift_events) for t in trajectories),
        "terminations": dict(terminations),
    }


def _turns_with_retokenize_drift(traj: Trajectory, tokenizer, chat_template) -> int:
    return sum(1 for d in retokenize_drift_per_turn(traj, tokenizer, chat_template) if d > 0)


def _sampling_index(ep: _Episode, slot: dict[int, int]) -> int:
    index = ep.spec.sampling_index
    return slot[id(ep)] if index is None else index


def _routing_start(ep: _Episode) -> int:
    """The first position of ``ep.ids`` whose routing no earlier turn recorded (R3, ``Trajectory``)."""
    turns = ep.traj.turns
    covered = turns[-1].prompt_len + len(turns[-1].sampled_ids) - 1 if turns else 0
    return min(covered, len(ep.ids) - 1)

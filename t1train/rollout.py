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
   (its turn or time limit), at ``max_turns``, or before the context would overflow (``max_context_tokens``,
   under ``context_policy: end``). On the last two the loop submits on the agent's behalf when ``submit_on_limit``
   is set, so the verifier's partial credit is still collected.

Long episodes: segments
-----------------------
An episode longer than the context goes on under ``context_policy`` (``docs/training.md``, "Long episodes"):

* ``drop_observations``: when the next turn would not fit, a new **segment** starts. Its prompt is the protocol's
  first messages (system + instruction, with a note that earlier turns were removed) plus the last
  ``keep_last_turns`` turns (assistant message and the message that followed), rendered with the chat template
  into fresh prompt ids. Those ids are the segment's prompt (loss mask 0) and the engine continues from exactly
  them; nothing that is trained on is ever re-tokenized.
* ``summary``: the loop keeps room for one more exchange; when a normal turn would eat into it, the message after
  the turn also asks for a summary (``summary_prompt``; if the observation itself no longer fits, it is replaced by
  a placeholder there, and shown in full in the next segment). The policy's answer is a sampled turn like any
  other (trained on; action ``{"kind": "none", "summary": true}``, the env is not stepped), and the next segment
  starts from system + instruction + that summary + the last ``keep_last_turns`` turns.

If even the fresh segment would not fit, or ``max_segments`` is reached, the episode ends as under ``end``
(``context_limit``). The engine only ever gets the current segment's ids; the loop keeps the last
``keep_last_turns`` turns' messages and the current segment's, so its memory does not grow with turns played
beyond the trajectory's own token record (and ``Trajectory.messages``, the conversation as text).

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
    CONTEXT_POLICIES,
    DEFAULT_SUMMARY_PROMPT,
    OMITTED_OBSERVATION,
    PROTOCOLS,
    SUBMIT,
    TEXT_SYSTEM_PROMPT,
    TRUNCATED_TURNS,
    Protocol,
    format_observation,  # noqa: F401 - re-exported for callers of t1train.rollout.format_observation
)
from t1env.sandbox.local_zygote import ZygotePool, shared_max_idle
from t1train.engines.base import FINISH_ABORT, FINISH_LENGTH, Engine, Generation, SamplingParams, episode_seed
from t1train.tito import Tito, loss_region_drift, retokenize_drift_per_turn
from t1train.trajectory import Segment, SegmentView, Trajectory, Turn

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
    context_policy: str = "end"
    """When the next turn would not fit ``max_context_tokens``: ``end`` the episode (submit for the agent),
    ``drop_observations`` (a new segment with the instruction and the last ``keep_last_turns`` turns) or
    ``summary`` (the policy summarizes, a new segment starts from the summary and the last turns). See the module
    docstring and ``docs/training.md``."""
    keep_last_turns: int = 4
    """Turns (assistant message + the message after it) a new segment keeps verbatim; fewer if they do not fit."""
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    """The request for a summary (``context_policy: summary``), sent after the turn that filled the context."""
    max_segments: int = 64
    """Most segments per episode; past it the episode ends at the context limit as under ``end``."""
    agent: str = "loop"
    """Who plays the episodes: ``loop`` (this agent loop) or ``harness`` (your own agent program through an
    OpenAI-compatible endpoint that records the sampled tokens: ``t1train/harness.py``, docs/training.md)."""
    harness: str | None = None
    """With ``agent: harness``: a shell command, or ``package.module:Class``."""
    harness_timeout_s: float = 900.0
    """With ``agent: harness``: seconds a harness command may run per episode before it is killed (still scored)."""

    def __post_init__(self):
        if self.concurrency < 1 or self.max_turns < 1:
            raise ValueError("concurrency and max_turns must be >= 1")
        if self.context_policy not in CONTEXT_POLICIES:
            raise ValueError(
                f"context_policy must be one of {', '.join(CONTEXT_POLICIES)}, got {self.context_policy!r}"
            )
        if self.agent not in ("loop", "harness"):
            raise ValueError(f"agent must be 'loop' or 'harness', got {self.agent!r}")
        if self.agent == "harness" and not (self.harness or "").strip():
            raise ValueError("agent: harness needs harness: a command or a package.module:Class (docs/training.md)")
        if self.keep_last_turns < 0 or self.max_segments < 1:
            raise ValueError(
                f"keep_last_turns must be >= 0 and max_segments >= 1, got {self.keep_last_turns} and {self.max_segments}"
            )
        if self.context_policy == "summary" and not self.summary_prompt.strip():
            raise ValueError("summary_prompt is empty: context_policy 'summary' needs a request for the summary")
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
            context_policy=self.context_policy,
            keep_last_turns=self.keep_last_turns,
            max_segments=self.max_segments,
            summary_prompt=self.summary_prompt,
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
    prestarted spare sandbox would never be used. The local envs it makes share one verifier zygote pool (pytest
    imported once for all of them, not once per episode), which :meth:`RolloutRunner.run` ends when it returns.
    ``executor`` (``t1env.executor.make_executor``): a Ray executor makes each env on a Ray worker instead (same
    arguments, same API).
    """
    import gymnasium as gym

    import t1env  # noqa: F401  (registers T1Terminal-v0)

    kwargs.setdefault("prestart", False)
    if executor is not None and executor.name != "inprocess":
        return lambda task: executor.make_env(task=task, backend=backend, task_dirs=task_dirs, **kwargs)

    if backend == "local":
        kwargs.setdefault("zygote_pool", ZygotePool(max_idle=shared_max_idle()))

    def make_env(task: str):
        return gym.make("T1Terminal-v0", task=task, backend=backend, task_dirs=task_dirs, **kwargs)

    return make_env


def _shared_zygotes(env):
    """The verifier zygote pool ``env`` shares with other envs (``TerminalEnv(zygote_pool=...)``), else None."""
    return getattr(getattr(env, "unwrapped", env), "shared_zygote_pool", None)


# ------------------------------------------------------------------------------------------------ episode state
@dataclass
class _Episode:
    spec: EpisodeSpec
    t_start: float = 0.0
    env: Any = None
    traj: Trajectory | None = None
    ids: list[int] = field(default_factory=list)
    """The current segment's ids: the next prompt the engine continues from."""
    first_messages: list[dict] = field(default_factory=list)
    """System + instruction: every segment starts from them."""
    context: list[dict] = field(default_factory=list)
    """The current segment's conversation as the model saw it (renders the TITO bridges)."""
    recent: collections.deque = field(default_factory=collections.deque)
    """The last ``keep_last_turns`` turns as ``(assistant message, message after it)``: a new segment's tail."""
    summarizing: bool = False
    """The next generation is the summary turn (``context_policy: summary``)."""
    summary_reserve: int | None = None
    """Tokens the summary exchange needs: the request's bridge + ``max_new_tokens`` (measured once)."""
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
        ep.first_messages = messages
        ep.context = list(messages)
        ep.recent = collections.deque(maxlen=self.config.keep_last_turns)
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
        self,
        episodes: list[EpisodeSpec],
        on_episode: Callable[[int, Trajectory], None] | None = None,
        more: Callable[[], list[EpisodeSpec]] | None = None,
    ) -> list[Trajectory]:
        """Run all episodes; return their trajectories in the order given.

        ``more()`` (the asynchronous trainer's producer, ``t1train/async_rl.py``) is asked for further episodes
        whenever fewer than ``concurrency`` are in flight and none wait to start; it answers a list (empty: none
        now). Its episodes are numbered after ``episodes``, and the run ends once nothing is in flight and
        ``more()`` has none.

        ``on_episode(index, trajectory)`` is called (in the caller's thread) as soon as each episode has finished,
        before its sandbox is closed: write it to disk there, and a run that dies later keeps it. However the run
        ends (an engine error, an exception from ``on_episode``, Ctrl-C), every env it made is closed before
        ``run`` returns or raises.
        """
        cfg = self.config
        queue = collections.deque(enumerate(episodes))
        total = len(episodes)
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
            while True:
                if more is not None and not queue and active < cfg.concurrency:
                    for spec in more():
                        queue.append((total, spec))
                        total += 1
                if not (queue or futures or ready):
                    break
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
            # the verifier zygote pools its envs shared (make_env_factory's), once those envs are closed
            shared = {id(p): p for ep in started if (p := _shared_zygotes(ep.env)) is not None}
            for zygotes in shared.values():
                zygotes.close()
        return [results[i] for i in range(total)]

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
        turn = Turn.sampled(len(ep.ids), gen)
        traj.turns.append(turn)
        ep.ids = ep.ids + turn.sampled_ids
        text = self.tito.assistant_text(gen)
        message = {"role": "assistant", "content": text}
        traj.messages.append(message)
        ep.context.append(message)
        if gen.finish_reason == FINISH_ABORT:
            traj.termination = "aborted"
            return True
        if ep.summarizing:  # the summary turn: trained on, never stepped; the next segment starts from it
            ep.summarizing = False
            turn.action = {"kind": "none", "summary": True}
            ep.pending_turn, ep.pending_generation = turn, gen
            if self._at_limit(ep):
                return self._end_early(ep, "max_turns", futures, pool)
            if not self._new_segment(ep, "summary", ready, summary=text):
                return self._end_early(ep, "context_limit", futures, pool)
            return False

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

    def _reserve(self, ep: _Episode) -> int:
        """Room kept free beyond the next turn: the summary exchange under ``context_policy: summary``."""
        if self.config.context_policy != "summary":
            return 0
        if ep.summary_reserve is None:  # the request's bridge after a placeholder observation, measured once
            probe = [{"role": "system", "content": "x"}, {"role": "user", "content": "x"}]
            gen = Generation([], [], "stop")
            ids = self.tito.bridge(probe, gen, self._summary_request(OMITTED_OBSERVATION), turn_index=-1).ids
            ep.summary_reserve = len(ids) + 1 + (self.sampling.max_new_tokens or 0)  # +1: a stop token not dropped
        return ep.summary_reserve

    def _summary_request(self, observation: str) -> list[dict]:
        """The message(s) after the turn that filled the context (:meth:`Protocol.summary_request`)."""
        return self.protocol.summary_request(observation)

    def _end_early(self, ep: _Episode, reason: str, futures, pool) -> bool:
        """End at a loop limit; submit for the agent if configured. Returns True when nothing is left to wait for."""
        ep.traj.termination = reason
        if self.config.submit_on_limit:
            ep.submitted_for_agent = True
            futures[pool.submit(self._step, ep, {"submit": True})] = ("step", ep)
            return False
        return True

    def _continue(self, ep: _Episode, message: dict, ready: list) -> bool:
        """Append the observation message via the TITO bridge and queue the episode for generation; when the next
        turn would not fit, apply ``context_policy``. Returns False when the episode must end at the context
        limit."""
        turn, gen, traj = ep.pending_turn, ep.pending_generation, ep.traj
        policy = self.config.context_policy
        history = ep.context[:-1]  # the segment's conversation as the model saw it before this turn
        turn_index = len(traj.turns) - 1
        turn.observation = message["content"]
        ep.recent.append((ep.context[-1], message))
        bridge = self.tito.bridge(history, gen, [message], turn_index=turn_index)
        fits = self.protocol.fits(len(ep.ids) + len(bridge.ids) + self._reserve(ep))
        if fits or policy == "end" or len(traj.segments) >= self.config.max_segments:
            self._extend(ep, bridge, [message])
            if not (fits or self._fits(ep)):  # at max_segments the summary's reserve is not kept
                return False
            ready.append(ep)
            return True
        if policy == "drop_observations":
            traj.messages.append(message)  # the segment ends at this turn: its bridge was never sampled from
            return self._new_segment(ep, "drop_observations", ready)
        # summary: ask in this segment; the observation goes in only if the summary still fits after it
        request = self._summary_request(message["content"])
        bridge = self.tito.bridge(history, gen, request, turn_index=turn_index)
        if not self.protocol.fits(len(ep.ids) + len(bridge.ids)):
            request = self._summary_request(OMITTED_OBSERVATION)
            bridge = self.tito.bridge(history, gen, request, turn_index=turn_index)
            if not self.protocol.fits(len(ep.ids) + len(bridge.ids)):
                traj.messages.append(message)
                return self._new_segment(ep, "drop_observations", ready)  # no room to ask: drop instead
        self._extend(ep, bridge, request)
        ep.summarizing = True
        ready.append(ep)
        return True

    def _extend(self, ep: _Episode, bridge, messages: list[dict]) -> None:
        """Append ``messages`` to the segment through ``bridge`` (the pending turn's bridge ids)."""
        traj = ep.traj
        ep.pending_turn.bridge_ids = bridge.ids
        if bridge.drift is not None:
            traj.drift_events.append(bridge.drift.to_dict())
        traj.messages.extend(messages)
        ep.context.extend(messages)
        ep.ids = ep.ids + bridge.ids
        # the prefix property, in token space: the next prompt extends the sequence the trainer will see
        if ep.ids != _current_segment(traj).token_ids():
            raise AssertionError("TITO bookkeeping: the next prompt is not the segment's token sequence")

    def _new_segment(self, ep: _Episode, reason: str, ready: list, summary: str | None = None) -> bool:
        """Start a segment from the first messages (+ the summary) and as many of the last turns as fit; queue the
        episode. Returns False when not even the first messages fit, or at ``max_segments``."""
        traj = ep.traj
        if len(traj.segments) >= self.config.max_segments:
            return False
        recent = list(ep.recent)
        for keep in range(len(recent), -1, -1):
            context = self.protocol.segment_messages(
                ep.first_messages, recent[len(recent) - keep :], len(traj.turns), summary
            )
            ids = self.tito.prompt_ids(context)
            if self.protocol.fits(len(ids) + self._reserve(ep)):
                break
        else:
            return False
        traj.segments.append(Segment(list(ids), len(traj.turns), reason))
        ep.context, ep.ids = context, ids
        ready.append(ep)
        return True

    @staticmethod
    def _record_checks(traj: Trajectory, info: dict) -> None:
        traj.checks = {k: info[k] for k in ("checks", "passed", "total", "resolved") if k in info}


# ------------------------------------------------------------------------------------------------ metrics
def rollout_metrics(trajectories: list[Trajectory], tokenizer, chat_template: str | None = None) -> dict:
    """Per-batch numbers: reward, turns, tokens, and token drift in the loss region.

    ``tito_drift_tokens`` is the loss-region drift of the TITO sequences, every segment (must be 0);
    ``retokenize_drift_tokens`` is what a decode-and-re-tokenize pipeline would have had on the same rollouts,
    and ``retokenize_drift_turns`` how many assistant turns it would have gotten wrong (on the first segment of an
    episode of several, see ``t1train.tito.retokenize_drift_per_turn``). ``segments_mean``: segments per episode.
    """
    n = max(1, len(trajectories))
    ok = [t for t in trajectories if t.termination != "error"]
    tito = sum(loss_region_drift(t) for t in ok)  # summed over each episode's segments
    baseline = baseline_turns = loss_tokens = turns = 0
    for t in ok:
        per_turn = retokenize_drift_per_turn(t, tokenizer, chat_template)
        baseline += sum(per_turn)
        baseline_turns += sum(1 for d in per_turn if d > 0)
        loss_tokens += sum(len(turn.sampled_ids) for turn in t.turns)
        turns += t.num_turns
    terminations = collections.Counter(t.termination for t in trajectories)
    return {
        "episodes": len(trajectories),
        "reward_mean": sum(t.reward for t in trajectories) / n,
        "resolved_rate": sum(bool(t.checks.get("resolved")) for t in trajectories) / n,
        "turns_mean": sum(t.num_turns for t in trajectories) / n,
        "tokens_total": sum(len(v.token_ids()) for t in ok for v in t.segment_views()),
        "segments_mean": sum(t.num_segments for t in trajectories) / n,
        "loss_tokens": loss_tokens,
        "tito_drift_tokens": tito,
        "retokenize_drift_tokens": baseline,
        "retokenize_drift_turns": baseline_turns,
        "assistant_turns": turns,
        "drift_events": sum(len(t.drift_events) for t in trajectories),
        "terminations": dict(terminations),
    }


def _sampling_index(ep: _Episode, slot: dict[int, int]) -> int:
    index = ep.spec.sampling_index
    return slot[id(ep)] if index is None else index


def _current_segment(traj: Trajectory) -> SegmentView:
    """The last segment's view (what the engine continues from), without slicing the earlier ones."""
    seg = traj.segments[-1]
    return SegmentView(len(traj.segments) - 1, seg.prompt_ids, traj.turns[seg.first_turn :], seg.reason, seg.first_turn)


def _routing_start(ep: _Episode) -> int:
    """The first position of ``ep.ids`` whose routing no earlier turn of its segment recorded (R3,
    ``Trajectory``): positions are the segment's own."""
    turns = _current_segment(ep.traj).turns
    covered = turns[-1].prompt_len + len(turns[-1].sampled_ids) - 1 if turns else 0
    return min(covered, len(ep.ids) - 1)

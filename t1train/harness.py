"""Train an agent harness of your own: run it on t1 episodes through the recording endpoint, get TITO trajectories.

Story of one episode
--------------------
1. The runner makes the env (``make_env(task)``), resets it, and gives the episode a session on the runner's
   :class:`~t1train.serve.PolicyServer` (one per runner, on 127.0.0.1, an ephemeral port) with a shell attached:
   ``POST {T1_SHELL_URL}/exec {"command": ...}`` steps the env with the command and answers ``{"output",
   "exit_code", "timed_out", "done"}``; ``POST {T1_SHELL_URL}/submit`` ends the episode and answers the reward.
2. The harness runs: a shell ``command`` (a subprocess, given the environment variables below), or a
   ``package.module:Class`` loaded in this process (``Class().run(context)`` with a :class:`HarnessContext`). It
   talks to the model only through the OpenAI-compatible ``base_url`` it is given: every request lands in its
   session, which records the exact ids (``t1train/serve.py``).
3. When the harness returns (or after ``timeout_s``), the runner submits for it if it did not, and the env's
   verifier scores the sandbox: the reward is the env's (passing checks by default).
4. The session becomes one :class:`~t1train.trajectory.Trajectory`: its turns are the harness's requests, with
   the loss mask on sampled ids only; a request that did not extend the previous one began a new segment
   (``reason="non_prefix"``). The episode's reward sits on the last turn and on the trajectory.

The harness's environment (subprocess mode)
-------------------------------------------
``T1_BASE_URL`` and ``OPENAI_BASE_URL``: the session's base URL (``http://127.0.0.1:PORT/t1/s/SESSION/v1``; an
OpenAI client that reads ``OPENAI_BASE_URL`` needs no change at all); ``OPENAI_API_KEY``: a placeholder (the
endpoint checks none); ``T1_SESSION``: the session id (for harnesses that send the ``X-T1-Session`` header
instead); ``T1_INSTRUCTION``: the task instruction; ``T1_SHELL_URL``: the exec/submit API above; ``T1_MODEL``: the
model name to send. Its stdout and stderr tails are kept in ``Trajectory.metadata``.

Sampling is the runner's, whatever the harness asks: temperature, top-p and top-k are pinned to the trainer's
(it must score the distribution that was sampled), ``max_tokens`` is capped at its ``max_new_tokens``, and each
turn's seed comes from the episode's stream (:func:`~t1train.engines.base.episode_seed`), as in the rollout.

Terminations: ``submit`` (the harness submitted), ``env_truncated`` (the env's own turn or time limit),
``harness_ended`` (the harness returned without submitting: the runner submitted), ``harness_timeout`` (killed
after ``timeout_s``; the runner submitted), ``error`` (the harness exited non-zero or raised; the sandbox is still
scored, ``Trajectory.error`` holds the tail of its stderr).

Example:
    >>> HarnessConfig("python3 examples/harness/json_agent.py").kind
    'command'
    >>> HarnessConfig("t1train.harness:NoOpHarness").kind
    'class'
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import tempfile
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable

from t1train.engines.base import Engine, SamplingParams, episode_seed
from t1train.rollout import EpisodeSpec, RolloutConfig
from t1train.serve import APIError, PolicyServer
from t1train.trajectory import Trajectory

_CLASS_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_TAIL = 4000  # characters of a harness's stdout/stderr kept in the trajectory's metadata


@dataclass
class HarnessConfig:
    """Which harness to run on each episode (``rollout.agent: harness``, ``rollout.harness: ...``)."""

    harness: str
    """A shell command (run with ``bash -c`` in a subprocess, see the module docstring), or
    ``package.module:Class`` (no spaces or slashes) loaded in this process."""
    timeout_s: float = 900.0
    """Seconds a subprocess harness may run per episode before it is killed (the episode is still scored)."""
    model_name: str = "t1-policy"
    """The model id ``/v1/models`` lists and ``T1_MODEL`` names."""

    def __post_init__(self):
        if not isinstance(self.harness, str) or not self.harness.strip():
            raise ValueError(
                "rollout.harness is empty: give a command (e.g. 'python examples/harness/json_agent.py') "
                "or a package.module:Class"
            )
        if not self.timeout_s > 0:
            raise ValueError(f"rollout.harness_timeout_s must be > 0, got {self.timeout_s}")
        if self.kind == "class":
            load_harness_class(self.harness)  # a typo fails now, not at the first episode

    @property
    def kind(self) -> str:
        """``"class"`` for ``package.module:Class``, else ``"command"``."""
        return "class" if _CLASS_REF.match(self.harness.strip()) else "command"


def load_harness_class(ref: str) -> type:
    """The class named by ``package.module:Class``; a bad reference is a ``ValueError`` that says what to fix."""
    module_name, _, class_name = ref.strip().partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(
            f"rollout.harness: cannot import {module_name!r} ({err}); the module must be importable from the "
            "trainer's Python (installed, or on PYTHONPATH), or give a shell command instead"
        ) from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type) or not callable(getattr(cls, "run", None)):
        raise ValueError(f"rollout.harness: {module_name} has no class {class_name!r} with a run(context) method")
    return cls


@dataclass
class HarnessContext:
    """What an in-process harness gets: ``Class().run(context)``."""

    base_url: str
    """The session's OpenAI-compatible base URL."""
    session: str
    instruction: str
    shell_url: str
    """The exec/submit HTTP API of the episode (the same one a subprocess harness gets)."""
    model: str
    exec: Callable[..., dict]
    """``exec(command, timeout=None) -> {"output", "exit_code", "timed_out", "done"}``: run a command in the
    episode's sandbox."""
    submit: Callable[[], dict]
    """``submit() -> {"reward", "passed", "total", "resolved", "done"}``: end the episode and score it."""
    task: str = ""
    """The episode's task id (for the harness's own logs)."""
    seed: int | None = None
    """The episode's reset seed."""


class NoOpHarness:
    """A harness that does nothing (the no-op baseline, and the docstring's example)."""

    def run(self, context: HarnessContext) -> None:
        return None


# ------------------------------------------------------------------------------------------------ the episode shell
class EpisodeShell:
    """One episode's env behind the exec/submit API; thread-safe, and done once the env says so."""

    def __init__(self, env):
        self.env = env
        self.done = False
        self.reward = 0.0
        self.info: dict = {}
        self.termination = ""
        self.commands = 0
        self._lock = threading.Lock()

    def exec(self, command: str, timeout: float | None = None) -> dict:
        with self._lock:
            if self.done:
                raise APIError(409, "the episode has ended (submitted or truncated): no more commands", code="done")
            action = command if timeout is None else {"command": command, "timeout": timeout}
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.commands += 1
            self._account(reward, terminated, truncated, info, "env_truncated")
            return {
                "output": obs,
                "exit_code": info.get("exit_code"),
                "timed_out": bool(info.get("timed_out", False)),
                "done": self.done,
            }

    def submit(self, termination: str = "submit") -> dict:
        with self._lock:
            if not self.done:
                _, reward, terminated, truncated, info = self.env.step({"submit": True})
                self._account(reward, True, truncated, info, termination)
            return {
                "reward": self.reward,
                "passed": self.info.get("passed"),
                "total": self.info.get("total"),
                "resolved": self.info.get("resolved"),
                "done": True,
            }

    def _account(self, reward, terminated, truncated, info, termination) -> None:
        self.reward += float(reward)
        if terminated or truncated:
            self.done = True
            self.termination = termination if terminated else "env_truncated"
            self.info = {k: info[k] for k in ("checks", "passed", "total", "resolved") if k in info}


# ------------------------------------------------------------------------------------------------ the runner
@dataclass
class _Run:
    index: int
    spec: EpisodeSpec
    session: str
    env: Any = None
    shell: EpisodeShell | None = None
    instruction: str = ""
    task_id: str = ""
    error: str | None = None
    metadata: dict = field(default_factory=dict)


class HarnessRunner:
    """Runs episodes with an external harness; same interface as :class:`t1train.rollout.RolloutRunner`.

    Args:
        engine: the policy engine.
        tokenizer: the model's tokenizer (the endpoint renders prompts with its chat template).
        make_env: ``make_env(task) -> env`` (:func:`t1train.rollout.make_env_factory`).
        sampling: the trainer's sampling (pinned for every request; see the module docstring).
        config: ``concurrency``, ``max_turns`` (requests per session), ``max_context_tokens``, ``chat_template``
            and ``return_routed_experts`` are read from it.
        harness: the harness (a :class:`HarnessConfig`, or its ``harness`` string); default: ``config.harness``
            and ``config.harness_timeout_s`` (``rollout.agent: harness`` in a run's YAML).
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer,
        make_env: Callable[[str], Any],
        sampling: SamplingParams,
        config: RolloutConfig | None = None,
        harness: HarnessConfig | str | None = None,
    ):
        self.engine = engine
        self.tokenizer = tokenizer
        self.make_env = make_env
        self.sampling = sampling
        self.config = config or RolloutConfig()
        if harness is None:
            harness = getattr(self.config, "harness", None)
            if not harness:
                raise ValueError("rollout.agent: harness needs rollout.harness: a command or a package.module:Class")
            harness = HarnessConfig(harness, getattr(self.config, "harness_timeout_s", HarnessConfig.timeout_s))
        self.harness = harness if isinstance(harness, HarnessConfig) else HarnessConfig(harness)
        self._sampling_index: dict[str, int] = {}
        self.server: PolicyServer | None = None

    def _seed_for(self, session: str, turn: int) -> int | None:
        if self.sampling.seed is None or session not in self._sampling_index:
            return None
        return episode_seed(self.sampling.seed, self._sampling_index[session], turn)

    def run(
        self, episodes: list[EpisodeSpec], on_episode: Callable[[int, Trajectory], None] | None = None
    ) -> list[Trajectory]:
        """Run all episodes (``config.concurrency`` at a time); return their trajectories in the order given.
        ``on_episode(index, trajectory)`` is called in the caller's thread as each one finishes."""
        cfg = self.config
        self.server = PolicyServer(
            self.engine,
            self.tokenizer,
            model_name=self.harness.model_name,
            sampling=self.sampling,
            pin_sampling=True,
            seed_for=self._seed_for,
            chat_template=cfg.chat_template,
            max_context_tokens=cfg.max_context_tokens,
            max_turns=cfg.max_turns,
            return_routed_experts=cfg.return_routed_experts,
        )
        self.server.start()
        results: dict[int, Trajectory] = {}
        pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="t1-harness")
        try:
            futures = {}
            for i, spec in enumerate(episodes):
                run = _Run(i, spec, f"ep{i}-{uuid.uuid4().hex[:8]}")
                self._sampling_index[run.session] = i if spec.sampling_index is None else spec.sampling_index
                futures[pool.submit(self._episode, run)] = i
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                if on_episode is not None:
                    on_episode(i, results[i])
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self.server.stop()
        return [results[i] for i in range(len(episodes))]

    # ---------------------------------------------------------------- one episode (a worker thread)
    def _episode(self, run: _Run) -> Trajectory:
        t0 = time.monotonic()
        server = self.server
        try:
            run.env = self.make_env(run.spec.task)
            obs, info = run.env.reset(seed=run.spec.seed)
            run.instruction, run.task_id = obs, info.get("task_id", run.spec.task)
            run.shell = EpisodeShell(run.env)
            server.attach_shell(run.session, run.shell)
            termination = self._run_harness(run)
            if not run.shell.done:
                run.shell.submit(termination or "harness_ended")
            traj = self._trajectory(run)
        except Exception as err:  # noqa: BLE001 - the episode fails; the others go on
            traj = self._trajectory(run) if run.session in server.sessions else None
            if traj is None:
                traj = Trajectory(task_id=run.task_id or run.spec.task, seed=run.spec.seed, prompt_ids=[])
            traj.termination = "error"
            traj.error = "".join(traceback.format_exception_only(type(err), err)).strip()
        finally:
            server.drop(run.session)
            if run.env is not None:
                try:
                    run.env.close()
                except Exception:  # noqa: BLE001 - a failing close must not end the run
                    pass
        traj.metadata["elapsed_s"] = round(time.monotonic() - t0, 3)
        return traj

    def _run_harness(self, run: _Run) -> str | None:
        """Run the harness to its end; return a termination that overrides the shell's (timeout, error)."""
        server, session = self.server, run.session
        base_url = server.session_url(session)
        shell_url = f"{server.url}/t1/sessions/{session}"
        if self.harness.kind == "class":
            context = HarnessContext(
                base_url,
                session,
                run.instruction,
                shell_url,
                self.harness.model_name,
                run.shell.exec,
                run.shell.submit,
                run.task_id,
                run.spec.seed,
            )
            try:
                load_harness_class(self.harness.harness)().run(context)
            except Exception as err:  # noqa: BLE001 - recorded; the sandbox is still scored
                run.error = "".join(traceback.format_exception(type(err), err)).strip()[-_TAIL:]
                return "error"
            return None
        env = {
            **os.environ,
            "T1_BASE_URL": base_url,
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "t1",
            "T1_SESSION": session,
            "T1_INSTRUCTION": run.instruction,
            "T1_SHELL_URL": shell_url,
            "T1_MODEL": self.harness.model_name,
        }
        for name in ("NO_PROXY", "no_proxy"):  # the endpoint is on loopback: never through a proxy
            env[name] = ",".join(filter(None, ["127.0.0.1,localhost", os.environ.get(name)]))
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                ["bash", "-c", self.harness.harness],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: a timeout kills the harness and its children
            )
            termination = None
            try:
                code = proc.wait(timeout=self.harness.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                code = proc.wait()
                termination = "harness_timeout"
            stdout, stderr = _tail(out), _tail(err)
        run.metadata.update(harness_exit_code=code, harness_stdout=stdout, harness_stderr=stderr)
        if termination is None and code != 0:
            run.error = f"the harness exited with code {code}: {stderr[-1000:]}"
            return "error"
        return termination

    def _trajectory(self, run: _Run) -> Trajectory:
        server, shell = self.server, run.shell
        if run.session in server.sessions:
            traj = server.trajectory(run.session, run.task_id or run.spec.task, run.spec.seed)
        else:  # the harness made no request
            traj = Trajectory(task_id=run.task_id or run.spec.task, seed=run.spec.seed, prompt_ids=[])
        traj.metadata.update(run.metadata, harness=self.harness.harness, commands=shell.commands if shell else 0)
        if shell is not None:
            traj.reward = shell.reward
            traj.checks = dict(shell.info)
            traj.termination = shell.termination
            if traj.turns:
                traj.turns[-1].reward = shell.reward
        if run.error is not None:
            traj.termination, traj.error = "error", run.error
        return traj


def _tail(f) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - _TAIL))
    return f.read().decode(errors="replace")

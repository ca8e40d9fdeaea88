"""The evaluation harness: run an agent over a task set, K attempts each, N at a time, into a job folder.

A **trial** is one episode of one task (attempt ``a`` plays ``reset(seed=a)``) in a fresh
:class:`~t1env.env.TerminalEnv`; a **job** is every trial of a task set. :func:`run_job` runs the trials that have
no ``result.json`` yet in the job folder (so a job that was stopped or crashed resumes where it was), writes each
trial's files as it finishes, and rewrites the job's ``result.json`` (see :mod:`t1env.eval.results`) after each.

Stopping: setting ``stop`` (``t1env eval`` sets it on Ctrl-C or SIGTERM) lets each running trial end at its next
turn boundary — its sandbox is closed and it writes nothing, so ``--resume`` reruns it — and starts no new trial.
A trial that was running when ``stop`` was set is never recorded, however it ended (Ctrl-C in a terminal signals
the sandbox's shell and verifier too).
A command already running in a sandbox is waited for, up to its timeout.

Example:
    >>> import tempfile
    >>> cfg = EvalConfig(tasks=["hello-file"], agent="oracle", attempts=1)
    >>> m = run_job(cfg, tempfile.mkdtemp())
    >>> m["resolved_rate"], m["n_trials"]
    (1.0, 1)
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from t1env.env import SetupError
from t1env.eval.agents import EvalOptions, check_agent_spec, make_agent
from t1env.eval.recording import TrialRecorder
from t1env.eval.results import finished_trials, job_metrics, read_json, trial_name, write_atomic, write_json
from t1env.executor import InProcessExecutor, make_executor
from t1env.options import EnvOptions
from t1env.registry import get_task
from t1env.sandbox import SandboxError
from t1env.task import Task

CONFIG_VERSION = 1


@dataclass
class EvalConfig:
    """One job: what to run. Saved as the job's ``config.json``; ``--resume`` reads it back."""

    tasks: list[str]
    "task references: ids, package paths or family instances (NAME@SEED)"
    agent: str = "oracle"
    "oracle | noop | openai | hf | module:Class"
    attempts: int = 1
    "trials per task (attempt a plays seed a)"
    concurrency: int = 1
    "trials run at the same time"
    backend: str = "local"
    "sandbox backend: local (bubblewrap) or docker"
    reward_mode: str = "count"
    "reward reported per trial: count | fraction | binary"
    max_turns: int | None = None
    "actions per trial (default: each task's limits.max_turns)"
    task_dirs: list[str] = field(default_factory=list)
    "extra folders to find task ids in"
    options: EvalOptions = field(default_factory=EvalOptions)
    "model agent options"
    ray: str | None = None
    "Ray cluster address: sandboxes run on Ray workers (t1env.executor; 'auto': the local `ray start` cluster)"

    def __post_init__(self):
        if isinstance(self.options, dict):
            self.options = EvalOptions(**self.options)
        if not self.tasks:
            raise ValueError("no tasks to evaluate: give task ids, --split, --family NAME --seeds A:B or --tasks-dir")
        for name in ("attempts", "concurrency"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"--{name} must be an integer >= 1, got {v!r}")
        try:
            self.env_options()
        except ValidationError as e:  # one line, naming the flag: --max-turns must be an integer >= 1 ..., got 0
            err = e.errors()[0]
            msg = err["msg"].removeprefix("Value error, ")
            field = str(err["loc"][0]) if err["loc"] else msg.split(" ", 1)[0]
            flag = "--" + field.replace("_", "-")
            raise ValueError(msg.replace(field, flag, 1) if msg.startswith(field) else f"{flag}: {msg}") from None

    def env_options(self) -> EnvOptions:
        """The trials' env options (t1env.options): what every trial's ``gym.make`` gets besides its task."""
        return EnvOptions(
            backend=self.backend,
            reward_mode=self.reward_mode,
            max_turns=self.max_turns,
            task_dirs=self.task_dirs or None,
            prestart=False,
        )

    def to_json(self) -> dict:
        return {"version": CONFIG_VERSION, **asdict(self)}

    @classmethod
    def load(cls, job_dir: Path) -> EvalConfig:
        path = Path(job_dir) / "config.json"
        if not path.is_file():
            raise ValueError(f"--resume {job_dir}: no config.json there (is it a `t1env eval` job folder?)")
        data = read_json(path)
        data.pop("version", None)
        try:
            return cls(**data)
        except TypeError as e:
            raise ValueError(f"{path}: {e}") from None


@dataclass
class Trial:
    task: Task
    attempt: int

    @property
    def name(self) -> str:
        return trial_name(self.task.id, self.attempt)


class TrialInterrupted(Exception):
    """The job was asked to stop while this trial ran; it leaves no files."""


def _now() -> str:
    return datetime.now(UTC).isoformat()


def run_trial(
    trial: Trial, config: EvalConfig, job_dir: Path, stop: threading.Event | None = None, executor=None
) -> dict:
    """Play one trial and write its folder; returns its ``result.json`` body. Raises :class:`TrialInterrupted`."""
    executor = executor or InProcessExecutor()

    task, stop = trial.task, stop or threading.Event()
    rec = TrialRecorder(agent_name=config.agent, model_name=config.options.model, session_id=trial.name)
    result: dict = {
        "task_id": task.id,
        "attempt": trial.attempt,
        "trial": trial.name,
        "agent": config.agent,
        "model": config.options.model,
        "category": task.spec.category,
        "difficulty": task.spec.difficulty,
        "reward": 0.0,
        "reward_mode": config.reward_mode,
        "passed": 0,
        "total": len(task.declared_checks()),
        "resolved": False,
        "checks": [],
        "end_reason": None,
        "turns": 0,
        "wall_time_s": 0.0,
        "tokens": {"prompt": 0, "completion": 0},
        "cost_usd": 0.0,
        "tamper": [],
        "checks_trusting_agent_code": [],
        "error": None,
        "started_at": _now(),
    }
    env = agent = None
    t0 = time.monotonic()
    try:
        env = executor.make_env(task=str(task.path), **config.env_options().model_dump())
        agent = make_agent(config.agent, task, config.options)
        obs, info = env.reset(seed=trial.attempt)
        rec.start(obs)
        while True:
            if stop.is_set():
                raise TrialInterrupted(trial.name)
            try:
                action = agent.act(obs, info)
            except Exception as e:  # noqa: BLE001 - any failure of the agent's code ends this trial only
                result["error"] = {"kind": "agent_error", "message": f"{type(e).__name__}: {e}"}
                break
            t_sent = rec.elapsed()  # the model has answered: the command is typed now
            turn = getattr(agent, "last_turn", None)
            try:
                obs, reward, terminated, truncated, info = env.step(action)
            except ValueError as e:
                rec.action(action, f"[t1] invalid action: {e}", t_sent, rec.elapsed(), turn)
                result["error"] = {"kind": "invalid_action", "message": str(e)}
                break
            if info.get("action") != "submit":
                result["turns"] += 1
            rec.action(action, obs, t_sent, rec.elapsed(), turn)
            if terminated or truncated:
                result.update(
                    reward=float(reward),
                    passed=info["passed"],
                    total=info["total"],
                    resolved=bool(info["resolved"]),
                    checks=info["checks"],
                    end_reason=info["end_reason"],
                    tamper=info.get("tamper", []),
                    checks_trusting_agent_code=info.get("checks_trusting_agent_code", []),
                    verifier_error=info.get("verifier_error"),
                )
                if info["end_reason"] == "sandbox_error":
                    result["error"] = {"kind": "sandbox_error", "message": info.get("error", "")}
                elif info.get("verifier_error"):
                    result["error"] = {"kind": "verifier_error", "message": info["verifier_error"]}
                break
    except TrialInterrupted:
        raise
    except SetupError as e:
        result["error"] = {"kind": "setup_error", "message": str(e)}
    except SandboxError as e:
        result["error"] = {"kind": "sandbox_error", "message": str(e)}
    except Exception as e:  # noqa: BLE001 - a bug in t1 or the task: keep the job going, keep the traceback
        result["error"] = {
            "kind": "harness_error",
            "message": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(limit=8),
        }
    finally:
        if agent is not None and hasattr(agent, "close"):
            try:
                agent.close()
            except Exception:  # noqa: BLE001, S110 - a failing close() must not lose the trial's result
                pass
        if env is not None:
            env.close()
    if stop.is_set():
        # stopped while it ran: Ctrl-C reaches the sandbox's processes too, so what it ended with is not the agent's
        raise TrialInterrupted(trial.name)
    if result["error"] and result["end_reason"] is None:
        result["end_reason"] = result["error"]["kind"]
    if result["error"]:
        rec.note(f"trial ended by {result['error']['kind']}: {result['error']['message']}")
    result["wall_time_s"] = time.monotonic() - t0
    result["finished_at"] = _now()
    result["tokens"] = {"prompt": rec.prompt_tokens, "completion": rec.completion_tokens}
    result["cost_usd"] = rec.cost_usd
    d = Path(job_dir) / trial.name
    note = f"t1 trial {trial.name}: {result['passed']}/{result['total']} checks passed, ended by {result['end_reason']}"
    write_json(d / "trajectory.json", rec.trajectory(notes=note))
    write_atomic(d / "terminal.cast", rec.cast(title=f"t1 {trial.name}"))
    write_json(d / "result.json", result)  # last: its presence marks the trial finished
    return result


def plan_trials(config: EvalConfig) -> list[Trial]:
    """Every trial of the job, task by task, attempts in order. A task that cannot be loaded fails here."""
    tasks, seen = [], set()
    for ref in config.tasks:
        t = get_task(ref, config.task_dirs or None)
        if t.id in seen:
            continue
        seen.add(t.id)
        tasks.append(t)
    return [Trial(t, a) for t in tasks for a in range(config.attempts)]


def run_job(
    config: EvalConfig,
    job_dir: str | Path,
    stop: threading.Event | None = None,
    on_trial: Callable[[dict, dict], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> dict:
    """Run the job's unfinished trials into ``job_dir``; returns the job's metrics (also in its ``result.json``).

    ``on_start(n_total, n_already_finished)`` is called once, ``on_trial(trial_result, metrics_so_far)`` after each
    trial. When ``stop`` is set the running trials end at their next turn and the metrics so far are returned.
    """
    job_dir = Path(job_dir)
    stop = stop or threading.Event()
    check_agent_spec(config.agent, config.options)
    trials = plan_trials(config)
    job_dir.mkdir(parents=True, exist_ok=True)
    write_json(job_dir / "config.json", config.to_json())
    names = {t.name for t in trials}
    done = {k: v for k, v in finished_trials(job_dir).items() if k in names}
    todo = [t for t in trials if t.name not in done]
    lock = threading.Lock()
    executor = make_executor("ray", config.ray) if config.ray else make_executor()

    def metrics() -> dict:
        m = job_metrics(done.values(), config.attempts, expected_trials=len(trials))
        m.update(agent=config.agent, model=config.options.model, backend=config.backend, updated_at=_now())
        m.update(executor.metrics())
        return m

    if on_start:
        on_start(len(trials), len(done))
    write_json(job_dir / "result.json", metrics())
    pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="t1-eval")
    pending: set[Future] = set()
    queue = list(reversed(todo))
    try:
        while queue or pending:
            while queue and len(pending) < config.concurrency and not stop.is_set():
                pending.add(pool.submit(run_trial, queue.pop(), config, job_dir, stop, executor))
            if not pending:
                break
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for f in finished:
                try:
                    r = f.result()
                except TrialInterrupted:
                    continue
                with lock:
                    done[r["trial"]] = r
                    m = metrics()
                    write_json(job_dir / "result.json", m)
                if on_trial:
                    on_trial(r, m)
    except BaseException:
        stop.set()  # Ctrl-C in the waiting thread: the workers see it at their next turn
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        m = metrics()
        executor.close()
        write_json(job_dir / "result.json", m)
    return m

"""TerminalEnv: the Gymnasium environment ``T1Terminal-v0``.

An episode: ``reset()`` starts a fresh sandbox for one task, copies the task's files into the
workdir, runs its ``setup.sh`` and opens a shell; the observation is the instruction. Each
``step(action)`` runs a command (or types keys) and observes its output. The episode ends when
the agent submits (``terminated``), or on the turn limit or the agent time limit (``truncated``);
then the task's verifier runs and the reward is given — by default the number of passing checks.

Actions (see :class:`t1env.spaces.ShellAction`):

* ``"ls -la"`` or ``{"command": "make", "timeout": 120}`` — run a command, observe its output;
* ``{"keys": ["python3", "Enter"], "wait": 1.0}`` — type keys, observe the screen;
* ``{"submit": True}`` — end the episode and be judged.

``timeout`` and ``wait`` are seconds: finite, > 0 and at most the episode's ``agent_timeout``
(left out or ``None``: the task's command timeout, and 0.5 s). A bad action raises ``ValueError``
saying what to send instead, before the turn counts.

Example:
    >>> import gymnasium as gym, t1env
    >>> env = gym.make("T1Terminal-v0", task="hello-file")
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step({"submit": True})
    >>> terminated, reward < info["total"]
    (True, True)
    >>> env.close()
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable

import gymnasium as gym

from t1env.episode.shell import DEFAULT_MAX_OUTPUT, ShellSession, clean_output
from t1env.episode.steps import combine, gate
from t1env.episode.verify import VerifyResult, not_run, prepare, verify
from t1env.errors import T1Error
from t1env.families import get_family, split_seed
from t1env.options import check_env_options
from t1env.registry import get_task, list_tasks
from t1env.sandbox import Sandbox, SandboxConfig, SandboxError, local_zygote, make_sandbox
from t1env.sandbox.base import PRIVATE_SETUP_DIR
from t1env.spaces import ShellAction, TerminalText, brief
from t1env.task import Task, TaskError

log = logging.getLogger(__name__)

_NOTE_ROOM = 1024  # room for t1's notes on top of the captured output


class SetupError(T1Error, RuntimeError):
    """A task's environment could not be prepared (its setup.sh failed). Names the task."""


class TerminalEnv(gym.Env[str, Any]):
    """A real shell in a sandbox, one task per episode. See the module docstring.

    Args:
        task: one task id (or a path to a task package).
        tasks: several task ids; ``reset(seed=...)`` picks one from the seed.
        split: ``"train"`` or ``"test"``: all built-in (and discovered) tasks of that split; with
            ``family=``, the family's seeds of that split (see :mod:`t1env.families`).
        family: a task family name (``t1env list`` shows them): ``reset(seed=k)`` plays the
            instance ``NAME@k`` (with ``split=``, the k-th seed of that split).
        backend: ``"local"`` (bubblewrap, default) or ``"docker"``.
        reward_mode: ``"count"`` (passing checks, default), ``"fraction"`` or ``"binary"``.
        max_turns: actions allowed before truncation (default: the task's ``limits.max_turns``).
        command_timeout: default seconds per command (default: the task's).
        agent_timeout: wall-clock seconds per episode (default: the task's).
        verifier_timeout: seconds for the verifier (default: the task's).
        task_dirs: extra folders to find task packages in.
        max_output_bytes: output kept per command (head and tail; the middle is dropped).
        verify_on_truncate: run the verifier (and give its reward) when the episode is truncated.
        prestart: keep one sandbox with its shell started in the background for the next
            ``reset()``, and stop finished sandboxes in the background, so that reset costs copying
            the task's files instead of starting a sandbox; with one task (``task=``), the files are
            copied and ``setup.sh`` run in the background too, before the spare's shell starts.
        prepare_verifier: start the episode's verifier in the background right after ``reset()`` (its
            isolated sandbox, the interpreter, pytest, the compiled tests), out of the agent's reach, so
            that submitting costs only the checks (:func:`t1env.episode.verify.prepare`). The local and
            Docker backends prepare ``separate``-mode verifiers; other cases start at submission as before.
        zygote_pool: local backend: the :class:`~t1env.sandbox.local_zygote.ZygotePool` to verify through
            (shared by several envs; their ``close()`` leaves it open, its owner closes it). Default: a pool of the
            env's own, closed with it. A pool pays off once per process, not once per env: code that makes an env
            per episode (``t1train``'s rollouts, ``t1env eval``'s executors) shares one.
        render_mode: ``None`` or ``"ansi"``.
        docker_host: with ``backend="docker"``, the engine's URL (``unix:///path``,
            ``tcp://host:port``, ``ssh://user@host``); default ``$DOCKER_HOST``, else the local socket.
            A remote engine (tcp, ssh) gets the verifier's files over the API (``docs/scaling.md``).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        task: str | None = None,
        tasks: Iterable[str] | None = None,
        split: str | None = None,
        family: str | None = None,
        backend: str = "local",
        reward_mode: str = "count",
        max_turns: int | None = None,
        command_timeout: float | None = None,
        agent_timeout: float | None = None,
        verifier_timeout: float | None = None,
        task_dirs: Iterable[str] | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT,
        verify_on_truncate: bool = True,
        prestart: bool = True,
        render_mode: str | None = None,
        docker_host: str | None = None,
        prepare_verifier: bool = True,
        zygote_pool: local_zygote.ZygotePool | None = None,
    ):
        check_env_options(
            backend=backend,
            reward_mode=reward_mode,
            max_turns=max_turns,
            command_timeout=command_timeout,
            agent_timeout=agent_timeout,
            verifier_timeout=verifier_timeout,
            max_output_bytes=max_output_bytes,
            verify_on_truncate=verify_on_truncate,
            prestart=prestart,
            docker_host=docker_host,
            prepare_verifier=prepare_verifier,
        )
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {brief(render_mode)}")
        if task is not None and not isinstance(task, (str, os.PathLike)):
            raise ValueError(
                f"task= takes one task id or package path, got {type(task).__name__}: for several tasks use tasks=[...]"
            )
        tasks = _list_of_names("tasks", tasks, f"use task={brief(tasks)} for one task, or tasks=[{brief(tasks)}]")
        task_dirs = _list_of_names("task_dirs", task_dirs, f"use task_dirs=[{brief(task_dirs)}]")
        if family is not None and (task is not None or tasks is not None):
            raise ValueError(
                "family= goes alone or with split= (to pick the family's train or test seeds), not with task= or tasks="
            )
        if family is None and sum(x is not None for x in (task, tasks, split)) > 1:
            raise ValueError("give at most one of task=, tasks= and split=")
        self.task_dirs = list(task_dirs or [])
        self.family, self.family_split = family, (split if family is not None else None)
        if family is not None:
            if not isinstance(family, str):
                raise ValueError(f"family must be a family name (a string, e.g. family='logs'), got {family!r}")
            get_family(family)  # unknown names fail here, not at reset
            split_seed(split, 0)  # so do unknown splits
            ids = []
        elif task is not None:
            ids = [str(task)]
        elif tasks is not None:
            ids = list(tasks)
        else:
            ids = list_tasks(split=split, task_dirs=self.task_dirs)
        if not ids and family is None:
            raise TaskError(f"no tasks to run (split={brief(split)}); check task_dirs / T1ENV_TASK_PATH")
        self.task_ids = ids
        # resolve every task now: fail at construction, not in the middle of training
        self._task_paths = {tid: str(get_task(tid, self.task_dirs).path) for tid in ids}
        self.backend = backend
        self.docker_host = docker_host
        self.reward_mode = reward_mode
        self._max_turns = max_turns
        self._command_timeout = command_timeout
        self._agent_timeout = agent_timeout
        self._verifier_timeout = verifier_timeout
        self.max_output_bytes = max_output_bytes
        self.verify_on_truncate = verify_on_truncate
        self.prestart = prestart
        self.prepare_verifier = prepare_verifier
        # this env's verifier zygotes (local backend): pytest imported once, a verifier forked per episode
        if zygote_pool is not None and not isinstance(zygote_pool, local_zygote.ZygotePool):
            raise ValueError(f"zygote_pool must be a t1env.sandbox.local_zygote.ZygotePool, got {brief(zygote_pool)}")
        self._own_zygotes = zygote_pool is None
        if backend != "local" or not prepare_verifier:
            self._zygotes = None
        else:
            self._zygotes = zygote_pool if zygote_pool is not None else local_zygote.ZygotePool()
        self._preparing: Future | None = None  # the background prepare() of this episode's verifier
        self._resets = 0
        self.render_mode = render_mode
        self._worker: ThreadPoolExecutor | None = None
        self._spare: Future | None = None
        self._stopping: Future | None = None  # the last background stop (prestart)
        self._oom_kills = 0  # the sandbox's out-of-memory kills the agent was told about
        self._prepared: weakref.WeakKeyDictionary[Sandbox, tuple[str, str]] = weakref.WeakKeyDictionary()

        self.observation_space = TerminalText(max_length=max(max_output_bytes * 4, 65536) + _NOTE_ROOM)
        self.action_space = ShellAction()

        self.task: Task | None = None
        self.sandbox: Sandbox | None = None
        self.shell: ShellSession | None = None
        self.turn = 0
        self._done = True
        self._t_start = 0.0
        self._last = ""
        self.last_verification: VerifyResult | None = None
        self._step = 0  # Harbor multi-step tasks (t1env.episode.steps): the step being played
        self._step_results: list[VerifyResult] = []

    # -- limits of the current episode --------------------------------------------------------
    @property
    def max_turns(self) -> int:
        assert self.task is not None
        return self._max_turns or self.task.spec.limits.max_turns

    def _limit(self, override: float | None, name: str) -> float:
        assert self.task is not None
        return override if override is not None else getattr(self.task.spec.limits, name)

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self._teardown()
        self._wait_for_stops()
        options = options or {}
        if "task" in options:
            tid = options["task"]
        elif self.family is not None:
            k = seed if seed is not None else int(self.np_random.integers(2**31))
            tid = f"{self.family}@{split_seed(self.family_split, k)}"
        elif len(self.task_ids) == 1:
            tid = self.task_ids[0]
        else:
            tid = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        self.task = get_task(self._task_paths.get(tid) or tid, self.task_dirs)
        self._resets += 1
        try:
            self.sandbox, self.shell = self._take_sandbox(self.task)
            self._prepare_workdir(self.task, self.sandbox)
        except BaseException:
            self._teardown()
            raise
        if self.prepare_verifier and not self._steps():  # before the spare: the worker runs in order
            self._preparing = self._background().submit(prepare, self.sandbox, self.task)
        if self.prestart:
            self._spare = self._background().submit(self._launch, self.task)
        self.turn = 0
        self._oom_kills = 0  # a fresh sandbox
        self._done = False
        self._t_start = time.monotonic()
        self.last_verification = None
        self._step, self._step_results = 0, []
        self._last = f"[task {self.task.id}]\n{self.task.instruction}\n"
        info = {
            "task_id": self.task.id,
            "instruction": self.task.instruction,
            "category": self.task.spec.category,
            "difficulty": self.task.spec.difficulty,
            "backend": self.backend,
            "max_turns": self.max_turns,
            "limits": dict(self.sandbox.limits),
            "verifier_mode": self.task.spec.verifier.mode,
        }
        if self._steps():
            info.update(step=0, steps=len(self._steps()))
        return self.task.instruction, info

    def _launch(self, task: Task, spare: bool = True) -> tuple[Sandbox, ShellSession]:
        """A started sandbox and shell for ``task``. When the env plays one task only, its workdir is prepared here
        too (files copied, ``setup.sh`` run), before the shell exists: for the pre-started sandbox that work is
        done in the background, during the episode before, and :meth:`_prepare_workdir` skips it at reset.
        ``spare``: started on the worker for the next reset (False: started by reset itself)."""
        box = make_sandbox(self.backend, task, docker_host=self.docker_host)
        if self._zygotes is not None:
            box.verifier_zygotes = self._zygotes
        try:
            box.start()
            known = self.family is None and len(self.task_ids) == 1  # the next episode's task is known: this one
            if known:
                put_workdir(task, box)
                run_setup(task, box)
                self._prepared[box] = _workdir_key(task)
            shell = ShellSession(box, max_output_bytes=self.max_output_bytes)
            shell.start()
            if self.prepare_verifier and spare and self._resets > 1:  # its verifier (for the task, when known;
                # reset completes it otherwise), queued on the worker, not awaited: reset takes the spare as soon as
                # its shell runs, and whatever stops it is queued on the worker too, after this. Only once the env is
                # being reused (its second episode on): a spare of a one-episode env is never taken
                self._background().submit(prepare, box, task if known else None)
            elif self.prepare_verifier and not spare:  # reset itself started it: the task is being played
                prepare(box, task if known else None)
        except BaseException:
            box.stop()
            raise
        return box, shell

    def _background(self) -> ThreadPoolExecutor:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="t1env-sandbox")
        return self._worker

    def _take_sandbox(self, task: Task) -> tuple[Sandbox, ShellSession]:
        """The pre-started sandbox if it fits this task's isolation settings, else a new one."""
        spare, self._spare = self._spare, None
        if spare is not None:
            try:
                box, shell = spare.result()
            except Exception:
                box = shell = None  # start a fresh one below; the error repeats there if it is real
            if box is not None and shell is not None:
                fits = box.config == SandboxConfig.from_task(task) and box.alive and shell.alive
                if fits and self._prepared.get(box, _workdir_key(task)) == _workdir_key(task):
                    return box, shell
                self._background().submit(_stop, shell, box)
        return self._launch(task, spare=False)

    def _prepare_workdir(self, task: Task, box: Sandbox) -> None:
        if self._prepared.pop(box, None) == _workdir_key(task):
            return  # done by _launch, before the shell started (only the first call on a sandbox can skip)
        put_workdir(task, box)
        run_setup(task, box)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        if self._done or self.shell is None:
            raise RuntimeError("the episode is over (or was never started): call reset() before step()")
        kind, payload = self._parse(action)
        info: dict[str, Any] = {"task_id": self.task.id if self.task else None, "action": kind}
        if kind == "submit":
            if self._step < len(self._steps()) - 1:
                nxt = self._next_step(info)
                if nxt is not None:
                    return nxt, 0.0, False, False, info
                obs = self._finish(info, "min_reward")
                return obs, self._reward(), True, False, info
            obs = self._finish(info, "submitted")
            return obs, self._reward(), True, False, info

        self.turn += 1
        info["turn"] = self.turn
        try:
            if kind == "command":
                r = self.shell.run(payload["command"], timeout=payload["timeout"])
                obs = r.observation
                info.update(
                    exit_code=r.exit_code,
                    duration=r.duration,
                    timed_out=r.timed_out,
                    output_truncated=r.truncated,
                    shell_restarted=r.restarted,
                    oom_killed=(r.exit_code == 137 or r.restarted) and self._new_oom_kill(),
                )
                if info["oom_killed"]:  # bash says only "Killed": say by what, and the limit
                    sep = "" if not obs or obs.endswith("\n") else "\n"
                    obs += (
                        f"{sep}[t1] the out-of-memory killer ended a process: the sandbox's memory limit "
                        f"({self.sandbox.config.memory_mb} MiB) was reached\n"
                    )
                self._last = f"$ {payload['command']}\n{obs}"
            else:
                t0 = time.monotonic()
                obs = self.shell.send_keys(payload["keys"], wait=payload["wait"])
                info.update(exit_code=None, duration=time.monotonic() - t0, timed_out=False, output_truncated=False)
                self._last = obs
        except (SandboxError, OSError) as e:
            # the sandbox itself failed (e.g. its container was killed): end the episode honestly
            info["error"] = f"sandbox failure: {e}"
            obs = f"[t1] the sandbox failed and the episode was ended: {e}"
            self._finish(info, "sandbox_error", run_verifier=False)
            return self._fit(obs), 0.0, False, True, info

        obs = self._fit(obs)
        truncated = False
        if self.turn >= self.max_turns:
            truncated, reason = True, "max_turns"
        elif time.monotonic() - self._t_start > self._limit(self._agent_timeout, "agent_timeout"):
            truncated, reason = True, "agent_timeout"
        if truncated:
            self._finish(info, reason, run_verifier=self.verify_on_truncate)
            return obs, self._reward(), False, True, info
        return obs, 0.0, False, False, info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last
        return None

    def close(self) -> None:
        self._teardown()
        spare, self._spare = self._spare, None
        if spare is not None:
            try:
                self._background().submit(_stop, *spare.result())  # after its verifier's preparation (queued first)
            except Exception:  # the spare sandbox failed to start: there is nothing to stop
                log.debug("the spare sandbox did not start", exc_info=True)
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)  # every background stop has finished: nothing is left running
        if self._zygotes is not None and self._own_zygotes:  # after the background stops: none can start any more
            self._zygotes.close()
        super().close()

    @property
    def shared_zygote_pool(self) -> local_zygote.ZygotePool | None:
        """The ``zygote_pool`` this env was given (shared with other envs, ended by its owner), else None."""
        return None if self._own_zygotes else self._zygotes

    # -- internals ---------------------------------------------------------------------------
    def _parse(self, action: Any) -> tuple[str, dict]:
        """``(kind, payload)`` with ``timeout``/``wait`` filled in; a bad action raises before the turn counts."""
        if isinstance(action, str):
            action = {"command": action}
        problem = self.action_space.problem(action)
        if problem is not None:
            raise ValueError(
                f"action: {problem}. Send a command string, {{'command': str, 'timeout': seconds}}, "
                f"{{'keys': str | list[str], 'wait': seconds}} or {{'submit': True}}; got {brief(action)}"
            )
        if "submit" in action:
            return "submit", {}
        limit = float(self._limit(self._agent_timeout, "agent_timeout"))
        name = "wait" if "keys" in action else "timeout"
        if action.get(name) is not None and action[name] > limit:
            raise ValueError(
                f"action: {name} {float(action[name]):g} s is over this episode's agent time limit "
                f"({limit:g} s, agent_timeout); send at most {limit:g}"
            )
        if "keys" in action:
            wait = action.get("wait")
            return "keys", {"keys": action["keys"], "wait": 0.5 if wait is None else float(wait)}
        timeout = action.get("timeout")
        if timeout is None:
            timeout = self._limit(self._command_timeout, "command_timeout")
        return "command", {"command": action["command"], "timeout": float(timeout)}

    def _fit(self, obs: str) -> str:
        cap = self.observation_space.max_length
        return obs if len(obs) <= cap else obs[: cap - 40] + "\n[t1] observation cut to fit the space\n"

    def _steps(self) -> tuple:
        return self.task.origin.steps if self.task is not None and self.task.origin is not None else ()

    def _next_step(self, info: dict) -> str | None:
        """Verify the current step of a multi-step task; the next step's instruction, or None when its gate stops the episode."""
        steps = self._steps()
        cur = steps[self._step]
        res = verify(self.sandbox, cur, self._verifier_timeout)
        self._step_results.append(res)
        info["step_result"] = res.to_info()
        stop = gate(cur, res)
        if stop is not None:
            info["gate"] = stop
            return None
        self._step += 1
        nxt = steps[self._step]
        self._prepare_workdir(nxt, self.sandbox)
        info["step"] = self._step
        self._last = f"[task {self.task.id}, step {nxt.origin.step_name}]\n{nxt.instruction}\n"
        return nxt.instruction

    def _finish(self, info: dict, reason: str, run_verifier: bool = True) -> str:
        assert self.task is not None
        self._done = True
        info["end_reason"] = reason
        info["elapsed"] = time.monotonic() - self._t_start
        if self._steps() and run_verifier and self.sandbox is not None:
            if len(self._step_results) <= self._step:
                self._step_results.append(verify(self.sandbox, self._steps()[self._step], self._verifier_timeout))
            res = combine(self.task, self._step_results)
        elif run_verifier and self.sandbox is not None:
            self._wait_for_prepare()
            res = verify(self.sandbox, self.task, self._verifier_timeout)
        else:
            res = not_run(self.task.declared_checks(), f"episode ended: {reason}", reason)
        self.last_verification = res
        info.update(res.to_info())
        info["reward_mode"] = self.reward_mode
        self._teardown()
        summary = f"[t1] episode ended ({reason}): {res.passed}/{res.total} checks passed"
        self._last = summary
        return summary

    def _reward(self) -> float:
        res = self.last_verification
        return res.reward(self.reward_mode) if res is not None else 0.0  # type: ignore[arg-type]

    def _wait_for_prepare(self) -> None:
        """Let the background prepare() of this episode's verifier finish (it never raises; verify starts cold when
        nothing was prepared)."""
        preparing, self._preparing = self._preparing, None
        if preparing is not None:
            preparing.result()

    def _teardown(self) -> None:
        self._wait_for_prepare()  # the sandbox's stop() then ends what it prepared
        shell, self.shell = self.shell, None
        box, self.sandbox = self.sandbox, None
        if self.prestart and self._worker is not None:
            self._stopping = self._worker.submit(_stop, shell, box)
        else:
            _stop(shell, box)

    def _new_oom_kill(self) -> bool:
        """Whether the out-of-memory killer ended a process in the sandbox since the last time this was asked."""
        kills = self.sandbox.oom_kills() if self.sandbox is not None else None
        if kills is None or kills <= self._oom_kills:
            return False
        self._oom_kills = kills
        return True

    def _wait_for_stops(self) -> None:
        """When the temp folder's file system has less than :data:`DISK_ROOM` free, wait until the sandboxes stopped
        in the background are gone: what the last episode left on the host's disk (a local sandbox's folder) is freed
        before the next one starts using it. With room to spare, do not wait: a local stop (its processes, cgroups
        and folder) takes about 4 ms, three times what a pre-started reset costs without it."""
        stopping, self._stopping = self._stopping, None
        if stopping is not None and not stopping.done() and _disk_has_room():
            return  # nothing to wait for: the folders are freed a few ms later, and the disk has room meanwhile
        if stopping is not None:
            try:
                stopping.result()  # the worker runs in order: every earlier stop is done too
            except Exception:
                pass  # a failed stop is t1env gc's to clean up; it must not fail the next episode


def put_workdir(task: Task, box: Sandbox) -> None:
    """Copy the task's environment files (all but setup.sh and a Dockerfile) into the sandbox's workdir."""
    wd = box.config.workdir
    for p in task.workdir_files():
        if p.is_dir():
            box.put_tree(p, f"{wd}/{p.name}")
        else:
            box.put_file(f"{wd}/{p.name}", p.read_bytes(), p.stat().st_mode & 0o777)


def run_setup(task: Task, box: Sandbox) -> None:
    """Run the task's ``setup.sh`` (if any) in the sandbox; raise :class:`SetupError` if it fails.

    What setup writes to ``$T1_PRIVATE`` (a fresh folder) is the checks' to know, not the agent's: it is taken
    out of the sandbox as soon as setup exits, before the agent's shell runs anything, and shown to the checks
    only (read-only, at ``$T1_PRIVATE``) once the agent is gone or frozen (:meth:`Sandbox.take_private_state`).
    """
    if task.setup_script is None:
        return
    path, private = "/tmp/.t1-setup.sh", PRIVATE_SETUP_DIR + secrets.token_hex(8)
    box.put_file(path, task.setup_script.read_bytes(), 0o700)
    r = box.exec(
        ["bash", "-c", 'mkdir -m 700 -- "$T1_PRIVATE" && exec bash -- "$0"', path],
        timeout=task.spec.limits.setup_timeout,
        env={"T1_PRIVATE": private},
    )
    box.exec(["rm", "-f", path], timeout=10)
    if r.exit_code != 0:
        why = "timed out" if r.timed_out else f"exited with {r.exit_code}"
        tail = clean_output(r.stdout + r.stderr).strip().splitlines()[-3:]
        raise SetupError(f"{task.setup_script}: setup {why}: {' | '.join(tail)}")
    try:
        box.take_private_state(private)
    except SandboxError as e:
        raise SetupError(f"{task.setup_script}: {e}") from None


def _workdir_key(task: Task) -> tuple[str, str]:
    """What a prepared workdir was prepared for: the task package and the task (a family instance, a step)."""
    return str(task.path), task.id


DISK_ROOM = 1 << 30
"""Free bytes in the temp folder's file system under which ``reset()`` waits for the last sandboxes' folders to go."""


def _disk_has_room() -> bool:
    try:
        return shutil.disk_usage(tempfile.gettempdir()).free >= DISK_ROOM
    except OSError:
        return False


def _stop(shell: ShellSession | None, box: Sandbox | None) -> None:
    if shell is not None:
        shell.close()
    if box is not None:
        box.stop()


def _list_of_names(name: str, value: Any, fix: str) -> list[str] | None:
    """A list kwarg (``tasks``, ``task_dirs``): a plain string would otherwise become a list of its characters."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, os.PathLike)):
        raise ValueError(f"{name}= takes a list, got the single value {brief(value)}: {fix}")
    try:
        items = list(value)
    except TypeError:
        raise ValueError(f"{name}= takes a list of strings, got {type(value).__name__}") from None
    bad = [i for i in items if not isinstance(i, (str, os.PathLike))]
    if bad:
        raise ValueError(f"{name}= takes a list of strings, got an item {brief(bad[0])} ({type(bad[0]).__name__})")
    return [str(i) for i in items]

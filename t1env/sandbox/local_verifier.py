"""The local backend's verifier: the checks run where the agent's processes cannot reach them.

t1's runtime and the task's tests are copied, on the host, into the episode's ``verifier`` folder,
which the sandbox sees read-only at ``/.t1-verifier`` (the agent can neither write there nor plant
links: that host folder is not mounted anywhere writable), and only once no agent process can look:
after they all ended (``separate``) or froze (``shared``). The interpreter is the host's
``python3`` under the sandbox's read-only ``/usr``, started with ``-I``. The checks' environment is
:func:`~t1env.sandbox.base.verifier_env`: their own empty ``HOME`` and ``T1_PRIVATE``, the read-only
copy of what the task's setup wrote there (kept on the host since setup exited).

* ``separate`` mode (the default): the sandbox's pid 1 is killed first, and with it every process
  of its pid namespace (daemons, double forks, ``setsid`` included). The verifier then runs as pid 1
  of a **fresh** bubblewrap sandbox over the same episode folders (workdir, ``/tmp``, ``/root``),
  with the same user namespace mapping, seccomp filter, capabilities and cgroups, and no network;
  its ``HOME`` is a tmpfs of its own at ``/.t1-home`` and the private state is bound read-only at
  ``/.t1-private``.
* ``shared`` mode: the agent's processes are frozen (:mod:`t1env.sandbox.freezer`), the verifier is
  started inside the sandbox's namespaces (it sees the agent's processes and services), and the
  processes are thawed once the verifier's first report line (``ready``) says it has made itself
  non-dumpable. On cgroup v2 the verifier stays out of the sandbox's cgroup (which is the one being
  frozen), so the pids and memory caps do not apply to it there. Nothing can be mounted into the
  agent's namespaces, so ``HOME`` is an empty read-only ``/.t1-verifier/home`` and ``T1_PRIVATE`` is
  ``/.t1-verifier/private``; once thawed, the agent's processes can read (not change) the tests and
  the private state while the checks run.

* **prepared** (``separate`` mode, :func:`prepare`, the env's default): the same fresh bubblewrap sandbox is
  started while the agent plays (for the env's prestarted sandbox, before its task is known), in cgroups of its
  own with the sandbox's caps, its ``/.t1-verifier`` a host folder (``prepared/``) that no sandbox of the agent
  binds. Its verifier imports pytest and waits on its stdin (``run_checks.py --go-fd 0``). The task's tests and
  private state are staged into ``prepared/`` when the task is known. At submission the agent is ended exactly as
  above; then one line on the verifier's stdin carries the task's arguments and the checks' environment, and the
  checks run. The agent never shares a pid, mount or network namespace or a cgroup with it, and never sees
  ``prepared/``. A run whose mounts do not fit (``tests_alias``, ``private_dir``) discards it and starts cold;
  ``stop()`` ends an unused one.

Imported tasks (:class:`~t1env.sandbox.base.VerifierOptions`): in ``separate`` mode the fresh
sandbox also shows the tests read-only at ``tests_alias`` and has a tmpfs of its own at
``private_dir``. In ``shared`` mode nothing can be mounted into the agent's namespaces: a
``private_dir`` is refused, and a ``tests_alias`` in the environment is replaced by
``/.t1-verifier/tests`` (with a note).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from t1env.sandbox import local_zygote
from t1env.sandbox.base import (
    PRIVATE_DIR,
    VERIFIER_DIR,
    VERIFIER_HOME,
    VERIFIER_HOME_FILES,
    ExecResult,
    SandboxError,
    VerifierOptions,
    VerifierRun,
    verifier_argv,
    verifier_env,
)
from t1env.sandbox.bounded import Finished, OutputCapture, pump
from t1env.sandbox.cgroups import SandboxCgroups
from t1env.sandbox.freezer import Freezer, _state, pids_in_namespace
from t1env.sandbox.staging import clear as _clear
from t1env.sandbox.staging import copy_tree as _copy
from t1env.sandbox.staging import make_readable as _readable
from t1env.sandbox.staging import stage as _stage
from t1env.sandbox.staging import stage_episode as _stage_episode


class _ReadyCapture(OutputCapture):
    """The report stream's capture; calls ``on_ready`` once, when the first line is complete."""

    def __init__(self, cap: int, on_ready):
        super().__init__(cap)
        self.on_ready = on_ready

    def feed(self, data: bytes) -> None:
        super().feed(data)
        if self.on_ready is not None and b"\n" in data:
            on_ready, self.on_ready = self.on_ready, None
            on_ready()


def run_verifier(
    box, runtime: Path, tests: Path, timeout: float, mode: str, options: VerifierOptions | None = None
) -> VerifierRun:
    """See :meth:`t1env.sandbox.base.Sandbox.run_verifier` and the module docstring."""
    opts = options or VerifierOptions()
    if box._root is None:
        raise SandboxError("sandbox is not started")
    if mode == "shared" and (box.init_pid is None or not box.alive):
        raise SandboxError("sandbox is not running (it was stopped, verified already, or its init process died)")
    if mode == "shared" and opts.private_dir:
        raise SandboxError(
            f"the local backend's shared-mode verifier cannot give the verifier a private {opts.private_dir}: "
            "use backend='docker'"
        )
    if mode == "separate" and box._zygote and local_zygote.usable(box, mode, opts):
        discard(box)
        run = box.verifier_zygotes.run(box, runtime, tests, opts, timeout, end_agent, _stage_for_zygote)
        if run is not None:
            return run  # else zygotes are off: the usual way below (end_agent again is a no-op)
    prepared = _take(box, runtime, opts) if mode == "separate" else None
    if prepared is not None:
        return _run_prepared(box, prepared, tests, opts, timeout)
    dest = box._root / "verifier"
    if mode == "shared":  # nothing can be mounted into the agent's namespaces: HOME and the private state are staged
        env = {**box.config.environ(), **verifier_env(f"{VERIFIER_DIR}/home", f"{VERIFIER_DIR}/private"), **opts.env}
    else:
        env = {**box.config.environ(), **verifier_env(), **opts.env}
    extra_notes = []
    if mode == "shared" and opts.tests_alias:
        env = {
            k: v.replace(opts.tests_alias, f"{VERIFIER_DIR}/tests") if v.startswith(opts.tests_alias) else v
            for k, v in env.items()
        }
        extra_notes.append(f"local shared-mode verifier: the tests are at {VERIFIER_DIR}/tests, not {opts.tests_alias}")
    t0 = time.monotonic()
    try:
        if mode == "shared":
            res, notes = _shared(box, env, timeout, opts.args, lambda: _stage(runtime, tests, dest, box.private_state))
        else:
            res, notes = _separate(box, env, timeout, opts, lambda: _stage(runtime, tests, dest))
        notes = notes + extra_notes
    finally:
        _clear(dest)
    return VerifierRun(_exec_result(res, t0), "shared" if mode == "shared" else "separate", notes)


def _exec_result(res: Finished, t0: float) -> ExecResult:
    """What the verifier's run returned, as :class:`ExecResult` (exit code -9 when it was killed at its timeout)."""
    return ExecResult(
        res.returncode if not res.timed_out else -9,
        res.stdout.bytes(),
        res.stderr.bytes(),
        res.timed_out,
        time.monotonic() - t0,
    )


def _separate(box, env: dict, timeout: float, opts: VerifierOptions, stage) -> tuple[Finished, list[str]]:
    end_agent(box)
    stage()  # only now: no process of the agent is left to watch the verifier folder fill
    proc = _launch_separate(box, env, opts, box._root / "verifier")
    res = Finished(OutputCapture(box.EXEC_OUTPUT_CAP), OutputCapture(box.EXEC_OUTPUT_CAP))
    pump(proc, None, res, time.monotonic() + timeout, box.EXIT_GRACE, None)
    return res, []


def _launch_separate(
    box, env: dict, opts: VerifierOptions, staged: Path, cgroups: SandboxCgroups | None = None, go: bool = False
) -> subprocess.Popen:
    """Start the verifier as pid 1 of a fresh bubblewrap sandbox over the episode's folders, with the runtime and
    tests of ``staged`` at ``/.t1-verifier``, in ``cgroups`` (default: the sandbox's). ``go``: it waits for a line
    on its stdin (a pipe, left open) before it runs a check."""
    argv = box._bwrap_argv()
    # before the root is made read-only, so that their mount points can be made
    mounts = ["--ro-bind", str(staged), VERIFIER_DIR] if staged != box._root / "verifier" else []
    mounts += ["--tmpfs", VERIFIER_HOME]
    for f in VERIFIER_HOME_FILES:  # regular empty files (a device node cannot be opened on the user namespace's mounts)
        mounts += ["--ro-bind", str(staged / "home" / f), f"{VERIFIER_HOME}/{f}"]
    if go:  # a prepared verifier: the task's private state is staged into its folder once known
        mounts += ["--ro-bind", str(staged / "private"), PRIVATE_DIR]
    elif box.private_state is not None:
        mounts += ["--ro-bind", str(box.private_state), PRIVATE_DIR]
    else:
        mounts += ["--dir", PRIVATE_DIR]  # empty (and read-only with the root)
    if opts.tests_alias:
        mounts += ["--ro-bind", str(staged / "tests"), opts.tests_alias]
    if opts.private_dir:
        mounts += ["--tmpfs", opts.private_dir]
    i = next((i for i in range(len(argv) - 1) if argv[i] == "--remount-ro" and argv[i + 1] == "/"), len(argv))
    argv[i:i] = mounts
    # --as-pid-1: no bwrap monitor as pid 1 holding the report pipe (a normal user's bwrap is dumpable: any
    # program a check runs could write the report through /proc/1/fd/1); the non-dumpable verifier is pid 1
    extra = (*opts.args, "--go-fd", "0") if go else opts.args
    argv += ["--as-pid-1", "--chdir", box.config.workdir, "--", *verifier_argv(extra=extra)]
    popen = dict(
        stdin=subprocess.PIPE if go else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=tuple(box._launch_fds),
        env=env,
        start_new_session=True,
    )
    try:
        return box._start_bwrap(argv, popen, cgroups)  # a prepared verifier outlives the thread that prepared it
    finally:
        for f in box._launch_fds:
            os.close(f)
        box._launch_fds = []


# ---------------------------------------------------------------------------------------------
# the prepared verifier
# ---------------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """A verifier started by :func:`prepare`, waiting for the line on its stdin that says go (and what to run)."""

    shape: tuple  # (runtime, tests_alias, private_dir): what its mounts were made for
    proc: subprocess.Popen
    staged: Path  # the host folder at /.t1-verifier (runtime, tests/, private/, home/)
    cgroups: SandboxCgroups
    task: tuple | None = None  # (tests, private state) staged into it, None before the task is known


def prepare(box, runtime: Path, tests: Path | None, mode: str, options: VerifierOptions | None = None) -> bool:
    """Have this episode's ``separate``-mode verifier started and waiting (see the module docstring).

    With ``tests`` None (a sandbox started ahead of its task, e.g. the env's prestarted spare) only what does not
    depend on the task is prepared: the sandbox, the interpreter, pytest and its session. With ``tests``, the tests
    and the private state of the task's setup are staged into it too (a running one is reused when its mounts fit).
    Its sandbox is a fresh bubblewrap sandbox like the cold verifier's — pid, mount, network, ipc and uts
    namespaces of its own, the same user namespace mapping, seccomp filter, capabilities and limits — in cgroups of
    its own with the sandbox's caps, so that the agent can neither see it, signal it, ptrace it nor starve it of
    pids or memory. What it is given is staged into a host folder (``prepared/`` of the episode folder) that no
    sandbox of the agent binds. ``shared`` mode cannot be prepared (its verifier must enter the agent's namespaces,
    which it may only do once the agent is frozen): False, and the run starts cold."""
    opts = options or VerifierOptions()
    if mode != "separate" or box._root is None or not box.alive:
        discard(box)
        return False
    if local_zygote.usable(box, mode, opts):
        try:
            box.verifier_zygotes.warm(box, runtime)
            box._zygote = True
            if tests is not None:  # staged now, where the prepared verifier would stage it (never seen by the agent)
                _stage_for_zygote(box, tests)
            return True
        except (SandboxError, OSError) as e:  # the usual prepared verifier below
            local_zygote.turn_off(e)
    prepared = box._prepared
    if prepared is None or prepared.shape != _shape(runtime, opts) or prepared.proc.poll() is not None:
        discard(box)
        prepared = box._prepared = _launch_prepared(box, runtime, opts)
    if tests is not None:
        _stage_task(prepared, tests, box.private_state)
    return True


def _shape(runtime: Path, opts: VerifierOptions) -> tuple:
    return (runtime, opts.tests_alias, opts.private_dir)


def _launch_prepared(box, runtime: Path, opts: VerifierOptions) -> Prepared:
    staged = box._root / "prepared"
    _stage(runtime, None, staged)
    cgroups = SandboxCgroups(f"t1-{uuid.uuid4().hex[:12]}-verifier", box.config.pids, box.config.memory_mb << 20)
    with open(box._root / "cgroups", "a") as f:  # `t1env gc` removes them with the sandbox's
        f.write("".join(f"{d}\n" for d in cgroups.dirs))
    env = {**box.config.environ(), **verifier_env()}  # the task's verifier environment comes with the go
    try:
        proc = _launch_separate(box, env, dataclasses.replace(opts, args=()), staged, cgroups, go=True)
    except BaseException:
        cgroups.destroy()
        _clear(staged)
        raise
    return Prepared(_shape(runtime, opts), proc, staged, cgroups)


def _stage_for_zygote(box, tests: Path) -> None:
    """Stage the task's tests and private state into the episode folder's ``prepared/`` for a zygote's verifier,
    unless they are staged there already."""
    key = (tests, box.private_state)
    if box._zygote_staged != key:
        _stage_episode(box._root / "prepared", tests, box.private_state)
        box._zygote_staged = key


def _stage_task(prepared: Prepared, tests: Path, private: Path | None) -> None:
    """Put the task's tests and private state into the prepared verifier's folder (its ``tests/`` and ``private/``
    stay the same directories: bind mounts of them would not see new ones)."""
    if prepared.task == (tests, private):
        return
    for sub, src in (("tests", tests), ("private", private)):
        dest = prepared.staged / sub
        _clear(dest)
        if src is not None:
            _copy(src, dest, code=sub == "tests")
    _readable(prepared.staged)
    prepared.task = (tests, private)


def _take(box, runtime: Path, opts: VerifierOptions) -> Prepared | None:
    """The prepared verifier if its mounts fit and it still waits; else None (any other one discarded)."""
    prepared = box._prepared
    if prepared is None:
        return None
    if prepared.shape == _shape(runtime, opts) and prepared.proc.poll() is None:
        box._prepared = None
        return prepared
    discard(box)
    return None


def _run_prepared(box, prepared: Prepared, tests: Path, opts: VerifierOptions, timeout: float) -> VerifierRun:
    """End the agent, then say go (with the task's arguments): the prepared verifier runs the checks."""
    t0 = time.monotonic()
    proc = prepared.proc
    try:
        end_agent(box)
        _stage_task(prepared, tests, box.private_state)  # a no-op when prepare() was given the task
        assert proc.stdin is not None
        go = json.dumps({"argv": list(opts.args), "env": dict(opts.env)}) + "\n"
        try:
            proc.stdin.write(go.encode())
            proc.stdin.flush()
        except OSError:  # it died while it waited: its report (if any) says why
            pass
        res = Finished(OutputCapture(box.EXEC_OUTPUT_CAP), OutputCapture(box.EXEC_OUTPUT_CAP))
        pump(proc, None, res, time.monotonic() + timeout, box.EXIT_GRACE, None)
    finally:
        _end_prepared(prepared)
    return VerifierRun(_exec_result(res, t0), "separate", [], prepared=True)


def discard(box) -> None:
    """End the prepared verifier (if any) without running it: its sandbox, cgroups and staged files go."""
    prepared, box._prepared = box._prepared, None
    if prepared is not None:
        _end_prepared(prepared)


def _end_prepared(prepared: Prepared) -> None:
    proc = prepared.proc
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # bwrap (its session leader): the verifier dies with it
        except ProcessLookupError:
            pass
    prepared.cgroups.destroy()  # and whatever a check left
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    _clear(prepared.staged)


def _shared(box, env: dict, timeout: float, extra: tuple[str, ...], stage) -> tuple[Finished, list[str]]:
    v2 = (SandboxCgroups.ROOT / "cgroup.controllers").exists()
    cg = box._cg
    freezer = Freezer(box.init_pid, v2_cgroup=cg.dirs[0] if (v2 and cg is not None and cg.dirs) else None)
    mechanism = freezer.freeze()
    try:
        stage()  # only now: the agent's processes are frozen (they see the verifier folder again once thawed)
        # on cgroup v2 the freezer is the sandbox's own cgroup: the verifier must not join it
        preexec = box.preexec() if not v2 else box.preexec_without_cgroups()
        proc = subprocess.Popen(
            box._enter_argv() + verifier_argv(extra=extra),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=preexec,
            start_new_session=True,
        )
        res = Finished(_ReadyCapture(box.EXEC_OUTPUT_CAP, freezer.thaw), OutputCapture(box.EXEC_OUTPUT_CAP))
        pump(proc, None, res, time.monotonic() + timeout, box.EXIT_GRACE, None)
    finally:
        freezer.thaw()
    return res, [f"the agent's processes were frozen ({mechanism}) until the verifier was out of their reach"]


def end_agent(box, wait: float = 5.0) -> None:
    """End every process of the agent (:meth:`LocalSandbox.end_processes`) and wait until none runs any more.
    The episode folders and cgroups stay."""
    old_pid = box.init_pid
    box.end_processes()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        left = (box._cg.pids() if box._cg is not None else set()) | (pids_in_namespace(old_pid) if old_pid else set())
        if all(_state(p) in ("Z", "X", "") for p in left):  # zombies run nothing (and may wait for a reaper)
            return
        time.sleep(0.002)
    raise SandboxError("the agent's processes did not end within 5 s; not verifying beside them")

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

Imported tasks (:class:`~t1env.sandbox.base.VerifierOptions`): in ``separate`` mode the fresh
sandbox also shows the tests read-only at ``tests_alias`` and has a tmpfs of its own at
``private_dir``. In ``shared`` mode nothing can be mounted into the agent's namespaces: a
``private_dir`` is refused, and a ``tests_alias`` in the environment is replaced by
``/.t1-verifier/tests`` (with a note).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

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
from t1env.sandbox.userns import popen_as_root_of_new_userns


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
    result = ExecResult(
        res.returncode if not res.timed_out else -9,
        res.stdout.bytes(),
        res.stderr.bytes(),
        res.timed_out,
        time.monotonic() - t0,
    )
    return VerifierRun(result, "shared" if mode == "shared" else "separate", notes)


def _separate(box, env: dict, timeout: float, opts: VerifierOptions, stage) -> tuple[Finished, list[str]]:
    end_agent(box)
    stage()  # only now: no process of the agent is left to watch the verifier folder fill
    argv = box._bwrap_argv()
    # before the root is made read-only, so that their mount points can be made
    mounts = ["--tmpfs", VERIFIER_HOME]
    for f in VERIFIER_HOME_FILES:  # regular empty files (a device node cannot be opened on the user namespace's mounts)
        mounts += ["--ro-bind", str(box._root / "verifier" / "home" / f), f"{VERIFIER_HOME}/{f}"]
    if box.private_state is not None:
        mounts += ["--ro-bind", str(box.private_state), PRIVATE_DIR]
    else:
        mounts += ["--dir", PRIVATE_DIR]  # empty (and read-only with the root)
    if opts.tests_alias:
        mounts += ["--ro-bind", str(box._root / "verifier" / "tests"), opts.tests_alias]
    if opts.private_dir:
        mounts += ["--tmpfs", opts.private_dir]
    i = next((i for i in range(len(argv) - 1) if argv[i] == "--remount-ro" and argv[i + 1] == "/"), len(argv))
    argv[i:i] = mounts
    # --as-pid-1: no bwrap monitor as pid 1 holding the report pipe (a normal user's bwrap is dumpable: any
    # program a check runs could write the report through /proc/1/fd/1); the non-dumpable verifier is pid 1
    argv += ["--as-pid-1", "--chdir", box.config.workdir, "--", *verifier_argv(extra=opts.args)]
    popen = dict(
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=tuple(box._launch_fds),
        env=env,
        start_new_session=True,
    )
    try:
        if box._userns and os.geteuid() == 0:
            proc = popen_as_root_of_new_userns(argv, box._join_and_limit(), box.HOST_ID_BASE, popen)
        else:
            proc = subprocess.Popen(argv, preexec_fn=box._join_and_limit(), **popen)
    finally:
        for f in box._launch_fds:
            os.close(f)
        box._launch_fds = []
    res = Finished(OutputCapture(box.EXEC_OUTPUT_CAP), OutputCapture(box.EXEC_OUTPUT_CAP))
    pump(proc, None, res, time.monotonic() + timeout, box.EXIT_GRACE, None)
    return res, []


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


def _stage(runtime: Path, tests: Path, dest: Path, private: Path | None = None) -> None:
    """Copy the runtime and the tests into the episode's verifier folder, readable (not writable) by the sandbox's
    root, with ``home`` (the shared-mode verifier's HOME, holding :data:`VERIFIER_HOME_FILES`, which the
    separate-mode verifier's tmpfs HOME binds) and ``private`` (a copy of ``private``, the task's private setup
    state, in shared mode, where nothing can be mounted for the verifier alone; else empty)."""
    _clear(dest)
    try:
        shutil.copytree(runtime, dest, dirs_exist_ok=True, symlinks=False)
        shutil.copytree(
            tests,
            dest / "tests",
            dirs_exist_ok=True,
            symlinks=False,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        if private is not None:
            shutil.copytree(private, dest / "private", symlinks=False)
    except shutil.Error as e:  # one (src, dst, why) per file: say the first reason, e.g. the disk is full
        raise OSError(f"staging the verifier into the episode folder failed: {e.args[0][0][2]}") from None
    (dest / "home").mkdir(exist_ok=True)
    for f in VERIFIER_HOME_FILES:
        (dest / "home" / f).touch()
    (dest / "private").mkdir(exist_ok=True)
    for d, dirs, files in os.walk(dest):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)


def _clear(dest: Path) -> None:
    if not dest.is_dir():
        return
    for p in dest.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)

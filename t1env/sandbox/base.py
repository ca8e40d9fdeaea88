"""The Sandbox contract shared by every backend (local bubblewrap, Docker).

Lifecycle: ``start()`` → ``shell_argv()`` (a command line that spawns an interactive bash inside)
→ ``exec(argv, timeout)`` / ``put_file`` / ``get_file`` → ``stop()``. ``stop()`` is idempotent and
leaves nothing behind: no process, no container, no temporary directory.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from t1env.errors import T1Error
from t1env.task import Task

# The environment every sandboxed process starts with (backends add nothing else from the host).
BASE_ENV: dict[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm-256color",
    # Pagers and editors would wait for keys that a command-mode agent never sends.
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "",
    "GIT_EDITOR": "true",
    "DEBIAN_FRONTEND": "noninteractive",
    "PYTHONDONTWRITEBYTECODE": "1",
}


# Where the verifier runtime and the task's tests are visible inside the sandbox at verification time.
VERIFIER_DIR = "/.t1-verifier"
# The checks' HOME: an empty folder of the verifier's own that the agent never sees (a tmpfs of the verifier's
# sandbox or container), so no tool a check runs reads the agent's ~/.gitconfig, pip.conf, .npmrc, .curlrc, ...
VERIFIER_HOME = "/.t1-home"
# Empty files in the checks' HOME (each an empty read-only file bound there), for tools that would go on
# looking elsewhere without one: curl reads the passwd entry's home (/root, the agent's) when $CURL_HOME,
# $XDG_CONFIG_HOME and $HOME hold no .curlrc.
VERIFIER_HOME_FILES: tuple[str, ...] = (".curlrc",)
# Where the checks find, read-only, what the task's setup.sh wrote to $T1_PRIVATE (see PRIVATE_SETUP_DIR).
PRIVATE_DIR = "/.t1-private"
# Git settings that would run a program named in config the agent could write (its ~/.gitconfig, /etc/gitconfig
# in its container, or a work-product repository's own .git/config), turned off at command scope, which outranks
# every config file. What is still read from a repository's own config is listed in docs/sandbox.md.
GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.sshCommand", "ssh -F /dev/null"),
    ("core.askPass", "true"),
    ("credential.helper", ""),  # an empty value empties the list of helpers
    ("log.showSignature", "false"),
    ("gpg.program", "gpg"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("gpg.x509.program", "gpgsm"),
    ("protocol.ext.allow", "never"),
)


def verifier_env(home: str = VERIFIER_HOME, private: str = PRIVATE_DIR) -> dict[str, str]:
    """The verifier's environment on top of the sandbox's: no byte-code written, no plugin auto-loading, no user
    site-packages for any Python the checks start, and a clean, private configuration for every tool a check may
    run: its own empty ``HOME`` (``home``), no system or global git config and :data:`GIT_OVERRIDES`, no pip, npm,
    wget or ssh config files, ``T1_PRIVATE`` pointing at the task's private setup state (``private``)."""
    env = {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONNOUSERSITE": "1",
        "HOME": home,
        "XDG_CONFIG_HOME": f"{home}/.config",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_DATA_HOME": f"{home}/.local/share",
        "CURL_HOME": home,
        "WGETRC": "/dev/null",
        "PIP_CONFIG_FILE": "/dev/null",
        "PIP_NO_INPUT": "1",
        "NPM_CONFIG_USERCONFIG": "/dev/null",
        "NPM_CONFIG_GLOBALCONFIG": f"{home}/.npm-globalconfig",  # not there (npm refuses /dev/null twice)
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_SSH_COMMAND": "ssh -F /dev/null",
        "GIT_ASKPASS": "true",
        "GIT_PAGER": "cat",
        "GIT_EDITOR": "true",
        "GIT_SEQUENCE_EDITOR": "true",
        "GIT_CONFIG_COUNT": str(len(GIT_OVERRIDES)),
        "T1_PRIVATE": private,
    }
    for i, (key, value) in enumerate(GIT_OVERRIDES):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


# The verifier's environment where HOME and the private state are at their usual places (see verifier_env).
VERIFIER_ENV: dict[str, str] = verifier_env()
# Where setup.sh's $T1_PRIVATE is inside the sandbox while setup runs; the host takes it out and removes it before
# the agent's first command (Sandbox.take_private_state). Random per episode (the suffix).
PRIVATE_SETUP_DIR = "/tmp/.t1-private-"
# The most private state one setup may leave (a few ids and names are what it is for).
PRIVATE_STATE_CAP = 4 * 1024 * 1024


def verifier_argv(root: str = VERIFIER_DIR, extra: tuple[str, ...] = ()) -> list[str]:
    """The verifier's command line: an isolated (``-I``) Python running t1's runtime from ``root``."""
    return [
        "python3",
        "-I",
        "-B",
        f"{root}/run_checks.py",
        "--pytest-zip",
        f"{root}/pytest.zip",
        *extra,
        f"{root}/tests",
    ]


@dataclass(frozen=True)
class VerifierOptions:
    """What an imported (Terminal-Bench or Harbor) task's verifier needs beyond t1's default run
    (see :mod:`t1env.formats`); backends that isolate the verifier honour every field or raise
    :class:`SandboxError` saying which they cannot."""

    args: tuple[str, ...] = ()
    """Extra arguments to run_checks.py (its script mode: ``--script /tests/test.sh --logs /logs/verifier``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment of the verifier (e.g. ``TEST_DIR=/tests``)."""
    tests_alias: str | None = None
    """The task's tests are also visible, read-only, at this path (``/tests``, where upstream tests expect them)."""
    private_dir: str | None = None
    """A writable folder that only the verifier sees (``/logs/verifier``, where a test.sh writes its reward)."""


class SandboxError(T1Error, RuntimeError):
    """The sandbox could not be started or used. The message is one line saying what to do."""


@dataclass(frozen=True)
class SandboxConfig:
    """Isolation settings of one sandbox, usually taken from a task's ``[environment]``."""

    workdir: str = "/app"
    network: bool = False
    network_allow: tuple[str, ...] = ()
    """``HOST:PORT`` services a network-on sandbox may reach on the host or a private range (``egress.py``)."""
    memory_mb: int = 2048
    pids: int = 512
    file_size_mb: int = 1024
    cpu_seconds: int = 3600
    cpus: float = 1.0
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_task(cls, task: Task, **overrides) -> "SandboxConfig":
        e = task.spec.environment
        kw = dict(
            workdir=e.workdir,
            network=e.network,
            network_allow=e.network_allow,
            memory_mb=e.memory_mb,
            pids=e.pids,
            file_size_mb=e.file_size_mb,
            cpu_seconds=e.cpu_seconds,
            cpus=e.cpus,
        )
        kw.update(overrides)
        return cls(**kw)

    def environ(self) -> dict[str, str]:
        return {**BASE_ENV, **self.env}


@dataclass
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration: float


@dataclass
class VerifierRun:
    """What :meth:`Sandbox.run_verifier` returns: the run (its stdout is the report channel) and how
    far it was isolated from the agent: ``separate`` (no agent process alive), ``shared`` (agent
    processes frozen until the verifier was out of their reach) or ``none`` (a backend that cannot
    isolate: the verifier ran beside the agent's processes, from files the agent could reach)."""

    result: ExecResult
    isolation: str
    notes: list[str] = field(default_factory=list)
    prepared: bool = False
    """Whether the run used the verifier :meth:`Sandbox.prepare_verifier` started (else it started cold)."""


class Sandbox(ABC):
    """One isolated machine-like environment for one episode."""

    name = "abstract"
    #: Which isolation limits are in force for this sandbox (e.g. ``pids``, ``memory``, ``seccomp``,
    #: ``user_namespace``, ``network_isolated`` -> bool); the env puts it into ``reset()``'s info.
    limits: dict[str, bool] = {}

    def __init__(self, config: SandboxConfig):
        self.config = config

    # -- lifecycle ---------------------------------------------------------------------------
    @abstractmethod
    def start(self) -> None:
        """Create the isolated environment with an empty, writable workdir."""

    @abstractmethod
    def stop(self) -> None:
        """Kill everything inside and delete all state. Idempotent."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether the sandbox is started and its processes can still run."""

    # -- processes ---------------------------------------------------------------------------
    @abstractmethod
    def shell_argv(self) -> list[str]:
        """argv that starts an interactive ``bash`` inside the sandbox, in the workdir."""

    def spawn_env(self) -> dict[str, str]:
        """Environment for the process started from :meth:`shell_argv`."""
        return self.config.environ()

    def preexec(self) -> Callable[[], None] | None:
        """A function to run in the child between fork and exec of :meth:`shell_argv` (or None)."""
        return None

    def open_shell(self, rows: int, cols: int):
        """A new interactive shell in the sandbox on a connection of the backend's own (None, this default: the
        shell is :meth:`shell_argv` spawned under a pty). What it returns offers what ShellSession uses of a
        ``pexpect.spawn``: ``send``, ``read_nonblocking``, ``isalive``, ``close``, ``exitstatus``, ``signalstatus``
        (the Docker backend's :class:`~t1env.sandbox.docker_shell.ExecShell`)."""
        return None

    @abstractmethod
    def exec(
        self,
        argv: list[str],
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run ``argv`` to completion inside the sandbox (stdin is empty), killing it after ``timeout``."""

    def foreground_busy(self, shell_pid: int) -> bool:
        """Whether a program other than the shell owns the terminal (e.g. a REPL started by keys).

        ``shell_pid`` is the shell's pid as seen inside the sandbox. Backends may override this
        with something cheaper than a process start.
        """
        r = self.exec(["cat", f"/proc/{shell_pid}/stat"], timeout=5)
        fields = r.stdout.decode(errors="replace").rsplit(")", 1)[-1].split()
        # after the command name: state ppid pgrp session tty_nr tpgid
        return len(fields) > 5 and fields[2] != fields[5] and fields[5] != "-1"

    def oom_kills(self) -> int | None:
        """How many processes the out-of-memory killer has ended in this sandbox (its memory limit was reached),
        or None when the backend cannot tell."""
        return None

    # -- verification ------------------------------------------------------------------------
    def run_verifier(
        self,
        runtime: Path,
        tests: Path,
        timeout: float,
        mode: str = "separate",
        options: "VerifierOptions | None" = None,
    ) -> VerifierRun:
        """Run t1's verifier (``runtime``: run_checks.py, pytest.zip, pytest.ini; ``tests``: the task's
        tests) against what the agent left, out of the agent's reach, and return its report.

        The contract every isolating backend keeps: the runtime and the tests are visible read-only
        at :data:`VERIFIER_DIR` (``tests/`` inside it); the interpreter and its libraries are ones
        the agent could not modify; in ``separate`` mode no agent process is alive when the verifier
        starts, and in ``shared`` mode the agent's processes are frozen until the verifier has made
        itself unreachable (its first report line). The verifier's stdout is the report channel.

        ``options`` (imported tasks, :class:`VerifierOptions`): extra runtime arguments and
        environment, a read-only alias of the tests and a verifier-private writable folder.

        The checks' environment is :func:`verifier_env`: an empty ``HOME`` of their own and
        ``T1_PRIVATE``, the read-only copy of :attr:`private_state`; both are staged, like the tests,
        only once the agent's processes are gone (or frozen, in ``shared`` mode).

        This default, for backends that cannot isolate, copies both into the sandbox and runs the
        verifier beside the agent's processes (``isolation="none"``). The backends t1 ships override it.
        """
        import secrets

        opts = options or VerifierOptions()
        base = f"/tmp/.t1-verify-{secrets.token_hex(6)}"
        self.put_tree(runtime, base)
        self.put_tree(tests, f"{base}/tests")
        if opts.tests_alias:
            self.put_tree(tests, opts.tests_alias)
        if self.private_state is not None:
            self.put_tree(self.private_state, f"{base}/private")
        self.exec(
            ["mkdir", "-p", f"{base}/home", f"{base}/private", *([opts.private_dir] if opts.private_dir else [])],
            timeout=10,
        )
        env = {**verifier_env(f"{base}/home", f"{base}/private"), **opts.env}
        r = self.exec(verifier_argv(base, opts.args), timeout=timeout, env=env)
        try:
            self.exec(["rm", "-rf", base], timeout=10)
        except SandboxError:
            pass
        return VerifierRun(r, "none", [f"the {self.name} backend runs the verifier beside the agent's processes"])

    def prepare_verifier(
        self, runtime: Path, tests: Path | None, mode: str = "separate", options: "VerifierOptions | None" = None
    ) -> bool:
        """Start, while the episode runs, the verifier that a later :meth:`run_verifier` with the same
        ``runtime``, ``tests``, ``mode`` and ``options`` will use: its isolated environment, the interpreter,
        t1's runtime and pytest imported, the tests compiled, waiting on a channel only the host holds. At
        submission :meth:`run_verifier` ends the agent as it always does and only then says go, so the checks
        still see exactly what the agent left and nothing of the agent is alive (or unfrozen) while they run.

        The contract for a backend that prepares: nothing prepared shares the agent's pid or mount namespace
        while the agent runs; the agent can neither see nor change what was prepared (the runtime, the tests and
        the private state go where no agent process can look); a :meth:`run_verifier` with other arguments, or
        one after the sandbox changed, discards it and runs cold; :meth:`stop` ends it. ``tests`` None: the task is
        not known yet (a sandbox started ahead of it); prepare what does not depend on it, or nothing. Returns whether
        a verifier was prepared. This default prepares nothing (``run_verifier`` then starts cold)."""
        return False

    # -- verifier-private state --------------------------------------------------------------
    _private_state: Path | None = None

    @property
    def private_state(self) -> Path | None:
        """The host folder holding what the task's setup left in ``$T1_PRIVATE`` (None before any setup ran);
        the backends show it to the checks, read-only, at :data:`PRIVATE_DIR` and never to the agent."""
        return self._private_state

    def take_private_state(self, inside: str, timeout: float = 60.0) -> None:
        """Move the folder ``inside`` (setup.sh's ``$T1_PRIVATE``) out of the sandbox into :attr:`private_state`.

        Runs inside the sandbox (``tar``, like the other file transfers), right after setup exits and before the
        agent's shell runs anything; the folder is removed there in the same command. Only regular files and
        folders are kept. Raises :class:`SandboxError` when a process setup started still holds a file of it open
        (the agent could read it through ``/proc/<pid>/fd``), when it holds more than :data:`PRIVATE_STATE_CAP`
        bytes, or when it cannot be read."""
        script = (
            'P=$1; cd / || exit 1; [ -d "$P" ] || exit 0\n'
            'open=$(ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -F -e "-> $P/" | sed "s/.*-> //" | sort -u | head -3)\n'
            'if [ -n "$open" ]; then rm -rf "$P"; echo $open >&2; exit 3; fi\n'
            f'tar -c -f - -C "$P" . | head -c {PRIVATE_STATE_CAP + 1}\n'
            'rm -rf "$P"\n'
        )
        r = self.exec(["sh", "-c", script, "sh", inside], timeout=timeout)
        if r.exit_code == 3:
            held = r.stderr.decode(errors="replace").strip()
            raise SandboxError(
                f"a process that setup.sh started keeps {held} open, which the agent could read "
                "through /proc/<pid>/fd: close it (or write the file before starting that process) "
                "before setup exits"
            )
        if r.exit_code != 0 or r.timed_out:
            err = r.stderr.decode(errors="replace").strip()[-300:]
            why = "timed out" if r.timed_out else err or f"exit {r.exit_code}"
            raise SandboxError(f"could not take $T1_PRIVATE ({inside}) out of the sandbox: {why}")
        if len(r.stdout) > PRIVATE_STATE_CAP:
            raise SandboxError(
                f"setup.sh left more than {PRIVATE_STATE_CAP // 2**20} MiB in $T1_PRIVATE: keep only "
                "what the checks need to know there (ids, names), and the task's data in the workdir"
            )
        if self._private_state is None:
            self._private_state = Path(tempfile.mkdtemp(prefix="t1-private-", dir=self._private_state_parent()))
        dest = self._private_state
        if r.stdout:
            try:
                with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
                    _extract_plain(tar, dest)
            except (tarfile.TarError, OSError) as e:
                raise SandboxError(f"could not take $T1_PRIVATE ({inside}) out of the sandbox: {e}") from None
        for d, _, files in os.walk(dest):  # read-only for the checks (and the sandbox's unprivileged root)
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)

    def _private_state_parent(self) -> str | None:
        """Where on the host :attr:`private_state` is made (None: the temp folder). A backend whose episode has a
        host folder of its own keeps it there, so that whatever removes that folder removes it too."""
        return None

    def drop_private_state(self) -> None:
        """Delete :attr:`private_state` (``stop()`` does)."""
        held, self._private_state = self._private_state, None
        if held is not None:
            shutil.rmtree(held, ignore_errors=True)

    # -- files -------------------------------------------------------------------------------
    @abstractmethod
    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to absolute ``path`` inside the sandbox (parents are created)."""

    @abstractmethod
    def get_file(self, path: str) -> bytes:
        """Read the file at absolute ``path`` inside the sandbox. Raises FileNotFoundError."""

    def put_tree(self, src: Path, dest: str) -> None:
        """Copy the contents of host directory ``src`` into ``dest`` inside the sandbox."""
        for p in sorted(Path(src).rglob("*")):
            if p.is_file():
                rel = p.relative_to(src).as_posix()
                self.put_file(f"{dest.rstrip('/')}/{rel}", p.read_bytes(), p.stat().st_mode & 0o777)

    # -- conveniences ------------------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):  # a forgotten sandbox must not leak processes or files
        try:
            self.stop()
        except Exception:  # noqa: S110 - at interpreter exit the modules stop() needs may be gone already
            pass


def _extract_plain(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract only the regular files and directories of ``tar`` under ``dest``; a member whose name is absolute
    or climbs out with ``..`` is an error. ``filter="data"`` does the same where this Python has it (3.11.4+);
    Debian 12's 3.11.2 does not, so the names are checked here on every Python."""
    members = []
    for m in tar.getmembers():
        if not (m.isreg() or m.isdir()):
            continue
        parts = Path(m.name).parts
        if m.name.startswith("/") or ".." in parts:
            raise tarfile.TarError(f"member {m.name!r} would land outside {dest}")
        m.mode = (m.mode or 0) & 0o755
        members.append(m)
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, members=members, filter="data")
    else:
        tar.extractall(dest, members=members)

"""Local sandbox on bubblewrap: the embedded default backend (no Docker needed).

One sandbox is one ``bwrap`` process holding a set of fresh namespaces (mount, pid, ipc, uts and,
unless the task asks for network, net). Every process of the episode — the agent's shell, setup
scripts, the verifier — is started inside those namespaces with ``nsenter``, with capabilities cut
down to a container-like set by ``setpriv``. The episode's state lives in one host directory that
``stop()`` deletes.

What is covered
---------------
* **Host files are read-only.** The host userland (``/usr``, ``/etc`` and the ``/bin``-style links)
  is bind-mounted read-only; the sandbox root is a read-only tmpfs. Writable are only ``/app`` (the
  workdir), ``/tmp`` and ``/root`` (``$HOME``), each backed by the episode's own directory, fresh per
  episode and deleted at ``stop()``. Nothing else of the host (home directories, the project
  checkout, the task's tests) is visible.
* **No network** unless the task sets ``environment.network = true``: a new network namespace with
  only loopback.
* **Processes are isolated and contained.** New pid, ipc and uts namespaces; the sandbox cannot see
  or signal host processes. A pids cgroup caps the number of processes (a fork bomb hits the cap),
  a memory cgroup caps memory, and rlimits cap file size (``RLIMIT_FSIZE``) and CPU time per
  process (``RLIMIT_CPU``).
* **No privilege to undo the above.** Processes keep only Docker's default capability set (chown,
  dac_override, fowner, fsetid, kill, setgid, setuid, setpcap, net_bind_service, net_raw,
  sys_chroot, mknod, audit_write, setfcap): no ``CAP_SYS_ADMIN``, so no mount/remount, no
  namespace escape through ``setns``; ``no_new_privs`` is set.
* **Nothing is left running.** The sandbox's pid 1 is a bubblewrap process started with
  ``--die-with-parent``; when it dies the kernel kills every process in the namespace. ``stop()``
  also kills what remains in the cgroup and removes the episode directory.

What is not covered
-------------------
* Kernel exploits: this is namespaces and cgroups on the host kernel, not a VM. Use the Docker
  backend with a hardened runtime (gVisor, Kata) for untrusted code at scale.
* Disk usage of ``/app`` and ``/tmp`` is not quota'd (only the size of each file is capped).
* Reading world-readable host files under ``/usr`` and ``/etc`` is allowed (that is the userland).
* When the host offers no writable cgroup hierarchy (e.g. a non-root user on cgroup v2 without
  delegation), the process and memory caps are not enforced; :attr:`LocalSandbox.limits` says which
  limits are in force.
* CPU *quota* (``environment.cpus``) is only applied by the Docker backend.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Mapping

from t1env.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError

# Docker's default capability set: enough to be "root" for chown/chmod/useradd-style work,
# without CAP_SYS_ADMIN (mount, setns) or CAP_SYS_PTRACE.
DEFAULT_CAPS = (
    "chown dac_override fowner fsetid kill setgid setuid setpcap net_bind_service net_raw "
    "sys_chroot mknod audit_write setfcap"
).split()

_INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: install it with `sudo apt-get install bubblewrap` "
    "(Debian/Ubuntu) or `sudo dnf install bubblewrap` (Fedora), or use backend='docker'"
)

EPISODE_PREFIX = "t1-sbx-"


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxError(_INSTALL_HINT)
    return path


# ---------------------------------------------------------------------------------------------
# cgroups: a pids and a memory controller, v1 or v2, under this process's own cgroup
# ---------------------------------------------------------------------------------------------


class _Cgroups:
    """Per-sandbox cgroup directories that cap processes and memory. Best effort; see ``enforced``."""

    ROOT = Path("/sys/fs/cgroup")

    def __init__(self, name: str, pids: int, memory_bytes: int):
        self.dirs: list[Path] = []
        self.enforced: dict[str, bool] = {"pids": False, "memory": False}
        own = self._own_paths()
        if (self.ROOT / "cgroup.controllers").exists():  # cgroup v2 (unified)
            base = self.ROOT / own.get("", "/").lstrip("/")
            d = self._mkdir(base / name)
            if d is not None:
                self.enforced["pids"] = self._write(d / "pids.max", str(pids))
                self.enforced["memory"] = self._write(d / "memory.max", str(memory_bytes))
                self._write(d / "memory.swap.max", "0")
        else:  # cgroup v1: one hierarchy per controller
            for ctrl, fname, value in (
                ("pids", "pids.max", str(pids)),
                ("memory", "memory.limit_in_bytes", str(memory_bytes)),
            ):
                base = self.ROOT / ctrl / own.get(ctrl, "/").lstrip("/")
                d = self._mkdir(base / name)
                if d is not None:
                    self.enforced[ctrl] = self._write(d / fname, value)
                    if ctrl == "memory":
                        self._write(d / "memory.memsw.limit_in_bytes", value)
        self._procs_files = [str(d / "cgroup.procs").encode() for d in self.dirs]

    @staticmethod
    def _own_paths() -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, ctrls, path = line.split(":", 2)
                for c in ctrls.split(","):
                    out[c] = path
        except OSError:
            pass
        return out

    def _mkdir(self, d: Path) -> Path | None:
        try:
            d.mkdir()
        except OSError:
            return None
        self.dirs.append(d)
        return d

    @staticmethod
    def _write(p: Path, value: str) -> bool:
        try:
            p.write_text(value)
            return True
        except OSError:
            return False

    def join_self(self) -> None:
        """Move the calling process into every cgroup (safe to call between fork and exec)."""
        pid = str(os.getpid()).encode()
        for f in self._procs_files:
            try:
                fd = os.open(f, os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
            except OSError:
                pass

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs:
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return out

    def destroy(self) -> None:
        deadline = time.monotonic() + 5
        while True:
            live = self.pids()
            if not live or time.monotonic() > deadline:
                break
            for pid in live:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)
        for d in reversed(self.dirs):
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
        self.dirs = []


# ---------------------------------------------------------------------------------------------
# the sandbox
# ---------------------------------------------------------------------------------------------


class LocalSandbox(Sandbox):
    """A bubblewrap sandbox. See the module docstring for what it protects against."""

    name = "local"

    def __init__(self, config: SandboxConfig | None = None, ro_binds: Mapping[str, str] | None = None):
        super().__init__(config or SandboxConfig())
        self._ro_binds = dict(ro_binds or {})
        self._init: subprocess.Popen | None = None
        self._root: Path | None = None
        self._cg: _Cgroups | None = None
        self.init_pid: int | None = None
        self.limits: dict[str, bool] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._init is not None:
            raise SandboxError("sandbox already started; call stop() first")
        bwrap = bwrap_path()
        self._root = Path(tempfile.mkdtemp(prefix=EPISODE_PREFIX))
        try:
            self._start(bwrap)
        except BaseException:
            self.stop()
            raise

    def _start(self, bwrap: str) -> None:
        root = self._root
        assert root is not None
        for sub in ("app", "tmp", "home"):
            (root / sub).mkdir()
        os.chmod(root / "tmp", 0o1777)
        (root / "owner").write_text(str(os.getpid()))  # lets `t1env gc` find orphans
        c = self.config
        self._cg = _Cgroups(f"t1-{uuid.uuid4().hex[:12]}", c.pids, c.memory_mb * 1024 * 1024)
        self.limits = {**self._cg.enforced, "file_size": True, "cpu_time": True}

        argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        argv += ["--unshare-cgroup-try", "--hostname", "t1"]
        if not c.network:
            argv.append("--unshare-net")
        for top in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/") / top
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), f"/{top}"]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), f"/{top}"]
        argv += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev"]
        argv += ["--bind", str(root / "tmp"), "/tmp", "--bind", str(root / "home"), "/root"]
        argv += ["--bind", str(root / "app"), c.workdir]
        argv += ["--dir", "/var", "--symlink", "../tmp", "/var/tmp", "--dir", "/run"]
        for host, inside in self._ro_binds.items():
            argv += ["--ro-bind", host, inside]
        if os.geteuid() == 0:
            argv += ["--cap-drop", "ALL"] + [a for cap in DEFAULT_CAPS for a in ("--cap-add", f"CAP_{cap.upper()}")]
        info_r, info_w = os.pipe()
        argv += ["--remount-ro", "/", "--chdir", c.workdir, "--info-fd", str(info_w)]
        argv += ["--", "/bin/sh", "-c", "echo ready; exec sleep infinity"]
        try:
            self._init = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(info_w,),
                preexec_fn=self._child_setup(),
                env=c.environ(),
            )
        finally:
            os.close(info_w)
        ready = b""
        assert self._init.stdout is not None
        if select.select([self._init.stdout], [], [], 20)[0]:
            ready = self._init.stdout.readline()
        info = _read_available(info_r)
        if ready.strip() != b"ready":
            self._init.kill()
            err = self._init.stderr.read().decode(errors="replace").strip() if self._init.stderr else ""
            raise SandboxError(f"bubblewrap failed to start: {err.splitlines()[-1] if err else 'no output'}")
        try:
            self.init_pid = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError) as e:
            raise SandboxError(f"bubblewrap gave no child pid on --info-fd: {info!r}") from e

    def _child_setup(self) -> Callable[[], None]:
        """Runs between fork and exec: join the cgroups, set rlimits (async-signal-safe work only)."""
        cg = self._cg
        fsize = self.config.file_size_mb * 1024 * 1024
        cpu = self.config.cpu_seconds

        def setup() -> None:
            if cg is not None:
                cg.join_self()
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            if os.geteuid() != 0:  # only enforced for non-root (see setrlimit(2))
                resource.setrlimit(resource.RLIMIT_NPROC, (self.config.pids, self.config.pids))

        return setup

    def stop(self) -> None:
        init, self._init = self._init, None
        if init is not None:
            try:
                init.kill()  # pid 1 of the namespace: the kernel kills everything inside
            except ProcessLookupError:
                pass
            try:
                init.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (init.stdout, init.stderr):
                if stream is not None:
                    stream.close()
        cg, self._cg = self._cg, None
        if cg is not None:
            cg.destroy()
        root, self._root = self._root, None
        if root is not None:
            _rmtree(root)
        self.init_pid = None

    @property
    def alive(self) -> bool:
        return self._init is not None and self._init.poll() is None

    @property
    def host_workdir(self) -> Path:
        """The host directory behind the workdir (for tests and debugging)."""
        if self._root is None:
            raise SandboxError("sandbox is not started")
        return self._root / "app"

    # -- processes ---------------------------------------------------------------------------
    def _enter_argv(self, cwd: str | None = None) -> list[str]:
        if not self.alive or self.init_pid is None:
            raise SandboxError("sandbox is not running (it was stopped or its init process died)")
        argv = ["nsenter", "-t", str(self.init_pid), "-m", "-u", "-i", "-n", "-p", "-r", "-w"]
        if os.geteuid() == 0:
            caps = ",".join(["-all"] + [f"+{c}" for c in DEFAULT_CAPS])
            argv += ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", "--no-new-privs", "--"]
        else:
            argv.insert(1, "--preserve-credentials")
            argv[1:1] = ["-U"]
        if cwd and cwd != self.config.workdir:
            argv += ["env", "-C", cwd]
        return argv

    def shell_argv(self) -> list[str]:
        return self._enter_argv() + ["/bin/bash", "--noprofile", "--norc", "-i"]

    def preexec(self) -> Callable[[], None]:
        return self._child_setup()

    def exec(self, argv, timeout, env=None, cwd=None) -> ExecResult:
        full = self._enter_argv(cwd) + list(argv)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**self.config.environ(), **(env or {})},
            preexec_fn=self._child_setup(),
            start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
        return ExecResult(proc.returncode if not timed_out else -9, out, err, timed_out, time.monotonic() - t0)

    # -- files -------------------------------------------------------------------------------
    def _host_path(self, path: str) -> Path:
        if self._root is None:
            raise SandboxError("sandbox is not started")
        p = Path(os.path.normpath(path))
        mounts = {Path(self.config.workdir): self._root / "app", Path("/tmp"): self._root / "tmp", Path("/root"): self._root / "home"}
        for inside, host in mounts.items():
            if p == inside or inside in p.parents:
                target = host / p.relative_to(inside)
                # refuse to follow links the agent may have planted to escape the episode dir
                real = target.parent.resolve() if not target.exists() else target.resolve()
                if host.resolve() not in (real, *real.parents):
                    raise PermissionError(f"{path}: resolves outside the sandbox")
                return target
        raise PermissionError(f"{path}: only {self.config.workdir}, /tmp and /root are writable in the local sandbox")

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        target = self._host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.t1tmp")
        tmp.write_bytes(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)

    def get_file(self, path: str) -> bytes:
        return self._host_path(path).read_bytes()

    def put_tree(self, src: Path, dest: str) -> None:
        target = self._host_path(dest)
        shutil.copytree(src, target, dirs_exist_ok=True, symlinks=True)


def _read_available(fd: int) -> bytes:
    """Read what bwrap wrote to --info-fd (it keeps the fd open, so never wait for EOF)."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _rmtree(root: Path) -> None:
    def onerror(func, path, _exc):  # chmod 000 dirs left by the agent (matters when not root)
        try:
            os.chmod(path, 0o700)
            parent = os.path.dirname(path)
            os.chmod(parent, 0o700)
            func(path)
        except OSError:
            pass

    shutil.rmtree(root, onerror=onerror)

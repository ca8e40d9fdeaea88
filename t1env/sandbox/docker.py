"""Docker sandbox: one container per episode, images cached by content, a warm pool of containers.

The backend's parts, one module each: the engine client and labels (``docker_engine``), images
(``docker_images``), the in-container helper (``docker_helper``), containers, the warm pool, the reaper
and ``gc`` (``docker_pool``), the verifier's container (``docker_verifier``), the agent's shell on the
engine's socket (``docker_shell``), and the sandbox (here; this module also re-exports the others' public
names).

One sandbox is one container started from the task's image. The agent's shell is an interactive
``bash`` in an exec with a terminal, on the engine's attached socket (:mod:`t1env.sandbox.docker_shell`:
no host pty and no docker CLI between ShellSession and the engine); a remote engine, or
``T1_DOCKER_SHELL=cli``, gets ``docker exec -it`` instead (see ``bench/docker_latency.py``). Everything
else t1 does inside the container — workdir files, ``setup.sh`` — goes through a small helper process that
is started in the container once, with ``docker exec``, and then answers requests over that
exec's stdin/stdout: a process start costs about 1 ms instead of the 70-100 ms of a ``docker
exec``/``put_archive`` round through the engine. Images without ``python3`` (the helper's
language) fall back to the plain engine API, transparently.

Images. The image comes from, in order: ``[environment] docker_image`` (used as is when the
engine has it or can pull it), the task's ``environment/Dockerfile`` (build context
``environment/``), or t1's **default image** (Debian bookworm with python3, git, gcc/g++, make,
procps, ... — see :data:`DEFAULT_PACKAGES`; built ``FROM`` :data:`DEFAULT_BASE`). Built images are
tagged ``t1env/<name>:<hash>`` where the hash covers the build context's bytes, the Dockerfile and
the ids of its ``FROM`` images, so an unchanged task never rebuilds and a changed one always does.
A build holds a lock per tag — a thread lock and a file lock, so concurrent requests for the same
image from threads *or processes* build it once, while different images build in parallel.

Engines. A sandbox talks to one engine, fixed when it is made: ``docker_host=`` (a URL:
``unix:///path``, ``tcp://host:port``, ``ssh://user@host``), else ``$DOCKER_HOST``, else the local
socket (:func:`engine_url`). Clients, pools and the image cache are per engine, and the shell's
``docker exec`` is told the same engine with ``-H``. A ``tcp``/``ssh`` engine is remote
(:func:`engine_is_remote`, ``T1_DOCKER_REMOTE`` overrides): nothing of this machine's filesystem is
bind-mounted; the verifier's runtime and tests go over the API (see :mod:`t1env.sandbox.docker_verifier`), and
the shell is the CLI's.

Warm pool. Containers for an (image, limits) pair are created ahead of time: :meth:`start` takes
one (a few ms) and a background thread makes the next. The pool size is ``T1_DOCKER_POOL_SIZE``
(default 1; 0 disables) or :func:`configure_pool`. Every container carries the label ``t1env=1``
and its owner (boot id, pid, process start time). Nothing leaks: ``stop()`` removes the episode's
container (in a background reaper, so ``reset()`` does not wait for it), :func:`close_pools`
removes idle pool containers, both run again at interpreter exit, and :func:`gc` removes
containers whose owner process is gone (``t1env gc``).

What is covered
---------------
* **Container isolation.** Fresh container per episode from an unmodified image: own pid, mount,
  ipc, uts and network namespaces; Docker's default capability set and seccomp profile;
  ``no-new-privileges``. The agent's processes, ``setup.sh`` and the verifier all run inside it.
* **No network** unless ``environment.network = true`` (``network_mode=none``: loopback only). With
  it, the default bridge behind the egress filter of :mod:`t1env.sandbox.egress`, installed in the
  container's network namespace before anything runs there: the internet, never the host, other
  containers or private and link-local ranges (``network_allow`` opens named services).
* **Limits from task.toml**: memory (swap included) ``memory_mb``, CPU quota ``cpus``, process
  count ``pids`` (a fork bomb hits the cap), and per-process rlimits ``file_size_mb`` (fsize) and
  ``cpu_seconds`` (cpu). No container log is kept (log driver ``none``), so output cannot fill the
  engine's disk.
* **Faults are reported, not hung on**: a container that dies mid-episode (killed, OOM) makes
  :attr:`alive` false and ``exec``/files raise :class:`SandboxError` with the container's state; an
  unreachable engine is one line; a failing build raises :class:`DockerBuildError` naming the
  failing step with the tail of its log.

What is not covered
-------------------
* Kernel exploits: containers share the host kernel. Configure a hardened runtime (gVisor's
  ``runsc``, Kata) with ``T1_DOCKER_RUNTIME`` for hostile code at scale.
* Disk usage inside the container's writable layer is not quota'd (overlay2 has no per-container
  quota without xfs project quotas); only each file's size is capped.
* An agent that is root in its container can tamper with what runs there after it (the helper process
  included); the checks do not run there: they run in a verifier container of their own on the pristine
  image (:mod:`t1env.sandbox.docker_verifier`, prepared while the agent plays or started at submission).
* Images are not pulled from a registry unless the task names one with ``docker_image``; base
  images of Dockerfiles must exist locally or be pullable (``.ci/docker-setup.sh`` makes
  ``debian:bookworm-slim`` without a registry).
"""

from __future__ import annotations

import base64
import io
import os
import tarfile
import time
from pathlib import Path
from typing import Iterable

from t1env.sandbox import docker_verifier
from t1env.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError, VerifierRun
from t1env.sandbox.cgroups import oom_kill_count
from t1env.sandbox.docker_engine import (
    DEFAULT_BASE,
    DEFAULT_PACKAGES,
    IMAGE_REPO,
    LABEL,
    LABEL_HASH,
    LABEL_IMAGE,
    LABEL_OWNER,
    LABEL_TASK,
    DockerBuildError,
    _docker_cli,
    _one_line,
    client,
    engine_available,
    engine_is_remote,
    engine_ready,
    engine_url,
)
from t1env.sandbox.docker_helper import HELPER, _HelperGone
from t1env.sandbox.docker_images import (
    _context_tar,
    _resolution_key,
    _resolved,
    build_bases,
    build_image,
    default_dockerfile,
    default_image,
    image_for,
)
from t1env.sandbox.docker_pool import (
    CAP_DROP,
    _Box,
    _launch,
    _pool,
    _reaper,
    close_pools,
    configure_pool,
    gc,
    prewarm,
)
from t1env.sandbox.docker_shell import ExecShell
from t1env.task import Task

# The backend's face: the sandbox, and the public names of the modules it is made of (engine, images, pool).
# Private names stay in the module that defines them (tests import them from there).
__all__ = [
    "CAP_DROP",
    "DEFAULT_BASE",
    "DEFAULT_PACKAGES",
    "HELPER",
    "IMAGE_REPO",
    "LABEL",
    "LABEL_HASH",
    "LABEL_IMAGE",
    "LABEL_OWNER",
    "LABEL_TASK",
    "DockerBuildError",
    "DockerSandbox",
    "build_bases",
    "build_image",
    "check_image",
    "client",
    "close_pools",
    "configure_pool",
    "default_dockerfile",
    "default_image",
    "engine_available",
    "engine_is_remote",
    "engine_ready",
    "engine_url",
    "gc",
    "image_for",
    "prewarm",
]

SHELL = ("bash", "--noprofile", "--norc", "-i")  # the agent's shell, whichever way it is connected

# ---------------------------------------------------------------------------------------------
# the sandbox
# ---------------------------------------------------------------------------------------------


class DockerSandbox(Sandbox):
    """A container per episode. See the module docstring for the image, pool and isolation rules.

    Args:
        config: limits and workdir (usually ``SandboxConfig.from_task(task)``).
        task: the task whose image to use (None: t1's default image).
        image: an image to use instead of the task's.
        pool: take the container from the warm pool (default) or always start a fresh one.
        docker_host: the engine's URL (``unix:///path``, ``tcp://host:port``, ``ssh://user@host``);
            default ``$DOCKER_HOST``, else the local socket. Resolved here, once: images, containers,
            the shell (``docker -H``) and the verifier all use that engine. A remote engine
            (:func:`engine_is_remote`) gets the verifier's files over the API, not bind mounts.
    """

    name = "docker"
    shell_transport = os.environ.get("T1_DOCKER_SHELL", "socket")  # "cli": the agent's shell on `docker exec -it`

    def __init__(
        self,
        config: SandboxConfig | None = None,
        task: Task | None = None,
        image: str | None = None,
        pool: bool = True,
        docker_host: str | None = None,
    ):
        super().__init__(config or SandboxConfig())
        self.task = task
        self.image = image
        self.use_pool = pool
        self.host = engine_url(docker_host)
        self.remote = engine_is_remote(self.host)
        self._box: _Box | None = None
        self._dead_reason: str | None = None
        self.warm = False  # whether the container came from the pool
        self._cli: str | None = None
        self._prepared: docker_verifier.Prepared | None = None  # a verifier container waiting for the episode's end

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._box is not None:
            raise SandboxError("sandbox already started; call stop() first")
        self._cli = _docker_cli()
        if self.image is None:
            self.image = image_for(self.task, host=self.host)
        task_id = self.task.id if self.task else None
        pool = _pool(self.image, self.config, task_id, self.host) if self.use_pool else None
        box = None
        if pool is not None:
            box = pool.take(wait=5.0)
            while box is not None and not self._usable(box):
                _reaper.remove(box)
                box = pool.take(wait=5.0)
        self.warm = box is not None
        if box is None:
            try:
                box = _launch(self.image, self.config, task_id, self.host)
            except SandboxError:
                if self.task is None or not _resolved.pop(_resolution_key(self.task, self.host), None):
                    raise
                self.image = image_for(self.task, host=self.host)  # the cached image was removed: resolve (build) again
                box = _launch(self.image, self.config, task_id, self.host)
        self._box = box
        self._dead_reason = None

    @staticmethod
    def _usable(box: _Box) -> bool:
        if box.helper is not None:
            try:
                box.helper.call({"op": "ping"}, timeout=5)
                return True
            except _HelperGone:
                return False
        try:
            box.container.reload()
            return box.container.status == "running"
        except Exception:
            return False

    def stop(self) -> None:
        docker_verifier.discard(self)  # queued before the agent's container: it mounts that container's volumes
        self.drop_private_state()
        box, self._box = self._box, None
        if box is not None:
            _reaper.remove(box)

    @property
    def egress_rules(self) -> str | None:
        """With network on: the rules in force in the container's network namespace (:mod:`t1env.sandbox.egress`)."""
        return self._box.egress_rules if self._box is not None else None

    @property
    def limits(self) -> dict[str, bool]:
        """What the engine enforces for every container t1 starts (see :func:`_create_kwargs`)."""
        return {
            "pids": True,
            "memory": True,
            "file_size": True,
            "cpu_time": True,
            "seccomp": True,
            "no_new_privileges": True,
            "user_namespace": False,
            "network_isolated": not self.config.network,
        }

    @property
    def container_id(self) -> str:
        if self._box is None:
            raise SandboxError("sandbox is not started")
        return self._box.id

    @property
    def alive(self) -> bool:
        if self._box is None:
            return False
        return self._state_problem() is None

    def _state_problem(self) -> str | None:
        """None while the container runs, else one line saying what happened to it."""
        if self._dead_reason:
            return self._dead_reason
        assert self._box is not None
        try:
            st = client(self.host).api.inspect_container(self._box.id)["State"]
        except Exception as e:
            if "No such container" in str(e) or "404" in str(e):
                self._dead_reason = f"container {self._box.id[:12]} was removed"
                return self._dead_reason
            return None  # cannot tell; assume it runs
        if st.get("Running") and not st.get("Paused"):
            return None
        why = "was killed by the out-of-memory killer" if st.get("OOMKilled") else f"exited (code {st.get('ExitCode')})"
        if st.get("Paused"):
            why = "is paused"
        self._dead_reason = f"container {self._box.id[:12]} {why}"
        return self._dead_reason

    def _need(self) -> _Box:
        if self._box is None:
            raise SandboxError("sandbox is not started")
        if self._dead_reason:
            raise SandboxError(f"the sandbox is gone: {self._dead_reason}")
        return self._box

    def _gone(self, e: BaseException) -> SandboxError:
        problem = self._state_problem() if self._box is not None else None
        return SandboxError(f"the sandbox is gone: {problem}" if problem else f"docker: {_one_line(e)}")

    def _helper_call(self, req: dict, timeout: float) -> dict | None:
        """The helper's reply, or None when there is no (working) helper and the API must do it."""
        box = self._need()
        if box.helper is None or box.helper.dead:
            return None
        try:
            return box.helper.call(req, timeout)
        except _HelperGone:
            if self._state_problem():
                raise SandboxError(f"the sandbox is gone: {self._dead_reason}") from None
            return None  # the agent killed the helper: go on through the engine

    # -- processes ---------------------------------------------------------------------------
    def shell_argv(self) -> list[str]:
        box = self._need()
        problem = self._state_problem()  # a (re)started shell in a dead container: say why, now
        if problem:
            raise SandboxError(f"the sandbox is gone: {problem}")
        # -H: the CLI talks to this sandbox's engine whatever DOCKER_HOST / DOCKER_CONTEXT say
        return [
            self._cli or _docker_cli(),
            "-H",
            self.host,
            "exec",
            "-it",
            "-w",
            self.config.workdir,
            box.id,
            *SHELL,
        ]

    def open_shell(self, rows: int, cols: int) -> ExecShell | None:
        """The shell on the engine's attached exec socket (:mod:`t1env.sandbox.docker_shell`), for a local engine;
        None (``docker exec -it``, :meth:`shell_argv`) for a remote one or with ``T1_DOCKER_SHELL=cli``."""
        if self.shell_transport not in ("socket", "cli"):
            raise SandboxError(f"T1_DOCKER_SHELL={self.shell_transport!r}: set it to 'socket' (the default) or 'cli'")
        if self.shell_transport == "cli" or not self.host.startswith("unix://"):
            return None
        box = self._need()
        problem = self._state_problem()  # a (re)started shell in a dead container: say why, now
        if problem:
            raise SandboxError(f"the sandbox is gone: {problem}")
        return ExecShell(client(self.host), box.id, list(SHELL), self.config.workdir, rows, cols)

    def spawn_env(self) -> dict[str, str]:
        """The docker CLI runs on the host: it needs the host's engine settings, not the sandbox's env
        (that was set on the container)."""
        keep = (
            "PATH",
            "HOME",
            "DOCKER_HOST",
            "DOCKER_CONTEXT",
            "DOCKER_CONFIG",
            "DOCKER_TLS_VERIFY",
            "DOCKER_CERT_PATH",
            "DOCKER_API_VERSION",
        )
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["TERM"] = self.config.environ().get("TERM", "xterm-256color")
        return env

    def exec(self, argv, timeout, env=None, cwd=None) -> ExecResult:
        t0 = time.monotonic()
        full_env = {**self.config.environ(), **(env or {})}
        rep = self._helper_call(
            {"op": "exec", "argv": list(argv), "env": full_env, "cwd": cwd or self.config.workdir, "timeout": timeout},
            timeout + 30,
        )
        if rep is not None:
            if "error" in rep:
                raise SandboxError(f"exec failed: {rep['msg']}")
            return ExecResult(
                rep["rc"], base64.b64decode(rep["out"]), base64.b64decode(rep["err"]), rep["to"], time.monotonic() - t0
            )
        return self._api_exec(list(argv), timeout, full_env, cwd, t0)

    def _api_exec(self, argv, timeout, env, cwd, t0) -> ExecResult:
        box = self._need()
        wrapped = ["timeout", "-s", "KILL", f"{timeout:g}", *argv]
        try:
            for attempt in (wrapped, argv):
                r = box.container.exec_run(attempt, environment=env, workdir=cwd or self.config.workdir, demux=True)
                out, err = r.output if r.output else (b"", b"")
                out, err = out or b"", err or b""
                missing_timeout = attempt is wrapped and r.exit_code in (126, 127) and b"timeout" in (out + err)
                if not missing_timeout:
                    break
        except Exception as e:
            raise self._gone(e) from None
        code = r.exit_code if r.exit_code is not None else -1
        timed_out = attempt is wrapped and code == 137 and time.monotonic() - t0 >= timeout * 0.95
        return ExecResult(-9 if timed_out else code, out, err, timed_out, time.monotonic() - t0)

    def run_verifier(
        self, runtime: Path, tests: Path, timeout: float, mode: str = "separate", options=None
    ) -> VerifierRun:
        """In a verifier container of its own on the pristine image: see :mod:`t1env.sandbox.docker_verifier`."""
        return docker_verifier.run_verifier(self, runtime, tests, timeout, mode, options)

    def prepare_verifier(self, runtime: Path, tests: Path | None, mode: str = "separate", options=None) -> bool:
        """Start the verifier container while the agent plays: see :mod:`t1env.sandbox.docker_verifier`."""
        return docker_verifier.prepare(self, runtime, tests, mode, options)

    def oom_kills(self) -> int | None:
        """The container's memory cgroup counter, read inside it (cgroup v1, then v2 layout)."""
        texts = []
        for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
            try:
                texts.append(self.get_file(path).decode(errors="replace"))
            except (OSError, SandboxError):
                pass
        return oom_kill_count(texts)

    def foreground_busy(self, shell_pid: int) -> bool:
        r = self.exec(["cat", f"/proc/{shell_pid}/stat"], timeout=5)
        fields = r.stdout.decode(errors="replace").rsplit(")", 1)[-1].split()
        return len(fields) > 5 and fields[2] != fields[5] and fields[5] != "-1"

    # -- files -------------------------------------------------------------------------------
    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        path = _abs(path)
        rep = self._helper_call({"op": "put", "path": path, "data": base64.b64encode(data).decode(), "mode": mode}, 120)
        if rep is not None:
            _raise_for(rep, path)
            return
        self._api_put("/", _context_tar([(path.lstrip("/"), data, mode)]))

    def put_tree(self, src: Path, dest: str) -> None:
        dest = _abs(dest)
        rep = self._helper_call(
            {"op": "untar", "dest": dest, "data": base64.b64encode(_tree_tar(Path(src))).decode()}, 120
        )
        if rep is not None:
            _raise_for(rep, dest)
            return
        self._api_put("/", _tree_tar(Path(src), dest.lstrip("/") + "/"))

    def _api_put(self, where: str, tar: bytes) -> None:
        box = self._need()
        try:
            box.container.put_archive(where, tar)
        except Exception as e:
            raise self._gone(e) from None

    def get_file(self, path: str) -> bytes:
        path = _abs(path)
        rep = self._helper_call({"op": "get", "path": path}, 120)
        if rep is not None:
            _raise_for(rep, path)
            return base64.b64decode(rep["data"])
        box = self._need()
        import docker.errors  # the docker SDK (the docker extra): imported when used

        try:
            stream, stat = box.container.get_archive(path)
            raw = b"".join(stream)
        except docker.errors.NotFound:
            if self._state_problem():
                raise SandboxError(f"the sandbox is gone: {self._dead_reason}") from None
            raise FileNotFoundError(path) from None
        except Exception as e:
            raise self._gone(e) from None
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            member = tar.next()
            if member is None or member.isdir():
                raise IsADirectoryError(path)
            f = tar.extractfile(member)
            if f is None:
                raise FileNotFoundError(path)
            return f.read()

    # -- checks ------------------------------------------------------------------------------
    def missing_programs(self, names: Iterable[str]) -> list[str]:
        """Which of ``names`` are not on PATH in the container (``python3`` is always checked:
        the verifier needs it)."""
        names = list(dict.fromkeys(["python3", *names]))
        script = 'for p in "$@"; do command -v "$p" >/dev/null 2>&1 || echo "$p"; done'
        r = self.exec(["/bin/sh", "-c", script, "sh", *names], timeout=30)
        return r.stdout.decode().split()


def _tree_tar(src: Path, prefix: str = "") -> bytes:
    """A tar of ``src``'s contents (not ``src`` itself, so the destination keeps its own mode),
    owned by root, with modes, mtimes, empty directories and symlinks kept."""

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for child in sorted(src.iterdir()):
            tar.add(str(child), arcname=prefix + child.name, recursive=True, filter=as_root)
    return buf.getvalue()


def _abs(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"{path}: sandbox paths must be absolute")
    return os.path.normpath(path)


def _raise_for(rep: dict, path: str) -> None:
    err = rep.get("error")
    if err is None:
        return
    if err == "ENOENT":
        raise FileNotFoundError(path)
    if err == "EISDIR":
        raise IsADirectoryError(path)
    if err == "EACCES":
        raise PermissionError(path)
    raise SandboxError(f"{path}: {err}: {rep.get('msg', '')}")


def check_image(task: Task, config: SandboxConfig | None = None, docker_host: str | None = None) -> list[str]:
    """Problems that make the task's image unusable (for ``t1env validate``): no python3 (the
    verifier's runtime), or a program the task lists in ``environment.tools`` missing."""
    box = DockerSandbox(config or SandboxConfig.from_task(task), task=task, pool=False, docker_host=docker_host)
    with box:
        missing = box.missing_programs(task.spec.environment.tools)
    out = []
    if "python3" in missing:
        out.append(f"image {box.image} has no python3: the verifier needs it (add it to the Dockerfile)")
    out += [f"image {box.image} lacks `{p}` (listed in environment.tools)" for p in missing if p != "python3"]
    return out


__all__ = [
    "DEFAULT_BASE",
    "DEFAULT_PACKAGES",
    "DockerBuildError",
    "DockerSandbox",
    "build_image",
    "check_image",
    "client",
    "close_pools",
    "configure_pool",
    "default_image",
    "engine_available",
    "engine_is_remote",
    "engine_url",
    "gc",
    "image_for",
    "prewarm",
]

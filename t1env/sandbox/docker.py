"""Docker sandbox: one container per episode, images cached by content, a warm pool of containers.

One sandbox is one container started from the task's image. The agent's shell is an interactive
``bash`` started with ``docker exec -it`` (the pexpect-driven CLI measured faster and as robust as
the SDK's attached socket: see ``bench/docker_latency.py``). Everything else t1 does inside the
container — workdir files, ``setup.sh``, the verifier — goes through a small helper process that
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
* **No network** unless ``environment.network = true`` (``network_mode=none``: loopback only).
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
* The verifier runs in the agent's container, as root, like on every backend: an agent that is
  root in its container can tamper with what runs there after it (the helper process included).
* Images are not pulled from a registry unless the task names one with ``docker_image``; base
  images of Dockerfiles must exist locally or be pullable (``.ci/docker-setup.sh`` makes
  ``debian:bookworm-slim`` without a registry).
"""

from __future__ import annotations

import atexit
import base64
import collections
import fcntl
import hashlib
import io
import json
import os
import re
import select
import shutil
import socket
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable, Mapping

from t1env.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError, VerifierRun
from t1env.task import Task

DEFAULT_BASE = os.environ.get("T1_DOCKER_BASE", "debian:bookworm-slim")
# What the default image has, for tasks with neither a Dockerfile nor a docker_image.
DEFAULT_PACKAGES = (
    "bash coreutils procps psmisc python3 git gcc g++ make libc6-dev ca-certificates curl file patch "
    "diffutils less jq sqlite3 tar gzip bzip2 xz-utils unzip zip bc tmux"
).split()
LABEL = "t1env"
LABEL_OWNER = "t1env.owner"
LABEL_IMAGE = "t1env.image"
LABEL_TASK = "t1env.task"
LABEL_HASH = "t1env.context-hash"
IMAGE_REPO = "t1env"

_ENGINE_HINT = "start it (e.g. `sudo systemctl start docker`, or `.ci/docker-setup.sh`) or use backend='local'"


class DockerBuildError(SandboxError):
    """An image build failed. First line: what failed and at which step; then the log's tail."""


# ---------------------------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------------------------

_client_lock = threading.Lock()
_client = None


def client():
    """The process's docker SDK client. Raises SandboxError (one line) when no engine answers."""
    global _client
    with _client_lock:
        if _client is not None:
            return _client
        try:
            import docker
        except ImportError:
            raise SandboxError("the docker backend needs the docker SDK: pip install 't1[docker]'") from None
        try:
            c = docker.from_env(timeout=120)
            c.ping()
        except Exception as e:
            where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            raise SandboxError(f"Docker engine not reachable at {where} ({_one_line(e)}); {_ENGINE_HINT}") from None
        _client = c
        return c


def engine_available() -> tuple[bool, str]:
    """(True, version) when an engine answers, else (False, the one-line reason)."""
    try:
        return True, client().version().get("Version", "?")
    except SandboxError as e:
        return False, str(e)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def _docker_cli() -> str:
    path = shutil.which("docker")
    if path is None:
        raise SandboxError("the docker CLI is not on PATH (the shell runs through `docker exec`): install docker.io or docker-ce-cli")
    return path


def _owner() -> str:
    """boot id, pid and start time of this process: unique across pid reuse and reboots."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
        start = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        boot, start = "?", "?"
    return f"{socket.gethostname()}:{boot}:{os.getpid()}:{start}"


_OWNER = _owner()


def _owner_alive(owner: str) -> bool:
    """Whether the process an owner label names still runs (unknown hosts count as alive)."""
    try:
        host, boot, pid, start = owner.rsplit(":", 3)
    except ValueError:
        return False
    me_host, me_boot, _, _ = _OWNER.rsplit(":", 3)
    if host != me_host:
        return True  # another machine shares this engine: not ours to judge
    if boot != me_boot:
        return False  # rebooted since
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19] == start
    except (OSError, IndexError):
        return False


# ---------------------------------------------------------------------------------------------
# images: content-hashed builds with a lock per tag
# ---------------------------------------------------------------------------------------------

_build_locks: dict[str, threading.Lock] = {}
_build_locks_guard = threading.Lock()
_resolved: dict[tuple, str] = {}  # (task path, dockerfile hash) -> image tag, per process (oldest first)
_RESOLVED_MAX = 4096


def default_dockerfile(base: str | None = None) -> str:
    pkgs = " ".join(DEFAULT_PACKAGES)
    return (
        f"FROM {base or DEFAULT_BASE}\n"
        "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8\n"
        f"RUN apt-get update && apt-get install -y --no-install-recommends {pkgs} \\\n"
        "    && rm -rf /var/lib/apt/lists/*\n"
        "WORKDIR /app\n"
    )


def _context_tar(files: Iterable[tuple[str, bytes, int]]) -> bytes:
    """A deterministic tar (sorted names, zero mtimes and owners) of (name, data, mode) entries."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data, mode in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _dir_files(root: Path) -> list[tuple[str, bytes, int]]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out.append((p.relative_to(root).as_posix(), p.read_bytes(), 0o755 if os.access(p, os.X_OK) else 0o644))
    return out


_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)


def _from_ids(dockerfile_text: str) -> list[str]:
    """Local ids of the Dockerfile's FROM images (so re-importing a base invalidates the cache)."""
    ids = []
    for name in _FROM.findall(dockerfile_text):
        if "$" in name or name.lower() == "scratch":
            ids.append(name)
            continue
        try:
            ids.append(client().images.get(name).id)
        except Exception:
            ids.append(name)
    return ids


def build_image(
    context: bytes | Path | None,
    dockerfile: str = "Dockerfile",
    repo: str = f"{IMAGE_REPO}/default",
    dockerfile_text: str | None = None,
    what: str | None = None,
    log: Callable[[str], None] | None = None,
    extra_files: Iterable[tuple[str, bytes, int]] = (),
) -> str:
    """Build (or find in the cache) an image; returns its tag ``repo:<hash>``.

    ``context`` is a directory, or None for a context holding only ``dockerfile_text``; ``extra_files``
    (name, bytes, mode) are added to it. The tag's hash covers the context's bytes, the Dockerfile
    and the ids of its FROM images.
    """
    files = (_dir_files(context) if isinstance(context, Path) else []) + list(extra_files)
    if dockerfile_text is not None:
        files = [f for f in files if f[0] != dockerfile] + [(dockerfile, dockerfile_text.encode(), 0o644)]
    text = next((d.decode("utf-8", "replace") for n, d, _ in files if n == dockerfile), None)
    if text is None:
        raise SandboxError(f"{what or repo}: no {dockerfile} in the build context")
    tar = _context_tar(files)
    h = hashlib.sha256(tar + dockerfile.encode() + "\0".join(_from_ids(text)).encode()).hexdigest()
    tag = f"{repo}:{h[:16]}"
    c = client()
    if _image_exists(c, tag):
        return tag
    with _build_locks_guard:
        lock = _build_locks.setdefault(tag, threading.Lock())
    with lock, _file_lock(tag):
        if _image_exists(c, tag):  # someone else built it while we waited
            return tag
        _build(c, tar, dockerfile, tag, h, what or repo, log)
    return tag


def _image_exists(c, tag: str) -> bool:
    import docker.errors

    try:
        c.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


class _file_lock:
    """An exclusive flock on a per-tag file: one build per tag across processes."""

    def __init__(self, tag: str):
        d = Path(tempfile.gettempdir()) / "t1env-docker-locks"
        d.mkdir(exist_ok=True)
        self.path = d / (re.sub(r"[^A-Za-z0-9_.-]", "_", tag) + ".lock")

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _build(c, tar: bytes, dockerfile: str, tag: str, h: str, what: str, log) -> None:
    tail: collections.deque[str] = collections.deque(maxlen=25)
    step = "the first step"
    error = None
    try:
        stream = c.api.build(
            fileobj=io.BytesIO(tar),
            custom_context=True,
            dockerfile=dockerfile,
            tag=tag,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
            labels={LABEL: "1", LABEL_HASH: h},
        )
        for chunk in stream:
            if "stream" in chunk:
                for line in chunk["stream"].splitlines():
                    if line.strip():
                        tail.append(line.rstrip())
                        if line.startswith("Step "):
                            step = line.strip()
                        if log:
                            log(line.rstrip())
            if "error" in chunk:
                error = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                break
    except Exception as e:  # the engine refused the build (bad Dockerfile syntax, missing base, ...)
        error = _one_line(e)
    if error is not None:
        body = "\n".join("    " + t for t in tail)
        raise DockerBuildError(f"docker build of {what} failed at {step}: {_one_line(Exception(error))}\n{body}")


def image_for(task: Task | None, log: Callable[[str], None] | None = None) -> str:
    """The image a task runs in, built if needed: docker_image, else environment/Dockerfile, else the default.

    Resolved once per process and task package state (the path, and the mtimes of environment/'s
    files), so a reset costs no hashing and no engine call; :meth:`DockerSandbox.start` forgets a
    resolution whose image has disappeared.
    """
    key = _resolution_key(task)
    tag = _resolved.get(key)
    if tag is None:
        tag = _resolved[key] = _image_for(task, log)
        while len(_resolved) > _RESOLVED_MAX:  # one entry per task package: bounded for long runs over families
            _resolved.pop(next(iter(_resolved)))
    return tag


def _resolution_key(task: Task | None) -> tuple:
    if task is None:
        return (None,)
    env = task.env_dir
    stamp = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(env.rglob("*")) if p.is_file()) if env.is_dir() else ()
    from t1env.images import MAP_ENV

    image_map = os.environ.get(MAP_ENV, "")
    map_stamp = Path(image_map).stat().st_mtime_ns if image_map and Path(image_map).is_file() else None
    return (str(task.path), task.spec.environment.docker_image, task.spec.environment.dockerfile, stamp, image_map, map_stamp)


def _image_for(task: Task | None, log: Callable[[str], None] | None = None) -> str:
    if task is None:
        return default_image(log)
    from t1env import images

    e = task.spec.environment
    df = task.dockerfile
    mapping = images.load_map()
    if e.docker_image:
        c = client()
        image = mapping.get(e.docker_image, e.docker_image)
        if _image_exists(c, image):
            return image
        if df is None:
            try:
                c.images.pull(image)
                return image
            except Exception as ex:
                mapped = f" (mapped from {e.docker_image!r})" if image != e.docker_image else ""
                raise SandboxError(
                    f"{task.path}: environment.docker_image {image!r}{mapped} is not in the local engine and could not be "
                    f"pulled ({_one_line(ex)}); {images.MAP_HINT}"
                ) from None
    if df is not None:
        rel = df.relative_to(task.env_dir).as_posix()
        text = images.rewrite_from(df.read_text(encoding="utf-8", errors="replace"), mapping)
        c = client()
        for name in images.from_images(text):
            if not _image_exists(c, name):
                raise SandboxError(f"{df}: FROM {name}: not in the local Docker engine; {images.MAP_HINT}")
        extra = ()
        if task.origin is not None:  # imported tasks' builds see the host's package indexes
            text, extra = images.index_layer(text), images.index_files()
        return build_image(task.env_dir, rel, repo=f"{IMAGE_REPO}/task-{task.id}", dockerfile_text=text, what=str(df),
                           log=log, extra_files=extra)
    return default_image(log)


def default_image(log: Callable[[str], None] | None = None) -> str:
    """t1's default image (Debian bookworm + :data:`DEFAULT_PACKAGES`), built once and cached."""
    return build_image(None, "Dockerfile", f"{IMAGE_REPO}/default", default_dockerfile(), "t1's default image", log)


# ---------------------------------------------------------------------------------------------
# the in-container helper: exec and file transfer without an engine round trip each
# ---------------------------------------------------------------------------------------------

# Runs as `python3 -I -S -u -c HELPER` inside the container; one JSON request per line on stdin,
# one JSON reply per line on stdout. Python >= 3.6; stdlib only.
HELPER = r"""
import base64, io, json, os, signal, subprocess, sys, tarfile
inp, out = sys.stdin.buffer, sys.stdout.buffer
b64, unb64 = (lambda b: base64.b64encode(b).decode()), (lambda s: base64.b64decode(s))
def reply(d):
    out.write(json.dumps(d).encode() + b"\n"); out.flush()
def run(r):
    try:
        p = subprocess.Popen(r["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=r["env"], cwd=r.get("cwd"), start_new_session=True)
    except OSError as e:
        return {"rc": 126 if isinstance(e, PermissionError) else 127, "out": "", "err": b64(str(e).encode()), "to": False}
    to = False
    try:
        o, e = p.communicate(timeout=r["timeout"])
    except subprocess.TimeoutExpired:
        to = True
        try: os.killpg(p.pid, signal.SIGKILL)
        except OSError: pass
        try: o, e = p.communicate(timeout=5)
        except subprocess.TimeoutExpired: o, e = b"", b""
    return {"rc": -9 if to else p.returncode, "out": b64(o or b""), "err": b64(e or b""), "to": to}
def put(r):
    path = r["path"]; os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), ".%s.t1tmp" % os.path.basename(path))
    with open(tmp, "wb") as f: f.write(unb64(r["data"]))
    os.chmod(tmp, r["mode"]); os.replace(tmp, path); return {}
def untar(r):
    os.makedirs(r["dest"], exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(unb64(r["data"]))) as t:
        kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        t.extractall(r["dest"], **kw)
    return {}
def get(r):
    with open(r["path"], "rb") as f: return {"data": b64(f.read())}
OPS = {"ping": lambda r: {"pid": os.getpid()}, "exec": run, "put": put, "untar": untar, "get": get}
for line in inp:
    try:
        r = json.loads(line.decode()); reply(OPS[r["op"]](r))
    except FileNotFoundError as e: reply({"error": "ENOENT", "msg": str(e)})
    except IsADirectoryError as e: reply({"error": "EISDIR", "msg": str(e)})
    except PermissionError as e: reply({"error": "EACCES", "msg": str(e)})
    except Exception as e: reply({"error": type(e).__name__, "msg": str(e)})
"""


class _HelperGone(Exception):
    pass


class _Helper:
    """One helper process in a container, spoken to over the exec's hijacked socket."""

    def __init__(self, c, container_id: str, env: Mapping[str, str]):
        ex = c.api.exec_create(container_id, ["python3", "-I", "-S", "-u", "-c", HELPER], stdin=True, stdout=True, stderr=True, environment=dict(env))
        self.exec_id = ex["Id"]
        sock = c.api.exec_start(self.exec_id, socket=True)
        self._holder = sock  # keep the SocketIO wrapper alive (closing it closes the socket)
        self.sock: socket.socket = getattr(sock, "_sock", sock)
        self.sock.setblocking(True)
        self.lock = threading.Lock()
        self._buf = bytearray()  # demultiplexed stdout not yet consumed
        self._raw = bytearray()  # raw stream bytes not yet demultiplexed
        self._stderr = bytearray()
        self.dead = False
        self.pid = self.call({"op": "ping"}, timeout=20)["pid"]

    def call(self, req: dict, timeout: float) -> dict:
        with self.lock:
            if self.dead:
                raise _HelperGone("helper is gone")
            try:
                self.sock.sendall(json.dumps(req).encode() + b"\n")
                return json.loads(self._readline(time.monotonic() + timeout))
            except (OSError, ValueError, _HelperGone) as e:
                self.dead = True
                raise _HelperGone(str(e) or type(e).__name__) from None

    def _readline(self, deadline: float) -> bytes:
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[: i + 1]
                return line
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise _HelperGone("helper did not answer in time")
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                err = self._stderr.decode("utf-8", "replace").strip()
                raise _HelperGone(err.splitlines()[-1] if err else "helper exited")
            self._raw += chunk
            self._demux()

    def _demux(self) -> None:
        # Docker's stream framing: 1 byte stream id, 3 zero bytes, 4 bytes big-endian length.
        raw = self._raw
        while len(raw) >= 8:
            n = int.from_bytes(raw[4:8], "big")
            if len(raw) < 8 + n:
                break
            (self._buf if raw[0] == 1 else self._stderr).extend(raw[8 : 8 + n])
            del raw[: 8 + n]
        if len(self._stderr) > 65536:
            del self._stderr[:-4096]

    def close(self) -> None:
        self.dead = True
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self._holder.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------------------------
# containers and the warm pool
# ---------------------------------------------------------------------------------------------


# Docker's default capabilities that no task needs and an agent could misuse (raw packets for
# spoofing on the bridge, device nodes, audit records, file capabilities).
CAP_DROP = ["NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP"]


def _work_mounts(config: SandboxConfig) -> list:
    """Anonymous volumes for the folders an agent's work lives in (the workdir, /tmp, /root): the
    verifier's container mounts them from the agent's (``volumes_from``) and sees the work product
    on an otherwise pristine image. They are removed with the container (``remove(v=True)``)."""
    from docker.types import Mount

    targets = dict.fromkeys([config.workdir, "/tmp", "/root"])
    return [Mount(t, None, type="volume") for t in targets]


def _create_kwargs(image: str, config: SandboxConfig, task_id: str | None) -> dict:
    from docker.types import Ulimit

    fsize = config.file_size_mb * 1024 * 1024
    kw = dict(
        image=image,
        command=["/bin/sh", "-c", "while :; do sleep 3600; done"],
        init=True,
        detach=True,
        tty=False,
        stdin_open=False,
        working_dir=config.workdir,
        environment=config.environ(),
        hostname="t1",
        network_mode="bridge" if config.network else "none",
        mem_limit=f"{config.memory_mb}m",
        memswap_limit=f"{config.memory_mb}m",
        nano_cpus=int(config.cpus * 1e9),
        pids_limit=config.pids,
        ulimits=[Ulimit(name="fsize", soft=fsize, hard=fsize), Ulimit(name="cpu", soft=config.cpu_seconds, hard=config.cpu_seconds)],
        security_opt=["no-new-privileges"],
        cap_drop=list(CAP_DROP),
        mounts=_work_mounts(config),
        log_config={"type": "none"},
        labels={LABEL: "1", LABEL_OWNER: _OWNER, LABEL_IMAGE: image, LABEL_TASK: task_id or ""},
    )
    runtime = os.environ.get("T1_DOCKER_RUNTIME")
    if runtime:
        kw["runtime"] = runtime
    return kw


class _Box:
    """A started container and (when the image has python3) its helper."""

    def __init__(self, container, helper: _Helper | None):
        self.container = container
        self.helper = helper
        self.id: str = container.id
        self.created = time.monotonic()


def _launch(image: str, config: SandboxConfig, task_id: str | None) -> _Box:
    c = client()
    try:
        ctr = c.containers.run(**_create_kwargs(image, config, task_id))
    except Exception as e:
        raise SandboxError(f"could not start a container from {image}: {_one_line(e)}") from None
    _live.add(ctr.id)
    try:
        helper = _Helper(c, ctr.id, config.environ())
    except Exception:
        helper = None  # no python3 in the image (or it is too old): use the engine API
    return _Box(ctr, helper)


class _Pool:
    """Ready containers for one (image, config); a background thread keeps ``size`` of them."""

    def __init__(self, image: str, config: SandboxConfig, task_id: str | None, size: int):
        self.image, self.config, self.task_id, self.size = image, config, task_id, size
        self.ready: collections.deque[_Box] = collections.deque()
        self.cond = threading.Condition()
        self.filling = 0
        self.closed = False
        self.error: str | None = None
        self.thread = threading.Thread(target=self._fill_loop, name=f"t1-docker-pool-{image}", daemon=True)
        self.thread.start()

    def _fill_loop(self) -> None:
        failures = 0
        while True:
            with self.cond:
                while not self.closed and len(self.ready) + self.filling >= self.size:
                    self.cond.wait()
                if self.closed:
                    return
                self.filling += 1
            box = None
            try:
                box = _launch(self.image, self.config, self.task_id)
                failures = 0
            except Exception as e:
                self.error = _one_line(e)
                failures += 1
            with self.cond:
                self.filling -= 1
                if box is not None:
                    if self.closed:
                        _reaper.remove(box)
                    else:
                        self.ready.append(box)
                self.cond.notify_all()
            if failures:
                time.sleep(min(30.0, 0.5 * 2**failures))  # the engine is struggling: back off

    def take(self, wait: float) -> _Box | None:
        """A ready container, waiting up to ``wait`` s for one being made; None if there is none."""
        deadline = time.monotonic() + wait
        with self.cond:
            while not self.ready and self.filling and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            box = self.ready.popleft() if self.ready else None
            self.cond.notify_all()
        return box

    def close(self, wait: float = 60) -> None:
        """Remove the ready containers; wait for one being made (its filler then removes it)."""
        deadline = time.monotonic() + wait
        with self.cond:
            self.closed = True
            self.cond.notify_all()
            while self.filling and time.monotonic() < deadline and self.thread.is_alive():
                self.cond.wait(0.1)
            boxes = list(self.ready)
            self.ready.clear()
        for b in boxes:
            _reaper.remove(b)


_pools: collections.OrderedDict[tuple, _Pool] = collections.OrderedDict()  # least recently used first
_pools_lock = threading.Lock()
_pool_size = int(os.environ.get("T1_DOCKER_POOL_SIZE", "1"))
# At most this many (image, limits) pools keep warm containers: a run over many task images (e.g. every
# family instance builds its own) would otherwise keep one container and one thread per image forever.
MAX_POOLS = int(os.environ.get("T1_DOCKER_MAX_POOLS", "8"))
_live: set[str] = set()  # ids of containers this process created and has not removed


def configure_pool(size: int) -> None:
    """Set how many warm containers to keep per (image, limits); 0 turns the pool off."""
    global _pool_size
    if size < 0:
        raise ValueError("pool size must be >= 0")
    _pool_size = size
    with _pools_lock:
        for p in _pools.values():
            with p.cond:
                p.size = size
                p.cond.notify_all()


def _pool_key(image: str, config: SandboxConfig) -> tuple:
    return (image, config.workdir, config.network, config.memory_mb, config.pids, config.file_size_mb, config.cpu_seconds, config.cpus, tuple(sorted(config.environ().items())))


def _pool(image: str, config: SandboxConfig, task_id: str | None) -> _Pool | None:
    if _pool_size <= 0:
        return None
    key = _pool_key(image, config)
    evicted = []
    with _pools_lock:
        p = _pools.get(key)
        if p is None or p.closed:
            p = _pools[key] = _Pool(image, config, task_id, _pool_size)
        _pools.move_to_end(key)
        while len(_pools) > max(1, MAX_POOLS):
            evicted.append(_pools.popitem(last=False)[1])
    for old in evicted:  # its ready containers go to the reaper; its filler thread ends
        old.close(wait=0)
    return p


def prewarm(task: Task | None, config: SandboxConfig | None = None, log=None) -> str:
    """Build the task's image and start filling its pool now (so even the first reset is warm)."""
    config = config or (SandboxConfig.from_task(task) if task is not None else SandboxConfig())
    image = image_for(task, log)
    _pool(image, config, task.id if task else None)
    return image


def close_pools() -> int:
    """Remove every idle pool container of this process (pools refill if used again). Returns how many."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    n = 0
    for p in pools:
        n += len(p.ready)
        p.close()
    _reaper.drain()
    return n


class _Reaper:
    """Removes containers in a background thread, so stop() does not wait for the engine."""

    def __init__(self):
        self.q: collections.deque[_Box] = collections.deque()
        self.cond = threading.Condition()
        self.busy = 0
        self.thread: threading.Thread | None = None

    def remove(self, box: _Box) -> None:
        if box.helper is not None:
            box.helper.close()
        if _exiting:  # no new threads at interpreter exit: remove it here and now
            _remove_container(box.id)
            return
        with self.cond:
            self.q.append(box)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="t1-docker-reaper", daemon=True)
                try:
                    self.thread.start()
                except RuntimeError:  # interpreter shutting down
                    self.thread = None
                    self.q.remove(box)
                    _remove_container(box.id)
                    return
            self.cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self.cond:
                if not self.q:
                    self.cond.wait(5)
                    if not self.q:
                        self.thread = None
                        return
                box = self.q.popleft()
                self.busy += 1
            try:
                _remove_container(box.id)
            finally:
                with self.cond:
                    self.busy -= 1
                    self.cond.notify_all()

    def drain(self, timeout: float = 60) -> None:
        """Wait until every queued removal is done."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while (self.q or self.busy) and time.monotonic() < deadline:
                if self.thread is None or not self.thread.is_alive():  # e.g. at interpreter exit
                    break
                self.cond.wait(0.1)
            leftover = list(self.q)
            self.q.clear()
        for box in leftover:
            _remove_container(box.id)


_reaper = _Reaper()


def _remove_container(cid: str, volumes: bool = True) -> None:
    """Remove a container (and its anonymous volumes); best effort: gc() finds a leftover by its label."""
    try:
        client().api.remove_container(cid, force=True, v=volumes)
    except Exception:
        pass
    _live.discard(cid)


_exiting = False


def _at_exit() -> None:
    global _exiting
    _exiting = True
    try:
        close_pools()
        _reaper.drain()
        for cid in list(_live):
            _remove_container(cid)
    except Exception:
        pass


atexit.register(_at_exit)


def gc(all: bool = False) -> int:
    """Remove t1 containers whose owner process is gone (``all=True``: every t1 container of this
    engine, e.g. after a crash of many workers). Returns how many were removed."""
    c = client()
    n = 0
    for info in c.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        owner = (info.get("Labels") or {}).get(LABEL_OWNER, "")
        if not all and (owner == _OWNER or _owner_alive(owner)):
            continue
        try:
            c.api.remove_container(info["Id"], force=True, v=True)
            n += 1
        except Exception:
            pass
    return n


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
    """

    name = "docker"

    def __init__(self, config: SandboxConfig | None = None, task: Task | None = None, image: str | None = None, pool: bool = True):
        super().__init__(config or SandboxConfig())
        self.task = task
        self.image = image
        self.use_pool = pool
        self._box: _Box | None = None
        self._dead_reason: str | None = None
        self.warm = False  # whether the container came from the pool
        self._cli: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._box is not None:
            raise SandboxError("sandbox already started; call stop() first")
        self._cli = _docker_cli()
        if self.image is None:
            self.image = image_for(self.task)
        task_id = self.task.id if self.task else None
        pool = _pool(self.image, self.config, task_id) if self.use_pool else None
        box = None
        if pool is not None:
            box = pool.take(wait=5.0)
            while box is not None and not self._usable(box):
                _reaper.remove(box)
                box = pool.take(wait=5.0)
        self.warm = box is not None
        if box is None:
            try:
                box = _launch(self.image, self.config, task_id)
            except SandboxError:
                if self.task is None or not _resolved.pop(_resolution_key(self.task), None):
                    raise
                self.image = image_for(self.task)  # the cached image was removed: resolve (build) again
                box = _launch(self.image, self.config, task_id)
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
        box, self._box = self._box, None
        if box is not None:
            _reaper.remove(box)

    @property
    def limits(self) -> dict[str, bool]:
        """What the engine enforces for every container t1 starts (see :func:`_create_kwargs`)."""
        return {"pids": True, "memory": True, "file_size": True, "cpu_time": True, "seccomp": True,
                "no_new_privileges": True, "user_namespace": False, "network_isolated": not self.config.network}

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
            st = client().api.inspect_container(self._box.id)["State"]
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
        return [self._cli or _docker_cli(), "exec", "-it", "-w", self.config.workdir, box.id, "bash", "--noprofile", "--norc", "-i"]

    def spawn_env(self) -> dict[str, str]:
        """The docker CLI runs on the host: it needs the host's engine settings, not the sandbox's env
        (that was set on the container)."""
        keep = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["TERM"] = self.config.environ().get("TERM", "xterm-256color")
        return env

    def exec(self, argv, timeout, env=None, cwd=None) -> ExecResult:
        t0 = time.monotonic()
        full_env = {**self.config.environ(), **(env or {})}
        rep = self._helper_call({"op": "exec", "argv": list(argv), "env": full_env, "cwd": cwd or self.config.workdir, "timeout": timeout}, timeout + 30)
        if rep is not None:
            if "error" in rep:
                raise SandboxError(f"exec failed: {rep['msg']}")
            return ExecResult(rep["rc"], base64.b64decode(rep["out"]), base64.b64decode(rep["err"]), rep["to"], time.monotonic() - t0)
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

    def run_verifier(self, runtime: Path, tests: Path, timeout: float, mode: str = "separate", options=None) -> VerifierRun:
        """In a verifier container of its own on the pristine image: see :mod:`t1env.sandbox.docker_verifier`."""
        from t1env.sandbox.docker_verifier import run_verifier

        return run_verifier(self, runtime, tests, timeout, mode, options)

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
        rep = self._helper_call({"op": "untar", "dest": dest, "data": base64.b64encode(_tree_tar(Path(src))).decode()}, 120)
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
        import docker.errors

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


def check_image(task: Task, config: SandboxConfig | None = None) -> list[str]:
    """Problems that make the task's image unusable (for ``t1env validate``): no python3 (the
    verifier's runtime), or a program the task lists in ``environment.tools`` missing."""
    box = DockerSandbox(config or SandboxConfig.from_task(task), task=task, pool=False)
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
    "gc",
    "image_for",
    "prewarm",
]

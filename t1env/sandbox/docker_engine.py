"""The Docker engine: the client, labels and owner marks every t1 container carries (see :mod:`t1env.sandbox.docker`)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path

from t1env.sandbox.base import SandboxError

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
_clients: dict[str, object] = {}  # engine URL -> docker SDK client
DEFAULT_HOST = "unix:///var/run/docker.sock"
REMOTE_ENV = "T1_DOCKER_REMOTE"  # "1": treat the engine as remote (no bind mounts); "0": as local


def engine_url(host: str | None = None) -> str:
    """The engine a sandbox talks to: ``host`` if given, else ``$DOCKER_HOST``, else the local socket.
    Resolved once per sandbox, so a later change of ``DOCKER_HOST`` does not move its containers."""
    url = (host or os.environ.get("DOCKER_HOST") or DEFAULT_HOST).strip()
    if "://" not in url:
        if url.startswith("/"):
            url = "unix://" + url
        else:
            raise SandboxError(
                f"docker_host {url!r}: give an engine URL (unix:///path, tcp://host:port or ssh://user@host)"
            )
    return url


def engine_is_remote(host: str | None = None) -> bool:
    """Whether the engine may not share this machine's filesystem, so host folders cannot be
    bind-mounted into its containers: ``tcp://``, ``ssh://``, ``http(s)://`` engines are remote, a
    ``unix://`` (or ``npipe://``) socket is local. ``T1_DOCKER_REMOTE=1`` or ``0`` overrides (e.g. ``0``
    for a tcp engine on this machine, ``1`` for a socket forwarded from another one)."""
    forced = os.environ.get(REMOTE_ENV, "").strip().lower()
    if forced in ("1", "true", "yes"):
        return True
    if forced in ("0", "false", "no"):
        return False
    return engine_url(host).split("://", 1)[0].lower() not in ("unix", "npipe")


def client(host: str | None = None):
    """The process's docker SDK client for an engine (see :func:`engine_url`). Raises SandboxError
    (one line) when no engine answers there."""
    url = engine_url(host)
    with _client_lock:
        c = _clients.get(url)
        if c is not None:
            return c
        try:
            import docker  # the docker SDK (the docker extra): imported when a client is made
        except ImportError:
            raise SandboxError("the docker backend needs the docker SDK: pip install 't1[docker]'") from None
        try:
            # from_env keeps DOCKER_TLS_VERIFY / DOCKER_CERT_PATH; ssh:// goes through the ssh binary
            # unless paramiko is installed.
            ssh_cli = url.startswith("ssh://") and not _has_paramiko()
            c = docker.from_env(timeout=120, environment={**os.environ, "DOCKER_HOST": url}, use_ssh_client=ssh_cli)
            c.ping()
        except Exception as e:
            raise SandboxError(f"Docker engine not reachable at {url} ({_one_line(e)}); {_ENGINE_HINT}") from None
        _clients[url] = c
        return c


def _has_paramiko() -> bool:
    try:
        import paramiko  # noqa: F401
    except ImportError:
        return False
    return True


def engine_available(host: str | None = None) -> tuple[bool, str]:
    """(True, version) when an engine answers, else (False, the one-line reason)."""
    try:
        return True, client(host).version().get("Version", "?")
    except SandboxError as e:
        return False, str(e)


def engine_ready(image: str, host: str | None = None) -> tuple[bool, str]:
    """(True, "") when an engine answers and has ``image`` locally, else (False, the one-line reason)."""
    up, why = engine_available(host)
    if not up:
        return False, f"no Docker engine: {why}"
    try:
        client(host).images.get(image)
    except Exception:
        return False, f"base image {image} missing: run .ci/docker-setup.sh"
    return True, ""


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def _docker_cli() -> str:
    path = shutil.which("docker")
    if path is None:
        raise SandboxError(
            "the docker CLI is not on PATH (the shell runs through `docker exec`): install docker.io or docker-ce-cli"
        )
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

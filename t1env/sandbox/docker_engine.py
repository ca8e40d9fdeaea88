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


def engine_ready(image: str) -> tuple[bool, str]:
    """(True, "") when an engine answers and has ``image`` locally, else (False, the one-line reason)."""
    up, why = engine_available()
    if not up:
        return False, f"no Docker engine: {why}"
    try:
        client().images.get(image)
    except Exception:
        return False, f"base image {image} missing: run .ci/docker-setup.sh"
    return True, ""


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


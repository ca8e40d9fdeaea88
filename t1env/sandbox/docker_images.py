"""Docker images for :mod:`t1env.sandbox.docker`: content-hashed builds (one lock per tag) and the images a task uses.

An imported task's image is its Dockerfile (or ``docker_image``) with every public base resolved
through the image map, else the engine, else t1's built stand-in (:func:`t1env.images.resolve_image`).
When its tests need Python packages that upstream's test script installs (``Origin.test_deps``),
:func:`image_for` also builds the **verifier's image**: the task's image plus those packages, one layer
installed through the host's package indexes (:func:`t1env.images.verifier_dockerfile`), cached by
content hash like every build. Only the verifier container runs on it (:func:`verifier_image`): the
agent's container keeps the task's own image, as upstream, where the packages arrive only after the
agent is done; and no package is installed at verification, where there is no network.

:func:`build_bases` builds the local stand-ins of the common Terminal-Bench and Harbor base images
(``t1env images build-bases``; what they are: :mod:`t1env.images`, which holds the pure-text side).
"""

from __future__ import annotations

import collections
import fcntl
import hashlib
import io
import os
import re
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterable

from t1env import images
from t1env.sandbox.base import SandboxError
from t1env.sandbox.docker_engine import (
    DEFAULT_BASE,
    DEFAULT_PACKAGES,
    IMAGE_REPO,
    LABEL,
    LABEL_HASH,
    DockerBuildError,
    _one_line,
    client,
    engine_url,
)
from t1env.task import Task

_build_locks: dict[str, threading.Lock] = {}
_build_locks_guard = threading.Lock()
_resolved: dict[tuple, str] = {}  # (task path, dockerfile hash) -> image tag, per process (oldest first)
_RESOLVED_MAX = 4096
_verifier_images: dict[tuple, str] = {}  # (engine, task image, requirements) -> the verifier's image tag


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


def _from_ids(dockerfile_text: str, host: str | None = None) -> list[str]:
    """Local ids of the Dockerfile's FROM images (so re-importing a base invalidates the cache)."""
    ids = []
    for name in _FROM.findall(dockerfile_text):
        if "$" in name or name.lower() == "scratch":
            ids.append(name)
            continue
        try:
            ids.append(client(host).images.get(name).id)
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
    host: str | None = None,
) -> str:
    """Build (or find in the cache) an image; returns its tag ``repo:<hash>``.

    ``context`` is a directory, or None for a context holding only ``dockerfile_text``; ``extra_files``
    (name, bytes, mode) are added to it. The tag's hash covers the context's bytes, the Dockerfile
    and the ids of its FROM images. ``host``: the engine (see :func:`~t1env.sandbox.docker_engine.engine_url`);
    the context is uploaded to it, so a remote engine needs nothing on its own disk.
    """
    files = (_dir_files(context) if isinstance(context, Path) else []) + list(extra_files)
    if dockerfile_text is not None:
        files = [f for f in files if f[0] != dockerfile] + [(dockerfile, dockerfile_text.encode(), 0o644)]
    text = next((d.decode("utf-8", "replace") for n, d, _ in files if n == dockerfile), None)
    if text is None:
        raise SandboxError(f"{what or repo}: no {dockerfile} in the build context")
    tar = _context_tar(files)
    h = hashlib.sha256(tar + dockerfile.encode() + "\0".join(_from_ids(text, host)).encode()).hexdigest()
    tag = f"{repo}:{h[:16]}"
    c = client(host)
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
    import docker.errors  # the docker SDK (the docker extra): imported when used

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


def image_for(task: Task | None, log: Callable[[str], None] | None = None, host: str | None = None) -> str:
    """The image a task runs in, built if needed: docker_image, else environment/Dockerfile, else the default.

    Resolved once per process and task package state (the path, and the mtimes of environment/'s
    files), so a reset costs no hashing and no engine call; :meth:`DockerSandbox.start` forgets a
    resolution whose image has disappeared.
    """
    key = _resolution_key(task, host)
    tag = _resolved.get(key)
    if tag is None:
        tag = _resolved[key] = _image_for(task, log, host)
        while len(_resolved) > _RESOLVED_MAX:  # one entry per task package: bounded for long runs over families
            _resolved.pop(next(iter(_resolved)))
    return tag


def _resolution_key(task: Task | None, host: str | None = None) -> tuple:
    url = engine_url(host)  # an image resolved on one engine says nothing about another
    if task is None:
        return (url, None)
    env = task.env_dir
    stamp = (
        tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(env.rglob("*")) if p.is_file())
        if env.is_dir()
        else ()
    )
    image_map = os.environ.get(images.MAP_ENV, "")
    map_stamp = Path(image_map).stat().st_mtime_ns if image_map and Path(image_map).is_file() else None
    return (
        url,
        str(task.path),
        task.spec.environment.docker_image,
        task.spec.environment.dockerfile,
        stamp,
        image_map,
        map_stamp,
    )


def _image_for(task: Task | None, log: Callable[[str], None] | None = None, host: str | None = None) -> str:
    if task is None:
        return default_image(log, host)
    tag = _task_image(task, log, host)
    if test_requirements_of(task):
        verifier_image(task, tag, log, host)  # built now, with the task's image: never at verification
    return tag


def _task_image(task: Task, log: Callable[[str], None] | None = None, host: str | None = None) -> str:
    e = task.spec.environment
    df = task.dockerfile
    mapping = images.load_map()
    c = client(host)

    def exists(name: str) -> bool:
        return _image_exists(c, name)

    if e.docker_image:
        image = images.resolve_image(e.docker_image, mapping, exists)
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
                    f"pulled ({_one_line(ex)}); {images.missing_hint(e.docker_image)}"
                ) from None
    if df is not None:
        rel = df.relative_to(task.env_dir).as_posix()
        original = df.read_text(encoding="utf-8", errors="replace")
        text = images.rewrite_from(original, mapping, exists)
        for name in images.from_images(text):
            if not exists(name):
                raise SandboxError(f"{df}: FROM {name}: not in the local Docker engine; {images.missing_hint(name)}")
        extra = ()
        if task.origin is not None:  # imported tasks' builds see the host's package indexes
            text, extra = images.index_layer(text), images.index_files()
        return build_image(
            task.env_dir,
            rel,
            repo=f"{IMAGE_REPO}/task-{task.id}",
            dockerfile_text=text,
            what=str(df),
            log=log,
            extra_files=extra,
            host=host,
        )
    return default_image(log, host)


def test_requirements_of(task: Task | None) -> tuple[str, ...]:
    """The Python packages an imported task's tests need installed (every step's, for a multi-step task)."""
    if task is None or task.origin is None:
        return ()
    out: list[str] = list(task.origin.test_deps)
    for step in task.origin.steps:
        out += [r for r in step.origin.test_deps if r not in out]
    return tuple(out)


def verifier_image(
    task: Task | None, image: str, log: Callable[[str], None] | None = None, host: str | None = None
) -> str:
    """The image the verifier container runs on: ``image`` (the task's) itself, or, when the task's tests
    need packages (:func:`test_requirements_of`), ``image`` plus those packages (built once, by content).

    :func:`image_for` builds it together with the task's image, so at verification this is a lookup.
    """
    reqs = test_requirements_of(task)
    if not reqs:
        return image
    key = (engine_url(host), image, reqs)
    tag = _verifier_images.get(key)
    if tag is None:
        source = task.origin.test_deps_source or task.path
        what = f"the verifier image of {task.path} (installs {', '.join(reqs)}, from {source})"
        text = images.verifier_dockerfile(image, reqs)
        tag = build_image(
            None,
            "Dockerfile",
            f"{IMAGE_REPO}/verifier-{task.id}",
            text,
            what,
            log,
            extra_files=images.index_files(),
            host=host,
        )
        _verifier_images[key] = tag
    return tag


def default_image(log: Callable[[str], None] | None = None, host: str | None = None) -> str:
    """t1's default image (Debian bookworm + :data:`DEFAULT_PACKAGES`), built once and cached."""
    return build_image(
        None, "Dockerfile", f"{IMAGE_REPO}/default", default_dockerfile(), "t1's default image", log, host=host
    )


def build_bases(names: dict[str, str] | None = None, base: str = images.BASE_FROM, log=None) -> dict[str, str]:
    """Build each local stand-in once and tag it; returns the map entries {public: local}."""
    import docker.errors  # the docker SDK: an optional extra, imported when a build needs it

    names = dict(names or images.TB_BASES)
    c = client()
    built: dict[str, str] = {}
    for public, local in names.items():
        if local not in built.values():
            tag = build_image(
                None, "Dockerfile", "t1env/tb-base", images.base_dockerfile(base), f"stand-in for {public}", log
            )
            repo, _, ver = local.rpartition(":")
            try:
                c.images.get(tag).tag(repo, ver)
            except docker.errors.APIError as e:
                raise RuntimeError(f"could not tag {tag} as {local}: {e}") from None
        built[public] = local
    return built

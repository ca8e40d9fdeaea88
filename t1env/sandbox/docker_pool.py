"""Containers: creation, the warm pool, the reaper, clean-up at exit and ``gc`` (see :mod:`t1env.sandbox.docker`)."""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import time

from t1env.sandbox import egress
from t1env.sandbox.base import SandboxConfig, SandboxError
from t1env.sandbox.docker_engine import (
    _OWNER,
    LABEL,
    LABEL_IMAGE,
    LABEL_OWNER,
    LABEL_TASK,
    _one_line,
    _owner_alive,
    client,
    engine_url,
)
from t1env.sandbox.docker_helper import _Helper
from t1env.sandbox.docker_images import image_for
from t1env.task import Task

log = logging.getLogger(__name__)

# Docker's default capabilities that no task needs and an agent could misuse (raw packets for
# spoofing on the bridge, device nodes, audit records, file capabilities).
CAP_DROP = ["NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP"]


def _work_mounts(config: SandboxConfig) -> list:
    """Anonymous volumes for the folders an agent's work lives in (the workdir, /tmp, /root): the
    verifier's container mounts them from the agent's (``volumes_from``) and sees the work product
    on an otherwise pristine image. They are removed with the container (``remove(v=True)``)."""
    from docker.types import Mount  # the docker SDK (the docker extra): imported when used

    targets = dict.fromkeys([config.workdir, "/tmp", "/root"])
    return [Mount(t, None, type="volume") for t in targets]


def _create_kwargs(image: str, config: SandboxConfig, task_id: str | None) -> dict:
    from docker.types import Ulimit  # the docker SDK (the docker extra): imported when used

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
        ulimits=[
            Ulimit(name="fsize", soft=fsize, hard=fsize),
            Ulimit(name="cpu", soft=config.cpu_seconds, hard=config.cpu_seconds),
        ],
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
    """A started container and (when the image has python3) its helper, on the engine ``host`` (a URL)."""

    def __init__(self, container, helper: _Helper | None, host: str | None = None):
        self.container = container
        self.helper = helper
        self.id: str = container.id
        self.host = engine_url(host)
        self.created = time.monotonic()
        self.egress_rules: str | None = None  # with network on: the rules in force in its network namespace


def _launch(image: str, config: SandboxConfig, task_id: str | None, host: str | None = None) -> _Box:
    c = client(host)
    try:
        ctr = c.containers.run(**_create_kwargs(image, config, task_id))
    except Exception as e:
        raise SandboxError(f"could not start a container from {image}: {_one_line(e)}") from None
    _live[ctr.id] = engine_url(host)
    rules = None
    if config.network:  # the egress filter goes in before anything runs in the container (never open)
        try:
            rules = egress.install_docker(c, ctr, config.network_allow, host)
        except BaseException:
            _remove_container(ctr.id, host=host)
            raise
    try:
        helper = _Helper(c, ctr.id, config.environ())
    except Exception:
        helper = None  # no python3 in the image (or it is too old): use the engine API
    box = _Box(ctr, helper, host)
    box.egress_rules = rules
    return box


class _Pool:
    """Ready containers for one (image, config, engine); a background thread keeps ``size`` of them."""

    def __init__(self, image: str, config: SandboxConfig, task_id: str | None, size: int, host: str | None = None):
        self.image, self.config, self.task_id, self.size = image, config, task_id, size
        self.host = engine_url(host)
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
                box = _launch(self.image, self.config, self.task_id, self.host)
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
_live: dict[str, str] = {}  # id -> engine URL of the containers this process created and has not removed


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


def _pool_key(image: str, config: SandboxConfig, host: str | None = None) -> tuple:
    return (
        engine_url(host),
        image,
        config.workdir,
        config.network,
        config.network_allow,
        config.memory_mb,
        config.pids,
        config.file_size_mb,
        config.cpu_seconds,
        config.cpus,
        tuple(sorted(config.environ().items())),
    )


def _pool(image: str, config: SandboxConfig, task_id: str | None, host: str | None = None) -> _Pool | None:
    if _pool_size <= 0:
        return None
    key = _pool_key(image, config, host)
    evicted = []
    with _pools_lock:
        p = _pools.get(key)
        if p is None or p.closed:
            p = _pools[key] = _Pool(image, config, task_id, _pool_size, host)
        _pools.move_to_end(key)
        while len(_pools) > max(1, MAX_POOLS):
            evicted.append(_pools.popitem(last=False)[1])
    for old in evicted:  # its ready containers go to the reaper; its filler thread ends
        old.close(wait=0)
    return p


def prewarm(task: Task | None, config: SandboxConfig | None = None, log=None, host: str | None = None) -> str:
    """Build the task's image and start filling its pool now (so even the first reset is warm)."""
    config = config or (SandboxConfig.from_task(task) if task is not None else SandboxConfig())
    image = image_for(task, log, host)
    _pool(image, config, task.id if task else None, host)
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
    """Removes containers in a background thread, so stop() does not wait for the engine. Removals run in the
    order they were asked for: a prepared verifier's container (which mounts the agent's volumes) goes before
    the agent's container, whose removal then takes those volumes with it."""

    def __init__(self):
        self.q: collections.deque[tuple[str, str | None, bool, tuple[str, ...]]] = collections.deque()
        self.cond = threading.Condition()
        self.busy = 0
        self.thread: threading.Thread | None = None

    def remove(self, box: _Box) -> None:
        if box.helper is not None:
            box.helper.close()
        self.remove_id(box.id, box.host)

    def remove_id(self, cid: str, host: str | None, volumes: bool = True, named: tuple[str, ...] = ()) -> None:
        """Remove container ``cid`` of engine ``host`` (with its anonymous volumes when ``volumes``), then the
        named volumes ``named``."""
        item = (cid, host, volumes, tuple(named))
        if _exiting:  # no new threads at interpreter exit: remove it here and now
            _remove_item(item)
            return
        with self.cond:
            self.q.append(item)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="t1-docker-reaper", daemon=True)
                try:
                    self.thread.start()
                except RuntimeError:  # interpreter shutting down
                    self.thread = None
                    self.q.remove(item)
                    _remove_item(item)
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
                item = self.q.popleft()
                self.busy += 1
            try:
                _remove_item(item)
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
        for item in leftover:
            _remove_item(item)


def _remove_item(item: tuple[str, str | None, bool, tuple[str, ...]]) -> None:
    cid, host, volumes, named = item
    _remove_container(cid, volumes=volumes, host=host)
    for name in named:
        try:
            client(host).api.remove_volume(name, force=True)
        except Exception:  # labelled: `t1env gc` removes it once this process is gone
            log.debug("removing volume %s", name, exc_info=True)


_reaper = _Reaper()


def _remove_container(cid: str, volumes: bool = True, host: str | None = None) -> None:
    """Remove a container (and its anonymous volumes) from its engine (``host``; default: the one it was
    made on); best effort: gc() finds a leftover by its label."""
    try:
        client(host or _live.get(cid)).api.remove_container(cid, force=True, v=volumes)
    except Exception:  # best effort: gc() finds a leftover by its label
        log.debug("removing container %s", cid, exc_info=True)
    _live.pop(cid, None)


_exiting = False


def _at_exit() -> None:
    global _exiting
    _exiting = True
    try:
        close_pools()
        _reaper.drain()
        for cid, host in list(_live.items()):
            _remove_container(cid, host=host)
    except Exception:  # at exit: whatever is left, gc() finds by its label
        log.debug("removing the containers left at exit", exc_info=True)


atexit.register(_at_exit)


def gc(all: bool = False, host: str | None = None) -> int:
    """Remove t1 containers whose owner process is gone (``all=True``: every t1 container of this
    engine, e.g. after a crash of many workers), then such t1 volumes (a remote engine's verifier
    runtime). ``host``: the engine (default ``$DOCKER_HOST`` or the local socket). Returns how many
    containers were removed."""
    c = client(host)
    n = 0

    def orphan(labels) -> bool:
        owner = (labels or {}).get(LABEL_OWNER, "")
        return all or not (owner == _OWNER or _owner_alive(owner))

    for info in c.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        if not orphan(info.get("Labels")):
            continue
        try:
            c.api.remove_container(info["Id"], force=True, v=True)
            n += 1
        except Exception:  # removed meanwhile, or the engine refused: the next gc() tries again
            log.debug("gc: removing container %s", info["Id"], exc_info=True)
    try:
        vols = c.api.volumes(filters={"label": f"{LABEL}=1"}).get("Volumes") or []
    except Exception:
        vols = []
    for v in vols:
        if orphan(v.get("Labels")):
            try:
                c.api.remove_volume(v["Name"], force=True)
            except Exception:
                pass  # still in use by a live container: a later gc gets it
    return n

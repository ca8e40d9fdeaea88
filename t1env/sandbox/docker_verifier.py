"""The Docker backend's verifier: a container of its own, on the pristine image, beside the agent's.

Inside its container the agent is root: it can rewrite ``/usr``, the stdlib, ``/etc/ld.so.preload``
and every binary on PATH, and leave processes running. So the checks never run in that
container's filesystem. They run in a **verifier container** made from the same (unmodified)
image that mounts the agent container's work folders (its workdir, ``/tmp`` and ``/root``
volumes, see :func:`t1env.sandbox.docker._work_mounts`) and t1's runtime and the task's tests
read-only; its root filesystem is read-only too. Started cold, nothing is mounted or copied before the agent's
container is stopped (``separate``) or paused (``shared``); a prepared one (below) is started earlier, but no
check runs before the agent's container is stopped. The checks' environment is
:func:`~t1env.sandbox.base.verifier_env`: ``HOME`` is a tmpfs of the verifier container's own
(``/.t1-home``), and the task's private setup state (kept on the host since setup exited) is mounted
read-only at ``/.t1-private`` (``T1_PRIVATE``).

* ``separate`` mode (the default): the agent's container is killed first (every process in it
  ends; its volumes stay), and the verifier container has no network.
* ``shared`` mode: the agent's container is **paused** (cgroup freezer), the verifier container
  joins its pid and network namespaces (so checks can inspect the agent's processes and talk
  to its services), and the agent is unpaused once the verifier's first report line (``ready``)
  says it has made itself non-dumpable: from then on an agent process cannot ptrace it or open its
  ``/proc`` files, so its report channel (the container's stdout) is out of reach.

When the engine is remote (:func:`t1env.sandbox.docker_engine.engine_is_remote`: ``tcp://`` or
``ssh://``), this machine's folders do not exist where the engine runs, so they cannot be
bind-mounted. The runtime and the tests then travel over the engine API instead (see
:func:`_deliver`): once the agent is stopped, they are unpacked (``put_archive``) into fresh volumes
through a staging container that is created but never started, and the verifier container mounts
those volumes read-only, on a read-only root filesystem, exactly where the bind mounts would be. The
agent's container never mounts them; they are removed with the verifier container. Every property
above holds on both paths.

**Prepared** (:func:`prepare`, ``separate`` mode only; :meth:`t1env.sandbox.base.Sandbox.prepare_verifier`): the
same container, made with the same arguments, is created and started while the agent plays, with an open stdin
and ``--go-fd 0``: its interpreter imports t1's runtime and pytest, configures pytest and compiles the tests,
then blocks reading one line from its stdin. Nothing of it is in the agent's reach meanwhile: it has its own pid,
mount, ipc, uts and (empty) network namespaces and cgroup; the runtime, the tests and the private state are bind
mounts of its own (a remote engine: volumes delivered at prepare time, mounted by it alone), never in the agent's
container; its stdin is held by the engine, written only through the engine's API (which the agent cannot
reach). It shares only the agent container's work volumes, as the cold one does, and reads nothing of them
before go except what a cold verifier reads at its start. A :func:`run_verifier` with the same arguments, for
the same container and private state, kills the agent's container and waits for it exactly as the cold path
does, and only then writes ``go`` through an attach socket (``attach_socket``, stdin only); the timeout counts
from there, and the report is read from the container's log as cold. Other arguments, another container, a
prepared container that died, or ``shared`` mode (whose verifier must join the agent's pid namespace, which it
may only do once the agent is frozen): the prepared container is discarded and the run starts cold.
:meth:`~t1env.sandbox.docker.DockerSandbox.stop` removes one that was never told go (:func:`discard`), queued
before the agent's container so that that container's volumes go with it; it carries the same labels as every
t1 container, so ``t1env gc`` and the exit handler find it too. Every verifier container is removed in the
background once its report is read.
"""

from __future__ import annotations

import io
import logging
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import requests

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
from t1env.sandbox.docker_engine import _OWNER, LABEL, LABEL_OWNER, _one_line, client
from t1env.sandbox.docker_images import verifier_image
from t1env.sandbox.docker_pool import _create_kwargs, _live, _reaper, _remove_container

log = logging.getLogger(__name__)

_lock = threading.Lock()  # a sandbox's prepared verifier changes hands under it (prepare runs in a background thread)
READY_WAIT = 60.0  # seconds the agent may stay paused while the verifier starts
LOG_CAP = "16m"  # the verifier container's log (its report) is bounded by the engine


@dataclass
class Prepared:
    """A verifier container started by :func:`prepare`, waiting for the line on its stdin that says go."""

    key: tuple
    vid: str
    host: str
    volumes: list[str]
    notes: list[str]


def _key(sandbox, runtime: Path, tests: Path, mode: str, opts: VerifierOptions) -> tuple:
    """What a prepared verifier was made for: a run with other arguments, another container or other private
    state discards it."""
    return (runtime, tests, mode, opts, sandbox.private_state, sandbox._box.id, sandbox.image)


def _verifier_kwargs(sandbox, mode: str, opts: VerifierOptions, go: bool) -> dict:
    """The verifier container's create arguments but for its mounts (:func:`_start` adds them). ``go``: it waits for
    a line on its stdin (``--go-fd 0``) before it runs a check."""
    box = sandbox._box
    shared = mode == "shared"
    # the task's pristine image, plus the tests' own dependencies where an imported task declares some
    image = verifier_image(sandbox.task, sandbox.image, host=sandbox.host)
    kw = _create_kwargs(image, sandbox.config, sandbox.task.id if sandbox.task else None)
    kw.update(
        command=verifier_argv(extra=(*opts.args, "--go-fd", "0") if go else opts.args),
        environment={**sandbox.config.environ(), **verifier_env(), **opts.env},
        init=False,
        volumes_from=[box.id],
        mounts=[],
        log_config={"type": "json-file", "config": {"max-size": LOG_CAP, "max-file": "1"}},
        network_mode=f"container:{box.id}" if shared else "none",
    )
    kw.pop("detach", None)
    if go:
        kw.update(stdin_open=True)
    if shared:
        kw.update(pid_mode=f"container:{box.id}")
        kw.pop("hostname", None)  # it shares the agent's uts via the network namespace
    tmpfs = {VERIFIER_HOME: "rw,mode=1777,size=64m"}  # the checks' own HOME: empty, never the agent's /root
    if opts.private_dir:
        tmpfs[opts.private_dir] = "rw,mode=0755,size=64m"
    kw.update(tmpfs=tmpfs, read_only=True)
    if sandbox.private_state is None:  # no setup state: $T1_PRIVATE is an empty, read-only folder
        tmpfs[PRIVATE_DIR] = "ro,mode=0755,size=4k"
    return kw


def _mounts(sandbox, runtime: Path, tests: Path, opts: VerifierOptions) -> list:
    """A local engine's bind mounts of the runtime, the tests (and their alias) and the private state."""
    from docker.types import Mount  # the docker SDK: an optional extra, imported when a verifier runs

    mounts = [
        Mount(VERIFIER_DIR, str(runtime), type="bind", read_only=True),
        Mount(f"{VERIFIER_DIR}/tests", str(tests), type="bind", read_only=True),
    ]
    if opts.tests_alias:
        mounts.append(Mount(opts.tests_alias, str(tests), type="bind", read_only=True))
    if sandbox.private_state is not None:
        mounts.append(Mount(PRIVATE_DIR, str(sandbox.private_state), type="bind", read_only=True))
    return mounts


def _start(c, sandbox, kw: dict, runtime: Path, tests: Path, opts: VerifierOptions, volumes: list, notes: list) -> str:
    """Create and start the verifier container with ``kw`` and its mounts: the runtime, the tests and the private
    state (bind mounts; on a remote engine delivered into ``volumes`` first), and the empty files of its HOME."""
    from docker.types import Mount  # the docker SDK: an optional extra, imported when a verifier runs

    empty_files = [Mount(f"{VERIFIER_HOME}/{f}", "/dev/null", type="bind", read_only=True) for f in VERIFIER_HOME_FILES]
    if sandbox.remote:
        delivered = _deliver(c, sandbox.image, runtime, tests, opts.tests_alias, sandbox.private_state, volumes)
        kw.update(mounts=delivered + empty_files)
        notes.append("remote Docker engine: the runtime and tests were sent over the engine API into read-only volumes")
    else:
        kw.update(mounts=_mounts(sandbox, runtime, tests, opts) + empty_files)
    vid = c.containers.create(**kw).id
    _live[vid] = sandbox.host
    try:
        c.api.start(vid)
    except BaseException:
        _remove_container(vid, volumes=False, host=sandbox.host)
        raise
    return vid


def prepare(sandbox, runtime: Path, tests: Path | None, mode: str, options: VerifierOptions | None = None) -> bool:
    """Start the ``separate``-mode verifier container now, while the agent plays (see the module docstring): the
    cold run's container exactly, but for ``--go-fd 0`` and an open stdin. Asked again for the same run, the one
    made is kept; for another, it is replaced. ``shared`` mode cannot be prepared (its verifier joins the agent's pid
    namespace, which it may only do once the agent is frozen): False, and the run starts cold."""
    opts = options or VerifierOptions()
    if sandbox._box is not None and tests is not None:
        with _lock:
            held = getattr(sandbox, "_prepared", None)
            if held is not None and held.key == _key(sandbox, runtime, tests, mode, opts):
                return True  # prepared already, for the same run (the env asks again at reset)
    discard(sandbox)
    if mode != "separate" or tests is None or sandbox._box is None or not sandbox.alive:
        return False  # tests None: the task is not known yet, and the container's mounts and argv depend on it
    c = client(sandbox.host)
    box, key = sandbox._box, _key(sandbox, runtime, tests, mode, opts)
    kw = _verifier_kwargs(sandbox, mode, opts, go=True)
    volumes: list[str] = []
    notes: list[str] = []
    try:
        vid = _start(c, sandbox, kw, runtime, tests, opts, volumes, notes)
    except Exception as e:
        _drop_volumes(c, volumes)
        raise SandboxError(f"could not prepare the verifier container: {_one_line(e)}") from None
    with _lock:
        if sandbox._box is box:
            sandbox._prepared = Prepared(key, vid, sandbox.host, volumes, notes)
            return True
    # stopped (or restarted) meanwhile, from another thread: nobody would run it
    _reaper.remove_id(vid, sandbox.host, volumes=False, named=tuple(volumes))
    return False


def discard(sandbox) -> None:
    """Remove the prepared verifier container (if any) without running it; in the background, before anything
    stop() queues after it (the agent's container, whose volumes it mounts)."""
    with _lock:
        prepared, sandbox._prepared = getattr(sandbox, "_prepared", None), None
    if prepared is not None:
        _reaper.remove_id(prepared.vid, prepared.host, volumes=False, named=tuple(prepared.volumes))


def _take(sandbox, c, key: tuple) -> Prepared | None:
    """The prepared verifier if it was made for ``key`` and still waits; else None (any other one discarded)."""
    with _lock:
        prepared, sandbox._prepared = getattr(sandbox, "_prepared", None), None
    if prepared is None:
        return None
    if prepared.key == key:
        try:
            running = c.api.inspect_container(prepared.vid)["State"].get("Running")
        except Exception:
            running = False
        if running:
            return prepared
    _reaper.remove_id(prepared.vid, prepared.host, volumes=False, named=tuple(prepared.volumes))
    return None


def run_verifier(
    sandbox, runtime: Path, tests: Path, timeout: float, mode: str, options: VerifierOptions | None = None
) -> VerifierRun:
    """See :meth:`t1env.sandbox.base.Sandbox.run_verifier` and the module docstring. ``options``
    (imported tasks): the tests are also mounted read-only at ``tests_alias``, and ``private_dir``
    is a tmpfs of the verifier container's own. A verifier :func:`prepare` started for the same arguments is
    told go once the agent is stopped; otherwise one starts now (cold)."""
    opts = options or VerifierOptions()

    box = sandbox._box
    if box is None:
        raise SandboxError("sandbox is not started")
    c = client(sandbox.host)
    shared = mode == "shared"
    prepared = _take(sandbox, c, _key(sandbox, runtime, tests, mode, opts))
    go = None
    if prepared is not None:
        try:  # the channel, opened now (nothing is written to it before the agent is stopped)
            go = c.api.attach_socket(prepared.vid, params={"stdin": 1, "stream": 1})
        except Exception:
            log.debug("attaching to the prepared verifier %s", prepared.vid, exc_info=True)
            _reaper.remove_id(prepared.vid, prepared.host, volumes=False, named=tuple(prepared.volumes))
            prepared = None
    if prepared is None:
        kw = _verifier_kwargs(sandbox, mode, opts, go=False)

    try:
        if shared:
            _pause(c, box.id)
        else:
            try:
                c.api.kill(box.id)
            except Exception as e:
                if "is not running" not in str(e):
                    raise
            c.api.wait(box.id, timeout=30)
    except Exception as e:
        if prepared is not None:
            _close(go)
            _reaper.remove_id(prepared.vid, prepared.host, volumes=False, named=tuple(prepared.volumes))
        raise SandboxError(f"could not stop the agent before verification: {_one_line(e)}") from None

    t0 = time.monotonic()
    vid = None
    volumes: list[str] = []
    notes: list[str] = []
    try:
        if prepared is not None:
            vid, volumes, notes = prepared.vid, prepared.volumes, list(prepared.notes)
            _send(go, b"go\n")  # only now, with every process of the agent gone: the one line it waits for
        else:
            vid = _start(c, sandbox, kw, runtime, tests, opts, volumes, notes)
        if shared:
            _wait_ready(c, vid, min(READY_WAIT, timeout))
            c.api.unpause(box.id)
        timed_out = False
        try:
            left = max(1.0, timeout - (time.monotonic() - t0))
            code = c.api.wait(vid, timeout=left).get("StatusCode", -1)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):  # kill the verifier
            timed_out = True
            code = -9
            try:
                c.api.kill(vid)
            except Exception:  # it may have exited on its own in the meantime
                log.debug("killing the verifier container %s", vid, exc_info=True)
        out = c.api.logs(vid, stdout=True, stderr=False)
        err = c.api.logs(vid, stdout=False, stderr=True)[-65536:]
    except SandboxError:
        raise
    except Exception as e:
        raise SandboxError(f"verifier container failed: {_one_line(e)}") from None
    finally:
        _close(go)
        if shared:
            try:
                c.api.unpause(box.id)
            except Exception:
                pass  # not paused any more (the normal case)
        if vid is not None:  # in the background (its report is read), before the agent's container that stop() queues
            _reaper.remove_id(vid, sandbox.host, volumes=False, named=tuple(volumes))
        else:
            _drop_volumes(c, volumes)
    result = ExecResult(code, out, err, timed_out, time.monotonic() - t0)
    return VerifierRun(result, "shared" if shared else "separate", notes, prepared=prepared is not None)


def _send(sock, data: bytes) -> None:
    """Write ``data`` to an attach socket: the SDK hands back a socket, its file wrapper, or (ssh) a pipe."""
    raw = getattr(sock, "_sock", sock)
    if hasattr(raw, "sendall"):
        raw.sendall(data)
    else:
        raw.write(data)
        raw.flush()


def _close(sock) -> None:
    if sock is not None:
        try:
            getattr(sock, "_sock", sock).close()
            sock.close()
        except Exception:
            log.debug("closing the verifier's stdin", exc_info=True)


def _drop_volumes(c, volumes: list[str]) -> None:
    for name in volumes:
        try:
            c.api.remove_volume(name, force=True)
        except Exception:
            pass  # labelled: `t1env gc` removes it once this process is gone


def _pause(c, cid: str, tries: int = 10) -> None:
    """Pause (freeze) the agent's container. runc gives up with "unable to freeze" when a process of it does not
    reach the frozen state in time (one in uninterruptible disk sleep on a busy machine, measured here under load
    while the agent's last command started a daemon): try again, a little later each time."""
    for i in range(tries):
        try:
            c.api.pause(cid)
            return
        except Exception as e:
            if "unable to freeze" not in str(e) or i == tries - 1:
                raise
            time.sleep(0.05 * (i + 1))


def _wait_ready(c, vid: str, wait: float) -> None:
    """Wait until the verifier has printed its first line (``ready``), has exited, or ``wait`` s passed."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if b"\n" in c.api.logs(vid, stdout=True, stderr=False, tail=1):
            return
        if not c.api.inspect_container(vid)["State"].get("Running"):
            return
        time.sleep(0.01)


# where the staging container mounts the volumes
STAGE = ("/.t1-stage-runtime", "/.t1-stage-tests", "/.t1-stage-private")


def _deliver(
    c, image: str, runtime: Path, tests: Path, tests_alias: str | None, private: Path | None, volumes: list[str]
) -> list:
    """Copy the runtime (with the tests in its ``tests/``), for ``tests_alias`` the tests again, and the
    task's private setup state (``private``) into new volumes on the engine; returns the verifier
    container's read-only mounts of them. The volumes' names are appended to ``volumes`` as they are made
    (the caller removes them).

    ``put_archive`` cannot write into a read-only mount or root filesystem, so the copy goes through a
    staging container: created from ``image`` (already on the engine) with the volumes mounted
    read-write, never started (no process runs in it), removed right after the copy."""
    from docker.types import Mount  # the docker SDK: an optional extra, imported when a verifier runs

    labels = {LABEL: "1", LABEL_OWNER: _OWNER}
    trees = [_tar({"": runtime, "tests": tests})]
    targets = [VERIFIER_DIR]
    if tests_alias:
        trees.append(_tar({"": tests}))
        targets.append(tests_alias)
    if private is not None:
        trees.append(_tar({"": private}))
        targets.append(PRIVATE_DIR)
    for _ in trees:
        volumes.append(c.api.create_volume(labels=labels)["Name"])
    host_config = c.api.create_host_config(
        mounts=[Mount(STAGE[i], volumes[i], type="volume") for i in range(len(trees))], network_mode="none"
    )
    stage = c.api.create_container(
        image, command=["true"], entrypoint=[], host_config=host_config, labels=labels, network_disabled=True
    )["Id"]
    try:
        for i, data in enumerate(trees):
            c.api.put_archive(stage, STAGE[i], data)
    finally:
        try:
            c.api.remove_container(stage, force=True, v=False)
        except Exception:  # best effort: gc() finds a leftover by its label
            log.debug("removing the staging container %s", stage, exc_info=True)
    return [Mount(target, volumes[i], type="volume", read_only=True) for i, target in enumerate(targets)]


def _tar(trees: dict[str, Path]) -> bytes:
    """One tar of folders' contents: ``{prefix: folder}``, later prefixes replacing what an earlier
    folder has there (like a mount over it); owned by root, symlinks kept as links."""

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    shadowed = [k for k in trees if k]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for prefix, root in trees.items():
            if prefix:
                tar.add(str(root), arcname=prefix, recursive=False, filter=as_root)
            for child in sorted(root.iterdir()):
                if not prefix and child.name in shadowed:
                    continue
                name = f"{prefix}/{child.name}" if prefix else child.name
                tar.add(str(child), arcname=name, recursive=True, filter=as_root)
    return buf.getvalue()

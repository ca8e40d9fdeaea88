"""The Docker backend's verifier: a container of its own, on the pristine image, beside the agent's.

Inside its container the agent is root: it can rewrite ``/usr``, the stdlib, ``/etc/ld.so.preload``
and every binary on PATH, and leave processes running. So the checks never run in that
container's filesystem. They run in a **verifier container** made from the same (unmodified)
image that mounts the agent container's work folders (its workdir, ``/tmp`` and ``/root``
volumes, see :func:`t1env.sandbox.docker._work_mounts`) and t1's runtime and the task's tests
read-only; its root filesystem is read-only too.

* ``separate`` mode (the default): the agent's container is killed first (every process in it
  ends; its volumes stay), and the verifier container has no network.
* ``shared`` mode: the agent's container is **paused** (cgroup freezer), the verifier container
  joins its pid and network namespaces (so checks can inspect the agent's processes and talk
  to its services), and the agent is unpaused once the verifier's first report line (``ready``)
  says it has made itself non-dumpable: from then on an agent process cannot ptrace it or open its
  ``/proc`` files, so its report channel (the container's stdout) is out of reach.

When the engine is remote (not a unix socket on this host), host folders cannot be bind-mounted:
the runtime is then copied into the verifier container before it starts and its root filesystem
stays writable (``notes`` says so).
"""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path

import requests

from t1env.sandbox.base import (
    VERIFIER_DIR,
    VERIFIER_ENV,
    ExecResult,
    SandboxError,
    VerifierOptions,
    VerifierRun,
    verifier_argv,
)

READY_WAIT = 60.0  # seconds the agent may stay paused while the verifier starts
LOG_CAP = "16m"  # the verifier container's log (its report) is bounded by the engine


def run_verifier(sandbox, runtime: Path, tests: Path, timeout: float, mode: str, options: VerifierOptions | None = None) -> VerifierRun:
    """See :meth:`t1env.sandbox.base.Sandbox.run_verifier` and the module docstring. ``options``
    (imported tasks): the tests are also mounted read-only at ``tests_alias``, and ``private_dir``
    is a tmpfs of the verifier container's own."""
    from docker.types import Mount

    from t1env.sandbox import docker as d

    opts = options or VerifierOptions()

    box = sandbox._box
    if box is None:
        raise SandboxError("sandbox is not started")
    c = d.client()
    shared = mode == "shared"
    local_engine = c.api.base_url.startswith("http+docker://")
    notes: list[str] = []
    kw = d._create_kwargs(sandbox.image, sandbox.config, sandbox.task.id if sandbox.task else None)
    kw.update(
        command=verifier_argv(extra=opts.args),
        environment={**sandbox.config.environ(), **VERIFIER_ENV, **opts.env},
        init=False,
        volumes_from=[box.id],
        mounts=[],
        log_config={"type": "json-file", "config": {"max-size": LOG_CAP, "max-file": "1"}},
        network_mode=f"container:{box.id}" if shared else "none",
    )
    kw.pop("detach", None)
    if shared:
        kw.update(pid_mode=f"container:{box.id}")
        kw.pop("hostname", None)  # it shares the agent's uts via the network namespace
    if opts.private_dir:
        kw.update(tmpfs={opts.private_dir: "rw,mode=0755,size=64m"})
    if local_engine:
        mounts = [Mount(VERIFIER_DIR, str(runtime), type="bind", read_only=True),
                  Mount(f"{VERIFIER_DIR}/tests", str(tests), type="bind", read_only=True)]
        if opts.tests_alias:
            mounts.append(Mount(opts.tests_alias, str(tests), type="bind", read_only=True))
        kw.update(read_only=True, mounts=mounts)
    else:
        notes.append("remote Docker engine: the verifier runtime was copied into a writable verifier container")

    try:
        if shared:
            c.api.pause(box.id)
        else:
            try:
                c.api.kill(box.id)
            except Exception as e:
                if "is not running" not in str(e):
                    raise
            c.api.wait(box.id, timeout=30)
    except Exception as e:
        raise SandboxError(f"could not stop the agent before verification: {d._one_line(e)}") from None

    t0 = time.monotonic()
    vid = None
    try:
        vid = c.containers.create(**kw).id
        d._live.add(vid)
        if not local_engine:
            c.api.put_archive(vid, "/", _runtime_tar(runtime, tests, opts.tests_alias))
        c.api.start(vid)
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
            except Exception:
                pass
        out = c.api.logs(vid, stdout=True, stderr=False)
        err = c.api.logs(vid, stdout=False, stderr=True)[-65536:]
    except SandboxError:
        raise
    except Exception as e:
        raise SandboxError(f"verifier container failed: {d._one_line(e)}") from None
    finally:
        if shared:
            try:
                c.api.unpause(box.id)
            except Exception:
                pass  # not paused any more (the normal case)
        if vid is not None:
            d._remove_container(vid, volumes=False)
    result = ExecResult(code, out, err, timed_out, time.monotonic() - t0)
    return VerifierRun(result, "shared" if shared else "separate", notes)


def _wait_ready(c, vid: str, wait: float) -> None:
    """Wait until the verifier has printed its first line (``ready``), has exited, or ``wait`` s passed."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if b"\n" in c.api.logs(vid, stdout=True, stderr=False, tail=1):
            return
        if not c.api.inspect_container(vid)["State"].get("Running"):
            return
        time.sleep(0.01)


def _runtime_tar(runtime: Path, tests: Path, tests_alias: str | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(runtime, arcname=VERIFIER_DIR.lstrip("/"), recursive=True)
        tar.add(tests, arcname=f"{VERIFIER_DIR.lstrip('/')}/tests", recursive=True)
        if tests_alias:
            tar.add(tests, arcname=tests_alias.lstrip("/"), recursive=True)
    return buf.getvalue()

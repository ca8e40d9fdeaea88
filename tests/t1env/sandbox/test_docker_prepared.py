"""The Docker backend's prepared verifier (:func:`t1env.sandbox.docker_verifier.prepare`) on a real engine.

A prepared verifier container is started while the agent plays and told go at submission; these tests hold it
to the cold one's results (an oracle and a no-op run of ``hello-file``), show that an agent who looks for it,
writes where its files would be and kills what it can changes nothing, that other arguments run cold, and that
``stop()`` without a verification leaves no container (``docker`` marker; skipped when no engine answers).
"""

from __future__ import annotations

import pytest

pytest.importorskip("docker", reason="the docker SDK is not installed: pip install 't1[docker]'")

from t1env.agent.reference import oracle_command  # noqa: E402
from t1env.episode import verify as V  # noqa: E402
from t1env.episode.shell import ShellSession  # noqa: E402
from t1env.registry import get_task  # noqa: E402
from t1env.sandbox import docker as D  # noqa: E402
from t1env.sandbox import docker_pool  # noqa: E402
from t1env.sandbox.base import PRIVATE_DIR, VERIFIER_DIR, SandboxConfig  # noqa: E402

_UP, _WHY = D.engine_ready(D.DEFAULT_BASE)
pytestmark = [pytest.mark.docker, pytest.mark.skipif(not _UP, reason=_WHY)]


@pytest.fixture(scope="module")
def task():
    D.default_image()
    return get_task("hello-file")


def _box(task) -> D.DockerSandbox:
    box = D.DockerSandbox(SandboxConfig.from_task(task), task=task, pool=False)
    box.start()
    return box


def _checks(res) -> list[tuple[str, bool]]:
    return [(c.name, c.passed) for c in res.checks]


def _containers() -> set[str]:
    return {c["Id"] for c in D.client().api.containers(all=True)}


def test_prepared_verifier_gives_the_cold_results_and_is_out_of_the_agents_reach(task):
    results = {}
    for agent in ("no-op", "oracle"):
        for prepared in (False, True):
            box = _box(task)
            try:
                if prepared:
                    assert V.prepare(box, task)
                    vid = box._prepared.vid
                if agent == "oracle":
                    with ShellSession(box) as sh:
                        assert sh.run(oracle_command(task), timeout=120).exit_code == 0
                res = V.verify(box, task)
            finally:
                box.stop()
            assert res.prepared == prepared and res.error is None, res.error
            results[agent, prepared] = _checks(res)
        assert results[agent, True] == results[agent, False], agent
    assert all(ok for _, ok in results["oracle", True]) and len(results["oracle", True]) == 5
    assert not any(ok for _, ok in results["no-op", True])
    docker_pool._reaper.drain()
    assert vid not in _containers()  # the verifier container went once its report was read

    # the agent looks for the waiting verifier, writes where its files would be, and kills what might be it
    box = _box(task)
    try:
        assert V.prepare(box, task)
        vid = box._prepared.vid
        # from the host: namespaces and mounts of its own; the agent's container mounts none of its files
        c = D.client().api
        waiting, agent = c.inspect_container(vid), c.inspect_container(box.container_id)
        hc = waiting["HostConfig"]
        assert (hc["PidMode"], hc["NetworkMode"], hc["IpcMode"]) == ("", "none", "private") and hc["ReadonlyRootfs"]
        assert waiting["State"]["Running"] and waiting["Config"]["OpenStdin"]
        mine = {m["Destination"]: m["RW"] for m in waiting["Mounts"]}
        assert mine[VERIFIER_DIR] is False and mine[f"{VERIFIER_DIR}/tests"] is False
        assert not {VERIFIER_DIR, f"{VERIFIER_DIR}/tests", PRIVATE_DIR} & {m["Destination"] for m in agent["Mounts"]}
        attack = (
            "ps -eo args; ls -a / /proc; "
            f"ls -a {VERIFIER_DIR} {PRIVATE_DIR}; find / -xdev -name test_hello.py 2>/dev/null; "
            f"mkdir -p {VERIFIER_DIR}/tests && echo 'def test_x(): pass' > {VERIFIER_DIR}/tests/test_hello.py; "
            "pkill -9 -f 'python3|pytest|run_checks'; pkill -9 sleep"  # t1's helper too; the shell lives on
        )
        with ShellSession(box) as sh:
            out = sh.run(attack, timeout=60).output
        assert "docker-init" in out and "/proc:" in out, out  # it looked: its own processes only
        assert "run_checks" not in out and "pytest" not in out and "test_hello.py\n" not in out, out
        res = V.verify(box, task)
    finally:
        box.stop()
    assert res.prepared and _checks(res) == results["no-op", False]


def test_other_arguments_run_cold_and_stop_leaves_no_container(task):
    box = _box(task)
    try:
        assert V.prepare(box, task)
        first = box._prepared.vid
        assert V.prepare(box, task) and box._prepared.vid == first  # asked again for the same run: kept
        assert box.prepare_verifier(V.runtime_bundle(), task.tests_dir, "shared") is False  # shared: never prepared
        assert box._prepared is None
        assert V.prepare(box, task)
        run = box.run_verifier(V.runtime_bundle(), task.tests_dir, 60, "separate")  # not verify()'s arguments
        assert not run.prepared and b'"event": "ready"' in run.result.stdout
    finally:
        box.stop()
    box = _box(task)
    agent = box.container_id
    assert V.prepare(box, task)
    waiting = box._prepared.vid
    box.stop()  # no verification: the waiting container goes, and the agent's container with its volumes
    docker_pool._reaper.drain()
    assert not {first, waiting, agent} & _containers()
    assert not {first, waiting, agent} & set(docker_pool._live)

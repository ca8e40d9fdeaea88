"""The Ray executor on a real 2-node Ray cluster on loopback (``docs/scaling.md``).

Ray binds to the machine's interface address even when told 127.0.0.1, so the module's cluster and this test
process's Ray driver live in a network namespace of their own: a holder process made by ``unshare -n`` (with ``lo``
up), the two ``ray start --block`` nodes entered into it with ``nsenter``, and this process's thread joined to it
with ``setns(2)`` for the module's duration. Teardown ends the driver, both nodes (their process groups) and the
holder, and returns this thread to its own network namespace.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs Ray: pip install -e '.[ray]'")

from t1env.eval.harness import EvalConfig, run_job
from t1env.executor import RayExecutor, make_executor
from t1env.sandbox.local import EPISODE_PREFIX

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap]

PORT = 6391
TASKS = ["hello-file", "git-recover-branch", "log-error-summary", "json-config-merge"]
CLONE_NEWNET = 0x40000000


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path})")
    finally:
        os.close(fd)


def _ray_node(ns: str, tmp: Path, *args: str) -> subprocess.Popen:
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, RAY_TMPDIR=str(tmp), RAY_USAGE_STATS_ENABLED="0")
    ray_cli = str(Path(sys.executable).with_name("ray"))
    return subprocess.Popen(
        ["nsenter", f"--net={ns}", ray_cli, "start", "--block", "--num-cpus=1", "--disable-usage-stats", *args],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "start.log", "w"),
    )


def _wait_for_nodes(n: int) -> None:
    """Block until the cluster has ``n`` live nodes (Ray reports them as they register)."""
    import time

    while len([x for x in ray.nodes() if x["Alive"]]) < n:
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster():
    if any(shutil.which(p) is None for p in ("unshare", "nsenter", "ip")) or os.geteuid() != 0:
        pytest.skip(
            "needs root with unshare, nsenter (util-linux) and ip (iproute2) to give Ray a network namespace of its own"
        )
    holder = subprocess.Popen(
        ["unshare", "-n", "sh", "-c", "ip link set lo up && echo ready && exec sleep infinity"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "ready"
    ns = f"/proc/{holder.pid}/ns/net"
    root = Path(tempfile.mkdtemp(prefix="t1-ray-"))
    head = _ray_node(
        ns, root / "head", "--head", f"--port={PORT}", "--include-dashboard=false", '--resources={"sandbox": 2}'
    )
    nodes = [head]
    own_ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _setns(ns)
        # the head's GCS answers once it is up; ray.init retries the connection until then
        ray.init(address=f"127.0.0.1:{PORT}", log_to_driver=False, configure_logging=False)
        nodes.append(_ray_node(ns, root / "node2", f"--address=127.0.0.1:{PORT}", '--resources={"sandbox": 2}'))
        _wait_for_nodes(2)
        yield ns
    finally:
        ray.shutdown()
        for p in reversed(nodes):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.wait()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.setns(own_ns, CLONE_NEWNET)
        os.close(own_ns)
        holder.kill()
        holder.wait()
        shutil.rmtree(root, ignore_errors=True)


def _per_check(job_dir: Path) -> dict:
    out = {}
    for f in sorted(job_dir.glob("*/result.json")):
        r = json.loads(f.read_text())
        out[r["trial"]] = (r["passed"], r["total"], [(c["name"], c["passed"]) for c in r["checks"]], r["error"])
    return out


def test_oracle_gives_the_same_per_check_results_in_process_and_on_ray(cluster, tmp_path):
    """8 oracle episodes (4 tasks x 2 seeded attempts) over 2 nodes: identical per-check results."""
    base = {"tasks": TASKS, "agent": "oracle", "attempts": 2, "concurrency": 4}
    m_local = run_job(EvalConfig(**base), tmp_path / "local")
    m_ray = run_job(EvalConfig(**base, ray=f"127.0.0.1:{PORT}"), tmp_path / "ray")
    local, remote = _per_check(tmp_path / "local"), _per_check(tmp_path / "ray")
    assert len(local) == 8 and m_ray["n_trials"] == 8
    assert remote == local
    assert m_local["executor"] == "inprocess" and m_ray["executor"] == "ray"
    assert m_ray["workers_lost"] == 0 and m_ray["episode_retries"] == 0
    assert all(r[3] is None for r in remote.values()), remote


def test_seeded_episodes_pick_the_same_family_instance(cluster):
    """A family env draws its instance from the reset seed: the same one in-process and on a worker."""
    kwargs = {"family": "logs", "prestart": False}
    local_ex, ray_ex = make_executor(), RayExecutor(None, workers=1)
    try:
        for seed in (3, 11):
            a, b = local_ex.make_env(**kwargs), ray_ex.make_env(**kwargs)
            try:
                (obs_a, info_a), (obs_b, info_b) = a.reset(seed=seed), b.reset(seed=seed)
            finally:
                a.close()
                b.close()
            assert (obs_a, info_a["task_id"]) == (obs_b, info_b["task_id"])
    finally:
        ray_ex.close()


def test_a_worker_killed_mid_episode_is_replaced_and_the_episode_retried(cluster):
    """SIGKILL the worker process between two steps: the episode continues on another worker, is counted, and
    `t1env gc` removes the episode folder the killed worker left."""
    ex = RayExecutor(None, workers=2, max_retries=1)
    try:
        env = ex.make_env(task="hello-file", prestart=False)
        env.reset(seed=0)
        env.step("echo one > /tmp/first")
        victim = env.worker
        pid = ray.get(victim.pid.remote())
        os.kill(pid, signal.SIGKILL)
        obs, _, _, _, info = env.step("cat /tmp/first")
        assert "one" in obs  # the replayed action ran on the new worker's sandbox
        assert info["executor_retries"] == 1
        assert ex.metrics()["workers_lost"] == 1 and ex.metrics()["episode_retries"] == 1
        env.close()
    finally:
        ex.close()
    left = [d for d in Path(tempfile.gettempdir()).glob(f"{EPISODE_PREFIX}*") if (d / "owner").read_text() == str(pid)]
    assert left, "the killed worker's episode folder (what `t1env gc` exists for)"
    subprocess.run([sys.executable, "-m", "t1env", "gc"], check=True, capture_output=True)
    assert not any(d.exists() for d in left)


def _checks(c: dict) -> tuple:
    """Per-check results without their timings."""
    return c.get("passed"), c.get("total"), [(x["name"], x["outcome"]) for x in c.get("checks", [])]


def test_rollout_runner_on_ray_matches_in_process(cluster):
    """`rollout.executor: ray`: the policy (the tiny model) stays here; the same seeded episodes give the same
    token sequences, rewards and checks as with in-process envs."""
    pytest.importorskip("torch", reason="t1train needs the train extra")
    from t1train.engines.base import SamplingParams
    from t1train.engines.hf import HFEngine
    from t1train.models import tiny_moe
    from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner, make_env_factory

    model, tok = tiny_moe()
    # one episode at a time: the engine's batches (and so its padded forward passes) are the same in both runs
    cfg = RolloutConfig(concurrency=1, max_turns=3, system_prompt="Use ```bash blocks. SUBMIT when done.")
    specs = [EpisodeSpec("hello-file", seed) for seed in range(4)]
    ray_ex = RayExecutor(None, workers=2)
    runs = []
    try:
        for make_env in (make_env_factory(), make_env_factory(executor=ray_ex)):
            runner = RolloutRunner(HFEngine(model, tok), tok, make_env, SamplingParams(max_new_tokens=16, seed=0), cfg)
            runs.append([(t.token_ids(), t.reward, _checks(t.checks), t.termination) for t in runner.run(specs)])
    finally:
        ray_ex.close()
    assert all(r[3] != "error" for r in runs[1]), runs[1]
    for local, remote in zip(runs[0], runs[1]):
        assert remote[1:] == local[1:]  # reward, checks, how it ended
        assert remote[0] == local[0]  # the token sequence


def test_t1env_eval_ray_command(cluster, tmp_path):
    """`t1env eval TASK --ray ADDRESS` from a shell in the cluster's network namespace."""
    out = tmp_path / "job"
    subprocess.run(
        [
            "nsenter",
            f"--net={cluster}",
            sys.executable,
            "-m",
            "t1env",
            "eval",
            "hello-file",
            "--attempts",
            "2",
            "--out",
            str(out),
            "--ray",
            f"127.0.0.1:{PORT}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    m = json.loads((out / "result.json").read_text())
    assert (m["executor"], m["n_trials"], m["resolved_rate"]) == ("ray", 2, 1.0)


def test_async_training_plays_its_episodes_on_ray(cluster, tmp_path):
    """Issue 29 on the Ray executor: ``async`` training, two steps at staleness 1 of the tiny model on ``hello-file``
    with the env factory of ``rollout_executor: ray``: every episode the producer plays is a Ray worker's env (real
    sandboxes on the cluster), carries its policy versions, and none staler than the bound is trained on."""
    pytest.importorskip("torch", reason="t1train needs the train extra")
    import torch

    from t1env.executor import RemoteEnv
    from t1train.models import tiny_moe
    from t1train.rollout import make_env_factory
    from t1train.trainer import T1Trainer

    from ..t1train.conftest import tiny_config

    model, tok = tiny_moe()
    args = tiny_config(
        tmp_path / "out",
        tasks=["hello-file"],
        max_steps=2,
        rollout_concurrency=2,
        system_prompt="Use ```bash blocks. SUBMIT when done.",
        async_rl={"max_staleness": 1},
    )
    ray_ex = RayExecutor(None, workers=2)
    factory, made = make_env_factory(executor=ray_ex), []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = T1Trainer(model, args, processing_class=tok, make_env=lambda t: made.append(factory(t)) or made[-1])
        trainer.train()
    finally:
        torch.set_num_threads(threads)
        ray_ex.close()
    records = [json.loads(x) for x in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["metadata"]["phase"] == "train"]
    assert sorted({r["metadata"]["step"] for r in trained}) == [0, 1] and len(trained) == 8
    assert len(made) >= 8 and all(isinstance(e, RemoteEnv) for e in made)
    for r in trained:
        meta = r["metadata"]
        assert r["termination"] != "error" and r["checks"], r
        assert 0 <= meta["staleness"] <= 1 and meta["policy_version"] == meta["step"]
        assert all(int(t["weight_version"]) <= meta["step"] for t in r["turns"])

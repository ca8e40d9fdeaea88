"""`t1env eval --backend docker`: the oracle over two tasks in containers (``docker`` marker)."""

import pytest

docker_mod = pytest.importorskip("docker", reason="the docker SDK is not installed: pip install 't1[docker]'")

from t1env.eval import EvalConfig, run_job
from t1env.eval.results import read_json
from t1env.sandbox import docker as D

_UP, _WHY = D.engine_available()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(not _UP, reason=f"no Docker engine: {_WHY}")]


def test_oracle_on_docker_resolves_every_trial(tmp_path):
    try:
        D.client().images.get(D.DEFAULT_BASE)
    except docker_mod.errors.ImageNotFound:
        pytest.skip(f"base image {D.DEFAULT_BASE} missing: run .ci/docker-setup.sh")
    m = run_job(
        EvalConfig(
            tasks=["hello-file", "csv-region-totals"], agent="oracle", attempts=2, concurrency=2, backend="docker"
        ),
        tmp_path / "job",
    )
    assert m["resolved_rate"] == 1.0 and m["n_trials"] == 4 and m["backend"] == "docker"
    r = read_json(tmp_path / "job" / "hello-file__0" / "result.json")
    assert r["passed"] == r["total"] == 5 and r["error"] is None

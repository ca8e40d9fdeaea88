import re
import shutil

import pytest

from t1train.cli import main
from t1train.config import load_rollout_config
from t1train.trajectory import load_jsonl

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the real t1 env")


def write(tmp_path, text):
    path = tmp_path / "rollout.yaml"
    path.write_text(text)
    return path


def test_shipped_configs_parse():
    cfg = load_rollout_config("t1train/configs/rollout-tiny.yaml")
    assert cfg.engine.kind == "hf" and cfg.rollout.return_routed_experts and cfg.sampling.max_new_tokens == 48
    assert load_rollout_config("t1train/configs/rollout-sglang.yaml").engine.kind == "sglang"


@pytest.mark.parametrize("text,match", [
    ("engine: {kind: vllm}", "engine.*'hf' or 'sglang'"),
    ("sampling: {temprature: 1}", "sampling: unknown key.*temprature"),
    ("rollout: {observation_role: robot}", "observation_role"),
    ("episodes: 1\nbogus: 2", "unknown key.*bogus"),
])
def test_bad_configs_name_the_key(tmp_path, capsys, text, match):
    assert main(["rollout", "--config", str(write(tmp_path, text))]) == 2
    assert re.search(match, capsys.readouterr().err)


@needs_bwrap
@pytest.mark.parametrize("engine", ["hf", "sglang"])
def test_rollout_writes_trajectories_and_prints_drift(tmp_path, capsys, tiny_engine, engine):
    url = ""
    server = None
    if engine == "sglang":
        from t1train.engines.sglang_standin import StandInSGLangServer

        server = StandInSGLangServer(tiny_engine).start()
        url = f"\n  url: {server.url}"
    out = tmp_path / "traj.jsonl"
    cfg = write(tmp_path, f"""
engine:
  kind: {engine}
  model: tiny{url}
env: {{tasks: [hello-file]}}
episodes: 2
sampling: {{max_new_tokens: 16}}
rollout: {{max_turns: 3, return_routed_experts: true}}
output: {out}
""")
    try:
        assert main(["rollout", "--config", str(cfg)]) == 0
    finally:
        if server:
            server.stop()
    printed = capsys.readouterr().out
    assert "drift in the loss region: TITO 0 tokens" in printed and "wrote 2 trajectories" in printed
    trajs = load_jsonl(out)
    assert len(trajs) == 2 and all(t.checks["total"] == 5 for t in trajs)
    assert all(len(t.routed_experts()) == sum(t.loss_mask()) for t in trajs)

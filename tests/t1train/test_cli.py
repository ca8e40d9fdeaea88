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
    ("engine: {kind: vllm}", r"engine\.kind: Input should be 'hf' or 'sglang'"),
    ("sampling: {temprature: 1}", r"sampling\.temprature: unknown key; did you mean 'temperature'\?"),
    ("rollout: {observation_role: robot}", r"rollout: observation_role must be 'user' or 'tool'"),
    ("episodes: 1\nbogus: 2", r"bogus: unknown key \(known: engine, env, "),
    ("env: {tasks: []}", r"env\.tasks: is empty: give at least one task id"),
    ("env: {tasks: hello-file}", r"env\.tasks: Input should be a valid list"),
    ("env: {backend: vm}", r"env\.backend: must be one of \['local', 'docker'\]"),
    ("episodes: 0", r"episodes: Input should be greater than or equal to 1"),
    ("sampling: {temperature: warm}", r"sampling\.temperature: Input should be a valid number"),
    ("engine: {timeout: .inf}", r"engine\.timeout: Input should be a finite number"),
    ("- a list", r"expected a mapping of sections at the top level, got list"),
    ("engine: [x", r"not valid YAML at line 1: expected .,. or .\]."),
])
def test_bad_rollout_configs_are_one_line_naming_the_file_and_key(tmp_path, capsys, text, match):
    config = write(tmp_path, text)
    assert main(["rollout", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"t1train: error: {config}: ") and re.search(match, err)


def test_yaml_numbers_arrive_as_numbers(tmp_path):
    # PyYAML (YAML 1.1) reads 1e-5 as a string; the config turns it into the float the field wants
    cfg = load_rollout_config(write(tmp_path, "sampling: {temperature: 1e-5, max_new_tokens: '8'}"))
    assert cfg.sampling.temperature == 1e-5 and cfg.sampling.max_new_tokens == 8


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

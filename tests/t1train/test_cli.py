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


@pytest.mark.parametrize(
    "text,match",
    [
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
    ],
)
def test_bad_rollout_configs_are_one_line_naming_the_file_and_key(tmp_path, capsys, text, match):
    config = write(tmp_path, text)
    assert main(["rollout", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"t1train: error: {config}: ") and re.search(match, err)


def test_yaml_numbers_arrive_as_numbers(tmp_path):
    # PyYAML (YAML 1.1) reads 1e-5 as a string; the config turns it into the float the field wants
    cfg = load_rollout_config(write(tmp_path, "sampling: {temperature: 1e-5, max_new_tokens: '8'}"))
    assert cfg.sampling.temperature == 1e-5 and cfg.sampling.max_new_tokens == 8


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--episodes", "0"], "argument --episodes: must be at least 1"),
        (["--resume", "--overwrite"], "not allowed with argument"),
    ],
)
def test_bad_rollout_arguments_are_refused(tmp_path, capsys, argv, match):
    with pytest.raises(SystemExit):
        main(["rollout", "--config", str(write(tmp_path, "episodes: 1")), *argv])
    assert match in capsys.readouterr().err


@needs_bwrap
@pytest.mark.parametrize(
    "env,match",
    [
        ("{tasks: [no-such-task]}", r"env: unknown task 'no-such-task'"),
        ("{kwargs: {command_timeout: 0}}", r"env\.kwargs: command_timeout must be a finite number of seconds > 0"),
        ("{kwargs: {max_turnz: 3}}", r"env\.kwargs\.max_turnz: unknown .*max_turns"),
        ("{backend: local, kwargs: {docker_host: 'tcp://x:2375'}}", r"env: .*docker_host takes an engine URL"),
        ("{kwargs: {tasks: hello-file}}", r"env\.kwargs\.tasks: unknown"),
    ],
)
def test_bad_env_settings_fail_before_the_model_loads(tmp_path, capsys, env, match):
    config = write(tmp_path, f"env: {env}\nengine: {{model: /no/such/model}}")
    assert main(["rollout", "--config", str(config)]) == 2  # the model path is never tried
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(match, err)


def test_an_existing_output_needs_resume_or_overwrite(tmp_path, capsys):
    out = tmp_path / "traj.jsonl"
    out.write_text('{"task_id": "x"}\n')
    config = write(tmp_path, f"env: {{tasks: [hello-file]}}\noutput: {out}")
    assert main(["rollout", "--config", str(config)]) == 2
    assert "already exists: pass --resume to finish that run" in capsys.readouterr().err
    assert out.read_text() == '{"task_id": "x"}\n'  # untouched
    assert main(["rollout", "--config", str(config), "--resume"]) == 2
    assert "a record without metadata.episode" in capsys.readouterr().err


@needs_bwrap
@pytest.mark.parametrize("engine", ["hf", "sglang"])
def test_rollout_writes_trajectories_and_prints_drift(tmp_path, capsys, tiny_engine, engine):
    url = ""
    server = None
    if engine == "sglang":
        from .engines.sglang_standin import StandInSGLangServer

        server = StandInSGLangServer(tiny_engine).start()
        url = f"\n  url: {server.url}"
    out = tmp_path / "traj.jsonl"
    cfg = write(
        tmp_path,
        f"""
engine:
  kind: {engine}
  model: tiny{url}
env: {{tasks: [hello-file]}}
episodes: 2
sampling: {{max_new_tokens: 16}}
rollout: {{max_turns: 3, return_routed_experts: true}}
output: {out}
""",
    )
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


def rollout_config(tmp_path, out, episodes=4, concurrency=2):
    return write(
        tmp_path,
        f"""
engine: {{kind: hf, model: tiny}}
env: {{tasks: [hello-file]}}
episodes: {episodes}
sampling: {{max_new_tokens: 8}}
rollout: {{max_turns: 1, concurrency: {concurrency}}}
output: {out}
""",
    )


def by_episode(trajectories):
    return sorted(trajectories, key=lambda t: t.metadata["episode"])


@needs_bwrap
@pytest.mark.slow
def test_resume_runs_only_the_missing_episodes_and_samples_what_one_run_would(tmp_path, capsys):
    out = tmp_path / "traj.jsonl"
    config = rollout_config(tmp_path, out)
    assert main(["rollout", "--config", str(config), "--episodes", "2"]) == 0  # as if stopped after two
    first = out.read_text().splitlines()
    assert main(["rollout", "--config", str(config), "--resume"]) == 0
    assert "wrote 2 trajectories to" in capsys.readouterr().out
    assert out.read_text().splitlines()[:2] == first  # the finished episodes are kept as they were
    resumed = by_episode(load_jsonl(out))
    assert [(t.metadata["episode"], t.seed) for t in resumed] == [(0, 0), (1, 1), (2, 2), (3, 3)]

    assert main(["rollout", "--config", str(config), "--resume"]) == 0  # nothing left to run
    assert "wrote 0 trajectories" in capsys.readouterr().out and len(load_jsonl(out)) == 4

    whole = tmp_path / "whole.jsonl"
    assert main(["rollout", "--config", str(config), "--output", str(whole)]) == 0
    assert [t.token_ids() for t in by_episode(load_jsonl(whole))] == [t.token_ids() for t in resumed]

    assert main(["rollout", "--config", str(config), "--overwrite", "--episodes", "1"]) == 0
    assert [t.metadata["episode"] for t in load_jsonl(out)] == [0]


@needs_bwrap
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_killed_rollout_keeps_its_finished_episodes_and_resume_completes_without_duplicates(tmp_path, sandbox_tmpdir):
    """SIGKILL a real ``t1train rollout`` once two episodes are on disk; the file loads, and --resume finishes the
    run without running (or writing) a finished episode again."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import warnings

    out = tmp_path / "traj.jsonl"
    config = rollout_config(tmp_path, out, episodes=6, concurrency=1)
    env = {**os.environ, "TMPDIR": str(sandbox_tmpdir)}  # the killed run's episode folders are removed after
    proc = subprocess.Popen(
        [sys.executable, "-m", "t1train", "rollout", "--config", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 600  # a guard against a hung run, not a measurement
    while not (out.exists() and out.read_bytes().count(b"\n") >= 2):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the rollout wrote fewer than two episodes in 10 minutes"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the kill may have torn the last line: that is what is being tested
        kept = load_jsonl(out)
    assert 2 <= len(kept) < 6
    assert main(["rollout", "--config", str(config), "--resume"]) == 0
    final = load_jsonl(out)
    episodes = [t.metadata["episode"] for t in final]
    assert sorted(episodes) == list(range(6))  # all of them, each once
    assert [t.to_dict() for t in final[: len(kept)]] == [t.to_dict() for t in kept]  # the finished ones untouched

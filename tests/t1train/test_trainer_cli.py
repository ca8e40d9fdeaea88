"""`t1train --config FILE.yaml` / `train` / `sft` / `eval`: config loading (fast) and one end-to-end run (slow)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from t1train.cli import build_parser, main
from t1train.config import build_t1_config, load_train_config

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny-cpu.yaml"


def test_tiny_cpu_config_builds_a_valid_t1_config():
    cfg = load_train_config(TINY)
    args = build_t1_config(cfg.train, output_dir="/tmp/unused")
    assert args.algorithm == "ppo" and args.critic_warmup_iterations > 0
    assert all((ROOT / t / "task.toml").exists() for t in args.tasks + cfg.eval.tasks + cfg.sft.tasks)
    assert not set(args.tasks) & set(cfg.sft.tasks)  # RL runs on an instance SFT never imitated


def test_unknown_keys_are_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"model": "tiny", "trian": {}}))
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['trian'\]"):
        load_train_config(bad)
    bad.write_text(yaml.safe_dump({"sft": {"max_step": 3}}))
    with pytest.raises(ValueError, match=r"sft: unknown key\(s\) \['max_step'\]"):
        load_train_config(bad)
    with pytest.raises(ValueError, match=r"train: unknown key\(s\) \['algo'\]"):
        build_t1_config({"algo": "ppo"})


def test_bad_config_is_a_clean_cli_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"train": {"algorithm": "dqn", "output_dir": str(tmp_path)}}))
    assert main(["--config", str(bad)]) == 2
    assert "algorithm must be one of" in capsys.readouterr().err


def test_parser_has_the_training_commands():
    parser = build_parser()
    for argv in (["train", "--config", "x"], ["sft", "--config", "x"], ["eval", "--config", "x"]):
        assert parser.parse_args(argv).func


@pytest.mark.slow
@pytest.mark.timeout(1200)  # ~4 min on a quiet 2-core machine: three 64-episode evaluations in the real env
def test_tiny_cpu_config_runs_end_to_end(tmp_path, capsys):
    """SFT warm-start, critic warm-start, two PPO steps with checkpoints, a held-out eval before and after."""
    out = tmp_path / "run"
    assert main(["train", "--config", str(TINY), "--max-steps", "2", "--output-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"before RL\s+passed \d", text) and re.search(r"after RL\s+passed \d", text)
    assert "critic warm-start:" in text
    assert (out / "value_model" / "value_head.pt").exists() and (out / "sft").is_dir()
    assert main(["eval", "--config", str(TINY), "--model", str(out), "--output-dir", str(tmp_path / "e")]) == 0
    assert re.search(r"eval\s+passed \d", capsys.readouterr().out)

"""`t1train --config FILE.yaml` / `train` / `sft` / `eval`: config loading and errors. The shipped config's end-to-end run
(SFT, critic warm-start, PPO, held-out evals, the health line, `t1train eval` on the result) is the learning test's,
tests/t1train/test_learning_curve.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from t1train.cli import build_parser, main
from t1train.config import build_t1_config, load_train_config

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "t1train" / "configs" / "tiny-cpu.yaml"


def test_tiny_cpu_config_builds_a_valid_t1_config():
    from t1env.families import parse_instance_id, split_of_seed

    cfg = load_train_config(TINY)
    args = build_t1_config(cfg.train, output_dir="/tmp/unused")
    assert args.algorithm == "ppo" and args.critic_warmup_iterations > 0 and args.truncated_turns == "reject"
    splits = {
        name: {split_of_seed(parse_instance_id(t)[1]) for t in tasks}
        for name, tasks in (("train", args.tasks), ("sft", cfg.sft.tasks), ("eval", cfg.eval.tasks))
    }
    assert splits == {"train": {"train"}, "sft": {"train"}, "eval": {"test"}}  # held out: never trained on


def test_unknown_keys_are_named_with_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"model": "tiny", "trian": {}}))
    with pytest.raises(ValueError, match=rf"^{bad}: trian: unknown key; did you mean 'train'\?"):
        load_train_config(bad)
    bad.write_text(yaml.safe_dump({"sft": {"max_step": 3}}))
    with pytest.raises(ValueError, match=rf"^{bad}: sft\.max_step: unknown key; did you mean 'max_steps'\?"):
        load_train_config(bad)
    bad.write_text(yaml.safe_dump({"train": {"algo": "ppo"}}))
    with pytest.raises(ValueError, match=rf"^{bad}: train\.algo: unknown key; did you mean 'algorithm'\?"):
        load_train_config(bad)
    with pytest.raises(ValueError, match=r"^train\.algo: unknown key"):
        build_t1_config({"algo": "ppo"})


def test_yaml_numbers_arrive_as_the_fields_types(tmp_path):
    config = tmp_path / "x.yaml"
    config.write_text("sft: {learning_rate: 1e-5}\ntrain: {learning_rate: 1e-5, max_steps: '3', output_dir: out}\n")
    assert yaml.safe_load(config.read_text())["train"]["learning_rate"] == "1e-5"  # what PyYAML hands over
    cfg = load_train_config(config)
    assert cfg.sft.learning_rate == 1e-5 and cfg.train["learning_rate"] == 1e-5 and cfg.train["max_steps"] == 3
    assert build_t1_config(cfg.train).learning_rate == 1e-5


@pytest.mark.parametrize(
    "text,match",
    [
        ("train: {learning_rate: fast}", r"train\.learning_rate: Input should be a valid number"),
        ("train: {tasks: hello-file}", r"train\.tasks: Input should be a valid list"),
        ("train: {max_steps: 1.5}", r"train\.max_steps: Input should be a valid integer"),
        ("sft: {learning_rate: -1}", r"sft\.learning_rate: Input should be greater than 0"),
        ("sft: {tasks: []}", r"sft\.tasks: is empty"),
        ("eval: {seeds: []}", r"eval\.seeds: List should have at least 1 item"),
        ("torch_threads: 0", r"torch_threads: Input should be greater than or equal to 1"),
    ],
)
def test_bad_types_are_one_line_naming_the_file_and_key(tmp_path, capsys, text, match):
    config = tmp_path / "bad.yaml"
    config.write_text(text + "\n")
    assert main(["train", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"t1train: error: {config}: ") and re.search(match, err)


def test_bad_config_is_a_clean_cli_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"train": {"algorithm": "dqn", "output_dir": str(tmp_path)}}))
    assert main(["--config", str(bad)]) == 2
    assert f"{bad}: train: algorithm must be one of" in capsys.readouterr().err


def test_resume_without_a_checkpoint_says_so_before_any_work(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"train": {"output_dir": str(tmp_path / "run")}}))
    assert main(["train", "--config", str(config), "--resume"]) == 2
    assert "--resume: no checkpoint in" in capsys.readouterr().err


def test_parser_has_the_training_commands():
    parser = build_parser()
    for argv in (["train", "--config", "x"], ["sft", "--config", "x"], ["eval", "--config", "x"]):
        assert parser.parse_args(argv).func


def test_an_unknown_task_is_an_error_before_any_episode(tmp_path, capsys):
    """A typo in `tasks` used to play every episode as an error and exit 0 with a reward of 0."""
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump({"model": "tiny", "train": {"output_dir": str(tmp_path / "run"), "tasks": ["no-such-task"]}})
    )
    assert main(["train", "--config", str(config)]) == 2
    assert "unknown task 'no-such-task'" in capsys.readouterr().err
    assert not (tmp_path / "run" / "trajectories.jsonl").exists()

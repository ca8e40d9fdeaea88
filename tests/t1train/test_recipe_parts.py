"""The parts of the learnable recipe (issue 18): per-line oracle turns, oracle episodes of instances that share an
instruction, rejected truncated turns, ``FAMILY@SPLIT:N`` task lists and shipped configs by name."""

from __future__ import annotations

import pytest

from t1train.engines.base import FINISH_LENGTH, FINISH_STOP, Generation, SamplingParams
from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner

from .conftest import ScriptedEnv


def test_oracle_turns_split_a_solution_into_one_command_per_turn():
    from t1train.sft import oracle_turns

    assert oracle_turns("cat a\n\nmkdir b") == ["```bash\ncat a\n\nmkdir b\n```", "SUBMIT"]
    assert oracle_turns("cat a\n\nmkdir b", "lines") == ["```bash\ncat a\n```", "```bash\nmkdir b\n```", "SUBMIT"]
    with pytest.raises(ValueError, match="oracle turns must be one of"):
        oracle_turns("ls", "paragraphs")


def test_oracle_episodes_of_instances_with_one_instruction_get_their_own_solutions(tiny):
    """Every chain instance has the same instruction; each episode must still replay its own instance's oracle,
    one command per turn, and be resolved by the real verifier."""
    from t1train.rollout import RolloutConfig as RC
    from t1train.sft import oracle_trajectories

    _, tok = tiny
    trajs = oracle_trajectories(tok, ["chain@1", "chain@2", "chain@6"], [0], rollout=RC(max_turns=2), turns="lines")
    assert len(trajs) == 3 and all(t.checks["resolved"] for t in trajs)
    by_task = {t.task_id: [m["content"] for m in t.messages if m["role"] == "assistant"] for t in trajs}
    assert by_task["chain-1"] == [
        "```bash\ncat name.txt\n```",
        "```bash\nmkdir red\n```",
        "```bash\ncat count.txt\n```",
        "```bash\necho 2 > red/notes.txt\n```",
        "SUBMIT",
    ]
    assert by_task["chain-6"][3] == "```bash\necho 7 > red/notes.txt\n```"  # red 6 is a test pair
    assert by_task["chain-2"][3] == "```bash\necho 3 > red/notes.txt\n```"


def test_sft_demos_play_each_flawed_demonstration_beside_the_oracle_and_keep_its_score(tiny):
    """``demos=True``: every task's solution/demos/*.sh is played too, in the same batch as the oracle, and kept
    whatever the verifier gives it (chain's sloppy demonstrator: 3, 3 and 2 of 4 checks); without it, only the
    oracle's resolved episodes."""
    from t1train.rollout import RolloutConfig as RC
    from t1train.sft import oracle_trajectories

    _, tok = tiny
    trajs = oracle_trajectories(tok, ["chain@1", "chain@2"], [0], rollout=RC(max_turns=2), turns="lines", demos=True)

    def acts(t):
        return [
            m["content"].removeprefix("```bash\n").removesuffix("\n```") for m in t.messages if m["role"] == "assistant"
        ]

    played = sorted((t.task_id, t.checks["passed"], *acts(t)[1:4]) for t in trajs)
    assert played == [
        ("chain-1", 2, "mkdir tmp red", "cat name.txt", "echo red > red/notes.txt"),
        ("chain-1", 3, "mkdir red", "cat name.txt", "echo red > red/notes.txt"),
        ("chain-1", 3, "mkdir tmp red", "cat count.txt", "echo 2 > red/notes.txt"),
        ("chain-1", 4, "mkdir red", "cat count.txt", "echo 2 > red/notes.txt"),
        ("chain-2", 2, "mkdir tmp red", "cat name.txt", "echo red > red/notes.txt"),
        ("chain-2", 3, "mkdir red", "cat name.txt", "echo red > red/notes.txt"),
        ("chain-2", 3, "mkdir tmp red", "cat count.txt", "echo 3 > red/notes.txt"),
        ("chain-2", 4, "mkdir red", "cat count.txt", "echo 3 > red/notes.txt"),
    ]
    assert len(oracle_trajectories(tok, ["chain@1", "chain@2"], [0], rollout=RC(max_turns=2), turns="lines")) == 2


def test_oracle_engine_keyed_by_episode_needs_the_runs_sampling_seed(tiny):
    """Scripts given per episode are told apart by the per-episode sampling seed; a runner that samples without
    that seed gets an error that says what to do, not another episode's script."""
    from t1train.sft import OracleEngine

    _, tok = tiny
    engine = OracleEngine(tok, [["```bash\nls\n```", "SUBMIT"], ["```bash\npwd\n```", "SUBMIT"]])
    from t1train.engines.base import episode_seed

    first, second = engine.generate(
        [[1], [1]], SamplingParams(seed=0), seeds=[episode_seed(0, 1, 0), episode_seed(0, 0, 1)]
    )
    assert tok.decode(first.token_ids, skip_special_tokens=True) == "```bash\npwd\n```"
    assert tok.decode(second.token_ids, skip_special_tokens=True) == "SUBMIT"
    with pytest.raises(KeyError, match="SamplingParams"):
        engine.generate([[1]], SamplingParams())


class _CutEngine:
    """Returns one scripted turn per call: the text's ids, finished by ``finish`` (no real sampling)."""

    max_concurrency = 1

    def __init__(self, tok, turns):
        self.tok, self.turns, self.calls = tok, turns, 0

    def generate(self, prompts, sampling, return_routed_experts=False, **kwargs):
        out = []
        for _ in prompts:
            text, finish = self.turns[min(self.calls, len(self.turns) - 1)]
            self.calls += 1
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            if finish == FINISH_STOP:
                ids = ids + [self.tok.eos_token_id]
            out.append(
                Generation(
                    ids, [0.0] * len(ids), finish, self.tok.eos_token_id if finish == FINISH_STOP else None, None, "v0"
                )
            )
        return out


@pytest.mark.parametrize("mode", ["act", "reject"])
def test_a_turn_cut_at_the_token_limit_is_rejected_or_run(tiny, mode):
    _, tok = tiny
    turns = [
        ("```bash\ntouch a\n```bash\n```bash", FINISH_LENGTH),
        ("```bash\ntouch b\n```", FINISH_STOP),
        ("SUBMIT", FINISH_STOP),
    ]
    envs = []

    def make_env(task):
        envs.append(ScriptedEnv(task))
        return envs[-1]

    runner = RolloutRunner(
        _CutEngine(tok, turns),
        tok,
        make_env,
        SamplingParams(max_new_tokens=8),
        RolloutConfig(max_turns=5, truncated_turns=mode),
    )
    (traj,) = runner.run([EpisodeSpec("scripted", 0)])
    if mode == "act":
        assert envs[0].commands == ["touch a", "touch b"] and traj.reward == 2.0
    else:
        assert envs[0].commands == ["touch b"] and traj.reward == 1.0
        cut = traj.messages[traj.messages.index({"role": "assistant", "content": turns[0][0]}) + 1]["content"]
        assert "cut at the token limit" in cut
    assert traj.num_turns == 3  # the rejected turn still counts


def test_rollout_and_trainer_configs_reject_unknown_truncation_modes():
    from t1train.trainer import T1Config

    with pytest.raises(ValueError, match="truncated_turns must be 'act' or 'reject'"):
        RolloutConfig(truncated_turns="drop")
    with pytest.raises(ValueError, match="truncated_turns must be 'act' or 'reject'"):
        T1Config(output_dir="/tmp/x", truncated_turns="drop")


def test_family_split_references_expand_in_configs(tmp_path):
    from t1train.config import load_train_config
    from t1train.trainer import T1Config

    args = T1Config(output_dir=str(tmp_path), tasks=["chain@train:5"], eval_tasks=["chain@test:2", "hello-file"])
    assert args.tasks == ["chain@1", "chain@2", "chain@3", "chain@4", "chain@6"]
    assert args.eval_tasks == ["chain@0", "chain@5", "hello-file"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("sft:\n  tasks: [chain@valid:3]\ntrain: {}\n")
    with pytest.raises(ValueError) as err:
        load_train_config(bad)
    assert str(err.value).splitlines() == [
        f"{bad}: sft.tasks: 'chain@valid:3': write FAMILY@train:N or FAMILY@test:N (N >= 1 instances of that split)"
    ]
    bad.write_text("eval:\n  tasks: [nosuch@train:3]\n")
    with pytest.raises(ValueError, match=r"eval\.tasks: unknown family 'nosuch'"):
        load_train_config(bad)


def test_shipped_configs_load_by_name_and_a_missing_file_is_named(tmp_path, monkeypatch):
    from t1train.config import BUILTIN_CONFIGS, build_t1_config, load_train_config

    monkeypatch.chdir(tmp_path)  # not the repository: the name must resolve inside the package
    cfg = load_train_config("tiny-cpu")
    tasks = build_t1_config({**cfg.train, "output_dir": str(tmp_path)}).tasks
    assert cfg.sft.turns == "lines" and tasks[0] == "chain@1" and len(tasks) == len(set(tasks)) == 43
    assert len(cfg.eval.tasks) == 11 and all(int(t.split("@")[1]) % 5 == 0 for t in cfg.eval.tasks)
    assert load_train_config("tiny-cpu.yaml").train == cfg.train
    assert (BUILTIN_CONFIGS / "tiny-cpu.yaml").is_file()
    (tmp_path / "tiny-cpu.yaml").write_text("model: tiny\n")  # a file here wins over the shipped one
    assert load_train_config("tiny-cpu.yaml").sft is None
    with pytest.raises(ValueError, match="nope.yaml"):
        load_train_config("nope.yaml")

"""TerminalToolEnv is what TRL's GRPOTrainer(environment_factory=...) expects."""

import copy
import inspect

import pytest
from transformers.utils import get_json_schema

from t1env.agent.protocol import TOOLS
from t1env.agent.reference import oracle_command
from t1env.registry import get_task
from t1env.tool_env import TerminalToolEnv


def test_trl_sees_reset_get_reward_and_the_tools():
    # TRL lists functions on the class: `reset`, `get_reward`, and public methods as tools
    members = [n for n, _ in inspect.getmembers(TerminalToolEnv, predicate=inspect.isfunction) if not n.startswith("_")]
    assert sorted(members) == ["bash", "get_reward", "keys", "reset", "submit"]
    schema = get_json_schema(TerminalToolEnv.bash)["function"]
    assert schema["name"] == "bash"
    assert schema["parameters"]["properties"]["command"]["type"] == "string"
    assert schema["parameters"]["required"] == ["command"]
    assert get_json_schema(TerminalToolEnv.submit)["function"]["parameters"]["properties"] == {}


def test_the_tools_are_the_protocols():
    """The tool env offers the agent protocol's tools (t1env.agent.protocol.TOOLS): same names, same required
    arguments, and no argument the protocol does not know."""
    for tool in TOOLS:
        spec = tool["function"]
        schema = get_json_schema(getattr(TerminalToolEnv, spec["name"]))["function"]
        assert schema["parameters"].get("required", []) == spec["parameters"].get("required", [])
        assert set(schema["parameters"]["properties"]) <= set(spec["parameters"]["properties"])


def test_rollout_reward_is_passing_check_count():
    env = TerminalToolEnv()
    prompt = env.reset(task="hello-file", prompt=[{"role": "user", "content": "go"}])
    assert "greetings" in prompt
    out = env.bash("echo $((40+2)); false")
    assert out.startswith("42\n") and out.endswith("[exit code: 1]")
    env.bash(oracle_command(get_task("hello-file")))
    assert env.get_reward() == 5.0
    assert "over" in env.bash("ls")


def test_reward_without_submit_runs_the_verifier():
    env = TerminalToolEnv(task="hello-file", reward_mode="fraction")
    env.reset()
    env.bash("mkdir -m 750 /app/greetings")
    assert 0 < env.get_reward() < 1


def test_an_episode_holds_one_sandbox_and_frees_it_when_it_ends(live_sandboxes):
    before = live_sandboxes()
    env = TerminalToolEnv()
    env.reset(task="hello-file")
    running = live_sandboxes()
    assert running[1] == before[1] + 1 and running[0] > before[0]  # one sandbox: no prestarted spare
    env.bash("true")
    env.get_reward()
    assert live_sandboxes() == before  # the episode is over: its sandbox is gone, nothing waits for the next one
    env.reset(task="hello-file")  # TRL reuses instances: reset, episode, reward, reset...
    assert live_sandboxes()[1] == before[1] + 1
    env.close()
    env.close()  # idempotent
    assert live_sandboxes() == before


def test_close_frees_the_sandbox_of_an_unfinished_episode(live_sandboxes):
    before = live_sandboxes()
    env = TerminalToolEnv(task="hello-file")
    env.reset()
    env.bash("sleep 1000 &")
    env.close()
    assert live_sandboxes() == before
    assert "over" in env.bash("ls")


def test_close_is_not_offered_to_the_model_as_a_tool():
    # TRL lists the class's public functions as tools; close must work but stay off that list
    assert "close" not in [n for n, _ in inspect.getmembers(TerminalToolEnv, predicate=inspect.isfunction)]
    assert callable(TerminalToolEnv(task="hello-file").close)


def test_trl_grpo_trainer_trains_a_step_with_environment_factory(live_sandboxes, tmp_path, monkeypatch):
    """The README's claim, run: TRL's own GRPOTrainer(environment_factory=TerminalToolEnv) trains one step of the
    tiny MoE on CPU. Each rollout resets a real episode of the row's task and is scored by its verifier; nothing is
    left running. The random model never emits a well-formed tool call, so the tool loop itself is not reached."""
    trl = pytest.importorskip("trl")
    from datasets import Dataset
    from trl.chat_template_utils import qwen2_5_chat_template

    from t1train.models import tiny_moe

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tokenizer = tiny_moe()
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = qwen2_5_chat_template  # a tool-calling template TRL knows how to parse
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        num_generations=2,
        per_device_train_batch_size=2,
        max_completion_length=16,
        bf16=False,
        report_to="none",
        save_strategy="no",
        activation_checkpointing=True,
        dataloader_pin_memory=False,
        disable_tqdm=True,
        seed=0,
    )
    data = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": "Solve the task in the terminal."}]] * 2, "task": ["hello-file"] * 2}
    )
    before = live_sandboxes()
    trainer = trl.GRPOTrainer(
        model=copy.deepcopy(model),
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        environment_factory=TerminalToolEnv,
    )
    trainer.train()
    envs = [env for pool in trainer._environment_pool.values() for env in pool]
    try:
        assert trainer.state.global_step == 1
        assert trainer.state.log_history[0]["rewards/TerminalToolEnv/mean"] == 0.0  # nothing done, nothing passes
        assert len(envs) == 2 and all(env.last_info.get("task_id") == "hello-file" for env in envs)
        assert all(env.last_info.get("total") == 5 for env in envs)  # each episode went through the verifier
        assert live_sandboxes() == before  # every episode ended and freed its sandbox
    finally:
        for env in envs:
            env.close()

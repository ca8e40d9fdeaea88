"""TerminalToolEnv is what TRL's GRPOTrainer(environment_factory=...) expects."""

import inspect

from transformers.utils import get_json_schema

from t1env.agents import oracle_command
from t1env.registry import get_task
from t1env.tool_env import TerminalToolEnv


def test_trl_sees_reset_get_reward_and_the_tools():
    # TRL lists functions on the class: `reset`, `get_reward`, and public methods as tools
    members = [n for n, _ in inspect.getmembers(TerminalToolEnv, predicate=inspect.isfunction) if not n.startswith("_")]
    assert sorted(members) == ["bash", "get_reward", "reset", "submit"]
    schema = get_json_schema(TerminalToolEnv.bash)["function"]
    assert schema["name"] == "bash"
    assert schema["parameters"]["properties"]["command"]["type"] == "string"
    assert schema["parameters"]["required"] == ["command"]
    assert get_json_schema(TerminalToolEnv.submit)["function"]["parameters"]["properties"] == {}


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

"""TerminalEnv through the Gymnasium API: the checker, vector envs, episodes, limits, failures."""

import time

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import t1env  # noqa: F401  (registers T1Terminal-v0)
from t1env.env import SetupError, TerminalEnv


def test_passes_gymnasium_env_checker():
    env = gym.make("T1Terminal-v0", task="hello-file")
    check_env(env.unwrapped)
    env.close()


def test_make_without_import_by_module_prefix():
    env = gym.make("t1env:T1Terminal-v0", task="hello-file")
    assert isinstance(env.unwrapped, TerminalEnv)
    env.close()


def test_issue_example_episode_oracle_gets_full_marks():
    from t1env.agent.reference import oracle_command

    env = gym.make("T1Terminal-v0", task="hello-file")
    obs, info = env.reset(seed=0)
    assert obs == env.unwrapped.task.instruction and info["task_id"] == "hello-file"
    obs, reward, terminated, truncated, info = env.step("ls -la")
    assert reward == 0.0 and not terminated and not truncated
    assert info["exit_code"] == 0 and info["duration"] > 0 and info["output_truncated"] is False
    env.step(oracle_command(env.unwrapped.task))
    obs, reward, terminated, truncated, info = env.step({"submit": True})
    assert terminated and not truncated
    assert reward == info["passed"] == info["total"] == 5 and info["resolved"]
    assert all(c["passed"] for c in info["checks"])
    env.close()
    env.close()  # idempotent


def test_async_vector_env_with_four_envs():
    envs = gym.vector.AsyncVectorEnv(
        [lambda: gym.make("T1Terminal-v0", task="hello-file") for _ in range(4)], shared_memory=False
    )
    obs, info = envs.reset(seed=0)
    assert len(obs) == 4 and all("greetings" in o for o in obs)
    obs, rew, term, trunc, info = envs.step(["echo $((6*7))"] * 4)
    assert list(obs) == ["42\n"] * 4
    obs, rew, term, trunc, info = envs.step([{"submit": True}] * 4)
    assert list(term) == [True] * 4 and list(rew) == [0.0] * 4
    envs.close()


def test_reward_modes_give_count_fraction_binary(make_task):
    path = str(make_task())
    rewards = {}
    for mode in ("count", "fraction", "binary"):
        env = TerminalEnv(task=path, reward_mode=mode)
        env.reset(seed=0)
        env.step("printf 'hello\\n\\n' > /app/out.txt")  # 2 of 3 checks pass
        _, rewards[mode], terminated, _, info = env.step({"submit": True})
        assert terminated and (info["passed"], info["total"]) == (2, 3)
        env.close()
    assert rewards == pytest.approx({"count": 2.0, "fraction": 2 / 3, "binary": 0.0})


def test_max_turns_truncates_and_still_verifies(make_task):
    env = TerminalEnv(task=str(make_task()), max_turns=3)
    env.reset(seed=0)
    assert env.step("echo hello > /app/out.txt")[3] is False
    assert env.step("true")[3] is False
    obs, reward, terminated, truncated, info = env.step("true")
    assert truncated and not terminated and info["end_reason"] == "max_turns" and reward == 3.0
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("true")
    env.close()


def test_long_horizon_300_turns(make_task):
    env = TerminalEnv(task=str(make_task()), max_turns=400)
    env.reset(seed=0)
    for i in range(300):
        obs, *_ = env.step(f"echo {i} >> /tmp/log")
    obs, reward, terminated, truncated, info = env.step("wc -l < /tmp/log")
    assert obs == "300\n" and not truncated
    env.close()


def test_agent_timeout_truncates(make_task):
    env = TerminalEnv(task=str(make_task()), agent_timeout=0.5)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("sleep 1")
    assert truncated and info["end_reason"] == "agent_timeout"
    env.close()


def test_reset_picks_task_from_seed_and_options_pin(make_task, tmp_path):
    a, b = make_task("task-a"), make_task("task-b")
    env = TerminalEnv(tasks=[str(a), str(b)])
    picks = {s: env.reset(seed=s)[1]["task_id"] for s in range(8)}
    assert set(picks.values()) == {"task-a", "task-b"}
    assert all(env.reset(seed=s)[1]["task_id"] == picks[s] for s in range(8))
    assert env.reset(seed=0, options={"task": str(b)})[1]["task_id"] == "task-b"
    env.close()


def test_keys_action_and_render_ansi():
    env = gym.make("T1Terminal-v0", task="hello-file", render_mode="ansi")
    env.reset(seed=0)
    obs, *_ = env.step({"keys": ["python3 -q", "Enter", "print(6*7)", "Enter"], "wait": 2})
    deadline = time.monotonic() + 20
    while "42" not in obs and time.monotonic() < deadline:  # a slow machine: look again, as an agent would
        obs, *_ = env.step({"keys": [], "wait": 1})
    assert "42" in obs
    assert "42" in env.render()
    env.step({"keys": ["C-d"]})
    env.step({"command": "echo hi", "timeout": 5})
    assert env.render() == "$ echo hi\nhi\n"
    env.close()


def test_invalid_actions_raise_clear_errors():
    env = gym.make("T1Terminal-v0", task="hello-file")
    env.reset(seed=0)
    for bad in ({"submit": False}, {"cmd": "ls"}, 42, ""):
        with pytest.raises(ValueError, match="action"):
            env.step(bad)
    env.close()


def test_observation_and_action_spaces_are_honest():
    env = TerminalEnv(task="hello-file")
    assert env.observation_space.contains("any unicode ✓ text\n\twith tabs")
    assert not env.observation_space.contains("bell\x07")
    assert env.action_space.contains("ls") and env.action_space.contains({"submit": True})
    assert env.action_space.contains({"keys": ["C-c"], "wait": 1.0})
    assert not env.action_space.contains({"submit": False}) and not env.action_space.contains(3)
    assert env.action_space.sample().startswith("echo ")


def test_sandbox_killed_mid_episode_truncates_with_reason(make_task):
    env = TerminalEnv(task=str(make_task()))
    env.reset(seed=0)
    env.sandbox._init.kill()  # the whole sandbox dies under the agent
    env.sandbox._init.wait()
    deadline = time.monotonic() + 10  # the kernel empties the pid namespace asynchronously
    while env.shell.child.isalive() and time.monotonic() < deadline:
        time.sleep(0.01)
    obs, reward, terminated, truncated, info = env.step("echo hi")
    assert truncated and "sandbox" in info["error"] and "[t1]" in obs
    obs, info = env.reset(seed=0)  # and the next episode works
    assert env.step("echo ok")[0] == "ok\n"
    env.close()


def test_failing_setup_script_names_the_task(make_task):
    d = make_task(env_files={"setup.sh": "echo preparing; echo broken >&2; exit 3\n"})
    env = TerminalEnv(task=str(d))
    with pytest.raises(SetupError, match=r"setup.sh: setup exited with 3: .*broken"):
        env.reset(seed=0)
    assert env.sandbox is None  # nothing left running
    env.close()


def test_environment_files_and_setup_are_in_place(make_task):
    d = make_task(env_files={"data/in.txt": "payload\n", "setup.sh": "echo made-by-setup > /app/made.txt\n"})
    env = TerminalEnv(task=str(d))
    env.reset(seed=0)
    obs, *_ = env.step("cat /app/data/in.txt /app/made.txt; ls -a /app")
    assert obs.startswith("payload\nmade-by-setup\n") and "setup.sh" not in obs
    env.close()


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="backend must be one of"):
        TerminalEnv(task="hello-file", backend="vm")
    with pytest.raises(ValueError, match="reward_mode must be one of"):
        TerminalEnv(task="hello-file", reward_mode="max")
    with pytest.raises(t1env.TaskError, match="unknown task 'nope'"):
        TerminalEnv(task="nope")


@pytest.mark.parametrize(
    "action",
    [
        {"command": "true", "timeout": 0},
        {"command": "true", "timeout": -1},
        {"command": "true", "timeout": float("nan")},
        {"command": "true", "timeout": float("inf")},
        {"command": "true", "timeout": "5"},
        {"command": "true", "timeout": True},
        {"keys": ["a"], "wait": 0},
        {"keys": ["a"], "wait": float("nan")},
        {"keys": ["a"], "wait": "1"},
    ],
)
def test_timeout_and_wait_must_be_finite_positive_seconds(action):
    env = TerminalEnv(task="hello-file")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action: (timeout|wait) must be a finite number of seconds > 0"):
        env.step(action)
    assert env.turn == 0  # refused before the turn counter moved
    assert env.step({"command": "echo ok", "timeout": 5})[4]["turn"] == 1
    env.close()


def test_timeout_and_wait_are_bounded_by_the_agent_time_limit():
    env = TerminalEnv(task="hello-file", agent_timeout=30)
    env.reset(seed=0)
    for action in ({"command": "true", "timeout": 31}, {"keys": [], "wait": 1e9}):
        with pytest.raises(ValueError, match=r"over this episode's agent time limit \(30 s, agent_timeout\)"):
            env.step(action)
    assert env.turn == 0
    obs, _, _, _, info = env.step({"command": "echo ok", "timeout": 30})
    assert obs == "ok\n" and info["turn"] == 1
    assert env.step({"command": "echo ok", "timeout": None})[0] == "ok\n"  # None: the task's command timeout
    env.close()


def test_keys_list_has_a_length_cap():
    from t1env.spaces import MAX_KEYS

    env = TerminalEnv(task="hello-file")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=f"keys: {MAX_KEYS + 1} items, more than {MAX_KEYS}"):
        env.step({"keys": ["a"] * (MAX_KEYS + 1)})
    assert env.turn == 0
    assert env.action_space.contains({"keys": ["a"] * MAX_KEYS})
    env.close()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(tasks="hello-file"), r"tasks= takes a list, got the single value 'hello-file': use task='hello-file'"),
        (dict(task="hello-file", task_dirs="tasks"), r"task_dirs= takes a list.*use task_dirs=\['tasks'\]"),
        (dict(tasks=["hello-file", 3]), r"tasks= takes a list of strings, got an item 3"),
        (dict(task=["hello-file"]), r"task= takes one task id.*use tasks="),
        (dict(task="hello-file", command_timeout=0), r"command_timeout must be a finite number of seconds > 0"),
        (dict(task="hello-file", agent_timeout=float("inf")), r"agent_timeout must be a finite number"),
        (dict(task="hello-file", verifier_timeout="60"), r"verifier_timeout must be a finite number"),
        (dict(task="hello-file", max_output_bytes=0), r"max_output_bytes must be an integer >= 1"),
        (dict(task="hello-file", max_output_bytes=1.5), r"max_output_bytes must be an integer >= 1"),
        (dict(task="hello-file", max_turns="10"), r"max_turns must be an integer >= 1"),
        (dict(task="hello-file", prestart="no"), r"prestart must be True or False"),
    ],
)
def test_make_kwargs_are_validated_with_a_message_that_says_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gym.make("T1Terminal-v0", **kwargs)

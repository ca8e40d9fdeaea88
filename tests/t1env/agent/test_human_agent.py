"""``t1env run --agent human``: the human reads what a model reads (the protocol's observation text)."""

import io

from t1env.agent.protocol import format_observation
from t1env.agent.reference import HumanAgent, run_episode
from t1env.env import TerminalEnv


def test_the_human_sees_the_models_observations():
    stdin, stdout = io.StringIO("echo hi; false\nseq 1 300\n:submit\n"), io.StringIO()
    with TerminalEnv(task="hello-file", prestart=False) as env:
        episode = run_episode(env, HumanAgent(stdin, stdout, max_observation_chars=100))
    assert episode.terminated and episode.turns == 2 and episode.info["passed"] == 0
    screens = stdout.getvalue().split("t1$ ")
    assert screens[0].startswith(env.task.instruction.strip()[:40])  # the instruction, in full
    assert screens[1] == "hi\n[exit code: 1]\n"
    long = "".join(f"{i}\n" for i in range(1, 301))
    assert screens[2] == format_observation(long, {"exit_code": 0}, 100) + "\n"
    assert "characters cut" in screens[2]


def test_typed_lines_are_actions():
    assert HumanAgent.parse(":keys q Enter\n").to_env() == {"keys": ["q", "Enter"], "wait": 1.0}
    assert HumanAgent.parse(":submit\n").to_env() == HumanAgent.parse("").to_env() == {"submit": True}
    assert HumanAgent.parse("ls -la\n").to_env() == {"command": "ls -la"}

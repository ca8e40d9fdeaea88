"""The shell under load keeps its bounds: huge output gives a bounded observation and the next command works;
thousands of commands in one episode neither break it nor grow the driver's memory. Memory and sizes are
asserted, never timings (``bench/shell_load.py`` measures those)."""

from __future__ import annotations

import pytest

from t1env import leaks
from t1env.env import TerminalEnv


@pytest.fixture
def env(live_sandboxes):
    e = TerminalEnv(task="hello-file", max_turns=20_000, agent_timeout=3600.0)
    e.reset(seed=0)
    yield e
    e.close()
    assert live_sandboxes() == (0, 0)


def _huge_output_is_bounded(env: TerminalEnv, mib: int) -> None:
    env.step("true")
    before = leaks.rss_mb()
    leaks.reset_peak_rss()
    obs, _, _, trunc, info = env.step({"command": f"yes | head -c {mib}M; echo tail-marker", "timeout": 1800})
    peak = leaks.peak_rss_mb()
    assert not trunc and info["exit_code"] == 0
    assert info["output_truncated"]
    assert len(obs) <= 2 * env.max_output_bytes  # head and tail of the output, t1's note; not mib MiB
    assert obs.startswith("y\ny\n") and obs.rstrip().endswith("tail-marker") and "bytes of output truncated" in obs
    # nothing near the output's size was ever resident: it streamed through a bounded buffer
    assert peak - before < 64, f"driver RSS peaked {peak - before:.1f} MiB above its start for {mib} MiB of output"
    nxt, *_ = env.step("echo next-ok; pwd")
    assert nxt == "next-ok\n/app\n"


def test_50_mib_of_output_gives_a_bounded_observation_and_a_working_next_command(env):
    _huge_output_is_bounded(env, 50)


@pytest.mark.slow
def test_1_gib_of_output_gives_a_bounded_observation_and_a_working_next_command(env):
    _huge_output_is_bounded(env, 1024)


@pytest.mark.slow
def test_10000_commands_in_one_episode_keep_working_and_memory_flat(env):
    env.step("X=kept")
    for i in range(1000):  # warm: buffers, caches and the emulator reach their working size
        obs, *_ = env.step(f"echo {i}")
        assert obs == f"{i}\n"
    warm = leaks.rss_mb()
    for i in range(1000, 10_000):
        obs, _, term, trunc, _ = env.step(f"echo {i}")
        assert obs == f"{i}\n" and not term and not trunc
    grown = leaks.rss_mb() - warm
    assert grown < 20, f"driver RSS grew {grown:.1f} MiB over 9,000 commands"
    obs, *_ = env.step("echo $X; pwd")
    assert obs == "kept\n/app\n"
    assert env.turn == 10_002

"""The shell under load keeps its bounds: huge output gives a bounded observation and the next command works;
thousands of commands in one episode neither break it nor grow the driver's memory. Memory and sizes are
asserted, never timings (``bench/shell_load.py`` measures those).

The driver's memory is a whole process's (RSS, its peak), so each episode runs in a fresh interpreter of its own
(:data:`DRIVER`): in the test process, what earlier tests left running (pools, reapers, servers) would allocate in
the same RSS. The driver reports what it measured and saw as JSON; the assertions are here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DRIVER = r"""
import json, sys
from t1env.tools import leaks
from t1env.env import TerminalEnv

what, n = sys.argv[1], int(sys.argv[2])
env = TerminalEnv(task="hello-file", max_turns=20_000, agent_timeout=3600.0)
env.reset(seed=0)
out = {"max_output_bytes": env.max_output_bytes}
if what == "huge":
    env.step("true")
    before = leaks.rss_mb()
    leaks.reset_peak_rss()
    obs, _, _, trunc, info = env.step({"command": f"yes | head -c {n}M; echo tail-marker", "timeout": 1800})
    out.update(rise_mb=leaks.peak_rss_mb() - before, obs=obs, truncated=trunc, exit_code=info["exit_code"],
               output_truncated=info["output_truncated"])
else:  # n commands
    env.step("X=kept")
    wrong = []
    for i in range(1000):  # warm: buffers, caches and the emulator reach their working size
        obs, *_ = env.step(f"echo {i}")
        if obs != f"{i}\n":
            wrong.append((i, obs))
    warm = leaks.rss_mb()
    for i in range(1000, n):
        obs, _, term, trunc, _ = env.step(f"echo {i}")
        if obs != f"{i}\n" or term or trunc:
            wrong.append((i, obs))
    out.update(grown_mb=leaks.rss_mb() - warm, wrong=wrong[:5])
out["next"] = env.step("echo next-ok; pwd" if what == "huge" else "echo $X; pwd")[0]
out["turn"] = env.turn
env.close()
out["left"] = leaks.snapshot().processes  # the sandbox's processes, once closed
print(json.dumps(out))
"""


def _drive(sandbox_tmpdir: Path, what: str, n: int) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, what, str(n)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(sandbox_tmpdir)},
        timeout=3600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["left"] == 0 and list(sandbox_tmpdir.glob("t1-sbx-*")) == []  # the closed env left nothing
    return out


def _huge_output_is_bounded(sandbox_tmpdir: Path, mib: int) -> None:
    out = _drive(sandbox_tmpdir, "huge", mib)
    obs = out["obs"]
    assert not out["truncated"] and out["exit_code"] == 0
    assert out["output_truncated"]
    assert len(obs) <= 2 * out["max_output_bytes"]  # head and tail of the output, t1's note; not mib MiB
    assert obs.startswith("y\ny\n") and obs.rstrip().endswith("tail-marker") and "bytes of output truncated" in obs
    # nothing near the output's size was ever resident: it streamed through a bounded buffer
    assert out["rise_mb"] < 64, f"driver RSS peaked {out['rise_mb']:.1f} MiB above its start for {mib} MiB of output"
    assert out["next"] == "next-ok\n/app\n"


def test_50_mib_of_output_gives_a_bounded_observation_and_a_working_next_command(sandbox_tmpdir):
    _huge_output_is_bounded(sandbox_tmpdir, 50)


@pytest.mark.slow
def test_1_gib_of_output_gives_a_bounded_observation_and_a_working_next_command(sandbox_tmpdir):
    _huge_output_is_bounded(sandbox_tmpdir, 1024)


@pytest.mark.slow
def test_10000_commands_in_one_episode_keep_working_and_memory_flat(sandbox_tmpdir):
    out = _drive(sandbox_tmpdir, "commands", 10_000)
    assert out["wrong"] == []
    assert out["grown_mb"] < 20, f"driver RSS grew {out['grown_mb']:.1f} MiB over 9,000 commands"
    assert out["next"] == "kept\n/app\n"
    assert out["turn"] == 10_002

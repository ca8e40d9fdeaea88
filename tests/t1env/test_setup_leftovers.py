"""``t1env validate``'s answer-key lint (t1env.tools.setup_leftovers) and setup's ``$T1_PRIVATE`` (t1env.env.run_setup,
Sandbox.take_private_state), on a real local sandbox."""

from __future__ import annotations

import pytest

from t1env.env import SetupError, TerminalEnv
from t1env.registry import get_task
from t1env.tools.setup_leftovers import setup_leftover_problems, setup_leftovers

pytestmark = pytest.mark.needs_bwrap

KEY_TEST = """
import os
from pathlib import Path

def test_key():
    assert Path("/tmp/.answer").read_text() == "42\\n"

def test_private():
    assert Path(os.environ["T1_PRIVATE"], "answer").read_text() == "42\\n"

def test_out():
    assert Path("/app/out.txt").exists()
"""


def test_a_file_setup_leaves_in_tmp_that_the_tests_read_is_flagged(make_task):
    d = make_task(
        tests={"test_key.py": KEY_TEST},
        env_files={
            "setup.sh": '#!/bin/bash\necho 42 > /tmp/.answer\necho 42 > "$T1_PRIVATE/answer"\n'
            "mkdir -p /root/app && echo x > /root/app/unread\n"
        },
    )
    task = get_task(d)
    assert setup_leftovers(task) == ["/root/app/unread", "/tmp/.answer"]  # not $T1_PRIVATE, not the workdir
    problems = setup_leftover_problems(task)
    assert len(problems) == 1, problems
    assert "/tmp/.answer" in problems[0] and "test_key.py" in problems[0] and "$T1_PRIVATE" in problems[0]


@pytest.mark.slow
def test_the_converted_process_tasks_leave_no_answer_key():
    for tid in ("processes-stop-scratch", "process-lock-holder", "processes-port-owner", "services-api-proxy"):
        assert setup_leftover_problems(tid) == [], tid


def test_private_state_reaches_the_checks_only(make_task):
    """What setup writes to $T1_PRIVATE is gone from the sandbox before the agent's first command, and the
    checks read it (read-only) at $T1_PRIVATE."""
    tests = {
        "test_p.py": """
import os
from pathlib import Path

def test_private_there():
    assert Path(os.environ["T1_PRIVATE"], "sub", "key").read_text() == "s3cret\\n"

def test_private_read_only():
    try:
        Path(os.environ["T1_PRIVATE"], "new").write_text("x")
    except OSError:
        return
    raise AssertionError("writable")

def test_home_is_not_root():
    assert os.environ["HOME"] != "/root" and set(os.listdir(os.environ["HOME"])) <= {".curlrc"}
"""
    }
    setup = '#!/bin/bash\nmkdir "$T1_PRIVATE/sub"\necho s3cret > "$T1_PRIVATE/sub/key"\n'
    d = make_task(tests=tests, env_files={"setup.sh": setup})
    env = TerminalEnv(task=str(d), backend="local", prestart=False)
    try:
        env.reset(seed=0)
        obs, *_ = env.step("grep -rs s3cret / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr; ls -a /tmp")
        assert "s3cret" not in obs.replace("grep -rs s3cret", "") and ".t1-private" not in obs, obs
        _, reward, _, _, info = env.step({"submit": True})
        assert info["passed"] == 3, info["checks"]
    finally:
        env.close()


def test_a_daemon_holding_a_private_file_open_fails_setup(make_task):
    d = make_task(
        env_files={
            "setup.sh": '#!/bin/bash\necho 1 > "$T1_PRIVATE/pid"\n'
            'setsid sleep 300 < "$T1_PRIVATE/pid" > /dev/null 2>&1 &\n'
        }
    )
    env = TerminalEnv(task=str(d), backend="local", prestart=False)
    try:
        held = r"setup.sh: a process that setup.sh started keeps /tmp/\.t1-private-\w+/pid open"
        with pytest.raises(SetupError, match=held):
            env.reset(seed=0)
    finally:
        env.close()

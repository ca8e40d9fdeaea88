"""The verifier runtime itself (verifiers/run_checks.py), run as the backends run it (``python3 -I``) but on
the host, over a tests folder and an "agent" folder of the test's making: one process per check, the
agent-code guard under both policies, what a check's process inherits, and programs the checks start.
The attacks through a real sandbox, on both backends, are in test_reward_integrity.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from t1env.episode.verify import runtime_bundle

PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

AGENT_MODULE = textwrap.dedent(
    """
    import json, os
    open(os.path.join(os.path.dirname(__file__), "ran-" + __name__), "w").close()
    X = 42
    def forge(nodeid):  # write a passing result for any check to fd 3 (a check process's event pipe)
        for when in ("setup", "call", "teardown"):
            line = {"event": "result", "nodeid": nodeid, "when": when, "outcome": "passed", "message": "", "duration": 0}
            os.write(3, (json.dumps(line) + "\\n").encode())
    """
)

LOADS = textwrap.dedent(
    """
    import importlib.util, runpy, subprocess, sys
    AGENT = {agent!r}

    def test_importlib():
        spec = importlib.util.spec_from_file_location("mod_a", AGENT + "/mod_a.py")
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        assert m.X == 42

    def test_runpy():
        assert runpy.run_path(AGENT + "/mod_b.py")["X"] == 42

    def test_exec_of_a_files_code():
        path = AGENT + "/mod_c.py"
        ns = {{"__file__": path, "__name__": "mod_c"}}
        exec(compile(open(path).read(), path, "exec"), ns)
        assert ns["X"] == 42

    def test_import_through_sys_path():
        sys.path.insert(0, AGENT)
        import mod_d
        assert mod_d.X == 42

    def test_program_started_by_the_check():
        code = "import sys; sys.path.insert(0, %r); import mod_e; print(mod_e.X)" % AGENT
        assert subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True).stdout == "42\\n"
    """
)
NAMES = [
    "test_importlib",
    "test_runpy",
    "test_exec_of_a_files_code",
    "test_import_through_sys_path",
    "test_program_started_by_the_check",
]


def run_runtime(tmp_path: Path, tests: dict[str, str], checks: list[str], policy: str) -> tuple[list[dict], str]:
    root = tmp_path / "runtime"
    shutil.copytree(runtime_bundle(), root)
    for name, text in tests.items():
        (root / "tests" / name).write_text(text)
    argv = [
        PYTHON,
        "-I",
        "-B",
        str(root / "run_checks.py"),
        "--pytest-zip",
        str(root / "pytest.zip"),
        "--checks",
        json.dumps(checks),
        "--policy",
        policy,
        str(root / "tests"),
    ]
    r = subprocess.run(argv, capture_output=True, cwd=tmp_path, timeout=300)
    return [json.loads(line) for line in r.stdout.decode().splitlines()], r.stderr.decode()


@pytest.fixture
def agent(tmp_path) -> Path:
    d = tmp_path / "agent"
    d.mkdir()
    for m in "abcde":
        (d / f"mod_{m}.py").write_text(AGENT_MODULE)
    return d


def outcomes(events: list[dict]) -> dict[str, str]:
    return {e["nodeid"].split("::")[1]: e["outcome"] for e in events if e["event"] == "result" and e["when"] == "call"}


def test_refuse_stops_every_way_of_loading_agent_code_before_it_runs(tmp_path, agent):
    events, log = run_runtime(
        tmp_path, {"test_loads.py": LOADS.format(agent=str(agent))}, [f"test_loads.py::{n}" for n in NAMES], "refuse"
    )
    assert events[0]["event"] == "ready" and events[-1] == {"event": "finished", "exitstatus": 0}, log
    assert outcomes(events) == {**{n: "failed" for n in NAMES[:4]}, "test_program_started_by_the_check": "passed"}
    refused = {(e["check"].split("::")[1], Path(e["path"]).name) for e in events if e["event"] == "agent_code"}
    assert refused == {
        ("test_importlib", "mod_a.py"),
        ("test_runpy", "mod_b.py"),
        ("test_exec_of_a_files_code", "mod_c.py"),
        ("test_import_through_sys_path", "mod_d.py"),
    }
    assert all(e["refused"] for e in events if e["event"] == "agent_code")
    assert sorted(p.name for p in agent.glob("ran-*")) == ["ran-mod_e"]  # only the program the check started ran it
    assert "t1check.agent_module" in log  # the refusal says the fix


def test_record_lets_it_run_says_so_first_and_confines_it_to_its_check(tmp_path, agent):
    forger = textwrap.dedent(
        f"""
        import importlib.util

        def test_forges_the_other():
            spec = importlib.util.spec_from_file_location("mod_a", {str(agent)!r} + "/mod_a.py")
            m = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(m)
            m.forge("test_f.py::test_honest")
            m.forge("test_f.py::test_invented")
            assert False

        def test_honest():
            assert False
        """
    )
    checks = ["test_f.py::test_forges_the_other", "test_f.py::test_honest"]
    events, log = run_runtime(tmp_path, {"test_f.py": forger}, checks, "record")
    kinds = [e["event"] if e.get("when") != "call" else "call" for e in events]
    assert kinds.index("agent_code") < min(kinds.index("tamper"), kinds.index("call")), kinds  # before it ran
    (record,) = [e for e in events if e["event"] == "agent_code"]
    assert record["check"] == checks[0] and record["path"] == str(agent / "mod_a.py") and not record["refused"]
    assert outcomes(events) == {"test_forges_the_other": "failed", "test_honest": "failed"}  # nothing forged got in
    crossed = [e for e in events if e["event"] == "tamper" and e["kind"] == "cross_check_result"]
    assert len(crossed) == 6 and all(e["check"] == checks[0] for e in crossed), events
    assert (agent / "ran-mod_a").exists()


def test_a_checks_process_has_only_its_pipe_and_the_standard_fds(tmp_path):
    fds = textwrap.dedent(
        """
        import os

        def test_fds():
            open_fds = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    os.readlink(f"/proc/self/fd/{fd}")  # not the one listdir used: closed by now
                    open_fds.append(int(fd))
                except OSError:
                    pass
            assert sorted(open_fds) == [0, 1, 2, 3]
        """
    )
    events, log = run_runtime(tmp_path, {"test_fds.py": fds}, ["test_fds.py::test_fds"], "refuse")
    assert outcomes(events) == {"test_fds": "passed"}, log

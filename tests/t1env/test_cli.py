"""The t1env command, run as a user would (in-process through main() for speed)."""

import json
import subprocess
import sys

import pytest

from t1env.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_json(capsys):
    code, out, _ = run_cli(capsys, "list", "--json")
    rows = json.loads(out)
    assert code == 0 and {"id", "category", "difficulty", "checks", "split", "title"} <= set(rows[0])
    assert any(r["id"] == "hello-file" and r["checks"] == 5 for r in rows)


def test_show(capsys):
    code, out, _ = run_cli(capsys, "show", "hello-file")
    assert code == 0 and "hello-file" in out and "oracle commands" in out


def test_show_says_what_happens_to_agent_code_in_checks(capsys):
    from pathlib import Path

    _, out, _ = run_cli(capsys, "show", "hello-file")
    assert "agent code in checks: refused" in out
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "harbor-agent-module"
    code, out, _ = run_cli(capsys, "show", str(fixture))
    assert code == 0 and "agent code in checks: allowed and recorded (an imported task" in out


def test_run_oracle_json(capsys):
    code, out, _ = run_cli(capsys, "run", "hello-file", "--agent", "oracle", "--json")
    res = json.loads(out)
    assert code == 0 and res["resolved"] and res["reward"] == res["total"] == 5


def test_run_nop_table(capsys):
    code, out, _ = run_cli(capsys, "run", "hello-file", "--agent", "nop")
    assert code == 0 and "0/5 checks passed" in out and "not resolved" in out


def test_run_human_reads_commands_from_stdin(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("echo hello > /app/out.txt\n:submit\n"))
    code, out, _ = run_cli(capsys, "run", "hello-file", "--agent", "human", "--json")
    assert code == 0 and '"turns": 1' in out


def test_validate_good_task(capsys, make_task):
    # oracle and no-op only: the tiny task's checks fall to an exploit (tests/t1env/test_exploits.py)
    code, out, _ = run_cli(capsys, "validate", str(make_task()), "--json", "--no-exploits")
    [v] = json.loads(out)
    assert code == 0 and v["ok"] and v["oracle"] == [[3, 3], [3, 3]] and v["nop"] == [0, 3]


def test_validate_flags_unsolvable_and_trivial_tasks(capsys, make_task):
    broken = make_task("broken", solve="echo goodbye > /app/out.txt\n")
    trivial = make_task(
        "trivial",
        tests={"test_t.py": "def test_a():\n    pass\n\ndef test_b():\n    pass\n\ndef test_c():\n    pass\n"},
    )
    code, out, _ = run_cli(capsys, "validate", str(broken), str(trivial), "--json", "--jobs", "1")
    res = {v["task"]: v for v in json.loads(out)}
    assert code == 1
    assert (
        not res["broken"]["ok"]
        and "oracle run 1: 2/3" in res["broken"]["problems"][0]
        and "test_content" in res["broken"]["problems"][0]
    )
    assert any("no-op agent gets full marks" in p for p in res["trivial"]["problems"])


@pytest.mark.slow
def test_validate_flags_flaky_checks(capsys, make_task):
    # a coin-flip check: all 12 runs agreeing has probability 2**-11
    flaky = make_task(
        "flaky",
        tests={
            "test_f.py": "import os\n\ndef test_a():\n    assert True\n\ndef test_b():\n    assert os.urandom(1)[0] % 2\n\ndef test_c():\n    assert open('/app/out.txt').read()\n"
        },
    )
    code, out, _ = run_cli(capsys, "validate", str(flaky), "--runs", "12", "--json")
    [v] = json.loads(out)
    assert code == 1 and any("differ between identical oracle runs" in p for p in v["problems"])


def test_validate_malformed_package_is_one_line(capsys, make_task):
    d = make_task()
    (d / "task.toml").write_text(
        'id = "tiny"\ntitle = "t"\ncategory = "c"\ndifficulty = "easy"\n[limits]\nmax_turns = "x"\n'
    )
    code, out, _ = run_cli(capsys, "validate", str(d))
    assert code == 1 and "task.toml: limits.max_turns:" in out


def test_new_scaffold_fails_until_filled_then_validates(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "new", "my-task", "--dir", str(tmp_path))
    d = tmp_path / "my-task"
    assert code == 0 and (d / "task.toml").is_file()
    code, out, _ = run_cli(capsys, "validate", str(d), "--json")
    assert code == 1  # TODO checks fail for the oracle
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\necho done > /app/result.txt\n")
    (d / "tests" / "test_outputs.py").write_text(
        "from pathlib import Path\n\ndef test_a():\n    assert Path('/app/result.txt').exists()\n\n"
        "def test_b():\n    assert Path('/app/result.txt').read_text() == 'done\\n'\n\n"
        "def test_c():\n    assert len(Path('/app/result.txt').read_text()) == 5\n"
    )
    code, out, _ = run_cli(capsys, "validate", str(d), "--json")
    assert code == 0, out
    code, _, err = run_cli(capsys, "new", "my-task", "--dir", str(tmp_path))
    assert code == 2 and "already exists" in err


def test_unknown_task_is_one_line_error(capsys):
    code, out, err = run_cli(capsys, "run", "no-such-task")
    assert code == 2 and "unknown task 'no-such-task'" in err and err.count("\n") == 1


def test_gc_removes_orphaned_sandbox_dirs(capsys, tmp_path, monkeypatch):
    import tempfile

    orphan = tempfile.mkdtemp(prefix="t1-sbx-")
    with open(f"{orphan}/owner", "w") as f:
        f.write("999999999")
    code, out, _ = run_cli(capsys, "gc")
    import os

    assert code == 0 and not os.path.exists(orphan)


@pytest.mark.slow
def test_console_script_entry_point():
    r = subprocess.run(["t1env", "run", "hello-file", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["resolved"]


@pytest.mark.docker
def test_validate_on_docker_names_an_image_without_python3(capsys, make_task):
    from t1env.sandbox.docker import engine_available

    up, why = engine_available()
    if not up:
        pytest.skip(f"no Docker engine ({why}); .ci/docker-setup.sh starts one")
    # the registry-free minbase image that .ci/docker-setup.sh imports has no python3
    d = make_task("nopy", env_files={"Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n"})
    code, out, _ = run_cli(capsys, "validate", str(d), "--backend", "docker", "--runs", "1", "--json")
    [v] = json.loads(out)
    assert code == 1 and any("has no python3" in p for p in v["problems"])


def test_validate_flags_empty_folders_that_git_would_drop(capsys, make_task):
    d = make_task()
    (d / "environment" / "inbox").mkdir()
    code, out, _ = run_cli(capsys, "validate", str(d), "--json", "--runs", "1")
    [v] = json.loads(out)
    assert code == 1 and any("empty folders are lost by git (environment/inbox)" in p for p in v["problems"])


@pytest.mark.parametrize("flag,value", [("--runs", "0"), ("--runs", "-1"), ("--jobs", "0"), ("--runs", "two")])
def test_validate_refuses_a_count_below_one(capsys, flag, value):
    with pytest.raises(SystemExit) as exit_:
        main(["validate", "hello-file", flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}:" in capsys.readouterr().err


def test_validate_task_refuses_zero_oracle_runs():
    from t1env.tools.validate import validate_task

    with pytest.raises(ValueError, match="runs must be an integer >= 1"):
        validate_task("hello-file", runs=0)


def test_main_in_process_leaves_the_callers_sigpipe_handling_alone(capsys):
    """A process whose SIGPIPE is at its default dies on a write to a closed pipe: main() must not do that to its
    caller (a test run calling main() once was later killed by SIGPIPE); only the console script does."""
    import signal

    before = signal.getsignal(signal.SIGPIPE)
    assert main(["list", "--json"]) == 0
    assert signal.getsignal(signal.SIGPIPE) == before == signal.SIG_IGN

"""`t1env eval` end to end on the real bubblewrap sandbox: oracle and no-op over built-in tasks, agent errors,
bad input, and Ctrl-C (a real SIGINT to a real `t1env eval` process) followed by --resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from t1env.cli import main
from t1env.eval import EvalConfig, run_job
from t1env.eval.results import finished_trials, read_json

pytestmark = pytest.mark.needs_bwrap
HERE = Path(__file__).parent
# six built-in tasks whose oracles are quick (CI runs them twice each with the oracle and the no-op agent)
SIX = [
    "hello-file",
    "csv-region-totals",
    "json-config-merge",
    "log-error-summary",
    "files-dedupe-inbox",
    "encoding-normalize",
]


def _trial_files(job: Path) -> list[str]:
    return sorted(p.name for p in job.iterdir() if p.is_dir())


def test_oracle_job_writes_every_trial_and_full_metrics(tmp_path, live_sandboxes):
    job = tmp_path / "job"
    m = run_job(EvalConfig(tasks=["hello-file"], agent="oracle", attempts=2, concurrency=2), job)
    assert m["resolved_rate"] == 1.0 and m["n_trials"] == 2 and m["complete"]
    assert m["pass_at_k"] == {"1": 1.0, "2": 1.0} and m["mean_passed_fraction"] == 1.0
    assert _trial_files(job) == ["hello-file__0", "hello-file__1"]
    r = read_json(job / "hello-file__1" / "result.json")
    assert (r["passed"], r["total"], r["resolved"], r["end_reason"], r["turns"]) == (5, 5, True, "submitted", 1)
    assert len(r["checks"]) == 5 and all(c["passed"] for c in r["checks"])
    assert read_json(job / "result.json") == m
    assert read_json(job / "config.json")["agent"] == "oracle"
    assert live_sandboxes() == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("agent,rate", [("oracle", 1.0), ("noop", 0.0)])
def test_six_tasks_twice(tmp_path, agent, rate):
    m = run_job(EvalConfig(tasks=SIX, agent=agent, attempts=2, concurrency=2), tmp_path / agent)
    assert m["n_trials"] == 12 and m["resolved_rate"] == rate and m["n_errors"] == 0
    assert set(m["per_task"]) == set(SIX)
    if agent == "noop":
        assert m["mean_passed_fraction"] < 1.0


def test_an_agent_that_raises_is_an_error_trial_and_the_job_goes_on(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    m = run_job(EvalConfig(tasks=["hello-file"], agent="blocking_agent:RaisingAgent", attempts=2), tmp_path / "j")
    assert m["n_trials"] == 2 and m["n_errors"] == 2 and m["errors_by_kind"] == {"agent_error": 2}
    r = read_json(tmp_path / "j" / "hello-file__0" / "result.json")
    assert r["error"]["message"] == "RuntimeError: the model fell over" and r["end_reason"] == "agent_error"


@pytest.mark.parametrize(
    "argv,says",
    [
        (["eval", "hello-file", "--attempts", "0"], "--attempts must be an integer >= 1"),
        (["eval", "--agent", "no_such_module:Agent", "hello-file"], "cannot import 'no_such_module'"),
        (["eval", "--agent", "gpt", "hello-file"], "expected one of oracle, noop, openai, hf or module:Class"),
        (["eval", "--agent", "openai", "hello-file"], "--agent openai needs --model"),
        (["eval", "--resume", "/nonexistent/job"], "--resume /nonexistent/job: no config.json"),
        (["eval", "--family", "logs", "--seeds", "5:2"], "--seeds '5:2'"),
        (["eval"], "no tasks to evaluate"),
        (["eval", "hello-file", "--price-prompt", "-1"], "--price-prompt must be >= 0"),
        (["eval", "--resume", "/nonexistent/job", "hello-file"], "drop the task arguments"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(argv, says, capsys, tmp_path):
    assert main(argv + ([] if "--resume" in argv else ["--out", str(tmp_path / "j")])) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_out_refuses_an_existing_job(tmp_path, capsys):
    assert main(["eval", "hello-file", "--agent", "noop", "--out", str(tmp_path / "j"), "--json"]) == 0
    assert main(["eval", "hello-file", "--out", str(tmp_path / "j")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_sigint_stops_cleanly_keeps_finished_trials_and_resume_gives_the_full_result(tmp_path, sandbox_tmpdir):
    job, marker = tmp_path / "job", tmp_path / "blocked"
    env = dict(
        os.environ,
        PYTHONPATH=str(HERE),
        TMPDIR=str(sandbox_tmpdir),
        T1_TEST_BLOCK_TASK="csv-region-totals",
        T1_TEST_BLOCK_MARKER=str(marker),
    )
    argv = [
        sys.executable,
        "-m",
        "t1env",
        "eval",
        "hello-file",
        "csv-region-totals",
        "json-config-merge",
        "--attempts",
        "2",
        "--agent",
        "blocking_agent:BlockingOracle",
        "--out",
        str(job),
        "--json",
    ]
    # SIGINT as a terminal's foreground job has it: a test run started in the background (`cmd &` in a script)
    # passes SIGINT down ignored, and a Python that starts with SIGINT ignored never raises KeyboardInterrupt
    cmd = [
        sys.executable,
        "-c",
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
        *argv,
    ]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 120  # a wait for the agent to reach the blocking task, not a timed assertion
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole process group, sandboxes included
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    partial = json.loads(out)
    assert partial["complete"] is False
    kept = finished_trials(job)
    assert sorted(kept) == ["hello-file__0", "hello-file__1"]
    assert not (job / "csv-region-totals__0" / "result.json").exists()
    assert list(sandbox_tmpdir.glob("t1-sbx-*")) == []  # the interrupted trial's sandbox was closed
    assert [p.name for p in job.rglob("*.tmp")] == []

    env.pop("T1_TEST_BLOCK_TASK")
    done = subprocess.run(
        [sys.executable, "-m", "t1env", "eval", "--resume", str(job), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout)
    assert resumed["complete"] and resumed["n_trials"] == 6 and resumed["resolved_rate"] == 1.0
    assert {k: kept[k] for k in kept} == {k: v for k, v in finished_trials(job).items() if k in kept}

    fresh = run_job(
        EvalConfig(tasks=["hello-file", "csv-region-totals", "json-config-merge"], attempts=2), tmp_path / "fresh"
    )
    for key in ("resolved_rate", "resolved_ci95", "mean_passed", "mean_passed_fraction", "pass_at_k", "n_errors"):
        assert resumed[key] == fresh[key], key
    assert {t: r["mean_passed"] for t, r in resumed["per_task"].items()} == {
        t: r["mean_passed"] for t, r in fresh["per_task"].items()
    }


def test_tasks_dir_runs_imported_terminal_bench_and_harbor_packages(tmp_path):
    compat = Path(__file__).parents[2] / "fixtures" / "compat"
    refs = [
        str(compat / "terminal-bench" / "tb-keystrokes"),
        str(compat / "harbor" / "hb-reward-json"),
        str(compat / "terminal-bench" / "tb-word-count"),
    ]  # the last needs its Dockerfile: docker only
    m = run_job(EvalConfig(tasks=refs, agent="oracle"), tmp_path / "job")
    assert m["per_task"]["tb-keystrokes"]["resolved_rate"] == 1.0
    assert m["per_task"]["hb-reward-json"]["resolved_rate"] == 1.0
    r = read_json(tmp_path / "job" / "tb-word-count__0" / "result.json")
    assert r["error"]["kind"] == "sandbox_error" and "use backend='docker'" in r["error"]["message"]
    assert m["errors_by_kind"] == {"sandbox_error": 1}

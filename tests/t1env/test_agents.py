"""t1env.agent.reference.oracle_command: the oracle as one command, in its two forms (run as a script; typed into the
live shell, which SFT imitates). Both forms are run by a real bash here."""

from __future__ import annotations

import subprocess

from t1env.agent.reference import oracle_command
from t1env.task import load_task

# make_task prepends "#!/bin/bash\nset -e\n": a failing line stops the script
SOLVE = "# two files, a failure between them\necho one > a.txt\n\nfalse\necho 'two $HOME' > b.txt\n"


def run(command: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30)


def test_by_default_the_script_runs_as_a_script(make_task, tmp_path):
    task = load_task(make_task(solve=SOLVE))
    work = tmp_path / "work"
    work.mkdir()
    run(oracle_command(task) + "\necho alive", work)
    assert (work / "a.txt").read_text() == "one\n"
    assert not (work / "b.txt").exists()  # set -e applied to the script: it stopped at `false`


def test_typed_is_the_scripts_lines_without_shebang_set_or_blank_lines(make_task, tmp_path):
    task = load_task(make_task(solve=SOLVE))
    typed = oracle_command(task, typed=True)
    assert typed == "# two files, a failure between them\necho one > a.txt\nfalse\necho 'two $HOME' > b.txt"
    work = tmp_path / "work"
    work.mkdir()
    result = run(typed + "\necho alive", work)
    assert result.stdout == "alive\n"  # no `set -e` reached the session's shell, so it is still there
    assert (work / "b.txt").read_text() == "two $HOME\n"  # typed, a failing line does not stop the next


def test_a_script_that_contains_the_heredoc_fence(make_task, tmp_path):
    task = load_task(make_task(solve="echo T1_ORACLE_EOF > fence.txt\n"))
    work = tmp_path / "work"
    work.mkdir()
    assert run(oracle_command(task), work).returncode == 0
    assert (work / "fence.txt").read_text() == "T1_ORACLE_EOF\n"

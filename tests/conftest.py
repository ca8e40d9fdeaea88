"""Shared fixtures. Tests use the real bubblewrap sandbox; nothing in t1env is mocked."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest


def pytest_collection_modifyitems(config, items):
    if shutil.which("bwrap") is None:
        skip = pytest.mark.skip(reason="bubblewrap is not installed (apt-get install bubblewrap); `make test` installs it")
        for item in items:
            if "needs_bwrap" in item.keywords:
                item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_bwrap: uses the local bubblewrap sandbox")


@pytest.fixture
def make_task(tmp_path):
    """Write a task package; returns its folder. Override any file with keyword arguments."""

    def make(
        task_id: str = "tiny",
        toml_extra: str = "",
        instruction: str = "Write the word hello into /app/out.txt.",
        solve: str = "echo hello > /app/out.txt\n",
        tests: dict[str, str] | None = None,
        env_files: dict[str, str] | None = None,
        root: Path | None = None,
    ) -> Path:
        d = (root or tmp_path) / task_id
        (d / "solution").mkdir(parents=True)
        (d / "tests").mkdir()
        (d / "environment").mkdir()
        (d / "task.toml").write_text(
            f'id = "{task_id}"\ntitle = "tiny"\ncategory = "files"\ndifficulty = "easy"\n' + textwrap.dedent(toml_extra)
        )
        (d / "instruction.md").write_text(instruction)
        (d / "solution" / "solve.sh").write_text("#!/bin/bash\nset -e\n" + solve)
        default_tests = {
            "test_out.py": textwrap.dedent(
                """
                from pathlib import Path

                def test_exists():
                    assert Path("/app/out.txt").exists()

                def test_content():
                    assert Path("/app/out.txt").read_text().strip() == "hello"

                def test_single_line():
                    assert Path("/app/out.txt").read_text().count("\\n") == 1
                """
            )
        }
        for name, body in (tests or default_tests).items():
            (d / "tests" / name).write_text(textwrap.dedent(body))
        for name, body in (env_files or {}).items():
            p = d / "environment" / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(body)
        return d

    return make

"""Shared fixtures. Tests use the real bubblewrap sandbox; nothing in t1env is mocked."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest


def pytest_addoption(parser, pluginmanager):
    # pyproject's `timeout = 300` belongs to pytest-timeout (the `dev` extra). Without the plugin, declare the key
    # so pytest does not warn about an unknown option; the header says the limit is off (pytest_report_header).
    if not pluginmanager.hasplugin("timeout"):
        parser.addini("timeout", "per-test time limit in seconds (needs pytest-timeout: pip install -e '.[dev]')")


def pytest_report_header(config):
    if not config.pluginmanager.hasplugin("timeout"):
        return "pytest-timeout is not installed: tests run without a time limit (pip install -e '.[dev]')"
    return None


def pytest_collection_modifyitems(config, items):
    if shutil.which("bwrap") is None:
        skip = pytest.mark.skip(reason="bubblewrap is not installed (apt-get install bubblewrap); `make test` installs it")
        for item in items:
            if "needs_bwrap" in item.keywords:
                item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_bwrap: uses the local bubblewrap sandbox")


def _sandbox_children() -> int:
    """Processes of this test process's local sandboxes: its ``bwrap`` and ``nsenter`` (shell) children."""
    me, n = os.getpid(), 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        comm, rest = text[text.index("(") + 1: text.rindex(")")], text[text.rindex(")") + 2:].split()
        if int(rest[1]) == me and comm in ("bwrap", "nsenter"):
            n += 1
    return n


@pytest.fixture
def sandbox_tmpdir():
    """A temp folder of this test's own for sandbox episode folders (``TMPDIR`` of a subprocess, or
    ``tempfile.tempdir``). It sits in the system temp folder and is searchable (0711): a sandbox whose root is
    an unprivileged host id must be able to walk into its episode folder, which pytest's 0700 ``tmp_path``
    forbids. Removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="t1-test-"))
    root.chmod(0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def live_sandboxes(sandbox_tmpdir, monkeypatch):
    """``live_sandboxes() -> (processes, episode folders)`` of the local sandboxes this test has running.

    Episode folders (``t1-sbx-*``) are made in ``sandbox_tmpdir``, so sandboxes of other test runs on the machine
    are not counted."""
    monkeypatch.setattr(tempfile, "tempdir", str(sandbox_tmpdir))
    return lambda: (_sandbox_children(), len(list(sandbox_tmpdir.glob("t1-sbx-*"))))


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

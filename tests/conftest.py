"""Shared fixtures. Tests use the real bubblewrap sandbox; nothing in t1env is mocked."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

try:  # the fuzz tests (tests/*/test_fuzz*.py); the `dev` extra installs hypothesis
    from hypothesis import settings as _hypothesis_settings
    from hypothesis.database import DirectoryBasedExampleDatabase
except ImportError:
    pass
else:
    # "t1" (the default): the same examples on every run and machine (derandomize), no example database
    # written into the checkout (database=None), no per-example deadline (an example may run a shell command).
    # HYPOTHESIS_PROFILE=explore: new random examples on every run, failures kept in a database under the
    # system temp folder (replayed first by the next run), never in the checkout.
    _hypothesis_settings.register_profile("t1", database=None, derandomize=True, deadline=None, print_blob=True)
    _hypothesis_settings.register_profile(
        "explore",
        deadline=None,
        print_blob=True,
        database=DirectoryBasedExampleDatabase(os.path.join(tempfile.gettempdir(), "t1-hypothesis")),
    )
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "t1"))


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
        skip = pytest.mark.skip(
            reason="bubblewrap is not installed (apt-get install bubblewrap); `make test` installs it"
        )
        for item in items:
            if "needs_bwrap" in item.keywords:
                item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_bwrap: uses the local bubblewrap sandbox")
    # The console scripts under test (t1env, t1train, transformers) are the ones installed next to this
    # interpreter, as in an activated virtualenv: `make test` runs .venv/bin/python without activating it,
    # and a PATH without .venv/bin made the entry-point test fail and the `transformers serve` tests skip.
    bindir, path = os.path.dirname(sys.executable), os.environ.get("PATH", "")
    if bindir not in path.split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + path


def _sandbox_children() -> set[tuple[int, str]]:
    """(pid, start time) of this test process's local sandbox processes: its ``bwrap`` and ``nsenter`` (shell)
    children."""
    me, out = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if int(rest[1]) == me and comm in ("bwrap", "nsenter"):
            out.add((int(stat.parent.name), rest[19]))
    return out


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
def live_sandboxes(sandbox_tmpdir, monkeypatch, tmp_path_factory):
    """``live_sandboxes() -> (processes, episode folders)`` of the local sandboxes this test has running.

    Episode folders (``t1-sbx-*``) are made in ``sandbox_tmpdir``, so sandboxes of other test runs on the machine
    are not counted; sandbox processes that were already running when the test started (an earlier test's, still
    being stopped in the background) are not counted either, even if they end while the test runs."""
    tmp_path_factory.getbasetemp()  # pytest's session temp folder goes in the real temp folder, not in this test's
    monkeypatch.setattr(tempfile, "tempdir", str(sandbox_tmpdir))
    earlier = _sandbox_children()
    return lambda: (len(_sandbox_children() - earlier), len(list(sandbox_tmpdir.glob("t1-sbx-*"))))


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


def _python312() -> str | None:
    """A working python3.12 or 3.13: on PATH, or one of pyenv's versions (its shim fails when not selected)."""
    import subprocess

    found = [shutil.which("python3.12"), shutil.which("python3.13")]
    found += sorted(str(p) for p in Path("~/.pyenv/versions").expanduser().glob("3.1[23]*/bin/python3"))
    for py in filter(None, found):
        if subprocess.run([py, "-V"], capture_output=True, check=False).returncode == 0:
            return py
    return None


@pytest.fixture(scope="session")
def interop_python() -> str:
    """A Python >= 3.12 with Harbor's package (its pydantic models, its Terminal-Bench mapper) and asciinema, in
    a venv of its own in t1's cache folder (``T1_HARBOR_PYTHON`` names one instead). Made on first use from the
    package registry. Skips only where no Python >= 3.12 exists at all; a failed install is an error."""
    import os
    import subprocess

    if os.environ.get("T1_HARBOR_PYTHON"):
        return os.environ["T1_HARBOR_PYTHON"]
    from t1env.resources import cache_dir

    venv = cache_dir() / "interop-py312"
    python = venv / "bin" / "python"
    if (
        python.exists()
        and subprocess.run([str(python), "-c", "import harbor, asciinema"], capture_output=True).returncode == 0
    ):
        return str(python)
    base = _python312()
    if base is None:
        pytest.skip("no python3.12 or 3.13 (the harbor package needs Python >= 3.12)")
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
    r = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "harbor", "asciinema"], capture_output=True, text=True
    )
    assert r.returncode == 0, f"installing harbor and asciinema into {venv} failed: {r.stderr.strip()[-500:]}"
    return str(python)

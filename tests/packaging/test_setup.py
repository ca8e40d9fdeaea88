"""What `make demo` and `make test` set up agrees with what the project needs."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from t1env.families import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text()


def _make_variable(name: str) -> str:
    """The value of a `NAME := ...` assignment in the Makefile, continuation lines joined."""
    m = re.search(rf"^{name} :?= ((?:.*\\\n)*.*)$", MAKEFILE, re.M)
    assert m, f"Makefile has no {name}"
    return m.group(1).replace("\\\n", " ")


def _task_tools() -> dict[str, set[str]]:
    """program -> the built-in tasks and family instances whose `environment.tools` name it."""
    out: dict[str, set[str]] = {}
    for toml in sorted((ROOT / "tasks").glob("*/task.toml")):
        spec = tomllib.loads(toml.read_text())
        for tool in spec.get("environment", {}).get("tools", []):
            out.setdefault(tool, set()).add(toml.parent.name)
    for name, family in FAMILIES.items():
        for seed in range(5):
            for tool in family.build(family.rng(seed), seed).tools:
                out.setdefault(tool, set()).add(family.instance_id(seed))
    return out


def test_makefile_installs_every_tool_the_built_in_tasks_name():
    # the local sandbox runs the host's /usr: a tool a task names must come from `make`'s system-deps
    programs = {pair.split(":")[0] for pair in _make_variable("HOST_TOOLS").split()}
    missing = {tool: sorted(users)[:3] for tool, users in _task_tools().items() if tool not in programs}
    assert not missing, f"add program:Debian-package pairs to HOST_TOOLS in the Makefile for {missing}"


def test_makefile_installs_the_sandbox_and_its_network_helpers():
    packages = {pair.split(":")[1] for pair in _make_variable("HOST_TOOLS").split()}
    assert {"bubblewrap", "slirp4netns", "passt"} <= packages


def test_minimum_python_agrees_everywhere():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"] == ">=3.11"  # tomllib
    assert "sys.version_info < (3, 11)" in MAKEFILE
    assert "Python ≥ 3.11" in (ROOT / "README.md").read_text()


def test_pytest_without_pytest_timeout_does_not_warn_about_the_timeout_option():
    # `pip install -e .` (no dev extra) then `pytest`: the ini's `timeout` must not be an unknown option
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:timeout",
            "--collect-only",
            "-W",
            "error::pytest.PytestConfigWarning",
            str(Path(__file__).relative_to(ROOT)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Unknown config option" not in r.stdout + r.stderr
    assert "pytest-timeout is not installed" in r.stdout

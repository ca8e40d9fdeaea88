"""Style is checked, not argued: ``ruff format --check`` and ``ruff check`` (rules in pyproject.toml's [tool.ruff])
pass over the repository. Fix a failure with ``ruff format . && ruff check --fix .`` (ruff is in the dev extra)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: pip install -e '.[dev]' (or make test, which installs it)")
    return found


@pytest.mark.parametrize("argv", [["format", "--check", "."], ["check", "--output-format", "concise", "."]])
def test_ruff(argv):
    r = subprocess.run([ruff(), *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"ruff {' '.join(argv)}:\n{r.stdout}{r.stderr}"

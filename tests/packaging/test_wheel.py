"""A non-editable install carries the built-in tasks and the verifier runtime."""

import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_ships_tasks_and_verifier_and_runs_them(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        timeout=600,
    )
    [wheel] = (tmp_path / "dist").glob("t1-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "t1env/_builtin/tasks/hello-file/task.toml" in names
    assert "t1env/_builtin/verifiers/run_checks.py" in names

    # A fresh venv that sees the running environment's dependencies (gymnasium, pydantic, ...) but not its t1.
    # Not `--system-site-packages`: that is the *base* interpreter's site-packages, which lacks the dependencies
    # when the tests themselves run in a virtualenv. A .pth file with plain paths appends the running
    # environment's site-packages after the venv's own (and does not process the .pth files there, so an
    # editable t1 in the running environment stays out of sight).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    venv_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    (Path(venv_site) / "running-env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    script = (
        "import t1env, gymnasium as gym\n"
        "from t1env.resources import data_dir\n"
        "assert '_builtin' in str(data_dir('tasks')), data_dir('tasks')\n"
        "env = gym.make('T1Terminal-v0', task='hello-file')\n"
        "env.reset(seed=0)\n"
        "*_, info = env.step({'submit': True})\n"
        "print(info['total'])\n"
    )
    # run from an empty folder so the source checkout cannot be imported by accident
    r = subprocess.run([str(py), "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "5"

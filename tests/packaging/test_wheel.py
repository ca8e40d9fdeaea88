"""A non-editable install carries the built-in tasks and the verifier runtime."""

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

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
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

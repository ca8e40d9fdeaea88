"""Finding tasks: built-ins, extra dirs, the environment variable, and pip-installed entry points."""

import sys
import textwrap

import gymnasium as gym
import pytest

import t1env  # noqa: F401
from t1env.registry import PATH_ENV, discover, get_task, list_tasks, split_of
from t1env.task import TaskError


def test_builtin_tasks_are_found():
    found = discover()
    assert "hello-file" in found and len(found) >= 8


def test_extra_dirs_by_kwarg_and_env_var(make_task, tmp_path, monkeypatch):
    make_task("kwarg-task", root=tmp_path / "a")
    make_task("env-task", root=tmp_path / "b")
    assert "kwarg-task" in discover([tmp_path / "a"])
    monkeypatch.setenv(PATH_ENV, str(tmp_path / "b"))
    assert "env-task" in discover()
    assert get_task("env-task").id == "env-task"


def test_duplicate_ids_are_an_error(make_task, tmp_path):
    make_task("hello-file", root=tmp_path / "dup")
    with pytest.raises(TaskError, match="task id 'hello-file' is also defined at"):
        discover([tmp_path / "dup"])


def test_pip_installed_task_package_via_entry_point(make_task, tmp_path, monkeypatch):
    """A third-party distribution (dist-info on sys.path) declaring a t1env.tasks entry point."""
    site = tmp_path / "site"
    pkg = site / "acme_tasks"
    pkg.mkdir(parents=True)
    make_task("acme-echo", root=pkg / "data")
    (pkg / "__init__.py").write_text("from pathlib import Path\nTASKS = Path(__file__).parent / 'data'\n")
    dist = site / "acme_tasks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tasks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("[t1env.tasks]\nacme = acme_tasks:TASKS\n"))
    monkeypatch.syspath_prepend(str(site))
    assert "acme-echo" in list_tasks()
    env = gym.make("T1Terminal-v0", task="acme-echo")
    obs, info = env.reset(seed=0)
    assert info["task_id"] == "acme-echo" and "hello" in obs
    env.close()
    sys.modules.pop("acme_tasks", None)


def test_splits_are_stable_and_disjoint():
    train, test = set(list_tasks("train")), set(list_tasks("test"))
    assert train and test and not (train & test)
    assert train | test == set(list_tasks())
    assert all(split_of(t) == "test" for t in test)


def test_unknown_split():
    with pytest.raises(ValueError, match="split must be one of"):
        list_tasks("dev")

"""t1env.resources: one cache folder for everything t1 builds once (verifier bundle, family instances; the tiny
model is checked in tests/t1train/test_models.py)."""

from __future__ import annotations

import importlib

from t1env.families import materialize
from t1env.resources import cache_dir


def test_cache_dir_is_t1_cache_dir_else_the_user_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("T1_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("T1_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "t1"  # platformdirs' user cache folder, which follows XDG
    monkeypatch.setenv("T1_CACHE", str(tmp_path / "old"))  # the trainer's former variable is not read any more
    assert cache_dir() == tmp_path / "xdg" / "t1"


def test_verifier_bundle_and_family_instances_are_built_under_it(monkeypatch, tmp_path):
    verify = importlib.import_module(
        "t1env.episode.verify"
    )  # the module (t1env.episode.verify is also the name of its function)
    monkeypatch.setenv("T1_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(verify, "_bundle_cache", None)  # built once per process: build it again here
    assert verify.runtime_bundle().parent == tmp_path
    assert (verify.runtime_bundle() / "pytest.zip").is_file()
    package = materialize("logs", 3)
    assert package.is_relative_to(tmp_path / "families") and (package / "task.toml").is_file()

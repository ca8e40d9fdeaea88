"""Sandbox backends as plug-ins: a fixture distribution (tests/fixtures/plugins) registers ``journal`` in the
``t1env.sandboxes`` entry-point group; putting its folder on the path installs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from t1env.sandbox.plugins import GROUP, load_backend, plugin_names

PLUGINS = Path(__file__).resolve().parents[2] / "fixtures" / "plugins"


def test_an_installed_plugin_names_its_backend(monkeypatch):
    assert "journal" not in plugin_names()
    monkeypatch.syspath_prepend(str(PLUGINS))
    assert "journal" in plugin_names()
    assert load_backend("journal").__name__ == "JournalSandbox"


def test_an_unknown_backend_says_how_to_add_one():
    with pytest.raises(ValueError, match=GROUP):
        load_backend("no-such-backend")


@pytest.mark.needs_bwrap
def test_an_episode_runs_through_a_plugin_backend(tmp_path):
    """`t1env run --backend journal` with the plug-in installed: the oracle solves the task in the plug-in's
    sandboxes, and each one it started it also stopped."""
    journal = tmp_path / "journal"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")]),
        T1_PLUGIN_JOURNAL=str(journal),
    )
    out = subprocess.run(
        [sys.executable, "-m", "t1env", "run", "hello-file", "--agent", "oracle", "--backend", "journal"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "reward 5 (count) · resolved" in out
    events = journal.read_text().splitlines()
    assert events.count("start hello-file") >= 1
    assert events.count("start hello-file") == events.count("stop hello-file")

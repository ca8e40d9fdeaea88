"""Docker backend behaviour that needs no engine (runs everywhere)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("docker", reason="the docker SDK is not installed: pip install 't1[docker]'")

ROOT = Path(__file__).resolve().parents[3]


def test_unreachable_engine_is_one_line():
    code = (
        "from t1env.sandbox import docker as D\n"
        "try:\n    D.client()\nexcept Exception as e:\n    print(type(e).__name__); print(repr(str(e)))\n"
    )
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)
    name, msg = out.stdout.strip().splitlines()
    assert name == "SandboxError"
    assert "\\n" not in msg and "not reachable at unix:///nonexistent/docker.sock" in msg and "backend='local'" in msg


def test_context_hash_is_deterministic_and_content_sensitive(tmp_path):
    from t1env.sandbox.docker_images import _context_tar, _dir_files

    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "a.txt").write_text("a")
    t1 = _context_tar(_dir_files(tmp_path))
    os.utime(tmp_path / "a.txt", (1, 1))  # mtimes do not matter
    assert _context_tar(_dir_files(tmp_path)) == t1
    (tmp_path / "a.txt").write_text("b")
    assert _context_tar(_dir_files(tmp_path)) != t1


def test_default_dockerfile_names_the_base_and_packages():
    from t1env.sandbox.docker import DEFAULT_PACKAGES, default_dockerfile

    text = default_dockerfile("debian:bookworm-slim")
    assert text.startswith("FROM debian:bookworm-slim\n")
    assert all(p in text for p in ("python3", "git", "gcc", "make")) and set(DEFAULT_PACKAGES) >= {
        "python3",
        "git",
        "gcc",
        "make",
    }

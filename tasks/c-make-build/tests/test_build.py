import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SRC = Path("/app/rpn")
SOURCES = ["main", "stack", "ops", "parse"]


def make(cwd, *args):
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path):
    """A pristine copy of the agent's project without build outputs."""
    assert (SRC / "Makefile").is_file()
    dst = tmp_path / "rpn"
    shutil.copytree(SRC, dst, symlinks=True, ignore=shutil.ignore_patterns("build", "bin", "*.o", "*.d"))
    return dst


@pytest.fixture
def built(tree):
    res = make(tree)
    assert res.returncode == 0, res.stdout + res.stderr
    return tree


def rpn(binary, expr):
    return subprocess.run([str(binary), expr], capture_output=True, text=True, timeout=10)


def test_builds_from_clean(tree):
    res = make(tree)
    assert res.returncode == 0, res.stdout + res.stderr
    assert os.access(tree / "bin" / "rpn", os.X_OK)


def test_strict_flags_on_every_compile(built):
    res = make(built, "-B", "-n")
    compiles = [l for l in res.stdout.splitlines() if " -c " in l]
    assert len(compiles) >= len(SOURCES), res.stdout
    for line in compiles:
        for flag in ("-Wall", "-Wextra", "-Werror"):
            assert flag in line.split(), f"{flag} missing in: {line}"


def test_calculations(built):
    cases = {"3 4 + 2 *": "14", "2 10 ^": "1024", "1 3 /": "0.3333333333", "2 sqrt": "1.414213562",
             "-2.5 4 *": "-10", "10 4 - 3 -": "3", "1e3 7 /": "142.8571429"}
    for expr, want in cases.items():
        res = rpn(built / "bin" / "rpn", expr)
        assert res.returncode == 0 and res.stdout == want + "\n", (expr, res.stdout, res.stderr)


def test_errors_reported(built):
    for expr, msg in {"1 0 /": "division by zero", "1 +": "underflow", "1 2": "stack", "2 x": "unknown"}.items():
        res = rpn(built / "bin" / "rpn", expr)
        assert res.returncode == 2 and msg in res.stderr, (expr, res.returncode, res.stderr)


def test_objects_in_build_dir(built):
    for name in SOURCES:
        assert (built / "build" / f"{name}.o").is_file(), f"build/{name}.o missing"
    assert not list(built.glob("*.o")) and not list((built / "src").glob("*.o"))


def test_second_make_is_noop(built):
    assert make(built, "-q").returncode == 0


def test_header_change_triggers_rebuild(built):
    old = time.time() - 1000
    for p in built.rglob("*"):
        os.utime(p, (old, old), follow_symlinks=False)
    assert make(built, "-q").returncode == 0
    header = built / "include" / "stack.h"
    os.utime(header, (old + 500, old + 500))
    assert make(built, "-q").returncode != 0, "touching include/stack.h left everything up to date"
    res = make(built)
    assert res.returncode == 0, res.stderr
    # stack.h is included by stack.c, main.c directly and by ops.c via ops.h
    for name in ("stack", "main", "ops"):
        assert (built / "build" / f"{name}.o").stat().st_mtime > old + 500, f"{name}.o not rebuilt"
    assert (built / "bin" / "rpn").stat().st_mtime > old + 500


def test_clean_removes_outputs(built):
    res = make(built, "clean")
    assert res.returncode == 0, res.stderr
    assert not (built / "bin" / "rpn").exists()
    assert not list(built.rglob("*.o"))
    assert not (built / "build").exists() and not (built / "bin").exists()


def test_install_prefix(built, tmp_path):
    prefix = tmp_path / "pfx" / "deep"
    res = make(built, "install", f"PREFIX={prefix}")
    assert res.returncode == 0, res.stdout + res.stderr
    installed = prefix / "bin" / "rpn"
    assert os.access(installed, os.X_OK)
    assert rpn(installed, "6 7 *").stdout == "42\n"

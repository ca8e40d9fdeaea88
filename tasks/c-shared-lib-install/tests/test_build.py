import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

SRC = Path("/app/libkv")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LC_ALL": "C"}


def run(args, cwd, **kw):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, env=ENV, **kw)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    assert (SRC / "Makefile").is_file()
    dst = tmp_path_factory.mktemp("t") / "libkv"
    shutil.copytree(SRC, dst, symlinks=True, ignore=shutil.ignore_patterns("build", "*.o", "kvtool", "*.so*", "*.a"))
    res = run(["make"], dst)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return dst


def test_build_outputs(tree):
    b = tree / "build"
    assert (b / "libkv.a").is_file() and (b / "libkv.so.1.2.0").is_file() and not (b / "libkv.so.1.2.0").is_symlink()
    assert os.readlink(b / "libkv.so.1") == "libkv.so.1.2.0"
    assert os.readlink(b / "libkv.so") == "libkv.so.1"
    assert os.access(b / "kvtool", os.X_OK)
    members = run(["ar", "t", "libkv.a"], b).stdout.split()
    assert sorted(members) == ["hash.o", "kv.o"]


def test_soname_and_dynamic_link(tree):
    d = run(["readelf", "-d", "build/libkv.so.1.2.0"], tree).stdout
    assert "Library soname: [libkv.so.1]" in d
    d = run(["readelf", "-d", "build/kvtool"], tree).stdout
    assert "Shared library: [libkv.so.1]" in d
    rpath = [l for l in d.splitlines() if "RPATH" in l or "RUNPATH" in l]
    assert rpath and "$ORIGIN" in rpath[0], d
    syms = run(["nm", "--defined-only", "build/kvtool"], tree).stdout
    assert " kv_put" not in syms, "kvtool contains the library code (statically linked)"


def test_only_public_api_exported(tree):
    out = run(["nm", "-D", "--defined-only", "build/libkv.so.1.2.0"], tree).stdout
    funcs = sorted(l.split()[-1] for l in out.splitlines() if l.split()[-2] in ("T", "t", "W", "i"))
    assert funcs == sorted(["kv_count", "kv_free", "kv_get", "kv_new", "kv_put", "kv_version"]), out


def test_kvtool_behaviour(tree):
    tool = str(tree / "build" / "kvtool")
    lines = [f"k{i % 37}=v{i}" for i in range(200)] + ["junk", "=x", "empty=", "eq=a=b"]
    text = "\n".join(lines) + "\n"
    assert run([tool, "count"], "/tmp", input=text).stdout == "39\n"
    assert run([tool, "get", "k5"], "/tmp", input=text).stdout == "v190\n"
    assert run([tool, "get", "eq"], "/tmp", input=text).stdout == "a=b\n"
    assert run([tool, "get", "nope"], "/tmp", input=text).returncode == 1
    assert run([tool, "version"], "/tmp").stdout == "1.2.0\n"


def test_strict_warnings_every_compile(tree):
    out = run(["make", "-B", "-n"], tree).stdout
    compiles = [l for l in out.splitlines() if " -c " in l]
    assert len(compiles) >= 3, out
    for l in compiles:
        assert "-Wall" in l.split() and "-Wextra" in l.split(), l
    assert "1.2.0" in (tree / "Makefile").read_text()


def test_incremental_nothing_to_do(tree):
    out = run(["make", "-n"], tree).stdout
    noisy = [l for l in out.splitlines() if any(w in l for w in ("gcc", "cc ", "ar ", " ld ", "-shared"))]
    assert not noisy, out


def test_header_change_rebuilds(tree):
    h = tree / "include" / "kv.h"
    st = h.stat()
    os.utime(h, (st.st_atime + 100, st.st_mtime + 100))
    for o in tree.joinpath("build").rglob("*.o"):
        os.utime(o, (st.st_atime + 50, st.st_mtime + 50))
    out = run(["make", "-n"], tree).stdout
    compiled = " ".join(l for l in out.splitlines() if " -c " in l)
    for src in ("kv.c", "kvtool.c"):
        assert src in compiled, out


def test_clean_and_parallel(tree):
    assert run(["make", "clean"], tree).returncode == 0
    assert not (tree / "build").exists()
    res = run(["make", "-j8"], tree)
    assert res.returncode == 0, res.stderr[-2000:]
    assert run([str(tree / "build" / "kvtool"), "version"], "/tmp").stdout == "1.2.0\n"


def test_install_layout(tree, tmp_path):
    res = run(["make", "install", f"DESTDIR={tmp_path}", "PREFIX=/opt/kv"], tree)
    assert res.returncode == 0, res.stderr[-2000:]
    root = tmp_path / "opt" / "kv"
    modes = {"bin/kvtool": 0o755, "lib/libkv.so.1.2.0": 0o755, "lib/libkv.a": 0o644, "include/kv.h": 0o644}
    for rel, mode in modes.items():
        p = root / rel
        assert p.is_file() and not p.is_symlink(), rel
        assert stat.S_IMODE(p.stat().st_mode) == mode, rel
    assert os.readlink(root / "lib" / "libkv.so.1") == "libkv.so.1.2.0"
    assert os.readlink(root / "lib" / "libkv.so") == "libkv.so.1"


def test_installed_tool_finds_library(tree, tmp_path):
    res = run(["make", "install", f"DESTDIR={tmp_path}", "PREFIX=/srv/x"], tree)
    assert res.returncode == 0, res.stderr[-2000:]
    moved = tmp_path / "elsewhere"
    shutil.move(str(tmp_path / "srv" / "x"), moved)
    out = run([str(moved / "bin" / "kvtool"), "count"], "/tmp", input="a=1\nb=2\na=3\n")
    assert out.returncode == 0 and out.stdout == "2\n", out.stderr
    ldd = run(["ldd", str(moved / "bin" / "kvtool")], "/tmp").stdout
    assert str(moved / "bin" / "../lib/libkv.so.1") in ldd or str(moved / "lib" / "libkv.so.1") in ldd, ldd


def test_agent_tree_built():
    b = SRC / "build"
    out = run([str(b / "kvtool"), "count"], "/tmp", input="x=1\nx=2\n")
    assert out.returncode == 0 and out.stdout == "1\n", out.stderr

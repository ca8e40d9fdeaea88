import os
import subprocess
from pathlib import Path

SCRIPT = "/app/bin/collect.sh"


def make(root, files):
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)


def run(cwd, *args):
    return subprocess.run(["bash", SCRIPT, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=30)


def listing(d):
    return {p.name: p.read_text() for p in Path(d).iterdir()}


def test_simple_names_still_work(tmp_path):
    make(tmp_path, {"app/x.log": "1", "app/db/y.log": "2", "app/db/z.txt": "no"})
    res = run(tmp_path, tmp_path / "out", tmp_path / "app")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "collected 2 files\n"
    assert listing(tmp_path / "out") == {"app__x.log": "1", "app__db__y.log": "2"}


def test_spaces_in_names(tmp_path):
    make(tmp_path, {"my  app/sub dir/a b.log": "1", "my  app/c.log": "2", "my  app/deep/er/e  f.log": "3"})
    res = run(tmp_path, tmp_path / "out dir", tmp_path / "my  app")
    assert res.returncode == 0, res.stderr
    assert listing(tmp_path / "out dir") == {"my  app__sub dir__a b.log": "1", "my  app__c.log": "2",
                                             "my  app__deep__er__e  f.log": "3"}


def test_glob_chars_and_cwd_logs(tmp_path):
    make(tmp_path, {"here.log": "cwd", "src/[x]*?.log": "g", "src/a/-dash.log": "d", "src/a/notlog.log.txt": "n"})
    res = run(tmp_path, "out", "src")
    assert res.returncode == 0, res.stderr
    assert listing(tmp_path / "out") == {"src__[x]*?.log": "g", "src__a__-dash.log": "d"}
    assert res.stdout == "collected 2 files\n"


def test_missing_sources(tmp_path):
    make(tmp_path, {"a/1.log": "1", "b c/2.log": "2"})
    res = run(tmp_path, "out", "a", "no such", "b c", "/nonexistent")
    assert res.returncode == 1
    assert res.stdout == "collected 2 files\n"
    assert res.stderr.splitlines() == ["missing: no such", "missing: /nonexistent"]
    assert listing(tmp_path / "out") == {"a__1.log": "1", "b c__2.log": "2"}

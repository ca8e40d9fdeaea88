import os
import subprocess
from pathlib import Path

SCRIPT = Path("/app/bin/slugify")


def run(d):
    assert os.access(SCRIPT, os.X_OK), "slugify missing or not executable"
    return subprocess.run([str(SCRIPT), str(d)], capture_output=True, text=True, timeout=30, cwd="/tmp")


def test_uploads_renamed():
    names = sorted(os.listdir("/app/uploads"))
    assert names == sorted(["quarterly-report-final-.pdf", "my-photo.jpg", "notes-draft-v2.txt", "n-code-f-le.txt",
                            "already-clean.txt", "spaced-out-.md", "Read Me.txt", "read-me.txt"])
    assert Path("/app/uploads/read-me.txt").read_text() == "b\n"


def test_renames_and_output(tmp_path):
    for n in ["B File.TXT", "a--b__c.md", "x.y.Z", "keep.txt", "€uro sign.csv"]:
        (tmp_path / n).write_text(n)
    (tmp_path / "Sub Dir").mkdir()
    res = run(tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ("B File.TXT -> b-file.txt\na--b__c.md -> a-b-c.md\nx.y.Z -> x.y.z\n"
                          "\u20acuro sign.csv -> uro-sign.csv\n")
    assert sorted(os.listdir(tmp_path)) == ["Sub Dir", "a-b-c.md", "b-file.txt", "keep.txt", "uro-sign.csv", "x.y.z"]
    assert (tmp_path / "b-file.txt").read_text() == "B File.TXT"


def test_collisions_skipped(tmp_path):
    (tmp_path / "Data File").write_text("1")
    (tmp_path / "DATA file").write_text("2")
    (tmp_path / "Dir X").write_text("3")
    (tmp_path / "dir-x").mkdir()
    (tmp_path / "ok").write_text("4")
    res = run(tmp_path)
    assert res.returncode == 1
    assert res.stdout == "DATA file -> data-file\n"
    assert sorted(res.stderr.splitlines()) == ["skip: Data File", "skip: Dir X"]
    assert (tmp_path / "data-file").read_text() == "2" and (tmp_path / "Data File").read_text() == "1"


def test_bad_directory(tmp_path):
    res = run(tmp_path / "missing")
    assert res.returncode == 2 and res.stderr.strip()
    f = tmp_path / "file"
    f.write_text("x")
    assert run(f).returncode == 2

import io
import os
import stat
import tarfile
from pathlib import Path

ROOT = Path("/app/root-fs")
PASSWD = """\
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
alice:x:1000:1000:Alice Admin:/home/alice:/bin/bash
carol:x:1002:1002:Carol Chen:/home/carol:/bin/zsh
frank:x:1007:100:Frank Shared:/home/frank:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
gina:x:1008:1008:Gina Gray:/home/gina:/bin/bash
hugo:x:1009:1010:Hugo Hart:/home/hugo:/bin/zsh
ivan:x:1010:1011:Ivan Ivanov, Jr.:/home/ivan:/bin/bash
"""
GROUP = """\
root:x:0:
daemon:x:1:
wheel:x:10:alice,ivan
users:x:100:frank
alice:x:1000:
carol:x:1002:
docker:x:1003:alice,gina
backup:x:1009:
dev:x:2000:alice,gina,ivan
ops:x:2001:carol,hugo
nogroup:x:65534:
gina:x:1008:
hugo:x:1010:
analysts:x:2002:hugo,ivan
ivan:x:1011:
"""
NEW_USERS = {"gina": (1008, 1008), "hugo": (1009, 1010), "ivan": (1010, 1011)}
SKEL = {".bashrc": b'# ~/.bashrc\nalias ll="ls -l"\n', ".profile": b"# ~/.profile\n. ~/.bashrc\n",
        ".config/app.conf": b"theme=dark\n"}
ARCHIVES = {
    "bob": {"bob/notes.txt": b"notes of bob\n", "bob/projects/bridge/plan.txt": b"span=120\n"},
    "erin": {"erin/notes.txt": b"notes of erin\n", "erin/todo.md": b"TODO: hand over\n"},
}


def lines(name):
    return (ROOT / "etc" / name).read_text().splitlines()


def test_passwd_removed_users():
    names = [l.split(":")[0] for l in lines("passwd")]
    assert "bob" not in names and "erin" not in names
    assert names[:6] == ["root", "daemon", "alice", "carol", "frank", "nobody"]


def test_passwd_exact():
    assert (ROOT / "etc/passwd").read_text() == PASSWD


def test_shadow():
    got = lines("shadow")
    names = [l.split(":")[0] for l in got]
    assert names == ["root", "daemon", "alice", "carol", "frank", "nobody", "gina", "hugo", "ivan"]
    assert got[-3:] == [f"{u}:!:19700:0:99999:7:::" for u in ("gina", "hugo", "ivan")]
    assert got[2].startswith("alice:$6$") and got[2].endswith(":19000:0:99999:7:::")


def test_group_offboarding():
    groups = {l.split(":")[0]: l.split(":") for l in lines("group")}
    assert "bob" not in groups and "erin" not in groups
    for g in groups.values():
        members = g[3].split(",") if g[3] else []
        assert "bob" not in members and "erin" not in members, g


def test_group_private_groups():
    groups = {l.split(":")[0]: l for l in lines("group")}
    assert groups.get("gina") == "gina:x:1008:"
    assert groups.get("hugo") == "hugo:x:1010:"
    assert groups.get("ivan") == "ivan:x:1011:"


def test_group_memberships_and_new_group():
    groups = {l.split(":")[0]: l for l in lines("group")}
    assert groups.get("analysts") == "analysts:x:2002:hugo,ivan"
    assert groups["dev"] == "dev:x:2000:alice,gina,ivan"
    assert groups["wheel"] == "wheel:x:10:alice,ivan"
    assert groups["docker"] == "docker:x:1003:alice,gina"
    assert groups["ops"] == "ops:x:2001:carol,hugo"


def test_group_exact():
    assert (ROOT / "etc/group").read_text() == GROUP


def test_offboarded_homes_archived():
    for user, files in ARCHIVES.items():
        with tarfile.open(ROOT / "var/archive" / f"{user}.tar.gz", "r:gz") as t:
            got = {m.name.removeprefix("./").rstrip("/"): t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
            assert all(m.name.removeprefix("./").split("/")[0] == user for m in t.getmembers())
        assert got == files


def test_offboarded_homes_deleted():
    assert (ROOT / "var/archive/bob.tar.gz").is_file()
    assert not (ROOT / "home/bob").exists() and not (ROOT / "home/erin").exists()
    for u, owner in {"alice": (1000, 1000), "carol": (1002, 1002), "frank": (1007, 100)}.items():
        st = (ROOT / "home" / u).stat()
        assert (st.st_uid, st.st_gid) == owner and stat.S_IMODE(st.st_mode) == 0o700
        assert (ROOT / "home" / u / "notes.txt").read_text() == f"notes of {u}\n"


def test_new_homes_from_skel():
    for u in NEW_USERS:
        home = ROOT / "home" / u
        got = {}
        for dirpath, _, files in os.walk(home):
            for f in files:
                p = Path(dirpath) / f
                got[p.relative_to(home).as_posix()] = p.read_bytes()
        assert got == SKEL, u


def test_new_homes_owner_and_mode():
    for u, (uid, gid) in NEW_USERS.items():
        home = ROOT / "home" / u
        assert home.is_dir()
        assert stat.S_IMODE(home.stat().st_mode) == 0o700, u
        for dirpath, dirs, files in os.walk(home):
            for n in [dirpath] + [os.path.join(dirpath, x) for x in dirs + files]:
                st = os.lstat(n)
                assert (st.st_uid, st.st_gid) == (uid, gid), n
        assert stat.S_IMODE((home / ".bashrc").stat().st_mode) == stat.S_IMODE((ROOT / "etc/skel/.bashrc").stat().st_mode)

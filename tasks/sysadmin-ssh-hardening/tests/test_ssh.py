import hashlib
import os
import stat
from pathlib import Path

CONF = Path("/app/etc/ssh/sshd_config")
BAK_SHA = "d05718a6e2d134bc1d29ab1a26ad1ddd0ee6fd5055a1b594c1421e25a9ae34cd"
WANT = {"permitrootlogin": "no", "passwordauthentication": "no", "pubkeyauthentication": "yes",
        "x11forwarding": "no", "maxauthtries": "3", "allowusers": "deploy backup"}


def original():
    data = Path("/app/etc/ssh/sshd_config.bak").read_bytes()
    assert hashlib.sha256(data).hexdigest() == BAK_SHA
    return data.decode().splitlines()


def split(lines):
    i = next(i for i, l in enumerate(lines) if l.startswith("Match "))
    return lines[:i], lines[i:]


def active(lines):
    out = {}
    for l in lines:
        s = l.strip()
        if s and not s.startswith("#"):
            k, _, v = s.partition(" ")
            out.setdefault(k.lower(), []).append(v.strip())
    return out


def test_global_policy():
    glob, _ = split(CONF.read_text().splitlines())
    act = active(glob)
    for k, v in WANT.items():
        assert act.get(k) == [v], (k, act.get(k))


def test_match_block_kept_and_last():
    _, match = split(original())
    _, got = split(CONF.read_text().splitlines())
    assert got == match
    assert CONF.read_text().endswith("\n")


def test_other_lines_unchanged():
    orig_glob, _ = split(original())
    glob, _ = split(CONF.read_text().splitlines())
    keys = set(WANT) | {"#pubkeyauthentication"}
    strip = lambda ls: [l for l in ls if l.split(" ")[0].lower() not in keys and l.strip()]
    assert strip(glob) == strip(orig_glob)
    # changed settings stay where they were
    assert [l.split(" ")[0] for l in glob if l.split(" ")[0] in ("PermitRootLogin", "PasswordAuthentication")] ==         ["PermitRootLogin", "PasswordAuthentication"]
    assert glob.index("PermitRootLogin no") == orig_glob.index("PermitRootLogin yes")


def test_authorized_keys_content():
    want = []
    for p in sorted(Path("/app/keys").glob("*.pub")):
        want += [l for l in p.read_text().splitlines() if l.strip()]
    assert Path("/app/home/deploy/.ssh/authorized_keys").read_text() == "".join(l + "\n" for l in want)


def test_ownership_and_modes():
    ssh = Path("/app/home/deploy/.ssh")
    ak = ssh / "authorized_keys"
    for p, mode in ((ssh, 0o700), (ak, 0o600)):
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (1500, 1500), p
        assert stat.S_IMODE(st.st_mode) == mode, (p, oct(st.st_mode))
    assert stat.S_IMODE(os.stat("/app/home/deploy").st_mode) & 0o022 == 0

import os
import stat
from pathlib import Path

SRV = Path("/app/srv")
SUID_SGID = ["bin", "bin/helper", "bin/rotate", "secrets/api.token"]


def mode(p):
    return stat.S_IMODE(os.lstat(p).st_mode)


def walk():
    yield SRV
    for root, dirs, files in os.walk(SRV):
        for n in dirs + files:
            yield Path(root) / n


def test_audit_lists_setid_paths():
    assert (Path("/app/audit.txt")).read_text().splitlines() == SUID_SGID


def test_no_setid_or_world_writable():
    for p in walk():
        if p.is_symlink():
            continue
        m = mode(p)
        assert not m & (stat.S_ISUID | stat.S_ISGID), f"{p} has setuid/setgid"
        assert not m & stat.S_IWOTH, f"{p} is world-writable"


def test_general_modes():
    for rel, want in [("", 0o755), ("www", 0o755), ("www/css", 0o755), ("bin", 0o755),
                      ("www/index.html", 0o644), ("www/css/site.css", 0o644), ("www/uploads/cat.jpg", 0o644)]:
        assert mode(SRV / rel) == want, f"{rel}: {oct(mode(SRV / rel))}"


def test_bin_scripts_executable():
    for name in ("deploy.sh", "helper", "rotate"):
        assert mode(SRV / "bin" / name) == 0o755, name


def test_secrets_private():
    assert mode(SRV / "secrets") == 0o700
    for name in ("db.key", "api.token"):
        assert mode(SRV / "secrets" / name) == 0o600, name


def test_uploads_sticky_group():
    p = SRV / "www" / "uploads"
    st = os.lstat(p)
    assert stat.S_IMODE(st.st_mode) == 0o1770
    assert st.st_gid == 1000 and st.st_uid == 0


def test_logs_ownership_and_modes():
    for rel, want in [("logs", 0o750), ("logs/old", 0o750), ("logs/app.log", 0o640), ("logs/old/app.log.1", 0o640)]:
        st = os.lstat(SRV / rel)
        assert (st.st_uid, st.st_gid) == (1000, 1000), rel
        assert stat.S_IMODE(st.st_mode) == want, f"{rel}: {oct(stat.S_IMODE(st.st_mode))}"
    assert os.lstat(SRV / "www" / "index.html").st_uid == 0, "ownership changed outside logs/"


def test_symlink_untouched():
    link = SRV / "www" / "host-link"
    assert link.is_symlink() and os.readlink(link) == "/etc/hostname"
    assert mode(SRV / "www") == 0o755

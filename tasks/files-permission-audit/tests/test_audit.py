import os
import stat
from pathlib import Path

S = "/app/srv"
AUDIT = sorted([
    "world-writable /app/srv", "world-writable /app/srv/conf/app.conf", "world-writable /app/srv/data/uploads",
    "world-writable /app/srv/data/uploads/a.jpg", "world-writable /app/srv/logs/app.log",
    "setuid /app/srv/bin/run.sh", "setgid /app/srv/bin/tool", "broken-link /app/srv/bin/broken-link",
    "secret-readable /app/srv/conf/secret.env",
], key=str.encode)
FINAL = {  # path -> mode after the fix
    "": 0o775, "bin": 0o755, "bin/run.sh": 0o755, "bin/health.sh": 0o755, "bin/tool": 0o775,
    "conf": 0o755, "conf/secret.env": 0o640, "conf/app.conf": 0o664, "conf/tls.key": 0o640,
    "data": 0o755, "data/uploads": 0o775, "data/uploads/a.jpg": 0o775, "data/cache": 0o1777,
    "data/cache/blob": 0o600, "logs": 0o755, "logs/app.log": 0o620,
}


def mode(rel):
    return stat.S_IMODE(os.lstat(os.path.join(S, rel) if rel else S).st_mode)


def test_audit_report():
    assert Path("/app/audit.txt").read_text() == "".join(l + "\n" for l in AUDIT)


def test_world_writable_fixed():
    for rel in ("", "conf/app.conf", "data/uploads", "data/uploads/a.jpg", "logs/app.log"):
        assert mode(rel) == FINAL[rel], (rel, oct(mode(rel)))
    assert mode("data/cache") == 0o1777


def test_setid_bits_removed():
    assert mode("bin/run.sh") == 0o755 and mode("bin/tool") == 0o775


def test_links():
    assert not os.path.lexists(f"{S}/bin/broken-link")
    assert os.readlink(f"{S}/bin/good-link") == "../conf/app.conf"


def test_secrets_and_nothing_else_changed():
    assert mode("conf/secret.env") == 0o640
    for rel, m in FINAL.items():
        assert mode(rel) == m, (rel, oct(mode(rel)), oct(m))
    assert Path(f"{S}/conf/secret.env").read_text() == "password=hunter2\n"

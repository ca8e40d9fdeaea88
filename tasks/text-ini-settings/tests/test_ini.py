import configparser
import hashlib
from pathlib import Path

ORIG_SHA = "7699ce05e8126bf7347eb8b9c96060914fa695fa2b6f533a02e249441903b759"
CONF = Path("/app/conf/app.ini")


def original():
    data = Path("/app/conf/app.ini.orig").read_bytes()
    assert hashlib.sha256(data).hexdigest() == ORIG_SHA
    return data.decode()


def expected():
    lines = original().splitlines()
    out, section = [], None
    for line in lines:
        if line.startswith("["):
            section = line
        if section == "[server]" and line.startswith("host = "):
            line = "host = 127.0.0.1"
        elif section == "[server]" and line.startswith("workers = "):
            line = "workers = 8"
        elif section == "[logging]" and line.startswith("level = "):
            line = "level = WARNING"
        elif section == "[features]" and line == "legacy_api = on":
            line = "; legacy_api = on"
        out.append(line)
    return "\n".join(out) + "\n\n[metrics]\nenabled = true\nport = 9100\n"


def parsed():
    cp = configparser.ConfigParser(inline_comment_prefixes=None)
    cp.read_string(CONF.read_text())
    return cp


def test_backup_identical():
    assert original().startswith("; Application settings")


def test_values_changed():
    cp = parsed()
    assert cp["server"]["host"] == "127.0.0.1" and cp["server"]["workers"] == "8"
    assert cp["logging"]["level"] == "WARNING"
    assert "legacy_api" not in cp["features"] and cp["features"]["beta_ui"] == "on"


def test_other_same_named_keys_untouched():
    cp = parsed()
    assert cp["server"]["port"] == "8080" and cp["database"]["timeout"] == "30"
    assert cp["metrics"]["port"] == "9100" and cp["metrics"]["enabled"] == "true"
    assert list(cp.sections()) == ["server", "database", "logging", "features", "metrics"]


def test_file_exact():
    assert CONF.read_text() == expected()

import os
import stat
import subprocess
from pathlib import Path

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def sh(script, times=1):
    src = "source /app/srv/profile.sh\n" * times
    env = {"PATH": BASE_PATH, "HOME": "/root"}
    res = subprocess.run(["/bin/bash", "--noprofile", "--norc", "-c", src + script], capture_output=True,
                         text=True, timeout=20, env=env, cwd="/tmp")
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_exported_variables():
    assert Path("/app/srv/profile.sh").is_file()
    out = sh("env | grep '^APP_' | sort")
    assert out == "APP_ENV=production\nAPP_HOME=/app/srv\n"


def test_path_first_and_idempotent():
    assert sh('echo "$PATH"') == "/app/srv/bin:" + BASE_PATH + "\n"
    assert sh('echo "$PATH"', times=3) == "/app/srv/bin:" + BASE_PATH + "\n"


def test_umask():
    assert sh("umask") == "0027\n"


def test_apptool_runs_via_path():
    out = sh("apptool; command -v apptool")
    assert out == "apptool 1.2.0 home=/app/srv\n/app/srv/bin/apptool\n"


def test_logs_dir_mode():
    st = os.stat("/app/srv/logs")
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o2770

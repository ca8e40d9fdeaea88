"""The agent's shell on Docker: the attached exec socket (:class:`t1env.sandbox.docker_shell.ExecShell`, the default
for a local engine) and ``docker exec -it`` (``T1_DOCKER_SHELL=cli``, and every remote engine) behave alike under
:class:`~t1env.episode.shell.ShellSession`: state, exit codes and restarts, timeouts and both ways of recovering,
bounded output, and keystroke mode on a terminal of the session's size (``docker`` marker)."""

from __future__ import annotations

import time

import pexpect
import pytest

pytest.importorskip("docker", reason="the docker SDK is not installed: pip install 't1[docker]'")

from t1env.episode.shell import ShellSession  # noqa: E402
from t1env.sandbox import docker as D  # noqa: E402
from t1env.sandbox.base import SandboxConfig, SandboxError  # noqa: E402
from t1env.sandbox.docker_shell import ExecShell  # noqa: E402

_UP, _WHY = D.engine_ready(D.DEFAULT_BASE)
pytestmark = [pytest.mark.docker, pytest.mark.skipif(not _UP, reason=_WHY)]


def _wait_for(sh: ShellSession, text: str, keys: list[str], timeout: float = 20.0) -> str:
    """Send keys, then look at the screen again (no keys) until ``text`` shows, as an agent would."""
    screen = sh.send_keys(keys, wait=2)
    deadline = time.monotonic() + timeout
    while text not in screen and time.monotonic() < deadline:
        screen = sh.send_keys([], wait=1)
    return screen


@pytest.mark.parametrize("transport", ["socket", "cli"])
def test_shell_session_semantics_on_either_transport(transport):
    D.default_image()
    box = D.DockerSandbox(SandboxConfig(), pool=False)
    box.shell_transport = transport
    box.start()
    try:
        with ShellSession(box, max_output_bytes=4096, screen=(100, 30)) as sh:
            assert isinstance(sh.child, ExecShell if transport == "socket" else pexpect.spawn)
            assert sh.run("cd /tmp && X=42").exit_code == 0
            r = sh.run("echo $X; pwd; printf 'no newline'; false")
            assert (r.output, r.exit_code) == ("42\n/tmp\nno newline", 1)
            r = sh.run("head -c 100000 /dev/zero | tr '\\0' x")
            assert r.truncated and "bytes of output truncated" in r.output

            r = sh.run("sleep 100", timeout=1)
            assert r.timed_out and not r.restarted and "Ctrl-C" in r.note
            r = sh.run("trap '' INT; sleep 100", timeout=1)
            assert r.timed_out and not r.restarted and "was killed" in r.note
            assert sh.run("echo $X").output == "42\n"  # the same shell throughout

            r = sh.run("exit 3")
            assert (r.exit_code, r.restarted) == (3, True)
            assert sh.run("echo ${X:-unset}; pwd").output == "unset\n/app\n"  # a new shell, in the workdir

            assert "30 100" in _wait_for(sh, "30 100", ["stty size", "Enter"])  # the terminal has the session's size
            assert ">>>" in _wait_for(sh, ">>>", ["python3 -q", "Enter"])
            assert "42" in _wait_for(sh, "42", ["6*7", "Enter"])
            sh.send_keys(["C-d"], wait=1)
            assert sh.run("echo back").output == "back\n"
    finally:
        box.stop()


def test_remote_engines_keep_the_cli_and_a_bad_setting_is_named():
    box = D.DockerSandbox(SandboxConfig(), pool=False, docker_host="tcp://127.0.0.1:9")  # never started: no engine
    assert box.open_shell(40, 120) is None  # a tcp:// engine's socket may be TLS: ShellSession spawns shell_argv()
    box.shell_transport = "sockets"
    with pytest.raises(SandboxError, match="T1_DOCKER_SHELL='sockets': set it to 'socket'"):
        box.open_shell(40, 120)

"""ShellSession: framing, state, recovery, bounded output, keystroke mode."""

import os
import random
import resource
import time

import pytest

from t1env.episode.shell import CommandResult, ShellSession, ansi_c_quote, clean_output


def test_state_persists_across_commands(shell):
    shell.run("cd /tmp && export FOO=bar && greet() { echo hi $1; }")
    r = shell.run("pwd; echo $FOO; greet you")
    assert r.output == "/tmp\nbar\nhi you\n" and r.exit_code == 0


def test_exit_code_and_no_trailing_newline(shell):
    r = shell.run("printf 'no newline'; exit_code_is() { return 7; }; exit_code_is")
    assert r.output == "no newline" and r.exit_code == 7


def test_reading_stdin_does_not_wedge(shell):
    t0 = time.monotonic()
    r = shell.run("cat; read x; echo done", timeout=10)
    assert r.output == "done\n" and not r.timed_out and time.monotonic() - t0 < 5


def test_changing_ps1_and_prompt_command_is_harmless(shell):
    shell.run("PS1='HACKED> '; PS2='...'; PROMPT_COMMAND='echo prompt'")
    assert shell.run("echo ok").output == "ok\n"


def test_quotes_newlines_bangs_and_non_utf8_survive(shell):
    cmd = "echo 'single' \"double $((1+1))\" !bang `echo tick`\ncat <<'EOF'\n$NOT_EXPANDED \\ back\nEOF"
    r = shell.run(cmd)
    assert r.output == "single double 2 !bang tick\n$NOT_EXPANDED \\ back\n"
    payload = bytes(random.Random(0).randrange(1, 256) for _ in range(300)).decode("latin-1")
    assert shell.run(f"printf %s {ansi_c_quote(payload)} | wc -c").output.strip() == str(len(payload.encode()))


def test_long_command_over_terminal_line_limit(shell):
    body = "x" * 20000
    r = shell.run(f"s='{body}'; echo ${{#s}}")
    assert r.output == "20000\n"


def test_exit_restarts_shell_and_says_so(shell):
    r = shell.run("exit 3")
    assert r.exit_code == 3 and r.restarted and "shell exited" in r.observation
    assert shell.run("echo alive").output == "alive\n"


def test_set_e_failure_restarts_shell(shell):
    r = shell.run("set -e; false; echo unreachable")
    assert r.restarted and "unreachable" not in r.output
    assert shell.run("false; echo still here").output == "still here\n"


def test_hung_command_is_interrupted_and_next_command_works(shell):
    shell.run("X=kept")
    t0 = time.monotonic()
    r = shell.run("echo started; sleep 1000", timeout=1)
    assert r.timed_out and r.exit_code is None and "started" in r.output and "Ctrl-C" in r.observation
    assert time.monotonic() - t0 < 5
    assert shell.run("echo $X").output == "kept\n"  # same shell, state intact


def test_command_ignoring_ctrl_c_is_killed(shell):
    shell.run("X=kept")
    r = shell.run("trap '' INT; sleep 1000", timeout=1)
    assert r.timed_out and "killed" in r.observation and not r.restarted
    assert shell.run("trap - INT; echo $X").output == "kept\n"


def test_busy_builtin_loop_is_interrupted(shell):
    r = shell.run("while :; do :; done", timeout=1)
    assert r.timed_out
    assert shell.run("echo ok").output == "ok\n"


def test_100mb_of_output_is_truncated_without_memory_blowup(box):
    s = ShellSession(box, max_output_bytes=8192)
    s.start()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = s.run("head -c 100000000 /dev/zero | tr '\\0' 'a'; echo; echo END", timeout=120)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    s.close()
    assert r.truncated and r.exit_code == 0
    assert r.output.startswith("a" * 4000) and r.output.endswith("END\n")
    assert "bytes of output truncated" in r.output and len(r.output) < 9000
    assert grown_mb < 50


def test_binary_and_control_bytes_never_crash(shell):
    r = shell.run("head -c 4096 /dev/urandom; printf '\\x1b[31mred\\x1b[0m\\x07\\x00'")
    assert isinstance(r.output, str) and r.exit_code == 0
    assert "\x1b" not in r.output and "\x00" not in r.output and "red" in r.output


def test_clean_output_applies_carriage_returns():
    assert clean_output(b"10%\r50%\r100%\ndone\r\n") == "100%\ndone\n"
    assert clean_output(b"\xff\xfeok") == "\ufffd\ufffdok"


def test_observation_appends_note():
    assert CommandResult("out", None, 0.1, note="timed out").observation == "out\n[t1] timed out"


def wait_for(shell, text, keys, timeout=20.0):
    """Send keys, then look at the screen again (no keys) until ``text`` shows, as an agent would."""
    screen = shell.send_keys(keys, wait=2)
    deadline = time.monotonic() + timeout
    while text not in screen and time.monotonic() < deadline:
        screen = shell.send_keys([], wait=1)
    return screen


def test_keystroke_mode_drives_a_python_repl(shell):
    assert ">>>" in wait_for(shell, ">>>", ["python3 -q", "Enter"])
    assert "42" in wait_for(shell, "42", ["6*7", "Enter"])
    blocked = shell.run("echo hi")
    assert blocked.exit_code is None and "still running" in blocked.observation
    shell.send_keys(["C-d"], wait=1)
    assert shell.run("echo back").output == "back\n"


def test_keystroke_mode_arrow_keys_and_escape(shell):
    screen = shell.send_keys(["cat > /tmp/typed.txt", "Enter", "abc", "Left", "X", "Enter", "C-d"], wait=1)
    assert "abc^[[DX" in screen  # the terminal echoes the arrow key as the program receives it
    assert shell.run("cat -v /tmp/typed.txt").output == "abc^[[DX\n"
    screen = wait_for(shell, "(END)", ["less /tmp/typed.txt", "Enter"])
    assert "abc" in screen
    shell.send_keys(["q"], wait=1)
    assert shell.run("echo out of less").output == "out of less\n"


def test_half_typed_line_is_discarded_before_a_command(shell):
    shell.send_keys("echo should-not-run", wait=0.3)
    r = shell.run("echo clean")
    assert r.output == "clean\n"


@pytest.mark.parametrize("key, expected", [("Enter", b"\r"), ("C-c", b"\x03"), ("Escape", b"\x1b"), ("Up", b"\x1b[A")])
def test_named_keys(key, expected):
    assert ShellSession.encode_keys([key]) == expected
    assert ShellSession.encode_keys("Enter") == b"Enter"  # a plain string is literal text


def _zombie_children() -> list[int]:
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        if fields[0] == "Z" and int(fields[1]) == me:
            found.append(int(entry))
    return found


def test_closing_a_shell_leaves_no_zombie_process(box):
    # pexpect's close(force=True) polls once right after SIGKILL and gives up if the process is not dead yet. Without
    # reaping, 2 of 30 closes left a zombie nsenter on a loaded machine, and a learning-curve run collected 103 in its
    # first ten minutes.
    before = set(_zombie_children())
    pids = []
    for _ in range(30):
        s = ShellSession(box)
        s.start()
        pids.append(s.child.pid)
        s.close()
    leaked = [p for p in _zombie_children() if p not in before and p in pids]
    assert leaked == [], f"{len(leaked)} of 30 closed shells left a zombie: {leaked}"

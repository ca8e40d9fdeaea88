"""ShellSession: one persistent bash inside a sandbox, driven by pexpect.

Two ways to drive it:

* **Command mode** — :meth:`ShellSession.run` runs one command line to completion and returns its
  output, exit code and duration. State (cwd, variables, functions, background jobs) persists
  between calls. The command's stdin is ``/dev/null``, so a command that reads stdin (``cat``,
  ``python`` without a script) ends instead of waiting; interactive programs belong to keystroke
  mode.
* **Keystroke mode** — :meth:`ShellSession.send_keys` types raw keys (text without Enter, ``C-c``,
  ``Escape``, arrows, ...) into the terminal and returns the visible screen, rendered by a terminal
  emulator (``pyte``), so an agent can drive a Python REPL, ``less`` or ``vim``.

Framing. Each command is sent as one line: ``printf START; eval $'<command>' </dev/null; printf
END:$?``. The markers carry a fresh random token per command and are built by ``printf`` from
escape sequences, so the terminal's echo of the line never contains them and a program cannot
guess them. The command is quoted with ANSI-C ``$'...'`` escapes, so no byte of it can break the
line (quotes, newlines, ``!``, non-UTF-8). Output is read in chunks and kept as a head and a tail
of bounded size; what falls in between is counted and dropped, so 100 MB of output never sits in
memory.

Recovery. On timeout the session sends Ctrl-C, then kills the terminal's foreground process group,
and checks the shell answers; if it does not, it starts a new shell and says so in the result. A
command that ends the shell (``exit``, a failure under ``set -e``) is reported with the shell's exit
code and a new shell is started. When no new shell can start (the sandbox itself is gone),
:class:`~t1env.sandbox.base.SandboxError` is raised.

Example:
    >>> from t1env.sandbox.local import LocalSandbox
    >>> with LocalSandbox() as box, ShellSession(box) as sh:
    ...     _ = sh.run("cd /tmp && X=42")
    ...     r = sh.run("echo $X; pwd")
    >>> r.output, r.exit_code
    ('42\\n/tmp\\n', 0)
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import signal
import time
from dataclasses import dataclass

import pexpect
import pyte

from t1env.sandbox.base import Sandbox, SandboxError

log = logging.getLogger(__name__)

DEFAULT_MAX_OUTPUT = 32 * 1024
_CHUNK = 1 << 16

# Named keys for keystroke mode (tmux-style names).
KEYS: dict[str, bytes] = {
    "Enter": b"\r",
    "Tab": b"\t",
    "Escape": b"\x1b",
    "Esc": b"\x1b",
    "Space": b" ",
    "Backspace": b"\x7f",
    "BSpace": b"\x7f",
    "Delete": b"\x1b[3~",
    "Up": b"\x1b[A",
    "Down": b"\x1b[B",
    "Right": b"\x1b[C",
    "Left": b"\x1b[D",
    "Home": b"\x1b[H",
    "End": b"\x1b[F",
    "PageUp": b"\x1b[5~",
    "PPage": b"\x1b[5~",
    "PageDown": b"\x1b[6~",
    "NPage": b"\x1b[6~",
}
KEYS.update({f"C-{c}": bytes([ord(c) - 96]) for c in "abcdefghijklmnopqrstuvwxyz"})
KEYS.update({f"M-{c}": b"\x1b" + c.encode() for c in "abcdefghijklmnopqrstuvwxyz"})
KEYS.update({"C-[": b"\x1b", "C-\\": b"\x1c", "C-]": b"\x1d", "C-@": b"\x00"})

_ANSI = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def ansi_c_quote(command: str) -> str:
    """Quote ``command`` as a bash ``$'...'`` word that survives being typed into a terminal."""
    out = ["$'"]
    for b in command.encode("utf-8", "surrogateescape"):
        if 0x20 <= b < 0x7F and b not in (0x27, 0x5C, 0x21):  # printable, not ' \ !
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    out.append("'")
    return "".join(out)


def clean_output(raw: bytes) -> str:
    """Bytes from the terminal → text for an agent: ANSI escapes removed, carriage returns applied,
    invalid UTF-8 and control bytes replaced with U+FFFD. Never raises."""
    text = _ANSI.sub(b"", raw).decode("utf-8", errors="replace")
    if "\r" in text:
        lines = []
        for line in text.split("\n"):
            line = line.rstrip("\r")  # CRLF line ending
            if "\r" in line:  # progress bars: the last rewrite of the line is what a person sees
                line = line.rsplit("\r", 1)[1]
            lines.append(line)
        text = "\n".join(lines)
    return _CTRL.sub("\ufffd", text)


@dataclass
class CommandResult:
    """What one command did. ``exit_code`` is None when the command did not finish normally."""

    output: str
    exit_code: int | None
    duration: float
    timed_out: bool = False
    truncated: bool = False
    restarted: bool = False
    note: str = ""

    @property
    def observation(self) -> str:
        """The output followed by t1's note (if any), as an agent should see it."""
        if not self.note:
            return self.output
        sep = "" if not self.output or self.output.endswith("\n") else "\n"
        return f"{self.output}{sep}[t1] {self.note}"


class _Capture:
    """Head + tail of a byte stream with a fixed memory bound."""

    def __init__(self, cap: int):
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, data: bytes | bytearray) -> None:
        if len(self.head) < self.head_cap:
            take = self.head_cap - len(self.head)
            self.head += data[:take]
            data = data[take:]
        if data:
            self.tail += data
            over = len(self.tail) - self.tail_cap
            if over > 0:
                self.dropped += over
                del self.tail[:over]

    def text(self) -> tuple[str, bool]:
        if not self.dropped:
            return clean_output(bytes(self.head + self.tail)), False
        marker = f"\n[... {self.dropped} bytes of output truncated ...]\n"
        return clean_output(bytes(self.head)) + marker + clean_output(bytes(self.tail)), True


def _reap(child: pexpect.spawn, timeout: float = 2.0) -> None:
    """Wait for a SIGKILLed child so it leaves no zombie.

    ``pexpect``'s ``close(force=True)`` polls once right after the kill; when the process has not died yet it gives up
    without reaping, and a long run leaves one zombie ``nsenter`` per such episode (hundreds in a training run).
    """
    if child.ptyproc.exitstatus is not None or child.ptyproc.signalstatus is not None:
        return  # already reaped by pexpect
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            return  # reaped elsewhere
        if pid or time.monotonic() > deadline:
            return
        time.sleep(0.001)


class ShellSession:
    """A persistent interactive bash inside ``sandbox``. See the module docstring.

    Args:
        sandbox: a started :class:`~t1env.sandbox.base.Sandbox`.
        max_output_bytes: output kept per command (head + tail); the rest is dropped and counted.
        screen: (columns, rows) of the terminal for keystroke mode.
        startup_timeout: seconds a new shell may take to answer.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT,
        screen: tuple[int, int] = (120, 40),
        startup_timeout: float = 15.0,
    ):
        self.sandbox = sandbox
        self.max_output_bytes = max_output_bytes
        self.cols, self.rows = screen
        self.startup_timeout = startup_timeout
        self.child: pexpect.spawn | None = None
        self.shell_pid: int | None = None
        self.restarts = 0
        self._keys_pending = False
        self._screen = pyte.Screen(self.cols, self.rows)
        self._screen.set_mode(pyte.modes.LNM)
        self._stream = pyte.ByteStream(self._screen)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.child is not None:
            return
        self.child = self.sandbox.open_shell(self.rows, self.cols)  # a backend's own connection, if it has one
        if self.child is None:
            argv = self.sandbox.shell_argv()
            self.child = pexpect.spawn(
                argv[0],
                argv[1:],
                env=self.sandbox.spawn_env(),
                echo=True,
                encoding=None,
                dimensions=(self.rows, self.cols),
                preexec_fn=self.sandbox.preexec(),
            )
        self.child.delaybeforesend = None  # 50 ms per send otherwise
        tok = secrets.token_hex(8)
        init = (
            "PS1='$ '; PS2=''; PROMPT_COMMAND=''; unset HISTFILE; set +H; "
            "stty -onlcr -ixon 2>/dev/null; "
            f"\\builtin printf '\\036%s:%s\\037' Y{tok} $$"
        )
        self._send_line(init)
        pid = self._wait_marker(f"\x1eY{tok}:".encode(), self.startup_timeout)
        if pid is None:
            self._kill_child()
            self.sandbox.shell_argv()  # raises the backend's reason if the sandbox died meanwhile (container killed)
            raise SandboxError(
                f"the shell in the {self.sandbox.name} sandbox did not start within {self.startup_timeout}s"
            )
        self.shell_pid = pid

    def close(self) -> None:
        """Kill the shell (background jobs inside the sandbox are the sandbox's to stop). Idempotent."""
        self._kill_child()

    def __enter__(self) -> "ShellSession":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self.child is not None and self.child.isalive()

    def _kill_child(self) -> None:
        child, self.child = self.child, None
        self.shell_pid = None
        if child is not None and not isinstance(child, pexpect.spawn):  # Sandbox.open_shell's: no process of ours
            child.close(force=True)
        elif child is not None:
            try:  # SIGKILL first: pexpect's polite close sleeps 100 ms or more
                os.kill(child.pid, signal.SIGKILL)
            except OSError:
                pass
            child.ptyproc.delayafterclose = 0
            child.ptyproc.delayafterterminate = 0
            try:
                child.close(force=True)
            except Exception:  # the pty may already be closed; _reap() below collects the process either way
                log.debug("closing the shell's pty", exc_info=True)
            _reap(child)

    def _restart(self) -> None:
        self._kill_child()
        self.restarts += 1
        self._keys_pending = False
        self.start()

    # -- low level I/O -----------------------------------------------------------------------
    def _send_line(self, line: str) -> None:
        assert self.child is not None
        self.child.send(line.encode() + b"\n")

    def _read(self, timeout: float) -> bytes | None:
        """One chunk of output; b'' on timeout, None on EOF (the shell is gone)."""
        assert self.child is not None
        try:
            return self.child.read_nonblocking(_CHUNK, timeout=max(timeout, 0))
        except pexpect.TIMEOUT:
            return b""
        except pexpect.EOF:
            return None

    def _wait_marker(self, prefix: bytes, timeout: float) -> int | None:
        """Read until ``prefix<int>\\x1f`` appears; return the int, or None on timeout/EOF."""
        deadline = time.monotonic() + timeout
        buf = bytearray()
        while True:
            i = buf.find(prefix)
            if i >= 0:
                j = buf.find(b"\x1f", i)
                if j >= 0:
                    try:
                        return int(buf[i + len(prefix) : j])
                    except ValueError:
                        return None
            elif len(buf) > 4 * _CHUNK:
                del buf[: len(buf) - len(prefix)]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            chunk = self._read(remaining)
            if chunk is None:
                return None
            buf += chunk

    # -- command mode ------------------------------------------------------------------------
    def run(self, command: str, timeout: float = 30.0) -> CommandResult:
        """Run ``command`` (any bash, multi-line allowed) and wait for it, at most ``timeout`` s."""
        t0 = time.monotonic()
        if self.child is None:
            self.start()
        if self._keys_pending:
            if self.shell_pid is not None and self.sandbox.foreground_busy(self.shell_pid):
                return CommandResult(
                    "",
                    None,
                    time.monotonic() - t0,
                    note="a program started with keystrokes is still running in the foreground; send it keys "
                    "to quit (for example {'keys': ['C-c']} or {'keys': ['q']}) before running commands",
                )
            assert self.child is not None
            self.child.send(b"\x15")  # Ctrl-U: drop a half-typed line left at the prompt
            self._keys_pending = False
        tok = secrets.token_hex(8)
        start = f"\x1eS{tok}\x1f".encode()
        end_prefix = f"\x1eE{tok}:".encode()
        line = (
            f"\\builtin printf '\\036%s\\037' S{tok}; \\builtin eval {ansi_c_quote(command)} </dev/null; "
            f"\\builtin printf '\\036%s:%s\\037' E{tok} $?"
        )
        if len(line) > 3000:  # a terminal line holds at most 4095 bytes: pass long commands as a file
            path = f"/tmp/.t1-cmd-{tok}"
            self.sandbox.put_file(path, command.encode("utf-8", "surrogateescape"), 0o600)
            line = (
                f"\\builtin printf '\\036%s\\037' S{tok}; \\builtin eval \"$(< {path})\" </dev/null; "
                f"\\builtin printf '\\036%s:%s\\037' E{tok} $?; \\command rm -f {path}"
            )
        self._send_line(line)

        cap = _Capture(self.max_output_bytes)
        buf = bytearray()
        started = False
        deadline = t0 + timeout
        while True:
            if not started:
                i = buf.find(start)
                if i >= 0:
                    del buf[: i + len(start)]
                    started = True
                elif len(buf) >= len(start):
                    del buf[: len(buf) - len(start) + 1]
            if started:
                i = buf.find(end_prefix)
                if i >= 0:
                    j = buf.find(b"\x1f", i)
                    if j >= 0:
                        cap.feed(buf[:i])
                        rc = int(buf[i + len(end_prefix) : j])
                        return self._result(cap, rc, t0)
                else:
                    keep = len(end_prefix) - 1
                    if len(buf) > keep:
                        cap.feed(buf[: len(buf) - keep])
                        del buf[: len(buf) - keep]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                cap.feed(buf)
                return self._recover_from_timeout(cap, t0, timeout)
            chunk = self._read(remaining)
            if chunk is None:  # the shell ended (exit, set -e, killed)
                cap.feed(buf)
                return self._recover_from_exit(cap, t0)
            buf += chunk

    def _result(self, cap: _Capture, rc: int | None, t0: float, **kw) -> CommandResult:
        text, truncated = cap.text()
        self._stream.feed(text[-4096:].replace("\n", "\r\n").encode("utf-8", "replace"))
        return CommandResult(text, rc, time.monotonic() - t0, truncated=truncated, **kw)

    def _recover_from_timeout(self, cap: _Capture, t0: float, timeout: float) -> CommandResult:
        assert self.child is not None
        self.child.send(b"\x03")  # Ctrl-C to the foreground process group
        if self._drain_and_sync(cap, 2.0):
            return self._result(
                cap, None, t0, timed_out=True, note=f"command timed out after {timeout:g}s and was interrupted (Ctrl-C)"
            )
        try:
            self.sandbox.exec(["bash", "-c", _KILL_FOREGROUND, "bash", str(self.shell_pid)], timeout=10)
        except SandboxError:
            pass
        if self._drain_and_sync(cap, 2.0):
            return self._result(
                cap,
                None,
                t0,
                timed_out=True,
                note=f"command timed out after {timeout:g}s; it ignored Ctrl-C and was killed",
            )
        try:
            self._restart()
        except SandboxError as e:
            raise SandboxError(f"command timed out after {timeout:g}s and the shell could not be restarted: {e}") from e
        return self._result(
            cap,
            None,
            t0,
            timed_out=True,
            restarted=True,
            note=f"command timed out after {timeout:g}s and the shell did not recover; a new shell was started "
            f"in {self.sandbox.config.workdir} (variables, functions and the current directory were reset)",
        )

    def _drain_and_sync(self, cap: _Capture, timeout: float) -> bool:
        """After an interrupt: keep what the command still prints, then check the shell answers."""
        tok = secrets.token_hex(8)
        marker = f"\x1eY{tok}:0\x1f".encode()
        sync = f"\\builtin printf '\\036%s:%s\\037' Y{tok} 0"
        self._send_line(sync)
        deadline = time.monotonic() + timeout
        resend_at = time.monotonic() + timeout / 2  # a line typed while a job ends can be dropped
        buf = bytearray()
        while time.monotonic() < deadline:
            if resend_at and time.monotonic() >= resend_at:
                self._send_line(sync)
                resend_at = 0.0
            chunk = self._read(min(deadline, resend_at or deadline) - time.monotonic())
            if chunk is None:
                return False
            buf += chunk
            if marker in buf:
                return True
            if len(buf) > _CHUNK:
                cap.feed(buf[: -len(marker)])
                del buf[: -len(marker)]
        return False

    def _recover_from_exit(self, cap: _Capture, t0: float) -> CommandResult:
        code = None
        if self.child is not None:
            if isinstance(self.child, pexpect.spawn):
                self.child.ptyproc.delayafterclose = 0
            self.child.close(force=True)
            code = self.child.exitstatus if self.child.exitstatus is not None else self.child.signalstatus
        try:
            self._restart()
        except SandboxError as e:
            raise SandboxError(f"the shell exited (code {code}) and could not be restarted: {e}") from e
        return self._result(
            cap,
            code,
            t0,
            restarted=True,
            note=f"the shell exited (code {code}); a new shell was started in {self.sandbox.config.workdir} "
            "(variables, functions and the current directory were reset)",
        )

    # -- keystroke mode ----------------------------------------------------------------------
    @staticmethod
    def encode_keys(keys: str | list[str]) -> bytes:
        """``"text"`` → its bytes; ``["ls", "Enter", "C-c"]`` → named keys translated, other items literal."""
        if isinstance(keys, str):
            return keys.encode("utf-8", "surrogateescape")
        return b"".join(KEYS.get(k, k.encode("utf-8", "surrogateescape")) for k in keys)

    def send_keys(self, keys: str | list[str], wait: float = 0.5, idle: float = 0.1) -> str:
        """Type ``keys`` and return the screen once output has been quiet for ``idle`` s (at most ``wait`` s).

        Empty ``keys`` types nothing and returns the screen after new output settles (or ``wait``).

        In a list, each ``"Enter"`` ends a segment: the segment is sent and its output read until the
        terminal is quiet (at most ``wait``) before the next one, as a person types a line and
        waits. Programs that reset the terminal when they start would otherwise drop the typeahead.
        """
        if self.child is None:
            self.start()
        self._keys_pending = True
        segments: list[bytes] = []
        if isinstance(keys, str):
            segments.append(self.encode_keys(keys))
        else:
            cur: list[str] = []
            for k in keys:
                cur.append(k)
                if k == "Enter":
                    segments.append(self.encode_keys(cur))
                    cur = []
            if cur:
                segments.append(self.encode_keys(cur))
        if not segments:  # no keys: just look at the screen again after `wait`
            self._read_screen(wait, idle)
        for seg in segments:
            assert self.child is not None
            self.child.send(seg)
            if not self._read_screen(wait, idle):
                break
        return self.screen()

    def _read_screen(self, wait: float, idle: float) -> bool:
        """Feed output to the emulator until quiet; False if the shell died (it is restarted)."""
        deadline = time.monotonic() + wait
        tail = bytearray()
        alive = True
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # quiet for `idle` counts only once the program has answered: a slow start is waited for
            chunk = self._read(min(idle, remaining) if tail else remaining)
            if chunk is None:
                alive = False
                break
            if not chunk:
                break
            tail += chunk
            if len(tail) > 256 * 1024:  # the emulator is slow; the screen only needs the end
                del tail[: len(tail) - 64 * 1024]
        self._stream.feed(bytes(tail))
        if not alive:
            self._restart()
            self._stream.feed(b"\r\n[t1] the shell exited; a new shell was started\r\n")
        return alive

    def screen(self) -> str:
        """The visible terminal screen as text (trailing blanks trimmed)."""
        lines = [line.rstrip() for line in self._screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)


# Kill the terminal's foreground process group if it is not the shell's own (args: shell pid).
_KILL_FOREGROUND = (
    'set -- $(sed "s/.*) //" /proc/$1/stat); '  # fields after the command name: state ppid pgrp session tty tpgid
    '[ "$6" -gt 0 ] && [ "$6" != "$3" ] && kill -KILL -- "-$6"; true'
)

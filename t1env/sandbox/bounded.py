"""Running a process with a hard deadline and bounded output (for ``LocalSandbox.exec`` and its file transfers).

:func:`pump` feeds a process its stdin and collects stdout and stderr into :class:`OutputCapture`
objects that keep at most a head and a tail of each; the middle is counted and dropped, so a
command that prints gigabytes costs the host a few megabytes. It returns once the process has
ended, or has been killed at the deadline, plus a short grace: a daemon the command left behind
may hold the pipes open forever and must not hang the caller.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time


class OutputCapture:
    """Head and tail of a byte stream within ``cap`` bytes; the middle is counted and dropped."""

    def __init__(self, cap: int, keep_tail: bool = True):
        self.head_cap = cap // 2 if keep_tail else cap
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        take = max(0, self.head_cap - len(self.head))
        self.head += data[:take]
        if len(data) > take and self.tail_cap:
            self.tail += data[take:]
            del self.tail[: max(0, len(self.tail) - self.tail_cap)]

    def bytes(self) -> bytes:
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped <= 0:
            return bytes(self.head + self.tail)
        return bytes(self.head) + f"\n[... {dropped} bytes of output truncated by t1 ...]\n".encode() + bytes(self.tail)


class Finished:
    """What :func:`pump` collected: the two captures, the exit code, and why it stopped early (if it did)."""

    def __init__(self, stdout: OutputCapture, stderr: OutputCapture):
        self.stdout, self.stderr = stdout, stderr
        self.returncode = 0
        self.timed_out = False
        self.over_limit = False


def pump(
    proc: subprocess.Popen, stdin: bytes | None, res: Finished, deadline: float, grace: float, limit: int | None
) -> None:
    """Feed stdin, collect stdout/stderr into ``res``, and return once ``proc`` has ended.

    ``proc`` is killed (with its process group) at ``deadline``. Once it has ended, output is read
    for at most ``grace`` seconds more: a background process it left behind may hold the pipes open
    forever, and must not hang the caller.
    """
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    readers = {proc.stdout.fileno(): res.stdout, proc.stderr.fileno(): res.stderr}
    for fd in readers:
        sel.register(fd, selectors.EVENT_READ, "read")
    pending = memoryview(stdin or b"")
    if proc.stdin is not None:
        if pending:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "write")
        else:
            proc.stdin.close()
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    except (AttributeError, OSError):  # Linux < 5.3: poll instead
        pidfd = None
    ended_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if ended_at is None and pidfd is None and proc.poll() is not None:
                ended_at = now
            if ended_at is None and now >= deadline:
                res.timed_out = True
                kill_group(proc)
                ended_at = now
            if ended_at is not None and (not readers or now >= ended_at + grace):
                break  # done; or something left running still holds the pipes: stop waiting for it
            wait = (ended_at + grace if ended_at is not None else deadline) - now
            for key, _ in sel.select(min(wait, 0.05) if pidfd is None else wait):
                if key.data == "exit":
                    sel.unregister(key.fd)
                    ended_at = time.monotonic()
                elif key.data == "write":
                    try:
                        pending = pending[os.write(key.fd, pending[:65536]) :]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the reader ended early; its exit code says why
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(key.fd)
                        proc.stdin.close()  # type: ignore[union-attr]
                else:
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fd)
                        del readers[key.fd]
                        continue
                    readers[key.fd].feed(chunk)
                    if limit is not None and res.stdout.total > limit:
                        res.over_limit = True
                        kill_group(proc)
                        return
    finally:
        sel.close()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None and not f.closed:
                f.close()
        if pidfd is not None:
            os.close(pidfd)
        if ended_at is None and proc.poll() is None:
            kill_group(proc)  # interrupted (or over the limit): leave nothing running
        try:
            res.returncode = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            res.returncode = -9


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def readable_within(f, timeout: float) -> bool:
    """Whether ``f`` (a file or descriptor) becomes readable within ``timeout`` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(f, selectors.EVENT_READ)
        return bool(sel.select(timeout))

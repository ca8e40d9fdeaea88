"""The agent's shell in a container, on the engine's attached exec socket (see :mod:`t1env.sandbox.docker`).

``docker exec -it`` puts two more hops between :class:`~t1env.episode.shell.ShellSession` and the shell: a pty on
the host and the docker CLI that copies between it and the engine's socket. :class:`ExecShell` talks to the socket
itself: an exec of ``bash -i`` with a terminal (the engine's pty in the container, as with ``-it``), started with
the engine API and hijacked (``exec_start(socket=True)``), its bytes read and written as they are. It offers what
ShellSession uses of a ``pexpect.spawn``: ``send``, ``read_nonblocking`` (``pexpect.TIMEOUT``/``pexpect.EOF``),
``isalive``, ``close(force)``, ``exitstatus``/``signalstatus`` (the exec's exit code, from the engine, once the shell
ended) and ``delaybeforesend``. Closing it ends the connection, as killing the CLI does; neither ends a shell that
is still running in the container (the engine does not), and the sandbox's ``stop()`` ends everything in it.

Used for a local engine (``unix://``) only: a ``tcp://`` engine may sit behind TLS and an ``ssh://`` one behind a
pipe to ``ssh``, where the socket's bytes are not the stream's; those keep the CLI.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import time

import pexpect

from t1env.sandbox.base import SandboxError
from t1env.sandbox.docker_engine import _one_line

log = logging.getLogger(__name__)

EXIT_WAIT = 2.0  # seconds to wait, once the stream ended, for the engine to report the shell's exit code


class ExecShell:
    """An interactive shell in container ``cid``: ``argv`` run with a terminal of ``rows`` x ``cols`` in ``workdir``,
    through the engine API of client ``c``."""

    def __init__(self, c, cid: str, argv: list[str], workdir: str, rows: int, cols: int):
        self.delaybeforesend: float | None = None  # read by nobody here: kept for pexpect.spawn's interface
        self.exitstatus: int | None = None
        self.signalstatus: int | None = None
        self.flag_eof = False
        self._api = c.api
        try:
            self.exec_id = c.api.exec_create(cid, argv, stdin=True, tty=True, workdir=workdir)["Id"]
            hijacked = c.api.exec_start(self.exec_id, tty=True, socket=True)
        except Exception as e:
            raise SandboxError(f"could not start a shell in container {cid[:12]}: {_one_line(e)}") from None
        raw = getattr(hijacked, "_sock", hijacked)  # the SDK wraps the socket in a SocketIO
        self._sock = socket.socket(fileno=os.dup(raw.fileno()))  # ours alone: the SDK may close its copy any time
        raw.close()
        self._poll = select.poll()
        self._poll.register(self._sock.fileno(), select.POLLIN)
        try:  # the terminal's size, as the CLI sets it; best effort (the shell may already be gone)
            c.api.exec_resize(self.exec_id, height=rows, width=cols)
        except Exception:
            log.debug("resizing the terminal of exec %s", self.exec_id, exc_info=True)

    def send(self, data: bytes) -> int:
        """Write ``data`` to the shell. A stream that broke (the engine restarted, the container died) is the
        shell's end, as a dead pty is for the CLI: the next read says EOF, and ShellSession asks the sandbox why."""
        try:
            self._sock.sendall(data)
        except OSError:  # EPIPE, ECONNRESET
            self.flag_eof = True
        return len(data)

    def read_nonblocking(self, size: int, timeout: float) -> bytes:
        """Up to ``size`` bytes once some arrive within ``timeout`` s: ``pexpect.TIMEOUT`` if none do, ``pexpect.EOF``
        once the shell's stream ended."""
        if self.flag_eof or self._sock.fileno() < 0:
            raise pexpect.EOF("the shell's stream ended")
        if not self._poll.poll(max(timeout, 0) * 1000):
            raise pexpect.TIMEOUT("no output")
        try:
            data = self._sock.recv(size)
        except OSError:
            data = b""
        if not data:
            self.flag_eof = True
            raise pexpect.EOF("the shell's stream ended")
        return data

    def isalive(self) -> bool:
        """False once the stream ended (read or not yet read) or was closed."""
        if self.flag_eof or self._sock.fileno() < 0:
            return False
        try:
            return self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True  # nothing to read: open
        except OSError:
            return False

    def close(self, force: bool = True) -> None:
        """Close the connection. When the shell had ended, its exit code is in :attr:`exitstatus`."""
        if self._sock.fileno() >= 0:
            self._sock.close()
        if self.flag_eof and self.exitstatus is None:
            deadline = time.monotonic() + EXIT_WAIT
            while time.monotonic() < deadline:
                try:
                    state = self._api.exec_inspect(self.exec_id)
                except Exception:
                    return  # the container is gone: no code to tell
                if not state.get("Running"):
                    self.exitstatus = state.get("ExitCode")  # 128+n for a signal, as the CLI's exit code says
                    return
                time.sleep(0.002)

"""The in-container helper: exec and file transfer without an engine round trip each (see :mod:`t1env.sandbox.docker`)."""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
from typing import Mapping

log = logging.getLogger(__name__)

# Runs as `python3 -I -S -u -c HELPER` inside the container; one JSON request per line on stdin,
# one JSON reply per line on stdout. Python >= 3.6; stdlib only.
HELPER = r"""
import base64, io, json, os, signal, subprocess, sys, tarfile
inp, out = sys.stdin.buffer, sys.stdout.buffer
b64, unb64 = (lambda b: base64.b64encode(b).decode()), (lambda s: base64.b64decode(s))
def reply(d):
    out.write(json.dumps(d).encode() + b"\n"); out.flush()
def run(r):
    try:
        p = subprocess.Popen(r["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=r["env"], cwd=r.get("cwd"), start_new_session=True)
    except OSError as e:
        return {"rc": 126 if isinstance(e, PermissionError) else 127, "out": "", "err": b64(str(e).encode()), "to": False}
    to = False
    try:
        o, e = p.communicate(timeout=r["timeout"])
    except subprocess.TimeoutExpired:
        to = True
        try: os.killpg(p.pid, signal.SIGKILL)
        except OSError: pass
        try: o, e = p.communicate(timeout=5)
        except subprocess.TimeoutExpired: o, e = b"", b""
    return {"rc": -9 if to else p.returncode, "out": b64(o or b""), "err": b64(e or b""), "to": to}
def put(r):
    path = r["path"]; os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), ".%s.t1tmp" % os.path.basename(path))
    with open(tmp, "wb") as f: f.write(unb64(r["data"]))
    os.chmod(tmp, r["mode"]); os.replace(tmp, path); return {}
def untar(r):
    os.makedirs(r["dest"], exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(unb64(r["data"]))) as t:
        kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        t.extractall(r["dest"], **kw)
    return {}
def get(r):
    with open(r["path"], "rb") as f: return {"data": b64(f.read())}
OPS = {"ping": lambda r: {"pid": os.getpid()}, "exec": run, "put": put, "untar": untar, "get": get}
for line in inp:
    try:
        r = json.loads(line.decode()); reply(OPS[r["op"]](r))
    except FileNotFoundError as e: reply({"error": "ENOENT", "msg": str(e)})
    except IsADirectoryError as e: reply({"error": "EISDIR", "msg": str(e)})
    except PermissionError as e: reply({"error": "EACCES", "msg": str(e)})
    except Exception as e: reply({"error": type(e).__name__, "msg": str(e)})
"""


class _HelperGone(Exception):
    pass


class _Helper:
    """One helper process in a container, spoken to over the exec's hijacked socket."""

    def __init__(self, c, container_id: str, env: Mapping[str, str]):
        ex = c.api.exec_create(
            container_id,
            ["python3", "-I", "-S", "-u", "-c", HELPER],
            stdin=True,
            stdout=True,
            stderr=True,
            environment=dict(env),
        )
        self.exec_id = ex["Id"]
        sock = c.api.exec_start(self.exec_id, socket=True)
        self._holder = sock  # keep the SocketIO wrapper alive (closing it closes the socket)
        self.sock: socket.socket = getattr(sock, "_sock", sock)
        self.sock.setblocking(True)
        self.lock = threading.Lock()
        self._buf = bytearray()  # demultiplexed stdout not yet consumed
        self._raw = bytearray()  # raw stream bytes not yet demultiplexed
        self._stderr = bytearray()
        self.dead = False
        self.pid = self.call({"op": "ping"}, timeout=20)["pid"]

    def call(self, req: dict, timeout: float) -> dict:
        with self.lock:
            if self.dead:
                raise _HelperGone("helper is gone")
            try:
                self.sock.sendall(json.dumps(req).encode() + b"\n")
                return json.loads(self._readline(time.monotonic() + timeout))
            except (OSError, ValueError, _HelperGone) as e:
                self.dead = True
                raise _HelperGone(str(e) or type(e).__name__) from None

    def _readline(self, deadline: float) -> bytes:
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[: i + 1]
                return line
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise _HelperGone("helper did not answer in time")
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                err = self._stderr.decode("utf-8", "replace").strip()
                raise _HelperGone(err.splitlines()[-1] if err else "helper exited")
            self._raw += chunk
            self._demux()

    def _demux(self) -> None:
        # Docker's stream framing: 1 byte stream id, 3 zero bytes, 4 bytes big-endian length.
        raw = self._raw
        while len(raw) >= 8:
            n = int.from_bytes(raw[4:8], "big")
            if len(raw) < 8 + n:
                break
            (self._buf if raw[0] == 1 else self._stderr).extend(raw[8 : 8 + n])
            del raw[: 8 + n]
        if len(self._stderr) > 65536:
            del self._stderr[:-4096]

    def close(self) -> None:
        self.dead = True
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self._holder.close()
        except Exception:  # the helper's socket may already be gone with its container
            log.debug("closing the helper's socket", exc_info=True)

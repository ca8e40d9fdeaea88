import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

ADDR = ("127.0.0.1", 7070)


class Client:
    def __init__(self):
        self.sock = socket.create_connection(ADDR, timeout=5)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def cmd(self, text):
        self.send(text.encode() + b"\n")
        return self.line()

    def close(self):
        self.sock.close()


@pytest.fixture
def c():
    client = Client()
    yield client
    client.close()


def uniq(name):
    return f"{name}-{os.getpid()}-{time.monotonic_ns()}"


def test_set_get(c):
    k = uniq("k")
    assert c.cmd(f"SET {k} hello big world") == "OK"
    assert c.cmd(f"GET {k}") == "VALUE hello big world"
    assert c.cmd(f"SET {k} v2") == "OK"
    assert c.cmd(f"GET {k}") == "VALUE v2"
    assert c.cmd(f"GET {uniq('missing')}") == "NOTFOUND"


def test_del(c):
    k = uniq("d")
    c.cmd(f"SET {k} 1")
    assert c.cmd(f"DEL {k}") == "DELETED"
    assert c.cmd(f"DEL {k}") == "NOTFOUND"
    assert c.cmd(f"GET {k}") == "NOTFOUND"


def test_incr(c):
    k = uniq("n")
    assert c.cmd(f"INCR {k}") == "VALUE 1"
    assert c.cmd(f"INCR {k}") == "VALUE 2"
    c.cmd(f"SET {k} 41")
    assert c.cmd(f"INCR {k}") == "VALUE 42"
    c.cmd(f"SET {k} abc")
    assert c.cmd(f"INCR {k}") == "ERR not an integer"
    assert c.cmd(f"GET {k}") == "VALUE abc"


def test_keys_prefix(c):
    p = uniq("pfx")
    for s in ("b", "a", "c/d"):
        c.cmd(f"SET {p}:{s} x")
    assert c.cmd(f"KEYS {p}:") == f"KEYS {p}:a {p}:b {p}:c/d"
    assert c.cmd(f"KEYS {uniq('none')}") == "KEYS"
    assert c.cmd("KEYS").startswith("KEYS ")


def test_errors_keep_connection(c):
    assert c.cmd("FLY away") == "ERR unknown command"
    assert c.cmd("GET") == "ERR unknown command"
    assert c.cmd("SET onlykey") == "ERR unknown command"
    k = uniq("after")
    assert c.cmd(f"SET {k} 1") == "OK"


def test_pipelined_and_split_packets(c):
    k = uniq("p")
    c.send(f"SET {k} 1\r\nINCR {k}\nGET {k}\nDEL {k}\n".encode())
    assert [c.line() for _ in range(4)] == ["OK", "VALUE 2", "VALUE 2", "DELETED"]
    c.send(f"SET {k} sp".encode())
    time.sleep(0.2)
    c.send(b"lit\nG")
    time.sleep(0.2)
    c.send(f"ET {k}\n".encode())
    assert [c.line(), c.line()] == ["OK", "VALUE split"]


def test_concurrent_incr():
    k = uniq("ctr")
    errors = []

    def worker():
        try:
            cl = Client()
            for _ in range(20):
                r = cl.cmd(f"INCR {k}")
                assert r.startswith("VALUE "), r
            cl.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    Client().close()  # fail fast when nothing listens
    threads = []
    for _ in range(50):
        t = threading.Thread(target=worker)
        t.start()
        threads.append(t)
        time.sleep(0.005)
    for t in threads:
        t.join(30)
    assert not errors, errors[:3]
    c = Client()
    assert c.cmd(f"GET {k}") == "VALUE 1000"
    c.close()


def server_pid():
    pid = int(Path("/app/kv/kv.pid").read_text().strip())
    assert Path(f"/proc/{pid}").exists(), "kv.pid does not name a running process"
    return pid


def test_detached_with_pidfile():
    Client().close()
    pid = server_pid()
    assert os.getsid(pid) == pid, "server is not in its own session"
    for fd in (0, 1, 2):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        assert "/dev/pts" not in target and "tty" not in target


def test_survives_sigkill_and_restart():
    c = Client()
    k = uniq("durable")
    assert c.cmd(f"SET {k} keep me") == "OK"
    g = uniq("gone")
    c.cmd(f"SET {g} x")
    assert c.cmd(f"DEL {g}") == "DELETED"
    c.close()
    pid = server_pid()
    os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        try:
            socket.create_connection(ADDR, timeout=0.2).close()
            time.sleep(0.1)
        except OSError:
            break
    start = Path("/app/kv/start.sh")
    assert os.access(start, os.X_OK)
    import subprocess
    res = subprocess.run([str(start)], capture_output=True, timeout=20, stdin=subprocess.DEVNULL, cwd="/tmp")
    assert res.returncode == 0, res.stderr
    assert server_pid() != pid
    c = Client()
    assert c.cmd(f"GET {k}") == "VALUE keep me"
    assert c.cmd(f"GET {g}") == "NOTFOUND"
    c.close()

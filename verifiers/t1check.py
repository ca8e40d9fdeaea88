"""Call the agent's Python code from a check without running it in the check's process.

A check that imports the agent's module (``importlib``, ``sys.path.insert(0, "/app")``, ``runpy``,
``exec``) runs the agent's code inside the process that reports the check's result: code at the top of
that module could write the result itself, and t1 refuses such imports in t1-format tasks. This module
runs the agent's code in a child process instead and hands back only data; the check asserts on the
data in its own process. t1 puts it on the checks' ``sys.path``.

    import pytest
    from t1check import agent_module

    def test_to_roman():
        with agent_module("/app/roman.py") as m:      # one child python3 for the whole block
            assert m.to_roman(4) == "IV"               # one JSON round trip per call
            with pytest.raises(ValueError):            # builtin exceptions come back as themselves
                m.to_roman(0)
            assert m.map("to_roman", [1, 2]) == ["I", "II"]   # many calls, one round trip

For objects that live across calls (a cache, a class instance), or thousands of calls at once, write
a *driver*: a top-level function of the test file, self-contained (its imports inside it), that t1check
sends to the child by source and calls there with the imported module as its first argument. It
returns JSON, and the check asserts on that:

    def drive_cache(ttlcache, ttl):                    # runs in the child, beside the agent's code
        c = ttlcache.TTLCache(maxsize=2, ttl=ttl)
        c.set("a", 1)
        return [c.get("a"), len(c)]

    def test_cache():
        with agent_module("/app/ttlcache.py") as m:
            assert m.run(drive_cache, 10) == [1, 1]   # asserted here, in the check's process

``agent_module("inventory.stock", sys_path=["/app"])`` imports a module of a package by name, a list of
names imports several (drivers then get a namespace: ``pkg.stock``, ``pkg.money``), and
``run_agent_python(drive, *args, module=...)`` runs one driver in a child of its own. An agent function
named like a method here (``call``, ``map``, ``run``, ``close``) is called with ``m.call("run", ...)``.

Values: arguments and results are JSON. Tuples arrive as lists; dict keys must be strings; anything else
(Decimal, date, an object) is refused with a ``TypeError`` naming its type and where it sat: convert it
in a driver (``str(d)``, ``d.isoformat()``). NaN and the infinities pass.

Exceptions: one that the agent's code raises comes back as the same type when it is a builtin
(``ValueError``, ``KeyError``, ...), else as :class:`AgentError` (``.type``, ``.message``) made a
subclass of the nearest builtin class the agent's exception derives from, so ``pytest.raises(ValueError)``
still catches an agent's ``class RomanError(ValueError)``. When the child dies, hangs past the timeout,
answers more than ``MAX_REPLY`` bytes or anything outside the protocol, the call raises
:class:`AgentCrash`, which is *not* an ``Exception``: ``pytest.raises(Exception)`` does not swallow it,
so the check fails, with the reason and the tail of the child's stderr.

The child: ``python3 -I -B`` (the check's own interpreter, isolated: no ``PYTHON*`` variables, no user
site), cwd the check's (the task's workdir), environment ``PATH``, ``HOME`` and ``LANG`` only, no file
descriptor but its three pipes, a session of its own. Before starting it, the check's process makes
itself non-dumpable: the child, same uid, can then neither ptrace it nor open ``/proc/<check>/fd``.
Closing kills the child's process group; a process the agent's code moved out of it lives until the
check ends (t1 ends every process a check left before the next one starts). What the agent's code
can still do is answer whatever data it likes and leave files behind: what a check of that code has
to expect anyway.

Standard library only, so that it runs under any image's ``python3``.
"""

import builtins
import json
import os
import sys

if __name__ != "__main__":  # the check's side; the child (``python3 t1check.py``) starts faster without these
    import inspect
    import selectors
    import signal
    import subprocess
    import textwrap
    import time

__all__ = ["AgentCrash", "AgentError", "AgentProcess", "agent_module", "run_agent_python"]

CALL_TIMEOUT = 30.0  # seconds one call may take
TOTAL_TIMEOUT = 300.0  # seconds the child may live
MAX_REPLY = 16 * 1024 * 1024  # bytes of one reply
_STDERR_TAIL = 4000  # characters of the child's stderr kept for messages
_PR_SET_DUMPABLE = 4


class AgentError(Exception):
    """The agent's code raised an exception that is not a builtin (``type``: its qualified name)."""

    def __init__(self, type_name: str, message: str):
        super().__init__(f"{type_name}: {message}")
        self.type, self.message = type_name, message


class AgentCrash(BaseException):
    """The child died, hung, sent too much or broke the protocol: always a failing check (not an Exception)."""


def agent_module(path_or_name: "str | list[str]", **kw) -> "AgentProcess":
    """A child process that has imported the agent's module: a ``.py`` file by path, or a dotted name
    found on ``sys_path`` (a list: several). Use it as a context manager; keyword arguments as
    :class:`AgentProcess`."""
    return AgentProcess(path_or_name, **kw)


def run_agent_python(driver, *args, module=None, **kw):
    """``driver(module, *args)`` in a child of its own (``module`` imported first, as in :func:`agent_module`):
    its JSON result. Keyword arguments ``sys_path``, ``cwd``, ``timeout``, ``total_timeout``, ``env`` and
    ``python`` go to :class:`AgentProcess`, any other to the driver."""
    opts = {k: kw.pop(k) for k in ("sys_path", "cwd", "timeout", "total_timeout", "env", "python") if k in kw}
    with AgentProcess(module, **opts) as p:
        return p.run(driver, *args, **kw)


class AgentProcess:
    """One persistent child ``python3 -I`` that answers calls on the agent's code as JSON lines.

    Args:
        module: a ``.py`` path (its folder goes first on the child's ``sys.path``, as when it runs as a
            script) or a dotted module name; a list of them: all are imported, in order, and the module the
            calls and drivers see is a namespace of them by their last name or file stem
            (``m.call("money.parse_price", "1.50")``); None to import nothing.
        sys_path: folders put first on the child's ``sys.path`` (e.g. ``["/app"]`` for a package there).
        cwd: the child's working directory (default: the check's, i.e. the task's workdir).
        timeout: seconds one call may take; total_timeout: seconds the child may live.
        env: extra environment variables for the child; python: the interpreter (default the check's).
    """

    def __init__(self, module=None, *, sys_path=(), cwd=None, timeout=CALL_TIMEOUT, total_timeout=TOTAL_TIMEOUT,
                 env=None, python=None):
        self.module, self.timeout = module, float(timeout)
        self._deadline = time.monotonic() + float(total_timeout)
        self._buf, self._err = bytearray(), ""
        self._proc = None
        _guard_this_process()
        child_env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
                     "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
        child_env.update(env or {})
        modules = [str(m) for m in module] if isinstance(module, (list, tuple)) else (str(module) if module else None)
        config = json.dumps({"module": modules, "sys_path": [str(p) for p in sys_path]})
        self._proc = subprocess.Popen(
            [python or sys.executable, "-I", "-B", os.path.abspath(__file__), config],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=child_env,
            close_fds=True, start_new_session=True,
        )
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._proc.stdout, selectors.EVENT_READ)
        self._sel.register(self._proc.stderr, selectors.EVENT_READ)
        self._in = self._proc.stdin.fileno()
        os.set_blocking(self._in, False)
        self._wsel = selectors.DefaultSelector()
        self._wsel.register(self._in, selectors.EVENT_WRITE)
        self._call_deadline = time.monotonic() + self.timeout
        try:
            self._answer(self._reply(f"importing {module}" if module else "starting"))
        except BaseException:
            self.close()
            raise

    # -- the check's side of the protocol ------------------------------------------------------

    def call(self, name: str, *args, **kwargs):
        """``module.<name>(*args, **kwargs)`` in the child (``name`` may be dotted: ``"Cls.method"``)."""
        what = f"{name}({_short(args, kwargs)})"
        return self._request({"op": "call", "name": name, "args": args, "kwargs": kwargs}, what)

    def map(self, name: str, inputs) -> list:
        """``[module.<name>(x) for x in inputs]`` in the child, in one round trip (the first exception is raised)."""
        inputs = list(inputs)
        what = f"{name}(x) for {len(inputs)} inputs"
        return self._request({"op": "map", "name": name, "args": inputs, "kwargs": {}}, what)

    def run(self, driver, *args, **kwargs):
        """``driver(module, *args, **kwargs)`` in the child (module: the imported one, or None); ``driver`` is a
        self-contained top-level function (its imports inside it), sent by source."""
        if not inspect.isfunction(driver) or driver.__name__ == "<lambda>":
            raise TypeError(f"run() needs a plain function defined with def, got {driver!r}")
        source = textwrap.dedent(inspect.getsource(driver))
        what = f"{driver.__name__}({_short(args, kwargs)})"
        return self._request({"op": "run", "source": source, "name": driver.__name__, "args": args,
                              "kwargs": kwargs}, what)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def agent_function(*args, **kwargs):
            return self.call(name, *args, **kwargs)

        agent_function.__name__ = agent_function.__qualname__ = name  # pytest's messages: "where 3 = double(2)"
        return agent_function

    def _request(self, msg: dict, what: str):
        if self._proc is None:
            raise AgentCrash(f"{what}: the agent's process is closed")
        try:
            line = json.dumps(msg, allow_nan=True).encode() + b"\n"
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what}: arguments must be JSON ({e}); send str(x) and convert in a driver") from None
        self._call_deadline = time.monotonic() + self.timeout
        self._send(line, what)
        return self._answer(self._reply(what))

    def _send(self, data: bytes, what: str) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._in, view):]
            except BlockingIOError:  # the pipe is full: the child is not reading
                self._wsel.select(self._left(what))
            except OSError as e:  # the child is gone
                self._fail(f"{what}: could not send the call ({e})")

    def _left(self, what: str) -> float:
        now = time.monotonic()
        if now >= self._deadline:
            self._fail(f"{what}: the agent's process ran past its total timeout")
        if now >= self._call_deadline:
            self._fail(f"{what}: no answer within {self.timeout:g}s")
        return min(self._deadline, self._call_deadline) - now

    def _reply(self, what: str) -> dict:
        out = self._proc.stdout.fileno()
        end = self._buf.find(b"\n")
        while end < 0:
            for key, _ in self._sel.select(self._left(what)):
                data = os.read(key.fd, 1 << 16)
                if key.fd != out:
                    if not data:
                        self._sel.unregister(key.fileobj)
                    self._err = (self._err + data.decode("utf-8", "replace"))[-_STDERR_TAIL:]
                    continue
                if not data:
                    self._fail(f"{what}: the agent's process exited ({self._exit_code()})")
                if b"\n" in data:
                    end = len(self._buf) + data.index(b"\n")
                self._buf += data
                if end < 0 and len(self._buf) > MAX_REPLY:
                    self._fail(f"{what}: answer over {MAX_REPLY} bytes")
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or len(reply) != 1 or next(iter(reply)) not in ("ok", "raised", "refused"):
            self._fail(f"{what}: the agent's process answered outside the protocol: {line[:200]!r}")
        return reply

    def _answer(self, reply: dict):
        if "ok" in reply:
            return reply["ok"]
        if "refused" in reply:  # a result or an argument that is not JSON, a driver that is not a function
            raise TypeError(str(reply["refused"])[:2000])
        raised = reply["raised"]
        if not isinstance(raised, dict):
            self._fail(f"the agent's process answered outside the protocol: {raised!r:.200}")
        raise _exception(str(raised.get("type", "?"))[:200], str(raised.get("message", ""))[:2000],
                         raised.get("builtins") if isinstance(raised.get("builtins"), list) else [])

    def _exit_code(self) -> str:
        try:
            code = self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def _fail(self, why: str):
        self._drain_stderr()
        tail = self._err.strip()
        self.close()
        raise AgentCrash(why + (f"; its stderr ends: {tail[-1500:]}" if tail else ""))

    def _drain_stderr(self) -> None:
        for key, _ in self._sel.select(0) if self._proc is not None else ():
            if key.fd == self._proc.stderr.fileno():
                data = os.read(key.fd, 1 << 16)
                self._err = (self._err + data.decode("utf-8", "replace"))[-_STDERR_TAIL:]

    def close(self) -> None:
        """Kill the child and what it started in its process group (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its session's process group: what it forked and did not move
        except OSError:
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        self._sel.close()
        self._wsel.close()

    def __repr__(self):
        return f"agent_module({self.module!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_proc", None) is not None:
            self.close()


def _short(args, kwargs) -> str:
    text = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return text if len(text) <= 80 else text[:77] + "..."


def _exception(type_name: str, message: str, builtin_names: list) -> BaseException:
    """The exception the check sees: the builtin itself, else an AgentError that is also its nearest builtin base."""
    bases = [getattr(builtins, n, None) for n in builtin_names if isinstance(n, str)]
    bases = [b for b in bases if isinstance(b, type) and issubclass(b, Exception)]
    for base in bases:
        if base.__name__ == type_name:
            try:
                return base(message)
            except TypeError:  # e.g. UnicodeDecodeError needs five arguments: try the next builtin base
                continue
        try:
            err = type(f"AgentError[{base.__name__}]", (AgentError, base), {})(type_name, message)
        except TypeError:
            continue
        return err
    return AgentError(type_name, message)


def _guard_this_process() -> None:
    """Make the check's process non-dumpable: the child (same uid, no CAP_SYS_PTRACE in a sandbox) can then
    neither ptrace it nor open its ``/proc/<pid>/fd``, ``mem`` or ``environ``."""
    try:
        import ctypes

        ok = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except Exception:
        ok = False
    if not ok:
        raise AgentCrash("t1check: cannot make the check's process non-dumpable (this python3 has no ctypes or no "
                         "prctl), so the agent's code cannot run beside it; install a python3 with ctypes in the image")


# ---------------------------------------------------------------------------------------------
# the child: python3 -I -B t1check.py CONFIG
# ---------------------------------------------------------------------------------------------


def _child(config: str) -> None:
    import importlib
    import importlib.util
    import types

    channel_in = os.fdopen(os.dup(0), "rb")  # private copies of the pipes; the agent's prints go to stderr
    channel_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)

    def send(obj) -> None:
        channel_out.write(json.dumps(obj, allow_nan=True).encode() + b"\n")
        channel_out.flush()

    def raised(e: BaseException) -> dict:
        names = [c.__name__ for c in type(e).__mro__ if getattr(builtins, c.__name__, None) is c]
        try:
            message = str(e)
        except Exception:
            message = f"<{type(e).__name__} whose str() fails>"
        return {"raised": {"type": str(type(e).__qualname__), "message": message, "builtins": names}}

    def is_path(target: str) -> bool:
        return target.endswith(".py") or "/" in target

    def short_name(target: str) -> str:  # "/app/roman.py" -> roman, "inventory.money" -> money
        return os.path.splitext(os.path.basename(target))[0] if is_path(target) else target.rsplit(".", 1)[-1]

    def load(target: str):
        if not is_path(target):
            return importlib.import_module(target)
        path = os.path.abspath(target)
        name = os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(path))  # as when it runs as a script: its siblings import
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None:
            raise ImportError(f"cannot import {path}: not a Python file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    cfg = json.loads(config)
    sys.path[:0] = cfg["sys_path"]
    module = None
    try:
        if isinstance(cfg["module"], list):  # several: a namespace of them by their last dotted name
            module = types.SimpleNamespace(**{short_name(t): load(t) for t in cfg["module"]})
        elif cfg["module"]:
            module = load(cfg["module"])
        send({"ok": None})
    except BaseException as e:
        send(raised(e))
        return
    for line in channel_in:
        try:
            req = json.loads(line)
            if req["op"] == "run":
                ns = {"__name__": "t1check_driver"}
                exec(compile(req["source"], f"<driver {req['name']}>", "exec"), ns)
                fn = ns[req["name"]]
            else:
                fn = module
                for part in req["name"].split("."):
                    fn = getattr(fn, part)
        except BaseException as e:
            send(raised(e))
            continue
        try:
            if req["op"] == "map":
                result = [fn(x) for x in req["args"]]
            else:
                result = fn(*([module] if req["op"] == "run" else []), *req["args"], **req["kwargs"])
        except BaseException as e:
            send(raised(e))
            continue
        problem = _not_json(result, "the result")
        send({"refused": f"{req['name']}(...) returned {problem}: return JSON (str(x) in a driver)"} if problem
             else {"ok": result})


def _not_json(value, where: str, depth: int = 0):
    """None when ``value`` is JSON (tuples as lists), else what is not and where."""
    if depth > 100:
        return f"a structure nested deeper than 100 levels at {where}"
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            problem = _not_json(v, f"{where}[{i}]", depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"a dict key {k!r} ({type(k).__name__}, not str) at {where}"
            problem = _not_json(v, f"{where}[{k!r}]", depth + 1)
            if problem:
                return problem
        return None
    return f"a {type(value).__name__} at {where}"


if __name__ == "__main__":
    _child(sys.argv[1])

"""t1check (verifiers/t1check.py): checks call the agent's Python code in a child process and get JSON back.

The unit tests run real child interpreters on agent modules written into ``tmp_path``: values round-trip, a
builtin exception comes back as itself, and a child that crashes, hangs, floods or breaks the protocol is a
failing check (``AgentCrash``, not an ``Exception``), never a pass; the verifier runtime and exported tasks
carry the module. The attack on a real sandbox episode (the agent's module forging the report from inside the
child, both backends) is ``test_agent_module_called_through_t1check_cannot_forge_from_its_child`` in
test_reward_integrity.py, on the fixture task ``t1check-module``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import os
import textwrap
import time
from pathlib import Path

import pytest

from t1env.episode.verify import runtime_bundle
from t1env.registry import get_task
from t1env.resources import data_dir
from t1env.tools.export import export

_spec = importlib.util.spec_from_file_location("t1check", data_dir("verifiers") / "t1check.py")
t1check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(t1check)
AgentCrash, AgentError, agent_module = t1check.AgentCrash, t1check.AgentError, t1check.agent_module


@pytest.fixture(autouse=True)
def dumpable_again():
    """t1check makes the check's process non-dumpable; give pytest's process its state back afterwards."""
    yield
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE


def agent_file(tmp_path: Path, source: str, name: str = "agent.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


AGENT = """
    import os, sys, time

    class Custom(Exception):
        pass

    class RomanError(ValueError):
        pass

    def echo(*args, **kwargs):
        return [list(args), kwargs]

    def pair():
        return (1, (2, "three"))

    def nan():
        return [float("nan"), float("inf")]

    def raise_(kind):
        if kind == "value":
            raise ValueError("bad value")
        if kind == "key":
            {}["missing"]
        if kind == "zero":
            1 / 0
        if kind == "file":
            open("/nonexistent/file")
        if kind == "unicode":
            b"\\xff".decode()
        if kind == "roman":
            raise RomanError("not a numeral")
        if kind == "custom":
            raise Custom("custom")
        if kind == "exit":
            sys.exit(0)

    def decimal():
        import decimal
        return {"d": [decimal.Decimal("1.5")]}

    def int_keys():
        return {1: "one"}

    def noisy():
        print("to stdout", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
        return sys.stdin.read()

    def die():
        os._exit(3)

    def hang():
        time.sleep(600)

    def big(n):
        return "x" * n

    def garbage():
        for fd in range(3, 64):
            try:
                os.write(fd, b"not json\\n")
            except OSError:
                pass
        return 1
"""


# -- values ----------------------------------------------------------------------------------------------------


def test_values_round_trip(tmp_path):
    values = [
        None,
        True,
        False,
        0,
        -7,
        2**80,
        1.5,
        -0.0,
        "",
        'naïve ✓\n\t"',
        [],
        {},
        [1, [2, {"a": None}]],
        {"k": {"nested": [1.25, "x"]}},
    ]
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        for v in values:
            assert m.echo(v) == [[v], {}]
        assert m.echo(1, "two", three=3) == [[1, "two"], {"three": 3}]
        assert m.pair() == [1, [2, "three"]]  # tuples arrive as lists
        nan, inf = m.nan()
        assert math.isnan(nan) and inf == math.inf
        assert m.map("echo", ["a", 2]) == [[["a"], {}], [[2], {}]]


def test_values_that_are_not_json_are_refused_with_their_type(tmp_path):
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        with pytest.raises(TypeError, match=r"returned a Decimal at the result\['d'\]\[0\]"):
            m.decimal()
        with pytest.raises(TypeError, match=r"dict key 1 \(int, not str\)"):
            m.int_keys()
        with pytest.raises(TypeError, match="arguments must be JSON"):
            m.echo({1, 2})
        assert m.echo("still serving") == [["still serving"], {}]


def drive_counter(mod, n):
    """A driver: runs in the child with the agent's module as its first argument."""
    import collections

    c = collections.Counter()
    for i in range(n):
        c[mod.echo(i % 3)[0][0]] += 1
    return {str(k): v for k, v in sorted(c.items())}


def test_drivers_run_beside_the_agents_module(tmp_path):
    path = agent_file(tmp_path, AGENT)
    with agent_module(path) as m:
        assert m.run(drive_counter, 7) == {"0": 3, "1": 2, "2": 2}
    assert t1check.run_agent_python(drive_counter, 3, module=path) == {"0": 1, "1": 1, "2": 1}
    with agent_module(path) as m, pytest.raises(TypeError, match="plain function"):
        m.run(lambda mod: 1)


def drive_package(pkg):
    return [pkg.money.cents("1.25"), pkg.util.NAME]


def test_several_modules_of_a_package(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "money.py").write_text("def cents(s):\n    return round(float(s) * 100)\n")
    (tmp_path / "shop" / "util.py").write_text("from .money import cents\nNAME = 'util'\n")
    with agent_module(["shop.money", "shop.util"], sys_path=[str(tmp_path)]) as m:
        assert m.call("money.cents", "2.5") == 250
        assert m.run(drive_package) == [125, "util"]
    with agent_module("shop.money", sys_path=[str(tmp_path)], cwd=str(tmp_path)) as m:
        assert m.cents("0.01") == 1


# -- exceptions ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, expected",
    [("value", ValueError), ("key", KeyError), ("zero", ZeroDivisionError), ("file", FileNotFoundError)],
)
def test_builtin_exceptions_come_back_as_themselves(tmp_path, kind, expected):
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        with pytest.raises(expected) as e:
            m.raise_(kind)
    assert type(e.value) is expected


def test_other_exceptions_are_agent_errors_of_their_nearest_builtin_base(tmp_path):
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        with pytest.raises(ValueError) as e:  # class RomanError(ValueError): pytest.raises(ValueError) still holds
            m.raise_("roman")
        assert isinstance(e.value, AgentError) and e.value.type == "RomanError" and e.value.message == "not a numeral"
        with pytest.raises(ValueError) as e:  # UnicodeDecodeError cannot be rebuilt from a message: a ValueError
            m.raise_("unicode")
        assert "can't decode byte 0xff" in str(e.value)
        with pytest.raises(AgentError) as e:
            m.raise_("custom")
        assert e.value.type == "Custom" and not isinstance(e.value, ValueError)
        with pytest.raises(AgentError, match="SystemExit"):  # the agent's sys.exit() ends neither child nor check
            m.raise_("exit")
        with pytest.raises(AttributeError, match="no attribute 'absent'"):
            m.absent()
        assert m.echo(1) == [[1], {}]


def test_a_module_that_does_not_import_fails_at_start(tmp_path):
    with pytest.raises(SyntaxError):
        agent_module(agent_file(tmp_path, "def broken(:\n"))
    with pytest.raises(ModuleNotFoundError):
        agent_module("no_such_module_here", sys_path=[str(tmp_path)])


# -- a child that misbehaves: always a failing check -----------------------------------------------------------


def crash_of(fn, *args) -> AgentCrash:
    """The AgentCrash that ``fn(*args)`` raises, after proving that ``except Exception`` does not catch it."""
    try:
        try:
            fn(*args)
        except Exception as e:  # what pytest.raises(Exception) would swallow
            pytest.fail(f"caught as an Exception: {e!r}")
    except AgentCrash as e:
        return e
    pytest.fail("no AgentCrash")


def test_a_child_that_dies_fails_with_its_exit_code(tmp_path):
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        e = crash_of(m.die)
        assert "exited (exit code 3)" in str(e)
        assert "closed" in str(crash_of(m.echo, 1))  # and the process stays closed


def test_a_child_that_hangs_times_out(tmp_path):
    with agent_module(agent_file(tmp_path, AGENT), timeout=1) as m:
        assert "no answer within 1s" in str(crash_of(m.hang))
    with agent_module(agent_file(tmp_path, AGENT), total_timeout=1) as m:
        assert "total timeout" in str(crash_of(m.hang))


def test_a_reply_over_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(t1check, "MAX_REPLY", 1 << 20)
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        assert len(m.big(1000)) == 1000
        assert "answer over 1048576 bytes" in str(crash_of(m.big, 2 << 20))


def test_garbage_on_the_channel_is_refused(tmp_path):
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        assert "outside the protocol: b'not json'" in str(crash_of(m.garbage))


def test_prints_and_stdin_do_not_touch_the_channel(tmp_path):
    path = agent_file(tmp_path, "print('imported')\n" + textwrap.dedent(AGENT))
    with agent_module(path) as m:
        assert m.noisy() == ""  # its prints did not reach the channel, and its stdin is /dev/null
        e = crash_of(m.die)
    assert "its stderr ends: imported" in str(e) and "to stdout\nto stderr" in str(e)  # they went to stderr


# -- what the child gets ---------------------------------------------------------------------------------------


def drive_inventory(mod):
    import os

    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the fd listdir itself used, closed since
            pass
    return {"env": sorted(os.environ), "fds": fds, "cwd": os.getcwd()}


def test_the_child_inherits_no_fd_and_a_clean_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_OF_THE_CHECK", "x")
    r, w = os.pipe()
    os.set_inheritable(w, True)  # an fd that a careless fork/exec would pass on
    try:
        with agent_module(agent_file(tmp_path, AGENT), cwd=str(tmp_path)) as m:
            seen = m.run(drive_inventory)
            assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE: the check's process is not
        inherited = f"pipe:[{os.fstat(w).st_ino}]"
    finally:
        os.close(r)
        os.close(w)
    assert seen["env"] == ["HOME", "LANG", "PATH"]
    assert seen["cwd"] == str(tmp_path)
    assert inherited not in seen["fds"].values()
    assert seen["fds"]["0"] == "/dev/null"
    assert all(t.startswith("pipe:") for fd, t in seen["fds"].items() if fd != "0"), seen


def drive_fork_sleeper(mod):
    import os
    import time

    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    return pid


def process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_closing_ends_what_the_child_started(tmp_path):
    with agent_module(agent_file(tmp_path, AGENT)) as m:
        pid = m.run(drive_fork_sleeper)
        assert process_state(pid) in ("S", "R")
    deadline = time.monotonic() + 30  # SIGKILL is delivered asynchronously: wait for the kernel, not for luck
    while process_state(pid) not in ("gone", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_state(pid) in ("gone", "Z")  # killed (a zombie until its new parent reaps it)


# -- where checks find it --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["harbor", "terminal-bench"])
def test_the_verifier_runtime_and_exported_tasks_carry_it(tmp_path, fmt):
    source = (data_dir("verifiers") / "t1check.py").read_bytes()
    assert (runtime_bundle() / "t1check.py").read_bytes() == source
    (d,) = export([get_task("py-fix-roman")], fmt, tmp_path)
    assert (next(d.rglob("_t1")) / "t1check.py").read_bytes() == source

"""Reward integrity: an agent that never does the task attacks the verifier, submits, and gets
exactly what the no-op agent gets (reward, passed and total).

One test per attack, each on both backends (the Docker runs carry the ``docker`` marker). The
attacks use only what an agent has: shell commands in its sandbox, as root there, with time to
prepare. Each one forges what a naive verifier would believe: a report saying every declared check
(and twenty invented ones) passed, delivered through every channel the attack can reach (the
report file a verifier might use, stdout, other processes' pipes through ``/proc``). The threat
model and the mechanisms that stop each attack are in ``docs/sandbox.md``.

Tasks: ``hello-file`` (built in, 5 checks, separate-mode verification),
``integrity-script`` (fixture: the checks run the agent's own program) and ``integrity-service``
(fixture: ``[verifier] mode = "shared"``, the agent's service keeps running during the checks).
"""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile
import textwrap
from pathlib import Path

import pytest

from t1env.agent.reference import oracle_command
from t1env.env import TerminalEnv
from t1env.episode.verify import verify
from t1env.registry import get_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"
TASKS = {
    "hello-file": "hello-file",
    "script": str(FIXTURES / "integrity-script"),
    "service": str(FIXTURES / "integrity-service"),
}


def _docker_ready() -> tuple[bool, str]:
    try:
        from t1env.sandbox import docker as D
    except ImportError:
        return False, "the docker SDK is not installed"
    return D.engine_ready(D.DEFAULT_BASE)


_DOCKER_UP, _DOCKER_WHY = _docker_ready()
BACKENDS = [
    pytest.param("local", marks=pytest.mark.needs_bwrap),
    pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)]),
]


# -- playing an episode ---------------------------------------------------------------------------


def _attack(env: TerminalEnv, commands: list[str]) -> None:
    """Reset ``env`` and type the attack's commands; none of them may end the episode."""
    env.reset(seed=0)
    for cmd in commands:
        _, _, terminated, truncated, info = env.step({"command": cmd, "timeout": 60})
        assert not (terminated or truncated), info


def play(backend: str, task: str, commands: list[str]) -> tuple[float, dict]:
    env = TerminalEnv(task=TASKS[task], backend=backend, prestart=False)
    try:
        _attack(env, commands)
        _, reward, terminated, _, info = env.step({"submit": True})
        assert terminated
        return reward, info
    finally:
        env.close()


_noop: dict[tuple[str, str], tuple[float, int, int]] = {}


def baseline(backend: str, task: str) -> tuple[float, int, int]:
    """The no-op agent's (reward, passed, total); first proves the verifier works on this backend:
    the oracle gets full marks (an attack that only broke the verifier would otherwise look stopped)."""
    key = (backend, task)
    if key not in _noop:
        t = get_task(TASKS[task])
        r, info = play(backend, task, [oracle_command(t)])
        assert info["resolved"] and info["verifier_error"] is None, info
        r, info = play(backend, task, [])
        _noop[key] = (r, info["passed"], info["total"])
        assert _noop[key][2] == len(t.declared_checks()) and not info["resolved"]
    return _noop[key]


def assert_no_gain(backend: str, task: str, commands: list[str], verifier_survives: bool = True) -> dict:
    """Play the attack; its reward, passed and total must equal the no-op agent's on that backend.
    ``verifier_survives``: the attack must not even disturb the verifier (no verifier error)."""
    expected = baseline(backend, task)
    reward, info = play(backend, task, commands)
    assert (reward, info["passed"], info["total"]) == expected, info["checks"]
    if verifier_survives:
        assert info["verifier_error"] is None, info["verifier_error"]
    return info


# -- the forged report ----------------------------------------------------------------------------


def forge_py(task: str, exit_after: bool) -> str:
    """Python source that writes a report claiming every check (and 20 invented ones) passed to
    every channel it can find, then (``exit_after``) ends the process it runs in with status 0."""
    names = get_task(TASKS[task]).declared_checks() + [f"test_forged.py::test_{i}" for i in range(20)]
    return textwrap.dedent(
        f"""
        import json as _j, os as _o, sys as _s
        _names = {names!r}
        _ev = [{{"event": "ready", "dumpable": False, "hooks": []}}, {{"event": "collected", "nodeids": _names}}]
        _ev += [{{"event": "result", "nodeid": n, "when": w, "outcome": "passed", "message": "", "duration": 0.0}}
                for n in _names for w in ("setup", "call", "teardown")]
        _ev += [{{"event": "finished", "exitstatus": 0}}]
        _blob = ("\\n".join(_j.dumps(e) for e in _ev) + "\\n").encode()
        if "--report" in _s.argv:
            try:
                open(_s.argv[_s.argv.index("--report") + 1], "ab").write(_blob)
            except Exception:
                pass
        for _fd in range(0, 64):
            try:
                _o.write(_fd, _blob)
            except Exception:
                pass
        for _pid in [p for p in _o.listdir("/proc") if p.isdigit()]:
            try:
                if b"run_checks" not in open(f"/proc/{{_pid}}/cmdline", "rb").read():
                    continue
                for _fd in _o.listdir(f"/proc/{{_pid}}/fd"):
                    try:
                        _w = _o.open(f"/proc/{{_pid}}/fd/{{_fd}}", _o.O_WRONLY | _o.O_NONBLOCK)
                        _o.write(_w, _blob)
                        _o.close(_w)
                    except Exception:
                        pass
            except Exception:
                pass
        if {exit_after!r} and any("run_checks" in a for a in _s.argv):
            _o._exit(0)
        """
    )


def write(path: str, text: str, mode: str = "644") -> str:
    """A shell command that writes ``text`` to ``path`` (parents made; errors ignored: a read-only
    target is the attack failing, not the test)."""
    b64 = base64.b64encode(text.encode()).decode()
    return f'mkdir -p "$(dirname {path})" 2>/dev/null; echo {b64} | base64 -d > {path} 2>/dev/null; chmod {mode} {path} 2>/dev/null; true'


USER_SITE = "$(python3 -c 'import site; print(site.getusersitepackages())')"
SYS_SITE = "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')"
STDLIB = "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"stdlib\"])')"


def bg(script: str) -> str:
    """Start ``script`` (bash) as a daemon that outlives the shell: setsid, nohup and a double fork."""
    b64 = base64.b64encode(script.encode()).decode()
    return (
        f"echo {b64} | base64 -d > /tmp/.d.sh; (setsid nohup bash /tmp/.d.sh >/dev/null 2>&1 </dev/null &) ; sleep 0.3"
    )


# -- start-up hooks -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_usercustomize_in_user_site_is_not_run(backend):
    hook = forge_py("hello-file", exit_after=True)
    info = assert_no_gain(backend, "hello-file", [f"d={USER_SITE}; " + write("$d/usercustomize.py", hook)])
    assert any(t["kind"] == "startup_hook" for t in info["tamper"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_pth_file_in_user_and_system_site_is_not_run(backend):
    hook = forge_py("hello-file", exit_after=True)
    line = "import base64; exec(base64.b64decode(%r))\n" % base64.b64encode(hook.encode()).decode()
    assert_no_gain(
        backend,
        "hello-file",
        [f"d={USER_SITE}; " + write("$d/zz-t1.pth", line), f"d={SYS_SITE}; " + write("$d/zz-t1.pth", line)],
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_sitecustomize_and_python_variables_are_ignored(backend):
    hook = forge_py("hello-file", exit_after=True)
    env_lines = "export PYTHONPATH=/app/hook PYTHONSTARTUP=/app/hook/sitecustomize.py PYTHONHOME=/app/hook\n"
    assert_no_gain(
        backend,
        "hello-file",
        [
            write("/app/hook/sitecustomize.py", hook),
            write("/app/sitecustomize.py", hook),
            write("/tmp/sitecustomize.py", hook),
            write("/root/.bashrc", env_lines),
            write("/root/.profile", env_lines),
            write("/etc/environment", "PYTHONPATH=/app/hook\n"),
            write("/etc/profile.d/zz-t1.sh", env_lines),
            env_lines.strip(),
        ],
    )


# -- background processes -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_background_rewriter_of_tests_and_report_is_gone(backend):
    fake_tests = "def test_forged():\n    pass\n"
    forge = forge_py("hello-file", exit_after=False)
    rewriter = textwrap.dedent(
        f"""
        cat > /tmp/.forge.py <<'EOF'
        {textwrap.indent(forge, "        ").strip()}
        EOF
        echo {base64.b64encode(fake_tests.encode()).decode()} | base64 -d > /tmp/.fake_test.py
        while :; do
          for f in $(find / -xdev \\( -name 'test_*.py' -o -name 'report.jsonl' -o -name run_checks.py \\) 2>/dev/null | grep -v '^/proc'); do
            case "$f" in
              *report.jsonl) python3 -c 'import sys; exec(open("/tmp/.forge.py").read())' --report "$f" ;;
              *run_checks.py) cp /tmp/.forge.py "$f" 2>/dev/null ;;
              *) cp /tmp/.fake_test.py "$f" 2>/dev/null ;;
            esac
          done
          python3 /tmp/.forge.py >/dev/null 2>&1
          sleep 0.01
        done
        """
    )
    assert_no_gain(backend, "hello-file", [bg(rewriter)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_process_table_filled_just_before_submit(backend):
    fill = "for i in $(seq 400); do (sleep 1000 &) ; done 2>/dev/null; true"
    assert_no_gain(backend, "hello-file", [fill])


# -- replaced binaries and libraries ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_python3_replaced_on_path(backend):
    fake = '#!/bin/sh\nexec /usr/bin/python3.real "$@"\n'
    forge = forge_py("hello-file", exit_after=True)
    wrapper = "#!/usr/bin/python3 -S\n" + forge
    commands = [
        write("/usr/local/bin/python3", wrapper, "755"),
        write("/root/bin/python3", wrapper, "755"),
        write("/app/bin/python3", wrapper, "755"),
        "cp /usr/bin/python3 /usr/bin/python3.real 2>/dev/null; " + write("/usr/bin/python3", fake, "755"),
        write("/root/.bashrc", "export PATH=/app/bin:/root/bin:$PATH\n"),
        "export PATH=/app/bin:/root/bin:$PATH",
    ]
    assert_no_gain(backend, "hello-file", commands)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ld_so_preload_library(backend):
    # a constructor that, in any process whose command line names run_checks, forges and exits
    forge = forge_py("hello-file", exit_after=True)
    src = textwrap.dedent(
        """
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>
        __attribute__((constructor)) static void t1_attack(void) {
            static char buf[8192];
            char *args[64] = {"python3", "-S", "/tmp/.forge.py"};
            int argc = 3;
            FILE *f = fopen("/proc/self/cmdline", "r");
            if (!f || getenv("T1_ATTACK_INNER")) return;
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            int hit = 0;
            for (size_t i = 0; i < n && argc < 63; i += strlen(buf + i) + 1) {
                if (strstr(buf + i, "run_checks")) hit = 1;
                args[argc++] = buf + i;  /* pass the verifier's own arguments on (e.g. its report path) */
            }
            args[argc] = 0;
            if (hit) {
                setenv("T1_ATTACK_INNER", "1", 1);
                execv("/usr/bin/python3", args);
            }
        }
        """
    )
    commands = [
        write("/tmp/.forge.py", forge),
        write("/tmp/attack.c", src),
        "gcc -shared -fPIC -o /tmp/libt1attack.so /tmp/attack.c",
        "echo /tmp/libt1attack.so > /etc/ld.so.preload 2>/dev/null; true",
        write("/etc/environment", "LD_PRELOAD=/tmp/libt1attack.so\n"),
        write("/root/.bashrc", "export LD_PRELOAD=/tmp/libt1attack.so\n"),
    ]
    assert_no_gain(backend, "hello-file", commands)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stdlib_tampering(backend):
    forge = forge_py("hello-file", exit_after=True)
    # prepend the forge to modules every Python imports at start-up or pytest imports early
    prepend = (
        f"s={STDLIB}; for m in site.py os.py json/__init__.py argparse.py zipimport.py; do f=$s/$m; "
        '[ -w "$f" ] && { cat /tmp/.forge.py "$f" > /tmp/.m && cat /tmp/.m > "$f"; }; rm -rf "$(dirname $f)/__pycache__"; done; true'
    )
    commands = [write("/tmp/.forge.py", forge), prepend]
    assert_no_gain(backend, "hello-file", commands)


# -- pytest configuration and plugins --------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_conftest_ini_and_plugin_injection(backend):
    conftest = textwrap.dedent(
        """
        import pytest

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            outcome.get_result().outcome = "passed"
        """
    )
    ini = "[pytest]\naddopts = -p t1attack\n"
    pyproject = "[tool.pytest.ini_options]\naddopts = '-p t1attack'\n"
    entry = "[pytest11]\nt1attack = t1attack\n"
    commands = [
        write(f"{d}/conftest.py", conftest)
        for d in ("/app", "/tmp", "/root", "", "/.t1-verifier", "/.t1-verifier/tests")
    ]
    commands += [write(f"{d}/pytest.ini", ini) for d in ("/app", "", "/tmp")]
    commands += [
        write("/app/pyproject.toml", pyproject),
        write("/app/tox.ini", ini),
        write("/app/setup.cfg", ini.replace("[pytest]", "[tool:pytest]")),
    ]
    commands += [
        f"d={site}; "
        + write("$d/t1attack.py", conftest)
        + "; "
        + write("$d/t1attack-1.0.dist-info/entry_points.txt", entry)
        + "; "
        + write("$d/t1attack-1.0.dist-info/METADATA", "Name: t1attack\nVersion: 1.0\n")
        for site in (USER_SITE, SYS_SITE)
    ]
    commands += [
        write("/etc/environment", "PYTEST_ADDOPTS=-p t1attack\nPYTEST_PLUGINS=t1attack\n"),
        "export PYTEST_ADDOPTS='-p t1attack' PYTEST_PLUGINS=t1attack",
    ]
    assert_no_gain(backend, "hello-file", commands)


# -- where t1 writes --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_symlinks_where_t1_writes(backend, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    commands = [
        f"for i in $(seq 50); do ln -sfn {victim} /tmp/.t1-verify-$(printf %012x $i); done",
        f"ln -sfn {victim} /tmp/.t1-verify 2>/dev/null; ln -sfn {victim} /.t1-verifier 2>/dev/null; ln -sfn {victim} /app/.t1-verifier; true",
        f"ln -sfn {victim} /tmp/.t1-setup.sh; ln -sfn /etc /app/etc; true",
    ]
    assert_no_gain(backend, "hello-file", commands)
    assert list(victim.iterdir()) == []


# -- the agent's own programs, run by the checks ------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_program_run_by_a_check_cannot_write_the_report(backend):
    forge = forge_py("script", exit_after=False)
    script = "#!/bin/sh\npython3 /app/forge.py\necho 41\n"  # forges through every channel, then answers wrong
    info = assert_no_gain(backend, "script", [write("/app/forge.py", forge), write("/app/answer.sh", script, "755")])
    assert info["checks"][0]["outcome"] == "failed"  # it did run, and its output was judged, nothing else


# -- shared mode: the agent's processes run beside the verifier ----------------------------------------


WATCHER = textwrap.dedent(
    """
    import ctypes, os, signal, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    forge = open("/tmp/.forge.py").read()
    mode = sys.argv[1]
    end = time.time() + 120
    seen = set()
    while time.time() < end:
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"run_checks" not in cmd or pid == os.getpid():
                continue
            if mode == "proc":
                exec(forge)
                for fd in range(0, 16):
                    for path in (f"/proc/{pid}/fd/{fd}",):
                        try:
                            w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                            os.write(w, _blob)
                            os.close(w)
                        except OSError:
                            pass
                try:
                    os.environ.update(dict(l.split("=", 1) for l in open(f"/proc/{pid}/environ").read().split("\\0") if "=" in l))
                except OSError:
                    pass
            elif mode == "ptrace" and pid not in seen:
                seen.add(pid)
                if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH: hold it stopped and forge meanwhile
                    exec(forge)
                    time.sleep(30)
                try:
                    with open(f"/proc/{pid}/mem", "r+b") as m:
                        m.write(b"\\0" * 8)
                except OSError:
                    pass
            elif mode == "signals":
                for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
                exec(forge)
        time.sleep(0.001)
    """
)


def _shared_attack(mode: str) -> list[str]:
    return [
        write("/tmp/.forge.py", forge_py("service", exit_after=False)),
        write("/tmp/.watch.py", WATCHER),
        bg(f"python3 /tmp/.watch.py {mode}"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_proc_fd_writes_into_the_verifiers_pipes(backend):
    assert_no_gain(backend, "service", _shared_attack("proc"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ptrace_and_proc_mem_on_the_verifier(backend):
    assert_no_gain(backend, "service", _shared_attack("ptrace"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_signals_to_the_verifier(backend):
    assert_no_gain(backend, "service", _shared_attack("signals"), verifier_survives=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_mode_tests_and_runtime_are_read_only(backend):
    # a service-side daemon that tries to rewrite whatever verifier files it can see while the checks run
    rewriter = textwrap.dedent(
        """
        while :; do
          for f in /.t1-verifier/tests/*.py /.t1-verifier/run_checks.py /proc/[0-9]*/root/.t1-verifier/tests/*.py; do
            [ -e "$f" ] && { printf 'def test_service_answers_42():\\n    pass\\n' > "$f"; } 2>/dev/null
          done
          sleep 0.005
        done
        """
    )
    assert_no_gain(backend, "service", [bg(rewriter)])


def test_forged_report_names_are_tamper_events_not_checks(make_task):
    """The host side alone: a report naming undeclared checks, duplicates and garbage changes nothing."""
    from t1env.episode.verify import _assemble, read_report

    task = get_task(make_task())
    declared = task.declared_checks()
    lines = [
        {"event": "ready", "dumpable": False, "hooks": []},
        {"event": "collected", "nodeids": declared + ["test_x.py::test_new"]},
    ]
    lines += [
        {
            "event": "result",
            "nodeid": declared[0],
            "when": "call",
            "outcome": "failed",
            "message": "no",
            "duration": 0.1,
        }
    ]
    lines += [
        {"event": "result", "nodeid": declared[0], "when": "call", "outcome": "passed", "message": "", "duration": 0.1}
    ]
    lines += [
        {
            "event": "result",
            "nodeid": "test_x.py::test_new",
            "when": "call",
            "outcome": "passed",
            "message": "",
            "duration": 0.1,
        }
    ]
    raw = ("\n".join(json.dumps(x) for x in lines) + "\nnot json\n[1, 2]\n").encode()
    events, tamper = read_report(raw)
    res = _assemble(events, declared, None, "", 0.0, tamper)
    kinds = sorted(t["kind"] for t in res.tamper)
    assert (res.passed, res.total) == (0, len(declared))
    assert kinds == ["duplicate_result", "malformed_report", "malformed_report", "undeclared_check", "unknown_check"]


PROBE = textwrap.dedent(
    """
    import ctypes, json, os, time
    libc = ctypes.CDLL(None, use_errno=True)
    seen, end = {}, time.time() + 60
    while time.time() < end:
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            try:
                if b"run_checks" not in open(f"/proc/{pid}/cmdline", "rb").read() or pid in seen:
                    continue
            except OSError:
                continue
            tries = {}
            for what, path, flags in (("fd1", f"/proc/{pid}/fd/1", os.O_WRONLY), ("environ", f"/proc/{pid}/environ", os.O_RDONLY),
                                      ("mem", f"/proc/{pid}/mem", os.O_RDWR)):
                try:
                    os.close(os.open(path, flags))
                    tries[what] = "opened"
                except OSError as e:
                    tries[what] = e.strerror
            tries["ptrace"] = "attached" if libc.ptrace(16, pid, 0, 0) == 0 else os.strerror(ctypes.get_errno())
            seen[pid] = tries
            with open("/app/.probe.json", "w") as f:
                json.dump(seen, f)
        time.sleep(0.0005)
    """
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_agent_processes_cannot_reach_the_shared_mode_verifier(backend, make_task):
    """Sandbox level, with evidence: a probe left running finds the verifier's process while the checks run
    (a check sleeps to give it time) and every way in (its stdout, environ, memory, ptrace) is refused."""
    from t1env.episode.verify import verify
    from t1env.sandbox import make_sandbox

    tests = {
        "test_slow.py": "import time\n\ndef test_a():\n    time.sleep(1.5)\n\ndef test_b():\n    pass\n\ndef test_c():\n    pass\n"
    }
    task = get_task(make_task(task_id="probe", toml_extra='[verifier]\nmode = "shared"\n', tests=tests))
    box = make_sandbox(backend, task)
    box.start()
    try:
        box.put_file("/tmp/probe.py", PROBE.encode())
        box.exec(["bash", "-c", "(setsid nohup python3 /tmp/probe.py >/dev/null 2>&1 </dev/null &)"], timeout=10)
        res = verify(box, task)
        assert (res.passed, res.total, res.isolation, res.error) == (3, 3, "shared", None)
        seen = json.loads(box.get_file("/app/.probe.json"))
    finally:
        box.stop()
    assert seen, "the probe never saw the verifier"
    for pid, tries in seen.items():
        assert "opened" not in tries.values() and tries["ptrace"] != "attached", (pid, tries)


# -- shared mode: processes that wake each other, against the freeze -----------------------------------

WAKERS = textwrap.dedent(
    """
    import os, signal, time
    exec(open("/tmp/.forge.py").read())  # defines _blob, the forged report
    os.fork()  # two lines of descent, each waking every process it sees (a SIGSTOP freezer's work undone)
    end, n = time.time() + 120, 0
    while time.time() < end:
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            try:
                os.kill(pid, signal.SIGCONT)
                if b"run_checks" in open(f"/proc/{pid}/cmdline", "rb").read():
                    w = os.open(f"/proc/{pid}/fd/1", os.O_WRONLY | os.O_NONBLOCK)
                    os.write(w, _blob)
                    os.close(w)
            except OSError:
                pass
        n += 1
        if n % 20 == 0 and os.fork() != 0:
            os._exit(0)  # re-fork: the line goes on under a new pid, one a freezer has not seen yet
    """
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_processes_that_sigcont_each_other_cannot_outrun_the_freeze(backend):
    """Where no cgroup freezer is writable (t1 as a normal user: CI runs this file as one too), the freeze is
    ptrace's, which a SIGCONT does not undo; a SIGSTOP loop lost this race (3/3 forged in 2 of 7 runs)."""
    info = assert_no_gain(
        backend,
        "service",
        [
            write("/tmp/.forge.py", forge_py("service", exit_after=False)),
            write("/tmp/.wakers.py", WAKERS),
            bg("python3 /tmp/.wakers.py"),
        ],
    )
    if backend == "local":
        assert any("frozen (" in n for n in info["verifier_notes"]), info["verifier_notes"]


# -- answer keys, staging and the checks' environment (issue 24, parts 2-4) -----------------------------------

TASKS.update(
    {
        "stop-scratch": "processes-stop-scratch",
        "lock-holder": "process-lock-holder",
        "tools": str(FIXTURES / "integrity-tools"),
    }
)


def play_and_look(backend: str, task: str, commands: list[str]) -> tuple[tuple[float, int, int], dict, object]:
    """Play the attack, verify (as ``submit`` does), then read every file the agent's folders (workdir, ``/tmp``,
    ``/root``) hold after verification: ((reward, passed, total), {path: content}, the VerifyResult)."""
    env = TerminalEnv(task=TASKS[task], backend=backend, prestart=False)
    try:
        _attack(env, commands)
        res = verify(env.sandbox, env.task)
        files = _agent_files(env.sandbox)
        return (res.reward("count"), res.passed, res.total), files, res
    finally:
        env.close()


def _agent_files(box) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    if box.name == "local":  # the episode's host folders, after the verifier ran
        for inside, host in (("/app", box._root / "app"), ("/tmp", box._root / "tmp"), ("/root", box._root / "home")):
            for d, _, names in os.walk(host):
                for n in names:
                    p = Path(d, n)
                    if p.is_file() and not p.is_symlink():
                        out[f"{inside}/{p.relative_to(host)}"] = p.read_bytes()
        return out
    from t1env.sandbox import docker as D

    c = D.client(box.host)  # the agent's container is stopped (separate mode): read its folders over the API
    for inside in ("/app", "/tmp", "/root"):
        stream, _ = c.api.get_archive(box.container_id, inside)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            for m in tar.getmembers():
                if m.isreg():
                    out[f"{inside.rsplit('/', 1)[0]}/{m.name}"] = tar.extractfile(m).read()
    return out


def _answer_keys(names: dict[str, str]) -> str:
    """Shell: write forged answer keys (``{file name: json}``) where the old setup kept them (``/tmp/.t1-<name>``) and,
    from a watcher (a Python loop: it forks nothing), into every private folder the agent can find, whenever one
    appears."""
    watcher = textwrap.dedent(
        f"""
        import glob, time
        end = time.time() + 120
        while time.time() < end:
            for d in glob.glob("/tmp/.t1-private*") + ["/.t1-private", "/.t1-verifier/private"]:
                for name, text in {names!r}.items():
                    try:
                        open(d + "/" + name, "w").write(text)
                    except OSError:
                        pass
            time.sleep(0.01)
        """
    )
    return "; ".join(
        [write(f"/tmp/.t1-{n}", text) for n, text in names.items()]
        + [write("/tmp/.keys.py", watcher), bg("python3 /tmp/.keys.py")]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_answer_keys_setup_wrote_cannot_be_rewritten(backend):
    """processes-stop-scratch and process-lock-holder kept their answer keys (the pids to stop, the lock holder) in
    /tmp, where the agent rewrote them and won 3/3 and 4/7 with nothing killed; now setup writes them to $T1_PRIVATE,
    taken out of the sandbox before the agent's first command."""
    dead = "[999991, 999992, 999993]"
    assert_no_gain(backend, "stop-scratch", [_answer_keys({"jobs.json": f'{{"keep": [1], "stop": {dead}}}'})])
    procs = '{"keeper": 1, "holder": 999991, "others": [1, 1], "children": [999992, 999993]}'
    assert_no_gain(backend, "lock-holder", [_answer_keys({"procs.json": procs})])


WATCHER = textwrap.dedent(
    """
    import os, shutil, time
    os.makedirs("/app/leak", exist_ok=True)
    open("/app/leak/.alive", "w").close()
    end = time.time() + 300
    while time.time() < end:  # a tight polling loop: anything that appears under /.t1-verifier is copied out
        for d, _, names in os.walk("/.t1-verifier"):
            for n in names:
                try:
                    shutil.copy(os.path.join(d, n), "/app/leak/" + d.replace("/", "_") + "_" + n)
                except OSError:
                    pass
    """
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_watcher_never_sees_the_tests(backend):
    """A daemon copies anything that appears under /.t1-verifier into /app (it copied a test out in 2 of 3 runs when
    the local backend staged the tests before ending the agent): the tests are staged only once it is gone, so after
    verification the agent's folders hold no test file, and the reward is the no-op's."""
    expected = baseline(backend, "hello-file")
    started = "for _ in $(seq 300); do [ -f /app/leak/.alive ] && break; sleep 0.1; done"
    attack = [write("/tmp/.watch.py", WATCHER), bg("python3 /tmp/.watch.py"), started]
    got, files, res = play_and_look(backend, "hello-file", attack)
    assert "/app/leak/.alive" in files, sorted(files)  # the watcher ran
    assert [p for p in files if p.startswith("/app/leak/") and p != "/app/leak/.alive"] == []
    tests = [p.read_bytes() for p in get_task("hello-file").tests_dir.glob("test_*.py")]
    assert not [p for p, data in files.items() if any(t[:200] in data for t in tests)]
    assert got == expected and res.error is None, res.error


def _tool_configs() -> list[str]:
    """The agent's configuration for the tools the checks run, each entry running agent code (which forges a report
    and leaves a marker /tmp/.ran-<where>) or changing what the tool prints."""
    run = "python3 /tmp/.evil.py"
    hook = "#!/bin/sh\n" + run + " hook-$(basename $0)\n"
    gitconfig = (
        f"[core]\n\tfsmonitor = {run} fsmonitor\n\thooksPath = /tmp/.hooks\n\tpager = {run} pager\n"
        f"[credential]\n\thelper = !{run} credential\n[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {run}\n"
    )
    marker = "\nimport sys\nopen('/tmp/.ran-' + (sys.argv[1:] or ['x'])[0], 'w').close()\n"
    evil = forge_py("tools", exit_after=False) + marker
    cmds = [
        write("/tmp/.evil.py", evil),
        write("/root/.gitconfig", gitconfig.replace("fsmonitor\n", "global-fsmonitor\n")),
        write("/root/.config/git/config", gitconfig.replace("fsmonitor\n", "xdg-fsmonitor\n")),
        write("/etc/gitconfig", gitconfig.replace("fsmonitor\n", "system-fsmonitor\n")),  # Docker: writable
        "cat /root/.gitconfig >> /app/repo/.git/config",  # the repository's own config: hooks, fsmonitor
        write("/root/.curlrc", 'trace-ascii = "/tmp/.ran-curlrc"\nwrite-out = "FORGED"\n'),
        write("/root/.config/pip/pip.conf", "[global]\nlog = /tmp/.ran-pip\n"),
        write("/root/.pip/pip.conf", "[global]\nlog = /tmp/.ran-pip\n"),
        write("/root/.npmrc", "cache=/tmp/.ran-npm\n"),
    ]
    for name in ("post-index-change", "reference-transaction", "pre-commit", "post-checkout", "pre-auto-gc"):
        cmds += [write(f"/tmp/.hooks/{name}", hook, "755"), write(f"/app/repo/.git/hooks/{name}", hook, "755")]
    return cmds


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_agents_tool_configuration_is_not_read_by_the_checks(backend):
    """The checks' HOME was the agent's /root: a core.fsmonitor in /root/.gitconfig ran agent code whenever a check
    ran git. Now the checks have a HOME of their own, no global or system git config, git's command-running settings
    off at command scope (also over the repository's own .git/config), and no pip, npm or curl config of the
    agent's: the reward is the no-op's and no agent program ran during verification."""
    expected = baseline(backend, "tools")
    got, files, res = play_and_look(backend, "tools", _tool_configs())
    assert "/tmp/.evil.py" in files and "/app/repo/.git/hooks/pre-commit" in files  # the attack is in place
    assert sorted(p for p in files if p.startswith("/tmp/.ran-")) == []  # none of the agent's programs ran
    assert got == expected and res.error is None, ([(c.name, c.passed, c.message) for c in res.checks], res.error)
    recorded = " ".join(t["detail"] for t in res.tamper if t["kind"] == "tool_config")  # the attempt is on record
    for where in (
        "/root/.gitconfig: ",
        "/app/repo/.git/config: ",
        "/root/.curlrc",
        "/root/.npmrc",
        "pre-commit: a git hook",
    ):
        assert where in recorded, (where, res.tamper)


# -- agent code in the checks' process (issue 24, part 1) ---------------------------------------------------
# The verifier's reporting process never runs test code: each declared check runs in a process of its own,
# whose events the parent accepts only for that check. ``integrity-agent-module`` (t1 format: agent code in a
# check's process is refused) and ``harbor-agent-module`` (an imported Harbor task: allowed, recorded in
# info["checks_trusting_agent_code"], confined to the check that loaded it).

TASKS.update(
    {"agent-module": str(FIXTURES / "integrity-agent-module"), "hb-agent-module": str(FIXTURES / "harbor-agent-module")}
)
IN_PROCESS = "test_calc.py::test_add_loaded_in_process"  # importlib on /app/calc.py: refused, whoever wrote it
SHADOWED = "test_calc.py::test_answer_with_app_on_sys_path"  # /app on sys.path, then `import colorsys`
HB_IMPORTS = "test_outputs.py::test_add"  # `import calc` from /app
_stand_in_map: list[str] = []


@pytest.fixture
def stand_in_images(monkeypatch, tmp_path_factory, backend):
    """Docker runs of the Harbor fixture: its ``FROM python:3.13-slim-bookworm`` is t1's local stand-in."""
    if backend == "docker":
        from t1env import images
        from t1env.sandbox.docker_images import build_bases

        if not _stand_in_map:
            path = tmp_path_factory.mktemp("images") / "map.toml"
            images.write_map(path, build_bases({"python:3.13-slim-bookworm": "t1env/tb-python-3-13:local"}))
            _stand_in_map.append(str(path))
        monkeypatch.setenv(images.MAP_ENV, _stand_in_map[0])


def refused(info: dict, check: str, path: str) -> bool:
    return any(
        t["kind"] == "agent_code_in_check" and t["detail"].startswith(check) and path in t["detail"]
        for t in info["tamper"]
    )


def agent_module_baseline(backend: str) -> tuple[float, int, int]:
    """The no-op's (reward, passed, total) on the t1 fixture, after the oracle proved the verifier works: it
    passes every check but the one that loads /app/calc.py in process, which is refused (a tamper event) for
    the oracle's correct calc.py as for anyone's."""
    key = (backend, "agent-module")
    if key not in _noop:
        _, info = play(backend, "agent-module", [oracle_command(get_task(TASKS["agent-module"]))])
        assert [(c["name"], c["passed"]) for c in info["checks"]] == [
            (IN_PROCESS, False),
            (SHADOWED, True),
            ("test_calc.py::test_notes_kept", True),
        ], info
        assert info["verifier_error"] is None and refused(info, IN_PROCESS, "/app/calc.py"), info["tamper"]
        r, info = play(backend, "agent-module", [])
        _noop[key] = (r, info["passed"], info["total"])
        assert _noop[key] == (1.0, 1, 3), info["checks"]
    return _noop[key]


@pytest.mark.parametrize("backend", BACKENDS)
def test_agent_module_a_check_loads_is_refused_and_cannot_forge(backend):
    """The agent's /app/calc.py writes a forged pass for every check to every fd it has and to the verifier's
    /proc fds, then exits; a t1 check loads it with importlib. The load is refused before the module runs."""
    expected = agent_module_baseline(backend)
    attack = forge_py("agent-module", exit_after=True) + "\ndef add(a, b):\n    return a + b\n"
    reward, info = play(backend, "agent-module", [write("/app/calc.py", attack)])
    assert (reward, info["passed"], info["total"]) == expected and info["verifier_error"] is None, info["checks"]
    assert refused(info, IN_PROCESS, "/app/calc.py"), info["tamper"]
    assert info["checks_trusting_agent_code"] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_stdlib_module_shadowed_through_sys_path_is_refused(backend):
    """A check puts /app first on sys.path; the agent's /app/colorsys.py (and json, pathlib, pytest) would then
    be what a later import gets. The import that resolves to /app is refused; the others are never imported."""
    expected = agent_module_baseline(backend)
    forge = forge_py("agent-module", exit_after=True)
    cmds = [write(f"/app/{name}.py", forge) for name in ("colorsys", "json", "pathlib", "pytest")]
    reward, info = play(backend, "agent-module", cmds)
    assert (reward, info["passed"], info["total"]) == expected and info["verifier_error"] is None, info["checks"]
    assert refused(info, SHADOWED, "/app/colorsys.py"), info["tamper"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_imported_tasks_agent_module_changes_at_most_its_own_check(backend, stand_in_images):
    """An imported (Harbor) task's check imports the agent's /app/calc.py in process: t1 lets it and records it.
    The module forges a pass for every check and 20 invented ones on every fd (its check's event pipe too) and
    exits. Only its own check's result can change; every other check has the no-op's result, the total is the
    package's, and the forged lines for other checks are tamper events."""
    expected = baseline(backend, "hb-agent-module")
    _, noop = play(backend, "hb-agent-module", [])
    attack = forge_py("hb-agent-module", exit_after=True)
    reward, info = play(backend, "hb-agent-module", [write("/app/calc.py", attack)])
    assert info["total"] == expected[2] and info["passed"] <= expected[1] + 1, info["checks"]
    others = [(c["name"], c["passed"]) for c in info["checks"] if c["name"] != HB_IMPORTS]
    assert others == [(c["name"], c["passed"]) for c in noop["checks"] if c["name"] != HB_IMPORTS]
    assert info["checks_trusting_agent_code"] == [HB_IMPORTS]
    assert any(t["kind"] == "cross_check_result" and t["detail"].startswith(HB_IMPORTS) for t in info["tamper"]), info[
        "tamper"
    ]
    assert noop["checks_trusting_agent_code"] == []  # no calc.py, no agent code: nothing to record


LEAVER = textwrap.dedent(
    """
    import os
    import subprocess
    import time
    from pathlib import Path


    def sleepers():
        found = []
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\\x00300\\x00":
                    found.append(pid)
            except OSError:
                pass
        return found


    def test_a_leaves_a_daemon():
        # a setsid, double-forked daemon that outlives this check, as a program a check runs could leave
        subprocess.run(["bash", "-c", "(setsid sleep 300 </dev/null >/dev/null 2>&1 &)"], check=True)
        time.sleep(0.3)
        assert sleepers()


    def test_b_runs_after_it_is_gone():
        assert sleepers() == []
    """
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_process_one_check_leaves_is_gone_before_the_next_check(backend, make_task):
    """What a check's process leaves (daemons of the agent's programs or of the agent's code in an imported
    task's check) could change what later checks read: the verifier kills it before the next check starts."""
    TASKS["leaver"] = str(make_task(task_id="leaver", tests={"test_order.py": LEAVER}))
    _, info = play(backend, "leaver", [])
    assert [(c["name"], c["passed"]) for c in info["checks"]] == [
        ("test_order.py::test_a_leaves_a_daemon", True),
        ("test_order.py::test_b_runs_after_it_is_gone", True),
    ], info


# -- the sanctioned way: a check calls the agent's module through t1check ----------------------------------------

TASKS["t1check-module"] = str(FIXTURES / "t1check-module")


@pytest.mark.parametrize("backend", BACKENDS)
def test_agent_module_called_through_t1check_cannot_forge_from_its_child(backend):
    """Two checks call the agent's /app/lib.py through t1check (verifiers/t1check.py), which runs it in a child
    process. The module writes a forged pass for every check (and 20 invented ones) to every fd it has and to the
    /proc fds of every run_checks process, on import and on every call. The child has no fd but its pipes and the
    check's process is non-dumpable: the forgery reaches only the child's own pipe, which fails that call."""
    baseline(backend, "t1check-module")
    forge = "def _forge():\n" + textwrap.indent(forge_py("t1check-module", exit_after=False), "    ")
    attack = forge + "\n\n_forge()\n\n\ndef double(x):\n    _forge()\n    return x + 1\n"
    info = assert_no_gain(backend, "t1check-module", [write("/app/lib.py", attack)])
    calls = {c["name"]: c["message"] for c in info["checks"] if c["name"] != "test_lib.py::test_done_file"}
    assert len(calls) == 2 and all("outside the protocol" in m for m in calls.values()), calls  # the forgery ran
    assert info["tamper"] == [], info["tamper"]  # and reached nothing of the verifier's

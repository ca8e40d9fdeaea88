"""t1's in-sandbox verifier runtime (mounted read-only into the sandbox at verification time; not a package).

Runs a task's checks and streams one JSON object per line on its report channel (the stdout it was
started with), so that a verifier killed half-way still leaves the results it got:

    {"event": "ready", "dumpable": false, "hooks": [...], "configs": [...]}   before any test code runs (a
                                                             prepared verifier: once the go arrived)
    {"event": "collected", "nodeids": [...]}                 what one check's process collected
    {"event": "result", "nodeid": ..., "when": "setup"|"call"|"teardown", "outcome": ..., "message": ...,
     "duration": ...}
    {"event": "collect_error", "nodeid": ..., "message": ...}
    {"event": "file_items", "nodeids": [...]}               every test in a check's file (finds undeclared ones)
    {"event": "agent_code", "check": ..., "path": ..., "how": ..., "refused": bool}
    {"event": "tamper", "kind": ..., "check": ..., "detail": ...}
    {"event": "finished", "exitstatus": N}

Usage: python3 -I -B run_checks.py --pytest-zip ZIP --checks JSON [--policy refuse|record] [--trust DIR] TESTS_DIR
       python3 -I -B run_checks.py --pytest-zip ZIP --script /tests/test.sh --logs /logs/verifier TESTS_DIR
       python3 -I -B run_checks.py --pytest-zip ZIP --go-fd N TESTS_DIR   (prepared: see below)

**A prepared verifier** (``--go-fd N``) is started while the agent plays: it imports pytest, configures its
session and loads common standard-library modules, then waits for one line on fd N that the host writes once
the agent's processes are gone: a JSON object ``{"argv": [...], "env": {...}}`` with the task's arguments
(``--checks`` ...) and the checks' environment (it may have been started before the task was known). Then it
compiles the tests and runs the checks exactly as a verifier started then would. End of file on fd N: the host
discarded it, and it exits having run nothing.

**The process that reports never runs test code.** This process (the *parent*) imports pytest from
ZIP, holds the report channel and learns the checks from ``--checks`` (the host's list, from the task
package: it never collects). For each check it forks a *check process*, which closes every file
descriptor but its own event pipe, installs the agent-code guard, and runs ``pytest.main`` on that
one check (``TESTS_DIR/file.py::test_x``: collection, fixtures and the test all happen there). The
parent accepts from a check's pipe only events about that check (a node id whose check is the one
it started); anything else is a ``tamper`` line (``cross_check_result``, ``bad_child_event``), never a
result. After a check's process ends, every process it left (the parent is a child subreaper, so
none can escape by double forking) is killed before the next check starts. So code that runs in one
check, whatever it is, can change that check's result and nothing else: not another check's, not
the total (the host counts the checks), not the report's framing.

**Agent code in a check** (a module loaded from a path outside the interpreter's own libraries, the
pytest zip, this runtime folder and the tests): the guard in each check process (an audit hook on
``compile``/``exec`` of code from such a path, ``.pyc``/``.so`` opens and ``ctypes.dlopen`` of one, and
an import finder that sees where every import resolves, e.g. ``/app/json.py`` shadowing the stdlib
after a ``sys.path.insert(0, "/app")``) sends an ``agent_code`` event to the parent *before* that
code runs, so the code cannot suppress it. ``--policy refuse`` (t1-format tasks) then fails the
load with an ImportError that names the fix (the ``t1check`` helper runs agent code in a child
process); ``--policy record`` (imported Terminal-Bench / Harbor tasks, whose tests often import the
agent's module) lets it run: the host lists those checks in ``info["checks_trusting_agent_code"]``.
Programs the checks start (``subprocess``) are not affected: audit hooks do not cross ``exec``.

Script mode (a Harbor task whose tests are not pytest): empties the LOGS folder (a folder only the
verifier sees), runs ``bash SCRIPT`` (its exit code is ignored, as Harbor ignores it), then reports
each key of ``LOGS/reward.json`` (a flat ``{name: number}``), else the number in ``LOGS/reward.txt``
as the check ``reward``, as one result: passed when the value is at least 1, the value in the
message (``name = value``). Neither file: a ``collect_error``.

How it keeps the report out of the agent's reach (the host trusts nothing else it prints):
* It is started with ``-I`` (isolated mode: no user site-packages, no PYTHON* variables, no
  current directory on ``sys.path``) from a read-only folder the agent cannot write.
* Its first act is ``prctl(PR_SET_DUMPABLE, 0)``: from then on a process without
  ``CAP_SYS_PTRACE`` (every agent process, and the check processes) cannot ptrace it or open
  ``/proc/<pid>/fd|mem|environ``. The host freezes the agent's processes until the ``ready`` line
  arrives, so no agent process can grab the channel in the instant before.
* The report goes to a private copy of the original stdout (close-on-exec, so no program the
  tests start inherits it, and closed first thing in every check process); file descriptors 1 and
  2 then both point at stderr, where pytest's own output and anything a test or the agent's
  programs print ends up.
* Plugins installed in the sandbox are not loaded, no conftest.py outside TESTS_DIR is read, and
  no ini file other than t1's own empty one is used.

Only the standard library and the pytest carried in ZIP are used, so any image with a python3 can
be verified without network.
"""

import argparse
import gc
import glob
import importlib.machinery
import json
import os
import pathlib
import re
import select
import signal
import sys
import sysconfig
import time


def no_dump() -> bool:
    """Make this process non-dumpable; False if that is impossible (no ctypes or no prctl)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE = 4
    except Exception:
        return False


def ready(dumpable: bool) -> dict:
    """The first report line: whether this process could make itself non-dumpable, and what of the agent's it found
    that would have steered a less careful verifier (start-up hooks, tool configuration)."""
    return {"event": "ready", "dumpable": dumpable, "hooks": startup_hooks(), "configs": tool_configs()}


def startup_hooks() -> list:
    """Python start-up hooks left where a non-isolated interpreter would run them (they do not run here)."""
    pats = ["/root/.local/lib/python3*/site-packages/*.pth", "/root/.local/lib/python3*/site-packages/usercustomize.py"]
    pats += ["/root/.local/lib/python3*/site-packages/sitecustomize.py", "/app/sitecustomize.py", "/app/usercustomize.py"]
    pats += ["/tmp/sitecustomize.py", "/tmp/usercustomize.py"]
    found = []
    for p in pats:
        found.extend(sorted(glob.glob(p)))
    return found[:50]


# Settings in the agent's configuration that make a tool run a program (git) or change what it does (curl, pip,
# npm). The checks never read any of it (their HOME is their own, git's are off at command scope); the host
# records each one found as a tamper event, so an attempt is visible although it changed nothing.
_GIT_PROGRAM_KEYS = re.compile(r"^\s*(fsmonitor|hookspath|pager|editor|sshcommand|askpass|helper|program|external)\s*=",
                               re.I | re.M)
_TOOL_RCS = ("/root/.curlrc", "/root/.npmrc", "/root/.config/pip/pip.conf", "/root/.pip/pip.conf", "/root/.wgetrc")


def tool_configs() -> list:
    """The agent's tool configuration that would run or steer a program a check starts (it is not read here)."""
    found = [f"{p}: present" for p in _TOOL_RCS if os.path.isfile(p)]
    gitconfigs = ["/root/.gitconfig", "/root/.config/git/config"]
    gitconfigs += sorted(glob.glob(os.path.join(os.getcwd(), ".git", "config")))
    gitconfigs += sorted(glob.glob(os.path.join(os.getcwd(), "*", ".git", "config")))
    for path in gitconfigs:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 20)
        except OSError:
            continue
        keys = sorted({m.group(1).lower() for m in _GIT_PROGRAM_KEYS.finditer(text)})
        if keys:
            found.append(f"{path}: {', '.join(keys)}")
        hooks = os.path.join(os.path.dirname(path), "hooks")
        found += [f"{h}: a git hook" for h in sorted(glob.glob(os.path.join(hooks, "*")))
                  if not h.endswith(".sample") and os.access(h, os.X_OK)]
    return found[:50]


def read_rewards(logs: str):
    """{name: value} from LOGS/reward.json, else {"reward": value} from LOGS/reward.txt; else a problem (str)."""
    import math

    rj, rt = os.path.join(logs, "reward.json"), os.path.join(logs, "reward.txt")
    if os.path.isfile(rj):
        try:
            with open(rj, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            return f"{rj}: not JSON: {e}"
        if not isinstance(data, dict) or not data:
            return f"{rj}: must be a non-empty object of name: number"
        for k, v in data.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                return f"{rj}: {k}: must be a finite number, got {v!r}"
        return {str(k): float(v) for k, v in data.items()}
    if os.path.isfile(rt):
        try:
            with open(rt, encoding="utf-8") as f:
                v = float(f.read().strip())
        except (OSError, ValueError) as e:
            return f"{rt}: not a number: {e}"
        if not math.isfinite(v):
            return f"{rt}: not a finite number"
        return {"reward": v}
    return None


def run_script(script: str, logs: str, emit) -> int:
    import shutil
    import subprocess

    os.makedirs(logs, exist_ok=True)
    for name in os.listdir(logs):  # nothing from before this run counts
        p = os.path.join(logs, name)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    proc = subprocess.run(["bash", script], stdin=subprocess.DEVNULL)  # stdout and stderr: this process's fd 2
    rewards = read_rewards(logs)
    if not isinstance(rewards, dict):
        why = rewards or f"{script} (exit code {proc.returncode}) wrote neither {logs}/reward.json nor {logs}/reward.txt"
        emit({"event": "collect_error", "nodeid": "reward.json", "message": why})
        return 2
    emit({"event": "collected", "nodeids": list(rewards)})
    for k, v in rewards.items():
        emit({"event": "result", "nodeid": k, "when": "call", "outcome": "passed" if v >= 1 else "failed",
              "message": f"{k} = {v:g}", "duration": 0.0})
    return 0


def check_name(nodeid: str) -> str:
    """The declared check a pytest node id belongs to: its test function (parameters dropped); as t1env.episode.verify."""
    return nodeid.split("[", 1)[0]


# ---------------------------------------------------------------------------------------------
# the check process: the agent-code guard
# ---------------------------------------------------------------------------------------------


class AgentCodeRefused(ImportError):
    """Raised in a check process (policy ``refuse``) where a check would load code from an agent path."""


class AgentCodeGuard:
    """Says (``agent_code`` event) and, under ``refuse``, stops every load of code from outside ``trusted``.

    Installed once per check process (an audit hook cannot be removed, so the agent code it lets run
    under ``record`` cannot switch it off either); the event is written to the pipe before the code runs.
    """

    def __init__(self, check: str, policy: str, trusted: list, emit):
        self.check, self.policy, self.emit = check, policy, emit
        roots = {os.path.realpath(p) for p in trusted if p}
        self.roots = tuple(sorted(r.rstrip("/") + "/" for r in roots if r != "/"))
        self.seen: set = set()
        self.busy = False

    def agent_path(self, path) -> str | None:
        """The resolved path when ``path`` names a file outside the trusted roots, else None."""
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path or path.startswith("<"):
            return None
        if not path.startswith("/"):
            if not path.endswith((".py", ".pyc", ".so")) or not os.path.isfile(path):
                return None
        real = os.path.realpath(path)
        if real.startswith(self.roots):
            return None
        folder, name = os.path.split(real)
        if os.path.basename(folder) == "__pycache__" and name.endswith(".pyc"):  # say the module's source file
            return os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")
        return real

    def found(self, path: str, how: str) -> None:
        refuse = self.policy == "refuse"
        if refuse or path not in self.seen:
            self.seen.add(path)
            self.emit({"event": "agent_code", "check": self.check, "path": path, "how": how, "refused": refuse})
        if refuse:
            raise AgentCodeRefused(
                f"t1: this check would run agent code in its own process ({how} {path}): a t1-format task's "
                "checks call the agent's code in a child process with t1check.agent_module(...) "
                "(docs/authoring.md, \"Checks that call the agent's code\")"
            )

    def audit(self, event: str, args) -> None:
        if self.busy:
            return
        if event == "compile":
            path, how = (args[1] if len(args) > 1 else None), "compile of"
        elif event == "exec":
            path, how = getattr(args[0], "co_filename", None), "exec of code from"
        elif event == "open":
            path, how = args[0], "open of"
            if not isinstance(path, (str, bytes)) or not os.fsdecode(path).endswith((".pyc", ".so")):
                return
        elif event == "ctypes.dlopen":
            path, how = args[0], "ctypes.dlopen of"
        else:
            return
        self.busy = True
        try:
            real = self.agent_path(path)
        finally:
            self.busy = False
        if real is not None:
            self.found(real, how)

    # a meta path finder (first on sys.meta_path): sees where an import resolves before it is loaded
    def find_spec(self, name, path=None, target=None):
        if self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path, target)
            real = self.agent_path(spec.origin) if spec is not None and spec.has_location else None
        finally:
            self.busy = False
        if real is not None:
            self.found(real, f"import {name} resolved to")
        return None  # the normal finders load it (if not refused)

    def install(self) -> None:
        sys.addaudithook(self.audit)
        sys.meta_path.insert(0, self)


# ---------------------------------------------------------------------------------------------
# the pytest session: configured once in the parent, forked at collection, once per check
# ---------------------------------------------------------------------------------------------

EVENT_FD = 3  # a check process's end of its pipe to the parent
# pytest plugins that only cost time here (reports nobody reads, gc sweeps at exit, doctest collection)
UNUSED_PLUGINS = ("cacheprovider", "pastebin", "unraisableexception", "threadexception", "junitxml", "doctest",
                  "stepwise", "setuponly", "setupplan", "faulthandler")


def pytest_args(tests: str, runtime: str) -> list:
    """pytest's command line in the parent. Its only argument is t1's ini file (no test code there):
    each check's process replaces it with its check before it collects."""
    ini = os.path.join(runtime, "pytest.ini")
    args = [ini, "-q", "-o", "addopts=", "-o", "python_files=test_*.py", f"--rootdir={tests}", f"--confcutdir={tests}",
            "-c", ini, "--tb=short", "--show-capture=no", "-rN", "--capture=sys"]  # no capture fds to carry across fork
    for name in UNUSED_PLUGINS:
        args += ["-p", f"no:{name}"]
    return args


def short(longrepr) -> str:
    if longrepr is None:
        return ""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return f"{crash.message}"[:2000]
    return str(longrepr)[-2000:]


class Reporter:
    """The pytest plugin that reports; in a check's process ``emit`` writes to that check's pipe."""

    emit = None

    def pytest_collectreport(self, report):
        if report.failed and self.emit is not None:
            self.emit({"event": "collect_error", "nodeid": report.nodeid, "message": str(report.longrepr)[-2000:]})

    def pytest_collection_finish(self, session):
        if self.emit is None:
            return
        self.emit({"event": "collected", "nodeids": [item.nodeid for item in session.items]})
        tests = set()  # what the check's module holds once imported (tests it made in a loop too): the host
        for item in session.items:  # reports those it does not declare
            module, file = getattr(item, "module", None), item.nodeid.split("::", 1)[0]
            for name, obj in list(vars(module).items()) if module is not None else []:
                if name.startswith("test") and callable(obj) and not isinstance(obj, type):
                    tests.add(f"{file}::{name}")
                elif name.startswith("Test") and isinstance(obj, type):
                    tests.update(f"{file}::{name}::{m}" for m, f in vars(obj).items()
                                 if m.startswith("test") and callable(f))
        if tests:
            self.emit({"event": "file_items", "nodeids": sorted(tests)})

    def pytest_runtest_logreport(self, report):
        if self.emit is None:
            return
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        self.emit({"event": "result", "nodeid": report.nodeid, "when": report.when, "outcome": outcome,
                   "message": short(report.longrepr) if report.failed else "", "duration": round(report.duration, 6)})


class CheckRunner:
    """The parent's pytest plugin: where pytest would collect, it forks one process per declared check.

    Everything before collection (arguments, plugins, ``pytest_configure``, the session and its
    fixture manager) ran in the parent on pytest's own code only; the tests' conftest.py and test
    modules are first imported by a check's process, when it collects its check.
    """

    def __init__(self, args, reporter: Reporter, emit, rewrite):
        self.args, self.reporter, self.emit, self.rewrite = args, reporter, emit, rewrite
        self.in_check = False

    def pytest_collection(self, session):
        if self.in_check:
            return None  # a check's process: pytest's own collection, of its check only
        preload()
        if self.args.go_fd is not None or self.args.zygote_fd is not None:  # the task's arguments come with the go
            # a zygote returns here only in an episode's verifier, forked into that episode's namespaces
            go = wait_for_go(self.args.go_fd) if self.args.zygote_fd is None else serve_zygote(self.args.zygote_fd)
            self.emit(ready(go.get("dumpable", self.args.dumpable)))
            argv = go.get("argv") if isinstance(go.get("argv"), list) else []
            self.args = parser().parse_args([*sys.argv[1:], *(str(a) for a in argv)])
            complete(self.args)
            clean_environ(go.get("env") if isinstance(go.get("env"), dict) else None)
            if self.args.script:
                code = run_script(self.args.script, self.args.logs or "/logs/verifier", self.emit)
                self.emit({"event": "finished", "exitstatus": code})
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
        self.precompile(session.config)
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # what the parent built is shared with every check's process, not swept in each
        for check in self.args.checks:
            self.run_one(check, session)
        self.emit({"event": "finished", "exitstatus": 0})
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # the parent's pytest has nothing left to do; the report is complete

    def precompile(self, config) -> None:
        """Rewrite the asserts of the tests' modules and compile them once, here, for every check's process.

        pytest's assertion rewriting reads a test file, rewrites its syntax tree and compiles it; nothing of
        it runs. Done in the parent, each check's process finds the code object made (a pyc cache cannot be
        written into the read-only tests folder). A file that does not compile is left to the check, whose
        collection reports the error."""
        original, made = self.rewrite._rewrite_test, {}

        def rewrite_once(fn, cfg):
            if str(fn) not in made:
                made[str(fn)] = original(fn, cfg)
            return made[str(fn)]

        self.rewrite._rewrite_test = rewrite_once
        files = {os.path.join(self.args.tests, c.split("::", 1)[0]) for c in self.args.checks}
        files |= set(glob.glob(os.path.join(self.args.tests, "**", "conftest.py"), recursive=True))
        for f in sorted(files):
            try:
                rewrite_once(pathlib.Path(f), config)
            except Exception:  # noqa: BLE001, S112 - a syntax error: the check's collection says it
                continue

    def run_one(self, check: str, session) -> None:
        """Fork the check's process, pass on what it says about its own check, end what it left."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                if w != EVENT_FD:
                    os.dup2(w, EVENT_FD)  # replaces what was there (the report channel): closed for this process
                    os.close(w)
                os.set_inheritable(EVENT_FD, False)
                self.check_process(check, session)
            finally:
                os._exit(1)
        os.close(w)
        follow(check, r, pid, self.emit)

    def check_process(self, check: str, session) -> None:
        """In the check's process: close what is not ours, guard, collect and run ``check``. Never returns."""
        code = 1
        try:
            os.closerange(EVENT_FD + 1, 1 << 20)  # the report channel (if not at 3) and anything else inherited
            os.setpgid(0, 0)
            out = os.fdopen(EVENT_FD, "w", buffering=1, encoding="utf-8")

            def emit(obj):
                out.write(json.dumps(obj) + "\n")
                out.flush()

            self.in_check, self.reporter.emit = True, emit
            AgentCodeGuard(check, self.args.policy, self.args.trusted, emit).install()
            sys.path.append(self.args.runtime)  # `import t1check`: after the interpreter's own folders
            config = session.config
            config.args = [os.path.join(self.args.tests, check)]
            try:
                config.hook.pytest_collection(session=session)
                config.hook.pytest_runtestloop(session=session)
                code = 1 if session.testsfailed else 0
            finally:
                config.hook.pytest_sessionfinish(session=session, exitstatus=code)  # session fixtures' teardown
            out.flush()
        except BaseException as e:  # noqa: BLE001 - said on stderr (the log); the parent sees a check not run
            try:
                os.write(2, f"t1 verifier: check {check}: {type(e).__name__}: {e}\n".encode())
            except OSError:
                pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# ---------------------------------------------------------------------------------------------
# the parent: what it accepts from a check's process
# ---------------------------------------------------------------------------------------------

MAX_LINE = 64 * 1024  # a longer line from a check process is not an event
MAX_EVENTS = 2000  # per check; beyond that its events are dropped (one tamper line says so)


class CheckEvents:
    """What the parent accepts from one check process: well-formed events about that check only."""

    def __init__(self, check: str, emit):
        self.check, self.emit, self.count, self.flooded = check, emit, 0, False
        self.file = check.split("::", 1)[0]

    def tamper(self, kind: str, detail: str) -> None:
        self.emit({"event": "tamper", "kind": kind, "check": self.check, "detail": detail[:300]})

    def line(self, raw: bytes) -> None:
        self.count += 1
        if self.count > MAX_EVENTS:
            if not self.flooded:
                self.flooded = True
                self.tamper("flood", f"more than {MAX_EVENTS} lines from the check's process (the rest ignored)")
            return
        try:
            e = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            e = None
        kind = e.get("event") if isinstance(e, dict) else None
        if kind == "result" and isinstance(e.get("nodeid"), str):
            if check_name(e["nodeid"]) != self.check:
                return self.tamper("cross_check_result", f"{e['nodeid'][:200]}: a result from another check's process")
            return self.emit({k: e.get(k) for k in ("event", "nodeid", "when", "outcome", "message", "duration")})
        if kind == "collected" and isinstance(e.get("nodeids"), list):
            ours = [n for n in e["nodeids"] if isinstance(n, str) and check_name(n) == self.check]
            if len(ours) != len(e["nodeids"]):
                self.tamper("cross_check_result", "the check's process collected node ids of other checks (ignored)")
            return self.emit({"event": "collected", "nodeids": ours})
        if kind == "file_items" and isinstance(e.get("nodeids"), list):  # only for finding undeclared tests
            ours = [n for n in e["nodeids"] if isinstance(n, str) and n.startswith(self.file + "::")]
            return self.emit({"event": "file_items", "nodeids": ours[:500]})
        if kind == "collect_error" and isinstance(e.get("nodeid"), str) and isinstance(e.get("message"), str):
            if e["nodeid"] not in (self.file, "") and check_name(e["nodeid"]) != self.check:
                return self.tamper("cross_check_result", f"{e['nodeid'][:200]}: a collection error of another check")
            return self.emit({"event": "collect_error", "nodeid": e["nodeid"] or self.check,
                              "message": e["message"][-2000:]})
        if kind == "agent_code":
            return self.emit({"event": "agent_code", "check": self.check, "path": str(e.get("path"))[:300],
                              "how": str(e.get("how"))[:100], "refused": e.get("refused") is True})
        self.tamper("bad_child_event", raw[:200].decode("utf-8", "replace"))


def follow(check: str, r: int, pid: int, emit) -> None:
    """Read the check's pipe to its end, wait for its process, end everything it left behind."""
    events = CheckEvents(check, emit)
    buf, done, status = b"", False, None
    while True:
        ready, _, _ = select.select([r], [], [], 0.05)
        if ready:
            data = os.read(r, 65536)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    events.line(line)
            if len(buf) > MAX_LINE:
                events.tamper("bad_child_event", f"a line of more than {MAX_LINE} bytes (ignored)")
                buf = b""
        elif not done:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:  # it exited, but something it left holds the pipe open: end those, then read to the end
                done = True
                end_leftovers()
    os.close(r)
    if not done:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = None
    end_leftovers()
    if status is not None and os.WIFSIGNALED(status):
        os.write(2, f"t1 verifier: the process of check {check} was killed by signal {os.WTERMSIG(status)}\n".encode())


def descendants(root: int) -> list:
    """Every process below ``root`` (the parent is a child subreaper: orphans of its checks stay below it)."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            parent[int(name)] = int(stat.rsplit(b")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found += kids
        frontier += kids
    return found


def end_leftovers() -> None:
    """Kill every process a check left (and reap them), until none is left."""
    try:
        os.waitpid(-1, os.WNOHANG)  # reaps one that has exited, if any
    except ChildProcessError:
        return  # no child at all: the check's process is reaped, and what it left would be our child (subreaper)
    me = os.getpid()
    for _ in range(200):
        left = descendants(me)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not left:
            return
        time.sleep(0.005)


# Standard-library modules checks commonly import: imported once in the parent (while a prepared verifier waits),
# each check's process finds them loaded. Only the interpreter's own library; a module missing here is skipped.
PRELOAD = ("json", "subprocess", "pathlib", "re", "csv", "hashlib", "shutil", "tempfile", "sqlite3", "textwrap",
           "datetime", "collections", "itertools", "functools", "io", "stat", "difflib", "tarfile", "gzip", "zipfile",
           "configparser", "tomllib", "statistics", "decimal", "fractions", "string", "struct", "base64", "glob")


def preload() -> None:
    """Import :data:`PRELOAD`, then fill ``inspect``'s module-by-file cache once: a failing check's report looks up
    the module of each traceback entry, which otherwise resolves the real path of every loaded module again in every
    check's process (measured: 40 of a failing check's 60 ms)."""
    import importlib
    import inspect

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - an interpreter without it: the check that needs it says so
            continue
    inspect.getmodule(None, "/.t1-no-such-module.py")  # a miss walks sys.modules and caches every module's file


def wait_for_go(fd) -> dict:
    """A prepared verifier (``--go-fd``): pytest is imported and configured; wait until the host says go (one line
    on ``fd``, written once the agent's processes are gone) and return what it says: ``{"argv": [...], "env":
    {...}}``, the task's arguments (``--checks``, ``--policy``, ``--trust``, ``--script``, ``--logs``) and the checks'
    environment, which a verifier prepared before the task was known could not be started with (any other line: no
    more arguments). End of file instead: the host discarded this verifier, so exit without running anything."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        if not chunk:
            os._exit(0)
        data += chunk
    os.close(fd)
    if fd == 0:  # stdin was the channel: the checks get /dev/null there, as a cold verifier's do
        null = os.open(os.devnull, os.O_RDONLY)
        if null != 0:
            os.dup2(null, 0)
            os.close(null)
    try:
        go = json.loads(data)
    except ValueError:
        go = None
    return go if isinstance(go, dict) else {}


# ---------------------------------------------------------------------------------------------
# the zygote (``--zygote-fd N``): one warm verifier that forks a fresh one into each episode
# ---------------------------------------------------------------------------------------------
# A zygote is started by the local backend in a bubblewrap sandbox of its own (pid 1 of its pid namespace, no
# network, the sandbox's limits, no seccomp filter and CAP_SYS_ADMIN in its user namespace, the host's episode
# folders at EPISODES). It imports pytest, configures the session and preloads, says ``ready`` on its socket (fd N,
# a SOCK_SEQPACKET socket whose other end only the host holds) and then waits. For each episode the host, once the
# agent's processes are gone, sends one message: a JSON object (the episode folder's name, the workdir, the
# checks' arguments and environment, the capabilities to keep, the seccomp program) and two file descriptors (the
# report channel and the log). The zygote forks; the child enters a mount and a pid namespace of its own, binds that
# episode's folders where a cold verifier's sandbox has them, detaches EPISODES (no other episode is visible), and
# forks the episode's verifier as pid 1 of the new pid namespace, which mounts its own /proc, drops every capability
# but the sandbox's, sets no_new_privs and loads the sandbox's seccomp filter, then runs the checks exactly as a
# prepared verifier does after its go. When it exits, the kernel ends every process it left (its pid namespace
# dies with it); the zygote answers ``done N`` and waits for the next episode. Nothing of an episode runs in the
# zygote itself, and nothing an episode's processes do can reach it: they never share its pid or mount namespace.
EPISODES = "/.t1-episodes"
REPORT_FD = None  # the report channel's descriptor (main)
_CLONE_NEWNS, _CLONE_NEWPID = 0x00020000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _PR_CAP_AMBIENT = 24, 38, 22, 47


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return ctypes, libc


def _call(ctypes, result: int, what: str) -> None:
    if result != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(source, target: str, fstype=None, flags: int = 0) -> None:
    ctypes, libc = _libc()
    enc = lambda x: None if x is None else str(x).encode()  # noqa: E731
    _call(ctypes, libc.mount(enc(source), enc(target), enc(fstype), flags, None), f"mount {source} on {target}")


def _bind(source: str, target: str, read_only: bool) -> None:
    _mount(source, target, None, _MS_BIND | _MS_REC)
    if read_only:
        _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def serve_zygote(fd: int) -> dict:
    """The zygote's loop (see above); returns only in an episode's verifier, with its go."""
    import socket

    sock = socket.socket(fileno=fd)
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    sock.send(b"ready")
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 2)
        except InterruptedError:
            continue
        if not msg:  # the host closed its end: nothing more to verify
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            sock.close()
            return _enter_episode(msg, fds)
        for f in fds:
            os.close(f)
        sock.send(b"done %d" % _reap(pid))


def _reap(pid: int) -> int:
    """Wait for ``pid`` (reaping any orphan that comes first: the zygote is its namespace's pid 1)."""
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 255
        if got == pid:
            return os.waitstatus_to_exitcode(status) & 0xFF


def _enter_episode(msg: bytes, fds: list) -> dict:
    """In the zygote's child: the episode's namespaces and mounts, then its verifier as their pid 1. Returns in
    that verifier only (its go); this process waits for it and exits with its status."""
    log = fds[1] if len(fds) > 1 else 2
    try:
        spec = json.loads(msg)
        if len(fds) != 2 or not re.fullmatch(r"t1-sbx-[A-Za-z0-9_]+", str(spec.get("episode"))):
            raise ValueError("a zygote message needs an episode folder name and two descriptors")
        ctypes, libc = _libc()
        _call(ctypes, libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID), "unshare")
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        src = f"{EPISODES}/{spec['episode']}"
        for host, inside, read_only in (
            (f"{src}/tmp", "/tmp", False),
            (f"{src}/home", "/root", False),
            (f"{src}/app", spec["workdir"], False),
            (f"{src}/prepared/tests", spec["tests"], True),
            (f"{src}/prepared/private", spec["private"], True),
        ):
            _bind(host, inside, read_only)
        _mount("tmpfs", spec["home"], "tmpfs", _MS_NOSUID | _MS_NODEV)
        for name in spec["home_files"]:
            target = os.path.join(spec["home"], name)
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
            _bind(f"{src}/prepared/home/{name}", target, True)
        _call(ctypes, libc.umount2(EPISODES.encode(), _MNT_DETACH), f"umount {EPISODES}")
    except BaseException as e:  # noqa: BLE001 - said in the episode's log; the host sees no report
        os.write(log, f"t1 verifier zygote: entering the episode: {type(e).__name__}: {e}\n".encode())
        os._exit(3)
    pid = os.fork()
    if pid != 0:
        for f in fds:
            os.close(f)
        os._exit(_reap(pid))
    try:
        return _become_verifier(spec, fds)
    except BaseException as e:  # noqa: BLE001
        os.write(log, f"t1 verifier zygote: starting the episode's verifier: {type(e).__name__}: {e}\n".encode())
        os._exit(3)


def _become_verifier(spec: dict, fds: list) -> dict:
    """Pid 1 of the episode's pid namespace: its /proc, descriptors, environment, capabilities, seccomp filter."""
    ctypes, libc = _libc()
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for sub in ("sys", "sysrq-trigger", "irq", "bus"):  # read-only, as bubblewrap leaves them
        if os.path.exists(f"/proc/{sub}"):
            _bind(f"/proc/{sub}", f"/proc/{sub}", True)
    report, log = fds
    os.dup2(report, REPORT_FD, inheritable=False)
    os.dup2(log, 2)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for f in (report, log, null):
        os.close(f)
    os.setsid()
    os.chdir(spec["workdir"])
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in spec["env"].items()})
    keep = [int(c) for c in spec["caps"]]
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        if cap not in keep:
            _call(ctypes, libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"dropping capability {cap}")
    libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL (none are raised; fails on old kernels)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    mask = sum(1 << c for c in keep)
    lo, hi = mask & 0xFFFFFFFF, mask >> 32
    data = (Data * 2)(Data(lo, lo, lo), Data(hi, hi, hi))
    _call(ctypes, libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")  # _LINUX_CAPABILITY_VERSION_3
    for cap in keep:  # ambient too, as bubblewrap raises them: a program a check runs as another user keeps them
        _call(ctypes, libc.prctl(_PR_CAP_AMBIENT, 2, cap, 0, 0), f"raising ambient capability {cap}")
    _call(ctypes, libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    prog = bytes.fromhex(spec.get("seccomp") or "")
    if prog:

        class Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        buf = ctypes.create_string_buffer(prog, len(prog))
        fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
        _call(ctypes, libc.prctl(_PR_SET_SECCOMP, 2, ctypes.addressof(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")
    return {"argv": spec["argv"], "env": {}, "dumpable": not no_dump()}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pytest-zip", required=True)
    ap.add_argument("--script")
    ap.add_argument("--logs")
    ap.add_argument("--checks", default="[]", help="the declared checks (JSON list of node ids), from the host")
    ap.add_argument("--policy", choices=("refuse", "record"), default="refuse", help="agent code in a check's process")
    ap.add_argument("--trust", action="append", default=[], help="another folder of trusted test code (e.g. /tests)")
    ap.add_argument("--go-fd", type=int, help="a prepared verifier: wait for the host's go (and more arguments) here")
    ap.add_argument("--zygote-fd", type=int, help="a zygote: fork one verifier per episode the host sends here")
    ap.add_argument("tests")
    return ap


def complete(args) -> None:
    """Check ``--checks`` and work out what follows from the arguments (the trusted folders)."""
    args.checks = json.loads(args.checks)
    if not isinstance(args.checks, list) or not all(isinstance(c, str) for c in args.checks):
        raise SystemExit("--checks must be a JSON list of strings")
    args.tests = os.path.abspath(args.tests)
    args.runtime = os.path.dirname(os.path.abspath(__file__))
    # trusted code: the interpreter's own library folders (as started with -I: nothing of the agent's
    # on sys.path), pytest's zip, this runtime folder (the tests are in it) and the tests' other mount
    paths = sysconfig.get_paths()
    args.trusted = [p for p in sys.path if p and p != args.pytest_zip]
    args.trusted += [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    args.trusted += [args.pytest_zip, args.runtime, args.tests, *args.trust]


def clean_environ(extra=None) -> None:
    """The environment the checks inherit: ``extra`` (the task's verifier environment), then no variable that would
    load plugins or code into pytest or the Pythons the tests start."""
    os.environ.update({str(k): str(v) for k, v in (extra or {}).items()})
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ["PYTHONNOUSERSITE"] = "1"  # Pythons the tests start do not load the agent's user site either
    for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT"):
        os.environ.pop(var, None)


def main() -> int:
    dumpable = not no_dump()
    report_fd = os.dup(1)  # non-inheritable (close-on-exec) by default
    os.dup2(2, 1)
    report = os.fdopen(report_fd, "w", buffering=1, encoding="utf-8")
    global REPORT_FD
    REPORT_FD = report_fd

    def emit(obj):
        report.write(json.dumps(obj) + "\n")


    args = parser().parse_args()
    args.dumpable = dumpable
    prepared = args.go_fd is not None or args.zygote_fd is not None
    if not prepared:  # a prepared verifier says it after the go: what it looks at is the agent's final state
        emit(ready(dumpable))
    if args.script and not prepared:  # no pytest needed
        code = run_script(args.script, args.logs or "/logs/verifier", emit)
        emit({"event": "finished", "exitstatus": code})
        report.close()
        return 0
    args.tests = os.path.abspath(args.tests)
    args.runtime = os.path.dirname(os.path.abspath(__file__))
    if not prepared:
        complete(args)
    sys.path.insert(0, args.pytest_zip)
    clean_environ()
    import pytest  # noqa: E402  (from the zip)
    from _pytest.assertion import rewrite  # noqa: E402

    try:
        import ctypes

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: what a check leaves stays below us
    except Exception:  # noqa: BLE001, S110 - without it a double-forked leftover escapes end_leftovers
        pass
    reporter = Reporter()
    # first: no other plugin's collection runs in the parent (the hookimpl marker needs pytest, imported just now)
    CheckRunner.pytest_collection = pytest.hookimpl(tryfirst=True)(CheckRunner.pytest_collection)
    # returns only if pytest stops before collection (a usage error): CheckRunner ends the process otherwise
    runner = CheckRunner(args, reporter, emit, rewrite)
    code = pytest.main(pytest_args(args.tests, args.runtime), plugins=[reporter, runner])
    emit({"event": "finished", "exitstatus": int(code)})
    report.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

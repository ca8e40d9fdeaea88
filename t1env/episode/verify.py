"""The verifier: run a task's pytest checks against what the agent left and turn them into a reward.

After the episode, the task's ``tests/`` and t1's verifier runtime (``verifiers/run_checks.py`` and
a zip of the pytest t1 itself runs on) are made visible to the sandbox read-only — they were
never there before — and run by an isolated ``python3``: verification needs neither network nor
pytest in the sandbox. Each test function in ``tests/`` is one check (a parametrized function is
one check that passes when all its cases pass).

Integrity (the agent is an adversary with root in its sandbox; see ``docs/sandbox.md``):

* the list of checks and the total come from the task package on the host, never from the
  sandbox; results for names the package does not declare, duplicates and malformed report lines
  are ignored and recorded in ``info["tamper"]``;
* the backend runs the verifier out of the agent's reach (:meth:`Sandbox.run_verifier`): in the
  default ``separate`` mode no agent process is alive any more; in ``shared`` mode (``[verifier]
  mode = "shared"`` in task.toml, for checks that talk to a service the agent started) the
  agent's processes are frozen until the verifier has made itself unreachable;
* the verifier's reporting process never runs test code: it is told the declared checks
  (``--checks``) and runs each in a process of its own, accepting from it only results for that
  check (``verifiers/run_checks.py``). A check that loads agent code (an import from ``/app``, a
  stdlib module shadowed through ``sys.path``) is refused for t1-format tasks (``info["tamper"]``:
  ``agent_code_in_check``) and allowed but recorded for imported Terminal-Bench / Harbor tasks
  (``info["checks_trusting_agent_code"]``): either way it can change at most its own result.

Failures of the verifier itself never raise: a timeout or crash fails the checks that had not
finished, with the reason in :attr:`CheckResult.message` and :attr:`VerifyResult.error`.

Reward modes (:func:`reward`): ``count`` (number of passing checks, the default), ``fraction``
(passing / total) and ``binary`` (1.0 when all pass).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import logging
import py_compile
import secrets
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from t1env.formats import LOGS_DIR, TESTS_ALIAS
from t1env.resources import cache_dir, data_dir
from t1env.sandbox.base import Sandbox, SandboxError, VerifierOptions
from t1env.task import Origin, Task, TaskError

logger = logging.getLogger(__name__)

RewardMode = Literal["count", "fraction", "binary"]
REWARD_MODES: tuple[str, ...] = ("count", "fraction", "binary")

# Pure-Python distributions that make up pytest (pytest 9 imports pygments when it starts).
_PYTEST_MODULES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py")


@dataclass
class CheckResult:
    name: str
    passed: bool
    outcome: str  # passed | failed | error | skipped | xfailed | xpassed | not run
    message: str = ""
    duration: float = 0.0


@dataclass
class VerifyResult:
    checks: list[CheckResult]
    duration: float
    error: str | None = None
    log: str = field(default="", repr=False)
    tamper: list[dict] = field(default_factory=list)
    isolation: str = "none"
    notes: list[str] = field(default_factory=list)
    checks_trusting_agent_code: list[str] = field(default_factory=list)
    """Checks (of an imported task) whose process ran agent code: their results are only as good as that code."""
    prepared: bool = False
    """Whether the checks ran in the verifier prepared while the episode ran (:func:`prepare`), else one started
    at submission."""

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.checks)

    @property
    def total(self) -> int:
        return len(self.checks)

    @property
    def resolved(self) -> bool:
        return self.total > 0 and self.passed == self.total

    def reward(self, mode: RewardMode = "count") -> float:
        return reward(self.passed, self.total, mode)

    def to_info(self) -> dict:
        return {
            "checks": [asdict(c) for c in self.checks],
            "passed": self.passed,
            "total": self.total,
            "resolved": self.resolved,
            "verifier_error": self.error,
            "verify_duration": self.duration,
            "tamper": list(self.tamper),
            "verifier_isolation": self.isolation,
            "verifier_notes": list(self.notes),
            "checks_trusting_agent_code": list(self.checks_trusting_agent_code),
            "verifier_prepared": self.prepared,
        }


def reward(passed: int, total: int, mode: RewardMode = "count") -> float:
    if mode == "count":
        return float(passed)
    if mode == "fraction":
        return passed / total if total else 0.0
    if mode == "binary":
        return float(total > 0 and passed == total)
    raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {mode!r}")


# ---------------------------------------------------------------------------------------------
# the runtime bundle
# ---------------------------------------------------------------------------------------------

_bundle_cache: Path | None = None


def runtime_bundle() -> Path:
    """A host directory with run_checks.py, t1check.py, pytest.zip and pytest.ini (built once, cached on disk)."""
    global _bundle_cache
    if _bundle_cache is not None and _bundle_cache.is_dir():
        return _bundle_cache
    import pytest

    runner = data_dir("verifiers") / "run_checks.py"
    helper = data_dir("verifiers") / "t1check.py"  # the checks' way to call agent code (import t1check)
    key = hashlib.sha256(
        b"layout-2"
        + runner.read_bytes()
        + helper.read_bytes()
        + pytest.__version__.encode()
        + repr(_PYTEST_MODULES).encode()
    ).hexdigest()[:16]
    out = cache_dir() / f"verifier-{key}"
    if not (out / "pytest.zip").is_file():
        tmp = out.with_name(out.name + f".tmp{secrets.token_hex(4)}")
        tmp.mkdir(parents=True)
        with zipfile.ZipFile(tmp / "pytest.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for mod in _PYTEST_MODULES:
                spec = importlib.util.find_spec(mod)
                if spec is None:
                    continue
                if spec.submodule_search_locations:
                    root = Path(list(spec.submodule_search_locations)[0])
                    for p in sorted(root.rglob("*")):
                        if p.is_file() and p.suffix in (".py", ".typed") and "__pycache__" not in p.parts:
                            _add_module(z, p, p.relative_to(root.parent).as_posix())
                elif spec.origin:
                    _add_module(z, Path(spec.origin), Path(spec.origin).name)
        (tmp / "run_checks.py").write_bytes(runner.read_bytes())
        (tmp / "t1check.py").write_bytes(helper.read_bytes())
        (tmp / "pytest.ini").write_text("[pytest]\n")
        (tmp / "tests").mkdir()  # the mount point of the task's tests
        try:
            tmp.rename(out)
        except OSError:  # another process won the race
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    _bundle_cache = out
    return out


def _add_module(z: zipfile.ZipFile, path: Path, arcname: str) -> None:
    """Add a source file and, for .py, its bytecode beside it (zipimport's layout): compiling
    pytest from source on every verification would cost about a second. A sandbox Python of
    another minor version ignores the bytecode and compiles from source."""
    z.write(path, arcname)
    if path.suffix == ".py":
        with tempfile.TemporaryDirectory() as tmp:
            pyc = py_compile.compile(
                str(path),
                cfile=f"{tmp}/m.pyc",
                dfile=arcname,
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            z.writestr(arcname + "c", Path(pyc).read_bytes())


# ---------------------------------------------------------------------------------------------
# verification
# ---------------------------------------------------------------------------------------------


def imported_verifier_options(origin: Origin) -> VerifierOptions:
    """The options an imported task's verifier runs with (:mod:`t1env.formats`): its tests also at ``/tests``;
    a Harbor ``test.sh`` in script mode, writing its reward file under ``/logs/verifier``."""
    if origin.verifier == "script":
        return VerifierOptions(
            args=("--script", f"{TESTS_ALIAS}/{origin.script}", "--logs", LOGS_DIR),
            env=dict(origin.verifier_env),
            tests_alias=TESTS_ALIAS,
            private_dir=LOGS_DIR,
        )
    return VerifierOptions(env=dict(origin.verifier_env), tests_alias=TESTS_ALIAS)


def verify(sandbox: Sandbox, task: Task, timeout: float | None = None) -> VerifyResult:
    """Run the task's checks against what the agent left in ``sandbox``; per-check results. Never raises.

    The list of checks and the total come from the task package on the host
    (:meth:`Task.declared_checks`), never from the sandbox: a result for a name the package does
    not declare is ignored and recorded as a tamper event. In ``separate`` mode (the task's
    ``[verifier] mode``, the default) the sandbox's agent processes are ended first.
    """
    t0 = time.monotonic()
    timeout = timeout if timeout is not None else task.spec.limits.verifier_timeout
    try:
        declared = task.declared_checks()
    except TaskError as e:
        return VerifyResult([], time.monotonic() - t0, f"verifier could not run: {e}")
    mode = task.spec.verifier.mode
    options, keys_from_run = verifier_options(task, declared)
    try:
        run = sandbox.run_verifier(runtime_bundle(), task.tests_dir, timeout, mode, options=options)
    except (SandboxError, OSError) as e:
        reason = f"verifier could not run: {_one_line(e)}"
        return not_run(declared or ["reward"], reason, reason, time.monotonic() - t0)
    r = run.result
    events, tamper = read_report(r.stdout)
    if keys_from_run:  # the package does not declare its reward.json keys: the run's are the checks
        collected = next((e["nodeids"] for e in events if e.get("event") == "collected"), None)
        declared = list(dict.fromkeys(collected or ["reward"]))[:200]
    log = r.stderr.decode("utf-8", "replace")[-_LOG_KEEP:]
    error = None
    ready = next((e for e in events if e.get("event") == "ready"), None)
    if r.timed_out:
        error = f"verifier timed out after {timeout:g}s"
    elif not any(e.get("event") == "finished" for e in events):
        tail = log.strip().splitlines()[-1] if log.strip() else f"exit code {r.exit_code}"
        error = f"verifier crashed: {tail}"
    notes = list(run.notes)
    if keys_from_run:
        notes.append(
            "the checks are the keys of the reward.json that the task's test.sh wrote: the package declares none "
            "on the host ([metadata.t1] reward_keys)"
        )
    if ready is not None and ready.get("dumpable"):
        notes.append("the verifier could not make itself non-dumpable (no ctypes in the sandbox's python3)")
    for key, kind, what in (
        ("hooks", "startup_hook", "not loaded by the verifier"),
        ("configs", "tool_config", "not read by the checks"),
    ):
        found = (ready or {}).get(key)
        for item in found if isinstance(found, list) else []:
            tamper.append({"kind": kind, "detail": f"{str(item)[:200]} ({what})"})
    res = _assemble(events, declared, error, log, t0, tamper)
    res.isolation, res.notes, res.prepared = run.isolation, notes, run.prepared
    return res


def verifier_options(task: Task, declared: list[str]) -> tuple[VerifierOptions, bool]:
    """The options of the task's verifier run (run_checks.py's arguments and environment), and whether its checks
    are the keys of the reward file a Harbor ``test.sh`` writes (the package declares none)."""
    options = VerifierOptions()
    keys_from_run = False
    if task.origin is not None:  # an imported task (t1env.formats): tests also at /tests; Harbor's test.sh: scripts
        options = imported_verifier_options(task.origin)
        keys_from_run = task.origin.verifier == "script" and not declared
    return dataclasses.replace(options, args=(*options.args, *checks_args(task, declared, options))), keys_from_run


def prepare(sandbox: Sandbox, task: Task | None = None) -> bool:
    """Start the verifier that :func:`verify` will use for this episode, now, while the agent plays
    (:meth:`Sandbox.prepare_verifier`): its sandbox, the interpreter, pytest and the compiled tests are ready when
    the agent submits, and only the checks remain. Call it after the task's setup ran (the checks' private state is
    part of what is prepared). ``task`` None: a sandbox started before its task is known (the env's prestarted
    spare) gets what does not depend on the task; calling again with the task completes it. Returns whether the
    backend prepared one; never raises (``verify`` then starts cold).
    """
    try:
        if task is None:
            return sandbox.prepare_verifier(runtime_bundle(), None, "separate", VerifierOptions())
        declared = task.declared_checks()
        options, _ = verifier_options(task, declared)
        return sandbox.prepare_verifier(runtime_bundle(), task.tests_dir, task.spec.verifier.mode, options)
    except (TaskError, SandboxError, OSError) as e:
        what = task.id if task is not None else "a prestarted sandbox"
        logger.warning("could not prepare the verifier of %s (it will start at submission): %s", what, _one_line(e))
        return False


def agent_code_policy(task: Task) -> str:
    """What a check process does with agent code: ``refuse`` (t1 format) or ``record`` (imported tasks)."""
    return "refuse" if task.origin is None else "record"


def checks_args(task: Task, declared: list[str], options: VerifierOptions) -> tuple[str, ...]:
    """run_checks.py's arguments that say what to run: the declared checks, the agent-code policy, and
    the tests' other mount (trusted test code like the tests' own folder)."""
    args = ("--checks", json.dumps(declared), "--policy", agent_code_policy(task))
    return args + (("--trust", options.tests_alias) if options.tests_alias else ())


_LOG_KEEP = 64 * 1024
_MAX_TAMPER = 50


def read_report(raw: bytes) -> tuple[list[dict], list[dict]]:
    """The verifier's report lines, and tamper events for lines that are not well-formed events."""
    events: list[dict] = []
    tamper: list[dict] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            e = None
        if not _well_formed(e):
            tamper.append({"kind": "malformed_report", "detail": line[:200]})
            continue
        events.append(e)
    return events, tamper


def _well_formed(e) -> bool:
    if not isinstance(e, dict) or not isinstance(e.get("event"), str):
        return False
    kind = e["event"]
    if kind == "result":
        return (
            isinstance(e.get("nodeid"), str)
            and e.get("when") in ("setup", "call", "teardown")
            and isinstance(e.get("outcome"), str)
            and isinstance(e.get("message", ""), str)
            and isinstance(e.get("duration", 0.0), (int, float))
        )
    if kind in ("collected", "file_items"):
        return isinstance(e.get("nodeids"), list) and all(isinstance(n, str) for n in e["nodeids"])
    if kind == "collect_error":
        return isinstance(e.get("nodeid"), str) and isinstance(e.get("message"), str)
    if kind == "agent_code":
        return all(isinstance(e.get(k), str) for k in ("check", "path", "how")) and isinstance(e.get("refused"), bool)
    if kind == "tamper":
        return all(isinstance(e.get(k), str) for k in ("kind", "check", "detail"))
    return kind in ("ready", "finished")


def check_name(nodeid: str) -> str:
    """The declared check a pytest node id belongs to: its test function (parameters dropped)."""
    return nodeid.split("[", 1)[0]


def _assemble(
    events: list[dict], declared: list[str], error: str | None, log: str, t0: float, tamper: list[dict]
) -> VerifyResult:
    known = set(declared)
    cases: dict[str, list[str]] = {name: [] for name in declared}  # check -> node ids, in order
    phases: dict[str, dict[str, dict]] = {}
    collect_errors: list[str] = []
    trusting: list[str] = []

    def add_case(nodeid: str) -> bool:
        name = check_name(nodeid)
        if name not in known:
            return False
        if nodeid not in cases[name]:
            cases[name].append(nodeid)
        return True

    for e in events:
        kind = e["event"]
        if kind == "collected":
            for nodeid in e["nodeids"]:
                if not add_case(nodeid):
                    tamper.append(
                        {
                            "kind": "undeclared_check",
                            "detail": f"{nodeid[:200]}: collected, not declared by the task package (ignored)",
                        }
                    )
        elif kind == "result":
            nodeid = e["nodeid"]
            if not add_case(nodeid):
                tamper.append(
                    {
                        "kind": "unknown_check",
                        "detail": f"{nodeid[:200]}: a result for a check the task does not declare (ignored)",
                    }
                )
            elif e["when"] in phases.get(nodeid, {}):
                tamper.append(
                    {"kind": "duplicate_result", "detail": f"{nodeid[:200]} ({e['when']}): a second result (ignored)"}
                )
            else:
                phases.setdefault(nodeid, {})[e["when"]] = e
        elif kind == "collect_error":
            msg = e["message"].strip()
            line = f"{e['nodeid']}: {msg.splitlines()[-1] if msg else ''}"
            if line not in collect_errors:
                collect_errors.append(line)
        elif kind == "file_items":  # the tests a check's file holds: only says which are not declared
            for nodeid in e["nodeids"]:
                t = {
                    "kind": "undeclared_check",
                    "detail": f"{nodeid[:200]}: collected, not declared by the task package (ignored)",
                }
                if check_name(nodeid) not in known and t not in tamper:
                    tamper.append(t)
        elif kind == "tamper":
            tamper.append({"kind": e["kind"], "detail": f"{e['check'][:200]}: {e['detail'][:300]}"})
        elif kind == "agent_code" and e["refused"]:
            tamper.append(
                {
                    "kind": "agent_code_in_check",
                    "detail": f"{e['check'][:200]}: refused {e['how'][:100]} {e['path'][:200]} in the check's process",
                }
            )
        elif kind == "agent_code" and e["check"] in known and e["check"] not in trusting:
            trusting.append(e["check"])
    if collect_errors and error is None:
        error = "test collection failed: " + "; ".join(collect_errors)
    checks = [_check(name, [_case(n, phases.get(n, {}), error) for n in cases[name]], error) for name in declared]
    del tamper[_MAX_TAMPER:]
    return VerifyResult(checks, time.monotonic() - t0, error, log, tamper=tamper, checks_trusting_agent_code=trusting)


def _case(nodeid: str, ph: dict[str, dict], error: str | None) -> CheckResult:
    setup, call, teardown = ph.get("setup"), ph.get("call"), ph.get("teardown")
    duration = sum(float(p.get("duration", 0.0)) for p in ph.values())
    if setup and setup["outcome"] == "failed":
        return CheckResult(nodeid, False, "error", setup.get("message", ""), duration)
    if setup and setup["outcome"] == "skipped":
        return CheckResult(nodeid, False, "skipped", setup.get("message", ""), duration)
    if call is None:
        return CheckResult(nodeid, False, "not run", error or "check did not run", duration)
    if teardown and teardown["outcome"] == "failed":
        return CheckResult(nodeid, False, "error", teardown.get("message", ""), duration)
    outcome = call["outcome"]
    return CheckResult(nodeid, outcome == "passed", outcome, call.get("message", ""), duration)


def _check(name: str, cases: list[CheckResult], error: str | None) -> CheckResult:
    """One declared check from its cases (several when parametrized): it passes when every case does."""
    if not cases:
        return CheckResult(name, False, "not run", error or "check did not run")
    if len(cases) == 1:
        c = cases[0]
        return CheckResult(name, c.passed, c.outcome, c.message, c.duration)
    failed = [c for c in cases if not c.passed]
    duration = sum(c.duration for c in cases)
    if not failed:
        return CheckResult(name, True, "passed", "", duration)
    first = failed[0]
    message = f"{len(failed)} of {len(cases)} cases failed, first {first.name}: {first.message}"
    return CheckResult(name, False, first.outcome, message[:2000], duration)


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def not_run(names: list[str], message: str, error: str, duration: float = 0.0) -> VerifyResult:
    """Every check failed as "not run" with ``message``: the verifier could not run, or was not asked to."""
    return VerifyResult([CheckResult(n, False, "not run", message) for n in names], duration, error)

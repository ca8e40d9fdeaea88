"""The verifier: run a task's pytest checks inside the sandbox and turn them into a reward.

After the episode, the task's ``tests/`` are copied into the sandbox (they were never there
before), together with t1's verifier runtime (``verifiers/run_checks.py``) and a zip of the pytest
that t1 itself runs on — so verification needs neither network nor pytest in the sandbox, only a
``python3``. Each collected test is one check.

Failures of the verifier itself never raise: a timeout or crash fails the checks that had not
finished, with the reason in :attr:`CheckResult.message` and :attr:`VerifyResult.error`.

Reward modes (:func:`reward`): ``count`` (number of passing checks, the default), ``fraction``
(passing / total) and ``binary`` (1.0 when all pass).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import secrets
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from t1env.resources import data_dir
from t1env.sandbox.base import Sandbox, SandboxError
from t1env.task import Task

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
    """A host directory with run_checks.py, pytest.zip and pytest.ini (built once, cached on disk)."""
    global _bundle_cache
    if _bundle_cache is not None and _bundle_cache.is_dir():
        return _bundle_cache
    import pytest

    runner = data_dir("verifiers") / "run_checks.py"
    key = hashlib.sha256(runner.read_bytes() + pytest.__version__.encode() + repr(_PYTEST_MODULES).encode()).hexdigest()[:16]
    out = Path.home() / ".cache" / "t1" / f"verifier-{key}"
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
        (tmp / "pytest.ini").write_text("[pytest]\n")
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
        import importlib._bootstrap_external as bx

        src = path.read_bytes()
        code = compile(src, arcname, "exec", dont_inherit=True)
        z.writestr(arcname + "c", bx._code_to_hash_pyc(code, importlib.util.source_hash(src), checked=False))


# ---------------------------------------------------------------------------------------------
# verification
# ---------------------------------------------------------------------------------------------


def verify(sandbox: Sandbox, task: Task, timeout: float | None = None) -> VerifyResult:
    """Copy the task's tests into ``sandbox``, run them, and return per-check results. Never raises."""
    t0 = time.monotonic()
    timeout = timeout if timeout is not None else task.spec.limits.verifier_timeout
    declared = task.declared_checks()
    base = f"/tmp/.t1-verify-{secrets.token_hex(6)}"
    report_path = f"{base}/report.jsonl"
    try:
        bundle = runtime_bundle()
        sandbox.put_tree(bundle, base)
        sandbox.put_tree(task.tests_dir, f"{base}/tests")
        r = sandbox.exec(
            ["python3", "-B", f"{base}/run_checks.py", "--report", report_path, "--pytest-zip", f"{base}/pytest.zip", f"{base}/tests"],
            timeout=timeout,
            env={"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )
    except (SandboxError, OSError) as e:
        reason = f"verifier could not run: {e}"
        return not_run(declared, reason, reason, time.monotonic() - t0)
    try:
        events = [json.loads(line) for line in sandbox.get_file(report_path).decode("utf-8", "replace").splitlines() if line.strip()]
    except (FileNotFoundError, PermissionError, SandboxError, json.JSONDecodeError):
        events = []
    log = (r.stdout + r.stderr).decode("utf-8", "replace")
    error = None
    if r.timed_out:
        error = f"verifier timed out after {timeout:g}s"
    elif not any(e.get("event") == "finished" for e in events):
        tail = log.strip().splitlines()[-1] if log.strip() else f"exit code {r.exit_code}"
        error = f"verifier crashed: {tail}"
    try:
        sandbox.exec(["rm", "-rf", base], timeout=10)
    except SandboxError:
        pass
    return _assemble(events, declared, error, log, t0)


def _assemble(events: list[dict], declared: list[str], error: str | None, log: str, t0: float) -> VerifyResult:
    collected: list[str] | None = None
    phases: dict[str, dict[str, dict]] = {}
    collect_errors: list[str] = []
    for e in events:
        kind = e.get("event")
        if kind == "collected":
            collected = list(e["nodeids"])
        elif kind == "result":
            phases.setdefault(e["nodeid"], {})[e["when"]] = e
        elif kind == "collect_error":
            collect_errors.append(f"{e['nodeid']}: {e['message'].strip().splitlines()[-1] if e['message'].strip() else ''}")
    if collect_errors and error is None:
        error = "test collection failed: " + "; ".join(collect_errors)
    names = collected if collected else declared
    checks = []
    for name in names:
        ph = phases.get(name, {})
        setup, call, teardown = ph.get("setup"), ph.get("call"), ph.get("teardown")
        duration = sum(p.get("duration", 0.0) for p in ph.values())
        if setup and setup["outcome"] == "failed":
            checks.append(CheckResult(name, False, "error", setup["message"], duration))
        elif setup and setup["outcome"] == "skipped":
            checks.append(CheckResult(name, False, "skipped", setup.get("message", ""), duration))
        elif call is None:
            checks.append(CheckResult(name, False, "not run", error or "check did not run", duration))
        elif teardown and teardown["outcome"] == "failed":
            checks.append(CheckResult(name, False, "error", teardown["message"], duration))
        else:
            outcome = call["outcome"]
            checks.append(CheckResult(name, outcome == "passed", outcome, call["message"], duration))
    return VerifyResult(checks, time.monotonic() - t0, error, log)


def not_run(names: list[str], message: str, error: str, duration: float = 0.0) -> VerifyResult:
    """Every check failed as "not run" with ``message``: the verifier could not run, or was not asked to."""
    return VerifyResult([CheckResult(n, False, "not run", message) for n in names], duration, error)

"""t1's in-sandbox verifier runtime (mounted read-only into the sandbox at verification time; not a package).

Runs pytest over a task's tests and streams one JSON object per line on its report channel (the
stdout it was started with), so that a verifier killed half-way still leaves the results it got:

    {"event": "ready", "dumpable": false, "hooks": [...]}   before any test code runs
    {"event": "collected", "nodeids": [...]}                 after collection
    {"event": "result", "nodeid": ..., "when": "setup"|"call"|"teardown", "outcome": ..., "message": ..., "duration": ...}
    {"event": "collect_error", "nodeid": ..., "message": ...}
    {"event": "finished", "exitstatus": N}

Usage: python3 -I -B run_checks.py --pytest-zip ZIP TESTS_DIR
       python3 -I -B run_checks.py --pytest-zip ZIP --script /tests/test.sh --logs /logs/verifier TESTS_DIR

Script mode (a Harbor task whose tests are not pytest): empties the LOGS folder (a folder only the
verifier sees), runs ``bash SCRIPT`` (its exit code is ignored, as Harbor ignores it), then reports
each key of ``LOGS/reward.json`` (a flat ``{name: number}``), else the number in ``LOGS/reward.txt``
as the check ``reward``, as one result: passed when the value is at least 1, the value in the
message (``name = value``). Neither file: a ``collect_error``.

How it keeps the report out of the agent's reach (the host trusts nothing else it prints):
* It is started with ``-I`` (isolated mode: no user site-packages, no PYTHON* variables, no
  current directory on ``sys.path``) from a read-only folder the agent cannot write.
* Its first act is ``prctl(PR_SET_DUMPABLE, 0)``: from then on a process without
  ``CAP_SYS_PTRACE`` (every agent process) cannot ptrace it or open ``/proc/<pid>/fd|mem|environ``.
  The host freezes the agent's processes until the ``ready`` line arrives, so no agent process can
  grab the channel in the instant before.
* The report goes to a private copy of the original stdout (close-on-exec, so no program the
  tests start inherits it); file descriptors 1 and 2 then both point at stderr, where pytest's own
  output and anything a test or the agent's programs print ends up.
* Plugins installed in the sandbox are not loaded, no conftest.py outside TESTS_DIR is read, and
  no ini file other than t1's own empty one is used.

Only the standard library and the pytest carried in ZIP are used, so any image with a python3 can
be verified without network.
"""

import argparse
import glob
import json
import os
import sys


def no_dump() -> bool:
    """Make this process non-dumpable; False if that is impossible (no ctypes or no prctl)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE = 4
    except Exception:
        return False


def startup_hooks() -> list:
    """Python start-up hooks left where a non-isolated interpreter would run them (they do not run here)."""
    pats = ["/root/.local/lib/python3*/site-packages/*.pth", "/root/.local/lib/python3*/site-packages/usercustomize.py"]
    pats += ["/root/.local/lib/python3*/site-packages/sitecustomize.py", "/app/sitecustomize.py", "/app/usercustomize.py"]
    pats += ["/tmp/sitecustomize.py", "/tmp/usercustomize.py"]
    found = []
    for p in pats:
        found.extend(sorted(glob.glob(p)))
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


def main() -> int:
    dumpable = not no_dump()
    report_fd = os.dup(1)  # non-inheritable (close-on-exec) by default
    os.dup2(2, 1)
    report = os.fdopen(report_fd, "w", buffering=1, encoding="utf-8")

    def emit(obj):
        report.write(json.dumps(obj) + "\n")

    emit({"event": "ready", "dumpable": dumpable, "hooks": startup_hooks()})

    ap = argparse.ArgumentParser()
    ap.add_argument("--pytest-zip", required=True)
    ap.add_argument("--script")
    ap.add_argument("--logs")
    ap.add_argument("tests")
    args = ap.parse_args()
    if args.script:
        code = run_script(args.script, args.logs or "/logs/verifier", emit)
        emit({"event": "finished", "exitstatus": code})
        report.close()
        return 0
    sys.path.insert(0, args.pytest_zip)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ["PYTHONNOUSERSITE"] = "1"  # Pythons the tests start do not load the agent's user site either
    for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT"):
        os.environ.pop(var, None)
    import pytest  # noqa: E402  (from the zip)

    def short(longrepr):
        if longrepr is None:
            return ""
        crash = getattr(longrepr, "reprcrash", None)
        if crash is not None:
            return f"{crash.message}"[:2000]
        return str(longrepr)[-2000:]

    class Reporter:
        def pytest_collectreport(self, report):
            if report.failed:
                emit({"event": "collect_error", "nodeid": report.nodeid, "message": str(report.longrepr)[-2000:]})

        def pytest_collection_finish(self, session):
            emit({"event": "collected", "nodeids": [item.nodeid for item in session.items]})

        def pytest_runtest_logreport(self, report):
            outcome = report.outcome
            if hasattr(report, "wasxfail"):
                outcome = "xfailed" if report.skipped else "xpassed"
            emit(
                {
                    "event": "result",
                    "nodeid": report.nodeid,
                    "when": report.when,
                    "outcome": outcome,
                    "message": short(report.longrepr) if report.failed else "",
                    "duration": round(report.duration, 6),
                }
            )

    tests = os.path.abspath(args.tests)
    code = pytest.main(
        [
            tests,
            "-q",
            "-p", "no:cacheprovider",
            "-p", "no:pastebin",
            "-o", "addopts=",
            "-o", "python_files=test_*.py",
            f"--rootdir={tests}",
            f"--confcutdir={tests}",
            "-c", os.path.join(tests, "..", "pytest.ini"),
            "--tb=short",
            "--show-capture=no",
            "-rN",
        ],
        plugins=[Reporter()],
    )
    emit({"event": "finished", "exitstatus": int(code)})
    report.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

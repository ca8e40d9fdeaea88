"""t1's in-sandbox verifier runtime (copied into the sandbox at verification time; not a package).

Runs pytest over a task's tests and streams one JSON object per line to the report file, so that a
verifier killed half-way still leaves the results it got:

    {"event": "collected", "nodeids": [...]}          after collection
    {"event": "result", "nodeid": ..., "when": "setup"|"call"|"teardown", "outcome": ..., "message": ..., "duration": ...}
    {"event": "collect_error", "nodeid": ..., "message": ...}
    {"event": "finished", "exitstatus": N}

Usage: python3 run_checks.py --report FILE --pytest-zip ZIP TESTS_DIR

Only the standard library and the pytest carried in ZIP are used, so any image with a python3 can
be verified without network. Plugins installed in the sandbox are not loaded, and no conftest.py
outside TESTS_DIR is read: the agent cannot change how it is judged.
"""

import argparse
import json
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", required=True)
    ap.add_argument("--pytest-zip", required=True)
    ap.add_argument("tests")
    args = ap.parse_args()
    sys.path.insert(0, args.pytest_zip)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import pytest  # noqa: E402  (from the zip)

    report = open(args.report, "a", buffering=1, encoding="utf-8")

    def emit(obj):
        report.write(json.dumps(obj) + "\n")

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
            "-rN",
        ],
        plugins=[Reporter()],
    )
    emit({"event": "finished", "exitstatus": int(code)})
    report.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

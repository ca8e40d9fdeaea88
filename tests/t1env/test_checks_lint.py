"""The static lint that fails a t1-format task whose checks would load the agent's code in their own
process (t1env/tools/checks_lint.py), and its place in ``t1env validate``."""

from __future__ import annotations

from pathlib import Path

import pytest

from t1env.registry import get_task, list_tasks
from t1env.tools.checks_lint import agent_code_problems
from t1env.tools.validate import validate_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"

LOADS = """
import ctypes
import importlib
import importlib.util
import runpy
import sys
from pathlib import Path

sys.path.insert(0, "/app")                                         # flagged
sys.path.append(WHERE)                                             # flagged
sys.path += ["/app/lib"]                                           # flagged


def test_spec():
    spec = importlib.util.spec_from_file_location("m", "/app/m.py")  # flagged
    assert spec


def test_runpy_exec_import():
    runpy.run_path("/app/main.py")                                 # flagged
    exec(open("/app/m.py").read())                                 # flagged
    mod = importlib.import_module(NAME)                            # flagged
    helper = importlib.import_module("helper")                     # flagged
    import helper as h2                                            # flagged
    from helper import thing                                       # flagged
    ctypes.CDLL("/app/libx.so")                                    # flagged
    assert mod and helper and h2 and thing
"""

FINE = """
import ctypes
import importlib
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"
sys.path.insert(0, str(LIB))


def test_own_helpers_and_stdlib():
    spec = importlib.util.spec_from_file_location("helpers", HERE / "helpers.py")
    json = importlib.import_module("json")
    exec("x = 1")
    ctypes.CDLL(None)
    ctypes.CDLL("libc.so.6")
    import mytesthelper
    assert spec and json and mytesthelper and eval("1 + 1") == 2
"""


def test_every_load_of_agent_code_is_named_with_its_line(make_task):
    d = make_task(
        tests={"test_loads.py": LOADS, "test_fine.py": FINE, "mytesthelper.py": "X = 1\n"},
        env_files={"helper.py": "thing = 1\n", "mytesthelper.py": "X = 2\n"},
    )
    problems = agent_code_problems(get_task(str(d)))
    lines = sorted(int(p.split(":")[1]) for p in problems)
    assert lines == [i for i, line in enumerate(LOADS.splitlines(), 1) if line.endswith("# flagged")], problems
    assert len(lines) == 11
    assert all(p.startswith("tests/test_loads.py:") for p in problems)
    assert all("t1check" in p and "docs/authoring.md" in p for p in problems)  # every line says the fix
    assert any("import helper (a module of the task's environment/)" in p for p in problems)


def test_builtin_tasks_pass_and_the_fixture_that_loads_agent_code_fails():
    assert [(t, p) for t in list_tasks() for p in agent_code_problems(get_task(t))] == []
    problems = agent_code_problems(get_task(str(FIXTURES / "integrity-agent-module")))
    assert [p.split(": ")[0] for p in problems] == ["tests/test_calc.py:14", "tests/test_calc.py:21"]


def test_imported_tasks_are_recorded_at_run_time_not_linted():
    assert agent_code_problems(get_task(str(FIXTURES / "harbor-agent-module"))) == []


@pytest.mark.needs_bwrap
def test_validate_fails_the_task_with_the_lints_line(make_task):
    d = make_task(tests={"test_out.py": "import sys\nsys.path.insert(0, '/app')\n\ndef test_x():\n    pass\n"})
    v = validate_task(str(d), runs=1)
    assert not v.ok
    assert any(p.startswith("tests/test_out.py:2: sys.path.insert()") for p in v.problems), v.problems

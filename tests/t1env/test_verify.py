"""The verifier: per-check results, reward modes, and failures that never raise."""

import pytest

from t1env.episode.verify import reward, verify
from t1env.registry import get_task
from t1env.sandbox.local import LocalSandbox


@pytest.mark.parametrize(
    "mode, passed, total, expected",
    [
        ("count", 2, 3, 2.0),
        ("fraction", 2, 3, 2 / 3),
        ("binary", 2, 3, 0.0),
        ("binary", 3, 3, 1.0),
        ("fraction", 0, 0, 0.0),
    ],
)
def test_reward_modes(mode, passed, total, expected):
    assert reward(passed, total, mode) == pytest.approx(expected)


def test_unknown_reward_mode():
    with pytest.raises(ValueError, match="reward_mode must be one of"):
        reward(1, 1, "max")


def _verify_in_fresh_box(task, setup: str | None = None, timeout=None):
    with LocalSandbox() as box:
        if setup:
            box.exec(["bash", "-c", setup], timeout=30)
        return verify(box, task, timeout=timeout)


def test_partial_credit_per_check(make_task):
    task = get_task(make_task())
    res = _verify_in_fresh_box(task, "printf 'hello\\nextra\\n' > /app/out.txt")
    by_name = {c.name: c for c in res.checks}
    assert by_name["test_out.py::test_exists"].passed
    assert by_name["test_out.py::test_content"].passed is False
    assert "assert" in by_name["test_out.py::test_content"].message
    assert (res.passed, res.total, res.resolved) == (1, 3, False)
    assert res.reward("count") == 1.0


def test_a_parametrized_test_is_one_check_passing_when_all_cases_pass(make_task):
    src = "import pytest\n@pytest.mark.parametrize('x', [1, 2, 3])\ndef test_x(x):\n    assert x != 2\n\n"
    src += "@pytest.mark.parametrize('y', [1, 2])\ndef test_y(y):\n    assert y\n"
    task = get_task(make_task(tests={"test_p.py": src}))
    res = _verify_in_fresh_box(task)
    assert [c.name for c in res.checks] == ["test_p.py::test_x", "test_p.py::test_y"]
    assert [c.passed for c in res.checks] == [False, True]
    assert "1 of 3 cases failed, first test_p.py::test_x[2]" in res.checks[0].message
    assert res.tamper == []


def test_verifier_timeout_fails_unfinished_checks_with_reason(make_task):
    tests = {
        "test_t.py": "import time\ndef test_fast():\n    pass\n\ndef test_slow():\n    time.sleep(60)\n\ndef test_after():\n    pass\n"
    }
    task = get_task(make_task(tests=tests))
    res = _verify_in_fresh_box(task, timeout=3)
    outcomes = {c.name.split("::")[1]: (c.passed, c.outcome) for c in res.checks}
    assert outcomes["test_fast"] == (True, "passed")
    assert outcomes["test_slow"] == (False, "not run") and outcomes["test_after"] == (False, "not run")
    assert "timed out" in res.error and all("timed out" in c.message for c in res.checks if not c.passed)


def test_collection_error_is_reported_not_raised(make_task):
    task = get_task(make_task(tests={"test_i.py": "import not_a_module_anywhere\n\ndef test_a():\n    pass\n"}))
    res = _verify_in_fresh_box(task)
    assert res.passed == 0 and res.total == 1
    assert "collection failed" in res.error and "not_a_module_anywhere" in res.error


def test_verifier_crash_without_python_is_reported(make_task):
    task = get_task(make_task())
    with LocalSandbox() as box:
        box.stop()  # nothing can run any more
        res = verify(box, task)
    assert res.passed == 0 and res.total == 3 and "could not run" in res.error


def test_agent_cannot_hijack_the_verifier_with_conftest_or_plugins(make_task):
    task = get_task(make_task())
    plant = (
        "printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
        '    o = yield\\n    o.get_result().outcome = "passed"\\n\' | tee /tmp/conftest.py /app/conftest.py > /root/conftest.py'
    )
    res = _verify_in_fresh_box(task, plant)
    assert res.passed == 0


def test_tests_are_not_in_the_sandbox_before_verification(make_task):
    task = get_task(make_task(tests={"test_secret.py": "def test_secret_marker_7f3a():\n    pass\n"}))
    with LocalSandbox() as box:
        script = f"grep -rl secret_marker_7f3a /app /tmp /root /etc /var /run 2>/dev/null; ls -a /tmp; test -e {task.tests_dir} && echo visible"
        r = box.exec(["bash", "-c", script], timeout=60)
        assert b"test_secret" not in r.stdout and b"secret_marker" not in r.stdout and b"visible" not in r.stdout
        res = verify(box, task)
        assert res.passed == 1 and res.isolation == "separate"
        assert list((box.host_workdir.parent / "verifier").iterdir()) == []  # the verifier cleans up after itself


def test_same_results_on_repeated_runs(make_task):
    task = get_task(make_task())
    with LocalSandbox() as box:
        box.exec(["bash", "-c", "echo hello > /app/out.txt"], timeout=10)
        runs = [[(c.name, c.passed) for c in verify(box, task).checks] for _ in range(3)]
    assert runs[0] == runs[1] == runs[2] and all(p for _, p in runs[0])


def test_generated_tests_are_not_checks_and_validation_says_so(make_task):
    from t1env.tools.validate import validate_task

    src = "def test_real():\n    pass\n\nfor _i in range(3):\n    globals()[f'test_gen_{_i}'] = lambda: None\n"
    path = make_task(tests={"test_g.py": src})
    res = _verify_in_fresh_box(get_task(path))
    assert [c.name for c in res.checks] == ["test_g.py::test_real"] and res.passed == 1
    undeclared = sorted(t["detail"].split(": ")[0] for t in res.tamper if t["kind"] == "undeclared_check")
    assert undeclared == [f"test_g.py::test_gen_{i}" for i in range(3)]
    v = validate_task(path, runs=1)
    assert any("not checks: test_g.py::test_gen_0" in p for p in v.problems)

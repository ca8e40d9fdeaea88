"""Task packages: the schema accepts good packages and rejects bad ones with one line naming file and field."""

import pytest

from t1env.task import TaskError, load_task


def test_valid_package_parses(make_task):
    task = load_task(make_task(toml_extra="[limits]\nmax_turns = 7\n"))
    assert task.id == "tiny"
    assert task.spec.limits.max_turns == 7
    assert task.spec.environment.workdir == "/app"
    assert task.declared_checks() == [
        "test_out.py::test_exists",
        "test_out.py::test_content",
        "test_out.py::test_single_line",
    ]


@pytest.mark.parametrize(
    "toml_extra, needle",
    [
        ('[limits]\nmax_turns = "many"\n', "task.toml: limits.max_turns: "),
        ("[limits]\nmax_turns = 0\n", "task.toml: limits.max_turns: "),
        ('colour = "red"\n', "task.toml: colour: Extra inputs are not permitted"),
        ('[environment]\nworkdir = "app"\n', "task.toml: environment.workdir: "),
        ('[environment]\ndockerfile = "nope.Dockerfile"\n', "task.toml: environment.dockerfile: "),
    ],
)
def test_bad_field_names_file_and_field(make_task, toml_extra, needle):
    with pytest.raises(TaskError) as e:
        load_task(make_task(toml_extra=toml_extra))
    msg = str(e.value)
    assert needle in msg
    assert "\n" not in msg


def test_bad_difficulty(make_task):
    d = make_task()
    (d / "task.toml").write_text((d / "task.toml").read_text().replace('"easy"', '"trivial"'))
    with pytest.raises(TaskError, match=r"task.toml: difficulty: Input should be 'easy', 'medium' or 'hard'"):
        load_task(d)


def test_invalid_toml(make_task):
    d = make_task()
    (d / "task.toml").write_text("id = \n")
    with pytest.raises(TaskError, match=r"task.toml: invalid TOML"):
        load_task(d)


def test_id_must_match_folder(make_task):
    d = make_task(task_id="tiny")
    (d / "task.toml").write_text((d / "task.toml").read_text().replace('id = "tiny"', 'id = "other"'))
    with pytest.raises(TaskError, match=r"task.toml: id: 'other' must equal the folder name 'tiny'"):
        load_task(d)


@pytest.mark.parametrize(
    "remove, needle",
    [
        ("task.toml", "task.toml: missing"),
        ("instruction.md", "instruction.md: missing"),
        ("solution/solve.sh", "solve.sh: missing"),
        ("tests/test_out.py", "tests: no test_*.py files"),
    ],
)
def test_missing_files(make_task, remove, needle):
    d = make_task()
    (d / remove).unlink()
    with pytest.raises(TaskError) as e:
        load_task(d)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_syntax_error_in_tests_names_file_and_line(make_task):
    d = make_task(tests={"test_bad.py": "def test_x(:\n    pass\n"})
    with pytest.raises(TaskError, match=r"test_bad.py: line 1: syntax error"):
        load_task(d)


def test_tests_without_test_functions(make_task):
    with pytest.raises(TaskError, match="no test functions"):
        load_task(make_task(tests={"test_empty.py": "X = 1\n"}))


def test_class_based_and_parametrized_checks_are_declared(make_task):
    d = make_task(
        tests={"test_c.py": "class TestThing:\n    def test_a(self):\n        pass\n\ndef helper():\n    pass\n"}
    )
    assert load_task(d).declared_checks() == ["test_c.py::TestThing::test_a"]


def test_declared_checks_parse_one_file_at_a_time_across_threads(make_task, monkeypatch):
    """CPython 3.11's AST constructor keeps its recursion depth interpreter-wide: two threads inside
    ast.parse at once fail with SystemError (CI, eval trial threads). Trial threads must take turns."""
    import ast
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    task = load_task(make_task())
    inside, most = [0], [0]
    count_lock = threading.Lock()
    real_parse = ast.parse

    def slow_parse(*args, **kwargs):
        with count_lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.02)  # a thread switch inside the parse, as a finalizer run by the GC makes one
        try:
            return real_parse(*args, **kwargs)
        finally:
            with count_lock:
                inside[0] -= 1

    monkeypatch.setattr(ast, "parse", slow_parse)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: task.declared_checks(), range(16)))
    assert all(r == results[0] for r in results) and len(results[0]) == 3
    assert most[0] == 1

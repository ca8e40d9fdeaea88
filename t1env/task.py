"""Task packages: the folder format every t1 task ships in, parsed and validated.

A task package is a folder::

    my-task/
      task.toml          metadata, limits, environment (schema: :class:`TaskSpec`)
      instruction.md     what the agent is asked to do (the first observation)
      environment/       files copied into the workdir (/app) at reset; optional setup.sh
                         (run inside the sandbox before the agent starts) and Dockerfile
      solution/solve.sh  the oracle: a script that solves the task from the starting state
      solution/demos/    optional: other scripts a demonstrator types, flawed ones included, for an
                         SFT warm-start to imitate (``sft.demos``); never run as the oracle
      tests/             pytest files; each collected test is one check of the verifier

A malformed package raises :class:`TaskError` whose message is one line naming the file
and the field, e.g. ``tasks/foo/task.toml: limits.max_turns: Input should be a valid integer``.

:func:`load_task` recognises the layout (t1, Terminal-Bench 1.x ``task.yaml``, Harbor) and hands an imported
one to its loader in :mod:`t1env.formats`. The model itself (:class:`Task`, :class:`TaskSpec`, :class:`Origin`,
the parsing helpers) is defined in :mod:`t1env.task_model`, below the loaders, and re-exported here.

Example:
    >>> from t1env.task import load_task
    >>> from t1env.registry import builtin_tasks_dir
    >>> task = load_task(builtin_tasks_dir() / "hello-file")
    >>> task.spec.id, task.spec.limits.max_turns > 0
    ('hello-file', True)
"""

from __future__ import annotations

from pathlib import Path

from t1env.formats.harbor import load_harbor
from t1env.formats.terminal_bench import load_terminal_bench
from t1env.task_model import (
    DEMOS_DIR,
    ENV_CONTROL_FILES,
    ENV_DIR,
    INSTRUCTION_FILE,
    SOLUTION_FILE,
    TASK_FILE,
    TASK_ID_PATTERN,
    TB_TASK_FILE,
    TESTS_DIR,
    Environment,
    Keystroke,
    Limits,
    Origin,
    Task,
    TaskError,
    TaskSpec,
    Verifier,
    declared_checks,
    is_task_package,
    manifest,
    quote_key,
    read_toml,
    split_network_allow,
    validate_model,
)

__all__ = [
    "DEMOS_DIR",
    "ENV_CONTROL_FILES",
    "ENV_DIR",
    "INSTRUCTION_FILE",
    "SOLUTION_FILE",
    "TASK_FILE",
    "TASK_ID_PATTERN",
    "TB_TASK_FILE",
    "TESTS_DIR",
    "Environment",
    "Keystroke",
    "Limits",
    "Origin",
    "Task",
    "TaskError",
    "TaskSpec",
    "Verifier",
    "declared_checks",
    "is_task_package",
    "load_task",
    "manifest",
    "quote_key",
    "read_toml",
    "split_network_allow",
    "validate_model",
]


def load_task(path: str | Path) -> Task:
    """Parse and validate the task package at ``path``. Raises :class:`TaskError` (one line)."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise TaskError(f"{path}: not a directory (a task package is a folder with {TASK_FILE})")
    toml_path = root / TASK_FILE
    if not toml_path.is_file():
        if (root / TB_TASK_FILE).is_file():
            return load_terminal_bench(root)
        raise TaskError(
            f"{toml_path}: missing (every task package needs {TASK_FILE}, or {TB_TASK_FILE} for Terminal-Bench)"
        )
    raw = read_toml(toml_path)
    if "id" not in raw and ("task" in raw or "schema_version" in raw or "version" in raw or "steps" in raw):
        return load_harbor(root, raw)
    spec = validate_model(TaskSpec, raw, toml_path)

    if spec.id != root.name:
        raise TaskError(f"{toml_path}: id: {spec.id!r} must equal the folder name {root.name!r}")
    instr_path = root / INSTRUCTION_FILE
    if not instr_path.is_file():
        raise TaskError(f"{instr_path}: missing (the instruction shown to the agent)")
    instruction = instr_path.read_text(encoding="utf-8", errors="replace").strip()
    if not instruction:
        raise TaskError(f"{instr_path}: empty (the instruction shown to the agent)")
    solve = root / SOLUTION_FILE
    if not solve.is_file():
        raise TaskError(f"{solve}: missing (the oracle solution script)")
    tests = root / TESTS_DIR
    if not tests.is_dir() or not any(tests.rglob("test_*.py")):
        raise TaskError(f"{tests}: no test_*.py files (each test function is one verifier check)")
    if not declared_checks(tests):
        raise TaskError(f"{tests}: no test functions found (name them test_*)")
    env = root / ENV_DIR
    if env.exists() and not env.is_dir():
        raise TaskError(f"{env}: must be a directory")
    df = spec.environment.dockerfile
    if df is not None and not (env / df).is_file():
        raise TaskError(f"{toml_path}: environment.dockerfile: {env / df} does not exist")
    return Task(path=root, spec=spec, instruction=instruction)

"""Terminal-Bench 1.x task folders, loaded as they are published.

Layout::

    my-task/
      task.yaml            instruction (or old-style descriptions: [{key, description}]), limits, metadata
      Dockerfile           usually FROM a Terminal-Bench base image, WORKDIR /app (build context: the folder)
      docker-compose.yaml  one `client` service (sleep infinity, env TEST_DIR); read for nothing else
      run-tests.sh         upstream: installs curl, uv and pytest, then `pytest $TEST_DIR/test_outputs.py -rA`
      solution.sh | solution.yaml   the oracle: a script, or a list of keystroke entries
      tests/test_outputs.py (+ more files)

Mapping onto t1 (``docs/compat.md``): ``max_agent_timeout_sec`` (default 360) → ``limits.agent_timeout``,
``max_test_timeout_sec`` (default 60) → ``limits.verifier_timeout``; the workdir is the Dockerfile's last
WORKDIR (``/app``); the network is on for the agent, as upstream (off for the verifier); the verifier
runs in ``shared`` mode, as upstream runs the tests in the agent's container with its processes alive.
The tests run under t1's runtime (``run-tests.sh`` is not run), with ``$TEST_DIR`` = ``/tests`` where
the task's ``tests/`` folder is visible read-only. What ``run-tests.sh`` installs for the tests
(``pip install numpy``, ``uv pip install ...``) is read into :attr:`Origin.test_deps` and installed
into the verifier's image when the Docker backend builds it (:func:`t1env.formats.test_requirements`).

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "hello"
    >>> (d / "tests").mkdir(parents=True)
    >>> _ = (d / "task.yaml").write_text("instruction: Write hello to /app/out.txt\\ndifficulty: easy\\n")
    >>> _ = (d / "solution.sh").write_text("echo hello > /app/out.txt\\n")
    >>> _ = (d / "Dockerfile").write_text("FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\\nWORKDIR /app\\n")
    >>> _ = (d / "tests" / "test_outputs.py").write_text("def test_out():\\n    assert open('/app/out.txt').read() == 'hello\\\\n'\\n")
    >>> t = load_terminal_bench(d)
    >>> t.id, t.origin.format, t.declared_checks(), t.spec.limits.agent_timeout
    ('hello', 'terminal-bench', ['test_outputs.py::test_out'], 360.0)
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from t1env.formats import (
    TESTS_ALIAS,
    difficulty,
    eval_only_reason,
    local_deps_problem,
    pytest_checks,
    task_id,
    test_requirements,
    title_of,
)
from t1env.images import dockerfile_workdir, local_problem
from t1env.task_model import Keystroke, Origin, Task, TaskError, TaskSpec, validate_model

TB_FILE = "task.yaml"


class _Description(BaseModel):
    model_config = ConfigDict(extra="allow")
    key: str = "base"
    description: str


class TerminalBenchYaml(BaseModel):
    """The fields of task.yaml that t1 reads (others are allowed and ignored)."""

    model_config = ConfigDict(extra="allow")
    instruction: str | None = None
    descriptions: list[_Description] | None = None
    author_name: str | None = None
    author_email: str | None = None
    difficulty: str | None = "unknown"
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    parser_name: str = "pytest"
    max_agent_timeout_sec: float = Field(360.0, gt=0)
    max_test_timeout_sec: float = Field(60.0, gt=0)
    run_tests_in_same_shell: bool = False
    disable_asciinema: bool = False
    estimated_duration_sec: float | None = None
    expert_time_estimate_min: float | None = None
    junior_time_estimate_min: float | None = None


class _KeystrokeYaml(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str
    min_timeout_sec: float = Field(0.1, ge=0)
    max_timeout_sec: float | None = None
    block: bool = False
    append_enter: bool = True


def _yaml(path: Path):
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f"line {where.line + 1}: " if where is not None else ""
        # a ReaderError (a control character) has no problem and spreads its position over two lines
        problem = getattr(e, "problem", None) or " ".join(str(e).split())
        raise TaskError(f"{path}: {line}invalid YAML: {problem}") from None
    except UnicodeDecodeError:
        raise TaskError(f"{path}: not UTF-8 text") from None
    except RecursionError:  # PyYAML's composer recurses once per nested list or mapping
        raise TaskError(f"{path}: invalid YAML: lists or mappings nested too deeply") from None


def read_keystrokes(path: Path) -> tuple[Keystroke, ...]:
    raw = _yaml(path)
    if not isinstance(raw, list) or not raw:
        raise TaskError(
            f"{path}: must be a non-empty list of keystroke entries (command, min_timeout_sec, block, append_enter)"
        )
    out = []
    for i, entry in enumerate(raw):
        k = validate_model(_KeystrokeYaml, entry, path, prefix=f"[{i}].")
        out.append(Keystroke(k.command, k.min_timeout_sec, k.block, k.append_enter))
    return tuple(out)


def load_terminal_bench(root: Path) -> Task:
    """Parse a Terminal-Bench 1.x folder. Raises :class:`TaskError` (one line naming the file and field)."""
    root = Path(root).resolve()
    yml = root / TB_FILE
    raw = _yaml(yml)
    if not isinstance(raw, dict):
        raise TaskError(f"{yml}: must be a mapping of fields (instruction, difficulty, ...)")
    cfg = validate_model(TerminalBenchYaml, raw, yml)
    instruction = cfg.instruction
    if instruction is None and cfg.descriptions:
        base = next((d for d in cfg.descriptions if d.key == "base"), cfg.descriptions[0])
        instruction = base.description
    if not instruction or not instruction.strip():
        raise TaskError(
            f"{yml}: instruction: missing or empty (or give descriptions: [{{key: base, description: ...}}])"
        )
    if cfg.parser_name != "pytest":
        raise TaskError(f"{yml}: parser_name: {cfg.parser_name!r} is not supported (t1 reads pytest results only)")
    diff, extra_tags = difficulty(cfg.difficulty, str(yml))

    tests = root / "tests"
    checks = pytest_checks(tests)
    if not checks:
        raise TaskError(f"{tests}: no test_* functions in test_*.py files (each is one verifier check)")
    keystrokes = None
    if (root / "solution.sh").is_file():
        solution = root / "solution.sh"
    elif (root / "solution.yaml").is_file():
        solution = root / "solution.yaml"
        keystrokes = read_keystrokes(solution)
    else:
        raise TaskError(f"{root}: no solution.sh or solution.yaml (the oracle)")
    dockerfile = root / "Dockerfile" if (root / "Dockerfile").is_file() else None
    if dockerfile is None:
        raise TaskError(f"{root / 'Dockerfile'}: missing (a Terminal-Bench task's image)")
    workdir = dockerfile_workdir(dockerfile.read_text(encoding="utf-8", errors="replace"))

    run_tests = root / "run-tests.sh"
    deps = test_requirements(run_tests.read_text(encoding="utf-8", errors="replace")) if run_tests.is_file() else ()
    local = local_problem(dockerfile, None, str(root))
    if local is None and deps:
        local = local_deps_problem(root, deps, run_tests)
    notes = ["run-tests.sh is not run: t1's runtime runs tests/test_*.py with its own pytest, offline"]
    if deps:
        notes.append(f"run-tests.sh installs {', '.join(deps)}: installed into the verifier's image at build time")

    tid = task_id(root)
    spec = validate_model(
        TaskSpec,
        dict(
            id=tid,
            title=title_of(instruction),
            category=cfg.category or "terminal-bench",
            difficulty=diff,
            tags=tuple(cfg.tags) + extra_tags + ("terminal-bench",),
            author=cfg.author_name,
            # plain dicts, validated with the rest: a bad value is a TaskError naming the field, not a ValidationError
            limits=dict(
                agent_timeout=cfg.max_agent_timeout_sec,
                verifier_timeout=cfg.max_test_timeout_sec,
                max_turns=200,
                command_timeout=min(180.0, cfg.max_agent_timeout_sec),
            ),
            environment=dict(workdir=workdir, network=True),
            verifier=dict(mode="shared"),
        ),
        yml,
    )
    origin = Origin(
        format="terminal-bench",
        context=root,
        dockerfile=dockerfile,
        solution=solution,
        keystrokes=keystrokes,
        tests=tests,
        verifier="pytest",
        verifier_env={"TEST_DIR": TESTS_ALIAS, "T_BENCH_TEST_DIR": TESTS_ALIAS},
        eval_only=eval_only_reason(root),
        local_problem=local,
        notes=tuple(notes),
        test_deps=deps,
        test_deps_source=run_tests if deps else None,
    )
    return Task(path=root, spec=spec, instruction=instruction.strip(), origin=origin)

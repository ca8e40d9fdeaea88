"""Fuzzing (hypothesis): random and malformed inputs give a normal result or a one-line error naming the file
and the field, never a traceback, and nothing is left running.

Inputs: t1 ``task.toml``, Harbor ``task.toml``, Terminal-Bench ``task.yaml`` (with their other files),
``env.step()`` actions, ``gym.make`` keyword arguments and ``t1env`` command lines. Every bug found here is kept:
the minimal failing input as an ``@example`` of its test, and the failing file in ``tests/fixtures/fuzz_corpus/``
(replayed by ``test_corpus_file_loads_or_fails_in_one_line``). Settings: the "t1" profile in ``tests/conftest.py``
(derandomized, no example database); ``HYPOTHESIS_PROFILE=explore`` draws new examples.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import os
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from fractions import Fraction
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import t1env  # noqa: E402,F401  (registers T1Terminal-v0)
from t1env.cli import build_parser, main  # noqa: E402
from t1env.registry import get_task  # noqa: E402
from t1env.task import TaskError  # noqa: E402

CORPUS = Path(__file__).parents[1] / "fixtures" / "fuzz_corpus"
SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

# ------------------------------------------------------------------------------------------------ properties


def assert_one_line(message: str, starts: str = "") -> None:
    """The error a user sees: one line (no line break of any kind), starting with ``starts`` (the file)."""
    assert message.strip(), "empty error message"
    assert len(message.splitlines()) == 1, f"multi-line error: {message!r}"
    assert message.startswith(starts), f"error does not start with {starts!r}: {message!r}"


def loads_or_fails_in_one_line(folder: Path):
    """``get_task(folder)`` (what ``t1env show``/``validate`` call): a Task, or a one-line TaskError naming a file in
    the folder. Any other exception escapes and fails the test. Then ``t1env show FOLDER`` must agree."""
    folder = folder.resolve()
    try:
        task = get_task(folder)
    except TaskError as e:
        assert_one_line(str(e), starts=str(folder))
        task = None
    rc, out, err = run_cli(main, ["show", str(folder)])
    if task is None:
        assert rc == 2 and out == "", (rc, out, err)
        assert_one_line(err.rstrip("\n"), starts="t1env show: ")
    else:
        assert rc == 0 and err == "", (rc, err)
        assert task.id in out
    return task


def run_cli(entry, argv: list[str]) -> tuple[int, str, str]:
    """``entry(argv)`` in this process: ``(exit code, stdout, stderr)``; ``os.environ`` restored afterwards."""
    out, err = io.StringIO(), io.StringIO()
    environ = dict(os.environ)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = entry(argv)
            except SystemExit as e:  # argparse: 2 on a usage error, 0 for --help
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(environ)
    return rc, out.getvalue(), err.getvalue()


def children() -> set[int]:
    """Process ids of this process's children (from /proc)."""
    me, out = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2 :].split()[1]) == me:
            out.add(int(stat.parent.name))
    return out


# ------------------------------------------------------------------------------------------------ strategies
# Text that has hurt parsers and printers before: markup, line breaks of every kind, path tricks, templates.
TRICKY = [
    "",
    " ",
    "\n",
    "\r",
    "\u2028",
    "\x85",
    "\x0b",
    "\x00",
    "\t",
    "[/]",
    "[bold]",
    "[/red]",
    "..",
    "/",
    "a/b",
    "/app",
    "app",
    "../x",
    "${HOME}",
    "${X:-y}",
    "%s",
    "{}",
    "'",
    '"',
    "\\",
    "nan",
    "inf",
    "-1",
    "0",
    "1e999",
    "é",
    "日本",
    "\U0001f600",
    "²",
    "١٧",
    "easy",
    "medium",
    "hard",
    "unknown",
    "pytest",
    "script",
    "shared",
    "separate",
    "public",
    "no-network",
    "allowlist",
    "0.01K",
    "2G",
    "hello-file",
    "logs@3",
    "logs@²",
]
words = st.one_of(
    st.text(max_size=12),
    st.sampled_from(TRICKY),
    st.lists(st.one_of(st.sampled_from(TRICKY), st.text(max_size=3)), max_size=4).map("".join),
)
numbers = st.one_of(st.integers(), st.integers(-3, 3), st.floats(), st.just(10**400), st.just(-(10**400)))
scalars = st.one_of(words, numbers, st.booleans(), st.datetimes(), st.dates())
anything = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(words, c, max_size=3), max_leaves=8
)


def either(good):
    """Mostly a plausible value of the field, sometimes anything at all."""
    return st.one_of(good, good, anything)


def section(fields: dict) -> st.SearchStrategy:
    """A table with some of ``fields`` (each a strategy) and sometimes an unknown key."""
    return st.one_of(
        st.fixed_dictionaries({}, optional=fields),
        st.fixed_dictionaries({}, optional={**fields, "unknown key": anything}),
        anything,
    )


seconds = st.one_of(st.floats(0.5, 3600), st.integers(1, 100), st.just(0), st.just(-1), numbers, words)
counts = st.one_of(st.integers(-2, 5000), numbers, words)

T1_LIMITS = dict(
    max_turns=counts, command_timeout=seconds, agent_timeout=seconds, verifier_timeout=seconds, setup_timeout=seconds
)
T1_ENVIRONMENT = dict(
    workdir=either(words),
    network=either(st.booleans()),
    tools=either(st.lists(words, max_size=3)),
    docker_image=either(words),
    dockerfile=either(words),
    memory_mb=counts,
    cpus=seconds,
    pids=counts,
    file_size_mb=counts,
    cpu_seconds=counts,
)
t1_toml = st.fixed_dictionaries(
    {"id": st.one_of(st.just("fz"), st.just("fz"), words)},
    optional=dict(
        title=either(words),
        category=either(words),
        difficulty=either(st.sampled_from(["easy", "hard"])),
        tags=either(st.lists(words, max_size=3)),
        author=either(words),
        limits=section(T1_LIMITS),
        environment=section(T1_ENVIRONMENT),
        verifier=section(dict(mode=either(st.sampled_from(["separate", "shared"])))),
        extra=anything,
    ),
)

# ------------------------------------------------------------------------------------------------ files


def toml_str(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) if not math.isfinite(v) else repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, (dt.date, dt.time)):  # datetime is a date
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{toml_str(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_dumps(d: dict) -> str:
    """TOML text for ``d`` (every value inline), which tomllib reads back as ``d``."""
    return "".join(f"{toml_str(str(k))} = {toml_value(v)}\n" for k, v in d.items())


VALID_TOML = 'id = "fz"\ntitle = "t"\ncategory = "c"\ndifficulty = "easy"\n[limits]\nmax_turns = 3\n'


def splice(text: str, at: int, new: str) -> str:
    """``text`` with the character at ``at`` replaced by ``new`` (a malformed variant of a valid file)."""
    return text[:at] + new + text[at + 1 :]


def deep(depth: int, key: str = "a") -> str:
    return f"{key} = " + "[" * depth + "]" * depth + "\n"


@pytest.fixture(scope="module")
def scratch():
    root = Path(tempfile.mkdtemp(prefix="t1-fuzz-")).resolve()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def fresh(root: Path, name: str) -> Path:
    """A new, empty folder ``name`` (its own parent, so every example has its own path and mtime)."""
    d = Path(tempfile.mkdtemp(dir=root)) / name
    d.mkdir()
    return d


def write(d: Path, files: dict[str, str | bytes]) -> Path:
    for rel, body in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"))
    return d


TEST_FILE = "def test_a():\n    assert True\n"


def t1_files(toml: str | bytes, test_file: str | bytes = TEST_FILE) -> dict:
    return {
        "task.toml": toml,
        "instruction.md": "Do it.\n",
        "solution/solve.sh": "true\n",
        "tests/test_out.py": test_file,
        "environment/data.txt": "x\n",
    }


# ------------------------------------------------------------------------------------------------ task.toml (t1)
test_files = st.one_of(
    st.just(TEST_FILE),
    st.just(TEST_FILE),
    st.binary(max_size=40),
    st.text(max_size=40),
    st.integers(1, 6000).map(lambda n: "x = " + "-" * n + "1\n" + TEST_FILE),
)


@settings(max_examples=80, suppress_health_check=SLOW_OK)
@given(spec=t1_toml, test_file=test_files)
@example(spec={"id": "fz", "title": "t", "category": "[/]", "difficulty": "easy"}, test_file=TEST_FILE)
@example(spec={"id": "fz", "title": "t", "category": "c", "difficulty": "easy", "a\nb": 1}, test_file=TEST_FILE)
@example(
    spec={"id": "fz", "title": "t", "category": "c", "difficulty": "easy"},
    test_file="x = " + "-" * 5000 + "1\n" + TEST_FILE,
)
def test_t1_task_toml_loads_or_fails_in_one_line(scratch, spec, test_file):
    d = write(fresh(scratch, "fz"), t1_files(toml_dumps(spec), test_file))
    task = loads_or_fails_in_one_line(d)
    if task is not None:  # what loaded is what the file says
        assert task.id == spec["id"] == "fz" and task.spec.title == spec["title"]


@settings(max_examples=60, suppress_health_check=SLOW_OK)
@given(
    text=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200),
        st.integers(1, 5000).map(deep),
        st.tuples(st.integers(0, 120), st.text(max_size=5)).map(lambda t: splice(VALID_TOML, *t)),
    )
)
@example(text=deep(3000))
def test_t1_task_toml_text_loads_or_fails_in_one_line(scratch, text):
    loads_or_fails_in_one_line(write(fresh(scratch, "fz"), t1_files(text)))


# ------------------------------------------------------------------------------------------------ Harbor
H_ENVIRONMENT = dict(
    docker_image=either(words),
    cpus=seconds,
    memory_mb=counts,
    memory=either(st.sampled_from(["2G", "512M", "0.01K", "1.5g", "0M"])),
    workdir=either(words),
    network_mode=either(st.sampled_from(["public", "no-network", "allowlist"])),
    allowed_hosts=either(st.lists(words, max_size=2)),
    allow_internet=either(st.booleans()),
    gpus=counts,
    env=either(st.dictionaries(words, words, max_size=2)),
)
H_VERIFIER = dict(
    timeout_sec=seconds,
    env=either(st.dictionaries(words, words, max_size=2)),
    environment_mode=either(st.sampled_from(["shared", "separate"])),
    environment=anything,
)
step_names = st.one_of(st.sampled_from(["one", "two", "s-3"]), words)
harbor_toml = st.fixed_dictionaries(
    {"schema_version": either(st.sampled_from(["1.0", "1.4"]))},
    optional=dict(
        task=section(
            dict(
                name=either(st.sampled_from(["acme/x", "terminal-bench/y"])),
                description=either(words),
                authors=either(st.lists(st.fixed_dictionaries({"name": words}), max_size=2)),
                keywords=either(st.lists(words, max_size=2)),
            )
        ),
        metadata=section(
            dict(
                difficulty=either(st.sampled_from(["easy", "unknown"])),
                category=either(words),
                tags=either(st.lists(words, max_size=2)),
                author_name=either(words),
                t1=section(
                    dict(
                        verifier=either(st.sampled_from(["pytest", "script"])),
                        reward_keys=either(st.lists(words, max_size=2)),
                    )
                ),
            )
        ),
        verifier=section(H_VERIFIER),
        agent=section(dict(timeout_sec=seconds)),
        environment=section(H_ENVIRONMENT),
        solution=section(dict(env=either(st.dictionaries(words, words)))),
        multi_step_reward_strategy=either(st.sampled_from(["mean", "final"])),
        steps=either(
            st.lists(
                section(
                    dict(
                        name=step_names,
                        min_reward=either(st.floats(0, 1)),
                        verifier=section(H_VERIFIER),
                        agent=section(dict(timeout_sec=seconds)),
                    )
                ),
                max_size=3,
            )
        ),
    ),
)
dockerfiles = st.one_of(
    st.none(),
    st.just("FROM debian\nWORKDIR /app\n"),
    words.map(lambda w: f"FROM debian\nWORKDIR {w}\n"),
    st.text(max_size=60),
)


def harbor_files(toml: str | bytes, dockerfile: str | None, test_sh: str, step_dirs=()) -> dict:
    files = {
        "task.toml": toml,
        "instruction.md": "Do it.\n",
        "solution/solve.sh": "true\n",
        "tests/test.sh": test_sh,
        "tests/test_outputs.py": TEST_FILE,
    }
    if dockerfile is not None:
        files["environment/Dockerfile"] = dockerfile
    for name in step_dirs:
        files.update({f"steps/{name}/instruction.md": f"Step {name}.\n", f"steps/{name}/solution/solve.sh": "true\n"})
    return files


def safe_step_dirs(spec: dict) -> list[str]:
    steps = spec.get("steps")
    names = [s.get("name") for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
    return [
        n
        for n in names
        if isinstance(n, str)
        and n
        and "/" not in n
        and "\x00" not in n
        and n not in (".", "..")
        and len(n.encode()) < 200
    ]


@settings(max_examples=80, suppress_health_check=SLOW_OK)
@given(
    spec=harbor_toml,
    dockerfile=dockerfiles,
    test_sh=st.sampled_from(["#!/bin/bash\npytest /tests\n", "echo 1 > /logs/verifier/reward.txt\n"]),
)
@example(spec={"schema_version": "1.4", "environment": {"workdir": "app"}}, dockerfile="FROM x\n", test_sh="pytest\n")
def test_harbor_task_toml_loads_or_fails_in_one_line(scratch, spec, dockerfile, test_sh):
    d = write(fresh(scratch, "hb-fz"), harbor_files(toml_dumps(spec), dockerfile, test_sh, safe_step_dirs(spec)))
    task = loads_or_fails_in_one_line(d)
    if task is not None:
        assert task.origin is not None and task.origin.format == "harbor"


# ------------------------------------------------------------------------------------------------ Terminal-Bench
TB_FIELDS = dict(
    instruction=either(words),
    descriptions=either(st.lists(st.fixed_dictionaries({"description": words}, optional={"key": words}), max_size=2)),
    author_name=either(words),
    author_email=either(words),
    difficulty=either(st.sampled_from(["easy", "unknown"])),
    category=either(words),
    tags=either(st.lists(words, max_size=2)),
    parser_name=either(st.just("pytest")),
    max_agent_timeout_sec=seconds,
    max_test_timeout_sec=seconds,
    run_tests_in_same_shell=either(st.booleans()),
)
tb_yaml = st.one_of(
    st.fixed_dictionaries(
        {"instruction": st.just("Write hello.")}, optional={k: v for k, v in TB_FIELDS.items() if k != "instruction"}
    ).map(yaml.safe_dump),
    st.fixed_dictionaries({}, optional=TB_FIELDS).map(yaml.safe_dump),
    anything.map(yaml.safe_dump),
    st.binary(max_size=100),
    st.text(max_size=100),
    st.sampled_from([2, 40, 700]).map(lambda n: "instruction: " + "[" * n + "]" * n + "\n"),  # PyYAML is slow at 700
)
keystrokes = st.one_of(
    st.none(),
    st.lists(
        st.fixed_dictionaries(
            {"command": either(words)},
            optional=dict(
                min_timeout_sec=seconds,
                block=either(st.booleans()),
                append_enter=either(st.booleans()),
                max_timeout_sec=seconds,
            ),
        ),
        max_size=3,
    ).map(yaml.safe_dump),
    anything.map(yaml.safe_dump),
    st.text(max_size=40),
)
# Folder names (the task id comes from the name) without line breaks: a path with one cannot appear in a one-line
# message unquoted, and t1 names files by their plain path.
folder_names = st.one_of(
    st.just("tb-fz"),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=20).filter(
        lambda n: n not in (".", "..") and len(f"x{n}x".splitlines()) == 1
    ),
)


@settings(max_examples=80, suppress_health_check=SLOW_OK)
@given(task_yaml=tb_yaml, solution_yaml=keystrokes, dockerfile=dockerfiles, name=folder_names)
@example(
    task_yaml="instruction: " + "[" * 700 + "]" * 700 + "\n", solution_yaml=None, dockerfile="FROM x\n", name="tb-fz"
)
@example(
    task_yaml="instruction: hi\n",
    solution_yaml="- command: " + "[" * 700 + "]" * 700 + "\n",
    dockerfile="FROM x\n",
    name="tb-fz",
)
@example(task_yaml="instruction: hi\n", solution_yaml="\x1f", dockerfile="FROM x\n", name="tb-fz")
def test_terminal_bench_task_yaml_loads_or_fails_in_one_line(scratch, task_yaml, solution_yaml, dockerfile, name):
    files = {"task.yaml": task_yaml, "tests/test_outputs.py": TEST_FILE}
    files["solution.yaml" if solution_yaml is not None else "solution.sh"] = solution_yaml or "true\n"
    if dockerfile is not None:
        files["Dockerfile"] = dockerfile
    task = loads_or_fails_in_one_line(write(fresh(scratch, name), files))
    if task is not None:
        assert task.origin is not None and task.origin.format == "terminal-bench"


# ------------------------------------------------------------------------------------------------ the corpus
def _corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "README.md")


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_file_loads_or_fails_in_one_line(scratch, path):
    """Each file that once broke a loader, replayed as the manifest of a package of its kind (its folder's name)."""
    kind, body = path.parent.name, path.read_bytes()
    if kind == "t1-task-toml":
        d = write(fresh(scratch, "fz"), t1_files(body))
    elif kind == "harbor-task-toml":
        d = write(fresh(scratch, "hb-fz"), harbor_files(body, "FROM x\n", "pytest\n"))
    elif kind == "tb-task-yaml":
        d = write(
            fresh(scratch, "tb-fz"),
            {"task.yaml": body, "tests/test_outputs.py": TEST_FILE, "solution.sh": "true\n", "Dockerfile": "FROM x\n"},
        )
    elif kind == "t1-test-file":
        d = write(
            fresh(scratch, "fz"),
            t1_files(toml_dumps({"id": "fz", "title": "t", "category": "c", "difficulty": "easy"}), body),
        )
    else:
        pytest.fail(f"{path}: unknown corpus folder {kind!r}")
    loads_or_fails_in_one_line(d)


# ------------------------------------------------------------------------------------------------ env.step()
KEY_NAMES = ["Enter", "C-c", "C-d", "C-z", "Tab", "Up", "Escape", "BSpace", "q", ":", "exit"]
COMMANDS = [
    "true",
    "echo hi",
    "printf 'a\\0b\\n'",
    "(",
    "'",
    "exit",
    "exit 3",
    "cat",
    "yes | head -c 100000",
    "sleep 5",
    "read x",
    "echo $((1/0))",
    "kill -9 $$",
    "exec bash",
    "stty -echo",
    "printf '\\033[2J'",
    "ulimit -a",
    "cd /nonexistent",
    "ls /app",
    "echo é日本\U0001f600",
    "\x00",
    "\x03",
    "\\",
]
cmd_text = st.one_of(st.sampled_from(COMMANDS), words)
odd_objects = st.one_of(
    st.binary(max_size=8),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.complex_numbers(),
    st.fractions(),
    st.decimals(),
    st.builds(object),
    st.tuples(words),
    st.sets(st.integers(), max_size=2),
    st.integers(0, 3).map(lambda n: np.zeros((n, 3))),
    st.just(np.float64("nan")),
    st.just(np.int64(3)),
)
action_values = st.one_of(seconds, st.floats(0.01, 1.0), odd_objects, cmd_text)
command_actions = st.one_of(
    cmd_text, st.fixed_dictionaries({"command": cmd_text}, optional={"timeout": st.floats(0.01, 1.0)})
)
key_actions = st.fixed_dictionaries(
    {"keys": st.one_of(words, st.lists(st.one_of(st.sampled_from(KEY_NAMES), words), max_size=4))},
    optional={"wait": st.floats(0.01, 0.3)},
)
actions = st.one_of(  # about half of them plausible (they run), the rest malformed in every way
    command_actions,
    key_actions,
    st.fixed_dictionaries({"command": st.one_of(cmd_text, odd_objects)}, optional={"timeout": action_values}),
    st.fixed_dictionaries(
        {"keys": st.one_of(words, st.lists(st.one_of(st.sampled_from(KEY_NAMES), words), max_size=4), odd_objects)},
        optional={"wait": action_values},
    ),
    st.fixed_dictionaries({"submit": st.one_of(st.just(True), odd_objects)}),
    st.dictionaries(
        st.one_of(st.sampled_from(["command", "timeout", "keys", "wait", "submit"]), words, st.integers()),
        st.one_of(odd_objects, words),
        max_size=3,
    ),
    odd_objects,
    anything,
)


def test_env_step_gives_a_step_or_a_one_line_error_and_close_leaves_nothing(live_sandboxes):
    """Random actions on one live env: a normal step, or a one-line ValueError before the turn counts. The episode
    is short (3 s of agent time, 1 s per command), so hanging commands truncate it and a new one starts."""
    before = children()
    env = gym.make(
        "T1Terminal-v0",
        task="hello-file",
        agent_timeout=3,
        command_timeout=1,
        max_turns=10_000,
        verify_on_truncate=False,
    )
    te = env.unwrapped
    env.reset(seed=0)
    ran = []

    @settings(max_examples=60, suppress_health_check=SLOW_OK)
    @given(action=actions)
    @example(action={"command": "true", "timeout": 10**400})
    @example(action={"keys": "x", "wait": 10**400})
    @example(action=np.zeros((3, 3)))
    @example(action={"command": np.zeros((2, 2))})
    @example(action={"submit": np.zeros((2, 2))})
    @example(action={"command": "true", "timeout": Fraction(10**6)})
    def step_once(action):
        if te._done:
            env.reset()
        turn = te.turn
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except ValueError as e:
            assert_one_line(str(e), starts="action: ")
            assert te.turn == turn, "a refused action counted as a turn"
            hypothesis.event("refused")
            return
        hypothesis.event(info["action"] + (" ended the episode" if terminated or truncated else ""))
        ran.append(info["action"])
        assert te.observation_space.contains(obs), repr(obs[:200])
        assert isinstance(reward, float) and math.isfinite(reward)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert info["action"] in ("command", "keys", "submit")
        if info["action"] != "submit" and not info.get("error"):
            assert te.turn == turn + 1

    try:
        step_once()
    finally:
        env.close()
    assert ran.count("command") >= 5 and "keys" in ran, f"too few actions ran to test anything: {ran}"
    assert children() <= before, "processes left after close()"
    assert live_sandboxes() == (0, 0)


# ------------------------------------------------------------------------------------------------ gym.make kwargs
# gym.make's own parameters (gymnasium's checks, not t1's)
GYM_OWN = {"max_episode_steps", "disable_env_checker", "autoreset", "apply_api_compatibility", "id", "render_mode"}
KWARG_VALUES = dict(
    task=either(st.sampled_from(["hello-file", "logs@3", "logs@²", "nope", "/", ""])),
    tasks=either(st.lists(st.sampled_from(["hello-file", "nope", "logs@1"]), max_size=2)),
    # a valid split alone resolves every task (about a second): rarer than the other values
    split=st.one_of(words, anything, st.just("test")),
    family=either(st.sampled_from(["logs", "nope"])),
    backend=either(st.sampled_from(["local", "docker", "k8s"])),
    reward_mode=either(st.sampled_from(["count", "fraction", "binary"])),
    max_turns=counts,
    command_timeout=seconds,
    agent_timeout=seconds,
    verifier_timeout=seconds,
    task_dirs=either(st.lists(st.sampled_from(["/", "/nonexistent", "tasks", ""]), max_size=2)),
    max_output_bytes=counts,
    verify_on_truncate=either(st.booleans()),
    prestart=either(st.booleans()),
    # gym.make itself reads render_mode, and has its own failures (an AttributeError on a non-string, a TypeError
    # from its warning on "%s"): only names it handles
    render_mode=st.sampled_from([None, "ansi", "human", "rgb_array", "nope"]),
)
kwarg_sets = st.one_of(
    st.fixed_dictionaries(
        {"task": st.just("hello-file")}, optional={k: v for k, v in KWARG_VALUES.items() if k != "task"}
    ),
    st.fixed_dictionaries({}, optional=KWARG_VALUES),
    # unknown names: identifiers (Python's own "unexpected keyword argument" message shows the name as it is)
    st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(lambda k: k not in GYM_OWN),
        anything,
        max_size=3,
    ),
)


@settings(max_examples=40, suppress_health_check=SLOW_OK)
@given(kwargs=kwarg_sets)
@example(kwargs={"task": "hello-file", "command_timeout": 10**400})
@example(kwargs={"task": "hello-file", "max_output_bytes": 10**400})
@example(kwargs={"task": "logs@²"})
@example(kwargs={"family": []})  # once a TypeError from inside: unhashable type
def test_gym_make_kwargs_make_an_env_or_fail_in_one_line(kwargs):
    """Construction starts no sandbox; a bad argument is a one-line ValueError/TaskError (or Python's own TypeError
    naming an unknown keyword)."""
    before = children()
    try:
        env = gym.make("T1Terminal-v0", **kwargs)
    except ValueError as e:  # TaskError is a ValueError
        assert_one_line(str(e))
    except TypeError as e:
        assert "unexpected keyword argument" in str(e), f"TypeError from inside: {e!r}"
        assert_one_line(str(e))
    else:
        env.close()
    assert children() <= before


# ------------------------------------------------------------------------------------------------ the t1env CLI
# Sub-commands that run episodes or builds are only ever given arguments that fail before they start one
# (see `harmless`); gc is left out (it removes other runs' orphaned sandbox folders).
SUBCOMMANDS = ["list", "show", "run", "validate", "new", "catalog", "decontam", "export", "eval", "report", "images"]
FLAGS = [
    "--split",
    "--json",
    "--tasks-dir",
    "--image-map",
    "--agent",
    "--backend",
    "--reward-mode",
    "--max-turns",
    "--seed",
    "--all",
    "--runs",
    "--jobs",
    "--dir",
    "--against",
    "--threshold",
    "--n",
    "--min-shared",
    "--family-seeds",
    "--format",
    "--out",
    "--attempts",
    "--concurrency",
    "--family",
    "--seeds",
    "--help",
    "-h",
    "--resume",
    "--temperature",
    "--max-tokens",
    "build-bases",
    "--map",
]
VALUES = [
    "hello-file",
    "logs@1",
    "logs@²",
    "nope",
    "train",
    "test",
    "0",
    "-1",
    "1",
    "nan",
    "inf",
    "1e999",
    "x",
    "/nonexistent",
    "/",
    "/etc/passwd",
    "harbor",
    "terminal-bench",
    "local",
    "docker",
    "oracle",
    "nop",
    "",
]


def harmless(argv: list[str], tmp: str) -> bool:
    """Whether ``t1env ARGV`` is sure to end quickly without running an episode or writing outside ``tmp``."""
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            args = build_parser().parse_args(argv)
    except SystemExit:
        return True  # a usage error (or --help): argparse exits before anything runs

    def unknown(ref) -> bool:
        try:
            get_task(ref)
        except (TaskError, ValueError):
            return True
        return False

    if args.cmd in ("list", "show", "catalog"):
        return True
    if args.cmd == "run":
        return unknown(args.task) or (args.max_turns is not None and args.max_turns < 1)
    if args.cmd == "validate":
        return not args.all and all(unknown(p) for p in args.paths)
    if args.cmd == "new":
        return str(Path(args.dir).resolve()).startswith(tmp) and "/" not in args.id and args.id not in ("", ".", "..")
    if args.cmd == "export":
        return str(Path(args.out).resolve()).startswith(tmp) and all(unknown(t) for t in args.tasks)
    if args.cmd == "decontam":
        return args.n < 1 or not 0 < args.threshold <= 1 or not Path(args.against).is_dir()
    if args.cmd == "report":
        return all(not Path(j).is_dir() for j in args.jobs) and (args.out is None or args.out.startswith(tmp))
    return False  # eval, images, gc


@settings(max_examples=50, suppress_health_check=SLOW_OK)
@given(data=st.data())
@example(data=["decontam", "--against", "/nonexistent"])
@example(data=["list", "--image-map", "/"])
@example(data=["show", "logs@²"])
@example(data=["new", "x", "--dir", "/etc/passwd"])
@example(data=["list", "\r0"])
def test_t1env_cli_exits_0_1_2_with_a_one_line_error(scratch, data):
    tmp = str(scratch)
    if isinstance(data, list):  # an @example
        argv = data
    else:
        sub = data.draw(st.one_of(st.sampled_from(SUBCOMMANDS), words), label="subcommand")
        token = st.one_of(st.sampled_from(FLAGS), st.sampled_from(VALUES), words, st.just(tmp), st.just(tmp + "/out"))
        argv = [sub] + data.draw(st.lists(token, max_size=5), label="arguments")
        hypothesis.assume(harmless(argv, tmp))
    before = children()
    rc, _, err = run_cli(main, argv)
    assert rc in (0, 1, 2), (rc, err)
    assert "Traceback" not in err
    if rc == 2 and err and not err.startswith("usage:"):  # t1env's own error, not argparse's usage message
        assert_one_line(err.rstrip("\n"), starts="t1env ")
        if argv[0] == "show":  # the error says which task: "unknown task 'x'", not "invalid literal for int()"
            assert repr(argv[1]) in err or argv[1] in err, err
    elif rc == 2 and err:  # argparse: usage, then one line "t1env ...: error: ..." (an argument in it as typed)
        assert ": error: " in err.rstrip("\n").split("\n")[-1]
    assert children() <= before

"""Fuzzing (hypothesis) of t1train's inputs: YAML configs (rollout and training) and ``t1train`` command lines.

The property: a config loads, or fails with a ``ValueError`` of one line per problem, each naming the file (and the
key); the command line exits with 0, 1 or 2 and never shows a traceback. Nothing here trains or rolls out: a command
line is only run when it is sure to fail before the model loads (see ``harmless``). Bugs found here are kept as
``@example`` cases. Settings: the "t1" profile in ``tests/conftest.py`` (derandomized, no example database).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from t1train.cli import build_parser, main  # noqa: E402
from t1train.config import load_rollout_config, load_train_config  # noqa: E402

SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

TRICKY = [
    "",
    " ",
    "\n",
    "\u2028",
    "\x85",
    "\x00",
    "[/]",
    "..",
    "/",
    "nan",
    ".inf",
    "1e-5",
    "-1",
    "0",
    "hello-file",
    "tiny",
    "hf",
    "sglang",
    "local",
    "docker",
    "ppo",
    "grpo",
    "gspo",
    "user",
    "tool",
    "repair",
    "ray",
    "~",
    "&a",
    "*a",
    "!!python/object",
    "%YAML",
    "{",
    "[",
    "é",
    "日本",
]
words = st.one_of(st.text(max_size=12), st.sampled_from(TRICKY))
scalars = st.one_of(
    words, st.integers(), st.integers(-2, 3), st.just(10**400), st.floats(), st.booleans(), st.none(), st.dates()
)
anything = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(words, c, max_size=3), max_leaves=8
)


def either(good):
    return st.one_of(good, good, anything)


def section(fields: dict) -> st.SearchStrategy:
    return st.one_of(
        st.fixed_dictionaries({}, optional=fields),
        st.fixed_dictionaries({}, optional={**fields, "unknwon": anything}),
        anything,
    )


counts = st.one_of(st.integers(-2, 100), anything)
reals = st.one_of(st.floats(), st.integers(-2, 10), st.sampled_from(["1e-5", ".inf", "warm"]))
ROLLOUT = dict(
    engine=section(
        dict(
            kind=either(st.sampled_from(["hf", "sglang"])),
            model=either(words),
            device=either(words),
            dtype=either(words),
            max_batch_size=counts,
            url=either(words),
            max_concurrency=counts,
            timeout=reals,
        )
    ),
    env=section(
        dict(
            tasks=either(st.lists(words, max_size=2)),
            backend=either(st.sampled_from(["local", "docker"])),
            kwargs=either(st.dictionaries(words, anything, max_size=2)),
        )
    ),
    sampling=section(
        dict(
            max_new_tokens=counts,
            temperature=reals,
            top_p=reals,
            top_k=counts,
            stop=either(st.lists(words, max_size=2) | words),
            stop_token_ids=either(st.lists(counts)),
            ignore_eos=either(st.booleans()),
            seed=counts,
        )
    ),
    rollout=section(
        dict(
            concurrency=counts,
            max_turns=counts,
            max_context_tokens=counts,
            system_prompt=either(words),
            observation_role=either(st.sampled_from(["user", "tool"])),
            max_observation_chars=counts,
            submit_on_limit=either(st.booleans()),
            return_routed_experts=either(st.booleans()),
            on_non_prefix=either(st.sampled_from(["repair", "error"])),
            chat_template=either(words),
            executor=either(st.sampled_from(["inprocess", "ray"])),
            ray_address=either(words),
        )
    ),
    episodes=counts,
    seed=counts,
    output=either(words),
)
TRAIN = dict(
    model=either(words),
    torch_threads=counts,
    sft=st.one_of(
        st.none(),
        section(
            dict(
                tasks=either(st.lists(words, max_size=2)),
                seeds=either(st.lists(counts)),
                repeats=counts,
                max_steps=counts,
                learning_rate=reals,
                per_device_train_batch_size=counts,
                output_dir=either(words),
            )
        ),
    ),
    train=section(
        dict(
            algorithm=either(st.sampled_from(["ppo", "grpo", "gspo"])),
            learning_rate=reals,
            max_steps=counts,
            tasks=either(st.lists(words, max_size=2)),
            max_turns=counts,
            temperature=reals,
            critic_warmup_iterations=counts,
            output_dir=either(words),
            num_generations=counts,
            seed=counts,
            lr_scheduler_type=either(words),
        )
    ),
    eval=section(
        dict(
            tasks=either(st.lists(words, max_size=2)),
            seeds=either(st.lists(counts)),
            episodes_per_task=counts,
            temperature=reals,
        )
    ),
)


def deep(n: int) -> str:
    return "engine: " + "[" * n + "]" * n + "\n"


documents = st.one_of(
    st.fixed_dictionaries({}, optional=ROLLOUT).map(yaml.safe_dump),
    st.fixed_dictionaries({}, optional=TRAIN).map(yaml.safe_dump),
    anything.map(yaml.safe_dump),
    st.text(max_size=80),
    st.binary(max_size=60),
    st.sampled_from([2, 40, 700]).map(deep),  # PyYAML is slow on deeper ones
)


@pytest.fixture(scope="module")
def scratch():
    root = Path(tempfile.mkdtemp(prefix="t1train-fuzz-")).resolve()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def config_file(root: Path, body: str | bytes) -> Path:
    path = Path(tempfile.mkdtemp(dir=root)) / "run.yaml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"))
    return path


def loads_or_fails_naming_the_file(load, path: Path):
    """``load(path)``: a config, or a ValueError whose every line names the file (one line per problem)."""
    try:
        return load(path)
    except ValueError as e:
        lines = str(e).split("\n")
        assert all(line.startswith(f"{path}: ") for line in lines), f"a line does not name the file: {str(e)!r}"
        for line in lines:  # and no line holds a line break of another kind (they are lines to a reader too)
            assert len(line.splitlines()) == 1, f"line break inside a problem: {line!r}"
        return None


@settings(max_examples=100, suppress_health_check=SLOW_OK)
@given(body=documents)
@example(body=deep(700))
@example(body=b"episodes: \x80\n")
@example(body="env:\n  '\u2028': 1\n")
def test_rollout_config_loads_or_fails_naming_the_file(scratch, body):
    path = config_file(scratch, body)
    cfg = loads_or_fails_naming_the_file(load_rollout_config, path)
    if cfg is not None:
        assert cfg.episodes >= 1 and cfg.env.tasks


@settings(max_examples=100, suppress_health_check=SLOW_OK)
@given(body=documents)
@example(body=deep(700))
@example(body=b"model: \x80\n")
@example(body="train:\n  '\\x85': 1\n")
@example(body="train: {learning_rate: 1e-5}\n'a\u2028b': 1\n")
def test_train_config_loads_or_fails_naming_the_file(scratch, body):
    path = config_file(scratch, body)
    cfg = loads_or_fails_naming_the_file(load_train_config, path)
    if cfg is not None:
        assert isinstance(cfg.train, dict)


def test_a_config_that_is_a_folder_or_missing_fails_naming_it(scratch):
    for path in (scratch, scratch / "missing.yaml"):
        for load in (load_rollout_config, load_train_config):
            with pytest.raises((ValueError, FileNotFoundError)) as e:
                load(path)
            assert str(path) in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------------ the CLI
FLAGS = [
    "--config",
    "--output-dir",
    "--max-steps",
    "--skip-sft",
    "--resume",
    "--model",
    "--output",
    "--episodes",
    "--overwrite",
    "--help",
    "-h",
]
SUBCOMMANDS = ["train", "sft", "eval", "rollout"]


def harmless(argv: list[str]) -> bool:
    """Whether ``t1train ARGV`` fails before it loads a model or starts an env: a usage error, or a config that does
    not load (the first thing every sub-command does)."""
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            args = build_parser().parse_args(argv)
    except SystemExit:
        return True
    if not args.config:
        return True  # no sub-command: help, exit 2
    load = load_rollout_config if args.command == "rollout" else load_train_config
    try:
        load(args.config)
    except (ValueError, OSError):
        return True
    return False


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    environ = dict(os.environ)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(environ)
    return rc, out.getvalue(), err.getvalue()


@settings(max_examples=60, suppress_health_check=SLOW_OK)
@given(data=st.data())
@example(data=["rollout", "--config", "{scratch}"])
@example(data=["--config", "{scratch}"])
@example(data=["rollout", "--config", "{bad_utf8}"])
def test_t1train_cli_exits_0_1_2_without_a_traceback(scratch, data):
    bad = config_file(scratch, b"\x80")
    if isinstance(data, list):  # an @example
        argv = [a.format(scratch=scratch, bad_utf8=bad) for a in data]
    else:
        configs = st.one_of(
            st.just(str(scratch)),
            st.just(str(bad)),
            st.just(str(scratch / "missing.yaml")),
            documents.map(lambda body: str(config_file(scratch, body))),
        )
        token = st.one_of(st.sampled_from(FLAGS), words, configs, st.sampled_from(["0", "-1", "1", "x"]))
        head = data.draw(st.one_of(st.sampled_from(SUBCOMMANDS), words), label="subcommand")
        argv = [head] + data.draw(st.lists(token, max_size=4), label="arguments")
        assume(harmless(argv))
    rc, _, err = run_cli(argv)
    assert rc in (0, 1, 2), (rc, err)
    assert "Traceback" not in err
    if rc == 2 and "t1train: error: " in err and not err.startswith("usage:"):
        lines = err.rstrip("\n").split("\n")
        assert lines[0].startswith("t1train: error: "), err
        if any(a.endswith(".yaml") or a == str(scratch) for a in argv):  # config problems name the file
            assert all(any(a in line for a in argv) for line in lines), err

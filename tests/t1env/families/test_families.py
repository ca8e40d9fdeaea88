"""Task families: deterministic per seed, distinct across seeds, valid packages, reachable by id, env and CLI."""

import hashlib
import json
from pathlib import Path

import gymnasium as gym
import pytest

import t1env  # noqa: F401
from t1env.agent.reference import oracle_command
from t1env.cli import main
from t1env.families import (
    FAMILIES,
    calibration_refs,
    get_family,
    materialize,
    parse_instance_id,
    split_of_seed,
    split_seed,
)
from t1env.registry import get_task, list_tasks
from t1env.task import TaskError, load_task

NAMES = sorted(FAMILIES)


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + oct(p.stat().st_mode).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_at_least_eight_families_with_metadata():
    assert len(FAMILIES) >= 8
    for fam in FAMILIES.values():
        assert fam.name and fam.category and fam.description and fam.difficulty in ("easy", "medium", "hard")


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_gives_byte_identical_package(name, tmp_path):
    fam = get_family(name)
    for seed in (0, 7, 123):
        a, b = fam.generate(seed, tmp_path / f"a{seed}"), fam.generate(seed, tmp_path / f"b{seed}")
        assert tree_digest(a) == tree_digest(b)


@pytest.mark.parametrize("name", NAMES)
def test_distinct_seeds_give_distinct_instances(name, tmp_path):
    fam = get_family(name)
    instructions, digests = set(), set()
    for seed in range(8):
        pkg = fam.generate(seed, tmp_path)
        instructions.add((pkg / "instruction.md").read_text())
        digests.add(tree_digest(pkg / "tests") + tree_digest(pkg / "environment"))
    assert len(digests) == 8
    # chain's instruction is the same for every instance on purpose: the word and the number are only in the files,
    # so the agent has to read them (docs/families.md)
    assert len(instructions) >= 5 or (name == "chain" and len(instructions) == 1)


@pytest.mark.parametrize("name", NAMES)
def test_instance_is_a_valid_task_package(name, tmp_path):
    fam = get_family(name)
    for seed in range(4):
        task = load_task(fam.generate(seed, tmp_path))
        assert task.id == f"{name}-{seed}" and "family" in task.spec.tags
        assert len(task.declared_checks()) >= 3
        assert task.solution.stat().st_mode & 0o111


def test_splits_are_disjoint_and_cover_the_seeds():
    test = [split_seed("test", k) for k in range(100)]
    train = [split_seed("train", k) for k in range(400)]
    assert all(split_of_seed(s) == "test" for s in test) and all(split_of_seed(s) == "train" for s in train)
    assert not set(test) & set(train) and sorted(test + train) == list(range(500))
    assert [split_seed(None, k) for k in range(5)] == list(range(5))
    with pytest.raises(ValueError, match="split must be"):
        split_seed("dev", 0)


def test_instance_ids_resolve_through_the_registry():
    assert parse_instance_id("logs@17") == ("logs", 17)
    assert parse_instance_id("hello-file") is None and parse_instance_id("logs@x") is None
    task = get_task("regex@5")
    assert task.id == "regex-5" and task.path == materialize("regex", 5)
    assert not any("@" in t or t.startswith("regex-") for t in list_tasks())
    with pytest.raises(TaskError, match="unknown family 'nope'"):
        get_task("nope@1")


def test_materialize_is_cached_and_keyed_by_generator_version():
    fam = get_family("csv")
    p = materialize("csv", 3)
    assert fam.version() in p.parts
    mtime = (p / "task.toml").stat().st_mtime_ns
    assert materialize("csv", 3) == p and (p / "task.toml").stat().st_mtime_ns == mtime


def test_calibration_sample_has_a_test_and_a_train_seed_per_family():
    refs = calibration_refs()
    for name in NAMES:
        seeds = [parse_instance_id(r)[1] for r in refs if r.startswith(name + "@")]
        assert {split_of_seed(s) for s in seeds} == {"train", "test"}


def test_env_family_kwarg_maps_reset_seed_into_the_split():
    env = gym.make("T1Terminal-v0", family="config", split="test")
    try:
        _, info = env.reset(seed=2)
        assert info["task_id"] == "config-10"
        _, info = env.reset(seed=2)
        assert info["task_id"] == "config-10"
        obs, info = env.reset()
        assert split_of_seed(int(info["task_id"].rsplit("-", 1)[1])) == "test" and "settings" in obs
    finally:
        env.close()
    env = gym.make("T1Terminal-v0", family="config")
    try:
        _, info = env.reset(seed=7)
        assert info["task_id"] == "config-7"
    finally:
        env.close()


def test_env_family_kwarg_errors():
    with pytest.raises(ValueError, match="family= goes alone or with split="):
        t1env.TerminalEnv(family="logs", task="hello-file")
    with pytest.raises(TaskError, match="unknown family"):
        t1env.TerminalEnv(family="nope")
    with pytest.raises(ValueError, match="split must be"):
        t1env.TerminalEnv(family="logs", split="dev")


def test_cli_list_show_and_run_a_family_instance(capsys):
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    fams = [r for r in rows if r.get("kind") == "family"]
    assert {r["id"] for r in fams} == {f"{n}@SEED" for n in NAMES}
    assert main(["show", "config@3"]) == 0
    out = capsys.readouterr().out
    assert "config-3" in out and "split train" in out and "oracle commands" in out
    assert main(["run", "config@3", "--agent", "oracle", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["task_id"] == "config-3" and res["resolved"] and res["total"] >= 3


def test_chain_test_instances_are_pairs_no_train_instance_has():
    """chain's held-out instances test copying what was read, not recall: its (word, number) pairs are split too."""
    from t1env.families.chain import PAIRS, TEST_PAIRS, TRAIN_PAIRS, pair_of_seed

    train = {pair_of_seed(split_seed("train", k)) for k in range(500)}
    test = {pair_of_seed(split_seed("test", k)) for k in range(500)}
    assert train == set(TRAIN_PAIRS) and test == set(TEST_PAIRS) and not train & test
    assert sorted(train | test) == sorted(PAIRS) and len(PAIRS) == 54
    assert {w for w, _ in test} <= {w for w, _ in train} and {n for _, n in test} <= {n for _, n in train}


def test_family_demos_are_written_as_solution_demos_and_listed_by_the_task():
    """An instance's demos land in solution/demos/NAME.sh, executable, with solve.sh's header and preamble;
    Task.demos lists them sorted, and a task without demos has none (the oracle stays solve.sh)."""
    import os

    from t1env.registry import get_task

    task = get_task("chain@1")
    assert [p.name for p in task.demos] == ["both-slips.sh", "rereads-name.sh", "spare-folder.sh"]
    assert task.demos[0].read_text() == (
        "#!/bin/bash\nset -euo pipefail\ncat name.txt\nmkdir tmp red\ncat name.txt\necho red > red/notes.txt\n"
    )
    assert all(os.access(p, os.X_OK) for p in task.demos) and task.solution.name == "solve.sh"
    assert "mkdir red\n" in task.solution.read_text() and get_task("hello-file").demos == []


@pytest.mark.parametrize("extra", ["", "requests_999=0\n"])
def test_logs_answers_count_only_when_no_unasked_question_is_answered(extra):
    """Answering every question the pool could ask (issue 25's 'answer everything') earns nothing on logs: the oracle's
    answers plus one key that was not asked fail every check, where without the extra line they pass all."""
    task = get_task("logs@3")
    env = gym.make("T1Terminal-v0", task="logs@3").unwrapped
    try:
        env.reset(seed=0)
        env.step({"command": oracle_command(task)})
        if extra:
            env.step({"command": f"printf %s {extra!r} >> /app/answers.txt"})
        _, _, _, _, info = env.step({"submit": True})
    finally:
        env.close()
    assert (info["passed"], info["total"]) == ((0, 4) if extra else (4, 4)), info["checks"]

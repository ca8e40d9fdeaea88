"""The long-horizon family `project`: >= 30 dependent oracle commands, >= 10 milestones scored in order, held-out
test split, deterministic per seed.

Cheap by design (issue 28): the generator is checked without a sandbox, and the ordered partial credit by running
the instance's real checks with pytest on a copy of its environment in a temporary folder, after a prefix of the
oracle's own commands (each run by bash there). Full episodes in the local and Docker sandboxes are what
CI's `t1env validate --all` plays for seeds 0 and 1.
"""

import re
import shutil
import subprocess
import sys

import pytest

from t1env.agent.reference import typed_script
from t1env.families import get_family, split_seed
from t1env.families.project import POOLS, WEIGHTS

FAM = get_family("project")
SEEDS = [split_seed("train", k) for k in range(8)] + [split_seed("test", k) for k in range(8)]


def build(seed):
    return FAM.build(FAM.rng(seed), seed)


def consts(inst) -> dict:
    """The constants the instance's checks are written against (the head of test_project.py)."""
    head = inst.tests["test_project.py"].split("\n\n", 1)[0]
    out = {}
    exec(head, {}, out)  # the generator's own literal assignments (reprs), not agent code
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_oracle_is_at_least_30_whole_commands(seed):
    inst = build(seed)
    lines = typed_script(inst.preamble + inst.solve).splitlines()
    assert len(lines) >= 30
    assert lines == inst.solve.splitlines()  # typed one per turn exactly as solve.sh runs them
    assert not any("<<" in ln or ln.endswith("\\") for ln in lines)  # every line a whole command


@pytest.mark.parametrize("seed", SEEDS)
def test_the_values_commands_need_come_only_from_observations(seed):
    """Every value the oracle types after reading it is absent from the instruction and present in the solve script
    only after the command whose output shows it."""
    inst = build(seed)
    c = consts(inst)
    lines = inst.solve.splitlines()
    values = [c["TICKET"], c["CONFIG"]["port"], c["CONFIG"]["token"], c["BUILD_ID"], c["SHA256"], *c["PACKAGES"]]
    values += [path for path, _ in c["FIXED"]]
    for v in values:
        assert v not in inst.instruction, v
        assert any(v in ln for ln in lines), v
    first = {v: next(i for i, ln in enumerate(lines) if v in ln) for v in values}
    assert first[c["TICKET"]] > lines.index("cat JOB.md")
    assert all(first[p] > lines.index("ls vendor") for p in c["PACKAGES"])
    assert first[c["BUILD_ID"]] > next(i for i, ln in enumerate(lines) if ln.startswith("python3 build.py"))
    for path, _ in c["FIXED"]:  # each fix's file and line follow a build that printed them
        fix = next(i for i, ln in enumerate(lines) if ln.startswith("sed -i '") and ln.endswith(path))
        assert lines[fix - 1].startswith("python3 build.py") and re.match(r"sed -i '\d+s/", lines[fix])


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_at_least_ten_milestones_weighted_as_checks(seed):
    tests = build(seed).tests["test_project.py"]
    names = re.findall(r"^def (test_m(\d\d)\w*)\(", tests, re.M)
    milestones = [int(m) for _, m in names]
    assert len(WEIGHTS) >= 10 and max(milestones) == len(WEIGHTS)
    assert [milestones.count(k) for k in range(1, len(WEIGHTS) + 1)] == list(WEIGHTS)
    assert milestones == sorted(milestones)
    for name, m in names:  # each check first requires the milestones before its own
        body = tests.split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]
        assert f"_require({int(m)})" in body, name


def test_splits_draw_from_disjoint_pools():
    train = [build(split_seed("train", k)) for k in range(40)]
    test = [build(split_seed("test", k)) for k in range(20)]

    def used(insts, key):
        return {v for i in insts for v in POOLS["train"][key] + POOLS["test"][key] if v in i.solve + str(i.files)}

    for key in ("services", "modules", "packages"):
        assert used(train, key) <= set(POOLS["train"][key]) and used(test, key) <= set(POOLS["test"][key]), key
    faults = {"train": set(), "test": set()}
    for split, insts in (("train", train), ("test", test)):
        for i in insts:
            faults[split] |= set(i.tags) & set(POOLS["train"]["faults"] + POOLS["test"]["faults"])
            assert consts(i)["TICKET"].startswith(POOLS[split]["ticket"] + "-")
    assert faults["train"] == set(POOLS["train"]["faults"]) and faults["test"] == set(POOLS["test"]["faults"])
    assert not {i.instruction for i in train} & {i.instruction for i in test}
    assert not {i.solve for i in train} & {i.solve for i in test}
    assert all("|" in typed_script(i.solve) for i in train) and all("-F';'" in i.solve for i in test)


def test_same_seed_same_instance_other_seed_other_instance():
    assert build(3) == build(3) and build(5) == build(5)
    assert build(3).solve != build(4).solve and build(3).files != build(4).files


def checks_after(tmp_path, seed, scenarios: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    """Per scenario, (passed, total) of project@seed's checks after the scenario's oracle lines ran in order (one
    bash, a failing line does not stop the next, as when typed) in its own copy of the environment, a temporary
    folder standing for /app. One pytest run scores every scenario."""
    root = FAM.generate(seed, tmp_path / "pkg")
    checks = (root / "tests" / "test_project.py").read_text()
    for name, lines in scenarios.items():
        app = tmp_path / name / "app"
        shutil.copytree(root / "environment", app)
        subprocess.run(["bash", "-c", "\n".join(lines) or "true"], cwd=app, capture_output=True, timeout=120)
        (tmp_path / name / f"test_{name}.py").write_text(checks.replace('Path("/app")', f'Path("{app}")'))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *scenarios],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcomes = re.findall(r"^(PASSED|FAILED) (\w+)/test_\w+\.py::test_m", r.stdout, re.M)
    return {
        name: (sum(o == ("PASSED", name) for o in outcomes), sum(d == name for _, d in outcomes)) for name in scenarios
    }


@pytest.mark.parametrize("seed", [1, 0])
def test_partial_credit_comes_in_order(tmp_path, seed):
    lines = build(seed).solve.splitlines()
    total = sum(WEIGHTS)
    deps = max(i for i, ln in enumerate(lines) if ln.startswith("cp vendor/"))
    scores = checks_after(
        tmp_path,
        seed,
        {
            "nothing": [],
            "one_package": lines[:deps],  # a weight-2 milestone half done: one of its two checks
            "deps": lines[: deps + 1],
            # every command but the token's: milestones 1-4 count; the build fails and nothing after the gap counts
            "gap": [ln for ln in lines if not ln.startswith("sed -i 's/@TOKEN@/")],
            "all": lines,
        },
    )
    assert scores == {
        "nothing": (0, total),
        "one_package": (WEIGHTS[0] + 1, total),
        "deps": (sum(WEIGHTS[:2]), total),
        "gap": (sum(WEIGHTS[:4]), total),
        "all": (total, total),
    }

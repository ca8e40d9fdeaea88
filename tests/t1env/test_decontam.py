"""Decontamination against fixture corpora in the other projects' own layouts: one clean, one with near-copies."""

import json
import textwrap

import pytest

from t1env.cli import main
from t1env.registry import get_task
from t1env.tools.decontam import Doc, _yaml_fields_fallback, compare, containment, ngrams, normalize, read_corpus


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("T1_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))


def tb_task(root, tid, instruction, tests):
    d = root / "tasks" / tid
    (d / "tests").mkdir(parents=True)
    body = textwrap.indent(instruction.strip(), "  ")
    (d / "task.yaml").write_text(
        f"instruction: |-\n{body}\nauthor_email: someone@example.com\ndifficulty: medium\n"
        "tags:\n  - files\nmax_agent_timeout_sec: 360.0\n"
    )
    (d / "tests" / "test_outputs.py").write_text(tests)
    (d / "run-tests.sh").write_text("#!/bin/bash\npytest $TEST_DIR/test_outputs.py\n")
    (d / "solution.sh").write_text("echo solved\n")


def harbor_task(root, tid, instruction, tests):
    d = root / tid
    (d / "tests").mkdir(parents=True)
    (d / "instruction.md").write_text(instruction)
    (d / "task.toml").write_text('version = "1.0"\n[metadata]\ndifficulty = "easy"\n')
    (d / "tests" / "test_outputs.py").write_text(tests)


CLEAN = [
    (
        "train-fasttext",
        "Train a fastText model on the Yelp reviews data in /app/data and save it as model.bin; "
        "it must reach an accuracy of at least 0.62 on the private test set and be smaller than 150MB.",
    ),
    (
        "fix-pandas-version",
        "The script /app/analyze.py fails with a pandas version error after an upgrade. Pin "
        "compatible versions in requirements.txt so that running python analyze.py prints the monthly totals again.",
    ),
    (
        "qemu-startup",
        "Start the alpine image in /app/alpine.iso with qemu so that it is reachable over telnet on "
        "port 6665 and leave it running in the background once the login prompt appears for the grader.",
    ),
]
CLEAN_TESTS = "import os\n\ndef test_model_size():\n    assert os.path.getsize('/app/model.bin') < 150 * 2**20\n"


def reworded(text, every=15):
    """A near-copy: one word in every `every` replaced, a sentence added (light paraphrasing)."""
    words = text.split()
    return " ".join("WORD" if i % every == every - 1 else w for i, w in enumerate(words)) + " Good luck, agent!"


def test_normalisation_and_ngrams():
    assert normalize("Write `/app/out.txt` -- NOW!") == ["write", "app", "out", "txt", "now"]
    a = ngrams(normalize("one two three four five"), 3)
    assert a == {"one two three", "two three four", "three four five"}
    assert containment(a, {"two three four"}) == 1.0 and containment(a, set()) == 0.0


def test_terminal_bench_yaml_read_without_pyyaml():
    text = "descriptions:\n  - key: base\n    description: |-\n      Line one of it.\n      Line two.\nauthor: x\n"
    assert _yaml_fields_fallback(text) == "Line one of it.\nLine two."
    assert _yaml_fields_fallback('instruction: "Just one line"\n') == "Just one line"


def test_corpus_layouts_are_read(tmp_path):
    tb_task(tmp_path / "tb", "qemu-startup", CLEAN[2][1], CLEAN_TESTS)
    harbor_task(tmp_path / "harbor", "fix-pandas-version", CLEAN[1][1], CLEAN_TESTS)
    docs = read_corpus(tmp_path)
    by = {(d.task, d.part): d.text for d in docs}
    assert "telnet on port 6665" in " ".join(by[("tb/tasks/qemu-startup", "instruction")].split())
    assert by[("harbor/fix-pandas-version", "instruction")].startswith("The script")
    assert "test_model_size" in by[("harbor/fix-pandas-version", "tests")]


def test_clean_corpus_exits_zero(tmp_path, capsys):
    for tid, text in CLEAN[:2]:
        tb_task(tmp_path, tid, text, CLEAN_TESTS)
    harbor_task(tmp_path / "harbor", *CLEAN[2], CLEAN_TESTS)
    code = main(["decontam", "--against", str(tmp_path), "--family-seeds", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "no overlap" in out and "with 3 task(s)" in out


def test_near_copies_are_listed_and_exit_nonzero(tmp_path, capsys):
    seed_task = get_task("log-error-summary")
    family_task = get_task("sql@1")
    for tid, text in CLEAN:
        tb_task(tmp_path, tid, text, CLEAN_TESTS)
    # a Terminal-Bench task whose instruction is a light rewording of one of ours
    tb_task(tmp_path, "web-log-5xx", reworded(seed_task.instruction), CLEAN_TESTS)
    # a Harbor task whose tests copy a family instance's tests
    tests = "\n".join(p.read_text() for p in sorted(family_task.tests_dir.glob("test_*.py")))
    harbor_task(tmp_path / "harbor", "shop-sql", "Answer questions about the shop database.", tests)
    code = main(["decontam", "--against", str(tmp_path), "--family-seeds", "2", "--json"])
    pairs = {(m["ours"], m["theirs"], m["part"]) for m in json.loads(capsys.readouterr().out)}
    assert code == 1
    assert {theirs for _, theirs, _ in pairs} == {"tasks/web-log-5xx", "harbor/shop-sql"}
    assert ("log-error-summary", "tasks/web-log-5xx", "instruction") in pairs
    assert ("sql@1", "harbor/shop-sql", "tests") in pairs
    # every instance of a family shares its test template, so sql@0 may match too; nothing else does
    assert all(ours.startswith("sql@") for ours, theirs, _ in pairs if theirs == "harbor/shop-sql")


def test_threshold_controls_what_is_reported(tmp_path):
    ours = [Doc("a", "instruction", " ".join(f"w{i}" for i in range(100)))]
    theirs = [
        Doc("b", "instruction", " ".join(f"w{i}" for i in range(60)) + " " + " ".join(f"x{i}" for i in range(60)))
    ]
    assert [round(m.containment, 2) for m in compare(ours, theirs, n=8, threshold=0.5)] == [0.57]
    assert compare(ours, theirs, n=8, threshold=0.6) == []

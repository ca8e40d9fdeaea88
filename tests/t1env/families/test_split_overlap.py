"""The held-out split stays held out: no family's train/test overlap rises above what docs/families.md states.

The numbers are measured by :func:`t1env.families.overlap.split_overlap` over the sample the docs name (the first
200 train and 50 test instances), from the generators alone (no sandbox). The docs' table is the source: a change
that makes a test instance's oracle script or instruction equal a train instance's fails here until the docs say so.
"""

import re
from pathlib import Path

import pytest

from t1env.families import FAMILIES, get_family, split_of_seed
from t1env.families.overlap import N_TEST, N_TRAIN, split_overlap, table

DOC = Path(__file__).resolve().parents[3] / "docs" / "families.md"
COLUMNS = ("answers", "instructions", "answers_near", "instructions_near")


def documented() -> dict[str, dict[str, int]]:
    """The overlap table of docs/families.md: family -> column -> percent."""
    text = DOC.read_text()
    head = table([]).splitlines()[0]
    assert head in text, f"{DOC}: the overlap table (`python -m t1env.families.overlap`) is missing"
    rows = {}
    for line in text.split(head, 1)[1].splitlines()[2:]:
        m = re.fullmatch(r"\| `([a-z]+)` \| (\d+)% \| (\d+)% \| (\d+)% \| (\d+)% \|", line)
        if not m:
            break
        rows[m[1]] = dict(zip(COLUMNS, map(int, m.groups()[1:])))
    return rows


def test_docs_state_the_sample_and_every_family():
    text = DOC.read_text()
    assert f"first {N_TRAIN} train and {N_TEST} test instances" in text
    assert sorted(documented()) == sorted(FAMILIES)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_overlap_is_at_most_what_the_docs_state(name):
    stated = documented()[name]
    measured = split_overlap(name)
    for col in COLUMNS:
        assert round(getattr(measured, col) * 100) <= stated[col], (
            f"{name}: {col} overlap is {getattr(measured, col):.0%}, docs/families.md states {stated[col]}%: "
            "make the test split draw from pools train does not use, or update the table "
            "(`python -m t1env.families.overlap`)"
        )


def test_no_family_but_chain_shares_an_answer_or_instruction_across_splits():
    """The goal the docs state: a held-out instance's answer and prompt are never a train instance's (chain's one
    instruction carries no answer, by design)."""
    for name, row in documented().items():
        assert row["answers"] == 0, name
        if name != "chain":
            assert row["instructions"] == 0 and row["answers_near"] == 0 and row["instructions_near"] == 0, name


def test_overlap_detects_a_shared_answer():
    """The measure itself can fail: a family whose test instances are copies of train instances overlaps fully."""
    fam = get_family("script")

    class Copycat(type(fam)):
        name = "copycat"

        def build(self, rng, seed):
            train_seed = seed + 1 if split_of_seed(seed) == "test" else seed
            return super().build(self.rng(train_seed), train_seed)

    o = split_overlap(Copycat(), n_train=20, n_test=5)
    assert (o.answers, o.instructions, o.answers_near, o.instructions_near) == (1.0, 1.0, 1.0, 1.0)

"""docs/tasks.md is generated from the packages and must match them."""

from pathlib import Path

from t1env.catalog import render, seed_rows
from t1env.cli import main
from t1env.families import FAMILIES

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def test_committed_catalogue_is_up_to_date():
    assert DOC.is_file(), "docs/tasks.md is missing: run `t1env catalog > docs/tasks.md`"
    assert DOC.read_text() == render(), "docs/tasks.md is out of date: run `t1env catalog > docs/tasks.md` and commit it"


def test_catalogue_lists_every_seed_task_and_family(capsys):
    assert main(["catalog"]) == 0
    out = capsys.readouterr().out
    assert all(f"| `{r['id']}` |" in out for r in seed_rows())
    assert all(f"| `{name}` |" in out for name in FAMILIES)
    assert "| **total** |" in out

"""docs/tasks.md is generated from the packages and must match them."""

import re
import tomllib
from collections import Counter
from pathlib import Path

from t1env.cli import main
from t1env.families import FAMILIES
from t1env.tools.catalog import render

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tasks.md"


def test_committed_catalogue_is_up_to_date():
    assert DOC.is_file(), "docs/tasks.md is missing: run `t1env catalog > docs/tasks.md`"
    assert DOC.read_text() == render(), (
        "docs/tasks.md is out of date: run `t1env catalog > docs/tasks.md` and commit it"
    )


def test_catalogue_rows_match_the_task_packages_read_directly(capsys):
    """The catalogue against the packages as files (task.toml read with tomllib, checks counted as the test
    functions in tests/), not through the loader and the check discovery that the catalogue itself uses."""
    assert main(["catalog"]) == 0
    out = capsys.readouterr().out
    summary, table = out.split("## Seed tasks\n", 1)
    rows = {
        m[1]: (m[2], m[3], int(m[4]))
        for m in re.finditer(r"^\| `([^`]+)` \| ([^|]+?) \| ([^|]+?) \| (?:train|test) \| (\d+) \|", table, re.M)
    }
    packages = sorted(p.parent for p in (ROOT / "tasks").glob("*/task.toml"))
    assert len(packages) > 50 and sorted(rows) == [p.name for p in packages]
    categories: Counter = Counter()
    for pkg in packages:
        spec = tomllib.loads((pkg / "task.toml").read_text())
        checks = sum(
            len(re.findall(r"^\s*(?:async\s+)?def test\w*\(", f.read_text(), re.M))
            for f in (pkg / "tests").rglob("test_*.py")
        )
        assert rows[pkg.name] == (spec["category"], spec["difficulty"], checks), pkg.name
        categories[spec["category"]] += 1
    for category, n in categories.items():  # the summary table's per-category totals
        assert re.search(rf"^\| {re.escape(category)} \|.*\| {n} \|$", summary, re.M), category
    assert re.search(rf"^\| \*\*total\*\* \|.*\| {len(packages)} \|$", summary, re.M)
    assert all(f"| `{name}` |" in out for name in FAMILIES)

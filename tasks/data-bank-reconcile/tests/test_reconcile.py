import hashlib
import json
from pathlib import Path

import pytest

import reference

OUT = Path("/app/out")
HASHES = {"/app/bank/statement.csv": "841a0bcac5cb485489aee5198f6a31fb3c00f36df9189de253e6e19285dd29d7", "/app/books/ledger.json": "0ef1d1ac0cd857681bc6c7ee81b634f80bdecc3ca3d2a9805a04979907fd6fb9"}


@pytest.fixture(scope="module")
def ref():
    for p, h in HASHES.items():
        assert hashlib.sha256(Path(p).read_bytes()).hexdigest() == h, f"{p} was modified"
    return reference.reconcile()


def test_normalized_bank(ref):
    assert (OUT / "bank.csv").read_text() == reference.normalized_bank()


def test_matches_by_ref(ref):
    want = [l for l in ref[0]["matches.csv"].splitlines()[1:] if l.endswith(",ref")]
    got = [l for l in (OUT / "matches.csv").read_text().splitlines()[1:] if l.endswith(",ref")]
    assert got == want


def test_matches_full(ref):
    assert (OUT / "matches.csv").read_text() == ref[0]["matches.csv"]


def test_mismatches(ref):
    assert (OUT / "mismatches.csv").read_text() == ref[0]["mismatches.csv"]


def test_unmatched_bank(ref):
    assert (OUT / "unmatched_bank.csv").read_text() == ref[0]["unmatched_bank.csv"]


def test_unmatched_ledger(ref):
    assert (OUT / "unmatched_ledger.csv").read_text() == ref[0]["unmatched_ledger.csv"]


def test_summary_totals(ref):
    got = json.loads((OUT / "summary.json").read_text())
    assert (got["bank_total"], got["ledger_total"]) == (ref[1]["bank_total"], ref[1]["ledger_total"])


def test_summary_counts(ref):
    got = json.loads((OUT / "summary.json").read_text())
    assert got == ref[1]

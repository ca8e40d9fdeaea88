import datetime as dt
import hashlib
import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path("/app/ledger")
BASIC_SHA256 = "6335126fe841d8762e156be574e5360f9643eb468d0bce95bddf3b595fdae052"


@pytest.fixture(scope="module")
def ledger():
    sys.path.insert(0, str(ROOT))
    try:
        import ledger as mod
        yield mod
    finally:
        sys.path.remove(str(ROOT))
        for name in [n for n in sys.modules if n == "ledger" or n.startswith("ledger.")]:
            del sys.modules[name]


def T(mod, date, account, amount):
    return mod.Transaction(dt.date.fromisoformat(date), account, Decimal(amount))


def test_parse_thousands_and_parentheses(ledger):
    assert ledger.parse_amount("1,234.50") == Decimal("1234.50")
    assert ledger.parse_amount(" (1,000.25) ") == Decimal("-1000.25")
    assert ledger.parse_amount("12,345,678") == Decimal("12345678")


def test_amounts_are_exact_decimals(ledger):
    a = ledger.parse_amount("0.1")
    assert isinstance(a, Decimal) and a == Decimal("0.1")
    led = ledger.Ledger()
    for s in ["0.10", "0.20", "0.05", "(0.05)"]:
        led.add(ledger.Transaction(dt.date(2024, 3, 1), "cash", ledger.parse_amount(s)))
    bal = led.balance("cash")
    assert isinstance(bal, Decimal) and bal == Decimal("0.30")
    empty = led.balance("no-such-account")
    assert isinstance(empty, Decimal) and empty == 0


def test_ledgers_do_not_share_state(ledger):
    a = ledger.Ledger()
    a.add(T(ledger, "2024-01-01", "x", "1"))
    b = ledger.Ledger()
    assert b.transactions == [] and b.balance("x") == 0
    seed = [T(ledger, "2024-01-01", "y", "2")]
    c = ledger.Ledger(seed)
    c.add(T(ledger, "2024-01-02", "y", "3"))
    assert c.balance("y") == 5


def test_between_is_inclusive(ledger):
    led = ledger.Ledger()
    for d in ["2024-01-31", "2024-02-01", "2024-02-15", "2024-02-29", "2024-03-01"]:
        led.add(T(ledger, d, "a", "1"))
    got = [t.date.isoformat() for t in led.between(dt.date(2024, 2, 1), dt.date(2024, 2, 29))]
    assert got == ["2024-02-01", "2024-02-15", "2024-02-29"]


def test_monthly_totals_keyed_by_year_month(ledger):
    led = ledger.Ledger()
    for d, amt in [("2024-12-05", "5"), ("2023-12-24", "10"), ("2024-01-02", "2.5"),
                   ("2023-12-01", "(1)"), ("2024-12-31", "0.25")]:
        led.add(ledger.Transaction(dt.date.fromisoformat(d), "food", ledger.parse_amount(amt)))
    led.add(T(ledger, "2024-01-03", "rent", "100"))
    totals = led.monthly_totals("food")
    assert list(totals.items()) == [("2023-12", Decimal("9")), ("2024-01", Decimal("2.5")),
                                    ("2024-12", Decimal("5.25"))]


def test_format_negative_amounts(ledger):
    assert ledger.format_amount(Decimal("-5")) == "-$5.00"
    assert ledger.format_amount(Decimal("-1234.5")) == "-$1,234.50"
    assert ledger.format_amount(Decimal("0")) == "$0.00"
    assert ledger.format_amount(Decimal("987654.321")) == "$987,654.32"


def test_cli_on_fresh_file(tmp_path):
    r = random.Random(99)
    rows, totals = [], {}
    for i in range(200):
        acct = r.choice(["bank", "cash", "fees", "travel"])
        cents = r.randint(-300000, 300000)
        amt = Decimal(cents) / 100
        totals[acct] = totals.get(acct, Decimal(0)) + amt
        text = f"{abs(amt):,.2f}"
        text = f"({text})" if amt < 0 and i % 2 else (f"-{text}" if amt < 0 else text)
        rows.append(f'2024-{1 + i % 12:02d}-{1 + i % 28:02d},{acct},"{text}",row {i}\n')
    f = tmp_path / "t.csv"
    f.write_text("date,account,amount,memo\n" + "".join(rows))
    res = subprocess.run(["python3", "-m", "ledger", "balances", str(f)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr

    def fmt(v):
        return f"{'-' if v < 0 else ''}${abs(v):,.2f}"

    expected = "".join(f"{a}\t{fmt(totals[a])}\n" for a in sorted(totals))
    assert res.stdout == expected


def test_existing_tests_unchanged_and_passing():
    basic = ROOT / "tests" / "test_basic.py"
    assert hashlib.sha256(basic.read_bytes()).hexdigest() == BASIC_SHA256, "tests/test_basic.py was modified"
    res = subprocess.run(["python3", "-m", "unittest", "discover", "-s", "tests"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr

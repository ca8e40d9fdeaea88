import datetime as dt
import hashlib
import random
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from t1check import agent_module

ROOT = Path("/app/ledger")
BASIC_SHA256 = "6335126fe841d8762e156be574e5360f9643eb468d0bce95bddf3b595fdae052"


def tagged(ledger, name, *args):
    """``ledger.<name>(*args)`` in the agent's process, Decimals in and out as ["Decimal", text] (JSON has none)."""
    from decimal import Decimal

    r = getattr(ledger, name)(*[Decimal(a[1]) if isinstance(a, list) else a for a in args])
    return ["Decimal", str(r)] if isinstance(r, Decimal) else r


def D(text):
    return ["Decimal", text]


def is_dec(v):
    return isinstance(v, list) and len(v) == 2 and v[0] == "Decimal"


def dec(v):
    """A Decimal the agent's code returned as Decimal again; anything else unchanged."""
    return Decimal(v[1]) if is_dec(v) else v


@pytest.fixture
def ledger():
    """The agent's ``ledger`` package, imported in a child process (t1check), never in the check's."""
    with agent_module("ledger", sys_path=[str(ROOT)]) as m:
        yield m


def test_parse_thousands_and_parentheses(ledger):
    assert dec(ledger.run(tagged, "parse_amount", "1,234.50")) == Decimal("1234.50")
    assert dec(ledger.run(tagged, "parse_amount", " (1,000.25) ")) == Decimal("-1000.25")
    assert dec(ledger.run(tagged, "parse_amount", "12,345,678")) == Decimal("12345678")


def exact_decimals(ledger):
    import datetime as dt
    from decimal import Decimal

    def tag(v):
        return ["Decimal", str(v)] if isinstance(v, Decimal) else v

    a = ledger.parse_amount("0.1")
    led = ledger.Ledger()
    for s in ["0.10", "0.20", "0.05", "(0.05)"]:
        led.add(ledger.Transaction(dt.date(2024, 3, 1), "cash", ledger.parse_amount(s)))
    return [tag(a), tag(led.balance("cash")), tag(led.balance("no-such-account"))]


def test_amounts_are_exact_decimals(ledger):
    a, bal, empty = ledger.run(exact_decimals)
    assert is_dec(a) and dec(a) == Decimal("0.1")
    assert is_dec(bal) and dec(bal) == Decimal("0.30")
    assert is_dec(empty) and dec(empty) == 0


def separate_state(ledger):
    import datetime as dt
    from decimal import Decimal

    def T(date, account, amount):
        return ledger.Transaction(dt.date.fromisoformat(date), account, Decimal(amount))

    def tag(v):
        return ["Decimal", str(v)] if isinstance(v, Decimal) else v

    a = ledger.Ledger()
    a.add(T("2024-01-01", "x", "1"))
    b = ledger.Ledger()
    seen = [bool(b.transactions == []), tag(b.balance("x"))]
    seed = [T("2024-01-01", "y", "2")]
    c = ledger.Ledger(seed)
    c.add(T("2024-01-02", "y", "3"))
    return seen + [tag(c.balance("y"))]


def test_ledgers_do_not_share_state(ledger):
    b_empty, b_x, c_y = ledger.run(separate_state)
    assert b_empty and dec(b_x) == 0
    assert dec(c_y) == 5


def between_feb(ledger):
    import datetime as dt
    from decimal import Decimal

    led = ledger.Ledger()
    for d in ["2024-01-31", "2024-02-01", "2024-02-15", "2024-02-29", "2024-03-01"]:
        led.add(ledger.Transaction(dt.date.fromisoformat(d), "a", Decimal("1")))
    return [t.date.isoformat() for t in led.between(dt.date(2024, 2, 1), dt.date(2024, 2, 29))]


def test_between_is_inclusive(ledger):
    assert ledger.run(between_feb) == ["2024-02-01", "2024-02-15", "2024-02-29"]


def monthly_food(ledger):
    import datetime as dt
    from decimal import Decimal

    led = ledger.Ledger()
    for d, amt in [("2024-12-05", "5"), ("2023-12-24", "10"), ("2024-01-02", "2.5"),
                   ("2023-12-01", "(1)"), ("2024-12-31", "0.25")]:
        led.add(ledger.Transaction(dt.date.fromisoformat(d), "food", ledger.parse_amount(amt)))
    led.add(ledger.Transaction(dt.date.fromisoformat("2024-01-03"), "rent", Decimal("100")))
    totals = led.monthly_totals("food")
    return [[k, ["Decimal", str(v)] if isinstance(v, Decimal) else v] for k, v in totals.items()]


def test_monthly_totals_keyed_by_year_month(ledger):
    totals = [(k, dec(v)) for k, v in ledger.run(monthly_food)]
    assert totals == [("2023-12", Decimal("9")), ("2024-01", Decimal("2.5")), ("2024-12", Decimal("5.25"))]


def test_format_negative_amounts(ledger):
    assert ledger.run(tagged, "format_amount", D("-5")) == "-$5.00"
    assert ledger.run(tagged, "format_amount", D("-1234.5")) == "-$1,234.50"
    assert ledger.run(tagged, "format_amount", D("0")) == "$0.00"
    assert ledger.run(tagged, "format_amount", D("987654.321")) == "$987,654.32"


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

import hashlib
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from t1check import agent_module

DATA_SHA = "3e86c3fb871d80c5fc7a7850729cb490304ea6b462235008bd4126bc8bbf13de"
VISIBLE_SHA = "fc33e0926de774d798fa051117bd8c0654b88f6b5ebfc6372437adf8193a804e"


PACKAGE = ["inventory.money", "inventory.stock", "inventory.csvio", "inventory.report"]


def inventory():
    """The agent's package, all four modules freshly imported in a child process (t1check), never in the check's:
    calls and drivers see them as ``money``, ``stock``, ``csvio`` and ``report``."""
    return agent_module(PACKAGE, sys_path=["/app"])


def money(pkg, name, *args):
    """``money.<name>(*args)`` in the agent's process, Decimals in and out as ["Decimal", text] (JSON has none)."""
    from decimal import Decimal

    r = getattr(pkg.money, name)(*[Decimal(a[1]) if isinstance(a, list) else a for a in args])
    return ["Decimal", str(r)] if isinstance(r, Decimal) else r


def D(text):
    return ["Decimal", text]


def dec(v):
    """A Decimal the agent's code returned as Decimal again; anything else unchanged."""
    return Decimal(v[1]) if isinstance(v, list) and len(v) == 2 and v[0] == "Decimal" else v


def test_parse_price_thousands():
    with inventory() as m:
        assert dec(m.run(money, "parse_price", "1,234.50")) == Decimal("1234.50")
        assert dec(m.run(money, "parse_price", " $3 ")) == Decimal("3.00")
        assert dec(m.run(money, "parse_price", "12,345,678")) == Decimal("12345678.00")
        assert str(dec(m.run(money, "parse_price", "0.5"))) == "0.50"


def test_parse_price_rejects_junk():
    with inventory() as m:
        for junk in ("abc", "", "1.2.3", "$", "NaN"):
            with pytest.raises(ValueError):
                m.run(money, "parse_price", junk)


def test_line_total_rounds_half_up():
    with inventory() as m:
        assert dec(m.run(money, "line_total", D("0.125"), 1)) == Decimal("0.13")
        assert dec(m.run(money, "line_total", D("2.25"), 1, 50)) == Decimal("1.13")
        assert dec(m.run(money, "line_total", D("10.00"), 3, 10)) == Decimal("27.00")
        assert str(dec(m.run(money, "line_total", D("1.00"), 2))) == "2.00"


def independent_inventories(pkg):
    a = pkg.stock.Inventory()
    a.add("X", 5)
    seen = [pkg.stock.Inventory().items]
    seed = {"Y": 2}
    b = pkg.stock.Inventory(seed)
    b.add("Y", 1)
    return seen + [b.quantity("Y")]


def test_inventories_are_independent():
    with inventory() as m:
        fresh, y = m.run(independent_inventories)
    assert fresh == {}
    assert y == 3


def remove_limits(pkg):
    inv = pkg.stock.Inventory()

    def insufficient(sku, qty):
        try:
            inv.remove(sku, qty)
        except pkg.stock.InsufficientStock:
            return True
        return False

    inv.add("A", 3)
    seen = [insufficient("A", 4), inv.quantity("A")]
    inv.remove("A", 3)
    seen += [inv.quantity("A"), "A" in inv.items]
    return seen + [insufficient("A", 1), insufficient("never", 1)]


def test_remove_limits():
    with inventory() as m:
        over, left, emptied, kept, again, never = m.run(remove_limits)
    assert over, "remove('A', 4) of 3 did not raise InsufficientStock"
    assert left == 3
    assert emptied == 0 and not kept
    assert again, "remove('A', 1) of 0 did not raise InsufficientStock"
    assert never, "remove('never', 1) did not raise InsufficientStock"


def low_stock(pkg):
    inv = pkg.stock.Inventory()
    for sku, q in {"d": 5, "a": 9, "c": 2, "b": 5, "e": 6}.items():
        inv.add(sku, q)
    return [inv.low_stock(5), inv.low_stock(1)]


def test_low_stock_inclusive_sorted():
    with inventory() as m:
        at_5, at_1 = m.run(low_stock)
    assert at_5 == ["c", "b", "d"]
    assert at_1 == []


def load_csv(pkg, path):
    from decimal import Decimal

    inv, prices = pkg.csvio.load(path)
    return [inv.items, {k: ["Decimal", str(v)] if isinstance(v, Decimal) else v for k, v in prices.items()}]


def test_csv_loader(tmp_path):
    p = tmp_path / "s.csv"
    p.write_bytes("\ufeffsku,qty,price\r\nA,2,\"1,000.00\"\r\n\r\nB,1,$5\r\nA,3,2.5\r\n".encode())
    with inventory() as m:
        items, prices = m.run(load_csv, str(p))
    assert items == {"A": 5, "B": 1}
    assert {k: dec(v) for k, v in prices.items()} == {"A": Decimal("2.50"), "B": Decimal("5.00")}


def run_visible_tests(pkg):
    names = [n for n in dir(pkg.test_basic) if n.startswith("test_")]
    for n in names:
        getattr(pkg.test_basic, n)()
    return names


def test_visible_tests_unchanged_and_pass():
    assert hashlib.sha256(Path("/app/tests/test_basic.py").read_bytes()).hexdigest() == VISIBLE_SHA
    with agent_module([*PACKAGE, "/app/tests/test_basic.py"], sys_path=["/app"]) as m:
        names = m.run(run_visible_tests)
    assert len(names) == 2


def expected_report():
    import csv
    from decimal import ROUND_HALF_UP
    data = Path("/app/data/stock.csv").read_bytes()
    assert hashlib.sha256(data).hexdigest() == DATA_SHA
    qty, price = {}, {}
    for row in csv.reader(data.decode("utf-8-sig").splitlines()[1:]):
        if row:
            qty[row[0]] = qty.get(row[0], 0) + int(row[1])
            price[row[0]] = Decimal(row[2].lstrip("$").replace(",", "")).quantize(Decimal("0.01"))
    lines, total = [], Decimal(0)
    for sku in sorted(qty):
        v = (price[sku] * qty[sku]).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        total += v
        lines.append(f"{sku} {qty[sku]} {v:,.2f}")
    return "\n".join(lines + [f"TOTAL {total:,.2f}"]) + "\n"


def test_report_txt():
    assert Path("/app/report.txt").read_text() == expected_report()


def test_report_module_on_fresh_file(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text('sku,qty,price\nZ9,4,"2,000.125"\nA1,1,0.10\n\nZ9,1,$1\n', encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "inventory.report", str(p)], cwd="/app", capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "A1 1 0.10\nZ9 5 5.00\nTOTAL 5.10\n"

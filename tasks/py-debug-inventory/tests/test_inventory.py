import hashlib
import importlib
import importlib.util
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

sys.path.insert(0, "/app")
DATA_SHA = "3e86c3fb871d80c5fc7a7850729cb490304ea6b462235008bd4126bc8bbf13de"
VISIBLE_SHA = "fc33e0926de774d798fa051117bd8c0654b88f6b5ebfc6372437adf8193a804e"


def mods():
    for name in list(sys.modules):
        if name == "inventory" or name.startswith("inventory."):
            del sys.modules[name]
    return (importlib.import_module("inventory.money"), importlib.import_module("inventory.stock"),
            importlib.import_module("inventory.csvio"), importlib.import_module("inventory.report"))


def test_parse_price_thousands():
    money = mods()[0]
    assert money.parse_price("1,234.50") == Decimal("1234.50")
    assert money.parse_price(" $3 ") == Decimal("3.00")
    assert money.parse_price("12,345,678") == Decimal("12345678.00")
    assert str(money.parse_price("0.5")) == "0.50"


def test_parse_price_rejects_junk():
    money = mods()[0]
    for junk in ("abc", "", "1.2.3", "$", "NaN"):
        with pytest.raises(ValueError):
            money.parse_price(junk)


def test_line_total_rounds_half_up():
    money = mods()[0]
    assert money.line_total(Decimal("0.125"), 1) == Decimal("0.13")
    assert money.line_total(Decimal("2.25"), 1, 50) == Decimal("1.13")
    assert money.line_total(Decimal("10.00"), 3, 10) == Decimal("27.00")
    assert str(money.line_total(Decimal("1.00"), 2)) == "2.00"


def test_inventories_are_independent():
    stock = mods()[1]
    a = stock.Inventory()
    a.add("X", 5)
    assert stock.Inventory().items == {}
    seed = {"Y": 2}
    b = stock.Inventory(seed)
    b.add("Y", 1)
    assert b.quantity("Y") == 3


def test_remove_limits():
    stock = mods()[1]
    inv = stock.Inventory()
    inv.add("A", 3)
    with pytest.raises(stock.InsufficientStock):
        inv.remove("A", 4)
    assert inv.quantity("A") == 3
    inv.remove("A", 3)
    assert inv.quantity("A") == 0 and "A" not in inv.items
    with pytest.raises(stock.InsufficientStock):
        inv.remove("A", 1)
    with pytest.raises(stock.InsufficientStock):
        inv.remove("never", 1)


def test_low_stock_inclusive_sorted():
    stock = mods()[1]
    inv = stock.Inventory()
    for sku, q in {"d": 5, "a": 9, "c": 2, "b": 5, "e": 6}.items():
        inv.add(sku, q)
    assert inv.low_stock(5) == ["c", "b", "d"]
    assert inv.low_stock(1) == []


def test_csv_loader(tmp_path):
    csvio = mods()[2]
    p = tmp_path / "s.csv"
    p.write_bytes("\ufeffsku,qty,price\r\nA,2,\"1,000.00\"\r\n\r\nB,1,$5\r\nA,3,2.5\r\n".encode())
    inv, prices = csvio.load(str(p))
    assert inv.items == {"A": 5, "B": 1}
    assert prices == {"A": Decimal("2.50"), "B": Decimal("5.00")}


def test_visible_tests_unchanged_and_pass():
    assert hashlib.sha256(Path("/app/tests/test_basic.py").read_bytes()).hexdigest() == VISIBLE_SHA
    mods()
    spec = importlib.util.spec_from_file_location("visible_tests", "/app/tests/test_basic.py")
    vis = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vis)
    names = [n for n in dir(vis) if n.startswith("test_")]
    assert len(names) == 2
    for n in names:
        getattr(vis, n)()


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

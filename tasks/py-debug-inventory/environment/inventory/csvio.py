"""Load an inventory from CSV: header 'sku,qty,price', standard CSV quoting, UTF-8 (a BOM may be present).

Blank lines are ignored. A sku may appear on several rows: quantities add up, the last price wins.
"""
from .money import parse_price
from .stock import Inventory


def load(path):
    inv, prices = Inventory(), {}
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            sku, qty, price = line.strip().split(",")
            inv.add(sku, int(qty))
            prices[sku] = parse_price(price)
    return inv, prices

from decimal import Decimal

from inventory.money import parse_price
from inventory.stock import Inventory


def test_parse_simple():
    assert parse_price("7.5") == Decimal("7.50")


def test_add_and_quantity():
    inv = Inventory()
    inv.add("A", 3)
    assert inv.quantity("A") == 3

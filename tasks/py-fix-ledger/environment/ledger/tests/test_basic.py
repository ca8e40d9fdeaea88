import datetime as dt
import unittest
from decimal import Decimal

from ledger import Ledger, Transaction, format_amount, parse_amount


class BasicTests(unittest.TestCase):
    def test_parse_simple(self):
        self.assertEqual(parse_amount("12"), 12)
        self.assertEqual(parse_amount("(4)"), -4)

    def test_format_positive(self):
        self.assertEqual(format_amount(Decimal("1234.5")), "$1,234.50")

    def test_balance(self):
        led = Ledger([])
        led.add(Transaction(dt.date(2024, 1, 2), "cash", Decimal("10")))
        led.add(Transaction(dt.date(2024, 1, 3), "cash", Decimal("-4")))
        self.assertEqual(led.balance("cash"), 6)


if __name__ == "__main__":
    unittest.main()

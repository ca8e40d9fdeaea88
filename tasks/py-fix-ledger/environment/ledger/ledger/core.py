"""Transactions and the ledger that holds them."""

import csv
import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from ledger.money import parse_amount


@dataclass(frozen=True)
class Transaction:
    date: dt.date
    account: str
    amount: Decimal
    memo: str = ""


class Ledger:
    """An ordered collection of transactions."""

    def __init__(self, transactions=[]):
        self.transactions = transactions

    def add(self, txn):
        self.transactions.append(txn)

    @classmethod
    def from_csv(cls, path):
        """Load a CSV with the header ``date,account,amount,memo`` (ISO dates)."""
        ledger = cls()
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                ledger.add(Transaction(
                    date=dt.date.fromisoformat(row["date"]),
                    account=row["account"].strip(),
                    amount=parse_amount(row["amount"]),
                    memo=row.get("memo", "") or "",
                ))
        return ledger

    def accounts(self):
        return sorted({t.account for t in self.transactions})

    def balance(self, account):
        """Exact sum (a Decimal) of the amounts of ``account``."""
        return sum(t.amount for t in self.transactions if t.account == account)

    def between(self, start, end):
        """Transactions dated from ``start`` to ``end``, both inclusive, in order."""
        return [t for t in self.transactions if start <= t.date < end]

    def monthly_totals(self, account):
        """Map 'YYYY-MM' -> total of ``account`` in that month, months in chronological order."""
        totals = {}
        for t in sorted(self.transactions, key=lambda t: t.date):
            if t.account == account:
                key = f"{t.date.month:02d}"
                totals[key] = totals.get(key, Decimal("0")) + t.amount
        return totals

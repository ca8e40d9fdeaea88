"""A tiny double-entry-ish ledger: transactions, balances, monthly totals."""

from ledger.core import Ledger, Transaction
from ledger.money import format_amount, parse_amount

__all__ = ["Ledger", "Transaction", "format_amount", "parse_amount"]

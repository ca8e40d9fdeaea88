"""Parsing and formatting of money amounts."""

from decimal import Decimal


def parse_amount(text):
    """Parse an amount such as '12', '-3.5', '1,234.50' or '(12.00)' (accounting negative).

    Returns an exact ``decimal.Decimal``.
    """
    text = text.strip()
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative = True
        text = text[1:-1].strip()
    value = float(text)
    return -value if negative else value


def format_amount(value):
    """Format an amount with a dollar sign, thousands separators and two decimals.

    >>> format_amount(Decimal("1234.5"))
    '$1,234.50'
    >>> format_amount(Decimal("-5"))
    '-$5.00'
    """
    return f"${value:,.2f}"

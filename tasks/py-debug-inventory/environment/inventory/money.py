"""Money helpers. All amounts are Decimal with two places (cents)."""
from decimal import Decimal

CENT = Decimal("0.01")


def parse_price(text):
    """Parse a price such as '1,234.50', '$3' or ' 7.5 ' into a Decimal with two places.

    ',' is a thousands separator. Raises ValueError for anything that is not a number.
    """
    t = text.strip().lstrip("$").replace(",", ".")
    return Decimal(t).quantize(CENT)


def line_total(price, qty, discount_pct=0):
    """price * qty minus discount_pct percent, rounded to cents with halves rounded up (away from zero)."""
    return round(price * qty * (1 - Decimal(discount_pct) / 100), 2)


def fmt(amount):
    """'1,234.50' style."""
    return f"{amount:,.2f}"

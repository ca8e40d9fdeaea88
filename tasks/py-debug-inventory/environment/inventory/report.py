"""python3 -m inventory.report FILE.csv: one line per sku, 'SKU QTY VALUE', sorted by sku, then 'TOTAL VALUE'."""
import sys

from .csvio import load
from .money import fmt, line_total


def render(inv, prices):
    lines, total = [], 0
    for sku in sorted(inv.items):
        value = line_total(prices[sku], inv.items[sku])
        total += value
        lines.append(f"{sku} {inv.items[sku]} {fmt(value)}")
    lines.append(f"TOTAL {fmt(total)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    inv, prices = load(sys.argv[1])
    sys.stdout.write(render(inv, prices))

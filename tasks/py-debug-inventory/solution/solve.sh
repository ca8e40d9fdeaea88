#!/bin/bash
set -euo pipefail
cd /app
python3 -m inventory.report data/stock.csv || true
head -c 20 data/stock.csv | od -c | head -n 2
# money.py: thousands separators, ValueError on junk, half-up rounding
python3 - <<'PY'
import re
p = "inventory/money.py"
s = open(p).read()
s = s.replace('from decimal import Decimal\n', 'from decimal import ROUND_HALF_UP, Decimal, InvalidOperation\n')
s = s.replace('''    t = text.strip().lstrip("$").replace(",", ".")
    return Decimal(t).quantize(CENT)''', '''    t = text.strip().lstrip("$").replace(",", "")
    try:
        d = Decimal(t)
    except InvalidOperation:
        raise ValueError(f"not a price: {text!r}") from None
    if not d.is_finite():
        raise ValueError(f"not a price: {text!r}")
    return d.quantize(CENT, rounding=ROUND_HALF_UP)''')
s = s.replace('''    return round(price * qty * (1 - Decimal(discount_pct) / 100), 2)''',
              '''    return (price * qty * (1 - Decimal(discount_pct) / 100)).quantize(CENT, rounding=ROUND_HALF_UP)''')
open(p, "w").write(s)
PY
# stock.py: mutable default, off-by-one, zero quantities, low_stock
sed -i 's/    def __init__(self, items={}):/    def __init__(self, items=None):/' inventory/stock.py
sed -i 's/        self.items = items  # sku/        self.items = dict(items or {})  # sku/' inventory/stock.py
sed -i 's/        if qty > have + 1:/        if qty > have:/' inventory/stock.py
python3 - <<'PY'
p = "inventory/stock.py"
s = open(p).read()
s = s.replace('''        self.items[sku] = have - qty
''', '''        if have == qty:
            del self.items[sku]
        else:
            self.items[sku] = have - qty
''')
s = s.replace('''        return sorted(s for s, q in self.items.items() if q < threshold)''',
              '''        return [s for s, q in sorted(self.items.items(), key=lambda kv: (kv[1], kv[0])) if q <= threshold]''')
open(p, "w").write(s)
PY
# csvio.py: real CSV parsing, BOM, blank lines
cat > inventory/csvio.py <<'PY'
"""Load an inventory from CSV: header 'sku,qty,price', standard CSV quoting, UTF-8 (a BOM may be present).

Blank lines are ignored. A sku may appear on several rows: quantities add up, the last price wins.
"""
import csv

from .money import parse_price
from .stock import Inventory


def load(path):
    inv, prices = Inventory(), {}
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = csv.reader(f)
        next(rows)
        for row in rows:
            if not row or not "".join(row).strip():
                continue
            sku, qty, price = row
            inv.add(sku, int(qty))
            prices[sku] = parse_price(price)
    return inv, prices
PY
# report.py: Decimal total
sed -i 's/    lines, total = \[\], 0$/    lines, total = [], Decimal(0)/' inventory/report.py
sed -i 's/^import sys$/import sys\nfrom decimal import Decimal/' inventory/report.py
python3 -c 'from inventory.money import parse_price; print(parse_price("1,234.50"))'
python3 -c 'from inventory.stock import Inventory; a = Inventory(); a.add("x", 1); print(Inventory().items)'
python3 -m inventory.report data/stock.csv > report.txt
cat report.txt

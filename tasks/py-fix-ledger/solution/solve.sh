#!/bin/bash
set -euo pipefail
cd /app/ledger
python3 -m unittest discover -s tests
python3 -m ledger balances transactions.csv || true
python3 - <<'PY'
from pathlib import Path

def patch(path, old, new):
    p = Path(path)
    src = p.read_text()
    assert src.count(old) == 1, (path, old)
    p.write_text(src.replace(old, new))

# 1+2: thousands separators and exact decimals
patch("ledger/money.py", "    value = float(text)\n",
      "    value = Decimal(text.replace(\",\", \"\"))\n")
# 6: sign before the dollar sign
patch("ledger/money.py", '    return f"${value:,.2f}"\n',
      '    sign = "-" if value < 0 else ""\n    return f"{sign}${abs(value):,.2f}"\n')
# 3: mutable default argument
patch("ledger/core.py", "    def __init__(self, transactions=[]):\n        self.transactions = transactions\n",
      "    def __init__(self, transactions=None):\n"
      "        self.transactions = list(transactions) if transactions is not None else []\n")
# 2: empty sum must be a Decimal too
patch("ledger/core.py", "        return sum(t.amount for t in self.transactions if t.account == account)\n",
      "        return sum((t.amount for t in self.transactions if t.account == account), Decimal(\"0\"))\n")
# 4: inclusive end
patch("ledger/core.py", "start <= t.date < end", "start <= t.date <= end")
# 5: year and month
patch("ledger/core.py", 'key = f"{t.date.month:02d}"', 'key = f"{t.date.year:04d}-{t.date.month:02d}"')
PY
python3 -m unittest discover -s tests
python3 -m doctest -v ledger/money.py | tail -1
python3 -m ledger balances transactions.csv

#!/bin/bash
set -euo pipefail
cd /app
python3 -c 'import roman; print(roman.to_roman(4), roman.to_roman(400), roman.to_roman(900))' || true
cat > roman.py <<'PY'
"""Roman numerals for 1..3999 (standard subtractive form: IV, IX, XL, XC, CD, CM)."""

NUMERALS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
            (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(n):
    """Return the Roman numeral for n; ValueError unless 1 <= n <= 3999."""
    if type(n) is not int or not 1 <= n <= 3999:
        raise ValueError(f"out of range: {n!r}")
    out = []
    for value, sym in NUMERALS:
        while n >= value:
            out.append(sym)
            n -= value
    return "".join(out)


_TABLE = {to_roman(i): i for i in range(1, 4000)}


def from_roman(s):
    """Parse a Roman numeral; ValueError if it is not the canonical form of 1..3999."""
    try:
        return _TABLE[s]
    except (KeyError, TypeError):
        raise ValueError(f"not a canonical Roman numeral: {s!r}") from None
PY
python3 -c 'import roman; assert all(roman.from_roman(roman.to_roman(i)) == i for i in range(1, 4000)); print("ok")'

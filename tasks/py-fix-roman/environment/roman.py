"""Roman numerals for 1..3999 (standard subtractive form: IV, IX, XL, XC, CD, CM)."""

NUMERALS = [(1000, "M"), (500, "D"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
            (10, "X"), (9, "IX"), (5, "V"), (1, "I")]
VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(n):
    """Return the Roman numeral for n; ValueError unless 1 <= n <= 3999."""
    if not 0 <= n <= 3999:
        raise ValueError(f"out of range: {n}")
    out = []
    for value, sym in NUMERALS:
        while n > value:
            out.append(sym)
            n -= value
    return "".join(out)


def from_roman(s):
    """Parse a Roman numeral; ValueError if it is not the canonical form of 1..3999."""
    total = 0
    for i, ch in enumerate(s):
        v = VALUES[ch]
        if i + 1 < len(s) and VALUES[s[i + 1]] > v:
            total -= v
        else:
            total += v
    return total

import importlib.util
import sys

import pytest


def load():
    spec = importlib.util.spec_from_file_location("roman_under_test", "/app/roman.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ref(n):
    out = []
    for v, s in [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                 (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]:
        while n >= v:
            out.append(s)
            n -= v
    return "".join(out)


def test_to_roman_all_values():
    m = load()
    bad = [n for n in range(1, 4000) if m.to_roman(n) != ref(n)]
    assert not bad, f"{len(bad)} wrong, e.g. {bad[:5]}"


def test_to_roman_rejects_invalid():
    m = load()
    for v in (0, -1, 4000, 10**6, 2.5, "7", True, None):
        with pytest.raises(ValueError):
            m.to_roman(v)


def test_from_roman_round_trip():
    m = load()
    bad = [n for n in range(1, 4000) if m.from_roman(ref(n)) != n]
    assert not bad, f"{len(bad)} wrong, e.g. {bad[:5]}"


def test_from_roman_rejects_non_canonical():
    m = load()
    for s in ("", "IIII", "IC", "VX", "MMMM", "mcm", "XIIV", "A", "IIX", "VV", "LL", "DD", "CMC", "XM", " X"):
        with pytest.raises(ValueError):
            m.from_roman(s)

import pytest
from t1check import agent_module

ROMAN = "/app/roman.py"  # the agent's module: run in a child process by t1check, never imported here


def ref(n):
    out = []
    for v, s in [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                 (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]:
        while n >= v:
            out.append(s)
            n -= v
    return "".join(out)


def wrong(got, inputs, want):
    assert isinstance(got, list) and len(got) == len(inputs), f"expected {len(inputs)} results, got {got!r:.200}"
    return [x for x, g, w in zip(inputs, got, want) if g != w]


def test_to_roman_all_values():
    ns = list(range(1, 4000))
    with agent_module(ROMAN) as m:
        bad = wrong(m.map("to_roman", ns), ns, [ref(n) for n in ns])
    assert not bad, f"{len(bad)} wrong, e.g. {bad[:5]}"


def test_to_roman_rejects_invalid():
    with agent_module(ROMAN) as m:
        for v in (0, -1, 4000, 10**6, 2.5, "7", True, None):
            with pytest.raises(ValueError):
                m.to_roman(v)


def test_from_roman_round_trip():
    ns = list(range(1, 4000))
    with agent_module(ROMAN) as m:
        bad = wrong(m.map("from_roman", [ref(n) for n in ns]), ns, ns)
    assert not bad, f"{len(bad)} wrong, e.g. {bad[:5]}"


def test_from_roman_rejects_non_canonical():
    with agent_module(ROMAN) as m:
        for s in ("", "IIII", "IC", "VX", "MMMM", "mcm", "XIIV", "A", "IIX", "VV", "LL", "DD", "CMC", "XM", " X"):
            with pytest.raises(ValueError):
                m.from_roman(s)

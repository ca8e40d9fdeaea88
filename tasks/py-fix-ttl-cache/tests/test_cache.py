import importlib.util

import pytest


def load():
    spec = importlib.util.spec_from_file_location("ttlcache_under_test", "/app/ttlcache.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def mod():
    return load()


def test_evicts_least_recently_set(mod):
    c = mod.TTLCache(maxsize=2, ttl=100, clock=Clock())
    c.set("a", 1)
    c.set("b", 2)
    c.set("c", 3)
    assert c.get("a") is None and c.get("b") == 2 and c.get("c") == 3


def test_get_refreshes_recency_and_reset_replaces(mod):
    c = mod.TTLCache(maxsize=2, ttl=100, clock=Clock())
    c.set("a", 1)
    c.set("b", 2)
    assert c.get("a") == 1
    c.set("c", 3)
    assert "b" not in c and c.get("a") == 1
    c.set("a", 10)
    c.set("d", 4)
    assert c.get("a") == 10 and c.get("c") is None and len(c) == 2


def test_ttl_boundary_uses_injected_clock(mod):
    clk = Clock()
    c = mod.TTLCache(maxsize=5, ttl=10, clock=clk)
    c.set("k", "v")
    clk.t += 9.999
    assert c.get("k") == "v" and "k" in c
    clk.t += 0.001
    assert c.get("k") is None and c.get("k", "dflt") == "dflt" and "k" not in c


def test_len_and_contains_ignore_expired(mod):
    clk = Clock()
    c = mod.TTLCache(maxsize=5, ttl=10, clock=clk)
    c.set("x", 1)
    clk.t += 5
    c.set("y", 2)
    assert len(c) == 2
    clk.t += 5
    assert len(c) == 1 and "x" not in c and "y" in c


def test_expired_dropped_before_lru_eviction(mod):
    clk = Clock()
    c = mod.TTLCache(maxsize=2, ttl=10, clock=clk)
    c.set("old", 1)
    clk.t += 6
    c.set("fresh", 2)
    clk.t += 5  # "old" expired, "fresh" still valid
    c.get("fresh")
    c.set("new", 3)
    assert c.get("fresh") == 2 and c.get("new") == 3


def test_cached_keys_include_kwargs(mod):
    c = mod.TTLCache(maxsize=10, ttl=100, clock=Clock())
    calls = []

    @mod.cached(c)
    def f(a, b=0, *, scale=1):
        calls.append((a, b, scale))
        return (a + b) * scale

    assert f(1, b=2) == 3 and f(1, b=3) == 4 and f(1, b=2) == 3
    assert f(2, b=1, scale=3) == 9 and f(2, scale=3, b=1) == 9
    assert calls == [(1, 2, 1), (1, 3, 1), (2, 1, 3)]


def test_cached_none_results(mod):
    c = mod.TTLCache(maxsize=10, ttl=100, clock=Clock())
    calls = []

    @mod.cached(c)
    def g(x):
        calls.append(x)
        return None

    assert g(1) is None and g(1) is None
    assert calls == [1]

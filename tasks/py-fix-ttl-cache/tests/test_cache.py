"""The agent's /app/ttlcache.py runs in a child process (t1check): each check's driver below runs there with
the module as its first argument, drives a cache on a fake clock, and returns what it observed; the check
asserts on that here."""

from t1check import agent_module

TTLCACHE = "/app/ttlcache.py"


def check(driver):
    with agent_module(TTLCACHE) as m:
        return m.run(driver)


def evicts_least_recently_set(ttlcache):
    c = ttlcache.TTLCache(maxsize=2, ttl=100, clock=lambda: 1000.0)
    c.set("a", 1)
    c.set("b", 2)
    c.set("c", 3)
    return [c.get("a"), c.get("b"), c.get("c")]


def test_evicts_least_recently_set():
    assert check(evicts_least_recently_set) == [None, 2, 3]


def get_refreshes_recency_and_reset_replaces(ttlcache):
    c = ttlcache.TTLCache(maxsize=2, ttl=100, clock=lambda: 1000.0)
    c.set("a", 1)
    c.set("b", 2)
    seen = [c.get("a")]
    c.set("c", 3)
    seen += ["b" in c, c.get("a")]
    c.set("a", 10)
    c.set("d", 4)
    return seen + [c.get("a"), c.get("c"), len(c)]


def test_get_refreshes_recency_and_reset_replaces():
    assert check(get_refreshes_recency_and_reset_replaces) == [1, False, 1, 10, None, 2]


def ttl_boundary_uses_injected_clock(ttlcache):
    now = [1000.0]
    c = ttlcache.TTLCache(maxsize=5, ttl=10, clock=lambda: now[0])
    c.set("k", "v")
    now[0] += 9.999
    seen = [c.get("k"), "k" in c]
    now[0] += 0.001
    return seen + [c.get("k"), c.get("k", "dflt"), "k" in c]


def test_ttl_boundary_uses_injected_clock():
    assert check(ttl_boundary_uses_injected_clock) == ["v", True, None, "dflt", False]


def len_and_contains_ignore_expired(ttlcache):
    now = [1000.0]
    c = ttlcache.TTLCache(maxsize=5, ttl=10, clock=lambda: now[0])
    c.set("x", 1)
    now[0] += 5
    c.set("y", 2)
    seen = [len(c)]
    now[0] += 5
    return seen + [len(c), "x" in c, "y" in c]


def test_len_and_contains_ignore_expired():
    assert check(len_and_contains_ignore_expired) == [2, 1, False, True]


def expired_dropped_before_lru_eviction(ttlcache):
    now = [1000.0]
    c = ttlcache.TTLCache(maxsize=2, ttl=10, clock=lambda: now[0])
    c.set("old", 1)
    now[0] += 6
    c.set("fresh", 2)
    now[0] += 5  # "old" expired, "fresh" still valid
    c.get("fresh")
    c.set("new", 3)
    return [c.get("fresh"), c.get("new")]


def test_expired_dropped_before_lru_eviction():
    assert check(expired_dropped_before_lru_eviction) == [2, 3]


def cached_keys_include_kwargs(ttlcache):
    c = ttlcache.TTLCache(maxsize=10, ttl=100, clock=lambda: 1000.0)
    calls = []

    @ttlcache.cached(c)
    def f(a, b=0, *, scale=1):
        calls.append((a, b, scale))
        return (a + b) * scale

    results = [f(1, b=2), f(1, b=3), f(1, b=2), f(2, b=1, scale=3), f(2, scale=3, b=1)]
    return {"results": results, "calls": calls}


def test_cached_keys_include_kwargs():
    assert check(cached_keys_include_kwargs) == {"results": [3, 4, 3, 9, 9], "calls": [[1, 2, 1], [1, 3, 1], [2, 1, 3]]}


def cached_none_results(ttlcache):
    c = ttlcache.TTLCache(maxsize=10, ttl=100, clock=lambda: 1000.0)
    calls = []

    @ttlcache.cached(c)
    def g(x):
        calls.append(x)
        return None

    return {"results": [g(1), g(1)], "calls": calls}


def test_cached_none_results():
    assert check(cached_none_results) == {"results": [None, None], "calls": [1]}

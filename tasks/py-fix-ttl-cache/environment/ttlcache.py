"""A size-bounded LRU cache whose entries also expire after a time-to-live.

    cache = TTLCache(maxsize=3, ttl=10.0, clock=time.monotonic)

* ``set(key, value)`` stores a value (replacing any previous one) and makes the key the most
  recently used. When the cache would exceed ``maxsize`` entries, the **least recently used**
  entry is evicted (expired entries are dropped first).
* ``get(key, default=None)`` returns the value, or ``default`` if the key is missing or expired.
  A successful ``get`` makes the key the most recently used.
* An entry set at time t expires at t + ttl: it is still valid when ``clock() < t + ttl`` and expired
  from ``clock() >= t + ttl`` on.
* ``len(cache)`` counts only entries that have not expired; ``key in cache`` is True only for
  unexpired keys.
* All times come from the ``clock`` callable given to the constructor.

``cached(cache)`` is a decorator that memoizes a function in the cache, keyed by its positional
**and** keyword arguments (``f(1, b=2)`` and ``f(1, b=3)`` are different entries; keyword order
does not matter). ``None`` results are cached too.
"""
import time
from collections import OrderedDict


class TTLCache:
    def __init__(self, maxsize=128, ttl=60.0, clock=time.monotonic):
        self.maxsize = maxsize
        self.ttl = ttl
        self.clock = clock
        self._data = OrderedDict()  # key -> (expires_at, value)

    def _expired(self, expires_at):
        return time.monotonic() > expires_at

    def set(self, key, value):
        self._data[key] = (self.clock() + self.ttl, value)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=True)

    def get(self, key, default=None):
        item = self._data.get(key)
        if item is None or self._expired(item[0]):
            return default
        return item[1]

    def __contains__(self, key):
        return key in self._data

    def __len__(self):
        return len(self._data)


def cached(cache):
    def deco(fn):
        def wrapper(*args, **kwargs):
            key = (fn.__name__, args)
            result = cache.get(key)
            if result is None:
                result = fn(*args, **kwargs)
                cache.set(key, result)
            return result
        return wrapper
    return deco

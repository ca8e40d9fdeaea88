#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'PY'
p = "/app/ttlcache.py"
s = open(p).read()
s = s.replace('''    def _expired(self, expires_at):
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
        return len(self._data)''', '''    def _expired(self, expires_at):
        return self.clock() >= expires_at

    def _purge(self):
        for k in [k for k, (exp, _) in self._data.items() if self._expired(exp)]:
            del self._data[k]

    def set(self, key, value):
        self._data.pop(key, None)
        self._data[key] = (self.clock() + self.ttl, value)
        if len(self._data) > self.maxsize:
            self._purge()
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def get(self, key, default=None):
        item = self._data.get(key)
        if item is None or self._expired(item[0]):
            return default
        self._data.move_to_end(key)
        return item[1]

    def __contains__(self, key):
        item = self._data.get(key)
        return item is not None and not self._expired(item[0])

    def __len__(self):
        return sum(1 for exp, _ in self._data.values() if not self._expired(exp))''')
s = s.replace('''            key = (fn.__name__, args)
            result = cache.get(key)
            if result is None:
                result = fn(*args, **kwargs)
                cache.set(key, result)
            return result''', '''            key = (fn.__module__, fn.__qualname__, args, tuple(sorted(kwargs.items())))
            missing = object()
            result = cache.get(key, missing)
            if result is missing:
                result = fn(*args, **kwargs)
                cache.set(key, result)
            return result''')
open(p, "w").write(s)
PY
python3 -c '
import ttlcache
t = [0.0]
c = ttlcache.TTLCache(2, 10, clock=lambda: t[0])
c.set("a", 1); c.set("b", 2); c.get("a"); c.set("c", 3)
print(sorted(k for k in "abc" if k in c))'

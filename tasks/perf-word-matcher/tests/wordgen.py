import random


def words(seed, n, alphabet="aeinorst", lo=2, hi=7):
    r = random.Random(seed)
    return ["".join(r.choice(alphabet) for _ in range(r.randint(lo, hi))) for _ in range(n)]


def reference(ws, qs):
    from bisect import bisect_left
    from collections import Counter
    sig = Counter("".join(sorted(w)) for w in ws)
    s = sorted(ws)
    out = []
    for q in qs:
        lo = bisect_left(s, q)
        hi = bisect_left(s, q + "\x7f")
        out.append(f"{q} {sig.get(''.join(sorted(q)), 0)} {hi - lo}\n")
    return "".join(out)

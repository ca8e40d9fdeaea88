#!/bin/bash
set -euo pipefail
cd /app
head -n 3 words.txt queries.txt
python3 matcher.py words.txt queries.txt > /tmp/before.txt
cat > matcher.py <<'PY'
#!/usr/bin/env python3
"""For every query, count the dictionary words that are anagrams of it and that start with it.

usage: python3 matcher.py WORDS_FILE QUERIES_FILE > RESULTS

WORDS_FILE and QUERIES_FILE hold one lowercase word per line (the dictionary may contain
duplicates; each occurrence counts). Output: one line per query, in input order:
    <query> <number of anagram words> <number of words starting with query>

Anagrams are counted with a multiset signature (sorted letters); prefixes with binary search
over the sorted dictionary: O((W + Q) log W) instead of O(W * Q).
"""
import sys
from bisect import bisect_left, bisect_right
from collections import Counter


def main(words_path, queries_path):
    with open(words_path) as f:
        words = [w.strip() for w in f if w.strip()]
    with open(queries_path) as f:
        queries = [q.strip() for q in f if q.strip()]
    signatures = Counter("".join(sorted(w)) for w in words)
    ordered = sorted(words)
    out = []
    for q in queries:
        lo = bisect_left(ordered, q)
        hi = bisect_right(ordered, q + "\U0010ffff")
        out.append(f"{q} {signatures.get(''.join(sorted(q)), 0)} {hi - lo}\n")
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
PY
python3 matcher.py words.txt queries.txt > /tmp/after.txt
cmp /tmp/before.txt /tmp/after.txt && echo identical
python3 -c "
import random
r = random.Random(5)
open('/tmp/w.txt', 'w').write('\n'.join(''.join(r.choice('abcdefgh') for _ in range(r.randint(2, 8))) for _ in range(100000)) + '\n')
open('/tmp/q.txt', 'w').write('\n'.join(''.join(r.choice('abcdefgh') for _ in range(r.randint(1, 6))) for _ in range(20000)) + '\n')
"
time python3 matcher.py /tmp/w.txt /tmp/q.txt | tail -n 2

#!/usr/bin/env python3
"""For every query, count the dictionary words that are anagrams of it and that start with it.

usage: python3 matcher.py WORDS_FILE QUERIES_FILE > RESULTS

WORDS_FILE and QUERIES_FILE hold one lowercase word per line (the dictionary may contain
duplicates; each occurrence counts). Output: one line per query, in input order:
    <query> <number of anagram words> <number of words starting with query>
"""
import sys


def is_anagram(a, b):
    if len(a) != len(b):
        return False
    remaining = list(b)
    for ch in a:
        if ch in remaining:
            remaining.remove(ch)
        else:
            return False
    return True


def main(words_path, queries_path):
    words = [w.strip() for w in open(words_path) if w.strip()]
    queries = [q.strip() for q in open(queries_path) if q.strip()]
    for q in queries:
        anagrams = 0
        prefixed = 0
        for w in words:
            if is_anagram(q, w):
                anagrams += 1
            if w[: len(q)] == q:
                prefixed += 1
        print(q, anagrams, prefixed)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

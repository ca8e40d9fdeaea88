"""Decontamination: does another task corpus overlap ours? Word n-gram overlap, pair by pair.

Our side is every discovered seed task plus a sample of family instances (seeds ``0..k-1`` of each
family). The other side is a folder of task folders read in its own layout:

* Terminal-Bench: ``<id>/task.yaml`` with an ``instruction`` field (or older ``descriptions:`` list
  of ``description`` entries), tests in ``<id>/tests/``;
* Harbor and t1: ``<id>/instruction.md``, tests in ``<id>/tests/``.

Texts are normalised (lower case, words of letters and digits, everything else dropped) and cut
into word n-grams (8 by default). Instructions are compared with instructions and tests with tests.
A pair is reported when its **containment** — shared n-grams divided by the n-grams of the smaller
text — reaches the threshold and at least ``min_shared`` n-grams are shared (short boilerplate such
as imports never counts on its own). The Jaccard index is shown alongside.

Example:
    >>> a = ngrams(normalize("Write the word hello into the file out txt and nothing else at all please"), 8)
    >>> b = ngrams(normalize("WRITE the word 'hello' into the file out.txt, and nothing else at all!"), 8)
    >>> round(containment(a, b), 2)
    1.0
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from t1env.families import FAMILIES, materialize
from t1env.registry import discover
from t1env.task import INSTRUCTION_FILE, TASK_FILE, TESTS_DIR

PARTS = ("instruction", "tests")
TEST_SUFFIXES = {".py", ".sh", ".bash", ".txt", ".yaml", ".yml", ".json", ".toml", ".md"}


@dataclass(frozen=True)
class Doc:
    """One text of one task: its instruction or its tests (all test files joined)."""

    task: str
    part: str
    text: str


@dataclass(frozen=True)
class Match:
    ours: str
    theirs: str
    part: str
    shared: int
    containment: float
    jaccard: float


def normalize(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def ngrams(words: list[str], n: int) -> set[str]:
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def containment(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


# -- reading corpora ------------------------------------------------------------------------------
def _tests_text(folder: Path) -> str:
    tests = folder / TESTS_DIR
    if not tests.is_dir():
        return ""
    parts = []
    for p in sorted(tests.rglob("*")):
        if p.is_file() and p.suffix in TEST_SUFFIXES and p.stat().st_size < 2_000_000:
            parts.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def _yaml_instruction(text: str) -> str:
    """The ``instruction`` of a Terminal-Bench ``task.yaml`` (or its ``description`` entries)."""
    try:
        import yaml

        data = yaml.safe_load(text)
        if isinstance(data, dict):
            if isinstance(data.get("instruction"), str):
                return data["instruction"]
            descs = data.get("descriptions") or []
            return "\n".join(d.get("description", "") for d in descs if isinstance(d, dict))
        return ""
    except ImportError:
        return _yaml_fields_fallback(text)
    except Exception:  # malformed YAML: take what the plain reader finds
        return _yaml_fields_fallback(text)


def _yaml_fields_fallback(text: str) -> str:
    """Block scalars and one-line strings of ``instruction:``/``description:`` keys, without PyYAML."""
    lines = text.splitlines()
    out: list[str] = []
    key = re.compile(r"^(\s*)(?:-\s+)?(instruction|description):\s*(.*)$")
    i = 0
    while i < len(lines):
        m = key.match(lines[i])
        i += 1
        if not m:
            continue
        indent, value = len(m.group(1)), m.group(3).strip()
        if value[:1] in ("|", ">"):
            block = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            out.append("\n".join(block))
        elif value:
            out.append(value.strip("'\""))
    return "\n".join(out)


def read_corpus(root: str | Path) -> list[Doc]:
    """Every task folder under ``root`` (Terminal-Bench, Harbor or t1 layout), as instruction and tests docs."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder (give a checkout holding task folders)")
    docs: list[Doc] = []
    stack = [root]
    while stack:
        d = stack.pop()
        instruction = None
        if (d / "task.yaml").is_file():
            instruction = _yaml_instruction((d / "task.yaml").read_text(encoding="utf-8", errors="replace"))
        elif (d / INSTRUCTION_FILE).is_file() and ((d / TESTS_DIR).is_dir() or (d / TASK_FILE).is_file()):
            instruction = (d / INSTRUCTION_FILE).read_text(encoding="utf-8", errors="replace")
        if instruction is not None:
            name = d.relative_to(root).as_posix() if d != root else d.name
            docs.append(Doc(name, "instruction", instruction))
            docs.append(Doc(name, "tests", _tests_text(d)))
            continue  # a task folder: its sub-folders are its own files
        stack.extend(sorted((p for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")), reverse=True))
    return docs


def read_ours(family_seeds: int = 2, task_dirs=None) -> list[Doc]:
    """Our seed tasks (every discovered one) and seeds ``0..family_seeds-1`` of every family."""
    folders = [(tid, p) for tid, p in sorted(discover(task_dirs).items())]
    folders += [(f.instance_id(s), materialize(f.name, s)) for f in FAMILIES.values() for s in range(family_seeds)]
    docs = []
    for tid, p in folders:
        docs.append(Doc(tid, "instruction", (p / INSTRUCTION_FILE).read_text(encoding="utf-8", errors="replace")))
        docs.append(Doc(tid, "tests", _tests_text(p)))
    return docs


# -- comparing ------------------------------------------------------------------------------------
def compare(
    ours: list[Doc], theirs: list[Doc], n: int = 8, threshold: float = 0.3, min_shared: int = 10
) -> list[Match]:
    """Every (ours, theirs) pair of the same part whose overlap reaches the threshold, worst first."""
    index: dict[str, list[int]] = {}
    their_grams = []
    for j, doc in enumerate(theirs):
        g = ngrams(normalize(doc.text), n)
        their_grams.append(g)
        for gram in g:
            index.setdefault(gram, []).append(j)
    matches = []
    for doc in ours:
        mine = ngrams(normalize(doc.text), n)
        shared: Counter[int] = Counter()
        for gram in mine:
            for j in index.get(gram, ()):
                if theirs[j].part == doc.part:
                    shared[j] += 1
        for j, k in shared.items():
            other = their_grams[j]
            c = k / min(len(mine), len(other))
            if k >= min_shared and c >= threshold:
                matches.append(Match(doc.task, theirs[j].task, doc.part, k, c, k / len(mine | other)))
    return sorted(matches, key=lambda m: (-m.containment, m.ours, m.theirs, m.part))

"""Task families: generators that synthesize unlimited task instances from a seed.

A family turns a seed into an ordinary task package (``task.toml``, ``instruction.md``,
``environment/``, ``solution/solve.sh``, ``tests/``), so everything downstream — the sandbox, the
verifier, ``t1env validate`` — is reused unchanged. An instance is named ``FAMILY@SEED``
(``logs@17``); its package is written once into a cache folder keyed by a hash of the
generator's source, so editing a generator never serves stale instances.

Deterministic: the same seed gives a byte-identical package (the generator draws only from
``random.Random(f"{name}@{seed}")``); different seeds give different formats, values,
questions and injected faults.

Layout: :mod:`t1env.families.base` holds :class:`Family`, :class:`Instance` and the seed splits; each
family is a module here that subclasses ``Family``; this package imports every family module and keeps
the table of them (:data:`FAMILIES`), so imports go one way (package -> family modules -> base).

Splits: seed ``s`` is in ``test`` when ``s % 5 == 0`` and in ``train`` otherwise, so the two seed
sets are disjoint and stable. :func:`split_seed` maps the k-th draw of a split to its seed.

Example:
    >>> from t1env.families import FAMILIES, split_seed, split_of_seed
    >>> len(FAMILIES) >= 8
    True
    >>> [split_seed("test", k) for k in range(3)], [split_seed("train", k) for k in range(5)]
    ([0, 5, 10], [1, 2, 3, 4, 6])
    >>> split_of_seed(10), split_of_seed(11)
    ('test', 'train')
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from t1env.families import build, chain, config, csvpipe, filetree, githistory, logs, project, regex, script, sql
from t1env.families.base import (
    CALIBRATION_SEEDS,
    INSTANCE_SEP,
    TEST_EVERY,
    Family,
    Instance,
    split_of_seed,
    split_seed,
)
from t1env.resources import cache_dir
from t1env.task import TaskError

__all__ = [
    "CALIBRATION_SEEDS",
    "FAMILIES",
    "INSTANCE_SEP",
    "TEST_EVERY",
    "Family",
    "Instance",
    "calibration_refs",
    "expand_refs",
    "get_family",
    "materialize",
    "parse_instance_id",
    "split_of_seed",
    "split_seed",
]


# -- the families (an explicit list: one hop from here to each generator) ------------------------
def _all() -> dict[str, Family]:
    fams = [
        logs.LogAnalysis(),
        build.BrokenBuild(),
        githistory.GitCulprit(),
        csvpipe.CsvPipeline(),
        regex.RegexExtract(),
        filetree.FileTree(),
        sql.SqlQuery(),
        config.ConfigRepair(),
        script.ScriptFix(),
        chain.Chain(),
        project.Project(),
    ]
    return {f.name: f for f in fams}


FAMILIES: dict[str, Family] = _all()


def get_family(name: str) -> Family:
    if name not in FAMILIES:
        raise TaskError(f"unknown family {name!r}; known families: {', '.join(sorted(FAMILIES))} (`t1env list`)")
    return FAMILIES[name]


def parse_instance_id(ref: str) -> tuple[str, int] | None:
    """``"logs@17"`` → ``("logs", 17)``; anything else → None."""
    name, sep, seed = str(ref).partition(INSTANCE_SEP)
    if not sep or not (seed.isascii() and seed.isdigit()) or "/" in name:  # "²".isdigit(), but int("²") fails
        return None
    return name, int(seed)


def expand_refs(refs: list[str]) -> list[str]:
    """Task references with each ``FAMILY@SPLIT:N`` replaced by the first N instances of that split.

    Example:
        >>> expand_refs(["hello-file", "chain@train:3", "chain@test:2"])
        ['hello-file', 'chain@1', 'chain@2', 'chain@3', 'chain@0', 'chain@5']
    """
    out = []
    for ref in refs:
        name, sep, rest = str(ref).partition(INSTANCE_SEP)
        split, colon, count = rest.partition(":")
        if not (sep and colon) or "/" in name:
            out.append(ref)
            continue
        if split not in ("train", "test") or not (count.isascii() and count.isdigit()) or int(count) < 1:
            raise TaskError(f"{ref!r}: write FAMILY@train:N or FAMILY@test:N (N >= 1 instances of that split)")
        get_family(name)
        out += [f"{name}{INSTANCE_SEP}{split_seed(split, k)}" for k in range(int(count))]
    return out


def materialize(name: str, seed: int) -> Path:
    """The package folder of ``name@seed``, generated into the cache on first use.

    Safe under concurrency: the package is written into a temporary folder and renamed into place.
    """
    fam = get_family(name)
    parent = cache_dir() / "families" / name / fam.version() / str(seed)
    final = parent / fam.package_id(seed)
    if (final / "task.toml").is_file():
        return final
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".gen-", dir=parent))
    try:
        fam.generate(seed, tmp)
        try:
            os.rename(tmp / fam.package_id(seed), final)
        except OSError:
            if not (final / "task.toml").is_file():  # lost a race to a complete copy: fine
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def calibration_refs() -> list[str]:
    """The fixed family sample that ``t1env validate --all`` and CI calibrate."""
    return [f.instance_id(s) for f in FAMILIES.values() for s in CALIBRATION_SEEDS]

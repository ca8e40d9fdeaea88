"""Task families: generators that synthesize unlimited task instances from a seed.

A family turns a seed into an ordinary task package (``task.toml``, ``instruction.md``,
``environment/``, ``solution/solve.sh``, ``tests/``), so everything downstream — the sandbox, the
verifier, ``t1env validate`` — is reused unchanged. An instance is named ``FAMILY@SEED``
(``logs@17``); its package is written once into a cache folder keyed by a hash of the
generator's source, so editing a generator never serves stale instances.

Deterministic: the same seed gives a byte-identical package (the generator draws only from
``random.Random(f"{name}@{seed}")``); different seeds give different formats, values,
questions and injected faults.

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

import hashlib
import inspect
import json
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from t1env.resources import cache_dir
from t1env.task import TaskError

INSTANCE_SEP = "@"
TEST_EVERY = 5  # seed % TEST_EVERY == 0 → test split
CALIBRATION_SEEDS = (0, 1)  # a test seed and a train seed: `t1env validate --all` runs these per family


def split_of_seed(seed: int) -> str:
    """``"test"`` for seeds divisible by 5, else ``"train"``."""
    return "test" if seed % TEST_EVERY == 0 else "train"


def split_seed(split: str | None, k: int) -> int:
    """The k-th seed (k >= 0) of a split; ``split=None`` is the identity."""
    if k < 0:
        raise ValueError(f"seed index must be >= 0, got {k}")
    if split is None:
        return k
    if split == "test":
        return TEST_EVERY * k
    if split == "train":
        per = TEST_EVERY - 1
        return TEST_EVERY * (k // per) + 1 + k % per
    raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")


@dataclass
class Instance:
    """What a family's :meth:`Family.build` returns: the content of one task package."""

    title: str
    instruction: str
    solve: str
    tests: dict[str, str]
    files: dict[str, str | bytes] = field(default_factory=dict)  # paths under environment/ (setup.sh included)
    executables: frozenset[str] = frozenset()  # paths under environment/ to mark 0755
    difficulty: str | None = None  # defaults to the family's
    tags: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    max_turns: int = 40
    command_timeout: int = 60
    agent_timeout: int = 1200
    verifier_timeout: int = 120
    preamble: str = "cd /app\n"  # solve.sh's first lines after the shebang and `set -euo pipefail`
    demos: dict[str, str] = field(default_factory=dict)  # name -> script: solution/demos/NAME.sh (Task.demos)


class Family:
    """A generator of task instances. Subclasses set the class attributes and implement ``build``."""

    name: str = ""
    category: str = ""
    difficulty: str = "medium"
    description: str = ""

    def build(self, rng: random.Random, seed: int) -> Instance:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- identity --------------------------------------------------------------------------
    def instance_id(self, seed: int) -> str:
        return f"{self.name}{INSTANCE_SEP}{seed}"

    def package_id(self, seed: int) -> str:
        """The task id inside the package (task ids allow ``[a-z0-9._-]``, so ``@`` becomes ``-``)."""
        return f"{self.name}-{seed}"

    def version(self) -> str:
        """Hash of this generator's source and of this module: the cache key of its instances."""
        h = hashlib.sha256()
        for obj in (Family, type(self)):
            h.update(Path(inspect.getsourcefile(obj)).read_bytes())
        return h.hexdigest()[:12]

    def rng(self, seed: int) -> random.Random:
        return random.Random(self.instance_id(seed))

    # -- writing ---------------------------------------------------------------------------
    def generate(self, seed: int, dest: str | Path) -> Path:
        """Write the instance for ``seed`` as a task package under ``dest``; returns its folder."""
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"{self.name}: seed must be a non-negative int, got {seed!r}")
        inst = self.build(self.rng(seed), seed)
        root = Path(dest) / self.package_id(seed)
        root.mkdir(parents=True, exist_ok=False)
        _write(root / "task.toml", self._toml(inst, seed))
        _write(root / "instruction.md", inst.instruction.strip() + "\n")
        for name, script in {"solve": inst.solve, **{f"demos/{k}": v for k, v in inst.demos.items()}}.items():
            _write(root / "solution" / f"{name}.sh", "#!/bin/bash\nset -euo pipefail\n" + inst.preamble
                   + script.strip() + "\n", 0o755)
        for name, body in sorted(inst.tests.items()):
            _write(root / "tests" / name, body)
        (root / "environment").mkdir(exist_ok=True)
        for rel, body in sorted(inst.files.items()):
            mode = 0o755 if rel in inst.executables or rel == "setup.sh" else 0o644
            _write(root / "environment" / rel, body, mode)
        return root

    def _toml(self, inst: Instance, seed: int) -> str:
        q = json.dumps  # a JSON string is a valid TOML basic string
        tags = ", ".join(q(t) for t in dict.fromkeys(("family", self.name, *inst.tags)))
        tools = ", ".join(q(t) for t in inst.tools)
        return (
            f"id = {q(self.package_id(seed))}\n"
            f"title = {q(inst.title)}\n"
            f"category = {q(self.category)}\n"
            f"difficulty = {q(inst.difficulty or self.difficulty)}\n"
            f"tags = [{tags}]\n"
            f"author = {q(f'family {self.name} (seed {seed}, generator {self.version()})')}\n\n"
            "[limits]\n"
            f"max_turns = {inst.max_turns}\n"
            f"command_timeout = {inst.command_timeout}\n"
            f"agent_timeout = {inst.agent_timeout}\n"
            f"verifier_timeout = {inst.verifier_timeout}\n\n"
            "[environment]\n"
            'workdir = "/app"\n'
            "network = false\n"
            f"tools = [{tools}]\n"
        )


def _write(path: Path, body: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body.encode() if isinstance(body, str) else body)
    os.chmod(path, mode)


# -- the families (an explicit list: one hop from here to each generator) ------------------------
def _all() -> dict[str, Family]:
    from t1env.families import build, chain, config, csvpipe, filetree, githistory, logs, regex, script, sql

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

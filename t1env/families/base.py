"""The base of every task family: :class:`Family` (a generator), :class:`Instance` (what it builds), and the
seed splits.

A family module (``t1env/families/logs.py`` and the rest) subclasses :class:`Family` from here and
implements :meth:`Family.build`; :mod:`t1env.families` imports every family module and keeps the table of
them (``FAMILIES``), so the arrows point one way: package -> family modules -> this module.

Example:
    >>> from t1env.families.base import split_seed, split_of_seed
    >>> [split_seed("test", k) for k in range(3)], split_of_seed(11)
    ([0, 5, 10], 'train')
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

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
        """Hash of this generator's source and of this module (the base): the cache key of its instances."""
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
            _write(
                root / "solution" / f"{name}.sh",
                "#!/bin/bash\nset -euo pipefail\n" + inst.preamble + script.strip() + "\n",
                0o755,
            )
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

"""Imported task layouts: Terminal-Bench 1.x and Harbor (Terminal-Bench 2.x) folders, run unchanged.

:func:`t1env.task.load_task` recognises the layout and hands the folder to
:func:`~t1env.formats.terminal_bench.load_terminal_bench` (``task.yaml``) or
:func:`~t1env.formats.harbor.load_harbor` (``task.toml`` with a ``[task]`` table or a
``schema_version``). Both return an ordinary :class:`~t1env.task.Task` whose :attr:`Task.origin`
says where the package keeps what a t1 package keeps in fixed places (:class:`Origin`): the Docker
build context, the oracle, the tests, and how the tests are run.

How imported tests are run (``docs/compat.md`` has the full story and the reasons):

* **pytest-based tests** (Terminal-Bench's ``tests/test_outputs.py``; a Harbor ``tests/test.sh``
  that runs pytest) run under t1's own verifier runtime, one check per test function, exactly
  like a t1 task: the upstream ``run-tests.sh``/``test.sh`` (which installs curl, uv and pytest
  from the internet) is **not** run.
* **other Harbor tests** (a ``test.sh`` that writes ``/logs/verifier/reward.json`` or
  ``reward.txt`` itself) run as written, by t1's runtime in its script mode, in the isolated
  verifier; each key of ``reward.json`` is one check (``reward.txt``: one check, ``reward``).

Contamination guard: a package carrying the Terminal-Bench canary string, a Harbor ``[task].name``
under a known benchmark org, or a ``.t1-eval-only`` marker file is **eval-only**
(:attr:`Origin.eval_only` says why); :func:`t1env.registry.split_of` puts it in ``test`` and
:func:`t1env.registry.training_tasks` refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from t1env.task import TaskError

CANARY = "terminal-bench-canary GUID"
# Harbor orgs whose tasks are published benchmarks (their [task].name is "org/name").
BENCHMARK_ORGS = frozenset({"terminal-bench", "tbench", "laude-institute", "harbor", "swe-bench", "swebench"})
EVAL_ONLY_MARKER = ".t1-eval-only"
TESTS_ALIAS = "/tests"  # where both formats' tests expect their own files
LOGS_DIR = "/logs/verifier"  # where a Harbor test.sh writes reward.json / reward.txt
# Files the canary scan reads (the canary sits in Dockerfiles, scripts, tests and task.yaml).
_SCANNED = {".py", ".sh", ".yaml", ".yml", ".toml", ".md", ""}


@dataclass(frozen=True)
class Keystroke:
    """One entry of a Terminal-Bench ``solution.yaml``: text typed into the shell."""

    command: str
    min_timeout_sec: float = 0.1
    block: bool = False
    append_enter: bool = True


@dataclass(frozen=True)
class Origin:
    """Where an imported package keeps its parts, and how t1 runs its tests."""

    format: Literal["terminal-bench", "harbor"]
    context: Path
    """Docker build context (Terminal-Bench: the task folder; Harbor: environment/)."""
    dockerfile: Path | None
    solution: Path
    """solution.sh, solution/solve.sh or solution.yaml (the keystroke list: :attr:`keystrokes`)."""
    tests: Path
    verifier: Literal["pytest", "script"]
    """pytest: t1's runtime runs the test files; script: t1's runtime runs ``script`` and reads the reward file."""
    script: str | None = None
    """The test script run in script mode, relative to ``tests`` (``test.sh``)."""
    reward_keys: tuple[str, ...] | None = None
    """Script mode: the reward.json keys declared on the host; None when the package does not say (taken from the run)."""
    keystrokes: tuple[Keystroke, ...] | None = None
    solution_dir: Path | None = None
    """Harbor: solution/, uploaded to /solution before the oracle runs solve.sh."""
    solution_env: dict[str, str] = field(default_factory=dict)
    verifier_env: dict[str, str] = field(default_factory=dict)
    eval_only: str | None = None
    """Why the task is evaluation-only (a benchmark task), or None."""
    local_problem: str | None = None
    """Why the local (bubblewrap) backend cannot run it (it needs its Dockerfile), or None."""
    steps: tuple = ()
    """Harbor multi-step tasks: one Task per step, in order (the parent task is step 0's)."""
    step_name: str | None = None
    min_reward: float | dict | None = None
    reward_strategy: Literal["mean", "final"] = "mean"
    workdir_dir: Path | None = None
    """Harbor step: steps/<name>/workdir, copied into the workdir before the step (its setup.sh then runs)."""
    notes: tuple[str, ...] = ()
    """What t1 does differently from the upstream harness for this task (shown by ``t1env show``)."""

    @property
    def setup(self) -> Path | None:
        if self.workdir_dir is None:
            return None
        p = self.workdir_dir / "setup.sh"
        return p if p.is_file() else None

    def workdir_files(self) -> list[Path]:
        if self.workdir_dir is None or not self.workdir_dir.is_dir():
            return []
        return sorted(p for p in self.workdir_dir.iterdir() if p.name != "setup.sh")


# -- shared by both loaders -------------------------------------------------------------------------

_ID_BAD = re.compile(r"[^a-z0-9._-]+")


def task_id(folder: Path) -> str:
    """A t1 task id for an imported folder: its name, lower-cased, other characters as '-'."""
    tid = _ID_BAD.sub("-", folder.name.lower()).strip("-._")[:80]
    if not tid:
        raise TaskError(f"{folder}: the folder name gives no usable task id (use letters, digits, '-', '_', '.')")
    return tid


def canary_file(root: Path) -> Path | None:
    """The first file under ``root`` carrying the Terminal-Bench canary string (None when none does)."""
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in _SCANNED and p.stat().st_size < 1_000_000:
            try:
                if CANARY in p.read_text(encoding="utf-8", errors="replace"):
                    return p
            except OSError:
                continue
    return None


def eval_only_reason(root: Path, harbor_name: str | None = None) -> str | None:
    if (root / EVAL_ONLY_MARKER).exists():
        return f"marked eval-only by {EVAL_ONLY_MARKER}"
    if harbor_name and harbor_name.split("/", 1)[0].lower() in BENCHMARK_ORGS:
        return f"Harbor task name {harbor_name!r} is under the benchmark org {harbor_name.split('/', 1)[0]!r}"
    hit = canary_file(root)
    if hit is not None:
        return f"benchmark canary string in {hit.relative_to(root)}"
    return None


def difficulty(value, where: str) -> tuple[str, tuple[str, ...]]:
    """t1's difficulty for an imported one; 'unknown' (or none) becomes 'medium' with a tag saying so."""
    v = str(value or "unknown").strip().lower()
    if v in ("easy", "medium", "hard"):
        return v, ()
    if v == "unknown":
        return "medium", ("difficulty-unknown",)
    raise TaskError(f"{where}: difficulty: {value!r} is not one of easy, medium, hard, unknown")


def title_of(instruction: str) -> str:
    line = next((ln.strip(" #*") for ln in instruction.splitlines() if ln.strip(" #*")), "imported task")
    return line if len(line) <= 100 else line[:97] + "..."


def pytest_checks(tests: Path) -> list[str]:
    from t1env.task import declared_checks

    return declared_checks(tests) if tests.is_dir() else []


def verifier_options(origin: Origin):
    """The :class:`~t1env.sandbox.base.VerifierOptions` an imported task's verifier runs with."""
    from t1env.sandbox.base import VerifierOptions

    if origin.verifier == "script":
        return VerifierOptions(args=("--script", f"{TESTS_ALIAS}/{origin.script}", "--logs", LOGS_DIR),
                               env=dict(origin.verifier_env), tests_alias=TESTS_ALIAS, private_dir=LOGS_DIR)
    return VerifierOptions(env=dict(origin.verifier_env), tests_alias=TESTS_ALIAS)

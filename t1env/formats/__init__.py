"""Imported task layouts: Terminal-Bench 1.x and Harbor (Terminal-Bench 2.x) folders, run unchanged.

:func:`t1env.task.load_task` recognises the layout and hands the folder to
:func:`~t1env.formats.terminal_bench.load_terminal_bench` (``task.yaml``) or
:func:`~t1env.formats.harbor.load_harbor` (``task.toml`` with a ``[task]`` table or a
``schema_version``). Both return an ordinary :class:`~t1env.task.Task` whose :attr:`Task.origin`
says where the package keeps what a t1 package keeps in fixed places (:class:`~t1env.task.Origin`): the Docker
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
(:attr:`~t1env.task.Origin.eval_only` says why); :func:`t1env.registry.split_of` puts it in ``test`` and
:func:`t1env.registry.training_tasks` refuses it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from t1env.task_model import TaskError, declared_checks

CANARY = "terminal-bench-canary GUID"
# Harbor orgs whose tasks are published benchmarks (their [task].name is "org/name").
BENCHMARK_ORGS = frozenset({"terminal-bench", "tbench", "laude-institute", "harbor", "swe-bench", "swebench"})
EVAL_ONLY_MARKER = ".t1-eval-only"
TESTS_ALIAS = "/tests"  # where both formats' tests expect their own files
LOGS_DIR = "/logs/verifier"  # where a Harbor test.sh writes reward.json / reward.txt
# Files the canary scan reads (the canary sits in Dockerfiles, scripts, tests and task.yaml).
_SCANNED = {".py", ".sh", ".yaml", ".yml", ".toml", ".md", ""}


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
    return declared_checks(tests) if tests.is_dir() else []


# -- test-time dependencies -------------------------------------------------------------------------

# Requirements t1 never installs: its runtime brings pytest (plugins are not loaded: autoload is off),
# and the packaging tools are the image's own.
PROVIDED = frozenset(
    {"pytest", "pytest-json-ctrf", "pytest-json-report", "pytest-ctrf", "pip", "setuptools", "wheel", "uv"}
)
# name, optional [extras], optional version clauses (no markers, URLs or paths)
_REQ = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?"
    r"\s*((===?|~=|!=|<=?|>=?)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$"
)
# options of `pip install` / `uv pip install` / `uv add` that take a value (the value is not a requirement)
_VALUED = {
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-e",
    "--editable",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "-p",
    "--python",
    "--trusted-host",
    "--index",
    "--default-index",
    "--group",
    "--optional",
    "--extra",
    "--upgrade-package",
    "-P",
    "--platform",
    "--python-version",
    "--implementation",
    "--abi",
    "--src",
    "--cache-dir",
    "--timeout",
    "--retries",
    "--proxy",
    "--cert",
    "--client-cert",
    "--log",
    "--progress-bar",
    "--python-platform",
}
_SPLIT = re.compile(r"&&|\|\||[;|\n]")


def requirement_name(req: str) -> str:
    """The normalized project name of a requirement (``NumPy[extra]>=2`` -> ``numpy``)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\[<>=!~ ;@]", req, maxsplit=1)[0]).lower()


def _valid_requirement(req: str) -> bool:
    return bool(_REQ.match(req)) and requirement_name(req) not in PROVIDED


def _installs(words: list[str]) -> list[str]:
    """Requirements that one command line (already split into words) installs, in order."""
    assignment = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
    while words and (assignment.match(words[0]) or words[0] in ("sudo", "exec", "command", "time")):
        words = words[1:]
    if not words:
        return []
    prog = words[0].rsplit("/", 1)[-1]
    if re.fullmatch(r"python[0-9.]*", prog) and words[1:3] == ["-m", "pip"]:
        words, prog = words[2:], "pip"
    args: list[str] = []
    if re.fullmatch(r"pip[0-9.]*", prog) and words[1:2] == ["install"]:
        args = words[2:]
    elif prog == "uv" and words[1:3] == ["pip", "install"]:
        args = words[3:]
    elif prog == "uv" and words[1:2] == ["add"]:
        args = words[2:]
    if args:
        out, skip = [], False
        for w in args:
            if skip:
                skip = False
            elif w.startswith("-"):
                skip = w in _VALUED
            else:
                out.append(w)
        return out
    # uvx / uv tool run / uv run: the packages given with --with / -w
    if prog == "uvx" or (prog == "uv" and (words[1:2] == ["run"] or words[1:3] == ["tool", "run"])):
        out = []
        for i, w in enumerate(words):
            if w in ("--with", "-w") and i + 1 < len(words):
                out += words[i + 1].split(",")
            elif w.startswith("--with="):
                out += w.split("=", 1)[1].split(",")
        return out
    return []


def test_requirements(script: str) -> tuple[str, ...]:
    """The Python requirements a test script installs before it runs the tests (pytest and the
    packaging tools left out; paths, URLs and ``$VARIABLES`` too: they name nothing t1 can install).

    Example:
        >>> test_requirements("uv pip install pytest==8.4.1 numpy==2.3.3\\n"
        ...                   "uvx -p 3.13 -w pytest==8.4.1 -w tabulate pytest /tests -rA")
        ('numpy==2.3.3', 'tabulate')
        >>> test_requirements("python3 -m pip install -q -r /tests/req.txt 'requests>=2' && pytest")
        ('requests>=2',)
    """
    text = re.sub(r"\\\n", " ", script)
    out: list[str] = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for part in _SPLIT.split(line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            for req in _installs(words):
                req = req.strip()
                if _valid_requirement(req) and req not in out:
                    out.append(req)
    return tuple(out)


def declared_test_deps(value, where: str) -> tuple[str, ...]:
    """``[metadata.t1] test_deps`` (a list of requirement strings), checked."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise TaskError(f'{where}: metadata.t1.test_deps: must be a list of requirement strings, e.g. ["numpy==2.3.3"]')
    bad = [v for v in value if not _REQ.match(v.strip())]
    if bad:
        raise TaskError(
            f"{where}: metadata.t1.test_deps: {bad[0]!r} is not a requirement (name, optional [extras] and versions)"
        )
    return tuple(v.strip() for v in value if requirement_name(v) not in PROVIDED)


def local_deps_problem(task_dir: Path, deps: tuple[str, ...], source: Path | None) -> str:
    """The local backend's one-line refusal for a task whose tests need packages installed."""
    src = f" (from {source.name})" if source is not None else ""
    return (
        f"{task_dir}: its tests need {', '.join(deps)}{src}, which t1 installs into the verifier's image at build "
        "time on the docker backend only: use backend='docker'"
    )

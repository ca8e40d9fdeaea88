"""The task model: what a parsed task package is (:class:`Task`, :class:`TaskSpec`, :class:`Origin`) and the
parsing helpers every loader shares (:func:`read_toml`, :func:`validate_model`, :func:`declared_checks`).

This is the bottom of the task layer: it imports nothing of t1 but :mod:`t1env.errors`. The loaders sit
above it: :mod:`t1env.formats` (Terminal-Bench and Harbor layouts) builds :class:`Task` objects from here,
and :func:`t1env.task.load_task` recognises a layout and calls the right loader. Import from
:mod:`t1env.task`, which re-exports every public name below; modules under :mod:`t1env.formats` import
from here (they sit below :mod:`t1env.task`).

Example:
    >>> from t1env.task_model import quote_key
    >>> quote_key("limits"), quote_key("a.b")
    ('limits', "'a.b'")
"""

from __future__ import annotations

import ast
import ipaddress
import re
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from t1env.errors import T1Error

TASK_FILE = "task.toml"
INSTRUCTION_FILE = "instruction.md"
ENV_DIR = "environment"
SOLUTION_FILE = "solution/solve.sh"
DEMOS_DIR = "solution/demos"
TESTS_DIR = "tests"
# Manifests of the imported layouts (:mod:`t1env.formats`): Terminal-Bench 1.x has task.yaml, Harbor
# a task.toml with a [task] table or a schema_version instead of t1's top-level id.
TB_TASK_FILE = "task.yaml"
TASK_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"  # a t1 task id (also its folder's name)

# Files inside environment/ that configure the sandbox instead of being copied into the workdir.
ENV_CONTROL_FILES = frozenset({"setup.sh", "Dockerfile", ".dockerignore"})


def split_network_allow(entry: str) -> tuple[str, int]:
    """One ``environment.network_allow`` entry, ``HOST:PORT`` (an IPv4 address, ``[IPv6]`` or a host name, and
    a port 1-65535), as (host, port); ValueError with a one-line reason otherwise."""
    host, sep, port = entry.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        ok = ":" in host and _is_ip(host)
    else:
        ok = bool(host) and ":" not in host and (_is_ip(host) or _HOSTNAME.fullmatch(host) is not None)
    if not sep or not ok or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{entry!r} is not HOST:PORT (an address, [IPv6 address] or host name, and a port 1-65535)")
    return host, int(port)


_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class TaskError(T1Error, ValueError):
    """A task package is malformed. The message is one line naming the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limits(_Strict):
    max_turns: int = Field(50, ge=1, description="Agent actions allowed before the episode is truncated.")
    command_timeout: float = Field(30.0, gt=0, description="Seconds one shell command may run before Ctrl-C.")
    agent_timeout: float = Field(1800.0, gt=0, description="Wall-clock seconds for the whole agent episode.")
    verifier_timeout: float = Field(120.0, gt=0, description="Seconds the verifier may run.")
    setup_timeout: float = Field(120.0, gt=0, description="Seconds environment/setup.sh may run.")


class Environment(_Strict):
    workdir: str = Field("/app", description="Absolute working directory of the agent's shell.")
    network: bool = Field(False, description="Whether the sandbox may reach the internet (never the host).")
    network_allow: tuple[str, ...] = Field(
        (),
        description=(
            "With network = true: HOST:PORT services the sandbox may reach although they are on the host or a private "
            "range (e.g. '10.1.2.3:5432', '[fd00::5]:80', 'db.internal:5432'; names resolved when the sandbox starts)."
        ),
    )
    tools: tuple[str, ...] = Field((), description="Programs the task needs on PATH inside the sandbox.")
    docker_image: str | None = Field(None, description="Docker image to run (Docker backend).")
    dockerfile: str | None = Field(None, description="Dockerfile path relative to environment/.")
    memory_mb: int = Field(2048, ge=64, description="Memory limit of the sandbox.")
    cpus: float = Field(1.0, gt=0, description="CPU quota (Docker backend).")
    pids: int = Field(512, ge=16, description="Maximum number of processes in the sandbox.")
    file_size_mb: int = Field(1024, ge=1, description="Largest file a process may write.")
    cpu_seconds: int = Field(3600, ge=1, description="CPU time limit per process (RLIMIT_CPU).")

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or ".." in v.split("/"):
            raise ValueError("must be an absolute path without '..'")
        return v

    @field_validator("network_allow")
    @classmethod
    def _allow(cls, v: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if v and not info.data.get("network"):
            raise ValueError("needs network = true (without network the sandbox reaches nothing to allow)")
        for entry in v:
            split_network_allow(entry)
        return v


class Verifier(_Strict):
    mode: Literal["separate", "shared"] = Field(
        "separate",
        description=(
            "How the checks run beside what the agent left. 'separate' (the default, the safe one): every process of "
            "the agent is ended first and the checks see only its files. 'shared': the agent's processes keep running "
            "(for checks that talk to a service or inspect a process the agent started); they are frozen while the "
            "verifier starts and cannot reach its files, process or report, but they run while the checks do."
        ),
    )


class TaskSpec(_Strict):
    id: str = Field(pattern=TASK_ID_PATTERN, max_length=80)
    title: str = Field(min_length=1)
    category: str = Field(min_length=1)
    difficulty: Literal["easy", "medium", "hard"]
    tags: tuple[str, ...] = ()
    author: str | None = None
    limits: Limits = Limits()
    environment: Environment = Environment()
    verifier: Verifier = Verifier()


# -- where an imported package (Terminal-Bench, Harbor: t1env.formats) keeps its parts -------------------


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
    test_deps: tuple[str, ...] = ()
    """Python requirements the tests need (from the test script or ``[metadata.t1] test_deps``): installed
    into the verifier's image at build time (Docker backend), never at verification."""
    test_deps_source: Path | None = None
    """The file :attr:`test_deps` were read from (for messages)."""

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


@dataclass(frozen=True)
class Task:
    """A parsed, validated task package."""

    path: Path
    spec: TaskSpec
    instruction: str
    #: Set for a Terminal-Bench or Harbor package (:mod:`t1env.formats`): where its files are and how it is verified.
    origin: Origin | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def env_dir(self) -> Path:
        """environment/ (t1, Harbor); an imported task's Docker build context."""
        return self.origin.context if self.origin is not None else self.path / ENV_DIR

    @property
    def setup_script(self) -> Path | None:
        if self.origin is not None:
            return self.origin.setup
        p = self.env_dir / "setup.sh"
        return p if p.is_file() else None

    @property
    def dockerfile(self) -> Path | None:
        if self.origin is not None:
            return self.origin.dockerfile
        name = self.spec.environment.dockerfile or "Dockerfile"
        p = self.env_dir / name
        return p if p.is_file() else None

    @property
    def solution(self) -> Path:
        return self.origin.solution if self.origin is not None else self.path / SOLUTION_FILE

    @property
    def demos(self) -> list[Path]:
        """``solution/demos/*.sh``, sorted: other ways a demonstrator plays the task, flawed ones included. Not the
        oracle (``t1env validate`` never runs them); an SFT warm-start can imitate them (``sft.demos``)."""
        folder = self.path / DEMOS_DIR
        return sorted(folder.glob("*.sh")) if self.origin is None and folder.is_dir() else []

    @property
    def tests_dir(self) -> Path:
        return self.origin.tests if self.origin is not None else self.path / TESTS_DIR

    def workdir_files(self) -> list[Path]:
        """Top-level entries of environment/ that are copied into the workdir (an imported task's
        Dockerfile places its own files; a Harbor step's ``workdir/`` is copied)."""
        if self.origin is not None:
            return self.origin.workdir_files()
        if not self.env_dir.is_dir():
            return []
        return sorted(p for p in self.env_dir.iterdir() if p.name not in ENV_CONTROL_FILES)

    def declared_checks(self) -> list[str]:
        """Check names found statically in tests/ (``file.py::test_x`` or ``file.py::TestC::test_x``).

        Used as the list of checks when the verifier dies before pytest can collect. A
        parametrized test counts once here; pytest's collection (when it succeeds) is authoritative.
        An imported task verified by its own ``test.sh`` declares the keys of its ``reward.json``
        instead (empty when the package does not say which: see :mod:`t1env.formats`).
        """
        if self.origin is not None and self.origin.steps:  # Harbor multi-step: every step's checks, step/check
            return [f"{s.origin.step_name}/{c}" for s in self.origin.steps for c in s.declared_checks()]
        if self.origin is not None and self.origin.verifier == "script":
            return list(self.origin.reward_keys or ())
        return declared_checks(self.tests_dir)


def is_task_package(folder: Path) -> bool:
    """Whether ``folder`` holds a task package of any supported layout (t1, Terminal-Bench, Harbor)."""
    return (folder / TASK_FILE).is_file() or (folder / TB_TASK_FILE).is_file()


def manifest(folder: Path) -> Path:
    """The package's manifest file (task.toml, or a Terminal-Bench task.yaml)."""
    return folder / TASK_FILE if (folder / TASK_FILE).is_file() else folder / TB_TASK_FILE


# CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state: two threads in
# ast.parse at once (a thread switch inside it, e.g. a finalizer run by the garbage collector) corrupt
# it and one of them fails with "SystemError: AST constructor recursion depth mismatch" (CI hit this in
# the eval harness's trial threads). Parsing is a few milliseconds per file: one at a time.
_PARSE_LOCK = threading.Lock()


def declared_checks(tests_dir: Path) -> list[str]:
    names: list[str] = []
    for f in sorted(tests_dir.rglob("test_*.py")):
        rel = f.relative_to(tests_dir).as_posix()
        try:
            source = f.read_bytes()
            with _PARSE_LOCK:
                tree = ast.parse(source, filename=str(f))
        except SyntaxError as e:
            raise TaskError(f"{f}: line {e.lineno}: syntax error in test file: {e.msg}") from None
        except (MemoryError, RecursionError):  # the parser's own stack: e.g. 3,000 nested unary minuses
            raise TaskError(f"{f}: nested too deeply for Python's parser (split the expression up)") from None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                names.append(f"{rel}::{node.name}")
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                        names.append(f"{rel}::{node.name}::{sub.name}")
    return names


def validate_model(model: type[BaseModel], raw, path: Path, prefix: str = ""):
    """``model.model_validate(raw)``, or a one-line :class:`TaskError` naming ``path`` and the field."""
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise TaskError(f"{path}: {prefix}{_field_path(err['loc'])}: {err['msg']}{more}") from None


def read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path}: invalid TOML: {e}") from None
    except UnicodeDecodeError:
        raise TaskError(f"{path}: not UTF-8 text") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise TaskError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None


def _field_path(loc: tuple) -> str:
    return ".".join(quote_key(p) for p in loc) or "(root)"


def quote_key(part) -> str:
    """A key of a field path: as it is when it is a plain word or an index, else quoted (a key with a line break,
    a dot or a space), so that the message stays one line and says which key."""
    s = str(part)
    plain = isinstance(part, int) or (s and s.isprintable() and not any(c in s for c in " .'\""))
    return s if plain else repr(s)

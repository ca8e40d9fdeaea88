"""Harbor (Terminal-Bench 2.x) task folders, loaded as they are published.

Layout (``schema_version`` "1.0" to "1.4"; older files say ``version = "1.0"``)::

    my-task/
      task.toml            [task] name = "org/name"; [metadata]; [verifier]; [agent]; [environment]; [solution]; [[steps]]
      instruction.md
      environment/Dockerfile   (build context: environment/)
      solution/solve.sh        (solution/ is uploaded to /solution first, as Harbor's oracle does)
      tests/test.sh            (+ e.g. tests/test_outputs.py)
      steps/<name>/{instruction.md, tests/, solution/, workdir/}   multi-step tasks

Mapping onto t1 (``docs/compat.md``): ``[agent] timeout_sec`` → ``limits.agent_timeout``;
``[verifier] timeout_sec`` (default 600) → ``limits.verifier_timeout``; ``[verifier]
environment_mode`` (default: ``separate`` when ``[verifier.environment]`` is set, else ``shared``)
→ t1's ``[verifier] mode``; ``[environment]`` ``workdir`` (else the Dockerfile's WORKDIR, else
``/app``), ``docker_image``, ``cpus``, ``memory_mb`` (or the deprecated ``memory = "2G"``) and
``network_mode`` (``public`` → network on; ``no-network`` and ``allowlist`` → off, since t1 cannot
restrict the network to a list of hosts; the deprecated ``allow_internet`` likewise).

Which verifier (:attr:`Origin.verifier`): when ``tests/test.sh`` runs pytest and ``tests/`` has
``test_*`` functions, t1's runtime runs those test files itself (one check per function; the script,
which would install uv and pytest from the internet, is not run). Otherwise the script runs as
written in t1's isolated verifier and its ``/logs/verifier/reward.json`` (one check per key) or
``reward.txt`` (one check, ``reward``) is the result; a check passes when its value is at least 1.
``[metadata.t1] verifier = "script"`` forces the script; ``[metadata.t1] reward_keys = [...]`` declares
the keys on the host (t1's export writes it). Without it the keys are taken from the run.

Test-time dependencies: what ``test.sh`` installs for the tests (``uvx -w numpy ...``, ``uv pip install``,
``pip install``; :func:`t1env.formats.test_requirements`), or ``[metadata.t1] test_deps = [...]`` when
given (it replaces what the script says), goes into :attr:`Origin.test_deps`: the Docker backend
installs it into the verifier's image at build time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from t1env.formats import (
    TESTS_ALIAS,
    declared_test_deps,
    difficulty,
    eval_only_reason,
    local_deps_problem,
    pytest_checks,
    task_id,
    test_requirements,
    title_of,
)
from t1env.images import dockerfile_workdir, local_problem
from t1env.task_model import INSTRUCTION_FILE, Origin, Task, TaskError, TaskSpec, validate_model


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Author(_Open):
    name: str
    email: str | None = None


class _Package(_Open):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    authors: list[_Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class _VerifierEnv(_Open):
    pass


class _HVerifier(_Open):
    timeout_sec: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: _VerifierEnv | None = None


class _HAgent(_Open):
    timeout_sec: float | None = Field(None, gt=0)
    user: str | int | None = None


class _HEnvironment(_Open):
    docker_image: str | None = None
    build_timeout_sec: float = 600.0
    cpus: float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, ge=64)
    memory: str | None = Field(None, pattern=r"^\s*\d+(\.\d+)?\s*[GgMmKk]\s*$")
    storage_mb: int | None = None
    gpus: int | None = Field(None, ge=0)
    workdir: str | None = None
    network_mode: Literal["public", "no-network", "allowlist"] | None = None
    allowed_hosts: list[str] | None = None
    allow_internet: bool | None = None
    env: dict[str, str] = Field(default_factory=dict)


class _HSolution(_Open):
    env: dict[str, str] = Field(default_factory=dict)


class _HStep(_Open):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    agent: _HAgent = Field(default_factory=_HAgent)
    verifier: _HVerifier = Field(default_factory=_HVerifier)
    min_reward: float | dict[str, float] | None = None


class HarborToml(BaseModel):
    """The fields of a Harbor task.toml that t1 reads (validated); the rest is allowed and ignored."""

    model_config = ConfigDict(extra="allow")
    schema_version: str = "1.0"
    task: _Package | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: _HVerifier = Field(default_factory=_HVerifier)
    agent: _HAgent = Field(default_factory=_HAgent)
    environment: _HEnvironment = Field(default_factory=_HEnvironment)
    solution: _HSolution = Field(default_factory=_HSolution)
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[_HStep] | None = None


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _resolve(env: dict[str, str]) -> dict[str, str]:
    """Harbor's ``${VAR}`` / ``${VAR:-default}`` templates, resolved from the host's environment."""
    return {k: _VAR.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), v) for k, v in env.items()}


def _memory_mb(e: _HEnvironment) -> int | None:
    if e.memory_mb is not None:
        return e.memory_mb
    if e.memory:
        v = e.memory.strip().upper()
        return int(float(v[:-1]) * {"G": 1024, "M": 1, "K": 1 / 1024}[v[-1]])
    return None


def _network(e: _HEnvironment) -> tuple[bool, list[str]]:
    mode = e.network_mode or (
        {True: "public", False: "no-network"}[e.allow_internet] if e.allow_internet is not None else "public"
    )
    if mode == "allowlist":
        return False, [
            f"network_mode 'allowlist' ({', '.join(e.allowed_hosts or [])}): t1 cannot allow single hosts, the agent gets no network"
        ]
    return mode == "public", []


def _verifier_kind(tests: Path, meta_t1: dict, where: Path) -> tuple[str, str | None]:
    script = tests / "test.sh"
    forced = meta_t1.get("verifier")
    if forced not in (None, "pytest", "script"):
        raise TaskError(f"{where}: metadata.t1.verifier: must be 'pytest' or 'script', got {forced!r}")
    text = script.read_text(encoding="utf-8", errors="replace") if script.is_file() else ""
    if forced != "script" and pytest_checks(tests) and (forced == "pytest" or "pytest" in text or not script.is_file()):
        return "pytest", None
    if not script.is_file():
        raise TaskError(f"{script}: missing (Harbor runs tests/test.sh; no test_* functions to run instead)")
    return "script", "test.sh"


def _reward_keys(meta_t1: dict, where: Path) -> tuple[str, ...] | None:
    keys = meta_t1.get("reward_keys")
    if keys is None:
        return None
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
        raise TaskError(f"{where}: metadata.t1.reward_keys: must be a non-empty list of key names")
    return tuple(keys)


def load_harbor(root: Path, raw: dict) -> Task:
    """Parse a Harbor task folder (``raw``: its task.toml). Raises :class:`TaskError` (one line)."""
    root = Path(root).resolve()
    toml_path = root / "task.toml"
    cfg = validate_model(HarborToml, raw, toml_path)
    meta = cfg.metadata
    meta_t1 = meta.get("t1") if isinstance(meta.get("t1"), dict) else {}
    diff, extra_tags = difficulty(meta.get("difficulty"), f"{toml_path}: metadata")
    env_dir = root / "environment"
    dockerfile = env_dir / "Dockerfile" if (env_dir / "Dockerfile").is_file() else None
    if dockerfile is None and (env_dir / "docker-compose.yaml").is_file():
        raise TaskError(
            f"{env_dir / 'docker-compose.yaml'}: multi-container environments are not supported (t1 runs one container per episode)"
        )
    e = cfg.environment
    if dockerfile is None and not e.docker_image:
        raise TaskError(f"{toml_path}: environment.docker_image: missing, and no environment/Dockerfile to build")
    workdir = e.workdir or (
        dockerfile_workdir(dockerfile.read_text(encoding="utf-8", errors="replace")) if dockerfile else "/app"
    )
    network, notes = _network(e)
    if e.gpus:
        notes.append(f"environment.gpus = {e.gpus}: t1 sandboxes have no GPUs")
    mode = cfg.verifier.environment_mode or ("separate" if cfg.verifier.environment is not None else "shared")
    tags = tuple(str(t) for t in (cfg.task.keywords if cfg.task else [])) + tuple(
        str(t) for t in meta.get("tags", []) if isinstance(meta.get("tags"), list)
    )
    name = cfg.task.name if cfg.task else None
    agent_timeout = cfg.agent.timeout_sec or 1800.0

    def spec_for(instruction: str, verifier_timeout: float, verifier_mode: str, sub: str = "") -> TaskSpec:
        return validate_model(
            TaskSpec,
            dict(
                id=task_id(root),
                title=(
                    cfg.task.description.strip().splitlines()[0][:100]
                    if cfg.task and cfg.task.description.strip()
                    else title_of(instruction)
                )
                + sub,
                category=str(meta.get("category") or "harbor"),
                difficulty=diff,
                tags=tags + extra_tags + ("harbor",),
                author=(cfg.task.authors[0].name if cfg.task and cfg.task.authors else meta.get("author_name")),
                # plain dicts, validated with the rest: a bad value (a relative workdir) is a TaskError naming the field
                limits=dict(
                    agent_timeout=agent_timeout,
                    verifier_timeout=verifier_timeout,
                    max_turns=200,
                    command_timeout=min(180.0, agent_timeout),
                ),
                environment=dict(
                    workdir=workdir,
                    network=network,
                    docker_image=e.docker_image,
                    memory_mb=_memory_mb(e) or 2048,
                    cpus=e.cpus or 1.0,
                ),
                verifier=dict(mode=verifier_mode),
            ),
            toml_path,
        )

    base = dict(
        format="harbor",
        context=env_dir,
        dockerfile=dockerfile,
        eval_only=eval_only_reason(root, name),
        local_problem=local_problem(dockerfile, e.docker_image, str(root)),
    )

    def origin_for(tests: Path, solution_dir: Path, verifier_env: dict, mode_: str, **kw) -> Origin:
        kind, script = _verifier_kind(tests, meta_t1, toml_path)
        solve = solution_dir / "solve.sh"
        if not solve.is_file():
            raise TaskError(f"{solve}: missing (the oracle solution script)")
        script_path = tests / "test.sh"
        if "test_deps" in meta_t1:
            deps, source = declared_test_deps(meta_t1["test_deps"], str(toml_path)), toml_path
        elif script_path.is_file():
            deps, source = test_requirements(script_path.read_text(encoding="utf-8", errors="replace")), script_path
        else:
            deps, source = (), None
        local = base["local_problem"]
        if local is None and deps:
            local = local_deps_problem(root, deps, source)
        if local is None and mode_ == "shared":
            local = (
                f"{root}: its verifier shares the agent's environment ([verifier] environment_mode 'shared'), which an "
                "imported task gets on the docker backend only (/tests and /logs/verifier): use backend='docker'"
            )
        n = list(notes)
        n.append(
            "tests/test.sh is not run: t1's runtime runs tests/test_*.py with its own pytest, offline"
            if kind == "pytest"
            else "tests/test.sh runs as written in t1's isolated verifier; each reward.json key is one check"
        )
        if deps:
            n.append(f"{source.name} installs {', '.join(deps)}: installed into the verifier's image at build time")
        return Origin(
            **{**base, "local_problem": local},
            solution=solve,
            solution_dir=solution_dir,
            tests=tests,
            verifier=kind,
            script=script,
            reward_keys=_reward_keys(meta_t1, toml_path) if kind == "script" else None,
            solution_env=_resolve(cfg.solution.env),
            notes=tuple(n),
            test_deps=deps,
            test_deps_source=source if deps else None,
            verifier_env={"TEST_DIR": TESTS_ALIAS, **_resolve({**e.env, **verifier_env})},
            **kw,
        )

    if not cfg.steps:
        instr_path = root / INSTRUCTION_FILE
        instruction = _instruction(instr_path)
        spec = spec_for(instruction, cfg.verifier.timeout_sec, mode)
        return Task(root, spec, instruction, origin_for(root / "tests", root / "solution", cfg.verifier.env, mode))

    steps = []
    for i, st in enumerate(cfg.steps):
        d = root / "steps" / st.name
        if not d.is_dir():
            raise TaskError(f"{toml_path}: steps[{i}].name: {d} does not exist")
        instruction = _instruction(d / INSTRUCTION_FILE)
        tests = d / "tests" if (d / "tests" / "test.sh").is_file() or pytest_checks(d / "tests") else root / "tests"
        last = i == len(cfg.steps) - 1
        # Every step but the last verifies beside the agent (shared): the episode goes on in the same sandbox.
        step_mode = (st.verifier.environment_mode or mode) if last else "shared"
        timeout = st.verifier.timeout_sec if "timeout_sec" in st.verifier.model_fields_set else cfg.verifier.timeout_sec
        spec = spec_for(instruction, timeout, step_mode, sub=f" (step {st.name})")
        origin = origin_for(
            tests,
            d / "solution",
            {**cfg.verifier.env, **st.verifier.env},
            step_mode,
            step_name=st.name,
            min_reward=st.min_reward,
            workdir_dir=d / "workdir",
        )
        steps.append(Task(root, spec, instruction, origin))
    first = steps[0]
    parent = Origin(
        **{**first.origin.__dict__, "steps": tuple(steps), "reward_strategy": cfg.multi_step_reward_strategy or "mean"}
    )
    return Task(root, first.spec, first.instruction, parent)


def _instruction(path: Path) -> str:
    if not path.is_file():
        raise TaskError(f"{path}: missing (the instruction shown to the agent)")
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    if not text:
        raise TaskError(f"{path}: empty (the instruction shown to the agent)")
    return text

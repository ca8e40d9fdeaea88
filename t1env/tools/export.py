"""Export t1 tasks as Harbor or Terminal-Bench 1.x task folders: ``t1env export --format harbor|terminal-bench``.

What is written (``docs/compat.md``):

* **Harbor**: ``task.toml`` (``schema_version = "1.4"``, ``[task] name = "t1/<id>"``, limits,
  ``environment_mode`` from t1's ``[verifier] mode``, ``[metadata.t1] reward_keys`` = the checks),
  ``instruction.md``, ``environment/Dockerfile`` (the task's own, else t1's default image's recipe,
  then the workdir files and ``setup.sh`` baked in), ``solution/solve.sh``, and ``tests/``: the
  task's test files plus ``tests/_t1`` — t1's verifier runtime and the pytest it runs on — and a
  ``test.sh`` that runs them **offline** and writes ``/logs/verifier/reward.json`` with one key
  per check (1 passed, 0 not).
* **Terminal-Bench**: ``task.yaml``, ``Dockerfile`` (build context: the folder, workdir files in
  ``workdir/``), ``docker-compose.yaml``, ``solution.sh``, ``tests/`` and a ``run-tests.sh`` that
  runs the same offline runtime (``pytest`` exit status: all checks passed or not).

Loading an export back (``t1env run OUT/<id>``) gives the same checks, by the same names.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from t1env.episode.verify import runtime_bundle
from t1env.errors import T1Error
from t1env.sandbox.docker_images import default_dockerfile
from t1env.task import Task, TaskError

FORMATS = ("harbor", "terminal-bench")
RUNTIME_DIR = "_t1"

_TO_REWARD = r'''"""Turn t1's verifier report (JSON lines) into {check: 1 or 0} for the declared checks (t1env export)."""
import json, sys

report, keys = sys.argv[1], json.load(open(sys.argv[2]))
phases = {}
for line in open(report, encoding="utf-8", errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if isinstance(e, dict) and e.get("event") == "result":
        phases.setdefault(e["nodeid"].split("[", 1)[0], []).append((e["when"], e["outcome"]))
out = {}
for k in keys:
    got = phases.get(k, [])
    calls = [o for w, o in got if w == "call"]
    out[k] = int(bool(calls) and all(o == "passed" for o in calls) and not any(o in ("failed", "error") for _, o in got))
print(json.dumps(out))
'''

_RUN = """mkdir -p /logs/verifier
rm -rf /tmp/.t1v && mkdir -p /tmp/.t1v && cp -r {tests} /tmp/.t1v/tests && cp {tests}/_t1/pytest.ini /tmp/.t1v/pytest.ini
python3 -I -B {tests}/_t1/run_checks.py --pytest-zip {tests}/_t1/pytest.zip /tmp/.t1v/tests > /logs/verifier/t1-report.jsonl
python3 -I {tests}/_t1/to_reward.py /logs/verifier/t1-report.jsonl {tests}/_t1/checks.json > /logs/verifier/reward.json
"""

_HARBOR_TEST = """#!/bin/bash
# Written by `t1env export`: runs the checks offline with t1's verifier runtime and the pytest in
# tests/_t1 (no network), and writes /logs/verifier/reward.json with one key per check (1 or 0).
""" + _RUN.format(tests="/tests")

_TB_RUN_TESTS = (
    """#!/bin/bash
# Written by `t1env export`: offline, with t1's verifier runtime and the pytest in $TEST_DIR/_t1.
TEST_DIR=${TEST_DIR:-/tests}
"""
    + _RUN.format(tests="$TEST_DIR")
    + """python3 -c 'import json,sys; sys.exit(0 if all(json.load(open("/logs/verifier/reward.json")).values()) else 1)'
"""
)

_COMPOSE = """services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
"""


class ExportError(T1Error, ValueError):
    """A task cannot be exported in the asked layout (one line: the task and why)."""


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _dockerfile(task: Task) -> str:
    """The task's image recipe with its workdir files (in ``workdir/`` of the build context) and setup.sh baked in."""
    if task.origin is not None:
        raise ExportError(f"{task.id}: already an imported ({task.origin.format}) task: export t1 tasks only")
    if task.spec.environment.docker_image:
        base = f"FROM {task.spec.environment.docker_image}\n"
    elif task.dockerfile is not None:
        base = task.dockerfile.read_text(encoding="utf-8")
        if any(ln.strip().upper().startswith(("COPY", "ADD")) for ln in base.splitlines()):
            raise ExportError(
                f"{task.dockerfile}: COPY/ADD from the build context is not exported (bake the files into an image first)"
            )
    else:
        base = default_dockerfile()
    wd = task.spec.environment.workdir
    out = base.rstrip("\n") + f"\nWORKDIR {wd}\nCOPY workdir/ {wd}/\n"
    if task.setup_script is not None:
        out += "COPY setup.sh /tmp/t1-setup.sh\nRUN bash /tmp/t1-setup.sh && rm -f /tmp/t1-setup.sh\n"
    return out


def _context(task: Task, dest: Path) -> None:
    (dest / "workdir").mkdir(parents=True, exist_ok=True)
    (dest / "workdir" / ".keep").write_text("")
    for p in task.workdir_files():
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, dest / "workdir" / p.name)
    if task.setup_script is not None:
        shutil.copy2(task.setup_script, dest / "setup.sh")
    (dest / "Dockerfile").write_text(_dockerfile(task))


def _tests(task: Task, dest: Path) -> None:
    shutil.copytree(task.tests_dir, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    rt = dest / RUNTIME_DIR
    rt.mkdir()
    bundle = runtime_bundle()
    for name in ("run_checks.py", "t1check.py", "pytest.zip", "pytest.ini"):
        shutil.copy2(bundle / name, rt / name)
    (rt / "to_reward.py").write_text(_TO_REWARD)
    (rt / "checks.json").write_text(json.dumps(task.declared_checks()))


def export_harbor(task: Task, out: Path) -> Path:
    d = out / task.id
    s = task.spec
    keys = task.declared_checks()
    toml = [
        'schema_version = "1.4"',
        "",
        "[task]",
        f'name = "t1/{task.id}"',
        f"description = {_toml_str(s.title)}",
        f"keywords = {json.dumps(list(s.tags))}",
    ]
    if s.author:
        toml.append(f"authors = [{{ name = {_toml_str(s.author)} }}]")
    toml += [
        "",
        "[metadata]",
        f'difficulty = "{s.difficulty}"',
        f"category = {_toml_str(s.category)}",
        f"tags = {json.dumps(list(s.tags))}",
        "",
        "[metadata.t1]",
        f"reward_keys = {json.dumps(keys)}",
        "",
        "[verifier]",
        f"timeout_sec = {float(s.limits.verifier_timeout)}",
        f'environment_mode = "{s.verifier.mode}"',
        "",
        "[agent]",
        f"timeout_sec = {float(s.limits.agent_timeout)}",
        "",
        "[environment]",
        f"cpus = {s.environment.cpus:g}",
        f"memory_mb = {s.environment.memory_mb}",
        f"workdir = {_toml_str(s.environment.workdir)}",
        f'network_mode = "{"public" if s.environment.network else "no-network"}"',
        "",
    ]
    d.mkdir(parents=True)
    (d / "task.toml").write_text("\n".join(toml))
    (d / "instruction.md").write_text(task.instruction + "\n")
    _context(task, d / "environment")
    (d / "solution").mkdir()
    shutil.copy2(task.solution, d / "solution" / "solve.sh")
    _tests(task, d / "tests")
    (d / "tests" / "test.sh").write_text(_HARBOR_TEST)
    (d / "tests" / "test.sh").chmod(0o755)
    return d


def export_terminal_bench(task: Task, out: Path) -> Path:
    import yaml

    d = out / task.id
    s = task.spec
    d.mkdir(parents=True)
    data = {
        "instruction": task.instruction,
        "author_name": s.author or "t1",
        "author_email": "unknown",
        "difficulty": s.difficulty,
        "category": s.category,
        "tags": list(s.tags),
        "parser_name": "pytest",
        "max_agent_timeout_sec": float(s.limits.agent_timeout),
        "max_test_timeout_sec": float(s.limits.verifier_timeout),
        "run_tests_in_same_shell": False,
    }
    (d / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    _context(task, d)
    (d / "docker-compose.yaml").write_text(_COMPOSE)
    shutil.copy2(task.solution, d / "solution.sh")
    _tests(task, d / "tests")
    (d / "run-tests.sh").write_text(_TB_RUN_TESTS)
    (d / "run-tests.sh").chmod(0o755)
    return d


def export(tasks: list[Task], fmt: str, out: str | Path) -> list[Path]:
    """Write each task in ``fmt`` under ``out``; returns the folders. Raises ExportError / TaskError (one line)."""
    if fmt not in FORMATS:
        raise ExportError(f"--format must be one of {FORMATS}, got {fmt!r}")
    out = Path(out)
    for t in tasks:
        if (out / t.id).exists():
            raise ExportError(f"{out / t.id}: already exists (export into an empty folder)")
    fn = export_harbor if fmt == "harbor" else export_terminal_bench
    try:
        return [fn(t, out) for t in tasks]
    except OSError as e:
        raise TaskError(f"{out}: could not write the export: {e}") from None

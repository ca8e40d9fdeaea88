"""Task validation: prove a task package is solvable, not trivially passable, and judged consistently.

For each task: it parses (one-line error otherwise); the sandbox (or Docker image) has ``python3``
for the verifier and the tools the task lists; the
oracle (``solution/solve.sh``) gets full marks on every one of ``runs`` episodes; the per-check
results are identical across those runs; the no-op agent (submits at once) gets less than
full marks; and no exploit of :mod:`t1env.tools.exploits` (generic shortcuts that do not do the task:
delete the inputs, touch the named outputs, empty commits, ...) earns more than
:data:`t1env.tools.exploits.TOLERANCE` checks beyond the no-op agent, or full marks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from t1env.agent.reference import NopAgent, OracleAgent, run_episode
from t1env.env import TerminalEnv
from t1env.registry import get_task
from t1env.sandbox import make_sandbox
from t1env.sandbox.local_zygote import ZygotePool
from t1env.task import TaskError
from t1env.tools.checks_lint import agent_code_problems
from t1env.tools.exploits import run_gate, verdicts
from t1env.tools.setup_leftovers import setup_leftover_problems


@dataclass
class Validation:
    task: str
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    oracle: list[tuple[int, int]] = field(default_factory=list)  # (passed, total) per run
    nop: tuple[int, int] | None = None
    exploits: list[dict] = field(default_factory=list)  # per exploit: name, passed, total, gained checks, error
    duration: float = 0.0


def environment_problems(task, backend: str = "local") -> list[str]:
    """What the sandbox lacks for this task: python3 (the verifier's runtime) and the listed tools."""
    if backend == "docker":
        from t1env.sandbox.docker import check_image  # the docker backend needs the docker extra (requests)

        return check_image(task)
    box = make_sandbox(backend, task)
    try:
        box.start()
        script = 'for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "$t"; done'
        r = box.exec(["sh", "-c", script, "sh", "python3", *task.spec.environment.tools], timeout=30)
        missing = r.stdout.decode().split()
    finally:
        box.stop()
    out = ["the sandbox has no python3: the verifier needs it"] if "python3" in missing else []
    rest = [t for t in missing if t != "python3"]
    if rest:
        out.append(f"tools missing in the {backend} sandbox: {', '.join(rest)} (task.toml environment.tools)")
    return out


def validate_task(
    task_ref: str | Path, backend: str = "local", runs: int = 2, exploits: bool = True, exploit_jobs: int = 1
) -> Validation:
    """Validate one task package (or family instance); ``exploits`` plays the exploit gate, ``exploit_jobs``
    exploits at a time."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an integer >= 1 (oracle runs per task), got {runs!r}")
    t0 = time.monotonic()
    v = Validation(task=str(task_ref))
    try:
        task = get_task(task_ref)
    except TaskError as e:
        v.problems.append(str(e))
        v.duration = time.monotonic() - t0
        return v
    v.task = task.id
    if task.env_dir.is_dir():
        empty = sorted(
            str(d.relative_to(task.path)) for d in task.env_dir.rglob("*") if d.is_dir() and not any(d.iterdir())
        )
        if empty:
            v.problems.append(
                f"empty folders are lost by git ({', '.join(empty)}): create them in environment/setup.sh"
            )
    v.problems += agent_code_problems(
        task
    )  # checks must not load the agent's code in process (t1env/tools/checks_lint.py)
    try:
        v.problems += environment_problems(task, backend)
        v.problems += setup_leftover_problems(task, backend)
        # one verifier zygote pool for the oracle, no-op and exploit episodes of the task: pytest imported once
        zygotes = ZygotePool(max_idle=max(2, exploit_jobs)) if backend == "local" else None
        env = TerminalEnv(task=str(task.path), backend=backend, zygote_pool=zygotes)
        try:
            signatures = []
            for i in range(runs):
                ep = run_episode(env, OracleAgent(task), seed=i)
                info = ep.info
                v.oracle.append((info["passed"], info["total"]))
                signatures.append([(c["name"], c["passed"]) for c in info["checks"]])
                undeclared = [
                    t["detail"].split(": ")[0] for t in info.get("tamper", []) if t["kind"] == "undeclared_check"
                ]
                if undeclared and i == 0:
                    v.problems.append(
                        f"pytest collects tests that are not plain test_* functions in tests/test_*.py, so they are not checks: "
                        f"{', '.join(undeclared[:5])} (write each check out as its own function)"
                    )
                if not info["resolved"]:
                    failing = [
                        f"{c['name']} ({c['message'].splitlines()[0] if c['message'] else c['outcome']})"
                        for c in info["checks"]
                        if not c["passed"]
                    ]
                    v.problems.append(
                        f"oracle run {i + 1}: {info['passed']}/{info['total']} — failing: {'; '.join(failing)[:500]}"
                    )
            if any(s != signatures[0] for s in signatures[1:]):
                v.problems.append("verifier results differ between identical oracle runs (flaky checks)")
            ep = run_episode(env, NopAgent(), seed=0)
            v.nop = (ep.info["passed"], ep.info["total"])
            if ep.info["resolved"]:
                v.problems.append("the no-op agent gets full marks: the checks do not test the work")
            if ep.info["total"] < 3:
                v.problems.append(
                    f"only {ep.info['total']} checks; a task needs at least 3 for partial credit to mean something"
                )
            if exploits:
                results = run_gate(task, ep.info, backend=backend, jobs=exploit_jobs, zygote_pool=zygotes)
                v.exploits = [
                    {"name": r.name, "passed": r.passed, "total": r.total, "gained": r.gained, "error": r.error}
                    for r in results
                ]
                v.problems += verdicts(results, ep.info["passed"])
        finally:
            env.close()
            if zygotes is not None:
                zygotes.close()
    except Exception as e:  # a broken task must not stop validation of the others
        v.problems.append(f"{type(e).__name__}: {e}")
    v.ok = not v.problems
    v.duration = time.monotonic() - t0
    return v

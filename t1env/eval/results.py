"""The job folder and its numbers: atomic JSON writes, per-trial results, and the job's metrics.

A job folder (``t1env eval --out DIR``) holds ``config.json`` (what was run), ``result.json`` (the metrics below,
rewritten after every finished trial) and one folder per trial, ``<task>__<attempt>/``, with ``result.json``,
``trajectory.json`` (ATIF) and ``terminal.cast`` (asciinema v2). A trial is finished when its ``result.json``
exists: every file is written to a temporary name and renamed into place, so a crash leaves either the whole file
or none, and ``--resume`` reruns exactly the trials without one.

Metrics (all over finished trials; an errored trial counts as a trial that did not resolve):

* ``resolved_rate``: resolved trials / trials; ``resolved_ci95``: the 95% **Wilson** score interval of that rate
  (attempts of one task are treated as independent draws);
* ``mean_passed_fraction``: mean of passed/total checks; ``mean_passed``: mean passing checks;
* ``pass_at_k[k]``: the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)`` per task with ``n``
  finished attempts of which ``c`` resolved, averaged over the tasks with ``n >= k``.

Example:
    >>> round(pass_at_k(n=4, c=1, k=2), 4)
    0.5
    >>> [round(x, 3) for x in wilson_interval(5, 10)]
    [0.237, 0.763]
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from t1env.files import write_atomic  # noqa: F401  (re-exported: the harness and the report write through it)

Z95 = 1.959963984540054


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    """Read a JSON file; a malformed one raises ``ValueError`` naming the file."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def trial_name(task_id: str, attempt: int) -> str:
    """The trial's folder name: ``<task>__<attempt>`` (a path-like task id keeps only its last part)."""
    return f"{task_id.replace('/', '_')}__{attempt}"


# ---------------------------------------------------------------------------------------------
# estimators
def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion (``(0, 1)`` when ``n == 0``)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends (no 0.9999999999999999)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): the chance that ``k`` of ``n`` samples, ``c`` correct, hold one correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


# ---------------------------------------------------------------------------------------------
# the job's metrics
def _rate(trials: list[dict]) -> dict:
    n = len(trials)
    r = sum(1 for t in trials if t["resolved"])
    lo, hi = wilson_interval(r, n)
    return {"n_trials": n, "resolved": r, "resolved_rate": r / n if n else 0.0, "resolved_ci95": [lo, hi]}


def _fraction(t: dict) -> float:
    return t["passed"] / t["total"] if t.get("total") else 0.0


def job_metrics(trials: Iterable[dict], attempts: int, expected_trials: int | None = None) -> dict:
    """The job's ``result.json`` body from its finished trials' ``result.json`` bodies."""
    trials = list(trials)
    by_task: dict[str, list[dict]] = defaultdict(list)
    for t in trials:
        by_task[t["task_id"]].append(t)
    overall = _rate(trials)
    n = len(trials)
    per_task = {}
    for tid, ts in sorted(by_task.items()):
        row = _rate(ts)
        row.update(
            category=ts[0].get("category"),
            difficulty=ts[0].get("difficulty"),
            total_checks=ts[0].get("total"),
            mean_passed=sum(t["passed"] for t in ts) / len(ts),
            mean_passed_fraction=sum(_fraction(t) for t in ts) / len(ts),
            # an imported task's checks that ran the agent's code in their process: only as good as that code
            checks_trusting_agent_code=sorted({c for t in ts for c in t.get("checks_trusting_agent_code") or []}),
        )
        per_task[tid] = row
    curve = {}
    for k in range(1, attempts + 1):
        vals = [pass_at_k(len(ts), sum(t["resolved"] for t in ts), k) for ts in by_task.values() if len(ts) >= k]
        if vals:
            curve[str(k)] = sum(vals) / len(vals)
    groups = {}
    for key in ("category", "difficulty"):
        g: dict[str, list[dict]] = defaultdict(list)
        for t in trials:
            g[str(t.get(key))].append(t)
        groups[key] = {name: _rate(ts) for name, ts in sorted(g.items())}
    errors = Counter(t["error"]["kind"] for t in trials if t.get("error"))
    prompt = [t["tokens"]["prompt"] for t in trials]
    completion = [t["tokens"]["completion"] for t in trials]
    return {
        **overall,
        "n_expected_trials": expected_trials if expected_trials is not None else n,
        "complete": expected_trials is None or n >= expected_trials,
        "mean_passed_fraction": sum(_fraction(t) for t in trials) / n if n else 0.0,
        "mean_passed": sum(t["passed"] for t in trials) / n if n else 0.0,
        "pass_at_k": curve,
        "n_errors": sum(errors.values()),
        "trials_trusting_agent_code": sum(1 for t in trials if t.get("checks_trusting_agent_code")),
        "errors_by_kind": dict(sorted(errors.items())),
        "per_category": groups["category"],
        "per_difficulty": groups["difficulty"],
        "per_task": per_task,
        "mean_wall_time_s": sum(t["wall_time_s"] for t in trials) / n if n else 0.0,
        "mean_turns": sum(t["turns"] for t in trials) / n if n else 0.0,
        "tokens": {
            "prompt": sum(prompt),
            "completion": sum(completion),
            "mean_prompt_per_trial": sum(prompt) / n if n else 0.0,
            "mean_completion_per_trial": sum(completion) / n if n else 0.0,
        },
        "cost_usd": sum(t.get("cost_usd") or 0.0 for t in trials),
        "ci_method": "wilson",
    }


def finished_trials(job_dir: Path) -> dict[str, dict]:
    """``{trial folder name: result}`` for every trial of the job with a ``result.json``."""
    out = {}
    for p in sorted(Path(job_dir).glob("*/result.json")):
        out[p.parent.name] = read_json(p)
    return out

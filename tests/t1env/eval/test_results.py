"""Metrics: pass@k against brute-force enumeration, the Wilson interval against its closed form, job metrics."""

import itertools
import math

import pytest

from t1env.eval.results import job_metrics, pass_at_k, read_json, wilson_interval, write_json


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (3, 1), (4, 2), (5, 0), (5, 5), (6, 3)])
def test_pass_at_k_equals_the_chance_a_random_k_subset_holds_a_success(n, c):
    samples = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(range(n), k))
        brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
        assert pass_at_k(n, c, k) == pytest.approx(brute)


def test_pass_at_k_rejects_k_over_n():
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)


def test_wilson_interval_matches_the_textbook_values():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(0.7225, abs=1e-4) and hi == 1.0
    lo, hi = wilson_interval(7, 20)
    assert (lo, hi) == pytest.approx((0.1812, 0.5671), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def _trial(task, attempt, passed, total, err=None, category="files"):
    return {
        "task_id": task,
        "attempt": attempt,
        "passed": passed,
        "total": total,
        "resolved": passed == total,
        "category": category,
        "difficulty": "easy",
        "wall_time_s": 1.0,
        "turns": 2,
        "tokens": {"prompt": 10, "completion": 5},
        "cost_usd": 0.0,
        "error": {"kind": err, "message": "x"} if err else None,
    }


def test_job_metrics_per_task_pass_at_k_and_errors():
    trials = [
        _trial("a", 0, 3, 3),
        _trial("a", 1, 1, 3),
        _trial("b", 0, 0, 2, err="agent_error", category="git"),
        _trial("b", 1, 0, 2),
    ]
    m = job_metrics(trials, attempts=2, expected_trials=6)
    assert m["resolved_rate"] == 0.25 and m["n_trials"] == 4 and not m["complete"]
    assert m["pass_at_k"] == {"1": pytest.approx(0.25), "2": pytest.approx(0.5)}
    assert m["mean_passed"] == 1.0
    assert m["mean_passed_fraction"] == pytest.approx((1 + 1 / 3) / 4)
    assert m["n_errors"] == 1 and m["errors_by_kind"] == {"agent_error": 1}
    assert m["per_task"]["a"]["resolved_rate"] == 0.5 and m["per_category"]["git"]["resolved_rate"] == 0.0
    assert m["tokens"]["prompt"] == 40 and m["resolved_ci95"] == list(wilson_interval(1, 4))


def test_read_json_names_the_broken_file(tmp_path):
    p = tmp_path / "result.json"
    p.write_text('{"half": ')
    with pytest.raises(ValueError, match=str(p)):
        read_json(p)
    write_json(p, {"ok": math.pi})
    assert read_json(p) == {"ok": math.pi} and [x.name for x in tmp_path.iterdir()] == ["result.json"]

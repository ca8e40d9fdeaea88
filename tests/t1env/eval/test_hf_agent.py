"""`--agent hf`: t1's tiny MoE checkpoint sampled in-process, through the real harness and sandbox."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from t1env.cli import main
from t1env.eval import EvalConfig, EvalOptions, run_job
from t1env.eval.results import read_json

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap]


def test_tiny_checkpoint_runs_trials_and_counts_tokens(tmp_path):
    from t1train.models import tiny_moe_path

    model = str(tiny_moe_path())
    options = EvalOptions(model=model, max_tokens=16)
    m = run_job(
        EvalConfig(tasks=["hello-file"], agent="hf", attempts=2, concurrency=2, max_turns=2, options=options),
        tmp_path / "job",
    )
    assert m["n_trials"] == 2 and m["n_errors"] == 0
    for a in (0, 1):
        r = read_json(tmp_path / "job" / f"hello-file__{a}" / "result.json")
        traj = read_json(tmp_path / "job" / f"hello-file__{a}" / "trajectory.json")
        assert r["end_reason"] in ("submitted", "max_turns") and r["total"] == 5
        assert 0 < r["tokens"]["completion"] <= 16 * 2 * 2  # at most two calls a turn, two turns
        assert sum(s["metrics"]["prompt_tokens"] for s in traj["steps"][1:]) == r["tokens"]["prompt"] > 0


def test_a_folder_that_is_not_a_checkpoint_is_one_line(tmp_path, capsys):
    assert main(["eval", "hello-file", "--agent", "hf", "--model", str(tmp_path), "--out", str(tmp_path / "j")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"t1env eval: --model {tmp_path}: not a loadable checkpoint folder") and "\n" not in err

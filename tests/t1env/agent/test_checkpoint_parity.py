"""A t1train checkpoint scores the same under ``t1env eval --agent hf`` as in t1train's own evaluation.

Issue 26: the tiny-cpu checkpoint resolved 0.62 of held-out ``chain`` instances in ``t1train``'s evaluation and 0 of
40 under ``t1env eval --agent hf`` (another system prompt, parser and observation format). Now both speak the
protocol of ``t1env/agent/protocol.py`` and the checkpoint carries the one it was trained with (``t1_protocol.json``:
its system prompt ``Act in the shell.``, 24 tokens per turn, 6 turns, cut turns rejected). A short SFT warm-start
on ``chain``, then both evaluations at temperature 0 on the same held-out instances: each episode must type the same
commands, sample the same number of tokens and pass the same checks. Real model, sandboxes and verifier throughout.
"""

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from t1env.agent.protocol import Protocol
from t1env.eval import EvalConfig, EvalOptions, run_job
from t1env.eval.results import read_json
from t1train.cli import main as t1train_main

pytestmark = pytest.mark.slow  # an SFT warm-start and two evaluations of the tiny model: minutes on 2 cores

CONFIG = """
model: tiny
torch_threads: 1
sft:
  tasks: [chain@train:43]
  seeds: [0]
  turns: lines
  max_steps: 80
  learning_rate: 2.0e-3
  lr_scheduler_type: linear
  per_device_train_batch_size: 8
train:
  output_dir: {out}
  tasks: [chain@train:43]
  system_prompt: "Act in the shell."
  max_turns: 6
  max_new_tokens: 24
  truncated_turns: reject
  rollout_concurrency: 3
  disable_tqdm: true
  seed: 0
eval:
  tasks: [chain@test:3]
  seeds: [1000]
  episodes_per_task: 1
  temperature: 0.0
"""


def _commands(turns: list[dict]) -> list[str]:
    return [t["action"]["command"] for t in turns if (t.get("action") or {}).get("kind") == "command"]


def _typed(trajectory: dict) -> list[str]:
    return [
        call["arguments"]["command"]
        for step in trajectory["steps"]
        if step["source"] == "agent"
        for call in step["tool_calls"]
        if call["function_name"] == "bash"
    ]


@pytest.mark.timeout(1800)  # about 5 minutes on a quiet 2-core machine
def test_a_checkpoint_scores_the_same_in_t1train_and_t1env_eval(tmp_path):
    config = tmp_path / "chain.yaml"
    config.write_text(CONFIG.format(out=tmp_path / "run"))
    assert t1train_main(["sft", "--config", str(config)]) == 0
    ckpt = tmp_path / "run" / "sft"
    assert Protocol.load(ckpt) == Protocol(
        system_prompt="Act in the shell.",
        max_new_tokens=24,
        max_turns=6,
        max_context_tokens=4096,
        truncated_turns="reject",
    )

    assert (
        t1train_main(
            ["eval", "--config", str(config), "--model", str(ckpt), "--output-dir", str(tmp_path / "t1train-eval")]
        )
        == 0
    )
    lines = (tmp_path / "t1train-eval" / "trajectories.jsonl").read_text().splitlines()
    t1train = {t["task_id"]: t for t in map(json.loads, lines)}
    assert len(t1train) == 3

    job = tmp_path / "t1env-eval"
    m = run_job(
        EvalConfig(tasks=["chain@0", "chain@5", "chain@10"], agent="hf", options=EvalOptions(model=str(ckpt))), job
    )
    assert m["n_trials"] == 3 and m["n_errors"] == 0
    typed = 0
    for result_file in sorted(Path(job).glob("*/result.json")):
        r = read_json(result_file)
        ours = read_json(result_file.parent / "trajectory.json")
        theirs = t1train[r["task_id"]]
        assert _typed(ours) == _commands(theirs["turns"]), r["task_id"]
        assert r["tokens"]["completion"] == sum(len(t["sampled_ids"]) for t in theirs["turns"]), r["task_id"]
        assert (r["passed"], r["total"]) == (theirs["checks"]["passed"], theirs["checks"]["total"]), r["task_id"]
        typed += len(_typed(ours))
    assert typed >= 3, "the checkpoint typed almost nothing: the comparison would hold for any protocol"

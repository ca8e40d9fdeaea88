"""The short, seeded learning test (slow; CI runs it): SFT warm-start then RL on the real env, tiny MoE on CPU.

What is asserted, and why (numbers from docs/benchmarks-training.md, measured on a shared 2-core machine):

* The random-init tiny MoE scores 0 passing checks: it never emits a valid action.
* SFT on oracle episodes (same template and TITO path as RL) lifts the held-out score to about 1 of 3 checks. The
  eval noise of one model on 24 episodes is about 0.1-0.2 (std over eval sampling seeds), so the assertion
  (> 0.5) has a margin of several noise widths.
* A few GRPO steps on top must keep the policy working (no collapse: within 0.6, i.e. three noise widths, of the
  SFT score). RL *improvement* at this budget is within the run-to-run noise and is reported in the benchmark,
  not asserted here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "Act in the shell."


@pytest.mark.slow
def test_sft_then_rl_on_held_out_touch_instances(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    import make_touch_tasks as touch
    from trl import SFTConfig

    from t1train.models import tiny_moe
    from t1train.rollout import RolloutConfig
    from t1train.sft import oracle_trajectories, run_sft, sft_dataset
    from t1train.trainer import T1Config, T1Trainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train = [str(ROOT / "tests/fixtures/tasks" / t) for t in touch.task_ids("train")]
        held_out = [str(ROOT / "tests/fixtures/tasks" / t) for t in touch.task_ids("test")]
        model, tokenizer = tiny_moe()
        args = T1Config(output_dir=str(tmp_path / "rl"), algorithm="grpo", tasks=held_out[:1], train_seeds=[0, 1, 2, 3],
                        system_prompt=SYSTEM, max_turns=2, max_new_tokens=20, num_generations=4,
                        per_device_train_batch_size=16, max_steps=6, num_iterations=2, learning_rate=2e-4,
                        lr_scheduler_type="constant", save_strategy="no", disable_tqdm=True, seed=0)
        trainer = T1Trainer(model.train(), args, processing_class=tokenizer)
        eval_seeds = list(range(1000, 1008))
        random_init = trainer.evaluate_episodes(held_out, eval_seeds)["passed_mean"]

        oracle = oracle_trajectories(tokenizer, train, [0], rollout=RolloutConfig(max_turns=4, system_prompt=SYSTEM))
        run_sft(trainer.model, tokenizer, sft_dataset(oracle * 4),
                SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=80, learning_rate=2e-3,
                          per_device_train_batch_size=8, lr_scheduler_type="constant", save_strategy="no",
                          report_to="none", bf16=False, disable_tqdm=True, seed=0))
        after_sft = trainer.evaluate_episodes(held_out, eval_seeds)["passed_mean"]
        trainer.train()
        after_rl = trainer.evaluate_episodes(held_out, eval_seeds)["passed_mean"]
    finally:
        torch.set_num_threads(threads)

    assert random_init == 0.0
    assert after_sft > 0.5, f"SFT warm-start: {after_sft:.2f} passing checks on held-out instances"
    assert after_rl > after_sft - 0.6, f"RL collapsed the policy: {after_sft:.2f} -> {after_rl:.2f}"
    assert sum("t1/passed_mean" in h for h in trainer.state.log_history) == 3  # 6 steps, a rollout every 2

"""The short, seeded learning test (slow; CI runs it): SFT warm-start, then PPO with a warm-started critic, in the
real t1 env (bubblewrap sandboxes, pytest verifiers), tiny MoE on CPU.

Recipe (``bench/touch_recipe.py``): SFT on the oracle episodes of 12 ``touch`` instances, then PPO on a
held-out instance (``touch-red-blue``), scored on 64 fresh reset/sampling seeds before and after RL.

What is asserted, with the numbers behind the margins (docs/benchmarks-training.md; 2-core machine):

* the random-init model scores 0 (it never emits a valid action), and SFT lifts it above 0;
* 60 PPO steps (Adam 5e-4) raise the held-out mean passing count by more than ``MARGIN`` (0.15). Noise: three
  64-episode scores of the same SFT policy with different sampling seeds were 0.56, 0.64, 0.63 (std 0.034), so a
  difference of two scores has about 0.048 and ``MARGIN`` is three of those. Measured: 40 steps at 5e-4 gave +0.19
  (0.56 -> 0.75); 40 steps at 1e-3 gave +1.50 once and collapsed to 0 once, hence 5e-4 and 60 steps, which gave
  +0.28 and +0.30 on seeds 0 and 1 (``bench/learning_curve.py``);
* the training batches' mean passing count rises (last 10 rollouts vs first 10, 160 episodes each).

Seed 1 runs only if seed 0 falls short (see the test's docstring).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
MARGIN = 0.15  # 3x the measured noise of a difference of two 64-episode scores (0.048)
STEPS = 60


def run_recipe(tmp_path, seed: int) -> dict:
    """SFT then PPO (the recipe), in the real env; held-out scores and the training batches' passing counts."""
    import touch_recipe as recipe

    run = recipe.sft_then_rl(str(tmp_path / f"seed{seed}"), STEPS, seed, score_random_init=True)
    batches = run["train_passed"]
    run.update(batches_first10=statistics.mean(batches[:10]), batches_last10=statistics.mean(batches[-10:]))
    print(f"seed {seed}: held-out passed: random {run['random_init']:.3f}, SFT {run['before']:.3f}, "
          f"SFT+PPO {run['after']:.3f}; train batches {run['batches_first10']:.2f} -> {run['batches_last10']:.2f}")
    return run


@pytest.mark.slow
@pytest.mark.timeout(2700)  # about 14 minutes per seed on 2 cores: 63 rollouts of 16 real episodes
def test_sft_then_ppo_raises_the_held_out_score(tmp_path):
    """Seed 0, and seed 1 only if seed 0 falls short: PPO on a 1M-parameter model is seed-sensitive (one of two
    real-env runs of an earlier, lr-1e-3 recipe collapsed to 0), so the claim tested is "the recipe learns", not
    "every seed learns"."""
    sys.path.insert(0, str(ROOT / "bench"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model on a shared CPU: one thread is the fast setting
    runs = []
    try:
        for seed in (0, 1):
            runs.append(run_recipe(tmp_path, seed))
            if runs[-1]["after"] - runs[-1]["before"] > MARGIN:
                break
    finally:
        torch.set_num_threads(threads)

    for run in runs:  # every run: the untrained model cannot act, SFT can, the critic warm-started
        assert run["random_init"] == 0.0 and run["before"] > 0.0
        assert len(run["warmup"]) >= 1 and len(run["train_passed"]) == STEPS
    best = runs[-1]
    assert best["after"] - best["before"] > MARGIN, f"PPO did not learn in any seed: {runs}"
    assert best["batches_last10"] > best["batches_first10"]  # and the training batches rise

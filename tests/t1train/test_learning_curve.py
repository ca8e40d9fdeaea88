"""The short, seeded learning test (slow; CI runs it): SFT warm-start, then PPO with a warm-started critic, in the
real t1 env (bubblewrap sandboxes, pytest verifiers), tiny MoE on CPU.

Recipe (``bench/touch_recipe.py``, the recipe of ``bench/learning_curve.py``): SFT on the oracle episodes of 12
``touch`` instances, then PPO on a held-out instance (``touch-red-blue``), scored on 64 fresh reset/sampling seeds
before and after RL.

What is asserted, with the numbers behind the margins (docs/benchmarks-training.md; 2-core machine):

* the random-init model scores 0 (it never emits a valid action), and SFT lifts it above 0;
* 60 PPO steps (Adam 5e-4) raise the held-out mean passing count by more than ``MARGIN`` (0.15). Noise: three
  64-episode scores of the same SFT policy with different sampling seeds were 0.56, 0.64, 0.63 (std 0.034), so a
  difference of two scores has about 0.048 and ``MARGIN`` is three of those. Measured with this recipe
  (``bench/learning_curve.py``, docs/learning_curve.md): seed 0 gained +0.28 (to 0.84 held out), seed 1 +0.30;
  40 steps at 1e-3 once gained +1.50 and once collapsed to 0, hence 5e-4 and 60 steps;
* the training batches' mean passing count rises (last 10 rollouts vs first 10, 160 episodes each).

Training rollouts sample with a seed per (step, episode, turn) (``T1Trainer.rollout``), so a run does not depend
on which episodes share the engine's batches, i.e. on the machine's load: with one generator for all episodes, the
same seed-0 run gained +0.34 on a quiet machine and collapsed to 0 under CI (2026-11-30). Seeded: 0.562 -> 0.891.

One run, seed 0, no second try: the seed-0 gain (+0.28) is about six noise widths above 0 and nearly twice
``MARGIN``, so a shortfall is a regression to look at, not bad luck to retry away. PPO on a 1M-parameter model is
seed-sensitive (see above); if this test fails, rerun ``bench/learning_curve.py --seeds 0 1 2`` to tell a recipe
regression from a seed that stopped learning, and report what it shows.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
MARGIN = 0.15  # 3x the measured noise of a difference of two 64-episode scores (0.048)
STEPS = 60
SEED = 0


@pytest.mark.slow
@pytest.mark.timeout(1500)  # about 14 minutes on 2 cores: 63 rollouts of 16 real episodes
def test_sft_then_ppo_raises_the_held_out_score(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import touch_recipe as recipe

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model on a shared CPU: one thread is the fast setting
    try:
        run = recipe.sft_then_rl(str(tmp_path / f"seed{SEED}"), STEPS, SEED, score_random_init=True)
    finally:
        torch.set_num_threads(threads)
    batches = run["train_passed"]
    first10, last10 = statistics.mean(batches[:10]), statistics.mean(batches[-10:])
    print(f"seed {SEED}: held-out passed: random {run['random_init']:.3f}, SFT {run['before']:.3f}, "
          f"SFT+PPO {run['after']:.3f}; train batches {first10:.2f} -> {last10:.2f}")

    assert run["random_init"] == 0.0 and run["before"] > 0.0  # the untrained model cannot act, SFT can
    assert len(run["warmup"]) >= 1 and len(batches) == STEPS  # the critic warm-started, every step ran
    assert run["after"] - run["before"] > MARGIN, f"PPO gained {run['after'] - run['before']:+.3f}: {run}"
    assert last10 > first10  # and the training batches rise

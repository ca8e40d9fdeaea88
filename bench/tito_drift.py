"""Loss-region token drift: TITO vs decode-and-re-tokenize, on the same rollouts.

Runs episodes of a t1 task with the tiny MoE (random weights: it samples non-canonical BPE splits often, which is
exactly what an RL-shifted policy also does, only more so) and prints, per sampling setting, how many sampled
tokens each pipeline would hand the trainer wrongly.

    python bench/tito_drift.py --episodes 8 --max-turns 10
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="hello-file")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()

    import gymnasium as gym

    import t1env  # noqa: F401
    from t1train.engines.base import SamplingParams
    from t1train.engines.hf import HFEngine
    from t1train.models import tiny_moe
    from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner, rollout_metrics

    model, tok = tiny_moe()
    engine = HFEngine(model, tok)
    settings = [
        ("temperature 1.0", SamplingParams(max_new_tokens=args.max_new_tokens)),
        ("temperature 0.7", SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.7)),
        ("stop string \\n", SamplingParams(max_new_tokens=args.max_new_tokens, stop=["\n"])),
        ("greedy", SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0)),
    ]
    print(f"task {args.task}, {args.episodes} episodes x up to {args.max_turns} turns, tiny MoE on CPU\n")
    header = (
        f"{'sampling':<18} {'turns':>6} {'sampled':>8} {'TITO drift':>11} {'re-tok drift':>13} "
        f"{'re-tok turns':>13} {'time':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, sampling in settings:
        sampling.seed = 0
        cfg = RolloutConfig(max_turns=args.max_turns, concurrency=4)
        runner = RolloutRunner(engine, tok, lambda task: gym.make("T1Terminal-v0", task=task), sampling, cfg)
        t0 = time.monotonic()
        trajs = runner.run([EpisodeSpec(args.task, i) for i in range(args.episodes)])
        m = rollout_metrics(trajs, tok)
        print(
            f"{name:<18} {m['assistant_turns']:>6} {m['loss_tokens']:>8} {m['tito_drift_tokens']:>11} "
            f"{m['retokenize_drift_tokens']:>13} {m['retokenize_drift_turns']:>6}/{m['assistant_turns']:<6} "
            f"{time.monotonic() - t0:>6.1f}s"
        )


if __name__ == "__main__":
    main()

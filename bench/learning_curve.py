"""Learning curves on CPU: SFT warm-start, then PPO with critic warm-start vs PPO without vs GRPO, several seeds.

Recipe (``bench/touch_recipe.py``, which the CI learning test runs too): SFT of the tiny MoE on the oracle
episodes of 12 ``touch`` instances (in every run, ~20 s, in the CI test's order), then RL on a held-out instance
(``touch-red-blue``) for ``--steps`` optimizer steps of 16 episodes each, in the real env (bubblewrap sandboxes,
pytest verifiers).
Every variant gets the same budget: PPO with warm-start spends its warm-start rollouts on top (reported).

Measured per run: the held-out score (mean passing checks of 64 fresh seeded episodes) before and after RL, and
the mean passing count of every training batch. Noise: the same SFT policy scored with 3 different eval sampling
seeds (the spread of one 64-episode score).

Writes ``docs/learning_curve.png``, ``docs/learning_curve.md`` (the table quoted by ``docs/benchmarks-training.md``)
and ``docs/learning_curve.json``, and prints the table.

Usage::

    python bench/learning_curve.py [--steps 60] [--seeds 0 1] [--variants ppo-warm ppo grpo] [--resume]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch
import touch_recipe as recipe  # bench/touch_recipe.py, beside this script

ROOT = Path(__file__).resolve().parent.parent


def held_out_score(trainer, seed_offset: int = 0) -> float:
    saved = trainer.args.seed
    trainer.args.seed = saved + seed_offset
    try:
        return trainer.evaluate_episodes([recipe.task_path(recipe.RL_TASK)], recipe.EVAL_SEEDS)["passed_mean"]
    finally:
        trainer.args.seed = saved


def main() -> None:
    parser = argparse.ArgumentParser(description="SFT + RL learning curves on a held-out touch instance")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--variants", nargs="+", default=list(recipe.VARIANTS), choices=list(recipe.VARIANTS))
    parser.add_argument("--sft-steps", type=int, default=80)
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs in OUT/learning_curve.json (same --steps); run only the missing ones")
    args = parser.parse_args()
    out = Path(args.out)
    saved = out / "learning_curve.json"

    from t1train.storage import write_text_atomic

    def save() -> None:  # after every run: a full comparison takes over an hour, and --resume picks up from here
        # atomically: a kill while saving must not leave a torn file that --resume cannot read
        write_text_atomic(saved, json.dumps({"steps": args.steps, "runs": runs, "sft_eval_noise": noise}, indent=1))
    torch.set_num_threads(1)

    from t1train.models import tiny_moe
    from t1train.trainer import T1Trainer

    previous = json.loads(saved.read_text()) if args.resume and saved.exists() else {}
    if previous.get("steps") == args.steps and previous.get("sft_eval_noise"):
        noise, runs = previous["sft_eval_noise"], previous["runs"]
    else:
        model, tokenizer = tiny_moe()
        probe = T1Trainer(model.train(), recipe.rl_config(tempfile.mkdtemp(), 1, 0, "grpo"),
                          processing_class=tokenizer)
        recipe.sft_warm_start(probe.model, tokenizer, args.sft_steps)
        noise, runs = [held_out_score(probe, 100 + k) for k in range(3)], []
        save()
    print("eval noise of the SFT policy: " + ", ".join(f"{x:.3f}" for x in noise), flush=True)

    done = {(r["variant"], r["seed"]) for r in runs}
    for seed in args.seeds:
        for name in args.variants:
            if (name, seed) in done:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                run = recipe.sft_then_rl(tmp, args.steps, seed, name, args.sft_steps)
            runs.append(run)
            save()
            tb = run["train_passed"]
            print(f"{name:<9} seed {seed}: held-out {run['before']:.3f} -> {run['after']:.3f}; train batches "
                  f"{statistics.mean(tb[:10]):.2f} -> {statistics.mean(tb[-10:]):.2f} ({run['seconds']:.0f}s)",
                  flush=True)

    runs = [r for r in runs if r["variant"] in args.variants and r["seed"] in args.seeds]
    table = render_table(runs, noise, args)
    write_text_atomic(out / "learning_curve.md", table)
    plot(runs, noise, out / "learning_curve.png")
    print(table)


def render_table(runs, noise, args) -> str:
    lines = ["| variant | seeds | held-out before | after (per seed) | gain (per seed) | train batches, first 10 → "
             "last 10 | critic EV, first 10 steps | rollouts |",
             "|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["variant"] for r in runs):
        rs = [r for r in runs if r["variant"] == name]
        gains = [r["after"] - r["before"] for r in rs]
        first = statistics.mean(statistics.mean(r["train_passed"][:10]) for r in rs)
        last = statistics.mean(statistics.mean(r["train_passed"][-10:]) for r in rs)
        rollouts = args.steps + (len(rs[0]["warmup"]) if rs[0]["warmup"] else 0)
        ev = [statistics.mean(r["explained_variance"][:10]) for r in rs if r["explained_variance"]]
        ev_cell = f"{statistics.mean(ev):.2f}" if ev else "—"
        afters = ", ".join(f"{r['after']:.2f}" for r in rs)
        per_seed = ", ".join(f"{g:+.2f}" for g in gains)
        lines.append(
            f"| {name} | {len(rs)} | {statistics.mean(r['before'] for r in rs):.2f} | "
            f"{statistics.mean(r['after'] for r in rs):.2f} ({afters}) | "
            f"**{statistics.mean(gains):+.2f}** ({per_seed}) | {first:.2f} → {last:.2f} | {ev_cell} | {rollouts} |")
    spread = statistics.pstdev(noise)
    lines += ["", f"Held-out score: mean passing checks (of 3) over {len(recipe.EVAL_SEEDS)} fresh seeded episodes of "
              f"{recipe.RL_TASK}. Noise of one such score (the SFT policy, {len(noise)} eval sampling seeds): "
              f"{', '.join(f'{x:.3f}' for x in noise)} (std {spread:.3f}).",
              f"Budget per run: {args.steps} optimizer steps, one rollout of 16 episodes each; SFT {args.sft_steps} "
              "steps on the 12 train instances. `rollouts` counts the critic warm-start's rollouts too. Critic EV: the "
              "explained variance of the critic's values on each fresh batch, before it trains on it (PPO only)."]
    return "\n".join(lines) + "\n"


def plot(runs, noise, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ppo-warm": "tab:blue", "ppo": "tab:orange", "grpo": "tab:green"}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    for r in runs:
        tb = r["train_passed"]
        smooth = [statistics.mean(tb[max(0, i - 4): i + 1]) for i in range(len(tb))]
        ax.plot(range(1, len(tb) + 1), smooth, color=colors[r["variant"]], alpha=0.8,
                label=f"{r['variant']} (seed {r['seed']})")
    ax.set_xlabel("optimizer step (one rollout of 16 episodes each)")
    ax.set_ylabel("training batch mean passing checks\n(moving average of 5)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    names = list(dict.fromkeys(r["variant"] for r in runs))
    for i, name in enumerate(names):
        for r in (r for r in runs if r["variant"] == name):
            bx.plot([i - 0.15, i + 0.15], [r["before"], r["after"]], marker="o", color=colors[name], alpha=0.8)
    bx.axhspan(min(noise), max(noise), color="0.5", alpha=0.2, label="eval noise: one SFT policy, 3 eval seeds")
    bx.legend(fontsize=7, loc="lower right")
    bx.set_xticks(range(len(names)), names)
    bx.set_ylabel("held-out mean passing checks (max 3)\nbefore → after RL")
    bx.grid(alpha=0.3)
    fig.suptitle("tiny MoE on CPU: SFT warm-start, then RL on a held-out touch instance")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

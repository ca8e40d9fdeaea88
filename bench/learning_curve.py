"""Learning curve on CPU: SFT warm-start, then RL, evaluated on held-out task instances.

Task set: ``touch`` (``tests/fixtures/make_touch_tasks.py``): "create two named empty files in /app and nothing
else", three checks (two files, nothing else), 12 train instances and 3 held-out ones (new name pairs).

1. SFT warm-start of the tiny MoE on the oracle episodes of the 12 train instances (once, shared by every run).
2. For each variant (PPO with critic warm-start, PPO without, GRPO) and each seed: RL on one held-out instance
   (``touch-red-blue``, never seen in SFT) for ``--steps`` optimizer steps (16 episodes per rollout, each rollout
   used for ``num_iterations=2`` steps), evaluating it every ``--eval-every`` steps on 24 fresh reset/sampling
   seeds. (RL across all 12 train instances at once did not improve within this CPU budget; see
   ``docs/benchmarks-training.md``.)
3. Run-to-run noise: the spread of the final held-out score across seeds, and the eval noise of the SFT model
   alone (the same model scored with different eval sampling seeds).

Writes ``docs/learning_curve.png`` and ``docs/learning_curve.md`` (the table that
``docs/benchmarks-training.md`` quotes), and prints the table.

Usage::

    python bench/learning_curve.py [--steps 20] [--seeds 0 1] [--variants ppo-warm ppo grpo]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import make_touch_tasks as touch  # noqa: E402

SYSTEM = "Act in the shell."
VARIANTS = {
    "ppo-warm": dict(algorithm="ppo", critic_warmup_iterations=3),
    "ppo": dict(algorithm="ppo", critic_warmup_iterations=0),
    "grpo": dict(algorithm="grpo"),
}


def task_paths(split: str) -> list[str]:
    return [str(ROOT / "tests" / "fixtures" / "tasks" / t) for t in touch.task_ids(split)]


def rl_config(out: str, steps: int, seed: int, eval_every: int, **variant):
    from t1train.trainer import T1Config

    rl_tasks = task_paths("test")[:1]
    return T1Config(output_dir=out, tasks=rl_tasks, train_seeds=[0, 1, 2, 3], system_prompt=SYSTEM, max_turns=2,
                    max_new_tokens=20, num_generations=4, per_device_train_batch_size=16, max_steps=steps,
                    num_iterations=2, learning_rate=2e-4, lr_scheduler_type="constant", critic_learning_rate=1e-3,
                    critic_warmup_ev_threshold=0.5, eval_tasks=rl_tasks, eval_seeds=list(range(1000, 1024)),
                    eval_every_steps=eval_every, save_strategy="no", disable_tqdm=True, seed=seed, **variant)


def sft_model(tokenizer, model, steps: int):
    from trl import SFTConfig

    from t1train.rollout import RolloutConfig
    from t1train.sft import oracle_trajectories, run_sft, sft_dataset

    trajectories = oracle_trajectories(tokenizer, task_paths("train"), [0],
                                       rollout=RolloutConfig(max_turns=4, system_prompt=SYSTEM))
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(output_dir=out, max_steps=steps, learning_rate=2e-3, per_device_train_batch_size=8,
                         lr_scheduler_type="constant", save_strategy="no", report_to="none", bf16=False,
                         disable_tqdm=True, logging_steps=1000, seed=0)
        run_sft(model, tokenizer, sft_dataset(trajectories * 4), args)
    return model


def run_variant(name: str, base, tokenizer, steps: int, seed: int, eval_every: int) -> dict:
    from transformers import PrinterCallback

    from t1train.trainer import T1Trainer, _EpisodeEvalCallback

    with tempfile.TemporaryDirectory() as out:
        trainer = T1Trainer(copy.deepcopy(base), rl_config(out, steps, seed, eval_every, **VARIANTS[name]),
                            processing_class=tokenizer)
        trainer.remove_callback(PrinterCallback)
        t0 = time.monotonic()
        trainer.train()
        elapsed = time.monotonic() - t0
    evals = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, _EpisodeEvalCallback)).history
    train_curve = [h["t1/passed_mean"] for h in trainer.state.log_history if "t1/passed_mean" in h]
    return {"variant": name, "seed": seed, "eval": evals, "train_passed": train_curve, "seconds": elapsed,
            "warmup": trainer.critic_warmup_history}


def main() -> None:
    parser = argparse.ArgumentParser(description="SFT + RL learning curve on held-out touch instances")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--sft-steps", type=int, default=80)
    parser.add_argument("--out", default=str(ROOT / "docs"))
    args = parser.parse_args()
    torch.set_num_threads(1)

    from t1train.models import tiny_moe
    from t1train.trainer import T1Trainer

    model, tokenizer = tiny_moe()
    t0 = time.monotonic()
    base = sft_model(tokenizer, model.train(), args.sft_steps)
    print(f"SFT warm-start: {args.sft_steps} steps, {time.monotonic() - t0:.0f}s")

    # eval noise of the SFT model alone: the same weights, different eval sampling seeds
    probe = T1Trainer(copy.deepcopy(base), rl_config(tempfile.mkdtemp(), 1, 0, 0, algorithm="grpo"),
                      processing_class=tokenizer)
    sft_scores = []
    for s in range(3):
        probe.args.seed = 100 + s
        sft_scores.append(probe.evaluate_episodes(probe.args.eval_tasks, probe.args.eval_seeds)["passed_mean"])

    runs = []
    for seed in args.seeds:
        for name in args.variants:
            run = run_variant(name, base, tokenizer, args.steps, seed, args.eval_every)
            runs.append(run)
            print(f"{name:<9} seed {seed}: held-out passed "
                  + " ".join(f"{e['step']}:{e['passed_mean']:.2f}" for e in run["eval"]) + f"  ({run['seconds']:.0f}s)")

    out = Path(args.out)
    (out / "learning_curve.json").write_text(json.dumps({"runs": runs, "sft_eval_noise": sft_scores}, indent=1))
    table = render_table(runs, sft_scores, args)
    (out / "learning_curve.md").write_text(table)
    plot(runs, out / "learning_curve.png")
    print(table)


def render_table(runs, sft_scores, args) -> str:
    lines = ["| variant | seeds | eval passed, step 0 | final | change | train-batch passed, first → last 3 logged |",
             "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["variant"] for r in runs):
        rs = [r for r in runs if r["variant"] == name]
        first = [r["eval"][0]["passed_mean"] for r in rs]
        last = [r["eval"][-1]["passed_mean"] for r in rs]
        delta = [b - a for a, b in zip(first, last)]
        tr0 = statistics.mean(r["train_passed"][0] for r in rs)
        tr1 = statistics.mean(statistics.mean(r["train_passed"][-3:]) for r in rs)  # logged on rollout steps
        lines.append(f"| {name} | {len(rs)} | {statistics.mean(first):.2f} | {statistics.mean(last):.2f} "
                     f"(per seed {', '.join(f'{x:.2f}' for x in last)}) | {statistics.mean(delta):+.2f} | "
                     f"{tr0:.2f} → {tr1:.2f} |")
    spread = statistics.pstdev(sft_scores) if len(sft_scores) > 1 else float("nan")
    lines.append("")
    lines.append(f"Eval noise of the SFT model alone (same weights, {len(sft_scores)} eval sampling seeds, "
                 f"24 held-out episodes each): {', '.join(f'{x:.2f}' for x in sft_scores)} (std {spread:.2f}).")
    lines.append(f"Budget per run: {args.steps} optimizer steps = {args.steps // 2} rollouts x 16 episodes on one "
                 f"held-out instance; SFT {args.sft_steps} steps on the 12 train instances; 3 checks per episode.")
    return "\n".join(lines) + "\n"


def plot(runs, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ppo-warm": "tab:blue", "ppo": "tab:orange", "grpo": "tab:green"}
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for r in runs:
        steps = [e["step"] for e in r["eval"]]
        ax.plot(steps, [e["passed_mean"] for e in r["eval"]], marker="o", color=colors[r["variant"]], alpha=0.8,
                label=f"{r['variant']} (seed {r['seed']})")
    ax.set_xlabel("optimizer step (a rollout of 16 episodes every 2 steps)")
    ax.set_ylabel("held-out mean passing checks (max 3)")
    ax.set_title("tiny MoE on CPU: SFT warm-start, then RL")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

"""What one RL update does to the SFT policy: a probe of the step size the tiny model survives, in seconds.

A full run of the recipe takes 15 minutes; whether a learning rate, an advantage estimator or a loss breaks the
policy shows in its first update. This script takes the SFT warm-start of ``bench/learning_curve.py`` (seed 0 by
default), plays one generation batch of the config's size (16 episodes: 4 train instances, picked as the critic
warm-start picks them, 4 episodes each; real sandboxes), scores it (critic warm-start off: the advantages of PPO
with a fresh critic, or GRPO's), takes the policy gradient, and then applies Adam's first update,
``lr * sign(gradient)`` (what bias-corrected Adam does on its first step, whatever the gradient's size), for
several learning rates and for the positive and negative advantages alone. After each update it scores the
**oracle episodes of the 11 held-out instances**: the probability that the policy samples exactly the oracle's
actions (the product over action tokens; the SFT policy resolves held-out instances mostly by sampling that path),
and the probability of the first turn's opening.

Usage::

    python bench/learning_curve.py --seeds 0        # once: trains and saves the seed-0 SFT warm-start
    python bench/first_step.py [--sft runs/learning_curve/seed0/sft] [--set algorithm=grpo ...]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEARNING_RATES = (2e-4, 5e-4, 1e-3, 2e-3)
SGD_LENGTHS = (0.03, 0.1, 0.3)  # L2 length of a plain gradient step (Adam's first step at 2e-4 is ~0.09 long here)


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _norm(grads) -> float:
    return math.sqrt(sum(g.norm().item() ** 2 for g in grads))


def main() -> None:
    parser = argparse.ArgumentParser(description="What one RL update does to the SFT policy")
    parser.add_argument(
        "--sft",
        default=str(ROOT / "runs" / "learning_curve" / "seed0" / "sft"),
        help="an SFT checkpoint of the tiny-cpu recipe (bench/learning_curve.py writes one per seed)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the trainer's seed: which train instances it plays")
    parser.add_argument(
        "--freeze",
        default=None,
        metavar="REGEX",
        help="leave the parameters whose names match out of every update (e.g. embed_tokens)",
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="FIELD=VALUE",
        help="T1Config overrides for the scored batch (JSON values), e.g. algorithm=grpo",
    )
    args = parser.parse_args()
    if not (Path(args.sft) / "config.json").is_file():
        sys.exit(
            f"first_step.py: --sft {args.sft}: no model there; run 'python bench/learning_curve.py --seeds 0' "
            "first (it saves the SFT warm-start) or pass --sft"
        )
    overrides = {"critic_warmup_iterations": 0}
    for item in args.set:
        field, sep, text = item.partition("=")
        if not sep:
            sys.exit(f"first_step.py: --set {item!r}: expected FIELD=VALUE")
        overrides[field] = _value(text)

    import torch

    torch.set_num_threads(1)
    from t1train.config import build_t1_config, load_train_config
    from t1train.models import load_model_and_tokenizer
    from t1train.rollout import EpisodeSpec, RolloutConfig, make_env_factory
    from t1train.sft import oracle_trajectories
    from t1train.trainer import T1Trainer

    cfg = load_train_config("tiny-cpu")
    work = Path(tempfile.mkdtemp(prefix="t1-first-step-"))
    targs = build_t1_config(
        {
            **cfg.train,
            **overrides,
            "seed": args.seed,
            "output_dir": str(work),
            "save_strategy": "no",
            "disable_tqdm": True,
            "health_line": False,
        }
    )
    model, tokenizer = load_model_and_tokenizer(args.sft)
    trainer = T1Trainer(model.train(), targs, processing_class=tokenizer)
    trainer.current_gradient_accumulation_steps = 1

    # ---- the held-out probe: the 11 test instances' oracle episodes
    rollout = RolloutConfig(max_turns=targs.max_turns, system_prompt=targs.system_prompt)
    oracle = oracle_trajectories(
        tokenizer, cfg.eval.tasks, cfg.eval.seeds, make_env_factory(), rollout, turns=cfg.sft.turns
    )
    probe, _, _ = trainer._pad_batch(oracle)
    probe_ids = torch.cat([probe["prompt_ids"], probe["completion_ids"]], dim=1)
    probe_mask = torch.cat([probe["prompt_mask"], probe["completion_mask"]], dim=1)
    width = probe["completion_ids"].shape[1]
    action = probe["tool_mask"].float()
    first = torch.zeros_like(action)  # the first turn's action tokens
    for i, t in enumerate(oracle):
        first[i, : len(t.turns[0].sampled_ids)] = 1.0

    def score() -> tuple[float, float, float]:
        with torch.no_grad():
            logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, probe_ids, probe_mask, width)
        path = ((logps * action).sum(1)).exp()
        opening = ((logps * first).sum(1)).exp()
        return statistics.mean(path.tolist()), min(path.tolist()), statistics.mean(opening.tolist())

    # ---- one generation batch, as the first training step plays it
    rows = list(trainer.train_dataset)
    rng = random.Random(args.seed)
    picked = [rows[rng.randrange(len(rows))] for _ in range(targs.generation_batch_size // targs.num_generations)]
    inputs = [dict(r) for r in picked for _ in range(targs.num_generations)]
    trajectories = trainer.rollout([EpisodeSpec(x["task"], x["seed"]) for x in inputs], phase="probe")
    batch = trainer.score_trajectories(trajectories, inputs)
    batch.pop("returns", None)  # the critic's loss is not the policy's
    rewards = [t.reward for t in trajectories]
    named = [
        (n, p)
        for n, p in trainer.model.named_parameters()
        if p.requires_grad and not (args.freeze and re.search(args.freeze, n))
    ]
    params, names = [p for _, p in named], [n for n, _ in named]
    saved = [p.detach().clone() for p in params]

    def gradient(advantages, scored=batch) -> list:
        trainer.model.zero_grad(set_to_none=True)
        trainer.compute_loss(trainer.model, {**scored, "advantages": advantages}).backward()
        return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params]

    def after_step(grads, lr, sgd: bool = False) -> tuple[float, float, float]:
        """Adam's first update (``lr * sign(g)``), or with ``sgd`` a plain gradient step of L2 length ``lr``."""
        norm = _norm(grads) or 1.0
        with torch.no_grad():
            for p, s, g in zip(params, saved, grads):
                p.copy_(s - (lr * g / norm if sgd else lr * torch.sign(g)))
        result = score()
        with torch.no_grad():
            for p, s in zip(params, saved):
                p.copy_(s)
        return result

    advantages = batch["advantages"]
    full = gradient(advantages)
    norms = {n: g.norm().item() for n, g in zip(names, full)}
    total = math.sqrt(sum(v * v for v in norms.values()))
    embed = math.sqrt(sum(v * v for n, v in norms.items() if "embed_tokens" in n))
    rows_out = [("SFT policy (no update)", score())]
    subsets = {}
    for lr in LEARNING_RATES:
        rows_out.append((f"Adam's first update, lr {lr:g}", after_step(full, lr)))
    for label, adv in (
        ("positive advantages only", advantages.clamp(min=0)),
        ("negative advantages only", advantages.clamp(max=0)),
    ):
        grads = gradient(adv)
        rows_out.append((f"{label} (gradient norm {_norm(grads):.3f}): Adam, lr 1e-3", after_step(grads, 1e-3)))
        subsets[label] = grads
    subsets["all advantages"] = full
    # control: the imitation direction (the oracle episodes of the 43 train instances, every action token +1)
    train_oracle = oracle_trajectories(
        tokenizer, cfg.sft.tasks, cfg.sft.seeds, make_env_factory(), rollout, turns=cfg.sft.turns
    )
    imitation = trainer.score_trajectories(
        train_oracle, [{"prompt": "s", "task": t.task_id, "seed": t.seed} for t in train_oracle]
    )
    imitation.pop("returns", None)
    subsets["control: imitating the train oracle"] = gradient(imitation["tool_mask"].float(), imitation)
    for label, grads in subsets.items():
        for length in SGD_LENGTHS:
            rows_out.append((f"{label}: gradient step of length {length:g}", after_step(grads, length, sgd=True)))

    print(
        f"batch: {len(trajectories)} episodes, rewards {rewards}; algorithm {targs.algorithm}; "
        f"policy gradient norm {total:.3f}, of which embed_tokens {embed:.3f}"
    )
    print("| update | P(oracle episode), mean over the 11 held-out instances | min | P(oracle first turn) |")
    print("|---|---|---|---|")
    for label, (mean, low, opening) in rows_out:
        print(f"| {label} | {mean:.3f} | {low:.3f} | {opening:.3f} |")


if __name__ == "__main__":
    main()

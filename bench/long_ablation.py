"""Evidence on the long-horizon family (issue 28 part 4): dense vs binary reward, and the three context policies.

The tiny MoE on CPU plays ``project`` (``t1env/families/project.py``: 31 dependent commands per instance, 14 checks
on 11 milestones, partial credit in order) in a context far shorter than a job. One SFT warm-start imitates the
oracle of the train instances under ``drop_observations`` (one command per turn, the oracle's segments as SFT rows);
every run starts from it and trains with GRPO for ``--steps`` steps. Variants (one change each from ``count``):

* ``count``: the env's reward is the number of passing checks (t1's default), context policy ``drop_observations``;
* ``binary``: 1 only when every check passes (``env_kwargs.reward_mode: binary``);
* ``end``: the episode ends when the next turn would not fit (``context_policy: end``);
* ``summary``: the policy writes a summary and goes on in a new segment (``context_policy: summary``).

Each run of a seed is scored on the same held-out episodes (test instances, ``--eval-episodes`` each) before and
after RL, under its own context policy. The eval noise is measured, not assumed: the SFT policy's held-out score
differs between seeds only by the sampling seed (``evaluate_episodes`` samples with the run's seed), so the
spread of the ``before`` scores of one policy over the seeds is the noise of one score.

Writes ``OUT/long_ablation.json`` after every run (``--resume`` goes on from it) and prints the table that
``docs/benchmarks-training.md`` ("Long-horizon ablation") quotes; ``--render`` reprints it from the run folders.
Measured with the defaults (3 seeds, 3 GRPO steps a run, 1,000 SFT steps, 3 held-out episodes per score): the SFT
policy memorizes the 4 train instances and reaches 3-4 milestones of one in 12 turns; no ``count`` group had zero
variance, every ``binary`` group did; held out it writes empty commands (scores 0 before and after). An earlier run
with 100 SFT steps never reached a milestone. The tables and what they do and do not show are in
``docs/benchmarks-training.md``.

Usage::

    python bench/long_ablation.py [--seeds 0 1 2] [--steps 3] [--sft-steps 1000] [--eval-episodes 1] [--resume]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAIN_TASKS = ["project@train:4"]
EVAL_TASKS = ["project@test:3"]
BASE = {  # T1Config fields every run shares
    "algorithm": "grpo",
    "tasks": TRAIN_TASKS,
    "train_seeds": [0],
    "system_prompt": "Act in the shell.",
    "max_turns": 12,
    "max_new_tokens": 64,
    "truncated_turns": "reject",
    "max_context_tokens": 1536,
    "context_policy": "drop_observations",
    "keep_last_turns": 2,
    "env_kwargs": {"max_turns": 40},  # above max_turns (the loop decides) and the oracle's 31 commands (SFT)
    "rollout_concurrency": 4,
    "num_generations": 4,
    "per_device_train_batch_size": 4,
    "learning_rate": 2e-4,
    "temperature": 1.0,
    "eval_temperature": 1.0,
    "off_policy_correction": "none",
    "loss_chunk_tokens": 8192,
    "save_strategy": "no",
    "report_to": "none",
    "disable_tqdm": True,
    "health_line": False,
    "bf16": False,
}
VARIANTS = {
    "count": {},
    "binary": {"env_kwargs": {"max_turns": 40, "reward_mode": "binary"}},
    "end": {"context_policy": "end"},
    "summary": {"context_policy": "summary"},
}
ORACLE_NEW_TOKENS = 1024  # t1train.sft.oracle_trajectories samples (types) up to this many tokens a turn
STEP_KEYS = ("t1/zero_variance_groups", "t1/passing_fraction", "t1/resolved_rate", "t1/turns_mean", "reward")


def config(seed: int, out: Path, overrides: dict, steps: int):
    from t1train.trainer import T1Config

    return T1Config(**{**BASE, **overrides, "seed": seed, "output_dir": str(out), "max_steps": steps})


def sft(work: Path, steps: int) -> dict:
    """The shared SFT warm-start: the oracle of every train instance under the base rollout config (one command per
    turn, its segments as rows); saved to ``WORK/sft``."""
    import torch
    from trl import SFTConfig

    from t1train.models import load_model_and_tokenizer
    from t1train.rollout import make_env_factory
    from t1train.sft import oracle_trajectories, run_sft, sft_dataset

    torch.set_num_threads(1)
    out = work / "sft"
    targs = config(0, work / "sft-args", {}, 1)
    t0 = time.monotonic()
    model, tok = load_model_and_tokenizer("tiny")
    # the oracle engine reserves 1024 new tokens a turn: the same prompt budget as the runs' segments
    budget = targs.max_context_tokens + ORACLE_NEW_TOKENS - targs.max_new_tokens
    rollout = dataclasses.replace(targs.rollout_config(), max_context_tokens=budget)
    trajectories = oracle_trajectories(
        tok, targs.tasks, [0], make_env_factory("local", **targs.env_kwargs), rollout, require_resolved=False,
        turns="lines",
    )  # fmt: skip
    data = sft_dataset(trajectories)
    args = SFTConfig(
        output_dir=str(out),
        max_steps=steps,
        learning_rate=2e-3,
        lr_scheduler_type="linear",
        per_device_train_batch_size=4,
        max_length=budget,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        bf16=False,
        seed=0,
        disable_tqdm=True,
    )
    trainer = run_sft(model.train(), tok, data, args)
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    return {
        "episodes": len(trajectories),
        "resolved": sum(bool(t.checks.get("resolved")) for t in trajectories),
        "turns": [t.num_turns for t in trajectories],
        "rows": len(data),
        "steps": steps,
        "loss": [h["loss"] for h in trainer.state.log_history if "loss" in h],
        "seconds": time.monotonic() - t0,
    }


def episode_stats(log: Path) -> dict:
    """Per phase of a run's episode log: mean turns, mean segments, and how the episodes ended."""
    phases: dict[str, list[dict]] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line)
        phases.setdefault(record["metadata"]["phase"], []).append(record)
    out = {}
    for phase, records in phases.items():
        ends: dict[str, int] = {}
        for r in records:
            ends[r["termination"]] = ends.get(r["termination"], 0) + 1
        actions = [(t.get("action") or {}) for r in records for t in r["turns"]]
        out[phase] = {
            "turns": statistics.mean(len(r["turns"]) for r in records),
            "segments": statistics.mean(len(r.get("segments") or [None]) for r in records),
            "commands": sum(a.get("kind") == "command" for a in actions) / len(records),
            "summaries": sum(bool(a.get("summary")) for a in actions) / len(records),
            "ends": ends,
        }
    return out


def one_run(seed: int, work: Path, name: str, steps: int, eval_episodes: int, before: dict | None) -> dict:
    """One GRPO run from the SFT model; ``before``: the held-out score of the SFT model when an earlier run of this
    seed measured it under the same context policy (the same episodes: the same model, sampling seed and prompts)."""
    import torch

    torch.set_num_threads(1)
    from t1env.families import expand_refs
    from t1train.models import load_model_and_tokenizer
    from t1train.trainer import T1Trainer

    out = work / f"seed{seed}" / name
    targs = config(seed, out, VARIANTS[name], steps)
    model, tok = load_model_and_tokenizer(str(work / "sft"))
    trainer = T1Trainer(model.train(), targs, processing_class=tok)
    tasks = expand_refs(EVAL_TASKS)
    t0 = time.monotonic()
    if before is None:
        before = trainer.evaluate_episodes(tasks, [1000], None, eval_episodes, phase="eval-before")
    t1 = time.monotonic()
    trainer.train()
    t2 = time.monotonic()
    after = trainer.evaluate_episodes(tasks, [1000], None, eval_episodes, phase="eval-after")
    history = [{k: h[k] for k in STEP_KEYS if k in h} for h in trainer.state.log_history if "t1/passing_fraction" in h]
    return {
        "seed": seed,
        "variant": name,
        "steps": steps,
        "before": before,
        "after": after,
        "history": history,
        "episodes": episode_stats(out / "trajectories.jsonl"),
        "eval_seconds": time.monotonic() - t2 + t1 - t0,
        "rl_seconds": t2 - t1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per run (one group of 4 episodes each)")
    parser.add_argument("--sft-steps", type=int, default=1000)
    parser.add_argument("--eval-episodes", type=int, default=1, help="held-out episodes per test instance")
    parser.add_argument("--work", default=str(ROOT / "runs" / "long_ablation"), help="SFT model and run folders")
    parser.add_argument("--out", default=str(ROOT / "runs" / "long_ablation"), help="where long_ablation.json goes")
    parser.add_argument("--resume", action="store_true", help="keep the runs in OUT/long_ablation.json")
    parser.add_argument("--render", action="store_true", help="re-read the runs' episode logs and print the table")
    args = parser.parse_args()
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "long_ablation.json"
    if args.render:
        state = json.loads(saved.read_text())
        for run in state["runs"]:
            run["episodes"] = episode_stats(work / f"seed{run['seed']}" / run["variant"] / "trajectories.jsonl")
        print(render(state))
        return
    state = json.loads(saved.read_text()) if args.resume and saved.exists() else {"sft": None, "runs": []}
    t_start, wall_before = time.monotonic(), state.get("wall_seconds", 0.0)

    def save() -> None:
        state["wall_seconds"] = wall_before + time.monotonic() - t_start
        saved.write_text(json.dumps(state, indent=1))

    # one run at a time, each in a fresh interpreter (no torch or sandbox state shared between runs)
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        if state["sft"] is None or not (work / "sft" / "config.json").is_file():
            state["sft"] = pool.submit(sft, work, args.sft_steps).result()
            save()
            print(f"sft: {json.dumps(state['sft'])}", flush=True)
        done = {(r["variant"], r["seed"]) for r in state["runs"]}
        for seed in args.seeds:  # every variant of a seed before the next seed: a cut-short grid stays comparable
            for name in args.variants:
                if (name, seed) in done:
                    continue
                policy = VARIANTS[name].get("context_policy", BASE["context_policy"])
                same = [
                    r["before"]
                    for r in state["runs"]
                    if r["seed"] == seed
                    and VARIANTS[r["variant"]].get("context_policy", BASE["context_policy"]) == policy
                ]
                before = same[0] if same else None
                run = pool.submit(one_run, seed, work, name, args.steps, args.eval_episodes, before).result()
                state["runs"].append(run)
                save()
                print(
                    f"{name:<8} seed {seed}: held-out passing {run['before']['passing_fraction']:.3f} -> "
                    f"{run['after']['passing_fraction']:.3f}, resolved {run['before']['resolved_rate']:.2f} -> "
                    f"{run['after']['resolved_rate']:.2f} (RL {run['rl_seconds']:.0f} s, eval "
                    f"{run['eval_seconds']:.0f} s)",
                    flush=True,
                )
    save()
    print(render(state))


# ------------------------------------------------------------------------------------------------ report
def _mean(xs) -> float:
    xs = list(xs)
    return statistics.mean(xs) if xs else float("nan")


def _sd(xs) -> float:
    xs = list(xs)
    return statistics.stdev(xs) if len(xs) > 1 else float("nan")


def render(state) -> str:
    runs = state["runs"]
    lines = [
        "| variant | reward | context policy | seeds | train: zero-variance groups | train: passing fraction, "
        "first → last step | held-out passing fraction: before → after (per seed) | held-out resolved: before → "
        "after | held-out, after: turns / segments / commands run / summaries per episode | RL s / run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, overrides in VARIANTS.items():
        rs = sorted((r for r in runs if r["variant"] == name), key=lambda r: r["seed"])
        if not rs:
            continue
        reward = overrides.get("env_kwargs", {}).get("reward_mode", "count")
        policy = overrides.get("context_policy", BASE["context_policy"])
        zero = _mean(h["t1/zero_variance_groups"] for r in rs for h in r["history"] if "t1/zero_variance_groups" in h)
        first = _mean(r["history"][0]["t1/passing_fraction"] for r in rs if r["history"])
        last = _mean(r["history"][-1]["t1/passing_fraction"] for r in rs if r["history"])
        per_seed = ", ".join(f"{r['before']['passing_fraction']:.3f}→{r['after']['passing_fraction']:.3f}" for r in rs)
        after = [r["episodes"].get("eval-after", {}) for r in rs]
        after_cell = " / ".join(
            f"{_mean(a.get(k, float('nan')) for a in after):.1f}"
            for k in ("turns", "segments", "commands", "summaries")
        )
        lines.append(
            f"| {name} | {reward} | {policy} | {len(rs)} | {zero:.2f} | {first:.3f} → {last:.3f} | "
            f"{_mean(r['before']['passing_fraction'] for r in rs):.3f} → "
            f"{_mean(r['after']['passing_fraction'] for r in rs):.3f} ({per_seed}) | "
            f"{_mean(r['before']['resolved_rate'] for r in rs):.2f} → {_mean(r['after']['resolved_rate'] for r in rs):.2f} | "
            f"{after_cell} | {_mean(r['rl_seconds'] for r in rs):.0f} |"
        )
    noise = []
    for name in VARIANTS:
        before = [r["before"]["passing_fraction"] for r in runs if r["variant"] == name]
        if len(before) > 1:
            noise.append(f"{name} {_sd(before):.3f}")
    steps = sorted({r["steps"] for r in runs})
    sft = state.get("sft") or {}
    lines += [
        "",
        f"Eval noise, the sd of one held-out passing fraction of the same SFT policy over sampling seeds: "
        f"{', '.join(noise) or 'n/a'} (a difference of two scores: x1.41).",
        f"GRPO steps per run: {', '.join(map(str, steps))} (one group of 4 episodes of one train instance each). SFT: "
        f"{sft.get('steps')} steps on {sft.get('rows')} segment rows of {sft.get('episodes')} oracle episodes "
        f"({sft.get('resolved')} resolved). Wall time of the whole comparison: "
        f"{state.get('wall_seconds', 0) / 60:.0f} min.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

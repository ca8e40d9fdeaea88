"""Synchronous vs asynchronous training on a mixed-length workload: episodes per hour, idle fractions, wall time.

The workload mixes short and long episodes the way terminal tasks do (a 300-turn episode holds up a batch of 4-turn
ones): each step's batch draws groups from 3 short tasks (4 commands, then SUBMIT) and 1 long task (40 commands,
then SUBMIT). Every run of the comparison trains the same tiny MoE (``t1train.models.tiny_moe``, real forwards,
backwards and optimizer steps on CPU) for the same number of optimizer steps, with GRPO and truncated importance
sampling, in one process, one after the other:

* ``sync``: the default schedule (roll out the whole batch, train, sync weights);
* ``async sN``: ``async: {max_staleness: N, stale: drop}`` for N = 1, 2, 4;
* ``async sN downweight``: ``stale: downweight`` (N = 2): a long episode that finishes late is trained on at a lower
  weight instead of dropped. Dropping biases what is trained on towards the short episodes, which is why the table
  also gives turns per hour and the share of long episodes among those trained on.

The sampler is scripted, so that the comparison measures the schedule and nothing else: an oracle engine types each
task's commands (``t1train.sft.OracleEngine``) and takes ``--decode-s`` seconds per generate call (a batched call,
standing in for an inference server on other devices: it sleeps, it does not compete with the trainer for the
CPU), and the env takes ``--command-s`` seconds per command (a shell round trip) and scores 1 on SUBMIT. The
engine's weight version follows the trainer's syncs (the trainer saves the policy to disk each step and tells the
engine, the path an SGLang server takes), so staleness is measured as in a real run.

Measured per run: optimizer steps per minute and the wall time to ``--steps`` steps; episodes per hour trained on
(and played: async also plays episodes it then drops as too stale); trainer idle fraction (sync: time in rollouts /
wall; async: the mean of the per-step ``async/trainer_idle_fraction``); sampler idle fraction (sync: time outside
rollouts / wall; async: the per-step ``async/sampler_idle_fraction``); episodes dropped; mean staleness.

``--learning`` compares instead what the policy learns, on the README's recipe (``t1train --config tiny-cpu``:
the ``chain`` family in real sandboxes, SFT warm-start, PPO with a warm-started critic), over seeds: ``sync``
(the recipe), ``async-is`` (``async: {max_staleness: 2}``, plain truncated IS) and ``async-atr`` (the same with
``off_policy_loss: adaptive_trust_region``), each trained for the same number of optimizer steps from the seed's
SFT warm-start (made once per seed by ``bench/learning_curve.py``'s ``sft_once``, kept under ``--work``) and scored on
the recipe's held-out episodes after RL; the SFT policy is scored once per seed as the baseline. ``--sft-seed N``
starts every RL seed from seed N's SFT warm-start (one SFT run; the baselines are then the eval noise);
``--variants`` runs a subset. Each run is added to ``learning.json`` as it ends.

Usage::

    python bench/async_rl.py [--steps 8] [--decode-s 0.05] [--command-s 0.02] [--staleness 1 2 4]
    python bench/async_rl.py --learning [--seeds 0 1 2] [--rl-steps 24] [--jobs 2] [--work runs/async_rl]
        [--sft-seed 0] [--sft-steps 300] [--eval-episodes 8] [--variants sync async-is async-atr]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from t1train.models import tiny_moe
from t1train.sft import OracleEngine, oracle_turns
from t1train.trainer import T1Config, T1Trainer

TASKS = {"short-a": 4, "short-b": 4, "short-c": 4, "long-a": 40}  # task -> commands before SUBMIT


class TurnsEnv:
    """A ``T1Terminal-v0`` look-alike whose episodes take a fixed number of commands: each command takes
    ``command_s`` seconds, ``SUBMIT`` ends the episode with reward 1 (one check, passed)."""

    def __init__(self, task: str, command_s: float):
        self.task, self.command_s, self.turn = task, command_s, 0

    def reset(self, seed=None):
        self.turn = 0
        return f"Task {self.task}: run the commands you are given, then SUBMIT.", {"task_id": self.task}

    def step(self, action):
        if isinstance(action, dict) and action.get("submit"):
            info = {"checks": [{"name": "done", "passed": True}], "passed": 1, "total": 1, "resolved": True}
            return "[t1] episode ended (submitted)", 1.0, True, False, info
        time.sleep(self.command_s)
        self.turn += 1
        return f"ok {self.turn}\n", 0.0, False, False, {"exit_code": 0, "duration": self.command_s}

    def close(self):
        pass


class PacedOracle(OracleEngine):
    """The oracle's turns, ``decode_s`` seconds per generate call, with a weight version the trainer's syncs set."""

    def __init__(self, tokenizer, decode_s: float):
        scripts = {
            f"Task {task}:": oracle_turns("\n".join(f"echo {task} {i}" for i in range(n)), "lines")
            for task, n in TASKS.items()
        }
        super().__init__(tokenizer, scripts)
        self.decode_s = decode_s
        self.weight_version = "0"

    def generate(self, prompts, sampling, return_routed_experts=False, routed_experts_start=None, seeds=None):
        time.sleep(self.decode_s)
        return super().generate(prompts, sampling, return_routed_experts, routed_experts_start, seeds)

    def update_weights_from_disk(self, path: str, weight_version: str | None = None) -> None:
        self.weight_version = weight_version  # a scripted sampler: the version is what it needs from the weights


class StepClock(TrainerCallback):
    """When each optimizer step ended."""

    def __init__(self):
        self.ends: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.monotonic())


class TimedTrainer(T1Trainer):
    """T1Trainer that adds up the wall time its synchronous rollouts take."""

    rollout_s = 0.0

    def rollout(self, *args, **kwargs):
        t0 = time.monotonic()
        try:
            return super().rollout(*args, **kwargs)
        finally:
            self.rollout_s += time.monotonic() - t0


def one_run(
    name: str, model, tokenizer, args: argparse.Namespace, staleness: int | None, work: Path, stale: str = "drop"
) -> dict:
    config = T1Config(
        output_dir=str(work / name.replace(" ", "-")),
        algorithm="grpo",
        tasks=list(TASKS),
        train_seeds=[0, 1],
        max_turns=max(TASKS.values()) + 2,
        max_new_tokens=32,
        max_context_tokens=16384,
        num_generations=2,
        per_device_train_batch_size=args.batch,
        rollout_concurrency=args.batch * 2,
        max_steps=args.steps,
        learning_rate=1e-4,
        system_prompt="Act.",
        disable_tqdm=True,
        health_line=True,
        save_strategy="no",
        save_trajectories=True,
        report_to="none",
        seed=0,
        async_rl=None if staleness is None else {"max_staleness": staleness, "stale": stale},
    )
    engine = PacedOracle(tokenizer, args.decode_s)
    clock = StepClock()
    trainer = TimedTrainer(
        copy.deepcopy(model),
        config,
        processing_class=tokenizer,
        engine=engine,
        make_env=lambda task: TurnsEnv(task, args.command_s),
        callbacks=[clock],
    )
    t0 = time.monotonic()
    trainer.train()
    wall = clock.ends[-1] - t0  # to the last optimizer step (async: not the producer's shutdown after it)
    logs = [h for h in trainer.state.log_history if "t1/resolved_rate" in h]
    records = [json.loads(line) for line in (Path(config.output_dir) / "trajectories.jsonl").read_text().splitlines()]
    trained_records = [r for r in records if r["metadata"]["phase"] == "train"]
    trained, dropped = len(trained_records), sum(r["metadata"]["phase"] == "train-stale" for r in records)
    long_share = sum(r["task_id"].startswith("long") for r in trained_records) / max(1, trained)
    turns = sum(len(r["turns"]) for r in trained_records)
    downweighted = sum(r["metadata"].get("stale_weight", 1.0) < 1.0 for r in trained_records)
    if staleness is None:
        trainer_idle, sampler_idle = trainer.rollout_s / wall, 1.0 - trainer.rollout_s / wall
        stale_mean = 0.0
    else:
        trainer_idle = statistics.mean(h["async/trainer_idle_fraction"] for h in logs)
        sampler_idle = statistics.mean(h["async/sampler_idle_fraction"] for h in logs)
        stale_mean = statistics.mean(h["async/staleness_mean"] for h in logs)
    return {
        "name": name,
        "wall_s": wall,
        "steps": trainer.state.global_step,
        "episodes_trained": trained,
        "episodes_played": trained + dropped,
        "dropped": dropped,
        "downweighted": downweighted,
        "trained_per_hour": trained / wall * 3600,
        "turns_per_hour": turns / wall * 3600,
        "long_share": long_share,
        "played_per_hour": (trained + dropped) / wall * 3600,
        "trainer_idle": trainer_idle,
        "sampler_idle": sampler_idle,
        "staleness_mean": stale_mean,
    }


def render(rows: list[dict], args: argparse.Namespace) -> str:
    base = rows[0]
    lines = [
        f"{args.steps} optimizer steps, batch {args.batch} episodes (groups of 2), tasks {TASKS} (commands before "
        f"SUBMIT), decode {args.decode_s} s per generate call, {args.command_s} s per command, torch threads "
        f"{torch.get_num_threads()}",
        "",
        "| schedule | wall to last step (s) | episodes/h trained (x sync) | turns/h trained (x sync) | long share "
        "trained | episodes/h played | trainer idle | sampler idle | dropped / down-weighted | mean staleness |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['wall_s']:.1f} | {r['trained_per_hour']:.0f} "
            f"({r['trained_per_hour'] / base['trained_per_hour']:.2f}x) | {r['turns_per_hour']:.0f} "
            f"({r['turns_per_hour'] / base['turns_per_hour']:.2f}x) | {r['long_share']:.2f} | {r['played_per_hour']:.0f} | "
            f"{r['trainer_idle']:.2f} | {r['sampler_idle']:.2f} | {r['dropped']} / {r['downweighted']} | "
            f"{r['staleness_mean']:.2f} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ learning
LEARNING = {
    "sync": {},
    "async-is": {"async_rl": {"max_staleness": 2}},
    "async-atr": {
        "async_rl": {"max_staleness": 2},
        "off_policy_loss": "adaptive_trust_region",
        "off_policy_correction": "none",
    },
}


def sft_seed(seed: int, work: Path, sft_steps: int | None) -> int:
    """The seed's SFT warm-start (the recipe's, or ``sft_steps`` long), saved under ``work`` once."""
    torch.set_num_threads(1)
    from learning_curve import _config

    from t1train.models import load_model_and_tokenizer
    from t1train.pipeline import run_sft_section

    cfg, targs = _config(seed, work, {}, None, "sft")
    if not (Path(cfg.sft.output_dir) / "config.json").is_file():
        if sft_steps is not None:
            cfg.sft.max_steps = sft_steps
        model, tokenizer = load_model_and_tokenizer(cfg.model)
        run_sft_section(cfg, targs, model.train(), tokenizer)
    return seed


def learning_run(
    seed: int, work: Path, name: str, steps: int, baseline: bool, episodes: int | None, sft_from: int | None = None
) -> dict:
    """One variant of the recipe from the seed's SFT warm-start (``sft_from``'s, when given): train ``steps`` steps,
    score the held-out episodes (and, with ``baseline``, the SFT policy first)."""
    torch.set_num_threads(1)
    from learning_curve import _config

    from t1train.models import load_model_and_tokenizer
    from t1train.pipeline import eval_specs

    cfg, targs = _config(seed, work, LEARNING[name], steps, name)
    sft_dir = cfg.sft.output_dir if sft_from is None else str(work / f"seed{sft_from}" / "sft")
    model, tokenizer = load_model_and_tokenizer(sft_dir)
    trainer = T1Trainer(model.train(), targs, processing_class=tokenizer)
    tasks, seeds = eval_specs(cfg, targs)
    n = episodes or cfg.eval.episodes_per_task
    before = trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, n, "eval-before") if baseline else None
    t0 = time.monotonic()
    trainer.train()
    seconds = time.monotonic() - t0
    after = trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, n, "eval-after")
    logs = [h for h in trainer.state.log_history if "t1/resolved_rate" in h]
    return {
        "seed": seed,
        "name": name,
        "before": before,
        "after": after,
        "rl_seconds": seconds,
        "train_passing": [h["t1/passing_fraction"] for h in logs],
        "dropped": sum(h.get("async/dropped_episodes", 0.0) for h in logs),
        "staleness_mean": statistics.mean(h.get("async/staleness_mean", 0.0) for h in logs),
    }


def learning(args: argparse.Namespace) -> None:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    work = Path(args.work)
    ctx = get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx) as pool:
        sft_seeds = args.seeds if args.sft_seed is None else [args.sft_seed]
        n = len(sft_seeds)
        for seed in pool.map(sft_seed, sft_seeds, [work] * n, [args.sft_steps] * n):
            print(f"sft seed {seed} ready", flush=True)
        jobs = [(seed, name) for seed in args.seeds for name in args.variants]
        runs = []
        for run in pool.map(
            learning_run,
            [s for s, _ in jobs],
            [work] * len(jobs),
            [n for _, n in jobs],
            [args.rl_steps] * len(jobs),
            [n == "sync" for _, n in jobs],
            [args.eval_episodes] * len(jobs),
            [args.sft_seed] * len(jobs),
        ):
            runs.append(run)  # each run kept as it ends: a run stopped early leaves the finished ones
            (work / "learning.json").write_text(json.dumps(runs, indent=1))
            print(f"seed {run['seed']} {run['name']}: {run['after']}", flush=True)
    print(render_learning(runs, args))


def _sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def render_learning(runs: list[dict], args: argparse.Namespace) -> str:
    """Held-out resolved rate / passing fraction per variant and seed, their mean and spread over seeds."""
    sft = f"seed {args.sft_seed}'s SFT warm-start" if args.sft_seed is not None else "each seed's SFT warm-start"
    lines = [
        f"{args.rl_steps} optimizer steps from {sft} ({args.sft_steps or 1200} steps); held-out: chain's 11 test "
        f"instances x {args.eval_episodes or 16} episodes; cells: resolved rate / passing fraction",
        "",
        "| variant | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean (sd over seeds) | train-batch passing, "
        "first → last step (mean) | RL wall (s, mean) | dropped |",
        "|---|" + "---|" * (len(args.seeds) + 4),
    ]

    def row(name: str, scores: dict[int, dict], extra: str) -> str:
        cells = [
            f"{scores[s]['resolved_rate']:.3f} / {scores[s]['passing_fraction']:.3f}" if s in scores else "–"
            for s in args.seeds
        ]
        res = [x["resolved_rate"] for x in scores.values()]
        pas = [x["passing_fraction"] for x in scores.values()]
        mean = f"{statistics.mean(res):.3f} ({_sd(res):.3f}) / {statistics.mean(pas):.3f} ({_sd(pas):.3f})"
        return f"| {name} | " + " | ".join(cells) + f" | {mean} | {extra}"

    before = {r["seed"]: r["before"] for r in runs if r["before"] is not None}
    lines.append(row("SFT (before RL)", before, " | | |"))
    for name in LEARNING:
        mine = {r["seed"]: r for r in runs if r["name"] == name}
        if not mine:
            continue
        first = statistics.mean(r["train_passing"][0] for r in mine.values())
        last = statistics.mean(r["train_passing"][-1] for r in mine.values())
        wall = statistics.mean(r["rl_seconds"] for r in mine.values())
        dropped = sum(r["dropped"] for r in mine.values())
        lines.append(
            row(
                name,
                {s: r["after"] for s, r in mine.items()},
                f"{first:.2f} → {last:.2f} | {wall:.0f} | {dropped:.0f} |",
            )
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run")
    parser.add_argument("--batch", type=int, default=8, help="episodes per step (a multiple of 2)")
    parser.add_argument("--decode-s", type=float, default=0.05, help="seconds per generate call")
    parser.add_argument("--command-s", type=float, default=0.02, help="seconds per command")
    parser.add_argument("--staleness", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--downweight",
        type=int,
        nargs="*",
        default=[2],
        help="staleness bounds to run with "
        "stale: downweight too (stale episodes trained on at weight 0.5 ** (staleness - bound))",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--learning", action="store_true", help="compare learning instead (see the docstring)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=list(LEARNING), default=list(LEARNING))
    parser.add_argument("--rl-steps", type=int, default=24)
    parser.add_argument("--sft-steps", type=int, default=None, help="shorter SFT than the recipe's 1200 steps")
    parser.add_argument(
        "--sft-seed",
        type=int,
        default=None,
        help="every RL seed starts from this seed's SFT warm-start (one SFT run instead of one per seed)",
    )
    parser.add_argument("--eval-episodes", type=int, default=None, help="held-out episodes per instance (16)")
    parser.add_argument("--jobs", type=int, default=2, help="learning runs at once (one CPU thread each)")
    parser.add_argument("--work", default=str(Path(__file__).resolve().parent.parent / "runs" / "async_rl"))
    args = parser.parse_args()
    if args.learning:
        learning(args)
        return
    torch.set_num_threads(args.threads)
    model, tokenizer = tiny_moe()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("sync", None, "drop"), *((f"async s{n}", n, "drop") for n in args.staleness)]
        runs += [(f"async s{n} downweight", n, "downweight") for n in args.downweight]
        for name, staleness, stale in runs:
            rows.append(one_run(name, model, tokenizer, args, staleness, Path(tmp), stale))
            print(f"{name}: {rows[-1]['wall_s']:.1f} s", flush=True)
    print(render(rows, args))


if __name__ == "__main__":
    main()

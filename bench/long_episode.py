"""Benchmark: one 300-turn episode of the tiny model under a context budget, per context policy and context size.

Each configuration (``--contexts`` x ``--policies``) runs in its own child processes, so each peak RSS is its own:

1. **Rollout.** ``HFEngine`` samples with the tiny MoE (CPU) in the real env (``--task``, default ``project@0`` on
   the local backend, the env's own turn limit raised to ``--turns``) with ``RolloutConfig(max_turns=--turns,
   max_context_tokens=CTX, context_policy=POLICY)``. The random tiny model rarely writes a command: most turns are
   answered with the format help (the env is not stepped), so this prices the loop, the engine and the
   bookkeeping, not the shell. Measured: wall time, turns played, segments, the longest prompt the engine got,
   and the process's RSS (``/proc/self/statm``) when the engine is called for turn 50 and for the last turn. Wall
   and CPU time (``process_time``: every thread of the child, so the env's threads too) are both reported: on a
   shared machine the CPU time is the steadier of the two.
2. **Training step.** The episode is saved; per ``--chunk-tokens`` value a child process of its own loads it and
   ``T1Trainer`` (grpo, no importance sampling, the trainer_step bench's setup: pre-made episodes, no engine) takes
   one step on two copies of it, one row per segment, with that ``loss_chunk_tokens`` (0: every row of the
   micro-batch in one forward and backward). ``training_step`` is timed (wall and CPU) and the child's peak RSS is
   read after it (``ru_maxrss``: the model, the trainer and the step).

Usage::

    python bench/long_episode.py [--turns 300] [--contexts 2048 4096] [--policies end drop_observations summary]
                                 [--chunk-tokens 0 8192]

On the shared 2-core development machine (tables in docs/benchmarks-training.md, "Long episodes"): 300 turns of
``drop_observations`` took 42-52 CPU s in 2048 tokens (60 segments) and 58-78 in 4096 (17); the process grew by
0.1-4.2 MB from turn 50 to the last turn; ``summary`` in 2048 tokens reached ``max_segments`` (64) at turn 262; the
training step on two copies of a 300-turn episode took 89-169 CPU s with a 5.8-8.0 GB peak in one pass (every
segment is a row: linear in the tokens kept) and 0.79-0.85 GB with ``loss_chunk_tokens`` 8192, for the same CPU
time and loss.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from t1train.trajectory import load_jsonl, save_jsonl

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Probe:
    """Wraps the engine: the longest prompt it got and the RSS at chosen turns."""

    def __init__(self, engine, marks: set[int]):
        self.engine, self.marks = engine, marks
        self.max_concurrency = engine.max_concurrency
        self.calls, self.longest, self.rss, self.last_rss = 0, 0, {}, None

    def generate(self, prompts, sampling, return_routed_experts=False, **kwargs):
        self.calls += 1
        self.longest = max(self.longest, *map(len, prompts))
        self.last_rss = round(rss_mb(), 1)
        if self.calls in self.marks:
            self.rss[self.calls] = self.last_rss
        return self.engine.generate(prompts, sampling, return_routed_experts, **kwargs)


def one(task: str, backend: str, turns: int, ctx: int, policy: str, max_new: int, out: str) -> dict:
    """The rollout of one configuration (in a process of its own); the episode is saved to ``out``."""
    import torch

    from t1train.engines.base import SamplingParams
    from t1train.engines.hf import HFEngine
    from t1train.models import tiny_moe
    from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner, make_env_factory

    torch.set_num_threads(1)
    model, tok = tiny_moe()
    engine = Probe(HFEngine(model, tok), {50})
    config = RolloutConfig(max_turns=turns, max_context_tokens=ctx, context_policy=policy, concurrency=1)
    runner = RolloutRunner(
        engine,
        tok,
        make_env_factory(backend, max_turns=turns + 10),
        SamplingParams(max_new_tokens=max_new, seed=0),
        config,
    )
    rss_start = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    (traj,) = runner.run([EpisodeSpec(task, 0)])
    rollout_s, rollout_cpu = time.perf_counter() - t0, time.process_time() - c0
    if traj.error:
        raise RuntimeError(f"{task}: {traj.error}")
    rss_end = rss_mb()
    rollout_peak = peak_mb()
    stored = sum(len(t.sampled_ids) + len(t.bridge_ids) for t in traj.turns) + sum(
        len(s.prompt_ids) for s in traj.segments
    )
    save_jsonl([traj], out)
    return {
        "context": ctx,
        "policy": policy,
        "turns": traj.num_turns,
        "termination": traj.termination,
        "segments": traj.num_segments,
        "longest_prompt": engine.longest,
        "tokens_stored": stored,
        "rollout_s": round(rollout_s, 1),
        "rollout_cpu_s": round(rollout_cpu, 1),
        "rss_start_mb": round(rss_start, 1),
        "rss_turn50_mb": engine.rss.get(50),
        "rss_last_mb": engine.last_rss,
        "rss_end_mb": round(rss_end, 1),
        "rollout_peak_mb": round(rollout_peak, 1),
    }


def step(episode: str, chunk_tokens: int) -> dict:
    """One ``T1Trainer`` step on two copies of the saved episode, in a process of its own (its peak is the step's)."""
    import torch

    from t1train.models import tiny_moe
    from t1train.trainer import T1Config, T1Trainer
    from t1train.trajectory import Trajectory

    torch.set_num_threads(1)
    model, tok = tiny_moe()
    (traj,) = load_jsonl(episode)
    rss_start = rss_mb()
    with tempfile.TemporaryDirectory() as out:
        args = T1Config(
            output_dir=out,
            tasks=["bench"],
            train_seeds=[0],
            algorithm="grpo",
            off_policy_correction="none",
            num_generations=2,
            per_device_train_batch_size=2,
            max_steps=1,
            learning_rate=1e-5,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            bf16=False,
            seed=0,
            loss_chunk_tokens=chunk_tokens,
        )
        trainer = T1Trainer(model, args, processing_class=tok, engine=object(), make_env=lambda t: None)
        trainer.rollout = lambda specs, sampling=None, phase="train", first_index=0: [
            Trajectory.from_dict(traj.to_dict()) for _ in specs
        ]
        trainer.sync_engine_weights = lambda: None
        record = []
        inner = trainer.training_step

        def training_step(*a, **kw):
            w, c = time.perf_counter(), time.process_time()
            result = inner(*a, **kw)
            record.append((time.perf_counter() - w, time.process_time() - c))
            return result

        trainer.training_step = training_step
        trainer.train()
        loss = trainer.state.log_history[0].get("loss")
    return {
        "chunk_tokens": chunk_tokens,
        "rows": 2 * traj.num_segments,
        "step_wall_s": round(record[0][0], 2),
        "step_cpu_s": round(record[0][1], 2),
        "step_rss_start_mb": round(rss_start, 1),
        "step_peak_mb": round(peak_mb(), 1),
        "loss": loss,
    }


def child(args: list[str]) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="project@0")
    parser.add_argument("--backend", default="local")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--contexts", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--policies", nargs="+", default=["end", "drop_observations", "summary"])
    parser.add_argument(
        "--chunk-tokens",
        type=int,
        nargs="+",
        default=[0, 8192],
        help="loss_chunk_tokens of the training step, one step (process) each; 0: one pass over every row",
    )
    parser.add_argument("--one", nargs=3, metavar=("CTX", "POLICY", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--step", nargs=2, metavar=("EPISODE", "CHUNK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        ctx, policy, out = int(args.one[0]), args.one[1], args.one[2]
        print(json.dumps(one(args.task, args.backend, args.turns, ctx, policy, args.max_new_tokens, out)))
        return
    if args.step:
        print(json.dumps(step(args.step[0], int(args.step[1]))))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ctx in args.contexts:
            for policy in args.policies:
                episode = os.path.join(tmp, f"{ctx}-{policy}.jsonl")
                cmd = ["--task", args.task, "--backend", args.backend, "--turns", str(args.turns)]
                row = child([*cmd, "--max-new-tokens", str(args.max_new_tokens), "--one", str(ctx), policy, episode])
                row["steps"] = [child(["--step", episode, str(c)]) for c in args.chunk_tokens]
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(
        f"\n{args.task} ({args.backend}), tiny MoE on CPU, {args.max_new_tokens} new tokens per turn, "
        f"max_turns {args.turns}, 1 torch thread"
    )
    header = (
        "| context | policy | turns | end | segments | longest prompt | rollout s (wall / CPU) | RSS turn 50 / last MB | "
        "rollout peak MB |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for r in rows:
        print(
            f"| {r['context']} | {r['policy']} | {r['turns']} | {r['termination']} | {r['segments']} | "
            f"{r['longest_prompt']} | {r['rollout_s']} / {r['rollout_cpu_s']} | {r['rss_turn50_mb']} / "
            f"{r['rss_last_mb']} | {r['rollout_peak_mb']} |"
        )
    print("\nTraining step (grpo) on two copies of the episode, each step in its own process:\n")
    header = "| context | policy | rows | loss_chunk_tokens | step s (wall / CPU) | step peak MB | loss |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for r in rows:
        for st in r["steps"]:
            print(
                f"| {r['context']} | {r['policy']} | {st['rows']} | {st['chunk_tokens'] or 'none'} | "
                f"{st['step_wall_s']} / {st['step_cpu_s']} | {st['step_peak_mb']} | {st['loss']} |"
            )


if __name__ == "__main__":
    main()

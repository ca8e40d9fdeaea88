"""Time one training step of T1Trainer against a plain TRL GRPOTrainer, same tiny model, same batch.

Both trainers get the same pre-made multi-turn episodes (prompt, two sampled turns, an observation in between),
so generation and the environment cost nothing and the step is scoring + forward + backward (everything inside
``training_step``, TRL's own ``step_time``; the optimizer step is outside it for both). Each step is timed twice:
wall clock, and the process's CPU time (robust on a shared machine: other jobs do not add to it; torch runs on
one thread here, so CPU time is the step's own work).

* ``trl GRPOTrainer`` — a ``rollout_func`` returns the episodes' ids, sampler log-probs and ``env_mask``.
* ``t1 grpo, no IS`` — T1Trainer, the same algorithm and loss, off-policy correction off: the like-for-like
  comparison (goal: at most 1.15x).
* ``t1 grpo + IS`` — with truncated importance sampling against the sampler, which costs one extra no-grad
  forward to get the trainer's log-probs (TRL pays the same forward when it corrects vLLM samples).
* ``t1 ppo + IS`` — adds the critic: a no-grad value forward while scoring, a value forward/backward in the loss.

Usage::

    python bench/trainer_step.py [--steps 8] [--batch 16] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time

import torch
from transformers import PrinterCallback


def make_episodes(tokenizer, batch: int):
    from t1train.tito import Tito
    from t1train.trajectory import Trajectory, Turn

    tito = Tito(tokenizer)
    eos = tokenizer.eos_token_id
    out = []
    for i in range(batch):
        messages = [
            {"role": "system", "content": "Act in the shell."},
            {"role": "user", "content": f"Create two empty files in /app: f{i}.txt and g{i}.txt."},
        ]
        prompt = tito.prompt_ids(messages)
        turn0 = tokenizer.encode(f"```bash\ntouch f{i}.txt g{i}.txt\n```") + [eos]
        bridge = tito.encode("\n<|im_start|>user\n[exit code: 0]<|im_end|>\n<|im_start|>assistant\n")
        turn1 = tokenizer.encode("SUBMIT") + [eos]
        gen = torch.Generator().manual_seed(i)
        lp = lambda n: (-torch.rand(n, generator=gen)).tolist()  # noqa: E731
        turns = [
            Turn(len(prompt), turn0, lp(len(turn0)), "stop", bridge_ids=bridge),
            Turn(len(prompt) + len(turn0) + len(bridge), turn1, lp(len(turn1)), "stop"),
        ]
        reward = float(i % 4)
        out.append(
            Trajectory(
                "bench",
                i,
                prompt,
                turns,
                reward=reward,
                termination="submit",
                checks={"passed": reward, "total": 3, "resolved": reward == 3},
            )
        )
    return out


def common(batch, steps, out):
    return dict(
        output_dir=out,
        per_device_train_batch_size=batch,
        num_generations=4,
        max_steps=steps,
        learning_rate=1e-5,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        disable_tqdm=True,
        bf16=False,
        seed=0,
    )


def timed(trainer) -> list[tuple[float, float]]:
    """Wrap ``trainer.training_step``; return the list it fills with (wall, cpu) seconds per step."""
    record: list[tuple[float, float]] = []
    inner = trainer.training_step

    def training_step(*args, **kwargs):
        w, c = time.perf_counter(), time.process_time()
        out = inner(*args, **kwargs)
        record.append((time.perf_counter() - w, time.process_time() - c))
        return out

    trainer.training_step = training_step
    return record


def time_trl(model, tokenizer, episodes, batch, steps, out) -> list[tuple[float, float]]:
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    by_prompt = {f"p{i}": t for i, t in enumerate(episodes)}

    def rollout_func(prompts, trainer):
        trajs = [by_prompt[p] for p in prompts]
        n = [len(t.prompt_ids) for t in trajs]
        return {
            "prompt_ids": [t.prompt_ids for t in trajs],
            "completion_ids": [t.token_ids()[k:] for t, k in zip(trajs, n)],
            "logprobs": [t.sampler_logprobs()[k:] for t, k in zip(trajs, n)],
            "env_mask": [t.loss_mask()[k:] for t, k in zip(trajs, n)],
            "episode_reward": [t.reward for t in trajs],
        }

    def reward(episode_reward, **kw):
        return episode_reward

    rows = [{"prompt": f"p{i}"} for i in range(0, len(episodes), 4)]
    # the sampler repeats each prompt num_generations times: map the 4 copies of "p0" to episodes 0..3
    counters: dict[str, int] = {}

    def rollout_groups(prompts, trainer):
        counters.clear()
        keys = []
        for p in prompts:
            k = counters.get(p, 0)
            counters[p] = k + 1
            keys.append(f"p{int(p[1:]) + k}")
        return rollout_func(keys, trainer)

    args = GRPOConfig(**common(batch, steps, out))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        rollout_func=rollout_groups,
    )
    trainer.remove_callback(PrinterCallback)
    record = timed(trainer)
    trainer.train()
    return record


def time_t1(model, tokenizer, episodes, batch, steps, out, **kw) -> list[tuple[float, float]]:
    from t1train.trainer import T1Config, T1Trainer

    args = T1Config(**common(batch, steps, out), tasks=["bench"], train_seeds=list(range(len(episodes) // 4)), **kw)
    trainer = T1Trainer(model, args, processing_class=tokenizer, engine=object(), make_env=lambda t: None)
    cursor = {"i": 0}

    def rollout(specs, sampling=None, phase="train", first_index=0):  # pre-made episodes: no engine, no env
        out_ = [episodes[(cursor["i"] + j) % len(episodes)] for j in range(len(specs))]
        cursor["i"] += len(specs)
        return out_

    trainer.rollout = rollout
    trainer.sync_engine_weights = lambda: None
    trainer.remove_callback(PrinterCallback)
    record = timed(trainer)
    trainer.train()
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="alternate the variants this many times")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from t1train.models import tiny_moe

    base, tokenizer = tiny_moe()
    episodes = make_episodes(tokenizer, args.batch)
    variants = {
        "trl GRPOTrainer": lambda m, o: time_trl(m, tokenizer, episodes, args.batch, args.steps, o),
        "t1 grpo, no IS": lambda m, o: time_t1(
            m, tokenizer, episodes, args.batch, args.steps, o, algorithm="grpo", off_policy_correction="none"
        ),
        "t1 grpo + IS": lambda m, o: time_t1(m, tokenizer, episodes, args.batch, args.steps, o, algorithm="grpo"),
        "t1 ppo + IS": lambda m, o: time_t1(m, tokenizer, episodes, args.batch, args.steps, o, algorithm="ppo"),
    }
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    for _ in range(args.repeats):  # interleave, so load changes on a shared machine hit every variant alike
        for name, run in variants.items():
            with tempfile.TemporaryDirectory() as out:
                t = run(copy.deepcopy(base).train(), out)
            times[name] += t[1:]  # drop the first step (warm-up)
    ref_wall = statistics.median(w for w, _ in times["trl GRPOTrainer"])
    ref_cpu = statistics.median(c for _, c in times["trl GRPOTrainer"])
    tokens = sum(len(t.token_ids()) for t in episodes) / len(episodes)
    print(
        f"tiny MoE, {args.batch} episodes/step, ~{tokens:.0f} tokens each, {args.threads} thread(s), "
        f"median of {len(times['trl GRPOTrainer'])} steps per variant"
    )
    print("| variant | wall (ms) | vs TRL | CPU (ms) | vs TRL |")
    print("|---|---:|---:|---:|---:|")
    for name, ts in times.items():
        wall = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        print(f"| {name} | {1000 * wall:.1f} | {wall / ref_wall:.2f}x | {1000 * cpu:.1f} | {cpu / ref_cpu:.2f}x |")


if __name__ == "__main__":
    main()

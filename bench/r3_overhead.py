"""R3 overhead on the tiny MoE: rollout time with and without routing capture, and training-step time (forward +
backward) with and without replay, measured side by side (runs interleaved, medians reported).

    python bench/r3_overhead.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    args = parser.parse_args()

    import torch
    from logprob_mismatch import EchoEnv

    from t1train.engines.base import SamplingParams
    from t1train.engines.hf import HFEngine
    from t1train.models import tiny_moe
    from t1train.r3 import RoutingReplay, align_routing
    from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner

    torch.set_num_threads(2)
    model, tok = tiny_moe()
    engine = HFEngine(model, tok)
    specs = [EpisodeSpec("echo", i) for i in range(args.episodes)]

    def rollout(capture: bool):
        cfg = RolloutConfig(
            system_prompt="Use ```bash blocks.",
            max_turns=args.turns,
            concurrency=args.episodes,
            return_routed_experts=capture,
            submit_on_limit=False,
        )
        runner = RolloutRunner(
            engine, tok, EchoEnv, SamplingParams(max_new_tokens=args.max_new_tokens, seed=0, ignore_eos=True), cfg
        )
        c0, t0 = time.process_time(), time.perf_counter()
        trajs = runner.run(specs)
        return (time.perf_counter() - t0, time.process_time() - c0), trajs

    rollout(False)  # warm-up
    times = {False: [], True: []}
    trajs = None
    for _ in range(args.repeats):
        for capture in (False, True):
            dt, out = rollout(capture)
            times[capture].append(dt)
            if capture:
                trajs = out
    roll_off, roll_on = (statistics.median(w for w, _ in times[k]) for k in (False, True))
    roll_cpu_off, roll_cpu_on = (statistics.median(c for _, c in times[k]) for k in (False, True))

    # one training step over the captured batch, TRL layout: prompt left-padded, completion right-padded
    prompts = [t.prompt_ids for t in trajs]
    completions = [t.token_ids()[len(t.prompt_ids) :] for t in trajs]
    P, C = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((len(trajs), P + C), tok.pad_token_id)
    attention = torch.zeros_like(ids)
    for b, (p, c) in enumerate(zip(prompts, completions)):
        ids[b, P - len(p) : P], ids[b, P : P + len(c)] = torch.tensor(p), torch.tensor(c)
        attention[b, P - len(p) : P + len(c)] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    routing, mask = align_routing([t.routed_experts_by_position() for t in trajs], list(map(len, prompts)), P, P + C)
    model.train()
    replay = RoutingReplay(model)

    def step(with_replay: bool):
        model.zero_grad(set_to_none=True)
        c0 = time.process_time()
        t0 = time.perf_counter()
        if with_replay:
            with replay.active(routing, mask, attention):
                loss = model(ids, attention_mask=attention, position_ids=positions).logits.logsumexp(-1).mean()
                loss.backward()
        else:
            loss = model(ids, attention_mask=attention, position_ids=positions).logits.logsumexp(-1).mean()
            loss.backward()
        return time.perf_counter() - t0, time.process_time() - c0

    step(False)
    steps = {False: [], True: []}
    for _ in range(args.repeats * 2):
        for with_replay in (False, True):
            steps[with_replay].append(step(with_replay))
    step_off, step_on = (statistics.median(w for w, _ in steps[k]) for k in (False, True))
    # CPU time of this process: far less sensitive than wall time to other jobs on a shared machine
    cpu_off, cpu_on = (statistics.median(c for _, c in steps[k]) for k in (False, True))
    tokens = int(attention.sum())
    print(
        f"tiny MoE, CPU, {args.episodes} episodes x {args.turns} turns x {args.max_new_tokens} new tokens; "
        f"step over {len(trajs)} x {P + C} ({tokens} real tokens); medians of {args.repeats} / "
        f"{2 * args.repeats} interleaved runs\n"
    )
    header = f"{'phase':<10} {'without R3':>11} {'with R3':>9} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    print(f"{'rollout':<10} {roll_off:>10.3f}s {roll_on:>8.3f}s {roll_on / roll_off:>7.3f}")
    print(f"{'roll (CPU)':<10} {roll_cpu_off:>10.3f}s {roll_cpu_on:>8.3f}s {roll_cpu_on / roll_cpu_off:>7.3f}")
    print(f"{'step':<10} {step_off:>10.3f}s {step_on:>8.3f}s {step_on / step_off:>7.3f}")
    print(f"{'step (CPU)':<10} {cpu_off:>10.3f}s {cpu_on:>8.3f}s {cpu_on / cpu_off:>7.3f}")
    print(f"\nreplay: {replay.metrics()}")


if __name__ == "__main__":
    main()

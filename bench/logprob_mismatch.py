"""Train–inference mismatch on MoE models: re-tokenized baseline vs TITO vs TITO + R3.

Multi-turn episodes are sampled by ``HFEngine`` in bf16 with a KV cache (episodes batched, left-padded), recording
routing for every position (R3 capture). The trainer then scores the same episodes in a full forward, in fp32 (the
usual master-weight setting) and in bf16 (control: same dtype, only KV cache vs full forward and batch shape
differ), three ways:

(a) re-tokenized: decode the turns, render the chat, tokenize once, score each assistant region (index-aligned
    with the sampled tokens, as a decode-and-re-tokenize pipeline would);
(b) TITO: score exactly the sampled ids;
(c) TITO + R3: as (b), replaying the sampler's expert choices (``t1train/r3.py``).

Reported per setting: routing agreement (share of token-layer top-k sets equal to the sampler's, over positions
that produce loss tokens) and mean |Δlogp| between the trainer's and the sampler's log-probs in the loss region.

    python bench/logprob_mismatch.py                 # table; --plot docs/benchmarks-r3.png writes the figure
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time


class EchoEnv:
    """A tiny shell look-alike: every command's observation is a few lines of text; never ends on its own."""

    def __init__(self, task: str):
        self.task, self.turn = task, 0

    def reset(self, seed=None):
        self.turn = 0
        return f"Task {self.task} (seed {seed}): inspect the logs and write summary.txt.", {"task_id": self.task}

    def step(self, action):
        if isinstance(action, dict) and action.get("submit"):
            return "[t1] episode ended", 0.0, True, False, {"checks": [], "passed": 0, "total": 1}
        self.turn += 1
        obs = f"$ {action}\nerror: file not found\n[exit code: 1]\nturn {self.turn}\n"
        return obs, 0.0, False, False, {"exit_code": 1}

    def close(self):
        pass


def build_model(name: str):
    """``tiny``: t1's tiny MoE (2 layers, 4 experts, top-2). ``wide``: same tokenizer, 4 layers, 32 experts, top-4
    (more experts per layer: more near-ties, as in real MoE models), weights drawn at 5x transformers' default
    scale (``initializer_range=0.1``) so that experts differ and the next-token distribution is not near-uniform;
    at the default scale a random model's log-probs barely depend on which expert runs."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    from t1train.models import MODEL_CONFIG, tiny_moe

    model, tok = tiny_moe()
    if name == "tiny":
        return model, tok
    cfg = dict(MODEL_CONFIG, num_hidden_layers=4, num_experts=32, num_experts_per_tok=4, initializer_range=0.1)
    config = Qwen3MoeConfig(
        vocab_size=len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None, **cfg
    )
    torch.manual_seed(1)
    wide = Qwen3MoeForCausalLM(config)
    with torch.no_grad():
        for n, p in wide.named_parameters():
            if n.endswith("mlp.gate.weight"):
                p.normal_(0.0, 0.5)
    return wide.eval(), tok


def sample(model, tok, episodes: int, turns: int, max_new_tokens: int):
    import torch

    from t1train.engines.base import SamplingParams
    from t1train.engines.hf import HFEngine
    from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner

    engine = HFEngine(copy.deepcopy(model).to(torch.bfloat16), tok)
    cfg = RolloutConfig(
        system_prompt="Use ```bash blocks.",
        max_turns=turns,
        concurrency=episodes,
        return_routed_experts=True,
        submit_on_limit=False,
    )
    runner = RolloutRunner(engine, tok, EchoEnv, SamplingParams(max_new_tokens=max_new_tokens, seed=0), cfg)
    return runner.run([EpisodeSpec("echo", i) for i in range(episodes)])


def retokenized(traj, tok):
    """``(ids, regions)`` of the decode-and-re-tokenize baseline: per assistant turn, the positions of its region."""
    messages = traj.messages
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    special = set(tok.all_special_ids)
    regions = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        start = len(tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True))
        end = start + len(m["content"])
        region = [j for j, (s, e) in enumerate(offsets) if e > start and s < end]
        after = (region[-1] + 1) if region else next((j for j, (s, _) in enumerate(offsets) if s >= end), len(ids))
        if after < len(ids) and ids[after] in special:
            region.append(after)
        regions.append(region)
    return ids, regions


def score(model, ids, replay=None, routing=None, mask=None):
    """Log-probs of ``ids[1:]`` and the live routing ``[T, layers, k]`` of one full forward."""
    import torch

    from t1train.r3 import RoutingRecorder, moe_layers

    x = torch.tensor([ids])
    with RoutingRecorder(moe_layers(model)) as rec, torch.no_grad():
        if replay is not None:
            with replay.active(routing[None], mask[None]):
                logits = model(x).logits
        else:
            logits = model(x).logits
    lp = torch.log_softmax(logits[0, :-1].float(), -1).gather(-1, x[0, 1:, None])[:, 0]
    return lp, rec.stacked(1, len(ids))[0]


def measure(model, tok, trajs):
    """``{method: (agreement, mean |Δlogp|, tokens)}`` for (a), (b), (c) on ``model`` (its dtype)."""
    import torch

    from t1train.r3 import RoutingReplay

    replay = RoutingReplay(model)
    sums = {m: [0, 0, 0.0, 0] for m in ("re-tokenized", "TITO", "TITO + R3")}  # agree, token-layers, |Δ|, tokens

    def add(method, live_rows, sampler_rows, deltas):
        same = (live_rows.sort(-1).values == sampler_rows.sort(-1).values).all(-1)
        s = sums[method]
        s[0] += int(same.sum())
        s[1] += same.numel()
        s[2] += float(deltas.abs().sum())
        s[3] += deltas.numel()

    for traj in trajs:
        rows, recorded = traj.routed_experts_by_position()
        rows, recorded = torch.tensor(rows), torch.tensor(recorded)
        ids = traj.token_ids()
        loss = torch.tensor(traj.loss_mask(), dtype=torch.bool)[1:]  # token p is scored from position p - 1
        sampler_lp = torch.tensor(traj.sampler_logprobs())[1:][loss]
        producers = loss.nonzero()[:, 0]  # position p - 1 produced loss token p
        for method, rp in (("TITO", None), ("TITO + R3", replay)):
            lp, live = score(model, ids, rp, rows, recorded)
            add(method, live[producers], rows[producers], lp[loss] - sampler_lp)
        # (a) re-tokenized: index-aligned per turn (a drifted token is scored as whatever id sits there)
        rids, regions = retokenized(traj, tok)
        lp, live = score(model, rids)
        for turn, region in zip(traj.turns, regions):
            n = min(len(region), len(turn.sampled_ids))
            pos = torch.tensor(region[:n])
            pos = pos[pos > 0]
            k = len(pos)
            add(
                "re-tokenized",
                live[pos - 1],
                torch.tensor(turn.routed_experts[:k]),
                lp[pos - 1] - torch.tensor(turn.logprobs[:k]),
            )
    replay.remove()
    return {m: (a / max(t, 1), d / max(n, 1), n) for m, (a, t, d, n) in sums.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "wide"])
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--turns", nargs="+", type=int, default=[2, 10])
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--plot", help="write a PNG bar chart here")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(2)
    results = []
    header = (
        f"{'model':<6} {'turns':>5} {'trainer':>8} {'method':<13} {'routing agree':>13} {'mean |Δlogp|':>12} "
        f"{'tokens':>7}"
    )
    print(header)
    print("-" * len(header))
    for name in args.models:
        model, tok = build_model(name)
        for turns in args.turns:
            t0 = time.monotonic()
            trajs = sample(model, tok, args.episodes, turns, args.max_new_tokens)
            seq = statistics.mean(len(t.token_ids()) for t in trajs)
            for trainer_dtype in (torch.float32, torch.bfloat16):
                trainer = model if trainer_dtype == torch.float32 else copy.deepcopy(model).to(torch.bfloat16)
                dname = "fp32" if trainer_dtype == torch.float32 else "bf16"
                for method, (agree, delta, n) in measure(trainer, tok, trajs).items():
                    results.append((name, turns, dname, method, agree, delta, n))
                    print(f"{name:<6} {turns:>5} {dname:>8} {method:<13} {agree:>12.2%} {delta:>12.4f} {n:>7}")
            print(f"{'':<6} {'':>5} ({args.episodes} episodes, mean {seq:.0f} tokens, {time.monotonic() - t0:.0f}s)")
    if args.plot:
        plot(results, args.plot)


def plot(results, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = sorted({(r[0], r[1], r[2]) for r in results}, key=lambda s: (s[0], s[1], s[2] != "fp32"))
    methods = ["re-tokenized", "TITO", "TITO + R3"]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.27
    for i, method in enumerate(methods):
        values = [next(r[5] for r in results if (r[0], r[1], r[2]) == s and r[3] == method) for s in settings]
        ax.bar([x + (i - 1) * width for x in range(len(settings))], values, width, label=method)
    ax.set_xticks(range(len(settings)), [f"{m}\n{t} turns\ntrainer {d}" for m, t, d in settings], fontsize=8)
    ax.set_ylabel("mean |Δlogp| (loss region)")
    ax.set_title("Sampler bf16 + KV cache vs trainer full forward")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

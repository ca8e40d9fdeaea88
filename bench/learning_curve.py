"""Learning evidence on CPU: the README's training recipe on the ``chain`` family, ablated over seeds.

The recipe's SFT imitates chain's sloppy demonstrator (the oracle and three flawed demos alike), so RL has two
slips to unlearn; each run also reports how often held-out episodes make them before and after RL.

Every run is ``t1train --config tiny-cpu`` (``t1train/configs/tiny-cpu.yaml``, run through
:func:`t1train.pipeline.train_and_evaluate`, the code path of the CLI) with one change:

* ``--ablation reward``: the reward the policy is trained on: ``count`` (passing checks, the default), ``fraction``
  (passing / total) or ``binary`` (1 only when every check passes);
* ``--ablation critic``: ``ppo-warm`` (PPO with the critic warm-start, the default), ``ppo-cold`` (no warm-start) or
  ``grpo`` (no critic).

``count`` and ``ppo-warm`` are the same run (the default config), run once per seed. Every run of a seed starts from
the same SFT warm-start (trained once per seed, saved under ``--work``), trains for the same number of optimizer steps
on the same rollouts per step, and is scored on the same held-out episodes (11 test instances of ``chain``, whose
(word, number) pairs no train instance has, 16 episodes each) before and after RL. The eval noise is measured, not
assumed: the SFT policy of the first seed scored with 4 different sampling seeds.

Writes, after every run (``--resume`` continues an interrupted comparison), ``docs/learning_curve.json`` (every
run, every step's metrics), ``docs/learning_curve.md`` (the tables quoted by ``docs/benchmarks-training.md``) and one
plot per ablation (``docs/learning_curve_reward.png``, ``docs/learning_curve_critic.png``); prints the tables.

Usage::

    python bench/learning_curve.py [--ablation reward critic] [--seeds 0 1 2] [--jobs 2] [--resume]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "tiny-cpu"
ABLATIONS = {
    "reward": {
        "count": {},
        "fraction": {"env_kwargs": {"reward_mode": "fraction"}},
        "binary": {"env_kwargs": {"reward_mode": "binary"}},
    },
    "critic": {
        "ppo-warm": {},
        "ppo-cold": {"critic_warmup_iterations": 0},
        "grpo": {"algorithm": "grpo", "critic_warmup_iterations": 0},
    },
}
NOISE_SAMPLING_SEEDS = (100, 101, 102, 103)
STEP_KEYS = (
    "t1/resolved_rate",
    "t1/passing_fraction",
    "t1/zero_variance_groups",
    "t1/group_reward_var",
    "entropy",
    "critic/explained_variance",
    "clip_ratio/region_mean",
)


def _key(overrides: dict) -> str:
    return json.dumps(overrides, sort_keys=True)


def _config(seed: int, work: Path, overrides: dict, steps: int | None, name: str):
    from t1train.config import build_t1_config, load_train_config

    cfg = load_train_config(CONFIG)
    train = {
        **cfg.train,
        **overrides,
        "seed": seed,
        "output_dir": str(work / f"seed{seed}" / name),
        "save_strategy": "no",
        "disable_tqdm": True,
        "health_line": False,
    }
    if steps is not None:
        train["max_steps"] = steps
    cfg.sft.output_dir = str(work / f"seed{seed}" / "sft")
    return cfg, build_t1_config(train)


def sft_once(seed: int, work: Path, noise_seeds: tuple[int, ...] = ()) -> dict:
    """The SFT warm-start of ``seed`` (saved; reused by every run of the seed), and its held-out scores with each
    of ``noise_seeds`` as the sampling seed (the eval noise)."""
    import torch

    torch.set_num_threads(1)
    from t1train.models import load_model_and_tokenizer
    from t1train.pipeline import eval_specs, run_sft_section
    from t1train.trainer import T1Trainer

    cfg, targs = _config(seed, work, {}, None, "sft-eval")
    t0 = time.monotonic()
    if not (Path(cfg.sft.output_dir) / "config.json").is_file():
        model, tokenizer = load_model_and_tokenizer(cfg.model)
        run_sft_section(cfg, targs, model.train(), tokenizer)
    seconds = time.monotonic() - t0
    model, tokenizer = load_model_and_tokenizer(cfg.sft.output_dir)
    trainer = T1Trainer(model.train(), targs, processing_class=tokenizer)
    tasks, seeds = eval_specs(cfg, targs)
    noise = []
    for s in noise_seeds:
        trainer.args.seed = s
        m = trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, cfg.eval.episodes_per_task)
        noise.append(
            {"sampling_seed": s, "resolved_rate": m["resolved_rate"], "passing_fraction": m["passing_fraction"]}
        )
    return {"seed": seed, "sft_seconds": seconds, "noise": noise}


def slip_rates(log: Path) -> dict:
    """Per phase of a run's episode log (``eval-before``, ``train``, ``eval-after``, ...): the share of episodes that
    make each of chain's demonstrated slips (``t1env/families/chain.py``): ``spare_folder`` (``mkdir tmp WORD``) and
    ``rereads_name`` (``cat name.txt`` where ``cat count.txt`` belongs). What RL has to unlearn from the SFT
    demonstrator, read off the commands the policy ran."""
    counts: dict[str, list[int]] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line)
        commands = [(t.get("action") or {}).get("command") or "" for t in record["turns"]]
        c = counts.setdefault(record["metadata"]["phase"], [0, 0, 0])
        c[0] += 1
        c[1] += any(cmd.startswith("mkdir tmp") for cmd in commands)
        c[2] += sum(cmd.strip() == "cat name.txt" for cmd in commands) >= 2
    return {phase: {"spare_folder": n1 / n, "rereads_name": n2 / n} for phase, (n, n1, n2) in counts.items()}


def one_run(seed: int, work: Path, name: str, overrides: dict, steps: int | None) -> dict:
    import torch

    torch.set_num_threads(1)
    from t1train.models import load_model_and_tokenizer
    from t1train.pipeline import train_and_evaluate

    cfg, targs = _config(seed, work, overrides, steps, name)
    model, tokenizer = load_model_and_tokenizer(cfg.sft.output_dir)
    t0 = time.monotonic()
    run = train_and_evaluate(cfg, targs, model, tokenizer, skip_sft=True, quiet=True)
    trainer = run["trainer"]
    history = [{k: h[k] for k in STEP_KEYS if k in h} for h in trainer.state.log_history if "t1/resolved_rate" in h]
    pick = ("resolved_rate", "passing_fraction", "passed_mean", "episodes")
    return {
        "seed": seed,
        "overrides": overrides,
        "key": _key(overrides),
        "steps": targs.max_steps,
        "before": {k: run["before"][k] for k in pick},
        "after": {k: run["after"][k] for k in pick},
        "history": history,
        "warmup": trainer.critic_warmup_history,
        "rl_seconds": run["rl_seconds"],
        "slips": slip_rates(Path(targs.output_dir) / "trajectories.jsonl"),
        "seconds": time.monotonic() - t0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Ablations of the t1train recipe on the chain family, over seeds")
    parser.add_argument("--ablation", nargs="+", default=list(ABLATIONS), choices=list(ABLATIONS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="RL steps per run (default: the config's)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (each on one CPU thread)")
    parser.add_argument("--work", default=str(ROOT / "runs" / "learning_curve"), help="SFT models and run folders")
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--resume", action="store_true", help="keep the runs in OUT/learning_curve.json")
    args = parser.parse_args()
    out, work = Path(args.out), Path(args.work)
    saved = out / "learning_curve.json"
    from t1train.storage import write_text_atomic

    state = json.loads(saved.read_text()) if args.resume and saved.exists() else {"sft": [], "runs": []}
    t_start, wall_before = time.monotonic(), state.get("wall_seconds", 0.0)

    def save() -> None:
        state["wall_seconds"] = wall_before + time.monotonic() - t_start
        write_text_atomic(saved, json.dumps(state, indent=1))
        write_text_atomic(out / "learning_curve.md", render(state))

    ctx = get_context("spawn")  # a fresh interpreter per job: no torch or sandbox state shared with the parent
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx) as pool:
        have = {s["seed"] for s in state["sft"]}
        futures = [
            pool.submit(sft_once, seed, work, NOISE_SAMPLING_SEEDS if seed == min(args.seeds) else ())
            for seed in args.seeds
            if seed not in have
        ]
        for fut in as_completed(futures):
            state["sft"].append(fut.result())
            save()
            print(f"sft seed {state['sft'][-1]['seed']}: {state['sft'][-1]['noise']}", flush=True)
        wanted = {}
        for ablation in args.ablation:
            for name, overrides in ABLATIONS[ablation].items():
                wanted.setdefault(_key(overrides), (name, overrides))
        done = {(r["key"], r["seed"]) for r in state["runs"]}
        todo = [
            (seed, key, name, overrides)
            for seed in args.seeds
            for key, (name, overrides) in wanted.items()
            if (key, seed) not in done
        ]
        todo.sort(key=lambda t: t[1] != _key({}))  # the recipe's own runs first, on every seed; then the variants
        futures = {
            pool.submit(one_run, seed, work, name, overrides, args.steps): (name, seed)
            for seed, _, name, overrides in todo
        }
        for fut in as_completed(futures):
            run = fut.result()
            state["runs"].append(run)
            save()
            name, seed = futures[fut]
            print(
                f"{name:<9} seed {seed}: held-out resolved {run['before']['resolved_rate']:.3f} -> "
                f"{run['after']['resolved_rate']:.3f}, passing {run['before']['passing_fraction']:.3f} -> "
                f"{run['after']['passing_fraction']:.3f} ({run['seconds']:.0f} s)",
                flush=True,
            )
    save()
    for ablation in args.ablation:
        plot(state, ablation, out / f"learning_curve_{ablation}.png")
    print(render(state))


# ------------------------------------------------------------------------------------------------ report
def _noise(state) -> dict:
    """The std of one held-out score (same policy, different sampling seeds) and of a difference of two."""
    out = {}
    for metric in ("resolved_rate", "passing_fraction"):
        first = [s for s in sorted(state["sft"], key=lambda s: s["seed"]) if s["noise"]][:1]
        values = [n[metric] for s in first for n in s["noise"]]
        sd = statistics.stdev(values) if len(values) > 1 else float("nan")
        out[metric] = {"values": values, "sd": sd, "diff_sd": sd * math.sqrt(2)}
    return out


def _collapsed(run, noise) -> bool:
    """Collapse: after RL the policy resolves no held-out episode, or its held-out passing fraction fell by more
    than 3x the noise of a difference."""
    fell = run["before"]["passing_fraction"] - run["after"]["passing_fraction"]
    return run["after"]["resolved_rate"] == 0.0 or fell > 3 * noise["passing_fraction"]["diff_sd"]


def _runs_of(state, overrides):
    return sorted((r for r in state["runs"] if r["key"] == _key(overrides)), key=lambda r: r["seed"])


def render(state) -> str:
    noise = _noise(state)
    lines = ["# Learning curves: the chain family, tiny MoE on CPU", ""]
    for ablation, variants in ABLATIONS.items():
        rows = [(name, _runs_of(state, ov)) for name, ov in variants.items()]
        if not any(rs for _, rs in rows):
            continue
        lines += [
            f"## {ablation}",
            "",
            (
                "| variant | seeds | held-out resolved: before → after (per seed) | resolved gain: mean (per seed) | "
                "gain > 3x noise | "
                "passing fraction: before → after | slips held out, spare folder / reread: before → after | "
                "collapsed | critic EV, steps 1–10 → last 10 | RL s/run |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, rs in rows:
            if not rs:
                continue
            gains = [r["after"]["resolved_rate"] - r["before"]["resolved_rate"] for r in rs]
            per_seed = ", ".join(f"{r['before']['resolved_rate']:.2f}→{r['after']['resolved_rate']:.2f}" for r in rs)
            pf = (
                statistics.mean(r["before"]["passing_fraction"] for r in rs),
                statistics.mean(r["after"]["passing_fraction"] for r in rs),
            )
            evs = [
                [h["critic/explained_variance"] for h in r["history"] if "critic/explained_variance" in h] for r in rs
            ]
            ev_cell = (
                (
                    f"{statistics.mean(statistics.mean(e[:10]) for e in evs):.2f} → "
                    f"{statistics.mean(statistics.mean(e[-10:]) for e in evs):.2f}"
                )
                if all(evs)
                else "—"
            )
            slips = [r["slips"] for r in rs if "slips" in r]

            def slip(phase, kind):
                return statistics.mean(sl[phase][kind] for sl in slips)

            slip_cell = (
                (
                    f"{slip('eval-before', 'spare_folder'):.2f} / {slip('eval-before', 'rereads_name'):.2f} → "
                    f"{slip('eval-after', 'spare_folder'):.2f} / {slip('eval-after', 'rereads_name'):.2f}"
                )
                if len(slips) == len(rs)
                else "—"
            )
            lines.append(
                f"| {name} | {len(rs)} | {statistics.mean(r['before']['resolved_rate'] for r in rs):.2f} → "
                f"{statistics.mean(r['after']['resolved_rate'] for r in rs):.2f} ({per_seed}) | "
                f"**{statistics.mean(gains):+.2f}** ({', '.join(f'{g:+.2f}' for g in gains)}) | "
                f"{sum(g > 3 * noise['resolved_rate']['diff_sd'] for g in gains)}/{len(gains)} | "
                f"{pf[0]:.2f} → {pf[1]:.2f} | {slip_cell} | {sum(_collapsed(r, noise) for r in rs)}/{len(rs)} | "
                f"{ev_cell} | "
                f"{statistics.mean(r['rl_seconds'] for r in rs):.0f} |"
            )
        lines.append("")
    r, p = noise["resolved_rate"], noise["passing_fraction"]
    steps = sorted({run["steps"] for run in state["runs"]})
    lines += [
        (
            f"Eval noise (the first seed's SFT policy scored with {len(r['values'])} sampling seeds): resolved "
            f"{', '.join(f'{v:.3f}' for v in r['values'])} (sd {r['sd']:.3f}; a difference of two scores "
            f"{r['diff_sd']:.3f}, so 3x is {3 * r['diff_sd']:.3f}); passing fraction sd {p['sd']:.3f} "
            f"(difference {p['diff_sd']:.3f})."
        ),
        (
            f"RL steps per run: {', '.join(map(str, steps))}. Collapsed: after RL the policy resolves no held-out "
            "episode, or its held-out passing fraction fell by more than 3x the noise of a difference. Critic EV: "
            "the explained variance of the critic's values on each fresh batch before it trains on it (PPO only)."
        ),
        f"Wall time of the whole comparison so far: {state.get('wall_seconds', 0) / 60:.0f} min.",
    ]
    return "\n".join(lines) + "\n"


def plot(state, ablation: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    noise = _noise(state)["resolved_rate"]
    variants = ABLATIONS[ablation]
    colors = dict(zip(variants, ("tab:blue", "tab:orange", "tab:green")))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for name, ov in variants.items():
        for r in _runs_of(state, ov):
            ys = [h.get("t1/resolved_rate", float("nan")) for h in r["history"]]
            smooth = [statistics.mean(ys[max(0, i - 4) : i + 1]) for i in range(len(ys))]
            ax.plot(range(1, len(ys) + 1), smooth, color=colors[name], alpha=0.75, label=f"{name} (seed {r['seed']})")
    ax.set_xlabel("optimizer step (one rollout of 16 episodes)")
    ax.set_ylabel("training batch resolved rate\n(moving average of 5)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    for i, (name, ov) in enumerate(variants.items()):
        for r in _runs_of(state, ov):
            bx.plot(
                [i - 0.15, i + 0.15],
                [r["before"]["resolved_rate"], r["after"]["resolved_rate"]],
                marker="o",
                color=colors[name],
                alpha=0.8,
            )
    if noise["values"]:
        mid = statistics.mean(noise["values"])
        bx.axhspan(
            mid - 3 * noise["diff_sd"],
            mid + 3 * noise["diff_sd"],
            color="0.5",
            alpha=0.15,
            label="SFT score ± 3 sd of a difference",
        )
        bx.legend(fontsize=7, loc="lower right")
    bx.set_xticks(range(len(variants)), list(variants))
    bx.set_ylabel("held-out resolved rate\nbefore → after RL")
    bx.grid(alpha=0.3)
    fig.suptitle(f"chain family, tiny MoE on CPU: ablation '{ablation}' (SFT warm-start, then RL)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()

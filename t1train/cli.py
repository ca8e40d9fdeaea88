"""``t1train``: the trainer's command line.

Subcommands:

* ``t1train rollout --config FILE.yaml`` — run episodes with an engine, write TITO trajectories (JSONL), print
  reward, turns and drift (see ``docs/training.md``).
"""

from __future__ import annotations

import argparse
import sys
import time


def build_engine(cfg):
    """``(engine, tokenizer)`` for an ``EngineConfig``."""
    if cfg.kind == "hf":
        from t1train.engines.hf import HFEngine
        from t1train.models import load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.device, cfg.dtype)
        return HFEngine(model, tokenizer, max_batch_size=cfg.max_batch_size), tokenizer
    from t1train.engines.sglang import SGLangEngine
    from t1train.models import load_tokenizer

    tokenizer = load_tokenizer(cfg.model)
    top_k = None
    try:
        from transformers import AutoConfig

        from t1train.models import tiny_moe_path

        model_config = AutoConfig.from_pretrained(tiny_moe_path() if cfg.model == "tiny" else cfg.model)
        top_k = getattr(model_config, "num_experts_per_tok", None)
    except (OSError, ValueError):
        pass
    engine = SGLangEngine(cfg.url, max_concurrency=cfg.max_concurrency, timeout=cfg.timeout, top_k_experts=top_k)
    return engine, tokenizer


def make_env_factory(env_cfg):
    import gymnasium as gym

    import t1env  # noqa: F401  (registers T1Terminal-v0)

    def make_env(task: str):
        return gym.make("T1Terminal-v0", task=task, backend=env_cfg.backend, **env_cfg.kwargs)

    return make_env


def cmd_rollout(args) -> int:
    from t1train.config import load_rollout_config
    from t1train.rollout import EpisodeSpec, RolloutRunner, rollout_metrics
    from t1train.trajectory import save_jsonl

    cfg = load_rollout_config(args.config)
    if args.output:
        cfg.output = args.output
    if args.episodes is not None:
        cfg.episodes = args.episodes
    if cfg.sampling.seed is None:
        cfg.sampling.seed = cfg.seed
    engine, tokenizer = build_engine(cfg.engine)
    runner = RolloutRunner(engine, tokenizer, make_env_factory(cfg.env), cfg.sampling, cfg.rollout)
    tasks = cfg.env.tasks
    specs = [EpisodeSpec(tasks[i % len(tasks)], cfg.seed + i) for i in range(cfg.episodes)]
    t0 = time.monotonic()
    trajectories = runner.run(specs)
    elapsed = time.monotonic() - t0
    save_jsonl(trajectories, cfg.output)
    metrics = rollout_metrics(trajectories, tokenizer, cfg.rollout.chat_template)

    print(f"{'task':<24} {'seed':>5} {'turns':>5} {'reward':>7} {'checks':>7}  end")
    for t in trajectories:
        checks = f"{t.checks.get('passed', '-')}/{t.checks.get('total', '-')}"
        print(f"{t.task_id:<24} {t.seed!s:>5} {t.num_turns:>5} {t.reward:>7.2f} {checks:>7}  {t.termination}"
              + (f" ({t.error})" if t.error else ""))
    print(f"\nepisodes {metrics['episodes']}  reward {metrics['reward_mean']:.3f}  "
          f"resolved {metrics['resolved_rate']:.2f}  turns {metrics['turns_mean']:.1f}  "
          f"tokens {metrics['tokens_total']} ({metrics['loss_tokens']} sampled)  {elapsed:.1f}s")
    print(f"drift in the loss region: TITO {metrics['tito_drift_tokens']} tokens; "
          f"decode-and-re-tokenize baseline {metrics['retokenize_drift_tokens']} tokens in "
          f"{metrics['retokenize_drift_turns']}/{metrics['assistant_turns']} turns; "
          f"template repairs {metrics['drift_events']}")
    print(f"wrote {len(trajectories)} trajectories to {cfg.output}")
    return 0 if metrics["tito_drift_tokens"] == 0 else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t1train", description="Train and roll out terminal agents.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    rollout = sub.add_parser("rollout", help="run episodes with an engine and write TITO trajectories")
    rollout.add_argument("--config", required=True, help="rollout YAML file (see docs/training.md)")
    rollout.add_argument("--output", help="override the config's output path")
    rollout.add_argument("--episodes", type=int, help="override the config's episode count")
    rollout.set_defaults(func=cmd_rollout)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"t1train: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

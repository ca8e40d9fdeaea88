"""``t1train``: the trainer's command line.

Subcommands:

* ``t1train --config FILE.yaml`` (same as ``t1train train --config FILE.yaml``) — SFT warm-start (if the file has an
  ``sft:`` section), then RL with ``T1Trainer`` (PPO, GRPO or GSPO), with a held-out evaluation before and after;
  see ``t1train/configs/tiny-cpu.yaml`` and ``docs/training.md``.
* ``t1train sft --config FILE.yaml`` — only the SFT warm-start on oracle episodes; saves the model.
* ``t1train eval --config FILE.yaml [--model PATH]`` — mean passing checks and resolved rate on the eval episodes.
* ``t1train rollout --config FILE.yaml [--resume | --overwrite]`` — run episodes with an engine, write TITO
  trajectories (JSONL, one line per finished episode), print reward, turns and drift (see ``docs/training.md``).
* ``t1train serve [--model tiny] [--port 8000]`` — an OpenAI-compatible endpoint in front of the policy that records
  each session's exact tokens (``t1train/serve.py``; docs/training.md, "Train your own agent").

This module parses arguments and prints; the training run itself (config, SFT, evaluation, RL) is
:mod:`t1train.pipeline`, which benches and tests call directly.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from t1env.argtypes import at_least_one
from t1env.executor import make_executor
from t1train.config import EngineConfig, load_rollout_config
from t1train.engines.base import EngineError, SamplingParams
from t1train.harness import HarnessRunner
from t1train.pipeline import (
    build_engine,
    eval_specs,
    load_config,
    print_eval,
    run_sft_section,
    train_and_evaluate,
    trainer_config,
)
from t1train.rollout import EpisodeSpec, RolloutRunner, make_env_factory, rollout_metrics
from t1train.storage import EpisodeLog
from t1train.trajectory import Trajectory


def _episode_of(record: dict):
    """The key of a ``t1train rollout`` record: the episode's index in the run."""
    return (record.get("metadata") or {}).get("episode")


def _finished_episodes(log, specs, config: str) -> dict:
    """``{index: Trajectory}`` already in the output file, checked against this run's episode list."""
    done = {}
    for record in log.records():
        i = _episode_of(record)
        if not isinstance(i, int):
            raise ValueError(
                f"{log.path}: a record without metadata.episode: not written by `t1train rollout`; "
                "pass --overwrite to start over, or --output elsewhere"
            )
        task = record.get("metadata", {}).get("task")
        if i < len(specs) and (task, record.get("seed")) != (specs[i].task, specs[i].seed):
            raise ValueError(
                f"{log.path}: episode {i} there is task {task!r} seed {record.get('seed')}, but "
                f"{config} gives task {specs[i].task!r} seed {specs[i].seed}: the file is another "
                "run's; pass --overwrite to start over, or --output elsewhere"
            )
        done[i] = Trajectory.from_dict(record)
    return done


def _check_envs(make_env, tasks: list[str], config: str) -> None:
    """Make (not start) one env per task: unknown tasks and bad ``env.kwargs`` fail now, before the model loads."""
    for task in dict.fromkeys(tasks):
        try:
            make_env(task).close()
        except ValueError as err:  # TaskError is a ValueError
            raise ValueError(f"{config}: env: {err}") from None


def cmd_rollout(args) -> int:
    cfg = load_rollout_config(args.config)
    if args.output:
        cfg.output = args.output
    if args.episodes is not None:
        cfg.episodes = args.episodes
    if cfg.sampling.seed is None:
        cfg.sampling.seed = cfg.seed
    tasks = cfg.env.tasks
    specs = [EpisodeSpec(tasks[i % len(tasks)], cfg.seed + i, sampling_index=i) for i in range(cfg.episodes)]

    executor = make_executor(cfg.rollout.executor, cfg.rollout.ray_address)
    make_env = make_env_factory(cfg.env.backend, executor=executor, **cfg.env.kwargs.kwargs())
    _check_envs(make_env, tasks, args.config)

    # -- the output file: one line per finished episode, so a killed run keeps what it finished
    output = Path(cfg.output)
    if output.exists() and output.stat().st_size and not (args.resume or args.overwrite):
        raise ValueError(
            f"{output} already exists: pass --resume to finish that run (the episodes in it are kept "
            "and not run again), --overwrite to start over, or --output elsewhere"
        )
    with EpisodeLog(output, key=_episode_of) as log:
        if args.overwrite:
            log.clear()
        done = _finished_episodes(log, specs, args.config)
        todo = [i for i in range(cfg.episodes) if i not in done]

        def save(k: int, traj) -> None:
            traj.metadata.update(episode=todo[k], task=specs[todo[k]].task)
            log.append(traj.to_dict())

        engine, tokenizer = build_engine(cfg.engine)
        runner_class = HarnessRunner if cfg.rollout.agent == "harness" else RolloutRunner
        runner = runner_class(engine, tokenizer, make_env, cfg.sampling, cfg.rollout)
        t0 = time.monotonic()
        try:
            new = runner.run([specs[i] for i in todo], on_episode=save)
        except (EngineError, KeyboardInterrupt) as err:
            print(
                f"t1train: error: {type(err).__name__}: {err}\n{len(log.keys)} finished episodes are in {output}: "
                "run the same command with --resume to finish the run",
                file=sys.stderr,
            )
            return 1
        finally:
            executor.close()
        elapsed = time.monotonic() - t0
    trajectories = [t for _, t in sorted({**done, **dict(zip(todo, new))}.items())]
    metrics = rollout_metrics(trajectories, tokenizer, cfg.rollout.chat_template)
    metrics.update(executor.metrics())  # executor, workers_lost, episode_retries

    print(f"{'task':<24} {'seed':>5} {'turns':>5} {'reward':>7} {'checks':>7}  end")
    for t in trajectories:
        checks = f"{t.checks.get('passed', '-')}/{t.checks.get('total', '-')}"
        print(
            f"{t.task_id:<24} {t.seed!s:>5} {t.num_turns:>5} {t.reward:>7.2f} {checks:>7}  {t.termination}"
            + (f" ({t.error})" if t.error else "")
        )
    print(
        f"\nepisodes {metrics['episodes']}  reward {metrics['reward_mean']:.3f}  "
        f"resolved {metrics['resolved_rate']:.2f}  turns {metrics['turns_mean']:.1f}  "
        f"tokens {metrics['tokens_total']} ({metrics['loss_tokens']} sampled)  {elapsed:.1f}s"
    )
    print(
        f"drift in the loss region: TITO {metrics['tito_drift_tokens']} tokens; "
        f"decode-and-re-tokenize baseline {metrics['retokenize_drift_tokens']} tokens in "
        f"{metrics['retokenize_drift_turns']}/{metrics['assistant_turns']} turns; "
        f"template repairs {metrics['drift_events']}"
    )
    print(
        f"wrote {len(new)} trajectories to {cfg.output}"
        + (f" ({len(trajectories)} in total; {len(done)} were there already)" if done else "")
    )
    return 0 if metrics["tito_drift_tokens"] == 0 else 1


def cmd_train(args) -> int:
    cfg = load_config(args.config)
    targs = trainer_config(cfg, args.config, getattr(args, "output_dir", None), getattr(args, "max_steps", None))
    if args.resume:  # find the checkpoint now, before minutes of SFT; the trainer keeps the episodes logged up to it
        from transformers.trainer_utils import get_last_checkpoint  # heavy: transformers

        out = Path(targs.output_dir)
        path = (get_last_checkpoint(str(out)) if out.is_dir() else None) if args.resume is True else args.resume
        if path is None:
            raise ValueError(f"--resume: no checkpoint in {targs.output_dir}; run without --resume to start")
        targs.resume_from_checkpoint = path
    run = train_and_evaluate(cfg, targs, skip_sft=args.skip_sft)
    trainer = run["trainer"]
    print_eval("before RL", run["before"])
    print_eval("after RL", run["after"])
    if not trainer.accelerator.is_main_process:
        return 0
    if trainer.critic_warmup_history:
        last = trainer.critic_warmup_history[-1]
        print(
            f"critic warm-start: {len(trainer.critic_warmup_history)} iterations, "
            f"explained variance {last['explained_variance']:.3f}"
        )
    print(f"saved to {targs.output_dir}")
    return 0


def cmd_sft(args) -> int:
    from t1train.models import load_model_and_tokenizer  # heavy: torch, transformers

    cfg = load_config(args.config)
    if cfg.sft is None:
        raise ValueError(f"{args.config} has no sft: section")
    targs = trainer_config(cfg, args.config, getattr(args, "output_dir", None), getattr(args, "max_steps", None))
    model, tokenizer = load_model_and_tokenizer(cfg.model)
    run_sft_section(cfg, targs, model.train(), tokenizer)
    return 0


def cmd_eval(args) -> int:
    from t1train.models import load_model_and_tokenizer  # heavy: torch, transformers
    from t1train.trainer import T1Trainer  # heavy: TRL

    cfg = load_config(args.config)
    targs = trainer_config(cfg, args.config, getattr(args, "output_dir", None), getattr(args, "max_steps", None))
    targs.algorithm, targs.critic_warmup_iterations, targs.eval_every_steps = "grpo", 0, 0
    model, tokenizer = load_model_and_tokenizer(args.model or cfg.model)
    trainer = T1Trainer(model, targs, processing_class=tokenizer)
    tasks, seeds = eval_specs(cfg, targs)
    print_eval("eval", trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, cfg.eval.episodes_per_task))
    return 0


def cmd_serve(args) -> int:
    from t1train.serve import PolicyServer  # heavy: fastapi, uvicorn (only for this subcommand)

    chat_template = Path(args.chat_template).read_text() if args.chat_template else None
    engine, tokenizer = build_engine(
        EngineConfig(kind=args.engine, model=args.model, device=args.device, url=args.engine_url)
    )
    server = PolicyServer(
        engine,
        tokenizer,
        model_name=args.served_model_name or args.model,
        sampling=SamplingParams(max_new_tokens=args.max_new_tokens),
        chat_template=chat_template,
        max_context_tokens=args.max_context_tokens,
    )
    print(
        f"t1train serve: {args.model} at http://{args.host}:{args.port}/v1; a session's base_url is "
        f"http://{args.host}:{args.port}/t1/s/SESSION/v1 (or send the X-T1-Session header, or "
        f"the user field); its recorded tokens: GET /t1/sessions/SESSION",
        flush=True,
    )
    server.serve_forever(args.host, args.port)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t1train", description="Train and roll out terminal agents.")
    parser.add_argument("--config", help="training YAML file: same as `t1train train --config FILE`")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    train = sub.add_parser("train", help="SFT warm-start (optional) then RL: PPO, GRPO or GSPO")
    train.add_argument(
        "--config",
        required=True,
        help="training YAML file, or the name of a shipped one (tiny-cpu: t1train/configs/tiny-cpu.yaml)",
    )
    train.add_argument("--output-dir", help="override train.output_dir")
    train.add_argument("--max-steps", type=at_least_one, help="override train.max_steps")
    train.add_argument("--skip-sft", action="store_true", help="ignore the sft: section")
    train.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        help="resume from the last checkpoint in output_dir (or from the given checkpoint)",
    )
    train.set_defaults(func=cmd_train)
    sft = sub.add_parser("sft", help="SFT warm-start on oracle episodes only")
    sft.add_argument("--config", required=True, help="training YAML file with an sft: section")
    sft.add_argument("--output-dir", help="override train.output_dir (the model goes to <output_dir>/sft)")
    sft.set_defaults(func=cmd_sft)
    evaluate = sub.add_parser("eval", help="mean passing checks of a model on the config's eval episodes")
    evaluate.add_argument("--config", required=True, help="training YAML file")
    evaluate.add_argument("--model", help="model folder to evaluate (default: the config's model)")
    evaluate.add_argument("--output-dir", help="override train.output_dir (scratch space for the trainer)")
    evaluate.set_defaults(func=cmd_eval)
    rollout = sub.add_parser("rollout", help="run episodes with an engine and write TITO trajectories")
    rollout.add_argument("--config", required=True, help="rollout YAML file (see docs/training.md)")
    rollout.add_argument("--output", help="override the config's output path")
    rollout.add_argument("--episodes", type=at_least_one, help="override the config's episode count")
    again = rollout.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="the output file holds an interrupted run: run only the episodes missing from it",
    )
    again.add_argument("--overwrite", action="store_true", help="start over: empty the output file first")
    rollout.set_defaults(func=cmd_rollout)
    serve = sub.add_parser("serve", help="OpenAI-compatible endpoint that records each session's exact tokens")
    serve.add_argument("--model", default="tiny", help="tiny (the built-in tiny MoE) or a local model folder")
    serve.add_argument("--engine", choices=["hf", "sglang"], default="hf", help="hf: in this process; sglang: a server")
    serve.add_argument("--engine-url", default="http://127.0.0.1:30000", help="sglang: the SGLang server's URL")
    serve.add_argument("--device", default="cpu", help="hf: cpu, cuda, cuda:1...")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    serve.add_argument("--served-model-name", help="the model id /v1/models lists (default: --model)")
    serve.add_argument(
        "--max-new-tokens", type=at_least_one, default=256, help="max_tokens of a request that gives none"
    )
    serve.add_argument("--max-context-tokens", type=at_least_one, help="refuse prompts longer than this")
    serve.add_argument("--chat-template", help="a Jinja chat template file that overrides the tokenizer's")
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None) and args.config:  # `t1train --config FILE.yaml`
        args = parser.parse_args(["train", "--config", args.config])
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"t1train: error: {err}", file=sys.stderr)
        return 2
    _leave_process_group()
    return code


def _leave_process_group() -> None:
    """Under ``torchrun``: wait for every process, then take the process group down before the interpreter exits.
    A process that exits while another still saves or prints closes its gloo connections under that process's
    background threads, which then abort it ('terminate called without an active exception', exit -6)."""
    dist = sys.modules.get("torch.distributed")  # never imported: no process group to leave
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

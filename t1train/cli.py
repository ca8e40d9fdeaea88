"""``t1train``: the trainer's command line.

Subcommands:

* ``t1train --config FILE.yaml`` (same as ``t1train train --config FILE.yaml``) — SFT warm-start (if the file has an
  ``sft:`` section), then RL with ``T1Trainer`` (PPO, GRPO or GSPO), with a held-out evaluation before and after;
  see ``t1train/configs/tiny-cpu.yaml`` and ``docs/training.md``.
* ``t1train sft --config FILE.yaml`` — only the SFT warm-start on oracle episodes; saves the model.
* ``t1train eval --config FILE.yaml [--model PATH]`` — mean passing checks and resolved rate on the eval episodes.
* ``t1train rollout --config FILE.yaml [--resume | --overwrite]`` — run episodes with an engine, write TITO
  trajectories (JSONL, one line per finished episode), print reward, turns and drift (see ``docs/training.md``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from t1env.cli import at_least_one


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
    shape = {}
    try:
        from transformers import AutoConfig

        from t1train.models import tiny_moe_path
        from t1train.r3 import engine_routing_shape

        shape = engine_routing_shape(AutoConfig.from_pretrained(tiny_moe_path() if cfg.model == "tiny" else cfg.model))
    except (OSError, ValueError):
        pass
    engine = SGLangEngine(cfg.url, max_concurrency=cfg.max_concurrency, timeout=cfg.timeout, **shape)
    return engine, tokenizer


def _episode_of(record: dict):
    """The key of a ``t1train rollout`` record: the episode's index in the run."""
    return (record.get("metadata") or {}).get("episode")


def _finished_episodes(log, specs, config: str) -> dict:
    """``{index: Trajectory}`` already in the output file, checked against this run's episode list."""
    from t1train.trajectory import Trajectory

    done = {}
    for record in log.records():
        i = _episode_of(record)
        if not isinstance(i, int):
            raise ValueError(f"{log.path}: a record without metadata.episode: not written by `t1train rollout`; "
                             "pass --overwrite to start over, or --output elsewhere")
        task = record.get("metadata", {}).get("task")
        if i < len(specs) and (task, record.get("seed")) != (specs[i].task, specs[i].seed):
            raise ValueError(f"{log.path}: episode {i} there is task {task!r} seed {record.get('seed')}, but "
                             f"{config} gives task {specs[i].task!r} seed {specs[i].seed}: the file is another "
                             "run's; pass --overwrite to start over, or --output elsewhere")
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
    from t1train.config import load_rollout_config
    from t1train.engines.base import EngineError
    from t1train.rollout import EpisodeSpec, RolloutRunner, make_env_factory, rollout_metrics
    from t1train.storage import EpisodeLog

    cfg = load_rollout_config(args.config)
    if args.output:
        cfg.output = args.output
    if args.episodes is not None:
        cfg.episodes = args.episodes
    if cfg.sampling.seed is None:
        cfg.sampling.seed = cfg.seed
    tasks = cfg.env.tasks
    specs = [EpisodeSpec(tasks[i % len(tasks)], cfg.seed + i, sampling_index=i) for i in range(cfg.episodes)]
    from t1env.executor import make_executor

    executor = make_executor(cfg.rollout.executor, cfg.rollout.ray_address)
    make_env = make_env_factory(cfg.env.backend, executor=executor, **cfg.env.kwargs)
    _check_envs(make_env, tasks, args.config)

    # -- the output file: one line per finished episode, so a killed run keeps what it finished
    output = Path(cfg.output)
    if output.exists() and output.stat().st_size and not (args.resume or args.overwrite):
        raise ValueError(f"{output} already exists: pass --resume to finish that run (the episodes in it are kept "
                         "and not run again), --overwrite to start over, or --output elsewhere")
    with EpisodeLog(output, key=_episode_of) as log:
        if args.overwrite:
            log.clear()
        done = _finished_episodes(log, specs, args.config)
        todo = [i for i in range(cfg.episodes) if i not in done]

        def save(k: int, traj) -> None:
            traj.metadata.update(episode=todo[k], task=specs[todo[k]].task)
            log.append(traj.to_dict())

        engine, tokenizer = build_engine(cfg.engine)
        runner = RolloutRunner(engine, tokenizer, make_env, cfg.sampling, cfg.rollout)
        t0 = time.monotonic()
        try:
            new = runner.run([specs[i] for i in todo], on_episode=save)
        except (EngineError, KeyboardInterrupt) as err:
            print(f"t1train: error: {type(err).__name__}: {err}\n{len(log.keys)} finished episodes are in {output}: "
                  "run the same command with --resume to finish the run", file=sys.stderr)
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
        print(f"{t.task_id:<24} {t.seed!s:>5} {t.num_turns:>5} {t.reward:>7.2f} {checks:>7}  {t.termination}"
              + (f" ({t.error})" if t.error else ""))
    print(f"\nepisodes {metrics['episodes']}  reward {metrics['reward_mean']:.3f}  "
          f"resolved {metrics['resolved_rate']:.2f}  turns {metrics['turns_mean']:.1f}  "
          f"tokens {metrics['tokens_total']} ({metrics['loss_tokens']} sampled)  {elapsed:.1f}s")
    print(f"drift in the loss region: TITO {metrics['tito_drift_tokens']} tokens; "
          f"decode-and-re-tokenize baseline {metrics['retokenize_drift_tokens']} tokens in "
          f"{metrics['retokenize_drift_turns']}/{metrics['assistant_turns']} turns; "
          f"template repairs {metrics['drift_events']}")
    print(f"wrote {len(new)} trajectories to {cfg.output}"
          + (f" ({len(trajectories)} in total; {len(done)} were there already)" if done else ""))
    return 0 if metrics["tito_drift_tokens"] == 0 else 1


# ------------------------------------------------------------------------------------------------ training
def _setup(args):
    from t1train.config import load_train_config

    cfg = load_train_config(args.config)
    if cfg.torch_threads:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    return cfg


def _train_config(cfg, args):
    from t1train.config import build_t1_config

    overrides = {}
    if getattr(args, "output_dir", None):
        overrides["output_dir"] = args.output_dir
    if getattr(args, "max_steps", None) is not None:
        overrides["max_steps"] = args.max_steps
    overrides.setdefault("output_dir", cfg.train.get("output_dir", "runs/t1train"))
    try:
        return build_t1_config(cfg.train, **overrides)
    except ValueError as err:  # name the file on every line
        raise ValueError("\n".join(f"{args.config}: {line}" for line in str(err).splitlines())) from None


def _eval_specs(cfg, targs):
    tasks = cfg.eval.tasks or targs.eval_tasks or targs.tasks
    return tasks, cfg.eval.seeds


def run_sft_section(cfg, targs, model, tokenizer):
    """SFT warm-start as the config's ``sft:`` section says; returns the tuned model."""
    from trl import SFTConfig

    from t1train.rollout import RolloutConfig, make_env_factory
    from t1train.sft import oracle_trajectories, run_sft, sft_dataset

    section = cfg.sft
    make_env = make_env_factory(targs.env_backend, **targs.env_kwargs)
    rollout = RolloutConfig(max_turns=max(targs.max_turns, 2), system_prompt=targs.system_prompt)
    t0 = time.monotonic()
    from t1env.registry import training_tasks

    sft_tasks = training_tasks(section.tasks or targs.tasks)  # eval-only benchmark tasks never train
    trajectories = oracle_trajectories(tokenizer, sft_tasks, section.seeds, make_env, rollout, turns=section.turns,
                                      demos=section.demos)
    print(f"sft: {len(trajectories)} episodes ({'oracle and demos' if section.demos else 'oracle'}, "
          f"{time.monotonic() - t0:.1f}s)")
    out = section.output_dir or f"{targs.output_dir}/sft"
    sft_args = SFTConfig(output_dir=out, max_steps=section.max_steps, learning_rate=section.learning_rate,
                         per_device_train_batch_size=section.per_device_train_batch_size, logging_steps=10,
                         lr_scheduler_type=section.lr_scheduler_type, save_strategy="no", report_to="none", bf16=False,
                         seed=targs.seed, activation_checkpointing=True,  # TRL's default, by its current name
                         use_cpu=targs.use_cpu)  # several CPU processes (torchrun): the same process group as RL
    trainer = run_sft(model, tokenizer, sft_dataset(trajectories * section.repeats), sft_args)
    trainer.save_model(out)  # written by the main process only, under `accelerate launch`
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(out)
        targs.rollout_config().agent_protocol(targs.max_new_tokens).save(out)  # what t1env eval --agent hf reads
        print(f"sft: saved to {out}")
    return trainer.model


def _print_eval(label: str, metrics: dict) -> None:
    from accelerate import PartialState

    if not PartialState().is_main_process:  # under `accelerate launch`: one process prints
        return
    print(f"{label:<12} passed {metrics['passed_mean']:.3f}  resolved {metrics['resolved_rate']:.2f}  "
          f"({metrics['episodes']} episodes)")


def train_and_evaluate(cfg, targs, model=None, tokenizer=None, skip_sft: bool = False, quiet: bool = False) -> dict:
    """One whole training run, as ``t1train train`` does it: SFT warm-start (if the config has an ``sft:`` section),
    the held-out evaluation, RL, the held-out evaluation again. ``bench/learning_curve.py`` and the CI learning test
    call this too, so they measure the README's command and not a copy of it.

    Returns ``{"before", "after", "trainer", "rl_seconds"}``: the two evaluations' metrics (``passed_mean``,
    ``resolved_rate``, ``passing_fraction``, ``episodes``, ...), the trainer (its ``state.log_history`` holds every
    step's metrics) and the RL wall time.
    """
    from t1train.models import load_model_and_tokenizer
    from t1train.trainer import T1Trainer

    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg.model)
    model.train()
    if cfg.sft is not None and not skip_sft:
        model = run_sft_section(cfg, targs, model, tokenizer)
    trainer = T1Trainer(model, targs, processing_class=tokenizer)
    if quiet:
        from transformers import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    tasks, seeds = _eval_specs(cfg, targs)
    n = cfg.eval.episodes_per_task
    before = trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, n, phase="eval-before")
    if not quiet:
        _print_eval("before RL", before)
    t0 = time.monotonic()
    trainer.train(resume_from_checkpoint=targs.resume_from_checkpoint)
    rl_seconds = time.monotonic() - t0
    trainer.save_model(targs.output_dir)
    after = trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, n, phase="eval-after")
    return {"before": before, "after": after, "trainer": trainer, "rl_seconds": rl_seconds}


def cmd_train(args) -> int:
    cfg = _setup(args)
    targs = _train_config(cfg, args)
    if args.resume:  # find the checkpoint now, before minutes of SFT; the trainer keeps the episodes logged up to it
        from transformers.trainer_utils import get_last_checkpoint

        out = Path(targs.output_dir)
        path = (get_last_checkpoint(str(out)) if out.is_dir() else None) if args.resume is True else args.resume
        if path is None:
            raise ValueError(f"--resume: no checkpoint in {targs.output_dir}; run without --resume to start")
        targs.resume_from_checkpoint = path
    run = train_and_evaluate(cfg, targs, skip_sft=args.skip_sft)
    trainer = run["trainer"]
    _print_eval("before RL", run["before"])
    _print_eval("after RL", run["after"])
    if not trainer.accelerator.is_main_process:
        return 0
    if trainer.critic_warmup_history:
        last = trainer.critic_warmup_history[-1]
        print(f"critic warm-start: {len(trainer.critic_warmup_history)} iterations, "
              f"explained variance {last['explained_variance']:.3f}")
    print(f"saved to {targs.output_dir}")
    return 0


def cmd_sft(args) -> int:
    from t1train.models import load_model_and_tokenizer

    cfg = _setup(args)
    if cfg.sft is None:
        raise ValueError(f"{args.config} has no sft: section")
    targs = _train_config(cfg, args)
    model, tokenizer = load_model_and_tokenizer(cfg.model)
    run_sft_section(cfg, targs, model.train(), tokenizer)
    return 0


def cmd_eval(args) -> int:
    from t1train.models import load_model_and_tokenizer
    from t1train.trainer import T1Trainer

    cfg = _setup(args)
    targs = _train_config(cfg, args)
    targs.algorithm, targs.critic_warmup_iterations, targs.eval_every_steps = "grpo", 0, 0
    model, tokenizer = load_model_and_tokenizer(args.model or cfg.model)
    trainer = T1Trainer(model, targs, processing_class=tokenizer)
    tasks, seeds = _eval_specs(cfg, targs)
    _print_eval("eval", trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, cfg.eval.episodes_per_task))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t1train", description="Train and roll out terminal agents.")
    parser.add_argument("--config", help="training YAML file: same as `t1train train --config FILE`")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    train = sub.add_parser("train", help="SFT warm-start (optional) then RL: PPO, GRPO or GSPO")
    train.add_argument("--config", required=True, help="training YAML file, or the name of a shipped one (tiny-cpu: t1train/configs/tiny-cpu.yaml)")
    train.add_argument("--output-dir", help="override train.output_dir")
    train.add_argument("--max-steps", type=at_least_one, help="override train.max_steps")
    train.add_argument("--skip-sft", action="store_true", help="ignore the sft: section")
    train.add_argument("--resume", nargs="?", const=True, default=None,
                       help="resume from the last checkpoint in output_dir (or from the given checkpoint)")
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
    again.add_argument("--resume", action="store_true",
                       help="the output file holds an interrupted run: run only the episodes missing from it")
    again.add_argument("--overwrite", action="store_true", help="start over: empty the output file first")
    rollout.set_defaults(func=cmd_rollout)
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

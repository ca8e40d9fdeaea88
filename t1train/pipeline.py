"""The training run behind ``t1train``: load the config, SFT warm-start, held-out evaluation, RL, evaluation again.

:func:`train_and_evaluate` is one whole run as ``t1train train`` does it; ``bench/learning_curve.py`` and the CI
learning test call it too, so they measure the README's command and not a copy of it. :mod:`t1train.cli` only
parses arguments and calls into this module; nothing here reads ``sys.argv`` or imports a command line.

The model, trainer and engine modules (torch, transformers, TRL) are imported inside the functions that need
them: ``t1train --help``, ``t1train rollout`` against an SGLang server and the config checks stay light.
"""

from __future__ import annotations

import time

from t1env.registry import training_tasks
from t1train.config import build_t1_config, load_train_config
from t1train.rollout import RolloutConfig, make_env_factory
from t1train.sft import oracle_trajectories, run_sft, sft_dataset


def build_engine(cfg):
    """``(engine, tokenizer)`` for an ``EngineConfig``."""
    if cfg.kind == "hf":
        from t1train.engines.hf import HFEngine  # heavy: torch
        from t1train.models import load_model_and_tokenizer  # heavy: torch, transformers

        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.device, cfg.dtype)
        return HFEngine(model, tokenizer, max_batch_size=cfg.max_batch_size), tokenizer
    from t1train.engines.sglang import SGLangEngine  # an HTTP client: its requests package only when used
    from t1train.models import load_tokenizer  # heavy: transformers

    tokenizer = load_tokenizer(cfg.model)
    shape = {}
    try:
        from transformers import AutoConfig  # heavy: transformers

        from t1train.models import tiny_moe_path  # heavy: torch, transformers
        from t1train.r3 import engine_routing_shape  # heavy: torch

        shape = engine_routing_shape(AutoConfig.from_pretrained(tiny_moe_path() if cfg.model == "tiny" else cfg.model))
    except (OSError, ValueError):
        pass
    engine = SGLangEngine(cfg.url, max_concurrency=cfg.max_concurrency, timeout=cfg.timeout, **shape)
    return engine, tokenizer


def load_config(path):
    """The training YAML at ``path`` (:func:`t1train.config.load_train_config`), with its torch thread count applied."""
    cfg = load_train_config(path)
    if cfg.torch_threads:
        import torch  # heavy: only when the config sets torch_threads

        torch.set_num_threads(cfg.torch_threads)
    return cfg


def trainer_config(cfg, config_path, output_dir=None, max_steps=None):
    """The trainer's :class:`~t1train.trainer.T1Config` from the YAML's ``train:`` section and the CLI's overrides;
    a bad field fails with the file named on every line."""
    overrides = {}
    if output_dir:
        overrides["output_dir"] = output_dir
    if max_steps is not None:
        overrides["max_steps"] = max_steps
    overrides.setdefault("output_dir", cfg.train.get("output_dir", "runs/t1train"))
    try:
        return build_t1_config(cfg.train, **overrides)
    except ValueError as err:  # name the file on every line
        raise ValueError("\n".join(f"{config_path}: {line}" for line in str(err).splitlines())) from None


def eval_specs(cfg, targs):
    """The held-out evaluation's ``(tasks, seeds)``: the ``eval:`` section's, else the trainer's eval or train tasks."""
    tasks = cfg.eval.tasks or targs.eval_tasks or targs.tasks
    return tasks, cfg.eval.seeds


def run_sft_section(cfg, targs, model, tokenizer):
    """SFT warm-start as the config's ``sft:`` section says; returns the tuned model."""
    from trl import SFTConfig  # heavy: TRL (torch, transformers)

    section = cfg.sft
    make_env = make_env_factory(targs.env_backend, **targs.env_kwargs)
    rollout = RolloutConfig(max_turns=max(targs.max_turns, 2), system_prompt=targs.system_prompt)
    t0 = time.monotonic()
    sft_tasks = training_tasks(section.tasks or targs.tasks)  # eval-only benchmark tasks never train
    trajectories = oracle_trajectories(
        tokenizer, sft_tasks, section.seeds, make_env, rollout, turns=section.turns, demos=section.demos
    )
    print(
        f"sft: {len(trajectories)} episodes ({'oracle and demos' if section.demos else 'oracle'}, "
        f"{time.monotonic() - t0:.1f}s)"
    )
    out = section.output_dir or f"{targs.output_dir}/sft"
    sft_args = SFTConfig(
        output_dir=out,
        max_steps=section.max_steps,
        learning_rate=section.learning_rate,
        per_device_train_batch_size=section.per_device_train_batch_size,
        logging_steps=10,
        lr_scheduler_type=section.lr_scheduler_type,
        save_strategy="no",
        report_to="none",
        bf16=False,
        seed=targs.seed,
        activation_checkpointing=True,  # TRL's default, by its current name
        use_cpu=targs.use_cpu,
    )  # several CPU processes (torchrun): the same process group as RL
    trainer = run_sft(model, tokenizer, sft_dataset(trajectories * section.repeats), sft_args)
    trainer.save_model(out)  # written by the main process only, under `accelerate launch`
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(out)
        targs.rollout_config().agent_protocol(targs.max_new_tokens).save(out)  # what t1env eval --agent hf reads
        print(f"sft: saved to {out}")
    return trainer.model


def print_eval(label: str, metrics: dict) -> None:
    from accelerate import PartialState  # heavy: accelerate (torch)

    if not PartialState().is_main_process:  # under `accelerate launch`: one process prints
        return
    print(
        f"{label:<12} passed {metrics['passed_mean']:.3f}  resolved {metrics['resolved_rate']:.2f}  "
        f"({metrics['episodes']} episodes)"
    )


def train_and_evaluate(cfg, targs, model=None, tokenizer=None, skip_sft: bool = False, quiet: bool = False) -> dict:
    """One whole training run, as ``t1train train`` does it: SFT warm-start (if the config has an ``sft:`` section),
    the held-out evaluation, RL, the held-out evaluation again. ``bench/learning_curve.py`` and the CI learning test
    call this too, so they measure the README's command and not a copy of it.

    Returns ``{"before", "after", "trainer", "rl_seconds"}``: the two evaluations' metrics (``passed_mean``,
    ``resolved_rate``, ``passing_fraction``, ``episodes``, ...), the trainer (its ``state.log_history`` holds every
    step's metrics) and the RL wall time.
    """
    from t1train.models import load_model_and_tokenizer  # heavy: torch, transformers
    from t1train.trainer import T1Trainer  # heavy: TRL

    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg.model)
    model.train()
    if cfg.sft is not None and not skip_sft:
        model = run_sft_section(cfg, targs, model, tokenizer)
    trainer = T1Trainer(model, targs, processing_class=tokenizer)
    if quiet:
        from transformers import PrinterCallback  # heavy: transformers

        trainer.remove_callback(PrinterCallback)
    tasks, seeds = eval_specs(cfg, targs)
    n = cfg.eval.episodes_per_task
    before = trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, n, phase="eval-before")
    if not quiet:
        print_eval("before RL", before)
    t0 = time.monotonic()
    trainer.train(resume_from_checkpoint=targs.resume_from_checkpoint)
    rl_seconds = time.monotonic() - t0
    trainer.save_model(targs.output_dir)
    after = trainer.evaluate_episodes(tasks, seeds, cfg.eval.temperature, n, phase="eval-after")
    return {"before": before, "after": after, "trainer": trainer, "rl_seconds": rl_seconds}

"""T1Trainer: PPO (with a warm-started critic), GRPO and GSPO for terminal agents, on TRL's ``GRPOTrainer``.

TRL brings the machinery (batching, gradient accumulation, accelerate, PEFT, logging, checkpoints, the clipped
policy loss and its variants). t1 replaces the generation step and the advantages. Where TRL has no public hook for
that, t1 overrides or calls a private TRL method: :mod:`t1train.trl_surface` lists each one, and a test pins them to
the TRL version in ``pyproject.toml``.

Story of one training step
--------------------------
1. **Rollout.** The dataloader yields episode specs (task id, seed), each repeated ``num_generations`` times.
   The agent loop (``t1train/rollout.py``) plays them in real t1 environments with the engine and returns TITO
   trajectories: the prompt ids, then every turn's sampled ids (action tokens) and bridge ids (observations,
   template tokens). The **completion** is everything after the first prompt; the loss mask (TRL's
   ``tool_mask``) is 1 on action tokens only.
2. **Reward.** The env's reward: the number of passing verifier checks (plus any extra reward functions).
3. **Advantages.** ``ppo``: a critic values every action token; the reward goes on the episode's last action
   token (or each turn's reward on its turn's last token); GAE runs over action tokens only, with separate
   lambdas for the actor's advantages and the critic's targets. ``grpo``/``gspo``: the reward minus the mean of
   its group (same task and seed), scaled as TRL's ``scale_rewards`` says.
4. **Off-policy correction.** The trainer recomputes the log-probs of the sampled tokens; the ratio to the
   sampler's own log-probs (truncated or masked, per token or per episode) multiplies the advantages. This is
   TRL's vLLM importance-sampling correction, applied to any engine.
5. **Loss.** TRL's clipped policy loss (``loss_type``, ``epsilon``, ``importance_sampling_level``) on the
   token-level advantages; ``ppo`` adds a clipped value loss trained by the critic's own optimizer.
6. **Weights.** The engine gets the new weights before the next rollout (the in-process HF engine shares the
   policy's parameters, so nothing is copied).

Critic warm-start (``ppo``)
---------------------------
Before the first policy update, ``critic_warmup_iterations`` rounds of: roll out with the frozen initial policy,
fit the critic to Monte-Carlo returns (lambda = 1) for ``critic_warmup_epochs`` passes over *every* warm-start
batch so far (the policy is frozen, so all of them are samples of the same policy and stay valid targets; critic
steps are cheap next to rollouts). No policy update and no weight sync happen. It stops early once the explained
variance, measured on each fresh batch *before* fitting it, reaches ``critic_warmup_ev_threshold``. Training then
uses ``gae_lambda_actor`` and ``gae_lambda_critic``.

Files a run leaves (``output_dir``)
----------------------------------
Every episode (training rollouts, critic warm-start, evaluations) is appended to ``trajectories.jsonl`` as it
finishes, one fsynced line each (``t1train.storage.EpisodeLog``), with ``metadata.phase``/``step``/``call``/
``episode`` saying where it came from. Checkpoints are filled in a hidden temp folder and renamed to
``checkpoint-N`` when complete, so a killed run never leaves a half-written checkpoint for ``--resume`` to pick.
Resuming from ``checkpoint-N`` moves the episodes of steps the resumed run redoes to
``trajectories.superseded.jsonl``; a fresh run in a folder with an earlier run's file moves all of it there.

R3 (rollout routing replay, ``r3: true``)
---------------------------------------
Rollouts record, for every token the sampler's forward consumed, the experts each MoE layer chose
(``Trajectory.routed_experts_by_position``). Every forward of the policy over a training batch (the old log-probs
and the loss, including gradient-checkpoint recomputation) runs inside :meth:`T1Trainer.policy_forward_context`,
which replays those choices with :class:`t1train.r3.RoutingReplay`: the recorded experts are used, their weights
come from the live router (so the router still learns). Positions without a record route live and are counted
(``r3/fallback_tokens``); ``r3/agreement`` is the share of token-layers where live routing would have chosen the
same experts. The reference and value models are never replayed.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import math
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.trainer.utils import pad

from t1env.executor import make_executor
from t1env.registry import get_task, training_tasks
from t1train import offpolicy, ppo
from t1train.async_rl import AsyncRollouts
from t1train.engines.base import SamplingParams, episode_seed
from t1train.engines.hf import HFEngine
from t1train.harness import HarnessRunner
from t1train.models import load_model_and_tokenizer, unpatch_forward
from t1train.r3 import RoutingReplay, align_routing, engine_routing_shape
from t1train.rollout import EpisodeSpec, RolloutRunner, make_env_factory
from t1train.storage import EpisodeLog, publish_dir, staging_dir
from t1train.tito import loss_region_drift
from t1train.trainer_config import ALGORITHMS, T1Config
from t1train.trajectory import Trajectory
from t1train.value import ValueModel

try:  # transformers >= 5; before, only the private Trainer._rotate_checkpoints (see t1train/trl_surface.py)
    from transformers.trainer_utils import rotate_checkpoints
except ImportError:
    rotate_checkpoints = None

__all__ = [
    "ALGORITHMS",
    "T1Config",
    "T1Trainer",
    "checkpoint_step",
    "episode_dataset",
    "episode_metrics",
    "passing_checks",
]


def episode_dataset(tasks: list[str], seeds: list[int]):
    """One row per (task, seed): the train set. GRPOTrainer's sampler repeats each row ``num_generations`` times."""
    import datasets

    training_tasks(tasks)  # an imported benchmark task (eval-only) in a training set is an error naming it
    rows = [{"prompt": f"{t}@{s}", "task": t, "seed": s} for s in seeds for t in tasks]
    return datasets.Dataset.from_list(rows)


def passing_checks(trajectory, **kwargs) -> list[float]:
    """The env's reward for each episode: with t1's default ``reward_mode="count"``, the number of passing checks."""
    return [float(t.reward) for t in trajectory]


# ================================================================================================ trainer
class T1Trainer(GRPOTrainer):
    """PPO / GRPO / GSPO on t1 environments. See the module docstring.

    Args:
        model: the policy (a ``PreTrainedModel``), or ``"tiny"`` / a local model folder.
        args: a :class:`T1Config`.
        processing_class: the tokenizer (its chat template renders the prompts).
        train_dataset: episode specs with ``task`` and ``seed`` columns (default: ``args.tasks x args.train_seeds``).
        engine: an ``Engine`` (default: an in-process ``HFEngine`` sharing the policy's parameters, or an SGLang
            client when ``args.engine == "sglang"``).
        make_env: ``make_env(task) -> env`` (default: ``T1Terminal-v0`` with ``args.env_backend``/``env_kwargs``).
        value_model: the critic for ``ppo`` (default: ``args.value_model_path`` or a copy of the policy).
        reward_funcs: extra TRL reward functions, added to the env's passing-check count. Each receives
            ``trajectory`` (list of :class:`~t1train.trajectory.Trajectory`) among its keyword arguments.
        peft_config: a ``peft`` config: train LoRA adapters instead of the full policy.
    """

    _tag_names = ["trl", "t1", "ppo", "grpo"]

    def __init__(
        self,
        model,
        args: T1Config,
        processing_class=None,
        train_dataset=None,
        engine=None,
        make_env: Callable[[str], Any] | None = None,
        value_model: ValueModel | None = None,
        reward_funcs: list | None = None,
        peft_config=None,
        callbacks=None,
    ):
        if isinstance(model, str):
            model, tokenizer = load_model_and_tokenizer(model)
            processing_class = processing_class or tokenizer
        if processing_class is None:
            raise ValueError("pass processing_class= (the policy's tokenizer, with a chat template)")
        unpatch_forward(model)  # a stale TRL forward patch (e.g. on a deepcopy) would run another model's weights
        if args.algorithm == "ppo" and value_model is None:
            value_model = (
                ValueModel.from_pretrained(args.value_model_path)
                if args.value_model_path
                else ValueModel.from_policy(model)
            )  # before PEFT wraps the policy
        if train_dataset is None:
            train_dataset = episode_dataset(args.tasks, args.train_seeds)
        if make_env is None:  # registry tasks: an unknown one is an error now, not a failed episode each time
            for task in {*args.tasks, *args.eval_tasks}:
                get_task(task, args.env_kwargs.get("task_dirs"))
        groups = args.generation_batch_size // args.num_generations
        if len(train_dataset) < groups:
            raise ValueError(
                f"a generation batch needs {groups} distinct episodes (generation_batch_size "
                f"{args.generation_batch_size} / num_generations {args.num_generations}) but the train "
                f"set has {len(train_dataset)} (tasks x train_seeds); add train_seeds or tasks, or "
                "raise num_generations"
            )
        # beta > 0 without PEFT: the reference is the policy as passed here (the RL starting point, e.g. the SFT
        # warm-start still in memory). TRL would reload it from the model's path, which an in-memory model does not
        # have or which holds other weights: hide beta from TRL's constructor and make the reference below.
        from accelerate.utils import is_peft_model

        own_reference = args.beta != 0.0 and peft_config is None and not is_peft_model(model)
        beta, sync_ref = args.beta, args.sync_ref_model
        if own_reference:
            args.beta, args.sync_ref_model = 0.0, False
        try:
            super().__init__(
                model=model,
                reward_funcs=[passing_checks, *(reward_funcs or [])],
                args=args,
                train_dataset=train_dataset,
                processing_class=processing_class,
                peft_config=peft_config,
                callbacks=callbacks,
            )
        finally:
            args.beta, args.sync_ref_model = beta, sync_ref
        if own_reference:
            self._make_reference()
        self.tokenizer = processing_class
        self.async_config = args.async_config()
        world = self.accelerator.num_processes
        if self.async_config is not None and world > 1:
            per_process = args.generation_batch_size // world
            if per_process % self.num_generations:
                raise ValueError(
                    f"async training on {world} processes gives each process whole groups: the generation batch per "
                    f"process ({args.generation_batch_size} / {world} = {per_process}) must be a multiple of "
                    f"num_generations ({self.num_generations}); set per_device_train_batch_size to a multiple of it"
                )
            if len(self.train_dataset) < world:
                raise ValueError(
                    f"async training on {world} processes gives each process its own share of the train rows: "
                    f"{len(self.train_dataset)} (task, seed) rows are fewer than the processes; add train_seeds"
                )
        if args.loss_chunk_tokens and self.accelerator.distributed_type == "DEEPSPEED":
            raise ValueError(
                "loss_chunk_tokens backpropagates several chunks per micro-batch, which DeepSpeed's engine does not "
                "count as one step: set loss_chunk_tokens: 0 under DeepSpeed"
            )
        self.async_rollouts: AsyncRollouts | None = None  # started at the first training step
        self.engine = engine if engine is not None else self._default_engine()
        if self.async_config is not None and getattr(self.engine, "model", None) is self.accelerator.unwrap_model(
            self.model
        ):
            raise ValueError(
                "async training needs an engine with weights of its own: its producer samples while the optimizer "
                "updates the policy in place; leave engine unset (an HFEngine over a copy is made) or pass "
                "HFEngine(copy.deepcopy(policy), tokenizer)"
            )
        env_kwargs = dict(args.env_kwargs)
        if make_env is None and args.rollout_executor != "inprocess":
            env_kwargs["executor"] = make_executor(args.rollout_executor, args.ray_address)
        self.make_env = make_env or make_env_factory(args.env_backend, **env_kwargs)
        self.routing_replay = None
        if args.r3:
            self.routing_replay = RoutingReplay(self.model)  # a clear error if the policy has no MoE router
        self.rollout_config = args.rollout_config()
        self.sampling = SamplingParams(
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k if args.top_k else -1,
        )
        self._engine_version: str | None = None
        self._episode_log: EpisodeLog | None = None
        self._episode_log_claimed = False  # decided once: a fresh run moves an earlier run's episodes aside
        self._resuming = False
        self._rollout_calls: collections.Counter = collections.Counter()
        self._checkpoint_parent: str | None = None  # set while a checkpoint is written to its temp folder

        self.value_model = None
        self.value_optimizer = None
        self.critic_warmed_up = args.critic_warmup_iterations == 0
        self.critic_warmup_history: list[dict] = []
        if value_model is not None:
            self.value_model = value_model.to(self.accelerator.device).train()
            self.value_optimizer = torch.optim.AdamW(
                self.value_model.parameters(), lr=args.critic_learning_rate, eps=args.adam_epsilon
            )
            self.add_callback(_CriticStepCallback(self))  # the critic steps with the policy's optimizer
        if args.eval_every_steps:
            self.add_callback(_EpisodeEvalCallback(self))
        if args.health_line:
            self.add_callback(_HealthLineCallback())
            # the terminal shows the health line; TRL's raw metrics dict goes to the log file and the logger
            for quiet in (ProgressCallback, PrinterCallback):
                if self.pop_callback(quiet) is not None and quiet is ProgressCallback:
                    self.add_callback(_BarOnlyProgressCallback())
        self.add_callback(_MetricsLogCallback())

    def _make_reference(self) -> None:
        """The KL reference (``beta > 0``, no PEFT): a frozen copy of the policy as it is now."""
        import copy

        from trl.trainer.callbacks import SyncRefModelCallback
        from trl.trainer.utils import add_fused_lm_head

        self.beta = self.args.beta
        reference = copy.deepcopy(self.accelerator.unwrap_model(self.model)).eval().requires_grad_(False)
        unpatch_forward(reference)  # the copied patch would run the policy's weights; patch the copy afresh
        add_fused_lm_head(reference, temperature=self.temperature, cast_lm_head_to_fp32=self.args.cast_lm_head_to_fp32)
        self.ref_model = self.accelerator.prepare_model(reference, evaluation_mode=True)
        if self.args.sync_ref_model:
            self.add_callback(SyncRefModelCallback(ref_model=self.ref_model, accelerator=self.accelerator))

    def _reference_logps(self, input_ids, attention_mask, width: int) -> torch.Tensor:
        """Per-token log-probs of the sampled tokens under the KL reference (never routing-replayed)."""
        from trl.trainer.utils import use_adapter

        if self.ref_model is not None:
            model, context = self.ref_model, contextlib.nullcontext()
        else:  # PEFT: the policy with the adapter TRL keeps as "ref", or with no adapter
            peft_model = self.accelerator.unwrap_model(self.model)
            model = self.model
            context = use_adapter(peft_model, adapter_name="ref" if "ref" in peft_model.peft_config else None)
        with context:
            logps, _, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, width, batch_size=self.args.per_device_train_batch_size
            )
        return logps

    # ------------------------------------------------------------------------------------------ engine
    def _default_engine(self):
        if self.args.engine == "sglang":
            # the sglang extra (requests, numpy): imported only when the trainer samples from an SGLang server
            from t1train.engines.sglang import SGLangEngine

            # SGLang reports routing per decoder layer: the client needs the policy's top-k and MoE layers for R3
            config = self.accelerator.unwrap_model(self.model).config
            return SGLangEngine(self.args.engine_url, **engine_routing_shape(config))
        policy = self.accelerator.unwrap_model(self.model)
        if self.async_config is not None:
            # async: the producer samples while the trainer runs forwards, backwards and optimizer steps, so the
            # engine needs parameters of its own (synced between generate calls; sync_engine_weights)
            import copy

            policy = copy.deepcopy(policy).eval().requires_grad_(False)
            unpatch_forward(policy)  # the copied TRL patch would run the policy's weights
        return HFEngine(policy, self.processing_class, seed=self.args.seed)

    def sync_engine_weights(self) -> None:
        """Give the engine the current policy weights (a no-op when it shares them)."""
        version = str(self.state.global_step)
        if self._engine_version == version:
            return
        policy = self.accelerator.unwrap_model(self.model)
        if getattr(self.engine, "model", None) is policy:
            self.engine.weight_version = version  # shared parameters: already up to date
        elif self.async_config is not None and isinstance(self.engine, HFEngine):
            self.engine.load_state_dict(policy.state_dict(), weight_version=version)  # a copy here (async)
        else:  # a separate engine (SGLang, or another process): save the weights and have it load them
            from peft import PeftModel

            # every process holds the same weights: one writes them, each tells its engine (the same server
            # loading the same file twice is harmless) once the file is complete
            path = Path(self.args.output_dir) / "engine-weights"
            if self.accelerator.is_main_process:
                if isinstance(policy, PeftModel):
                    import copy

                    copy.deepcopy(policy).merge_and_unload().save_pretrained(path)
                else:
                    policy.save_pretrained(path)
            self.accelerator.wait_for_everyone()
            self.engine.update_weights_from_disk(str(path), weight_version=version)
        self._engine_version = version

    # ------------------------------------------------------------------------------------------ R3 hook
    def policy_forward_context(self, batch: dict):
        """Context for every policy forward over ``batch`` (old log-probs and loss). R3 replays routing here."""
        if self.routing_replay is None or "r3_routing" not in batch:
            return contextlib.nullcontext()
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        return self.routing_replay.active(batch["r3_routing"], batch["r3_mask"], attention_mask)

    # ------------------------------------------------------------------------------------------ rollout
    def rollout(
        self,
        specs: list[EpisodeSpec],
        sampling: SamplingParams | None = None,
        phase: str = "train",
        first_index: int = 0,
    ) -> list[Trajectory]:
        """Play episodes with the engine as it is now (no weight sync); each is logged as it finishes (``phase``
        names the run's part in the log: ``train``, ``warmup``, ``eval``...).

        ``first_index``: the position of ``specs[0]`` in the whole batch when this process plays a slice of it
        (multi-process runs): each episode samples from the stream of its position in the whole batch, so a batch
        samples the same episodes however many processes share it."""
        specs = [
            spec if spec.sampling_index is not None else dataclasses.replace(spec, sampling_index=first_index + i)
            for i, spec in enumerate(specs)
        ]
        if sampling is None:
            # Seeded per (phase, step, call), then per episode and turn by the runner: what an episode samples
            # does not depend on which other episodes share the engine's batches, i.e. on thread timing (with
            # one generator for all, a run's learning curve changed with the machine's load).
            step = self.state.global_step if getattr(self, "state", None) is not None else 0
            key = (phase, step)
            n = self._rollout_calls.get(key, 0)
            self._rollout_calls[key] = n + 1
            base = episode_seed(self.args.seed, step, n + (1_000_000 if phase == "warmup" else 0))
            sampling = dataclasses.replace(self.sampling, seed=base)
        runner = self._runner_class()(self.engine, self.tokenizer, self.make_env, sampling, self.rollout_config)
        return runner.run(specs, on_episode=self._episode_recorder(phase, first_index))

    def _runner_class(self) -> type:
        """Who plays the episodes: t1's agent loop, or the user's harness through the recording endpoint
        (``agent: harness``, :mod:`t1train.harness`); both return TITO trajectories."""
        return HarnessRunner if self.rollout_config.agent == "harness" else RolloutRunner

    # ------------------------------------------------------------------------------------------ episode log
    def _open_episode_log(self) -> EpisodeLog | None:
        if not self.args.save_trajectories:
            return None
        if self._episode_log is None:
            rank = self.accelerator.process_index
            name = "trajectories.jsonl" if rank == 0 else f"trajectories.rank{rank}.jsonl"
            path = Path(self.args.output_dir) / name
            log = EpisodeLog(path, key=_episode_key)
            if not self._episode_log_claimed:
                self._episode_log_claimed = True
                if not (self._resuming or self.args.resume_from_checkpoint):  # a fresh run: lose nothing, mix nothing
                    log.rewind(lambda record: False, _superseded(path))
            self._episode_log = log
        return self._episode_log

    def _close_episode_log(self) -> None:
        log, self._episode_log = self._episode_log, None
        if log is not None:
            log.close()

    def _episode_recorder(self, phase: str, first_index: int = 0) -> Callable[[int, Trajectory], None] | None:
        log = self._open_episode_log()
        if log is None:
            return None
        step = self.state.global_step
        call = self._rollout_calls[(phase, step)]  # the n-th rollout of this phase at this step
        self._rollout_calls[(phase, step)] += 1

        def record(index: int, traj: Trajectory) -> None:
            traj.metadata.update(phase=phase, step=step, call=call, episode=first_index + index)  # in the whole batch
            log.append(traj.to_dict())

        return record

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        mode = "train" if self.model.training else "eval"
        if mode == "train" and self.async_config is not None:
            return self._take_async_batch()
        if mode == "train":
            self.sync_engine_weights()
        trajectories = self.rollout(
            [EpisodeSpec(x["task"], x["seed"]) for x in inputs],
            phase="train" if mode == "train" else "trl-eval",
            first_index=self.accelerator.process_index * len(inputs),
        )
        batch = self.score_trajectories(trajectories, inputs, mode)
        batch.pop("_metrics")
        return batch

    # ------------------------------------------------------------------------------------------ async
    def _async_producer(self) -> AsyncRollouts:
        """The producer of asynchronous training (``t1train/async_rl.py``): the agent loop of this trainer (engine,
        envs, rollout settings), fed one group of the train set at a time."""
        # several processes (torchrun): each plays its own share of the train rows with a sampling stream of its own,
        # and takes whole groups, the same number on every process, so that the groups line up when TRL gathers the
        # rewards of all processes (score_trajectories); the versions are the global step, the same everywhere
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        sampling = dataclasses.replace(self.sampling, seed=episode_seed(self.args.seed, 0, 3_000_000 + rank))
        runner = None

        def play(more, on_episode):
            runner.run([], on_episode, more)

        rows = [(row["task"], row["seed"]) for row in self.train_dataset]
        producer = AsyncRollouts(
            play=play,
            rows=rows[rank::world],
            num_generations=self.num_generations,
            groups_per_step=self.args.generation_batch_size // world // self.num_generations,
            config=self.async_config,
            seed=self.args.seed + rank,
        )
        engine = producer.stoppable(self.engine)
        runner = self._runner_class()(engine, self.tokenizer, self.make_env, sampling, self.rollout_config)
        return producer

    def _take_async_batch(self) -> dict:
        """One training batch in async mode: the engine gets the current weights (between its generate calls; the
        episodes in flight go on), then the trainer takes the producer's finished groups, stale ones dropped or
        down-weighted, and scores them as a synchronous batch."""
        self.sync_engine_weights()
        if self.async_rollouts is None:
            self.async_rollouts = self._async_producer()
        step = self.state.global_step
        taken = self.async_rollouts.take(step)
        for phase, trajectories in (
            ("train-stale", [t for g in taken.dropped for t in g.trajectories]),
            ("train", taken.trajectories),
        ):
            # numbered in the whole batch: this process's groups come after those of the processes before it
            first = self.accelerator.process_index * len(taken.trajectories) if phase == "train" else 0
            record = self._episode_recorder(phase, first) if trajectories else None
            for i, traj in enumerate(trajectories):
                traj.metadata["policy_version"] = step
                if record is not None:
                    record(i, traj)
        trajectories = taken.trajectories
        inputs = [
            {"prompt": f"{g.spec.task}@{g.spec.seed}", "task": g.spec.task, "seed": g.spec.seed}
            for g in taken.groups
            for _ in g.trajectories
        ]
        batch = self.score_trajectories(trajectories, inputs, "train")
        batch.pop("_metrics")
        if any(w != 1.0 for w in taken.weights):  # stale: downweight (every segment row of the episode)
            weights = torch.tensor(taken.weights, dtype=batch["advantages"].dtype, device=batch["advantages"].device)
            batch["advantages"] = batch["advantages"] * weights[batch["episode_index"].clamp(min=0)][:, None]
        for key, value in taken.metrics.items():
            self._metrics["train"][key].append(value)
        return batch

    def stop_async(self) -> None:
        """Stop the async producer: its episodes in flight are abandoned at their next generate call and their envs
        closed (``AsyncRollouts.stop``); a later step starts a new producer."""
        producer, self.async_rollouts = self.async_rollouts, None
        if producer is not None:
            producer.stop()

    # ------------------------------------------------------------------------------------------ scoring
    def _pad_batch(self, trajectories: list[Trajectory], rows_multiple: int = 1) -> tuple:
        """Prompt (left-padded) and completion (right-padded) tensors, TRL's layout, plus the t1 extras: one row per
        SEGMENT of each episode (``Trajectory.segment_views``; most episodes have one), each with the prompt the
        sampler saw for that segment. The row count is padded with empty rows (every mask 0) to a multiple of
        ``rows_multiple``.

        Returns ``(batch, turn_ends, turn_rewards, rows)``: per row the completion index of each turn's last sampled
        token and the turn's env reward, and a :class:`_Rows` (which episode each row belongs to, which row holds
        its next segment).
        """
        device, pad_id = self.accelerator.device, self.processing_class.pad_token_id
        prompts, completions, masks, sampler_lps, turn_ends, turn_rewards, routes = [], [], [], [], [], [], []
        r3_samples: list = []
        rows = _Rows()

        def empty_row(prompt: list[int], episode: int) -> None:
            prompts.append(list(prompt) or [pad_id])
            for column, empty in (
                (completions, [pad_id]),
                (masks, [0]),
                (sampler_lps, [0.0]),
                (turn_ends, []),
                (turn_rewards, []),
                (routes, None),
                (r3_samples, None),
            ):
                column.append(empty)
            rows.add(episode, last=True)

        for e, t in enumerate(trajectories):
            views = [v for v in t.segment_views() if len(v.prompt_ids) and v.turns]
            if not views:  # the episode failed before its first turn: nothing to learn
                empty_row(t.prompt_ids, e)
                continue
            for k, view in enumerate(views):
                ids, mask, lps = view.token_ids(), view.loss_mask(), view.sampler_logprobs()
                n = len(view.prompt_ids)
                for column, part in (
                    (prompts, ids[:n]),
                    (completions, ids[n:]),
                    (masks, mask[n:]),
                    (sampler_lps, lps[n:]),
                ):
                    column.append(part)
                ends, pos = [], 0
                for turn in view.turns:
                    pos += len(turn.sampled_ids)
                    ends.append(pos - 1)
                    pos += len(turn.bridge_ids)
                turn_ends.append(ends)
                turn_rewards.append([turn.reward for turn in view.turns])
                routes.append(view.routed_experts())
                r3_samples.append(view.routed_experts_by_position() if self.routing_replay is not None else None)
                rows.add(e, last=k == len(views) - 1)
        while len(prompts) % rows_multiple:
            empty_row([pad_id], -1)

        def padded(rows, value, side, dtype):
            return pad(
                [torch.tensor(r, dtype=dtype) for r in rows],
                padding_value=value,
                padding_side=side,
                pad_to_multiple_of=self.pad_to_multiple_of,
            ).to(device)

        batch = {
            "prompt_ids": padded(prompts, pad_id, "left", torch.long),
            "prompt_mask": padded([[1] * len(p) for p in prompts], 0, "left", torch.long),
            "completion_ids": padded(completions, pad_id, "right", torch.long),
            "completion_mask": padded([[1] * len(c) for c in completions], 0, "right", torch.long),
            "tool_mask": padded(masks, 0, "right", torch.long),
            "sampling_per_token_logps": padded(sampler_lps, 0.0, "right", torch.float32),
        }
        if routes and all(r is not None for r in routes):  # for R3: sampled tokens' experts, -1 elsewhere
            width = batch["completion_ids"].shape[1]
            layers, top_k = len(routes[0][0]), len(routes[0][0][0])
            routed = torch.full((len(routes), width, layers, top_k), -1, dtype=torch.int32)
            for b, (r, m) in enumerate(zip(routes, masks)):
                where = torch.tensor(m, dtype=torch.bool).nonzero()[:, 0]
                routed[b, where] = torch.tensor(r, dtype=torch.int32)
            batch["routed_experts"] = routed.to(device)
        if self.routing_replay is not None and any(s is not None for s in r3_samples):
            # R3: every position's recorded routing, laid out like input_ids (per segment: the segment's positions)
            width = batch["prompt_ids"].shape[1]
            routing, recorded = align_routing(
                r3_samples, [len(p) for p in prompts], width, width + batch["completion_ids"].shape[1]
            )
            batch["r3_routing"], batch["r3_mask"] = routing.to(device), recorded.to(device)
        return batch, turn_ends, turn_rewards, rows

    @torch.no_grad()
    def score_trajectories(
        self, trajectories: list[Trajectory], inputs: list[dict], mode: str = "train", critic_only: bool = False
    ) -> dict:
        """Turn finished episodes into a training batch: tensors, rewards, advantages, importance weights.

        One row per segment (``_pad_batch``); rewards and group advantages are per episode and every row of an
        episode gets its episode's. In training, TRL's ``_prepare_inputs`` (trl 0.16: ``shuffle_sequence_dict``
        then ``split_tensor_dict(batch, steps_per_generation)``) permutes every tensor of the batch with a first
        dimension by rows (0-d tensors such as ``num_items_in_batch`` pass through) and cuts the rows into
        ``steps_per_generation`` chunks of ``rows // steps_per_generation``, silently dropping any remainder. So the
        rows are padded with empty ones (all masks 0, advantage 0) to a multiple of ``steps_per_generation``, and
        the micro-batches hold rows (segments), not episodes. ``num_items_in_batch`` stays the action tokens of the
        whole batch, so the ``dapo`` normalizer is unchanged; ``grpo``'s per-row mean counts the empty rows (a
        smaller loss scale when there are padded rows).
        """
        args, device = self.args, self.accelerator.device
        multiple = args.steps_per_generation if mode == "train" and not critic_only else 1
        batch, turn_ends, turn_rewards, rows = self._pad_batch(trajectories, multiple)
        row_episode = torch.tensor([max(e, 0) for e in rows.episode], device=device)
        real_row = torch.tensor([e >= 0 for e in rows.episode], device=device)
        action_mask = batch["tool_mask"].float()
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        width = batch["completion_ids"].shape[1]
        metrics: dict[str, float] = {}

        # ---- rewards: the env's passing-check count (+ extra reward functions), through TRL's reward plumbing
        inputs = [{**x, "trajectory": t} for x, t in zip(inputs, trajectories)]
        texts = [
            [{"role": "assistant", "content": "\n".join(m["content"] for m in t.messages if m["role"] == "assistant")}]
            for t in trajectories
        ]
        completions = [[i for v in t.segment_views() for i in v.token_ids()[len(v.prompt_ids) :]] for t in trajectories]
        rewards_per_func = self._calculate_rewards(inputs, [x["prompt"] for x in inputs], texts, completions)
        # TRL gathers them from every process (a group may be split over processes); keep this process's slice too
        everyone = (rewards_per_func * self.reward_weights.to(device).unsqueeze(0)).nansum(dim=1)
        rank = self.accelerator.process_index
        rewards = everyone[rank * len(trajectories) : (rank + 1) * len(trajectories)]

        # ---- the policy's own log-probs of the sampled tokens (needed for the importance weights and drift)
        old_logps = None
        if not critic_only and (
            args.off_policy_correction != "none"
            or self.num_iterations > 1
            or args.steps_per_generation > args.gradient_accumulation_steps
        ):
            with self.policy_forward_context(batch):
                old_logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, input_ids, attention_mask, width, batch_size=args.per_device_train_batch_size
                )
            batch["old_per_token_logps"] = old_logps
        if not critic_only and self.beta != 0.0:  # TRL's loss adds beta * KL(policy || reference) per token
            batch["ref_per_token_logps"] = self._reference_logps(input_ids, attention_mask, width)

        # ---- advantages
        if self.value_model is not None:
            # each row is valued in its own segment's context; the episode reward sits on the last action token of
            # its last segment (per-turn rewards on their turns, in their segments); an earlier segment bootstraps
            # from the next segment's first action token (ppo.segment_gae)
            values = self._critic_values(input_ids, attention_mask, width) * action_mask
            lam_critic = 1.0 if critic_only else args.gae_lambda_critic
            row_rewards = rows.row_rewards(rewards, turn_rewards if args.per_turn_rewards else None)
            token_rewards = ppo.place_rewards(
                action_mask,
                row_rewards,
                turn_ends if args.per_turn_rewards else None,
                turn_rewards if args.per_turn_rewards else None,
            )
            _, returns = ppo.segment_gae(token_rewards, values, action_mask, rows.next_row, args.gamma, lam_critic)
            advantages, _ = ppo.segment_gae(
                token_rewards, values, action_mask, rows.next_row, args.gamma, args.gae_lambda_actor
            )
            if args.whiten_advantages:  # over the whole batch: every process's part
                advantages = ppo.masked_whiten(advantages, action_mask, reduce=self._sum_over_processes)
            batch["old_values"], batch["returns"] = values, returns
            metrics["critic/explained_variance"] = ppo.explained_variance(
                values, returns, action_mask, self._sum_over_processes
            )
            metrics["critic/value_mean"] = ppo.masked_mean(values, action_mask, self._sum_over_processes).item()
        else:
            grouped = everyone.view(-1, self.num_generations)
            centered = (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)
            if self.scale_rewards == "group":
                std = grouped.std(dim=1, keepdim=True).expand_as(grouped).reshape(-1)
            elif self.scale_rewards == "batch":
                std = everyone.std().expand_as(everyone)
            else:
                std = torch.ones_like(everyone)
            mine = slice(rank * len(rewards), (rank + 1) * len(rewards))
            per_episode = (centered / (std + 1e-4))[mine]
            advantages = (per_episode[row_episode] * real_row)[:, None] * action_mask  # broadcast to its segments
            metrics["frac_reward_zero_std"] = (grouped.std(dim=1) < 1e-6).float().mean().item()

        # ---- off-policy correction: weights pi_trainer / pi_sampler folded into the advantages
        sampler_logps = batch["sampling_per_token_logps"]
        if old_logps is not None:
            weights = ppo.off_policy_weights(
                old_logps, sampler_logps, action_mask, args.off_policy_correction, args.off_policy_clip
            )
            if weights is not None:
                advantages = advantages * weights
                flat = weights.flatten() if weights.shape[1] == 1 else weights[action_mask.bool()]
                if flat.numel():
                    metrics["off_policy/weight_mean"] = flat.mean().item()
                    metrics["off_policy/weight_min"] = flat.min().item()
            delta = (old_logps - sampler_logps)[action_mask.bool()]
            if delta.numel():
                metrics["off_policy/train_inference_abs_dlogp"] = delta.abs().mean().item()
                metrics["off_policy/train_inference_max_dlogp"] = delta.abs().max().item()
                metrics["off_policy/kl_sampler_trainer"] = (torch.exp(delta) - delta - 1).mean().item()
        batch["advantages"] = advantages
        batch["num_items_in_batch"] = self.accelerator.gather(action_mask.sum()).sum()
        batch["episode_index"] = torch.tensor(rows.episode, device=device)  # -1: a padding row

        # ---- metrics: reward as passing checks, resolved rate, turns, drift
        means = self._episode_means(trajectories)  # the whole batch's, over every process
        metrics["t1/passed_mean"] = means["passed_mean"]
        metrics["t1/resolved_rate"] = means["resolved_rate"]
        metrics["t1/turns_mean"] = means["turns_mean"]
        metrics["t1/passing_fraction"] = means["passing_fraction"]
        if len(everyone) % self.num_generations == 0:  # groups: the same task and seed (every algorithm)
            grouped_var = everyone.view(-1, self.num_generations).var(dim=1, unbiased=False)
            metrics["t1/group_reward_var"] = grouped_var.mean().item()
            metrics["t1/zero_variance_groups"] = (grouped_var < 1e-12).float().mean().item()
        metrics["t1/episode_errors"] = float(sum(t.termination == "error" for t in trajectories))
        metrics["t1/tito_drift_tokens"] = float(sum(loss_region_drift(t) for t in trajectories))
        metrics["t1/template_repairs"] = float(sum(len(t.drift_events) for t in trajectories))
        metrics["t1/action_tokens_mean"] = action_mask.sum().item() / max(1, len(trajectories))  # per episode
        metrics["t1/segments_mean"] = sum(t.num_segments for t in trajectories) / max(1, len(trajectories))
        if self.routing_replay is not None:
            metrics.update(self.routing_replay.metrics())  # over the old-log-prob forwards of this batch
        metrics["reward"] = everyone.mean().item()
        metrics["reward_std"] = everyone.std().item() if len(everyone) > 1 else 0.0
        if not critic_only:
            for key, value in metrics.items():
                if not (isinstance(value, float) and math.isnan(value)):
                    self._metrics[mode][key].append(value)
            for i, name in enumerate(self.reward_func_names):
                self._metrics[mode][f"rewards/{name}/mean"].append(torch.nanmean(rewards_per_func[:, i]).item())
            self.state.num_input_tokens_seen += int(attention_mask.sum().item())
        batch["_metrics"] = metrics
        return batch

    def _critic_values(self, input_ids, attention_mask, width: int) -> torch.Tensor:
        """The critic's values of a scored batch (no gradient), ``loss_chunk_tokens`` tokens at a time."""
        budget = self.args.loss_chunk_tokens
        step = max(1, budget // input_ids.shape[1]) if budget else input_ids.shape[0]
        return torch.cat(
            [
                self.value_model.values(input_ids[i : i + step], attention_mask[i : i + step], width)
                for i in range(0, input_ids.shape[0], step)
            ]
        )

    # ------------------------------------------------------------------------------------------ processes
    def _sum_over_processes(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the processes of a multi-process run (itself on one process)."""
        if self.accelerator.num_processes == 1:
            return tensor
        return self.accelerator.reduce(tensor.clone(), reduction="sum")

    def _average_critic_gradients(self) -> None:
        """The critic is not wrapped for data parallelism (it has its own optimizer and is called through
        ``values()``, not ``forward``): average its gradients over the processes here, once per optimizer step,
        as DDP does for the policy."""
        if self.accelerator.num_processes == 1:
            return
        params = [p for p in self.value_model.parameters() if p.requires_grad]
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params])
        flat = self.accelerator.reduce(flat, reduction="mean")
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    def _value_normalizer(self, inputs: dict, mode: str) -> torch.Tensor:
        """Per-process share of the generation batch's action tokens, per accumulation step (TRL's ``dapo``
        normalizer): the critic's gradient does not depend on how the batch is split into micro-batches and
        processes."""
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
        if mode == "train":
            normalizer = normalizer * self.current_gradient_accumulation_steps / self.args.steps_per_generation
        return normalizer

    # ------------------------------------------------------------------------------------------ loss
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The micro-batch's loss. With ``loss_chunk_tokens`` set and more tokens than that in the micro-batch, its
        rows are cut into chunks (:meth:`_loss_chunks`); every chunk but the last is backpropagated here, the last
        one's loss is returned for TRL's ``training_step`` to backpropagate, plus the detached losses of the others
        (a constant: the reported loss is the whole micro-batch's, the gradient is that of the last chunk). The
        activations of one chunk are freed before the next forward, so the step's peak memory follows the chunk,
        not the micro-batch."""
        if return_outputs:
            raise ValueError("T1Trainer does not return outputs from compute_loss")
        chunks = self._loss_chunks(inputs)
        if len(chunks) == 1:
            return self._chunk_loss(model, inputs)
        coef, done = self.router_aux_loss_coef, None
        for i, (rows, weight, aux_scale) in enumerate(chunks):
            chunk = _take_rows(inputs, rows)
            self.router_aux_loss_coef = coef * aux_scale  # the load-balancing term: a row-weighted mean of chunks
            try:
                if i == len(chunks) - 1 or not torch.is_grad_enabled():
                    loss = self._chunk_loss(model, chunk, weight)
                else:
                    with self.accelerator.no_sync(model):  # one gradient all-reduce per micro-batch (the last chunk)
                        loss = self._chunk_loss(model, chunk, weight)
                        self.accelerator.backward(loss)
                    loss = loss.detach()
            finally:
                self.router_aux_loss_coef = coef
            done = loss if done is None else done + loss
        return done

    def _loss_chunks(self, inputs: dict) -> list[tuple[slice, float, float]]:
        """``(rows, weight, aux_scale)`` per chunk of the micro-batch: at most ``loss_chunk_tokens`` tokens each
        (rows x the batch's padded length; at least one row). ``weight`` makes the chunks' policy losses add up
        to the micro-batch's as ``loss_type`` aggregates it: each chunk's share of the rows for per-row means
        (``grpo``, ``dr_grpo``, ``sapo``, ``luspo``), of the action tokens for ``bnpo``, 1 for the losses divided
        by the generation batch's token count (``dapo``, ``cispo``, ``vespo``). The value loss is divided by that
        count too, so it is never reweighted. ``aux_scale`` scales the MoE load-balancing coefficient so that term
        is the row-weighted mean of the chunks' (it is not linear in the rows: the one term that is not exact)."""
        rows = inputs["prompt_ids"].shape[0]
        width = inputs["prompt_ids"].shape[1] + inputs["completion_ids"].shape[1]
        budget = self.args.loss_chunk_tokens
        if not budget or rows * width <= budget:
            return [(slice(0, rows), 1.0, 1.0)]
        per_chunk = max(1, budget // width)
        action = (inputs["completion_mask"] * inputs["tool_mask"]).float().sum(dim=1)
        total = action.sum().item()
        chunks = []
        for start in range(0, rows, per_chunk):
            part = slice(start, min(rows, start + per_chunk))
            share = (part.stop - part.start) / rows
            if self.loss_type in ("dapo", "cispo", "vespo"):
                weight = 1.0
            elif self.loss_type == "bnpo" and total > 0:
                weight = action[part].sum().item() / total
            else:
                weight = share
            if weight == 0.0:  # no action token in the chunk: its policy loss is 0 whatever the weight
                weight = share
            chunks.append((part, weight, share / weight))
        return chunks

    def _chunk_loss(self, model, inputs, weight: float = 1.0) -> torch.Tensor:
        """Policy loss (times ``weight``, see :meth:`_loss_chunks`) plus the value loss of a micro-batch or chunk."""
        with self.policy_forward_context(inputs):
            if self.args.off_policy_loss == "ppo":
                loss = super().compute_loss(model, inputs)  # TRL's clipped policy loss on our token-level advantages
            else:
                loss = self._off_policy_loss(model, inputs)
        if weight != 1.0:
            loss = loss * weight
        if self.value_model is not None and "returns" in inputs:
            mode = "train" if self.model.training else "eval"
            normalizer = self._value_normalizer(inputs, mode)
            vloss, vclip = self._value_loss(inputs, normalizer=normalizer)
            loss = loss + vloss
            tokens = inputs["tool_mask"].sum().clamp(min=1)  # logged as the mean over this micro-batch's tokens
            self._metrics[mode]["critic/value_loss"].append((vloss * normalizer / tokens).item())
            self._metrics[mode]["critic/value_clip_fraction"].append(vclip.item())
        return loss

    def _off_policy_loss(self, model, inputs) -> torch.Tensor:
        """The ``adaptive_trust_region`` or ``dppo`` policy loss (``t1train/offpolicy.py``) in place of TRL's clipped
        loss: the current log-probs are computed as TRL's ``_compute_loss`` does; both losses take their ratio to
        the sampler's log-probs (``sampling_per_token_logps``), per token, whichever policy version sampled it. The
        per-token loss is aggregated as ``loss_type`` says (dapo, bnpo, grpo); TRL's KL term (``beta``) and MoE aux
        loss are added."""
        args, mode = self.args, "train" if self.model.training else "eval"
        input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        mask = (inputs["completion_mask"] * inputs["tool_mask"]).float()
        logps, entropies, aux_loss = self._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            inputs["completion_ids"].size(1),
            compute_entropy=True,
            compute_aux_loss=self.aux_loss_enabled,
        )
        advantages = inputs["advantages"] if inputs["advantages"].dim() == 2 else inputs["advantages"].unsqueeze(1)
        sampler = inputs["sampling_per_token_logps"]
        if args.off_policy_loss == "adaptive_trust_region":
            per_token, stats = offpolicy.adaptive_trust_region_loss(
                logps,
                sampler,
                advantages,
                mask,
                self.epsilon_low,
                self.epsilon_high,
                args.trust_region_floor,
                args.trust_region_quantile,
            )
        else:
            per_token, stats = offpolicy.dppo_loss(
                logps, sampler, advantages, mask, args.dppo_delta, args.dppo_divergence, args.dppo_ratio_cap
            )
        if self.beta != 0.0:
            ref = inputs["ref_per_token_logps"]
            kl = torch.exp(ref - logps) - (ref - logps) - 1
            per_token = per_token + self.beta * kl
            self._metrics[mode]["kl"].append(ppo.masked_mean(kl, mask, self._sum_over_processes).item())
        accumulation = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        if args.loss_type == "dapo":  # TRL's normalizer: the generation batch's tokens per accumulation window
            normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
            if mode == "train":
                normalizer = normalizer * accumulation / args.steps_per_generation
            loss = (per_token * mask).sum() / normalizer
        elif args.loss_type == "bnpo":
            loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0) / accumulation
        else:  # grpo: mean over each sequence, then over sequences
            loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accumulation
        if self.aux_loss_enabled:
            loss = loss + self.router_aux_loss_coef * aux_loss / accumulation
        self._metrics[mode]["entropy"].append(ppo.masked_mean(entropies, mask, self._sum_over_processes).item())
        prefix = "trust_region" if args.off_policy_loss == "adaptive_trust_region" else "dppo"
        for key, value in stats.items():
            self._metrics[mode][f"{prefix}/{key}"].append(value.item())
        return loss

    def _value_loss(self, batch: dict, clip: bool = True, normalizer=None) -> tuple[torch.Tensor, torch.Tensor]:
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        values = self.value_model.values(input_ids, attention_mask, batch["completion_ids"].shape[1])
        return ppo.value_loss(
            values,
            batch["old_values"],
            batch["returns"],
            batch["tool_mask"].float(),
            self.args.cliprange_value if clip else None,
            normalizer,
        )

    def _critic_optimizer_step(self) -> None:
        self._average_critic_gradients()
        torch.nn.utils.clip_grad_norm_(self.value_model.parameters(), self.args.critic_max_grad_norm)
        self.value_optimizer.step()
        self.value_optimizer.zero_grad(set_to_none=True)

    # ------------------------------------------------------------------------------------------ critic warm-start
    def warm_start_critic(self) -> list[dict]:
        """Fit the critic on rollouts of the frozen initial policy (see the module docstring)."""
        from tqdm.auto import tqdm

        args = self.args
        rows = list(self.train_dataset)
        rng = random.Random(args.seed)
        groups = max(1, args.generation_batch_size // self.num_generations)
        bar = tqdm(range(args.critic_warmup_iterations), desc="critic warm-start", disable=args.disable_tqdm)
        keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask", "old_values", "returns")
        buffer: list[dict] = []  # every warm-start batch: all come from the same frozen policy, so all stay on-policy
        for it in bar:
            picked = [rows[rng.randrange(len(rows))] for _ in range(groups)]  # the same on every process
            inputs, first = self._my_share([dict(r) for r in picked for _ in range(self.num_generations)])
            trajectories = self.rollout(
                [EpisodeSpec(x["task"], x["seed"]) for x in inputs], phase="warmup", first_index=first
            )
            batch = self.score_trajectories(trajectories, inputs, critic_only=True)
            ev = batch["_metrics"]["critic/explained_variance"]  # on data the critic has not been fitted to yet
            buffer.append({k: batch[k] for k in keys})
            losses = []
            for _ in range(args.critic_warmup_epochs):
                for b in torch.randperm(len(buffer)).tolist():
                    data = buffer[b]
                    perm = torch.randperm(len(data["returns"]))
                    for start in range(0, len(perm), args.per_device_train_batch_size):
                        idx = perm[start : start + args.per_device_train_batch_size]
                        # unclipped: the value clip keeps PPO's critic near the values it had when the batch was
                        # scored; here the critic starts from nothing and must be free to move all the way
                        loss, _ = self._value_loss({k: v[idx] for k, v in data.items()}, clip=False)
                        loss.backward()
                        self._critic_optimizer_step()
                        losses.append(loss.item())
            with torch.no_grad():  # how well it now fits the batch it has just seen (vs `ev`: before seeing it)
                data = buffer[-1]
                values = self.value_model.values(
                    torch.cat([data["prompt_ids"], data["completion_ids"]], 1),
                    torch.cat([data["prompt_mask"], data["completion_mask"]], 1),
                    data["completion_ids"].shape[1],
                )
                fit_ev = ppo.explained_variance(
                    values, data["returns"], data["tool_mask"].float(), self._sum_over_processes
                )
            record = {
                "iteration": it,
                "explained_variance": ev,
                "fit_explained_variance": fit_ev,
                "value_loss": sum(losses) / len(losses),
                "passed_mean": batch["_metrics"]["t1/passed_mean"],
            }
            self.critic_warmup_history.append(record)
            bar.set_postfix(ev=f"{ev:.3f}", value_loss=f"{record['value_loss']:.4f}")
            if not math.isnan(ev) and ev >= args.critic_warmup_ev_threshold:
                break
        self.critic_warmed_up = True
        return self.critic_warmup_history

    def train(self, resume_from_checkpoint=None, **kwargs):
        if resume_from_checkpoint:
            from transformers.trainer_utils import get_last_checkpoint

            path = (
                get_last_checkpoint(self.args.output_dir) if resume_from_checkpoint is True else resume_from_checkpoint
            )
            if path is None:
                raise ValueError(f"no checkpoint to resume from in {self.args.output_dir}")
            self._load_t1_state(path)
            self._resuming = True
            log = self._open_episode_log()
            if log is not None:  # the resumed run redoes the steps after the checkpoint: keep their episodes aside
                step = checkpoint_step(path)
                log.rewind(lambda record: _before_checkpoint(record, step), _superseded(log.path))
            resume_from_checkpoint = path
        try:
            if self.value_model is not None and not self.critic_warmed_up:
                self.warm_start_critic()
                if self.critic_warmup_history:
                    last = self.critic_warmup_history[-1]
                    self._metrics["train"]["critic_warmup/iterations"].append(float(len(self.critic_warmup_history)))
                    self._metrics["train"]["critic_warmup/explained_variance"].append(last["explained_variance"])
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        finally:
            self.stop_async()
            self._close_episode_log()  # another trainer may write to this folder next

    # ------------------------------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self, model, trial):
        """Write the checkpoint into a temp folder, then rename it to ``checkpoint-N``: a kill mid-save leaves no
        ``checkpoint-N`` for ``--resume`` to pick up half-written (one process; with several, TRL's own save)."""
        run_dir = Path(self._get_output_dir(trial=trial))
        final = run_dir / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        if self.accelerator.num_processes > 1:
            super()._save_checkpoint(model, trial)
            if self.args.should_save:
                self._save_t1_state(str(final))
            return
        parent = staging_dir(final)  # TRL writes <parent>/checkpoint-N
        staged = parent / final.name
        self._checkpoint_parent = str(parent)
        try:
            super()._save_checkpoint(model, trial)
            self._save_t1_state(str(staged))
            if (self.state.best_model_checkpoint or "").startswith(str(parent)):
                self.state.best_model_checkpoint = str(final)
                self.state.save_to_json(str(staged / "trainer_state.json"))
        finally:
            self._checkpoint_parent = None
        publish_dir(staged, final)
        shutil.rmtree(parent, ignore_errors=True)
        self._rotate(run_dir)

    def _get_output_dir(self, trial) -> str:
        return self._checkpoint_parent or super()._get_output_dir(trial)

    def _rotate(self, run_dir: Path) -> None:
        """Delete checkpoints over ``save_total_limit`` (TRL rotated inside the temp folder, where there is one)."""
        if rotate_checkpoints is None:  # transformers < 5: only the private method
            self._rotate_checkpoints(use_mtime=True, output_dir=str(run_dir))
            return
        rotate_checkpoints(
            output_dir=str(run_dir),
            save_total_limit=self.args.save_total_limit,
            best_model_checkpoint=self.state.best_model_checkpoint,
            use_mtime=True,
        )

    def _save_t1_state(self, folder: str) -> None:
        state = {"critic_warmed_up": self.critic_warmed_up, "critic_warmup_history": self.critic_warmup_history}
        Path(folder).mkdir(parents=True, exist_ok=True)
        if self.value_model is not None:
            torch.save(self.value_model.state_dict(), os.path.join(folder, "value_model.pt"))
            torch.save(self.value_optimizer.state_dict(), os.path.join(folder, "value_optimizer.pt"))
        Path(folder, "t1_state.json").write_text(json.dumps(state, indent=2))

    def _load_t1_state(self, folder: str) -> None:
        state_file = Path(folder, "t1_state.json")
        if state_file.exists():
            state = json.loads(state_file.read_text())
            self.critic_warmed_up = state["critic_warmed_up"]
            self.critic_warmup_history = state["critic_warmup_history"]
        if self.value_model is not None and Path(folder, "value_model.pt").exists():
            self.value_model.load_state_dict(torch.load(Path(folder, "value_model.pt"), map_location="cpu"))
            self.value_optimizer.load_state_dict(torch.load(Path(folder, "value_optimizer.pt"), map_location="cpu"))

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        super().save_model(output_dir, _internal_call)
        if self.args.should_save:  # the protocol the model was trained with, for `t1env eval --agent hf`
            self.rollout_config.agent_protocol(self.args.max_new_tokens).save(output_dir or self.args.output_dir)
        if self.value_model is not None and not _internal_call and self.args.should_save:
            self.value_model.save_pretrained(Path(output_dir or self.args.output_dir) / "value_model")

    # ------------------------------------------------------------------------------------------ evaluation
    def evaluate_episodes(
        self,
        tasks: list[str],
        seeds: list[int],
        temperature: float | None = None,
        episodes_per_task: int = 1,
        phase: str = "eval",
    ) -> dict:
        """Play ``tasks x seeds`` (x ``episodes_per_task``) with the current policy; mean passing checks etc.
        ``phase`` labels the episodes in ``trajectories.jsonl``."""
        self.sync_engine_weights()
        temperature = self.args.eval_temperature if temperature is None else temperature
        sampling = SamplingParams(
            max_new_tokens=self.args.max_new_tokens,
            temperature=temperature,
            top_p=self.args.top_p,
            top_k=self.sampling.top_k,
            seed=self.args.seed + 10_000,
        )
        specs, first = self._my_share(
            [EpisodeSpec(t, s) for s in seeds for t in tasks for _ in range(episodes_per_task)]
        )
        means = self._episode_means(self.rollout(specs, sampling, phase=phase, first_index=first))
        return {
            key: means[key] for key in ("passed_mean", "resolved_rate", "passing_fraction", "reward_mean", "episodes")
        }

    def _episode_means(self, trajectories: list[Trajectory]) -> dict:
        """:func:`episode_metrics` over every process's episodes (this process's are ``trajectories``)."""
        if self.accelerator.num_processes == 1:
            return episode_metrics(trajectories)
        sums = torch.tensor(_episode_sums(trajectories), dtype=torch.float64, device=self.accelerator.device)
        return _means(self._sum_over_processes(sums).tolist())

    def _my_share(self, items: list) -> tuple[list, int]:
        """This process's contiguous slice of a list every process holds, and the index of its first item."""
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        start, end = len(items) * rank // world, len(items) * (rank + 1) // world
        return items[start:end], start


def _take_rows(batch: dict, rows: slice) -> dict:
    """The rows ``rows`` of every per-row tensor of a training batch (0-d tensors such as ``num_items_in_batch``
    and anything else pass through whole)."""
    n = batch["prompt_ids"].shape[0]
    return {k: v[rows] if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == n else v for k, v in batch.items()}


class _Rows:
    """Which episode each row of a training batch holds (one row per segment; -1: a padding row) and which row
    holds the segment after it (-1: none)."""

    def __init__(self):
        self.episode: list[int] = []
        self.next_row: list[int] = []
        self.last: list[bool] = []

    def add(self, episode: int, last: bool) -> None:
        row = len(self.episode)
        if row and episode >= 0 and self.episode[row - 1] == episode and not self.last[row - 1]:
            self.next_row[row - 1] = row
        self.episode.append(episode)
        self.next_row.append(-1)
        self.last.append(last)

    def row_rewards(self, episode_rewards: torch.Tensor, turn_rewards: list[list[float]] | None) -> torch.Tensor:
        """What ``ppo.place_rewards`` puts on each row's last action token: the episode reward on its last segment,
        nothing on earlier ones; with per-turn rewards each row keeps its own turns' rewards and the last row gets
        the rest of the episode reward (extra reward functions)."""
        out = torch.zeros(len(self.episode), dtype=torch.float32, device=episode_rewards.device)
        earlier: dict[int, float] = collections.defaultdict(float)
        for row, (e, last) in enumerate(zip(self.episode, self.last)):
            if e < 0:
                continue
            own = sum(turn_rewards[row]) if turn_rewards is not None else 0.0
            out[row] = float(episode_rewards[e]) - earlier[e] if last else own
            earlier[e] += own
        return out


def checkpoint_step(path: str | Path) -> int:
    """The global step a checkpoint folder was saved at."""
    state = Path(path) / "trainer_state.json"
    if state.exists():
        return int(json.loads(state.read_text())["global_step"])
    return int(Path(path).name.rsplit("-", 1)[-1])


def _superseded(log: Path) -> Path:
    """Where a rewind moves a log's superseded episodes: ``trajectories.superseded.jsonl`` (rank 0) or
    ``trajectories.rank1.superseded.jsonl``: one file per process, never two writers."""
    return log.with_name(log.name.replace(".jsonl", ".superseded.jsonl"))


def _episode_key(record: dict) -> tuple:
    meta = record.get("metadata") or {}
    return meta.get("phase"), meta.get("step"), meta.get("call"), meta.get("episode")


def _before_checkpoint(record: dict, step: int) -> bool:
    """Whether a logged episode belongs to the run up to the checkpoint of ``step``: training rollouts made before
    it (the rollout at step s feeds update s + 1), and anything else made at or before it."""
    meta = record.get("metadata") or {}
    if meta.get("phase") == "train":
        return meta.get("step", 0) < step
    return meta.get("step", 0) <= step


def episode_metrics(trajectories: list[Trajectory]) -> dict:
    """Mean passing checks, resolved rate, mean reward, mean turns and passing fraction (passing checks / checks)
    of finished episodes."""
    return _means(_episode_sums(trajectories))


def _episode_sums(trajectories: list[Trajectory]) -> list[float]:
    """Passing checks, resolved episodes, reward, turns, checks and episodes, summed: what :func:`_means` divides
    (sums, so that a multi-process run can add every process's before dividing)."""
    return [
        sum(float(t.checks.get("passed") or 0) for t in trajectories),
        float(sum(bool(t.checks.get("resolved")) for t in trajectories)),
        sum(t.reward for t in trajectories),
        float(sum(t.num_turns for t in trajectories)),
        sum(float(t.checks.get("total") or 0) for t in trajectories),
        float(len(trajectories)),
    ]


def _means(sums: list[float]) -> dict:
    passed, resolved, reward, turns, checks, episodes = sums
    n = max(1.0, episodes)
    return {
        "passed_mean": passed / n,
        "resolved_rate": resolved / n,
        "reward_mean": reward / n,
        "turns_mean": turns / n,
        "passing_fraction": passed / checks if checks else float("nan"),
        "episodes": int(episodes),
    }


HEALTH_FIELDS = (  # (label, logged key, format): one line per logged step, the run's health at a glance
    ("resolved", "t1/resolved_rate", "{:.2f}"),
    ("pass", "t1/passing_fraction", "{:.2f}"),
    ("group-var", "t1/group_reward_var", "{:.3f}"),
    ("zero-var", "t1/zero_variance_groups", "{:.2f}"),
    ("entropy", "entropy", "{:.3f}"),
    ("kl-ref", "kl", "{:.4f}"),
    ("clip", "clip_ratio/region_mean", "{:.3f}"),
    ("ev", "critic/explained_variance", "{:.2f}"),
    ("|dlogp|", "off_policy/train_inference_abs_dlogp", "{:.1e}"),
    ("tito-drift", "t1/tito_drift_tokens", "{:.0f}"),
    ("r3", "r3/agreement", "{:.3f}"),
    ("stale", "async/staleness_mean", "{:.2f}"),  # async only: versions behind, mean; the histogram follows
    ("dropped", "async/dropped_episodes", "{:.0f}"),
    ("idle-trainer", "async/trainer_idle_fraction", "{:.2f}"),
    ("idle-sampler", "async/sampler_idle_fraction", "{:.2f}"),
)


def health_line(step: int, logs: dict, entropy_start: float | None = None) -> str | None:
    """The health line of one logged training step (None for a log without training metrics), with a warning
    when the batch gave no learning signal or the policy's entropy has collapsed: below a fifth of
    ``entropy_start`` (the run's first logged entropy), or below 0.05 when that is not known. A policy that sharpens
    its few real choices (chain: mean token entropy 0.08 -> 0.035 over 40 healthy steps) keeps most of its entropy;
    one that collapses into a fixed string loses nearly all of it.

    Example:
        >>> health_line(3, {"t1/resolved_rate": 0.25, "t1/zero_variance_groups": 1.0, "entropy": 0.01})
        'step 3  resolved 0.25  zero-var 1.00  entropy 0.010  [no signal: every group has one reward] [entropy collapsed]'
        >>> health_line(40, {"t1/resolved_rate": 0.69, "entropy": 0.035}, entropy_start=0.08)
        'step 40  resolved 0.69  entropy 0.035'
        >>> health_line(1, {"t1/resolved_rate": 0.0, "critic/value_loss": 0.0})  # PPO, every return equal
        'step 1  resolved 0.00  ev n/a'
        >>> health_line(5, {"t1/resolved_rate": 0.5, "async/staleness_mean": 0.5, "async/staleness_0": 4.0,
        ...                 "async/staleness_1": 4.0, "async/dropped_episodes": 2.0})  # async: versions behind
        'step 5  resolved 0.50  stale 0.50  dropped 2  behind 0:4/1:4'
    """
    logs = dict(logs)
    if "critic/value_loss" in logs and "critic/explained_variance" not in logs:
        logs["critic/explained_variance"] = float("nan")  # a critic, but no return varied: not logged (never averaged)
    parts = [
        f"{label} {'n/a' if math.isnan(logs[key]) else fmt.format(logs[key])}"
        for label, key, fmt in HEALTH_FIELDS
        if isinstance(logs.get(key), (int, float))
    ]  # n/a: undefined this step (ev when every return is equal)
    if not parts:
        return None
    histogram = sorted(
        (int(k.rsplit("_", 1)[1]), v) for k, v in logs.items() if re.fullmatch(r"async/staleness_\d+", k)
    )
    if histogram:  # async: episodes trained on, by versions behind
        parts.append("behind " + "/".join(f"{k}:{v:.0f}" for k, v in histogram))
    line = f"step {step}  " + "  ".join(parts)
    if logs.get("t1/zero_variance_groups", 0) >= 1.0:
        line += "  [no signal: every group has one reward]"
    if logs.get("entropy", 1.0) < (0.2 * entropy_start if entropy_start else 0.05):
        line += " [entropy collapsed]"
    return line


METRICS_LOG = "metrics.jsonl"  # in output_dir: every logged step's metrics, one JSON object per line
metrics_logger = logging.getLogger("t1train.metrics")


class _MetricsLogCallback(TrainerCallback):
    """Every log TRL makes (the raw metrics dict: loss, clip ratios, t1/*, critic/*, ...) as one JSON line in
    ``<output_dir>/metrics.jsonl`` and on the ``t1train.metrics`` logger at DEBUG (main process only)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, **{k: v for k, v in logs.items() if k != "total_flos"}}
        metrics_logger.debug("%s", row)
        if args.output_dir:
            os.makedirs(args.output_dir, exist_ok=True)
            with open(os.path.join(args.output_dir, METRICS_LOG), "a") as f:
                f.write(json.dumps(row, default=str) + "\n")


class _BarOnlyProgressCallback(ProgressCallback):
    """transformers' progress bar without the metrics dict it writes under the bar at every log (the health line and
    ``metrics.jsonl`` carry those)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return


class _HealthLineCallback(TrainerCallback):
    """Print :func:`health_line` for every logged training step (main process), against the first step's entropy."""

    def __init__(self):
        self.entropy_start = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        line = health_line(state.global_step, logs, self.entropy_start)
        if self.entropy_start is None and isinstance(logs.get("entropy"), (int, float)) and logs["entropy"] > 0:
            self.entropy_start = logs["entropy"]
        if line is not None and state.is_world_process_zero:
            from tqdm.auto import tqdm

            tqdm.write(line)  # on a line of its own, not after a progress bar's


class _CriticStepCallback(TrainerCallback):
    """Step the critic's optimizer once per policy optimizer step, after the last micro-batch of the accumulation
    window has added its value-loss gradients (the public hook for what counting TRL's private ``_step`` did)."""

    def __init__(self, trainer: T1Trainer):
        self.trainer = trainer

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.trainer._critic_optimizer_step()


class _EpisodeEvalCallback(TrainerCallback):
    """Evaluate on ``eval_tasks x eval_seeds`` every ``eval_every_steps`` steps (and before the first step)."""

    def __init__(self, trainer: T1Trainer):
        self.trainer = trainer
        self.history: list[dict] = []

    def _evaluate(self, state):
        args = self.trainer.args
        metrics = self.trainer.evaluate_episodes(args.eval_tasks, args.eval_seeds)
        self.history.append({"step": state.global_step, **metrics})
        return metrics

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:
            self._evaluate(state)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.trainer.args.eval_every_steps == 0 or state.global_step == state.max_steps:
            metrics = self._evaluate(state)
            self.trainer._metrics["train"]["eval/passed_mean"].append(metrics["passed_mean"])
            self.trainer._metrics["train"]["eval/resolved_rate"].append(metrics["resolved_rate"])

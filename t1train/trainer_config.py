"""T1Config: the training arguments of :class:`t1train.trainer.T1Trainer` (TRL's ``GRPOConfig`` plus t1's fields).

Split from ``trainer.py`` the way TRL keeps ``grpo_config.py`` beside ``grpo_trainer.py``; import it from
either module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import ValidationError
from trl import GRPOConfig

from t1env.families import expand_refs
from t1env.options import EnvOptions
from t1train import offpolicy, ppo
from t1train.async_rl import AsyncConfig
from t1train.harness import HarnessConfig
from t1train.rollout import DEFAULT_SUMMARY_PROMPT, DEFAULT_SYSTEM_PROMPT, RolloutConfig, check_truncated_turns

ALGORITHMS = ("ppo", "grpo", "gspo")


@dataclass
class T1Config(GRPOConfig):
    """Training arguments: TRL's ``GRPOConfig`` plus the t1 fields below (see ``docs/training.md``).

    Reused from ``GRPOConfig``: ``num_generations`` (episodes per task and seed: a GRPO group),
    ``per_device_train_batch_size``, ``steps_per_generation``, ``num_iterations``, ``learning_rate``,
    ``temperature``/``top_p``/``top_k`` (sampling, and the trainer's log-prob temperature), ``loss_type``,
    ``epsilon``/``epsilon_high`` (policy clip), ``importance_sampling_level``, ``beta`` (KL to a reference),
    ``scale_rewards``, ``max_steps``, ``save_steps``, ``output_dir``, ``seed``.
    """

    algorithm: str = field(default="ppo", metadata={"help": "ppo (actor-critic), grpo or gspo."})
    # ---- episodes
    tasks: list[str] = field(
        default_factory=lambda: ["hello-file"], metadata={"help": "Task ids or task package paths to train on."}
    )
    train_seeds: list[int] = field(
        default_factory=lambda: [0], metadata={"help": "Reset seeds; the train set is every (task, seed) pair."}
    )
    env_backend: str = field(default="local", metadata={"help": "Sandbox backend: local (bubblewrap) or docker."})
    env_kwargs: dict = field(default_factory=dict, metadata={"help": 'Extra gym.make("T1Terminal-v0", ...) arguments.'})
    max_turns: int = field(default=8, metadata={"help": "Assistant turns per episode."})
    max_new_tokens: int = field(default=64, metadata={"help": "Tokens the engine may sample per turn."})
    truncated_turns: str = field(
        default="reject",
        metadata={
            "help": "A turn cut by max_new_tokens: reject (not run; answered that it was cut) or act (run the action "
            "it holds). reject keeps RL from drifting into turns that never end (docs/training.md)."
        },
    )
    max_context_tokens: int = field(
        default=4096,
        metadata={"help": "The context budget: past it an episode ends or goes on in a new segment (context_policy)."},
    )
    context_policy: str = field(
        default="end",
        metadata={
            "help": "When the next turn would not fit max_context_tokens: end (submit for the agent), "
            "drop_observations (a new segment: instruction + the last keep_last_turns turns) or summary (the "
            "policy summarizes; a new segment starts from its summary + the last turns). docs/training.md."
        },
    )
    keep_last_turns: int = field(default=4, metadata={"help": "Turns a new segment keeps verbatim."})
    summary_prompt: str = field(
        default=DEFAULT_SUMMARY_PROMPT, metadata={"help": "The request for a summary (context_policy: summary)."}
    )
    max_segments: int = field(default=64, metadata={"help": "Most segments per episode; past it the episode ends."})
    loss_chunk_tokens: int = field(
        default=0,
        metadata={
            "help": "Most tokens (rows x padded length) one forward and backward of the training step holds: a "
            "micro-batch with more is cut into chunks of rows, backpropagated one after the other (the same loss "
            "and gradient as one pass). Bounds the step's memory when long episodes make many segment rows. "
            "0: no limit."
        },
    )
    agent: str = field(
        default="loop",
        metadata={"help": "Who plays episodes: loop (t1's agent loop) or harness (your own, through t1train serve)."},
    )
    harness: str | None = field(
        default=None, metadata={"help": "With agent: harness: a shell command or a package.module:Class."}
    )
    harness_timeout_s: float = field(
        default=900.0, metadata={"help": "With agent: harness: seconds a harness command may run per episode."}
    )
    rollout_concurrency: int = field(default=8, metadata={"help": "Episodes in flight (each holds a sandbox)."})
    rollout_executor: str = field(
        default="inprocess",
        metadata={
            "help": "Where the sandboxes run: inprocess (here) or ray (Ray workers holding a `sandbox` resource)."
        },
    )
    ray_address: str | None = field(
        default="auto",
        metadata={"help": "With rollout_executor=ray: the Ray cluster to join (auto: the local `ray start` one)."},
    )
    system_prompt: str = field(default=DEFAULT_SYSTEM_PROMPT, metadata={"help": "System message of every episode."})
    protocol: str = field(
        default="text",
        metadata={
            "help": "Agent protocol (docs/protocol.md): text, the model writes its action in its reply. Checkpoints record "
            "it with the system prompt and limits in t1_protocol.json, which t1env eval --agent hf reads."
        },
    )
    # ---- engine
    engine: str = field(
        default="hf",
        metadata={
            "help": "hf: sample in this process with the policy's own parameters (no weight copy); sglang: an SGLang "
            "server at engine_url, updated from disk after each step."
        },
    )
    engine_url: str = field(default="http://127.0.0.1:30000", metadata={"help": "SGLang server URL."})
    # ---- rewards and advantages
    per_turn_rewards: bool = field(
        default=False,
        metadata={
            "help": "Put each turn's env reward on that turn's last token (default: the episode reward on its last "
            "action token)."
        },
    )
    gamma: float = field(default=1.0, metadata={"help": "Discount per action token (ppo)."})
    gae_lambda_actor: float = field(default=0.95, metadata={"help": "GAE lambda of the policy's advantages (ppo)."})
    gae_lambda_critic: float = field(default=1.0, metadata={"help": "GAE lambda of the critic's targets (ppo)."})
    whiten_advantages: bool = field(default=True, metadata={"help": "Normalize ppo advantages over the batch."})
    # ---- critic
    value_model_path: str | None = field(
        default=None,
        metadata={
            "help": "Critic to start from (a ValueModel folder or any causal-LM folder); default: a copy of the policy."
        },
    )
    critic_learning_rate: float = field(default=1e-4, metadata={"help": "The critic's AdamW learning rate."})
    critic_max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping of the critic."})
    cliprange_value: float | None = field(
        default=0.2, metadata={"help": "Clip the new values to old value +- this (null: unclipped squared error)."}
    )
    critic_warmup_iterations: int = field(
        default=0,
        metadata={
            "help": "Critic warm-start: rounds of critic-only fitting on rollouts of the frozen initial policy (ppo)."
        },
    )
    critic_warmup_epochs: int = field(
        default=4, metadata={"help": "Passes, per warm-start round, over all warm-start batches collected so far."}
    )
    critic_warmup_ev_threshold: float = field(
        default=0.8, metadata={"help": "End the warm-start once explained variance on a fresh batch reaches this."}
    )
    # ---- off-policy correction
    off_policy_correction: str = field(
        default="token_truncate",
        metadata={
            "help": "Importance weights trainer/sampler: none, token_truncate, sequence_truncate, token_mask, "
            "sequence_mask."
        },
    )
    off_policy_clip: float = field(default=2.0, metadata={"help": "Cap (truncate) or bound (mask) of the weights."})
    off_policy_loss: str = field(
        default="ppo",
        metadata={
            "help": "Policy loss (t1train/offpolicy.py): ppo (TRL's clipped loss), adaptive_trust_region (PPO's clip "
            "on pi / mu whose outward side shrinks for tokens whose |log pi - log mu| is above the batch's quantile) "
            "or dppo (DPPO's divergence mask). The last two need off_policy_correction: none."
        },
    )
    trust_region_floor: float = field(
        default=0.5,
        metadata={"help": "adaptive_trust_region: the kernel's floor c in (0, 1]; 1 is plain PPO."},
    )
    trust_region_quantile: float = field(
        default=0.9, metadata={"help": "adaptive_trust_region: tokens with |d| above this quantile are gated."}
    )
    dppo_divergence: str = field(default="tv", metadata={"help": "dppo: tv (binary TV) or kl (binary KL)."})
    dppo_delta: float | None = field(
        default=None, metadata={"help": "dppo: divergence threshold (default: 0.15 for tv, 0.05 for kl)."}
    )
    dppo_ratio_cap: float = field(default=20.0, metadata={"help": "dppo: cap C of the ratio pi / mu."})
    async_rl: dict | None = field(
        default=None,
        metadata={
            "help": "Asynchronous training, written `async:` in the YAML: {max_staleness: N, stale: drop|downweight, "
            "stale_weight: w} (t1train/async_rl.py, docs/training.md). Leave out for synchronous training."
        },
    )
    # ---- R3
    r3: bool = field(
        default=False,
        metadata={
            "help": "Rollout routing replay: record the sampler's MoE expert choices and replay them in the training "
            "forwards (needs an MoE policy; see t1train/r3.py)."
        },
    )
    # ---- evaluation on held-out episodes
    eval_tasks: list[str] = field(default_factory=list, metadata={"help": "Tasks for periodic evaluation."})
    eval_seeds: list[int] = field(default_factory=lambda: [0], metadata={"help": "Reset seeds for evaluation."})
    eval_every_steps: int = field(default=0, metadata={"help": "Evaluate every N steps (0: never)."})
    eval_temperature: float = field(default=1.0, metadata={"help": "Sampling temperature for evaluation."})
    health_line: bool = field(
        default=True,
        metadata={
            "help": "Print one line per logged step: resolved rate, passing fraction, reward variance within groups, "
            "share of zero-variance groups, entropy, KL to the reference (beta > 0), clip fraction, the critic's "
            "explained variance, train-inference |dlogp|, TITO drift, R3 agreement (docs/training.md)."
        },
    )
    # ---- files
    save_trajectories: bool = field(
        default=True,
        metadata={
            "help": "Append every episode to <output_dir>/trajectories.jsonl as it finishes (see the module docstring)."
        },
    )
    # ---- TRL defaults that suit t1
    logging_steps: float = field(default=1, metadata={"help": "Log every N steps."})
    report_to: Any = field(default="none", metadata={"help": "Where to report logs (none, tensorboard, wandb...)."})
    num_generations: int | None = field(default=4, metadata={"help": "Episodes per (task, seed): a GRPO group."})
    per_device_train_batch_size: int = field(default=8, metadata={"help": "Episodes per micro-batch."})
    dataloader_pin_memory: bool = field(
        default=False,
        metadata={"help": "The dataloader yields episode specs (task, seed), not tensors: there is nothing to pin."},
    )
    gradient_checkpointing: bool | None = field(
        default=None,
        metadata={
            "help": "Deprecated alias of activation_checkpointing (transformers 5); TRL's GRPOConfig sets it to True, "
            "t1 sets activation_checkpointing instead."
        },
    )

    def __post_init__(self):
        if self.activation_checkpointing is None and self.gradient_checkpointing is None:
            self.activation_checkpointing = True  # TRL's default, under the name transformers 5 does not deprecate
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if self.agent not in ("loop", "harness"):
            raise ValueError(f"agent must be 'loop' or 'harness', got {self.agent!r}")
        if self.agent == "harness":
            HarnessConfig(self.harness or "", self.harness_timeout_s)  # a bad command or class: an error now
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(f"env_kwargs must be a mapping of gym.make options, got {type(self.env_kwargs).__name__}")
        try:  # the env's options, typed once (t1env.options): a typo fails here, not at the first rollout
            EnvOptions(backend=self.env_backend, **{k: v for k, v in self.env_kwargs.items() if k != "executor"})
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise ValueError(f"env_kwargs{'.' + where if where else ''}: {err['msg']}") from None
        if self.algorithm == "gspo" and self.importance_sampling_level == "token":
            self.importance_sampling_level = "sequence"  # GSPO is the sequence-level ratio
        if self.algorithm == "ppo" and self.loss_type not in ("grpo", "bnpo", "dr_grpo", "dapo"):
            raise ValueError(f"ppo needs a clipped-ratio loss_type (dapo, grpo, bnpo, dr_grpo), got {self.loss_type!r}")
        if self.off_policy_correction not in ppo.OFF_POLICY_MODES:
            raise ValueError(
                f"off_policy_correction must be one of {ppo.OFF_POLICY_MODES}, got {self.off_policy_correction!r}"
            )
        if self.off_policy_clip <= 1.0:
            raise ValueError(f"off_policy_clip must be > 1, got {self.off_policy_clip}")
        self._check_off_policy_loss()
        self._check_loss_chunks()
        self.async_config()  # a bad `async:` mapping fails here, naming the key
        check_truncated_turns(self.truncated_turns)
        if self.engine not in ("hf", "sglang"):
            raise ValueError(f"engine must be 'hf' or 'sglang', got {self.engine!r}")
        for name in ("gamma", "gae_lambda_actor", "gae_lambda_critic"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.critic_warmup_iterations < 0 or self.critic_warmup_epochs < 1:
            raise ValueError("critic_warmup_iterations must be >= 0 and critic_warmup_epochs >= 1")
        if self.critic_warmup_iterations and self.algorithm != "ppo":
            raise ValueError(
                f"critic_warmup_iterations needs algorithm='ppo' (got {self.algorithm!r}): grpo and gspo have no critic"
            )
        self.tasks, self.eval_tasks = expand_refs(self.tasks), expand_refs(self.eval_tasks)
        if not self.tasks:
            raise ValueError("tasks is empty: give at least one task id or task package path")
        if self.max_turns < 1 or self.max_new_tokens < 1:
            raise ValueError("max_turns and max_new_tokens must be >= 1")
        if self.eval_every_steps and not self.eval_tasks:
            raise ValueError("eval_every_steps is set but eval_tasks is empty")
        if self.bf16 is None and not self.fp16:  # TRL defaults to bf16, which a CPU-only machine cannot do
            self.bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        if multi_cpu():
            self.use_cpu = True  # else each process of `torchrun --nproc_per_node N` would train alone
        self.rollout_config()  # a bad protocol fails here, with the rollout's message
        super().__post_init__()

    def async_config(self) -> AsyncConfig | None:
        """The ``async:`` settings as an :class:`~t1train.async_rl.AsyncConfig` (None: synchronous training)."""
        return None if self.async_rl is None else AsyncConfig.from_mapping(self.async_rl)

    def _check_off_policy_loss(self) -> None:
        if self.off_policy_loss not in offpolicy.OFF_POLICY_LOSSES:
            raise ValueError(
                f"off_policy_loss must be one of {offpolicy.OFF_POLICY_LOSSES}, got {self.off_policy_loss!r}"
            )
        if self.off_policy_loss == "ppo":
            return
        if not 0.0 < self.trust_region_floor <= 1.0 or not 0.0 < self.trust_region_quantile < 1.0:
            raise ValueError("trust_region_floor must be in (0, 1] and trust_region_quantile in (0, 1)")
        if self.dppo_divergence not in offpolicy.DIVERGENCES:
            raise ValueError(f"dppo_divergence must be one of {offpolicy.DIVERGENCES}, got {self.dppo_divergence!r}")
        if self.loss_type not in ("dapo", "bnpo", "grpo"):
            raise ValueError(
                f"off_policy_loss {self.off_policy_loss} needs loss_type dapo, bnpo or grpo, got {self.loss_type!r}"
            )
        if self.off_policy_correction != "none":
            raise ValueError(
                f"off_policy_loss {self.off_policy_loss} weighs each token by pi / mu itself: set "
                "off_policy_correction: none (else the advantages carry the sampler ratio twice)"
            )
        if self.importance_sampling_level != "token":
            raise ValueError(
                f"off_policy_loss {self.off_policy_loss} is per token: set importance_sampling_level: token"
            )

    def _check_loss_chunks(self) -> None:
        """``loss_chunk_tokens`` splits a micro-batch's loss into row chunks whose weighted sum is the unchunked
        loss; the settings below take a statistic over the whole micro-batch, which a chunk does not see."""
        if self.loss_chunk_tokens < 0:
            raise ValueError(f"loss_chunk_tokens must be >= 0 (0: no limit), got {self.loss_chunk_tokens}")
        if not self.loss_chunk_tokens:
            return
        whole_batch = {
            "top_entropy_quantile < 1": self.top_entropy_quantile < 1.0,
            "entropy_coef != 0": self.entropy_coef != 0.0,
            "use_adaptive_entropy": self.use_adaptive_entropy,
            "off_policy_loss: adaptive_trust_region": self.off_policy_loss == "adaptive_trust_region",
        }
        for name, on in whole_batch.items():
            if on:
                raise ValueError(
                    f"loss_chunk_tokens cannot be combined with {name} (it takes a statistic over the whole "
                    "micro-batch, which a chunk of rows does not see): set loss_chunk_tokens: 0 or drop it"
                )

    def rollout_config(self) -> RolloutConfig:
        """The agent loop of this run's episodes; ``.agent_protocol(self.max_new_tokens)`` is what its checkpoints
        record (``t1_protocol.json``, docs/protocol.md)."""
        return RolloutConfig(
            concurrency=self.rollout_concurrency,
            max_turns=self.max_turns,
            max_context_tokens=self.max_context_tokens,
            system_prompt=self.system_prompt,
            return_routed_experts=self.r3,
            truncated_turns=self.truncated_turns,
            protocol=self.protocol,
            context_policy=self.context_policy,
            keep_last_turns=self.keep_last_turns,
            summary_prompt=self.summary_prompt,
            max_segments=self.max_segments,
            agent=self.agent,
            harness=self.harness,
            harness_timeout_s=self.harness_timeout_s,
        )


def multi_cpu() -> bool:
    """Whether this is one of several processes (``torchrun``, ``accelerate launch``) on a machine without CUDA:
    accelerate then trains on CPU processes joined by gloo, but only if told ``cpu=True``."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available()

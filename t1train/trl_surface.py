"""The private TRL and transformers names t1's trainer depends on, pinned in one list.

``T1Trainer`` (``t1train/trainer.py``) is a ``trl.GRPOTrainer``. It uses public hooks where TRL has one: it overrides
``train``, ``compute_loss`` and ``save_model``, calls ``super().compute_loss`` for TRL's clipped policy loss, and
steps its critic from a ``TrainerCallback`` (``on_optimizer_step``). What t1 changes has no public hook in TRL 1.16:
the generation step (episodes in real envs instead of one completion per prompt), the rewards' plumbing, the
per-token log-probs TRL computes, and where checkpoints are written. For those it overrides or calls a private name.
:data:`SURFACE` lists each one: the class it belongs to, how t1 uses it, why, and the parameter names t1 relies on.

How t1 uses a name decides what a change breaks:

* ``overrides``: TRL or transformers calls t1's method, so the parameters must be exactly these (a parameter added
  upstream would reach t1's override and fail, or be dropped);
* ``calls``: t1 calls the library's method (often through ``super()``), so these parameters must still come first,
  in this order, and any parameter added after them must have a default;
* ``reads`` / ``writes``: an attribute t1 uses. A class attribute is checked here; an instance attribute only exists
  on a built trainer, so the test builds one and checks what t1 does with it (:data:`INSTANCE_ATTRIBUTES`).

:func:`check` compares the list with the installed TRL and transformers and returns one line per difference, naming
the method; ``tests/t1train/test_trl_surface.py`` fails with those lines, and also fails when t1train starts to use a
private TRL name that is not listed here. ``python -m t1train.trl_surface`` prints the same check for the installed
versions (exit status 1 on a difference), e.g. before trying a TRL release that ``pyproject.toml`` does not allow yet.

Not TRL's, although the names look alike: ``T1Trainer._rotate``, ``_value_loss``, ``_pad_batch``, ``_my_share``,
``_sum_over_processes`` and ``_EpisodeEvalCallback._evaluate`` are t1's own.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import sys
from dataclasses import dataclass

from packaging.requirements import Requirement

HOW = ("overrides", "calls", "reads", "writes")


@dataclass(frozen=True)
class PrivateName:
    """One private (or undocumented) library name ``T1Trainer`` relies on."""

    owner: str
    """Where it lives: a class (``trl.GRPOTrainer``) or a module (``trl.trainer.utils``), as an import path."""
    name: str
    """The attribute, method or function name."""
    how: str
    """``overrides``, ``calls``, ``reads`` or ``writes`` (see the module docstring)."""
    why: str
    """What t1 needs it for, and why no public hook does it."""
    params: tuple[str, ...] | None = None
    """A method's parameter names (``self`` included) t1 relies on; ``None`` for an attribute."""
    instance: bool = False
    """An attribute the library sets in ``__init__`` (checked on a built trainer, not here)."""
    applies: str | None = None
    """A version requirement (``transformers<5``): the entry is checked only where the installed package meets it."""

    def __post_init__(self):
        if self.how not in HOW:
            raise ValueError(f"{self.owner}.{self.name}: how must be one of {HOW}, got {self.how!r}")

    @property
    def label(self) -> str:
        return f"{self.owner}.{self.name}"


SURFACE: tuple[PrivateName, ...] = (
    PrivateName(
        "trl.GRPOTrainer",
        "_generate_and_score_completions",
        "overrides",
        "the rollout: plays each batch's episodes in real t1 envs and returns TRL's batch (prompt/completion ids, "
        "masks, advantages, importance weights); TRL's rollout_func returns completions only and computes the "
        "advantages itself (no critic, no per-turn rewards)",
        ("self", "inputs"),
    ),
    PrivateName(
        "trl.GRPOTrainer",
        "_calculate_rewards",
        "calls",
        "runs the env's passing-check count and the user's reward functions through TRL's reward plumbing (async "
        "functions, log_metric, rewards gathered from every process)",
        ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    ),
    PrivateName(
        "trl.GRPOTrainer",
        "_get_per_token_logps_and_entropies",
        "calls",
        "the policy's and the KL reference's log-probs of the sampled tokens, with TRL's temperature and fused "
        "lm-head handling (the loss computes its own with the same function); returns (logps, entropies, aux_loss)",
        (
            "self",
            "model",
            "input_ids",
            "attention_mask",
            "logits_to_keep",
            "batch_size",
            "compute_entropy",
            "compute_aux_loss",
        ),
    ),
    PrivateName(
        "trl.GRPOTrainer",
        "_metrics",
        "writes",
        "t1's metrics (t1/*, critic/*, off_policy/*) are appended to _metrics[mode][key] so that TRL's log() "
        "averages them with its own over the logging window and clears them",
        instance=True,
    ),
    PrivateName(
        "trl.GRPOTrainer",
        "_tag_names",
        "overrides",
        "the tags TRL writes into the model card of every checkpoint (adds 't1')",
    ),
    PrivateName(
        "transformers.Trainer",
        "_save_checkpoint",
        "overrides",
        "atomic checkpoints: super()._save_checkpoint writes into a hidden temp folder that is renamed to "
        "checkpoint-N once complete, so --resume never picks a half-written one (callbacks run after the save)",
        ("self", "model", "trial"),
    ),
    PrivateName(
        "transformers.Trainer",
        "_get_output_dir",
        "overrides",
        "points the save at the temp folder while _save_checkpoint runs (the only place the run folder is decided)",
        ("self", "trial"),
    ),
    PrivateName(
        "transformers.Trainer",
        "_rotate_checkpoints",
        "calls",
        "deletes checkpoints over save_total_limit in the run folder (transformers rotated inside the temp folder); "
        "transformers < 5 only, where trainer_utils.rotate_checkpoints does not exist",
        ("self", "use_mtime", "output_dir"),
        applies="transformers<5",
    ),
    # helpers t1 imports from TRL's submodules: public names, but not exported from `trl` nor documented
    PrivateName(
        "trl.trainer.utils",
        "pad",
        "calls",
        "pads the batch's rows the way TRL's own batches are padded (pad_to_multiple_of included)",
        ("tensors", "padding_value", "padding_side", "pad_to_multiple_of"),
    ),
    PrivateName(
        "trl.trainer.utils",
        "add_fused_lm_head",
        "calls",
        "patches t1's own KL reference model as TRL patches the policy (same log-prob path on both)",
        ("model", "temperature", "cast_lm_head_to_fp32"),
    ),
    PrivateName(
        "trl.trainer.utils",
        "use_adapter",
        "calls",
        "with LoRA, the KL reference is the policy under TRL's 'ref' adapter (or no adapter)",
        ("model", "adapter_name"),
    ),
    PrivateName(
        "trl.trainer.callbacks",
        "SyncRefModelCallback",
        "calls",
        "sync_ref_model for the reference t1 makes itself (beta > 0 without PEFT)",
        ("ref_model", "accelerator"),
    ),
    PrivateName(
        "transformers.trainer_utils",
        "rotate_checkpoints",
        "calls",
        "transformers >= 5: deletes checkpoints over save_total_limit in the run folder",
        ("output_dir", "save_total_limit", "best_model_checkpoint", "use_mtime"),
        applies="transformers>=5",
    ),
    # t1train/r3.py: routing replay during gradient-checkpoint recomputation
    PrivateName(
        "transformers.modeling_layers.GradientCheckpointingLayer",
        "_gradient_checkpointing_func",
        "writes",
        "R3 wraps each checkpointed layer's checkpoint function so that its recomputation replays the recorded "
        "experts; gradient_checkpointing_enable() sets it on the layer and the layer's __call__ calls it",
        instance=True,
    ),
)

INSTANCE_ATTRIBUTES: tuple[str, ...] = (
    "_metrics",
    "reward_weights",
    "reward_func_names",
    "num_generations",
    "scale_rewards",
    "pad_to_multiple_of",
    "temperature",
    "num_iterations",
    "beta",
    "ref_model",
)
"""Attributes TRL's ``__init__`` sets on the trainer that ``T1Trainer`` reads or writes: private or undocumented, so a
built trainer is checked for each (:func:`missing_instance_attributes`). transformers' training loop also sets
``current_gradient_accumulation_steps`` before each step (the critic's loss normalizer reads it); the test checks it
after a short run."""


def versions() -> str:
    """``trl X, transformers Y`` as installed."""
    return ", ".join(f"{pkg} {importlib.metadata.version(pkg)}" for pkg in ("trl", "transformers"))


def resolve(path: str):
    """The module or class at an import path: ``trl.trainer.utils``, ``trl.GRPOTrainer``..."""
    try:
        return importlib.import_module(path)
    except ImportError:
        module, _, attr = path.rpartition(".")
        if not module:
            raise
        return getattr(importlib.import_module(module), attr)


def applies(entry: PrivateName) -> bool:
    """Whether ``entry`` is needed with the installed packages (see :attr:`PrivateName.applies`)."""
    if entry.applies is None:
        return True
    requirement = Requirement(entry.applies)
    return requirement.specifier.contains(importlib.metadata.version(requirement.name), prereleases=True)


def _signature_problem(entry: PrivateName, target) -> str | None:
    """How ``target``'s parameters break t1's use of it, or None."""
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return f"is a {type(target).__name__}, not a function t1 can call"
    names = tuple(p.name for p in params)
    expected = entry.params
    if entry.how == "overrides":
        if names != expected:
            return f"parameters are now {names}, t1's override takes {expected}"
        return None
    if names[: len(expected)] != expected:
        return f"parameters are now {names}, t1 passes {expected}"
    required = [
        p.name
        for p in params[len(expected) :]
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if required:
        return f"has new required parameters {tuple(required)} that t1 does not pass"
    return None


def problem(entry: PrivateName) -> str | None:
    """One line saying how the installed libraries break ``entry``, or None when t1's use of it still fits."""
    if not applies(entry):
        return None
    where = f"{entry.label} ({versions()})"
    fix = f"t1 {entry.how} it: {entry.why}. Update T1Trainer and this entry in t1train/trl_surface.py"
    try:
        owner = resolve(entry.owner)
    except (ImportError, AttributeError) as e:
        return f"{where}: {entry.owner} cannot be imported ({e}). {fix}"
    if entry.instance:  # set in __init__: checked on a built trainer by the test
        return None
    if inspect.isclass(owner):
        found = any(entry.name in vars(base) for base in owner.__mro__)
    else:
        found = hasattr(owner, entry.name)
    if not found:
        return f"{where}: gone. {fix}"
    if entry.params is None:
        return None
    why = _signature_problem(
        entry, inspect.getattr_static(owner, entry.name) if inspect.isclass(owner) else getattr(owner, entry.name)
    )
    return f"{where}: {why}. {fix}" if why else None


def check(surface: tuple[PrivateName, ...] = SURFACE) -> list[str]:
    """One line per entry of ``surface`` the installed TRL / transformers break (``[]``: all still fit)."""
    return [line for line in (problem(e) for e in surface) if line is not None]


def missing_instance_attributes(trainer) -> list[str]:
    """One line per :data:`INSTANCE_ATTRIBUTES` name a built trainer lacks."""
    return [
        f"trl.GRPOTrainer.{name} ({versions()}): no longer set by the trainer's __init__; T1Trainer reads or "
        "writes it: update T1Trainer and INSTANCE_ATTRIBUTES in t1train/trl_surface.py"
        for name in INSTANCE_ATTRIBUTES
        if not hasattr(trainer, name)
    ]


def main() -> int:
    lines = check()
    for line in lines:
        print(line)
    if not lines:
        print(f"{len(SURFACE)} private names t1 relies on: all fit {versions()}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())

"""Rollout configuration: one YAML file → typed dataclasses, with errors that name the bad key.

Example file (``t1train/configs/rollout-tiny.yaml``)::

    engine:
      kind: hf              # hf (in-process transformers) | sglang (HTTP client)
      model: tiny           # "tiny" builds the tiny MoE; otherwise a local model folder
    env:
      tasks: [hello-file]
    episodes: 4
    sampling:
      max_new_tokens: 48
    rollout:
      max_turns: 6
    output: runs/rollouts.jsonl
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from t1train.engines.base import SamplingParams
from t1train.rollout import RolloutConfig


@dataclass
class EngineConfig:
    kind: str = "hf"
    """``hf`` (transformers in this process) or ``sglang`` (a running SGLang server)."""
    model: str = "tiny"
    """``tiny`` (the built-in tiny MoE) or a local model folder. With ``sglang`` only its tokenizer is loaded."""
    device: str = "cpu"
    """Device for ``hf``: ``cpu``, ``cuda``, ``cuda:1``..."""
    dtype: str = "auto"
    """Weights dtype for ``hf`` (``auto``, ``float32``, ``bfloat16``)."""
    max_batch_size: int = 32
    """``hf``: prompts per forward pass."""
    url: str = "http://127.0.0.1:30000"
    """``sglang``: the server's base URL."""
    max_concurrency: int = 64
    """``sglang``: requests in flight."""
    timeout: float = 600.0
    """``sglang``: seconds per request."""

    def __post_init__(self):
        if self.kind not in ("hf", "sglang"):
            raise ValueError(f"engine.kind must be 'hf' or 'sglang', got {self.kind!r}")


@dataclass
class EnvConfig:
    tasks: list[str] = field(default_factory=lambda: ["hello-file"])
    """Task ids; episodes cycle through them."""
    backend: str = "local"
    """Sandbox backend: ``local`` (bubblewrap) or ``docker``."""
    kwargs: dict = field(default_factory=dict)
    """Extra keyword arguments for ``gym.make("T1Terminal-v0", ...)`` (e.g. ``reward_mode``, ``max_turns``)."""


@dataclass
class RolloutRunConfig:
    """Everything ``t1train rollout`` needs."""

    engine: EngineConfig = field(default_factory=EngineConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    episodes: int = 4
    """Number of episodes to run."""
    seed: int = 0
    """Episode ``i`` resets with seed ``seed + i``; sampling is seeded from it too."""
    output: str = "runs/rollouts.jsonl"
    """Where to write the trajectories (JSONL)."""


def _build(cls, data, where: str):
    if not dataclasses.is_dataclass(cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'config'}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where or 'config'}: unknown key(s) {unknown}; known: {sorted(fields)}")
    kwargs = {}
    for name, value in data.items():
        ftype = fields[name].type
        sub = {"EngineConfig": EngineConfig, "EnvConfig": EnvConfig, "SamplingParams": SamplingParams,
               "RolloutConfig": RolloutConfig}.get(ftype if isinstance(ftype, str) else getattr(ftype, "__name__", ""))
        kwargs[name] = _build(sub, value, f"{where}.{name}".lstrip(".")) if sub else value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where or 'config'}: {err}") from err


def load_rollout_config(path: str | Path) -> RolloutRunConfig:
    """Read a rollout YAML file (see the module docstring)."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    return _build(RolloutRunConfig, data, "")


# ------------------------------------------------------------------------------------------------ training runs
@dataclass
class SFTSection:
    """The SFT warm-start of a training run (``t1train sft`` / before RL in ``t1train --config``)."""

    tasks: list[str] | None = None
    """Tasks whose oracle episodes to imitate (default: ``train.tasks``)."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Reset seeds of the oracle episodes."""
    repeats: int = 1
    """How many times each oracle episode appears in the dataset."""
    max_steps: int = 100
    learning_rate: float = 1e-3
    per_device_train_batch_size: int = 8
    output_dir: str | None = None
    """Where to save the SFT model (default: ``<train.output_dir>/sft``)."""


@dataclass
class EvalSection:
    """Held-out evaluation: before RL, after RL, and by ``t1train eval``."""

    tasks: list[str] = field(default_factory=list)
    """Tasks to evaluate on (default: ``train.eval_tasks``, else ``train.tasks``)."""
    seeds: list[int] = field(default_factory=lambda: [1000])
    """Reset seeds (sampling is seeded from them too)."""
    episodes_per_task: int = 4
    temperature: float = 1.0


@dataclass
class TrainRunConfig:
    """Everything ``t1train --config FILE.yaml`` needs: model, optional SFT warm-start, RL (``T1Config``), eval."""

    model: str = "tiny"
    """``tiny`` (the built-in tiny MoE) or a local model folder."""
    torch_threads: int | None = None
    """CPU threads for torch (1 is fastest for tiny models on a busy machine); None keeps torch's default."""
    sft: SFTSection | None = None
    train: dict = field(default_factory=dict)
    """``T1Config`` fields (TRL's ``GRPOConfig`` plus t1's; see ``t1train/trainer.py``)."""
    eval: EvalSection = field(default_factory=EvalSection)


def load_train_config(path: str | Path) -> TrainRunConfig:
    """Read a training YAML file (see ``configs/tiny-cpu.yaml``); errors name the bad key."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    known = {f.name for f in dataclasses.fields(TrainRunConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; known: {sorted(known)}")
    cfg = TrainRunConfig(model=data.get("model", "tiny"), torch_threads=data.get("torch_threads"),
                         train=dict(data.get("train") or {}))
    for name, cls in (("sft", SFTSection), ("eval", EvalSection)):
        if data.get(name) is not None:
            section = data[name]
            if not isinstance(section, dict):
                raise ValueError(f"{path}: {name}: expected a mapping")
            bad = sorted(set(section) - {f.name for f in dataclasses.fields(cls)})
            if bad:
                raise ValueError(f"{path}: {name}: unknown key(s) {bad}; known: "
                                 f"{sorted(f.name for f in dataclasses.fields(cls))}")
            setattr(cfg, name, cls(**section))
    return cfg


def build_t1_config(train: dict, **overrides):
    """``T1Config`` from the ``train:`` mapping; an unknown field is a ``ValueError`` that names it."""
    from t1train.trainer import T1Config

    fields = {f.name for f in dataclasses.fields(T1Config)}
    data = {**train, **overrides}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ValueError(f"train: unknown key(s) {unknown}; the fields are T1Config's (t1train/trainer.py)")
    return T1Config(**data)

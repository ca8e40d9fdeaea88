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

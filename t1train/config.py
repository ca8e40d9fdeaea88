"""Run configuration: one YAML file, checked against typed pydantic models.

Example rollout file (``t1train/configs/rollout-tiny.yaml``)::

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

Every value is checked against its field's type, so ``learning_rate: 1e-5`` (which PyYAML reads as a string)
arrives as the float 1e-05, and ``tasks: foo`` is an error rather than a list of characters. Unknown keys are
errors. Each problem is one line naming the file and the key, e.g.
``configs/x.yaml: train.learning_rate: Input should be a valid number, unable to parse string as a number``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from t1env.families import expand_refs
from t1env.options import EnvKwargs, check_env_options
from t1env.sandbox import BACKENDS
from t1env.task import TaskError, quote_key
from t1train.engines.base import SamplingParams
from t1train.rollout import RolloutConfig

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
LearningRate = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _expand(tasks: list[str] | None) -> list[str] | None:
    """``FAMILY@train:N`` / ``FAMILY@test:N`` → that split's first N instances (:func:`t1env.families.expand_refs`);
    a bad reference is a validation error on the field."""
    if tasks is None:
        return None
    try:
        return expand_refs(tasks)
    except TaskError as err:
        raise ValueError(str(err)) from None


# ------------------------------------------------------------------------------------------------ rollouts
class EngineConfig(_Section):
    """The engine that samples the model's turns."""

    kind: Literal["hf", "sglang"] = Field(
        "hf", description="hf (transformers in this process) or sglang (a running SGLang server)."
    )
    model: str = Field(
        "tiny",
        description="tiny (the built-in tiny MoE) or a local model folder. With sglang only its tokenizer is loaded.",
    )
    device: str = Field("cpu", description="Device for hf: cpu, cuda, cuda:1...")
    dtype: str = Field("auto", description="Weights dtype for hf (auto, float32, bfloat16).")
    max_batch_size: int = Field(32, ge=1, description="hf: prompts per forward pass.")
    url: str = Field("http://127.0.0.1:30000", description="sglang: the server's base URL.")
    max_concurrency: int = Field(64, ge=1, description="sglang: requests in flight.")
    timeout: Seconds = Field(600.0, description="sglang: seconds per request.")


class EnvConfig(_Section):
    """Which episodes to run, and how to make their envs."""

    tasks: list[str] = Field(
        default_factory=lambda: ["hello-file"],
        description="Task ids or task package paths; episodes cycle through them.",
    )
    backend: str = Field("local", description="Sandbox backend: local (bubblewrap) or docker.")
    kwargs: EnvKwargs = Field(
        default_factory=EnvKwargs,
        description='Extra gym.make("T1Terminal-v0", ...) '
        "arguments (reward_mode, max_turns, ...): t1env.options.EnvKwargs, typed.",
    )

    @field_validator("tasks")
    @classmethod
    def _some_tasks(cls, tasks: list[str]) -> list[str]:
        if not tasks:
            raise ValueError("is empty: give at least one task id or task package path")
        return tasks

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, backend: str) -> str:
        if backend not in BACKENDS:
            raise ValueError(f"must be one of {list(BACKENDS)}, got {backend!r}")
        return backend

    @model_validator(mode="after")
    def _kwargs_fit_the_backend(self):
        check_env_options(backend=self.backend, **self.kwargs.model_dump())  # docker_host needs backend: docker
        return self


class RolloutRunConfig(_Section):
    """Everything ``t1train rollout`` needs."""

    engine: EngineConfig = Field(default_factory=EngineConfig, description="The engine.")
    env: EnvConfig = Field(default_factory=EnvConfig, description="The episodes' tasks and env settings.")
    sampling: SamplingParams = Field(
        default_factory=SamplingParams, description="Sampling of every turn (t1train.engines.base.SamplingParams)."
    )
    rollout: RolloutConfig = Field(
        default_factory=RolloutConfig, description="The agent loop (t1train.rollout.RolloutConfig)."
    )
    episodes: int = Field(4, ge=1, description="Number of episodes to run.")
    seed: int = Field(0, description="Episode i resets with seed + i; sampling is seeded from it too.")
    output: str = Field(
        "runs/rollouts.jsonl", description="Where to write the trajectories (JSONL), one line per finished episode."
    )


def load_rollout_config(path: str | Path) -> RolloutRunConfig:
    """Read a rollout YAML file (see the module docstring); a bad file is a ``ValueError``, one line per problem."""
    data = _read_yaml(path)
    try:
        return RolloutRunConfig.model_validate(data)
    except ValidationError as err:
        raise ValueError(_describe(err, RolloutRunConfig, path)) from None


# ------------------------------------------------------------------------------------------------ training runs
class SFTSection(_Section):
    """The SFT warm-start of a training run (``t1train sft`` / before RL in ``t1train --config``)."""

    tasks: list[str] | None = Field(None, description="Tasks whose oracle episodes to imitate (default: train.tasks).")
    seeds: list[int] = Field(
        default_factory=lambda: [0], min_length=1, description="Reset seeds of the oracle episodes."
    )
    repeats: int = Field(1, ge=1, description="How many times each oracle episode appears in the dataset.")
    max_steps: int = Field(100, ge=1, description="SFT optimizer steps.")
    learning_rate: LearningRate = Field(1e-3, description="SFT learning rate.")
    lr_scheduler_type: Literal["constant", "linear", "cosine"] = Field(
        "constant",
        description="SFT learning-rate schedule (transformers' names): linear or cosine decay to 0 "
        "ends on an average of the data, not on its last batches (a demonstrator's 50/50 "
        "choices stay near 50/50).",
    )
    per_device_train_batch_size: int = Field(8, ge=1, description="Episodes per SFT batch.")
    turns: Literal["script", "lines"] = Field(
        "script",
        description="The oracle's assistant turns: the whole "
        "solve.sh in one turn (script), or one turn per line (lines).",
    )
    demos: bool = Field(
        False,
        description="Also imitate each task's demonstrations (solution/demos/*.sh: a "
        "demonstrator's episodes, flawed ones included, kept whatever they "
        "score) beside its oracle.",
    )
    output_dir: str | None = Field(None, description="Where to save the SFT model (default: <train.output_dir>/sft).")

    @field_validator("tasks")
    @classmethod
    def _some_tasks(cls, tasks: list[str] | None) -> list[str] | None:
        if tasks is not None and not tasks:
            raise ValueError("is empty: give task ids, or leave the key out to use train.tasks")
        return _expand(tasks)


class EvalSection(_Section):
    """Held-out evaluation: before RL, after RL, and by ``t1train eval``."""

    tasks: list[str] = Field(
        default_factory=list, description="Tasks to evaluate on (default: train.eval_tasks, else train.tasks)."
    )
    seeds: list[int] = Field(
        default_factory=lambda: [1000], min_length=1, description="Reset seeds (sampling is seeded from them too)."
    )
    episodes_per_task: int = Field(4, ge=1, description="Episodes per (task, seed).")

    @field_validator("tasks")
    @classmethod
    def _expand_tasks(cls, tasks: list[str]) -> list[str]:
        return _expand(tasks)

    temperature: float = Field(1.0, ge=0, allow_inf_nan=False, description="Sampling temperature (0: greedy).")


class TrainRunConfig(_Section):
    """Everything ``t1train --config FILE.yaml`` needs: model, optional SFT warm-start, RL (``T1Config``), eval."""

    model: str = Field("tiny", description="tiny (the built-in tiny MoE) or a local model folder.")
    torch_threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads for torch (1 is fastest for tiny models "
        "on a busy machine); null keeps torch's default.",
    )
    sft: SFTSection | None = Field(None, description="SFT warm-start on oracle episodes; leave out to skip it.")
    train: dict[str, Any] = Field(
        default_factory=dict,
        description="T1Config fields (TRL's GRPOConfig plus t1's; "
        "see t1train/trainer.py), each checked against "
        "its type.",
    )
    eval: EvalSection = Field(default_factory=EvalSection, description="Held-out evaluation.")


def load_train_config(path: str | Path) -> TrainRunConfig:
    """Read a training YAML file (see ``configs/tiny-cpu.yaml``); a bad file is a ``ValueError``, one line per
    problem. The ``train:`` values are converted to ``T1Config``'s field types."""
    data = _read_yaml(path)
    problems = []
    try:
        cfg = TrainRunConfig.model_validate(data)
    except ValidationError as err:
        problems.append(_describe(err, TrainRunConfig, path))
        cfg = None
    train = data.get("train")
    if isinstance(train, dict):
        converted, bad = _check_train(train)
        problems += [f"{path}: train.{line}" for line in bad]
        if cfg is not None:
            cfg.train = converted
    if problems:
        raise ValueError("\n".join(problems))
    return cfg


def build_t1_config(train: dict, **overrides):
    """``T1Config`` from the ``train:`` mapping; an unknown field or a bad value is a ``ValueError`` naming it."""
    from t1train.trainer_config import T1Config  # heavy: torch and TRL (T1Config extends GRPOConfig)

    data = {**train, **overrides}
    converted, bad = _check_train(data)
    if bad:
        raise ValueError("\n".join(f"train.{line}" for line in bad))
    try:
        return T1Config(**converted)
    except ValueError as err:  # T1Config's own checks (e.g. an unknown algorithm)
        raise ValueError(f"train: {err}") from None


# ------------------------------------------------------------------------------------------------ checking
BUILTIN_CONFIGS = Path(__file__).resolve().parent / "configs"


def builtin_config(path: str | Path) -> Path:
    """``path``, or where it names a config shipped with t1train (``tiny-cpu``, ``rollout-tiny``: the files in
    ``t1train/configs/``, also inside an installed wheel) and no such file exists here, that file."""
    path = Path(path)
    if not path.exists() and path.parent == Path("."):
        shipped = BUILTIN_CONFIGS / (path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml")
        if shipped.is_file():
            return shipped
    return path


def _read_yaml(path: str | Path) -> dict:
    import yaml

    path = builtin_config(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        # a ReaderError (a control character) has no problem and spreads its position over two lines
        problem = getattr(err, "problem", None) or " ".join(str(err).split())
        raise ValueError(f"{path}: not valid YAML{line}: {problem}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except RecursionError:  # PyYAML's composer recurses once per nested list or mapping
        raise ValueError(f"{path}: not valid YAML: lists or mappings nested too deeply") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: is a folder, not a YAML file") from None
    except FileNotFoundError:
        shipped = ", ".join(sorted(p.stem for p in BUILTIN_CONFIGS.glob("*.yaml")))
        raise ValueError(f"{path}: no such file (configs shipped with t1train, by name: {shipped})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}")
    return data


YAML_SPELLING = {"async": "async_rl"}  # a YAML key that is a Python keyword -> its T1Config field


@cache
def _t1config_types() -> dict[str, Any]:
    from t1train.trainer_config import T1Config  # heavy: torch and TRL (T1Config extends GRPOConfig)

    hints = typing.get_type_hints(T1Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(T1Config) if f.init}


def _check_train(train: dict) -> tuple[dict, list[str]]:
    """Convert each ``train:`` value to its ``T1Config`` field's type: ``(converted, ["key: problem", ...])``."""
    types = _t1config_types()
    converted, problems = {}, []
    for key, value in train.items():
        key = YAML_SPELLING.get(key, key)
        if key not in types:
            problems.append(f"{quote_key(key)}: {_unknown(str(key), list(types))}")
            continue
        try:
            converted[key] = TypeAdapter(types[key]).validate_python(value)
        except ValidationError as err:
            problems.append(f"{quote_key(key)}: {_message(err.errors()[0])}")
            continue
        if isinstance(converted[key], float) and not math.isfinite(converted[key]):
            problems.append(f"{quote_key(key)}: must be a finite number, got {value!r}")
    return converted, problems


def _describe(err: ValidationError, root: type, path: str | Path) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(quote_key(p) for p in e["loc"]) or "(top level)"  # a key with a line break is quoted
        if e["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            msg = _unknown(str(e["loc"][-1]), _known_keys(root, e["loc"][:-1]))
        else:
            msg = _message(e)
        lines.append(f"{path}: {loc}: {msg}")
    return "\n".join(lines)


def _message(e: dict) -> str:
    msg = e["msg"]
    return msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg


def _unknown(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listing = (
        f" (known: {', '.join(known)})" if len(known) <= 20 else " (see the T1Config fields in t1train/trainer.py)"
    )
    return f"unknown key{hint}{listing}"


def _known_keys(root: type, loc: tuple) -> list[str]:
    """The keys the section at ``loc`` accepts (pydantic model or dataclass)."""
    cls: Any = root
    for part in loc:
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            cls = cls.model_fields[part].annotation
        elif dataclasses.is_dataclass(cls):
            cls = typing.get_type_hints(cls)[part]
        for arg in typing.get_args(cls):  # Optional[Section] -> Section
            if isinstance(arg, type) and (issubclass(arg, BaseModel) or dataclasses.is_dataclass(arg)):
                cls = arg
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return list(cls.model_fields)
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return []

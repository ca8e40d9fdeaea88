"""The env's options, typed once: what ``gym.make("T1Terminal-v0", ...)`` takes besides the choice of tasks.

:class:`EnvOptions` is the one model of those keyword arguments. ``TerminalEnv`` checks its arguments with
:func:`check_env_options` (so a bad value fails with the same one-line message everywhere); the trainer's YAML
``env.kwargs`` and ``train.env_kwargs`` are :class:`EnvKwargs` (every option but the backend, which the YAML
names beside them), so an unknown or mistyped key is an error naming the key before any model loads; and
``t1env eval`` builds its envs' arguments through :class:`EnvOptions` too.

Example:
    >>> EnvOptions(backend="local", reward_mode="fraction", max_turns=12).kwargs()
    {'reward_mode': 'fraction', 'max_turns': 12}
    >>> try:
    ...     EnvKwargs(max_turns=0)
    ... except ValueError as e:  # pydantic's ValidationError is a ValueError
    ...     print(e.errors()[0]["msg"])
    Value error, max_turns must be an integer >= 1 (or None: the task's), got 0
"""

from __future__ import annotations

import numbers
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from t1env.episode.shell import DEFAULT_MAX_OUTPUT
from t1env.episode.verify import REWARD_MODES
from t1env.sandbox import BACKENDS
from t1env.spaces import brief, is_seconds


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def check_env_options(
    backend: str = "local",
    reward_mode: str = "count",
    max_turns: Any = None,
    command_timeout: Any = None,
    agent_timeout: Any = None,
    verifier_timeout: Any = None,
    max_output_bytes: Any = DEFAULT_MAX_OUTPUT,
    verify_on_truncate: Any = True,
    prestart: Any = True,
    docker_host: Any = None,
    prepare_verifier: Any = True,
    **_: Any,
) -> None:
    """Raise ``ValueError`` (one line: the option, what it takes, what it got) for the first bad option."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {brief(backend)}")
    if reward_mode not in REWARD_MODES:
        raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {brief(reward_mode)}")
    if max_turns is not None and (not _is_int(max_turns) or max_turns < 1):
        raise ValueError(f"max_turns must be an integer >= 1 (or None: the task's), got {brief(max_turns)}")
    for name, value in (
        ("command_timeout", command_timeout),
        ("agent_timeout", agent_timeout),
        ("verifier_timeout", verifier_timeout),
    ):
        if value is not None and not is_seconds(value):
            raise ValueError(f"{name} must be a finite number of seconds > 0 (or None: the task's), got {brief(value)}")
    if not _is_int(max_output_bytes) or max_output_bytes < 1:
        raise ValueError(f"max_output_bytes must be an integer >= 1, got {brief(max_output_bytes)}")
    for name, value in (
        ("verify_on_truncate", verify_on_truncate),
        ("prestart", prestart),
        ("prepare_verifier", prepare_verifier),
    ):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {brief(value)}")
    if docker_host is not None and (not isinstance(docker_host, str) or backend != "docker"):
        raise ValueError(
            f"docker_host takes an engine URL (str) with backend='docker', got {brief(docker_host)} "
            f"with backend={brief(backend)}"
        )


class EnvKwargs(BaseModel):
    """Every option of ``T1Terminal-v0`` but the backend (docs/environment.md has each one's meaning)."""

    model_config = ConfigDict(extra="forbid")

    reward_mode: str = "count"
    max_turns: int | None = None
    command_timeout: float | None = None
    agent_timeout: float | None = None
    verifier_timeout: float | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT
    verify_on_truncate: bool = True
    prestart: bool = True
    prepare_verifier: bool = True
    docker_host: str | None = None
    task_dirs: list[str] | None = None

    @model_validator(mode="after")
    def _checked(self):
        # EnvOptions has its backend; EnvKwargs has none yet (the YAML names it beside them, and EnvConfig checks the
        # pair), so docker_host is judged here as if the backend were docker and only its type is checked
        check_env_options(**{**self.model_dump(), "backend": getattr(self, "backend", "docker")})
        return self

    def kwargs(self) -> dict[str, Any]:
        """The options set to something other than their default, as ``gym.make`` keyword arguments."""
        return self.model_dump(exclude_defaults=True)


class EnvOptions(EnvKwargs):
    """:class:`EnvKwargs` and the sandbox backend: everything but the tasks that ``gym.make`` takes."""

    backend: str = "local"

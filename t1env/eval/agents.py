"""The agents ``t1env eval`` can run, and the small protocol a user's own agent implements.

What the model agents say and hear is the agent protocol of :mod:`t1env.agent.protocol` (``docs/protocol.md``):
the one ``t1train`` trains with, so a checkpoint is evaluated on its own prompts.

The protocol of your own agent (``--agent module:Class``): one agent object per trial, made as ``Class(task)`` with the
:class:`~t1env.task.Task` (its ``instruction``, ``spec.limits`` and ``spec.id`` are the useful parts), then:

* ``act(observation: str, info: dict) -> action`` — an env action: a command string, ``{"command": str,
  "timeout": s}``, ``{"keys": [...], "wait": s}`` or ``{"submit": True}`` (see :mod:`t1env.env`). The first call
  gets the instruction and ``reset()``'s info; later calls get the last observation and ``step()``'s info;
* ``last_turn`` (optional attribute) — a dict describing the action just returned, recorded in the trajectory:
  ``message``, ``reasoning``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``;
* ``close()`` (optional) — called once when the trial ends, however it ends.

Example:
    >>> from t1env.registry import get_task
    >>> agent = make_agent("noop", get_task("hello-file"), EvalOptions())
    >>> agent.act("instruction", {})
    {'submit': True}
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from t1env.agents import NopAgent, OracleAgent
from t1env.task import Task

BUILTIN_AGENTS = ("oracle", "noop", "openai", "hf")


class EvalAgent(Protocol):
    def act(self, observation: str, info: dict) -> Any: ...


@dataclass
class EvalOptions:
    """What the model agents need (the built-in oracle and no-op agents ignore it)."""

    model: str | None = None
    "model name sent to the server (``--model``)"
    base_url: str | None = None
    "the OpenAI-compatible server's base URL, e.g. http://127.0.0.1:8000/v1 (``--base-url``)"
    api_key_env: str = "OPENAI_API_KEY"
    "environment variable holding the API key (``--api-key-env``); a local server takes any key"
    temperature: float = 0.0
    "sampling temperature"
    max_tokens: int | None = None
    "completion tokens per model call (default: a checkpoint's t1_protocol.json for --agent hf, else 1024)"
    max_observation_chars: int = 8000
    "observation characters sent to the model per turn (head and tail kept, the middle dropped)"
    tool_mode: str = "auto"
    "``auto`` (tool calling, falling back to plain text when the server refuses tools), ``tools`` or ``text``"
    protocol: str | None = None
    """agent protocol, ``text`` or ``tools`` (``docs/protocol.md``; ``--protocol``). Default: for ``--agent hf`` the
    one the checkpoint was trained with (its ``t1_protocol.json``), else ``text``; for ``--agent openai``
    ``tool_mode``"""
    max_retries: int = 5
    "retries of a model call on 429/5xx/connection errors, with exponential backoff"
    request_timeout: float = 120.0
    "seconds per model request"
    price_prompt_per_mtok: float = 0.0
    "USD per million prompt tokens, for the cost estimate (0: cost not counted)"
    price_completion_per_mtok: float = 0.0
    "USD per million completion tokens"


def load_class(spec: str) -> type:
    """``module:Class`` → the class; a bad spec raises ``ValueError`` saying what was wrong."""
    module_name, sep, cls_name = spec.partition(":")
    if not sep or not module_name or not cls_name:
        raise ValueError(f"--agent {spec!r}: expected one of {', '.join(BUILTIN_AGENTS)} or module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--agent {spec!r}: cannot import {module_name!r} ({e})") from None
    cls = getattr(module, cls_name, None)
    if cls is None or not hasattr(cls, "act"):
        raise ValueError(f"--agent {spec!r}: {module_name} has no class {cls_name!r} with an act() method")
    return cls


def check_agent_spec(spec: str, options: EvalOptions) -> None:
    """Fail early (before any sandbox starts) on an agent that cannot be made."""
    if spec == "openai":
        if not options.model:
            raise ValueError("--agent openai needs --model NAME (and --base-url URL for a non-default server)")
        from t1env.eval.openai_agent import require_openai, tool_mode

        require_openai()
        tool_mode(options)
    elif spec == "hf":
        if not options.model:
            raise ValueError("--agent hf needs --model PATH (a checkpoint folder)")
        from t1env.eval.hf_agent import agent_protocol, load

        load(options.model)  # a bad checkpoint fails here, once
        agent_protocol(options)  # and so does a bad t1_protocol.json or --protocol
    elif spec not in BUILTIN_AGENTS:
        load_class(spec)


def make_agent(spec: str, task: Task, options: EvalOptions) -> EvalAgent:
    """A fresh agent for one trial of ``task``."""
    if spec == "oracle":
        return OracleAgent(task)
    if spec == "noop":
        return NopAgent()
    if spec == "openai":
        from t1env.eval.openai_agent import OpenAIAgent

        return OpenAIAgent(task, options)
    if spec == "hf":
        from t1env.eval.hf_agent import HFAgent

        return HFAgent(task, options)
    return load_class(spec)(task)

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

from t1env.agent.reference import NopAgent, OracleAgent
from t1env.eval.hf_agent import HFAgent, agent_protocol, load
from t1env.eval.openai_agent import OpenAIAgent, require_openai, tool_mode
from t1env.eval.options import EvalAgent, EvalOptions
from t1env.task import Task

BUILTIN_AGENTS = ("oracle", "noop", "openai", "hf")
__all__ = ["BUILTIN_AGENTS", "EvalAgent", "EvalOptions", "check_agent_spec", "load_class", "make_agent"]


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
        require_openai()
        tool_mode(options)
    elif spec == "hf":
        if not options.model:
            raise ValueError("--agent hf needs --model PATH (a checkpoint folder)")
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
        return OpenAIAgent(task, options)
    if spec == "hf":
        return HFAgent(task, options)
    return load_class(spec)(task)

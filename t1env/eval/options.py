"""What ``t1env eval``'s model agents are configured with, and the protocol every eval agent implements.

Its own module, below :mod:`t1env.eval.agents` (which makes agents) and the agents themselves
(:mod:`t1env.eval.hf_agent`, :mod:`t1env.eval.openai_agent`), so that each of them imports it and none imports another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


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
    context_policy: str | None = None
    """``--agent hf``: what a trial does when the next turn would not fit the context (``end``,
    ``drop_observations``, ``summary``; ``--context-policy``). Default: the checkpoint's ``t1_protocol.json``, else
    ``end``"""
    max_context_tokens: int | None = None
    "``--agent hf``: the context budget in tokens (default: the checkpoint's ``t1_protocol.json``, else none)"
    max_retries: int = 5
    "retries of a model call on 429/5xx/connection errors, with exponential backoff"
    request_timeout: float = 120.0
    "seconds per model request"
    price_prompt_per_mtok: float = 0.0
    "USD per million prompt tokens, for the cost estimate (0: cost not counted)"
    price_completion_per_mtok: float = 0.0
    "USD per million completion tokens"

"""An agent backed by a model behind an OpenAI-compatible chat server (vLLM, SGLang, ``transformers serve``,
Ollama, a hosted API), on the official ``openai`` client (the ``eval`` extra: ``pip install 't1[eval]'``).

It speaks the agent protocol of :mod:`t1env.agent.protocol` (``docs/protocol.md``), the one ``t1train`` trains with:

* ``--protocol tools`` (native tool calling): the :data:`~t1env.agent.protocol.TOOLS` ``bash`` (``command``,
  optional ``timeout``), ``keys`` (keystrokes for full-screen programs: ``keys``, optional ``wait``) and ``submit``.
  Each observation goes back as the ``tool`` message of its call; several calls in one reply run in order;
* ``--protocol text``: the model writes one action in its reply (a fenced ```` ```bash ```` block, a
  ``<tool_call>``, or ``SUBMIT`` on a line of its own); the observation goes back as a user message;
* by default (``auto``), tools while the server accepts them, and text after it refuses a request with tools
  with a 400 error. A ``tools`` reply with no tool call is read as text too (many servers leave calls in the
  content).

Observations are the protocol's (the output, head and tail kept past ``max_observation_chars``, then
``[exit code: N]``). A reply with no valid action is answered with what was wrong and the action format, and counts
as a turn like any other; at the env's turn limit (``--max-turns``, else the task's ``limits.max_turns``) the trial
is submitted.

Retries: the client retries 408/409/429/5xx and connection errors ``max_retries`` times with exponential backoff
(and honours ``Retry-After``). Tokens come from each response's ``usage``; cost is ``usage × price`` when prices
are given.

Example:
    >>> tool_call_action("bash", '{"command": "ls"}')
    {'command': 'ls'}
"""

from __future__ import annotations

import os
from typing import Any

from t1env.agent.protocol import NONE, TOOLS_HELP, Protocol, parse_tool_call
from t1env.eval.options import EvalOptions
from t1env.task import Task

DEFAULT_MAX_TOKENS = 1024
TOOL_MODES = ("auto", "tools", "text")


def require_openai() -> None:
    try:
        import openai  # noqa: F401
    except ImportError:
        raise ValueError("--agent openai needs the openai package: pip install 't1[eval]'") from None


def tool_call_action(name: str, arguments: str | dict) -> dict:
    """The env action for one tool call; malformed arguments raise ``ValueError`` (sent back to the model)."""
    return parse_tool_call(name, arguments).to_env()


def tool_mode(options: EvalOptions) -> str:
    """``auto``, ``tools`` or ``text``: ``--protocol`` when given, else ``--tool-mode``."""
    mode = options.protocol or options.tool_mode
    if mode not in TOOL_MODES:
        raise ValueError(f"--protocol must be text or tools (or --tool-mode auto), got {mode!r}")
    return mode


class OpenAIAgent:
    """One trial's conversation with the model (see the module docstring)."""

    def __init__(self, task: Task, options: EvalOptions, client: Any = None):
        require_openai()
        from openai import OpenAI  # the eval extra: only when an OpenAI-compatible agent runs

        self.task, self.options = task, options
        self.client = client or OpenAI(
            base_url=options.base_url,
            api_key=os.environ.get(options.api_key_env) or "not-needed",
            max_retries=options.max_retries,
            timeout=options.request_timeout,
        )
        self.mode = tool_mode(options)
        self.protocol = Protocol(
            name="text" if self.mode == "text" else "tools",
            max_observation_chars=options.max_observation_chars,
            max_new_tokens=options.max_tokens or DEFAULT_MAX_TOKENS,
        )
        self.messages: list[dict] = []
        self.queue: list[tuple[str | None, dict]] = []  # (tool call id, action) not yet played
        self.waiting_call: str | None = None  # the tool call whose observation comes with the next act()
        self.last_turn: dict | None = None
        self.env_max_turns: int | None = None  # the env's turn limit (reset's info): the default of the protocol's
        self.calls = 0
        self.turns = 0  # model replies: every one counts towards the turn limit, one without an action too

    @property
    def use_tools(self) -> bool:
        return self.protocol.name == "tools"

    # -- the protocol -------------------------------------------------------------------------
    def act(self, observation: str, info: dict) -> dict:
        if not self.messages:
            self.messages = self.protocol.first_messages(observation)
            self.env_max_turns = info.get("max_turns") or self.task.spec.limits.max_turns
        elif self.waiting_call is not None:
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": self.waiting_call,
                    "content": self.protocol.observation(observation, info),
                }
            )
        else:
            self.messages.append(self.protocol.observation_message(observation, info))
        self.waiting_call = None
        if self.queue:
            self.last_turn = {}  # a later call of the same reply: its tokens were counted with the first
        else:
            self._ask_model()
        call_id, action = self.queue.pop(0)
        self.waiting_call = call_id
        assert self.last_turn is not None
        self.last_turn["tool_call_id"] = call_id
        return action

    # -- internals ------------------------------------------------------------------------------
    def _complete(self) -> Any:
        from openai import BadRequestError  # the eval extra (imported above)

        kwargs = {
            "model": self.options.model,
            "messages": self.messages,
            "temperature": self.options.temperature,
            "max_tokens": self.protocol.max_new_tokens,
        }
        if self.use_tools:
            try:
                return self.client.chat.completions.create(tools=self.protocol.tools, **kwargs)
            except BadRequestError:
                if self.mode == "tools":
                    raise
                # the server refuses tools: the text protocol from here on, its system prompt included
                self.protocol = self.protocol.replace(name="text")
                self.messages[0] = {"role": "system", "content": self.protocol.system}
        return self.client.chat.completions.create(**kwargs)

    def _account(self, response: Any, turn: dict) -> None:
        usage = getattr(response, "usage", None)
        p = int(getattr(usage, "prompt_tokens", 0) or 0)
        c = int(getattr(usage, "completion_tokens", 0) or 0)
        turn["prompt_tokens"] = turn.get("prompt_tokens", 0) + p
        turn["completion_tokens"] = turn.get("completion_tokens", 0) + c
        cost = (p * self.options.price_prompt_per_mtok + c * self.options.price_completion_per_mtok) / 1e6
        turn["cost_usd"] = turn.get("cost_usd", 0.0) + cost

    def _ask_model(self) -> None:
        """Call the model until its reply holds an action (or the turn limit is reached); fill ``self.queue`` and
        ``self.last_turn``."""
        turn: dict = {}
        texts: list[str] = []
        while not self.queue:
            if self.protocol.at_turn_limit(self.turns, self.env_max_turns):
                texts.append(f"[t1] {self.turns} turns, the turn limit: the trial is submitted")
                self.queue.append((None, {"submit": True}))
                break
            response = self._complete()
            self.calls += 1
            self.turns += 1
            self._account(response, turn)
            msg = response.choices[0].message
            content = msg.content or ""
            texts.append(content)
            reasoning = getattr(msg, "reasoning_content", None)
            if reasoning:
                turn["reasoning"] = reasoning
            calls = list(msg.tool_calls or [])
            if calls:
                self._tool_calls(content, calls, texts)
                continue
            self.messages.append({"role": "assistant", "content": content})
            action = self.protocol.parse(content)
            if action.kind != NONE:
                self.queue.append((None, action.to_env()))
            elif self.use_tools:
                self.messages.append({"role": "user", "content": TOOLS_HELP})
            else:
                self.messages.append(self.protocol.answer_message(action))
        turn["message"] = "\n\n".join(t for t in texts if t)
        self.last_turn = turn

    def _tool_calls(self, content: str, calls: list, texts: list[str]) -> None:
        """Queue a reply's tool calls; if one is invalid, answer every call of the reply (none ran)."""
        self.messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"},
                    }
                    for c in calls
                ],
            }
        )
        parsed, problems = [], {}
        for c in calls:
            try:
                parsed.append((c.id, tool_call_action(c.function.name, c.function.arguments)))
            except ValueError as e:
                problems[c.id] = str(e)
        if not problems:
            self.queue.extend(parsed)
            return
        for c in calls:
            why = problems.get(c.id, "not run: another call in this reply was invalid")
            self.messages.append({"role": "tool", "tool_call_id": c.id, "content": f"[t1] {why}"})
        texts.append("[t1] invalid tool call: " + "; ".join(problems.values()))

"""An agent backed by a model behind an OpenAI-compatible chat server (vLLM, SGLang, ``transformers serve``,
Ollama, a hosted API), on the official ``openai`` client (the ``eval`` extra: ``pip install 't1[eval]'``).

How it talks to the model:

* **tool calling** (``tool_mode="tools"``, or ``"auto"`` while the server accepts tools): three tools, ``bash``
  (``command``, optional ``timeout``), ``keys`` (keystrokes for full-screen programs: ``keys``, optional ``wait``)
  and ``submit``. Each observation goes back as the ``tool`` message of its call; several calls in one reply run in
  order;
* **plain text** (``tool_mode="text"``, or ``"auto"`` after the server refuses a request with tools with a 400
  error): the model puts one command in a fenced block (```` ```bash ````), or writes ``SUBMIT`` on a line of its
  own; the observation goes back as a user message. A reply with neither gets one reminder; a second such reply
  in a row ends the trial (submit), recorded in the trajectory;
* a ``tools``-mode reply with no tool call is read as plain text too (many servers leave calls in the content).

Retries: the client retries 408/409/429/5xx and connection errors ``max_retries`` times with exponential backoff
(and honours ``Retry-After``). Tokens come from each response's ``usage``; cost is ``usage × price`` when prices
are given. Observations over ``max_observation_chars`` keep their head and tail with a note of what was cut.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from t1env.eval.agents import EvalOptions
from t1env.task import Task

TOOLS = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run one shell command in the task's terminal and see its output.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "the command line"},
            "timeout": {"type": "number", "description": "seconds to wait for it (optional)"}},
            "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "keys", "description": "Type keys into a full-screen program (e.g. ['q'], ['Escape', ':wq', 'Enter']).",
        "parameters": {"type": "object", "properties": {
            "keys": {"type": "array", "items": {"type": "string"}},
            "wait": {"type": "number", "description": "seconds to wait before reading the screen (optional)"}},
            "required": ["keys"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "Finish: your work is checked now. Call it when the task is done.",
        "parameters": {"type": "object", "properties": {}}}},
]

SYSTEM_PROMPT = """You are operating a Linux terminal to complete a task. The task's files are in the working \
directory. Work step by step: run a command, read its output, decide the next one. When the task is done, submit.
{how}"""

HOW_TOOLS = "Use the tools: `bash` runs a command, `keys` types into full-screen programs, `submit` finishes."
HOW_TEXT = """Reply with exactly one command in a fenced block, like:
```bash
ls -la
```
When the task is done, reply with the single word SUBMIT on a line of its own."""

REMINDER = "Your reply had no command. Put one command in a ```bash fenced block, or write SUBMIT to finish."
_FENCE = re.compile(r"```[ \t]*(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_SUBMIT = re.compile(r"^\s*SUBMIT\s*$", re.MULTILINE)


def require_openai() -> None:
    try:
        import openai  # noqa: F401
    except ImportError:
        raise ValueError("--agent openai needs the openai package: pip install 't1[eval]'") from None


def truncate_observation(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters, saying how much of the middle was cut.

    Example:
        >>> truncate_observation("a" * 10 + "b" * 10, 12)
        'aaaaaa\\n[... 8 characters cut ...]\\nbbbbbb'
    """
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


def parse_text_action(content: str) -> dict | None:
    """The action in a plain-text reply: the first fenced block's command, else ``SUBMIT``, else ``None``.

    Example:
        >>> parse_text_action("I'll list.\\n```bash\\nls -la\\n```")
        {'command': 'ls -la'}
        >>> parse_text_action("All done.\\nSUBMIT")
        {'submit': True}
    """
    m = _FENCE.search(content or "")
    if m and m.group(1).strip():
        return {"command": m.group(1).strip()}
    if _SUBMIT.search(content or ""):
        return {"submit": True}
    return None


def tool_call_action(name: str, arguments: str | dict) -> dict:
    """The env action for one tool call; malformed arguments raise ``ValueError`` (sent back to the model)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as e:
            raise ValueError(f"arguments are not valid JSON: {e}") from None
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")  # noqa: TRY004 - told to the model, like the others
    if name == "submit":
        return {"submit": True}
    if name == "bash":
        if not isinstance(arguments.get("command"), str) or not arguments["command"].strip():
            raise ValueError("bash needs a non-empty string 'command'")
        action = {"command": arguments["command"]}
        if isinstance(arguments.get("timeout"), (int, float)) and arguments["timeout"] > 0:
            action["timeout"] = float(arguments["timeout"])
        return action
    if name == "keys":
        keys = arguments.get("keys")
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise ValueError("keys needs a non-empty list of strings 'keys'")
        action = {"keys": keys}
        if isinstance(arguments.get("wait"), (int, float)) and arguments["wait"] > 0:
            action["wait"] = float(arguments["wait"])
        return action
    raise ValueError(f"unknown tool {name!r}: use bash, keys or submit")


class OpenAIAgent:
    """One trial's conversation with the model (see the module docstring)."""

    def __init__(self, task: Task, options: EvalOptions, client: Any = None):
        require_openai()
        from openai import OpenAI

        self.task, self.options = task, options
        self.client = client or OpenAI(
            base_url=options.base_url, api_key=os.environ.get(options.api_key_env) or "not-needed",
            max_retries=options.max_retries, timeout=options.request_timeout,
        )
        if options.tool_mode not in ("auto", "tools", "text"):
            raise ValueError(f"--tool-mode must be auto, tools or text, got {options.tool_mode!r}")
        self.use_tools = options.tool_mode != "text"
        self.messages: list[dict] = []
        self.queue: list[tuple[str | None, dict]] = []  # (tool call id, action) not yet played
        self.waiting_call: str | None = None  # the tool call whose observation comes with the next act()
        self.last_turn: dict | None = None
        self.calls = 0

    # -- the protocol -------------------------------------------------------------------------
    def act(self, observation: str, info: dict) -> dict:
        obs = truncate_observation(observation, self.options.max_observation_chars)
        if not self.messages:
            how = HOW_TOOLS if self.use_tools else HOW_TEXT
            self.messages = [{"role": "system", "content": SYSTEM_PROMPT.format(how=how)},
                             {"role": "user", "content": obs}]
        elif self.waiting_call is not None:
            self.messages.append({"role": "tool", "tool_call_id": self.waiting_call, "content": obs})
        else:
            self.messages.append({"role": "user", "content": f"Output:\n```\n{obs}\n```"})
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
        from openai import BadRequestError

        kwargs = {"model": self.options.model, "messages": self.messages, "temperature": self.options.temperature,
                  "max_tokens": self.options.max_tokens}
        if self.use_tools:
            try:
                return self.client.chat.completions.create(tools=TOOLS, **kwargs)
            except BadRequestError:
                if self.options.tool_mode == "tools":
                    raise
                self.use_tools = False  # the server refuses tools: plain text from here on
                self.messages[0] = {"role": "system", "content": SYSTEM_PROMPT.format(how=HOW_TEXT)}
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
        """Call the model until its reply holds an action; fill ``self.queue`` and ``self.last_turn``."""
        turn: dict = {}
        texts: list[str] = []
        for reminder in (False, True):
            response = self._complete()
            self.calls += 1
            self._account(response, turn)
            msg = response.choices[0].message
            content = msg.content or ""
            texts.append(content)
            reasoning = getattr(msg, "reasoning_content", None)
            if reasoning:
                turn["reasoning"] = reasoning
            calls = list(msg.tool_calls or [])
            if calls:
                self.messages.append({"role": "assistant", "content": content, "tool_calls": [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"}}
                    for c in calls]})
                parsed, problems = [], {}
                for c in calls:
                    try:
                        parsed.append((c.id, tool_call_action(c.function.name, c.function.arguments)))
                    except ValueError as e:
                        problems[c.id] = str(e)
                if not problems:
                    self.queue.extend(parsed)
                    break
                # answer every call of the reply (none ran) and ask again
                for c in calls:
                    why = problems.get(c.id, "not run: another call in this reply was invalid")
                    self.messages.append({"role": "tool", "tool_call_id": c.id, "content": f"[t1] {why}"})
                texts.append("[t1] invalid tool call: " + "; ".join(problems.values()))
                if reminder:
                    self.queue.append((None, {"submit": True}))
                    texts.append("[t1] two replies without a valid action: the trial is submitted")
                    break
                continue
            self.messages.append({"role": "assistant", "content": content})
            action = parse_text_action(content)
            if action is not None:
                self.queue.append((None, action))
                break
            if reminder:
                texts.append("[t1] two replies without a command: the trial is submitted")
                self.queue.append((None, {"submit": True}))
                break
            self.messages.append({"role": "user", "content": REMINDER})
        turn["message"] = "\n\n".join(t for t in texts if t)
        self.last_turn = turn

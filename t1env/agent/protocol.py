"""The agent protocol: what a model sees and what it may answer, defined once for every harness.

A policy trained with ``t1train`` must be evaluated on the prompts it learned. So the training rollout
(``t1train/rollout.py``), ``t1env eval --agent hf`` and ``--agent openai``, the TRL tool env
(:class:`t1env.tool_env.TerminalToolEnv`) and ``t1env run --agent human`` all take the pieces below from here:

* **system prompts**: :data:`TEXT_SYSTEM_PROMPT` and :data:`TOOLS_SYSTEM_PROMPT`;
* **action formats and the parser**: :func:`parse_action` reads a plain-text turn (a fenced command block, a
  Hermes ``<tool_call>``, or ``SUBMIT``); :func:`parse_tool_call` reads one native tool call (``bash``, ``keys``,
  ``submit``: the schemas in :data:`TOOLS`); both give an :class:`Action`;
* **observations**: :func:`format_observation` (the output, head and tail kept past ``max_observation_chars``, then
  ``[the command timed out]`` and ``[exit code: N]``) and the answers to a turn with no action
  (:data:`FORMAT_HELP`, or :data:`TRUNCATED_HELP` for a turn cut at the token limit);
* **limits**: :meth:`Protocol.fits` is the context rule (a turn is sampled only while the prompt plus
  ``max_new_tokens`` fits in ``max_context_tokens``; otherwise the episode ends and is submitted), and
  :meth:`Protocol.at_turn_limit` the turn rule (every assistant turn counts, a turn without an action too).

Two named styles, ``protocol: text | tools`` in the trainer's YAML and ``t1env eval --protocol``:

``text``
    The model writes its action in its reply; observations come back as messages of ``observation_role``. What
    ``t1train`` trains with.
``tools``
    The model calls the :data:`TOOLS` (native tool calling, ``--agent openai``; the methods of ``TerminalToolEnv``);
    each observation is the tool's answer.

A :class:`Protocol` holds one style with its settings. A ``t1train`` checkpoint folder carries the one it was
trained with (:data:`PROTOCOL_FILE`, written by :meth:`Protocol.save`), and ``t1env eval --agent hf`` reads it back
(:meth:`Protocol.load`), so the checkpoint is evaluated on its own prompts. ``docs/protocol.md`` is the user's page.

Example:
    >>> parse_action("Let me look.\\n```bash\\nls -la\\n```")
    Action(kind='command', command='ls -la', error=None, keys=None, timeout=None, wait=None)
    >>> parse_action('<tool_call>{"name": "submit", "arguments": {}}</tool_call>').kind
    'submit'
    >>> parse_action("done\\nSUBMIT").kind
    'submit'
    >>> parse_action("hmm").kind
    'none'
    >>> format_observation("red\\n", {"exit_code": 0}, 8000)
    'red\\n[exit code: 0]'
    >>> p = Protocol(system_prompt="Act in the shell.")
    >>> p.first_messages("Make a folder.")
    [{'role': 'system', 'content': 'Act in the shell.'}, {'role': 'user', 'content': 'Make a folder.'}]
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path

PROTOCOLS = ("text", "tools")
TRUNCATED_TURNS = ("act", "reject")  # what a harness does with a turn cut by max_new_tokens
PROTOCOL_FILE = "t1_protocol.json"  # in a checkpoint folder: the protocol the model was trained with

COMMAND, KEYS, SUBMIT, NONE = "command", "keys", "submit", "none"

# ------------------------------------------------------------------------------------------------ prompts
TEXT_SYSTEM_PROMPT = (
    "You are an agent operating a Linux shell to complete a task. Each turn, think briefly, then give exactly one "
    "action: a command in a fenced block (```bash\\n<command>\\n```) or a tool call "
    '(<tool_call>{"name": "bash", "arguments": {"command": "<command>"}}</tool_call>). You will see its output. '
    "When the task is complete, write SUBMIT on its own line."
)
TOOLS_SYSTEM_PROMPT = (
    "You are an agent operating a Linux shell to complete a task. Each turn, think briefly, then call one tool: "
    "`bash` runs a command, `keys` types into a full-screen program. You will see its output. When the task is "
    "complete, call `submit`."
)
SYSTEM_PROMPTS = {"text": TEXT_SYSTEM_PROMPT, "tools": TOOLS_SYSTEM_PROMPT}

FORMAT_HELP = (
    "No valid action found. Run a command in a fenced block (```bash\\n<command>\\n```) or with a tool call "
    '(<tool_call>{"name": "bash", "arguments": {"command": "<command>"}}</tool_call>). '
    'When the task is done, write SUBMIT on its own line or call <tool_call>{"name": "submit"}</tool_call>.'
)
TRUNCATED_HELP = (
    "Not run: the turn was cut at the token limit before it ended. End the turn right after its "
    "action: one fenced command block, or SUBMIT."
)
CONTEXT_POLICIES = ("end", "drop_observations", "summary")  # what an episode does when its context is full
DEFAULT_SUMMARY_PROMPT = (
    "The conversation is about to be cut to fit the context window. Before you go on, write a short summary of "
    "your progress for yourself: what you found, what you changed, what works, what is left to do, and any file "
    "names, values or errors you will need. Do not run a command in this message."
)
DROPPED_NOTE = "[{n} earlier turns of this conversation were removed to fit the context window.]"
SUMMARY_NOTE = "[{n} earlier turns were replaced by your own summary of them:]\n{summary}"
OMITTED_OBSERVATION = "[output not shown: the context is full; it is shown again after your summary]"
TOOLS_HELP = "No tool call found. Call `bash` to run a command, `keys` to type into a program, `submit` to finish."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one shell command in the task's terminal and see its output.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the command line"},
                    "timeout": {"type": "number", "description": "seconds to wait for it (optional)"},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "keys",
            "description": "Type keys into a full-screen program (e.g. ['q'], ['Escape', ':wq', 'Enter']).",
            "parameters": {
                "type": "object",
                "properties": {
                    "keys": {"type": "array", "items": {"type": "string"}},
                    "wait": {"type": "number", "description": "seconds to wait before reading the screen (optional)"},
                },
                "required": ["keys"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish: your work is checked now. Call it when the task is done.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


# ------------------------------------------------------------------------------------------------ actions
@dataclass
class Action:
    """One parsed action: ``kind`` is ``"command"``, ``"keys"``, ``"submit"`` or ``"none"``."""

    kind: str
    command: str | None = None
    error: str | None = None
    """Why no action was found (for ``kind="none"``): the text the model is answered with."""
    keys: list[str] | None = None
    timeout: float | None = None
    wait: float | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def to_env(self):
        """The :meth:`t1env.env.TerminalEnv.step` action (``None`` for ``kind="none"``: nothing to step)."""
        if self.kind == SUBMIT:
            return {"submit": True}
        if self.kind == COMMAND:
            return {"command": self.command, **({"timeout": self.timeout} if self.timeout is not None else {})}
        if self.kind == KEYS:
            return {"keys": self.keys, **({"wait": self.wait} if self.wait is not None else {})}
        return None


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCE = re.compile(r"```(bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_SUBMIT_LINE = re.compile(r"^[ \t]*SUBMIT[ \t]*$", re.MULTILINE)


def parse_action(text: str) -> Action:
    """The first action in a plain-text turn; the first one in the text wins:

    1. a Hermes/Qwen tool call, ``<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>``
       (``name`` ``bash`` or ``submit``);
    2. a fenced code block tagged ``bash``, ``sh``, ``shell``, ``console`` or untagged: its content is the command;
    3. ``SUBMIT`` alone on a line, outside a code block.

    No action (or a malformed one): ``kind="none"`` with the answer for the model in ``error``.
    """
    candidates: list[tuple[int, Action]] = []

    for m in _TOOL_CALL.finditer(text):
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError as err:
            candidates.append((m.start(), Action(NONE, error=f"tool call is not valid JSON: {err}")))
            break
        name = call.get("name") if isinstance(call, dict) else None
        args = call.get("arguments") or {} if isinstance(call, dict) else {}
        if isinstance(args, str):  # some models emit arguments as a JSON string
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {}
        if name == "submit":
            candidates.append((m.start(), Action(SUBMIT)))
        elif name == "bash" and isinstance(args, dict) and isinstance(args.get("command"), str):
            candidates.append((m.start(), Action(COMMAND, command=args["command"])))
        else:
            candidates.append((m.start(), Action(NONE, error=f"unknown tool call {call!r}; use 'bash' or 'submit'")))
        break

    fences = [m.span() for m in _FENCE.finditer(text)]
    for m in _FENCE.finditer(text):
        command = m.group(2).strip()
        if command:
            candidates.append((m.start(), Action(COMMAND, command=command)))
            break

    for m in _SUBMIT_LINE.finditer(text):
        if not any(s <= m.start() < e for s, e in fences):
            candidates.append((m.start(), Action(SUBMIT)))
            break

    if not candidates:
        return Action(NONE, error=FORMAT_HELP)
    return min(candidates, key=lambda c: c[0])[1]


def parse_tool_call(name: str, arguments: str | dict | None) -> Action:
    """The action of one native tool call (:data:`TOOLS`); a malformed call raises ``ValueError`` with the answer
    for the model.

    Example:
        >>> parse_tool_call("bash", '{"command": "ls", "timeout": 5}').to_env()
        {'command': 'ls', 'timeout': 5.0}
        >>> parse_tool_call("keys", {"keys": "q"}).to_env()
        {'keys': ['q']}
    """
    if isinstance(arguments, str) or arguments is None:
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as e:
            raise ValueError(f"arguments are not valid JSON: {e}") from None
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")  # noqa: TRY004 - told to the model, like the others
    if name == "submit":
        return Action(SUBMIT)
    if name == "bash":
        if not isinstance(arguments.get("command"), str) or not arguments["command"].strip():
            raise ValueError("bash needs a non-empty string 'command'")
        timeout = arguments.get("timeout")
        ok = isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0
        return Action(COMMAND, command=arguments["command"], timeout=float(timeout) if ok else None)
    if name == "keys":
        keys = arguments.get("keys")
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise ValueError("keys needs a non-empty list of strings 'keys'")
        wait = arguments.get("wait")
        ok = isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0
        return Action(KEYS, keys=keys, wait=float(wait) if ok else None)
    raise ValueError(f"unknown tool {name!r}: use bash, keys or submit")


# ------------------------------------------------------------------------------------------------ observations
def cut_middle(text: str, max_chars: int) -> str:
    """``text`` with its middle cut past ``max_chars`` characters: half the budget of head, half of tail.

    Example:
        >>> cut_middle("a" * 10 + "b" * 10, 12)
        'aaaaaa\\n[... 8 characters cut ...]\\nbbbbbb'
    """
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return text[:half] + f"\n[... {len(text) - 2 * half} characters cut ...]\n" + text[-half:]


def format_observation(obs: str, info: dict, max_chars: int) -> str:
    """The observation message: the command's output (:func:`cut_middle`), then ``[exit code: N]`` (and a note on
    timeouts)."""
    text = cut_middle(obs if isinstance(obs, str) else str(obs), max_chars)
    notes = []
    if info.get("timed_out"):
        notes.append("[the command timed out]")
    if info.get("exit_code") is not None:
        notes.append(f"[exit code: {info['exit_code']}]")
    if notes:
        text = (text.rstrip("\n") + "\n" if text.strip() else "") + " ".join(notes)
    return text


# ------------------------------------------------------------------------------------------------ the protocol
@dataclass(frozen=True)
class Protocol:
    """One protocol style and its settings: everything a harness needs to talk to a model the way it was trained."""

    name: str = "text"
    """``text`` or ``tools`` (see the module docstring)."""
    system_prompt: str | None = None
    """System message before the task instruction (``None``: the style's own; empty: none)."""
    observation_role: str = "user"
    """Role of observation messages in the ``text`` style (``user`` or ``tool``)."""
    max_observation_chars: int = 8000
    """Longer outputs keep their head and tail."""
    max_new_tokens: int | None = None
    """Tokens per assistant turn (``None``: the harness's default)."""
    max_context_tokens: int | None = None
    """No turn is sampled once the prompt plus ``max_new_tokens`` would exceed this (``None``: no limit)."""
    max_turns: int | None = None
    """Assistant turns per episode, turns without an action included (``None``: the task's ``limits.max_turns``)."""
    truncated_turns: str = "act"
    """A turn cut at ``max_new_tokens``: ``act`` runs the action it holds, ``reject`` answers :data:`TRUNCATED_HELP`."""
    chat_template: str | None = None
    """A Jinja chat template that overrides the tokenizer's (``None``: the tokenizer's)."""
    context_policy: str = "end"
    """When the next turn would not fit ``max_context_tokens``: ``end`` the episode, or go on in a new segment
    (``drop_observations``, ``summary``; ``docs/training.md``, "Long episodes")."""
    keep_last_turns: int = 4
    """Turns a new segment keeps verbatim (assistant message and the message after it)."""
    max_segments: int = 64
    """Most segments per episode; past it the episode ends as under ``end``."""
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    """The request for a summary (``context_policy: summary``), sent after the turn that filled the context."""

    def __post_init__(self):
        if self.name not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.name!r}")
        if self.truncated_turns not in TRUNCATED_TURNS:
            raise ValueError(f"truncated_turns must be 'act' or 'reject', got {self.truncated_turns!r}")
        if self.observation_role not in ("user", "tool"):
            raise ValueError(f"observation_role must be 'user' or 'tool', got {self.observation_role!r}")
        if self.context_policy not in CONTEXT_POLICIES:
            raise ValueError(
                f"context_policy must be one of {', '.join(CONTEXT_POLICIES)}, got {self.context_policy!r}"
            )
        if self.keep_last_turns < 0 or self.max_segments < 1:
            raise ValueError(
                f"keep_last_turns must be >= 0 and max_segments >= 1, got {self.keep_last_turns} and {self.max_segments}"
            )
        if self.context_policy == "summary" and not self.summary_prompt.strip():
            raise ValueError("summary_prompt is empty: context_policy 'summary' needs a request for the summary")
        for name in ("max_observation_chars", "max_new_tokens", "max_context_tokens", "max_turns"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    @property
    def system(self) -> str:
        """The system message's text (empty: none)."""
        return SYSTEM_PROMPTS[self.name] if self.system_prompt is None else self.system_prompt

    @property
    def tools(self) -> list[dict] | None:
        """The tool schemas the model is offered (``tools`` style), else ``None``."""
        return TOOLS if self.name == "tools" else None

    # -- messages ---------------------------------------------------------------------------------------------
    def first_messages(self, instruction: str) -> list[dict]:
        """The conversation an episode starts with: the system prompt (if any), then the task instruction."""
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return messages + [{"role": "user", "content": instruction}]

    def observation(self, obs: str, info: dict) -> str:
        """The text of an observation (:func:`format_observation` with this protocol's limit)."""
        return format_observation(obs, info, self.max_observation_chars)

    def observation_message(self, obs: str, info: dict) -> dict:
        """The message a command's output comes back in (``text`` style)."""
        return {"role": self.observation_role, "content": self.observation(obs, info)}

    def answer_message(self, action: Action) -> dict:
        """The message that answers a turn with no action: what was wrong, and the action format."""
        return {"role": self.observation_role, "content": action.error or FORMAT_HELP}

    def summary_request(self, observation: str) -> list[dict]:
        """The message(s) after the turn that filled the context (``context_policy: summary``): the observation and
        the request for a summary, in one message when observations are user messages (roles keep alternating)."""
        if self.observation_role == "user":
            return [{"role": "user", "content": f"{observation}\n\n{self.summary_prompt}"}]
        return [{"role": "tool", "content": observation}, {"role": "user", "content": self.summary_prompt}]

    def segment_messages(
        self, first: list[dict], recent: list[tuple[dict, dict]], turns: int, summary: str | None = None
    ) -> list[dict]:
        """A new segment's conversation: the ``first`` messages, the instruction followed by a note on the
        ``turns - len(recent)`` turns left out (or by the policy's ``summary`` of them), then the ``recent`` turns
        (assistant message, message after it)."""
        omitted = turns - len(recent)
        note = (
            SUMMARY_NOTE.format(n=omitted, summary=summary) if summary is not None else DROPPED_NOTE.format(n=omitted)
        )
        head = [dict(m) for m in first]
        head[-1]["content"] = f"{head[-1]['content']}\n\n{note}"
        return head + [m for pair in recent for m in pair]

    # -- parsing and limits -----------------------------------------------------------------------------------
    def parse(self, text: str, cut: bool = False) -> Action:
        """The action of a plain-text turn; ``cut``: the turn ended at ``max_new_tokens`` (``truncated_turns``)."""
        action = parse_action(text)
        if cut and self.truncated_turns == "reject" and action.kind != NONE:
            return Action(NONE, error=TRUNCATED_HELP)
        return action

    def fits(self, prompt_tokens: int, max_new_tokens: int | None = None) -> bool:
        """The context rule: may a turn be sampled from a prompt of ``prompt_tokens``?"""
        if self.max_context_tokens is None:
            return True
        return prompt_tokens + (max_new_tokens or self.max_new_tokens or 0) <= self.max_context_tokens

    def at_turn_limit(self, turns: int, default: int | None = None) -> bool:
        """The turn rule: ``turns`` assistant turns were taken; must the episode end (and be submitted)?"""
        limit = self.max_turns or default
        return limit is not None and turns >= limit

    # -- a checkpoint's record --------------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"version": 1, **asdict(self)}

    def save(self, folder: str | Path) -> Path:
        """Write :data:`PROTOCOL_FILE` into a (checkpoint) folder."""
        path = Path(folder) / PROTOCOL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> Protocol | None:
        """The protocol a checkpoint folder was trained with, or ``None`` when it has no :data:`PROTOCOL_FILE`."""
        path = Path(folder) / PROTOCOL_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(
                f"{path}: not readable JSON ({e}); delete it to evaluate with the default protocol"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object; delete it to evaluate with the default protocol")
        data.pop("version", None)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"{path}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))}); a newer "
                "t1 wrote it: upgrade t1"
            )
        try:
            return cls(**data)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def replace(self, **changes) -> Protocol:
        """A copy with ``changes`` (those whose value is ``None`` are ignored)."""
        return Protocol(**{**asdict(self), **{k: v for k, v in changes.items() if v is not None}})

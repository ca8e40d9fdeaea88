"""ShellPilot: a small agent harness of its own, trained by t1 without knowing it (docs/training.md, "Train your own
agent").

It is not t1's protocol: its own system prompt, its own action format (one JSON object per reply,
``{"tool": "bash", "command": ...}`` or ``{"tool": "done"}``; or, with ``--tools``, an OpenAI ``bash`` tool), its own
observation messages, and a turn loop over the official ``openai`` client. The only thing that points it at t1 is
the ``base_url`` (``OPENAI_BASE_URL``, which the client reads by itself). ``--keep-last N`` makes it forget all but
the last N exchanges once the conversation grows (a memory policy many harnesses have): its requests then stop
extending the previous ones, and the endpoint records a new segment instead of a wrong trajectory.

Run by the harness runner (``rollout.harness: "python3 examples/harness/json_agent.py"``), it reads
``T1_INSTRUCTION``, ``T1_SHELL_URL`` (``POST /exec``, ``POST /submit``) and ``T1_MODEL`` from its environment.
In-process (``rollout.harness: "json_agent:JsonAgent"`` with ``examples/harness`` on ``PYTHONPATH``) it gets the same
from a ``HarnessContext``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request

from openai import OpenAI

SYSTEM_PROMPT = """You are ShellPilot, an assistant that completes tasks on a Linux machine.
Answer every turn with exactly one JSON object and nothing else:
  {"tool": "bash", "command": "<one shell command>"}   runs the command; you will see its output
  {"tool": "done"}                                     when the task is complete"""

TOOLS_PROMPT = """You are ShellPilot, an assistant that completes tasks on a Linux machine.
Call the bash tool to run commands; answer without a tool call when the task is complete."""

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one shell command and return its output and exit code.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}

FORMAT_REMINDER = 'Reply with one JSON object: {"tool": "bash", "command": "..."} or {"tool": "done"}.'


def parse_reply(text: str | None) -> dict | None:
    """The first JSON object in ``text`` that names a tool, or None.

    >>> parse_reply('Sure. {"tool": "bash", "command": "ls"}')
    {'tool': 'bash', 'command': 'ls'}
    >>> parse_reply("no json here") is None
    True
    """
    decoder = json.JSONDecoder()
    text = text or ""
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("tool") in ("bash", "done"):
            return obj
    return None


class JsonAgent:
    """The harness. ``run(context)`` for the in-process mode; :func:`main` for the subprocess mode."""

    def __init__(self, max_steps: int = 8, keep_last: int | None = None, tools: bool = False, max_tokens: int = 256):
        self.max_steps, self.keep_last, self.tools, self.max_tokens = max_steps, keep_last, tools, max_tokens

    def run(self, context) -> None:
        client = OpenAI(base_url=context.base_url, api_key="t1")
        self.loop(client, context.model, context.instruction, context.exec, context.submit)

    def window(self, history: list[dict]) -> list[dict]:
        """What the model is shown: the system prompt and the task, then the last ``keep_last`` exchanges."""
        if self.keep_last is None:
            return history
        return history[:2] + history[2:][-2 * self.keep_last :]

    def loop(self, client: OpenAI, model: str, instruction: str, run_command, submit) -> None:
        history = [
            {"role": "system", "content": TOOLS_PROMPT if self.tools else SYSTEM_PROMPT},
            {"role": "user", "content": instruction},
        ]
        for _ in range(self.max_steps):
            extra = {"tools": [BASH_TOOL]} if self.tools else {}
            reply = client.chat.completions.create(
                model=model, messages=self.window(history), max_tokens=self.max_tokens, **extra
            )
            message = reply.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if self.tools:
                if not message.tool_calls:
                    break  # no tool call: the model says it is done
                call = message.tool_calls[0]
                try:
                    command = json.loads(call.function.arguments).get("command", "")
                except (json.JSONDecodeError, AttributeError):
                    command = ""
                result = run_command(command) if command else {"output": "no command given", "exit_code": 2}
                observation = {"role": "tool", "tool_call_id": call.id, "content": _observation(result)}
            else:
                action = parse_reply(message.content)
                if action is not None and action["tool"] == "done":
                    break
                if action is None or not isinstance(action.get("command"), str):
                    history.append({"role": "user", "content": FORMAT_REMINDER})
                    continue
                result = run_command(action["command"])
                observation = {"role": "user", "content": _observation(result)}
            history.append(observation)
            if result.get("done"):
                return  # the episode ended (its turn or time limit): nothing to submit
        submit()


def _observation(result: dict) -> str:
    return f"Output:\n{result.get('output', '')}\nExit code: {result.get('exit_code')}"


# ------------------------------------------------------------------------------------------------ subprocess mode
def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-steps", type=int, default=8, help="model requests per episode")
    parser.add_argument("--keep-last", type=int, default=None, help="show the model only the last N exchanges")
    parser.add_argument("--tools", action="store_true", help="use an OpenAI bash tool instead of JSON replies")
    parser.add_argument("--max-tokens", type=int, default=256, help="max_tokens of each request")
    args = parser.parse_args(argv)
    shell_url = os.environ.get("T1_SHELL_URL")
    if not shell_url or "T1_INSTRUCTION" not in os.environ:
        print("json_agent: set T1_SHELL_URL and T1_INSTRUCTION (the t1 harness runner does)", file=sys.stderr)
        return 2
    agent = JsonAgent(args.max_steps, args.keep_last, args.tools, args.max_tokens)
    agent.loop(
        OpenAI(),  # base_url and api_key from OPENAI_BASE_URL / OPENAI_API_KEY
        os.environ.get("T1_MODEL", "t1-policy"),
        os.environ["T1_INSTRUCTION"],
        lambda command: _post(f"{shell_url}/exec", {"command": command}),
        lambda: _post(f"{shell_url}/submit", {}),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

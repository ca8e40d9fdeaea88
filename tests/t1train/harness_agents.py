"""In-process harnesses for test_harness.py, loaded as ``harness_agents:Class`` (this folder on ``sys.path``).

They are harnesses as a user would write them: the official ``openai`` client on the context's ``base_url``, and
the episode's shell through ``context.exec`` / ``context.submit``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "harness"))

from json_agent import JsonAgent  # noqa: E402 - the example harness, from its folder


class ForgetfulAgent(JsonAgent):
    """The example harness, keeping only the last exchange: its requests stop extending the previous ones."""

    def __init__(self):
        super().__init__(max_steps=4, keep_last=1, max_tokens=8)


class PartialAgent:
    """Asks the model twice; on seed 0 it then makes one of hello-file's checks pass (the directory, mode 750),
    on any other seed it does nothing, and asks its second question with a rewritten history (a new segment).
    Then it submits."""

    def run(self, context) -> None:
        client = OpenAI(base_url=context.base_url, api_key="t1", max_retries=0)
        messages = [{"role": "system", "content": "Act."}, {"role": "user", "content": context.instruction}]
        for _ in range(2):
            reply = client.chat.completions.create(model=context.model, messages=messages, max_tokens=8)
            messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "go on"}]
            if context.seed != 0:
                messages = [messages[0], {"role": "user", "content": context.instruction + "\n(one reply so far)"}]
        if context.seed == 0:
            assert context.exec("mkdir -m 750 /app/greetings")["exit_code"] == 0
        context.submit()

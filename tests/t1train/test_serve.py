"""t1train serve: the official ``openai`` client against the endpoint on the tiny MoE (CPU), one server for the
module. What the server records must be exactly what the engine consumed and sampled: every test compares the
recorded session with the engine's own outputs, logged by :class:`RecordingEngine` (the real HFEngine, its calls
kept)."""

from __future__ import annotations

import doctest
import importlib
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import openai
import pytest
import torch

from t1train.engines.base import SamplingParams
from t1train.engines.hf import HFEngine
from t1train.serve import PolicyServer, parse_tool_calls
from t1train.sft import OracleEngine
from t1train.trajectory import Trajectory


class RecordingEngine:
    """An engine that keeps every (prompt, Generation) pair it returned."""

    def __init__(self, engine):
        self.engine = engine
        self.max_concurrency = engine.max_concurrency
        self.moe_layers = getattr(engine, "moe_layers", [])
        self.max_context_length = getattr(engine, "max_context_length", None)
        self.calls: list[tuple[list[int], object]] = []
        self.gate: threading.Event | None = None  # when set: generate waits for it (a request held in flight)
        self.entered = threading.Event()

    def generate(self, prompts, sampling, return_routed_experts=False, **kw):
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(timeout=60)
        gens = self.engine.generate(prompts, sampling, return_routed_experts, **kw)
        self.calls.extend(zip([list(p) for p in prompts], gens))
        return gens

    def sampled_after(self, prompt: list[int]) -> list[list[int]]:
        """Every id list the engine sampled from exactly ``prompt``."""
        return [g.token_ids for p, g in self.calls if p == prompt]


def assert_no_drift(traj: Trajectory, engine: RecordingEngine) -> None:
    """Each turn: the segment's sequence up to the turn is the prompt the engine consumed, and the turn's ids are
    what the engine sampled from it; the loss mask covers exactly the sampled ids."""
    for view in traj.segment_views():
        ids, mask = view.token_ids(), view.loss_mask()
        for turn in view.turns:
            prompt = ids[: turn.prompt_len]
            assert turn.sampled_ids in engine.sampled_after(prompt)
            assert ids[turn.prompt_len : turn.prompt_len + len(turn.sampled_ids)] == turn.sampled_ids
            assert mask[turn.prompt_len : turn.prompt_len + len(turn.sampled_ids)] == [1] * len(turn.sampled_ids)
        assert sum(mask) == sum(len(t.sampled_ids) for t in view.turns)


@pytest.fixture(scope="module")
def served(tiny):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model, tokenizer = tiny
    engine = RecordingEngine(HFEngine(model, tokenizer))
    server = PolicyServer(engine, tokenizer, model_name="tiny", sampling=SamplingParams(max_new_tokens=8))
    server.start()
    yield server, engine
    server.stop()
    torch.set_num_threads(threads)


def client(server, session: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.session_url(session), api_key="t1", max_retries=0)


def recorded(server, session: str) -> Trajectory:
    """The session as the trainer fetches it: ``GET /t1/sessions/{id}``, JSON, back into a Trajectory."""
    with urllib.request.urlopen(f"{server.url}/t1/sessions/{session}") as response:
        return Trajectory.from_dict(json.load(response))


SYSTEM = {"role": "system", "content": "You are a shell agent."}


def test_a_conversation_is_recorded_token_for_token(served):
    """Three turns that each extend the last: one segment whose prompts are the engine's (previous ids + sampled
    ids + bridge: nothing re-tokenized), with log-probs, MoE routing and the weight version per turn."""
    server, engine = served
    c = client(server, "conv")
    messages = [SYSTEM, {"role": "user", "content": "list the files"}]
    replies = []
    for i in range(3):
        reply = c.chat.completions.create(model="tiny", messages=messages, seed=i)
        replies.append(reply)
        messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": f"out {i}"}]
    traj = recorded(server, "conv")
    assert [s.reason for s in traj.segments] == ["start"] and len(traj.turns) == 3
    assert_no_drift(traj, engine)
    ids = traj.token_ids()
    for turn, nxt in zip(traj.turns, traj.turns[1:]):  # each prompt is the last one + sampled + bridge
        assert nxt.prompt_len == turn.prompt_len + len(turn.sampled_ids) + len(turn.bridge_ids)
        bridge_start = turn.prompt_len + len(turn.sampled_ids)
        assert turn.bridge_ids and traj.loss_mask()[bridge_start : nxt.prompt_len] == [0] * len(turn.bridge_ids)
    assert (
        ids[: traj.turns[0].prompt_len]
        == traj.prompt_ids
        == server.tokenizer.apply_chat_template(
            messages[:2], add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )
    for turn, reply in zip(traj.turns, replies):
        assert reply.usage.completion_tokens == len(turn.sampled_ids) == len(turn.logprobs)
        assert reply.usage.prompt_tokens == turn.prompt_len
        assert turn.weight_version == "0" and reply.system_fingerprint == "t1-w0"
        assert len(turn.routed_experts) == len(turn.sampled_ids)  # [tokens, moe_layers, top_k]
        assert len(turn.routed_experts[0]) == 2 and len(turn.routed_experts[0][0]) == 2
    rows, recorded_mask = traj.routed_experts_by_position()
    assert len(rows) == len(ids) and all(recorded_mask[:-1])  # every consumed position has the sampler's routing


def test_the_weight_version_tag_follows_the_engine(served):
    server, engine = served
    c = client(server, "versions")
    messages = [SYSTEM, {"role": "user", "content": "hi"}]
    first = c.chat.completions.create(model="tiny", messages=messages, seed=0)
    hf = engine.engine
    hf.load_state_dict(hf.model.state_dict(), weight_version="7")  # the same weights, a new version
    try:
        messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "again"}]
        second = c.chat.completions.create(model="tiny", messages=messages, seed=0)
    finally:
        hf.weight_version = "0"
    traj = recorded(server, "versions")
    assert [t.weight_version for t in traj.turns] == ["0", "7"]
    assert (first.system_fingerprint, second.system_fingerprint) == ("t1-w0", "t1-w7")


def test_streamed_and_plain_replies_carry_the_same_ids(served):
    server, engine = served
    messages = [SYSTEM, {"role": "user", "content": "print the date"}]
    plain = client(server, "plain").chat.completions.create(model="tiny", messages=messages, seed=5, logprobs=True)
    stream = client(server, "stream").chat.completions.create(
        model="tiny", messages=messages, seed=5, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    a, b = recorded(server, "plain").turns[0], recorded(server, "stream").turns[0]
    assert a.sampled_ids == b.sampled_ids and a.logprobs == b.logprobs
    assert [x.logprob for x in plain.choices[0].logprobs.content] == a.logprobs


def test_a_rewritten_history_starts_a_new_segment(served):
    """A harness that drops old messages sends a conversation that does not extend the last one: the server
    renders it fresh as a new segment, and each segment is a correct training sequence of its own."""
    server, engine = served
    c = client(server, "rewrite")
    messages = [SYSTEM, {"role": "user", "content": "task"}]
    reply = c.chat.completions.create(model="tiny", messages=messages, seed=1)
    messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "output 1"}]
    reply = c.chat.completions.create(model="tiny", messages=messages, seed=2)
    shorter = [SYSTEM, {"role": "user", "content": "task (summary: one step done)"}]
    c.chat.completions.create(model="tiny", messages=shorter, seed=3)
    edited = shorter + [{"role": "assistant", "content": "not what the model said"}, {"role": "user", "content": "x"}]
    c.chat.completions.create(model="tiny", messages=edited, seed=4)
    traj = recorded(server, "rewrite")
    assert [(s.first_turn, s.reason) for s in traj.segments] == [(0, "start"), (2, "non_prefix"), (3, "non_prefix")]
    assert traj.segments[1].prompt_ids == server.tokenizer.apply_chat_template(
        shorter, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert traj.turns[0].bridge_ids and not traj.turns[1].bridge_ids  # segment 0 ends with its last turn
    assert_no_drift(traj, engine)
    with pytest.raises(ValueError, match="segment"):  # no single sequence: the trainer must go per segment
        traj.token_ids()


def test_tools_are_rendered_and_tool_messages_extend_the_session(served):
    """With ``tools``, the prompt is the template's render with ``tools=``; a reply whose tool call the harness
    answered with a ``tool`` message extends the session; an assistant message with ``tool_calls`` from elsewhere
    renders fresh. (The tiny model rarely writes a tool call; parsing is tested on text below.)"""
    server, engine = served
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    c = client(server, "tools")
    messages = [SYSTEM, {"role": "user", "content": "go"}]
    reply = c.chat.completions.create(model="tiny", messages=messages, tools=tools, seed=0)
    messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "tool", "content": "ok"}]
    c.chat.completions.create(model="tiny", messages=messages, tools=tools, seed=1)
    other = [
        SYSTEM,
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"a": 1}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    c.chat.completions.create(model="tiny", messages=other, tools=tools, seed=2)
    traj = recorded(server, "tools")
    assert [s.reason for s in traj.segments] == ["start", "non_prefix"]
    assert server.tokenizer.decode(traj.turns[0].bridge_ids).endswith(
        "<|im_start|>tool\nok<|im_end|>\n<|im_start|>assistant\n"
    )
    assert_no_drift(traj, engine)


# ChatML that renders the tools and assistant tool calls (the tiny model's own template renders neither)
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools:{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>\n"
    "{% endif %}{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "{% for c in message.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CALL = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'


def test_a_sampled_tool_call_is_returned_in_the_openai_format_and_its_answer_extends_the_session(tiny):
    """An engine that writes a Hermes tool call (t1's OracleEngine replays scripted turns as ids): the reply
    carries it as ``tool_calls`` (plain and streamed), and the harness's echo of it (``content: null`` plus the
    call) followed by the tool's answer extends the session through the TITO bridge."""
    _, tokenizer = tiny
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    engine = RecordingEngine(OracleEngine(tokenizer, {"list files": [CALL, "all done"]}))
    with PolicyServer(engine, tokenizer, chat_template=TOOLS_TEMPLATE) as server:
        c = client(server, "calls")
        messages = [{"role": "user", "content": "list files"}]
        first = c.chat.completions.create(model="t", messages=messages, tools=tools)
        message = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls" and message.content is None
        [call] = message.tool_calls
        assert call.function.name == "bash" and json.loads(call.function.arguments) == {"command": "ls"}
        messages += [message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "a"}]
        second = c.chat.completions.create(model="t", messages=messages, tools=tools)
        assert second.choices[0].message.content == "all done" and second.choices[0].finish_reason == "stop"
        stream = client(server, "streamed").chat.completions.create(
            model="t", messages=messages[:1], tools=tools, stream=True
        )
        deltas = [d for ch in stream for d in (ch.choices[0].delta.tool_calls or []) if ch.choices]
        assert [(d.function.name, json.loads(d.function.arguments)) for d in deltas] == [("bash", {"command": "ls"})]
        traj = recorded(server, "calls")
    assert [s.reason for s in traj.segments] == ["start"] and len(traj.turns) == 2
    assert "Tools: bash" in tokenizer.decode(traj.prompt_ids)  # the tools went through the template
    assert tokenizer.decode(traj.turns[0].sampled_ids) == CALL + "<|im_end|>"
    assert tokenizer.decode(traj.turns[0].bridge_ids) == "\n<|im_start|>tool\na<|im_end|>\n<|im_start|>assistant\n"
    assert_no_drift(traj, engine)


def test_tool_calls_are_parsed_from_the_sampled_text():
    tools = [{"type": "function", "function": {"name": "bash"}}]
    text = 'run it\n<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    assert parse_tool_calls(text, tools) == ("run it", [{"name": "bash", "arguments": {"command": "ls"}}])
    assert parse_tool_calls('{"name": "rm", "arguments": {}}', tools) == ('{"name": "rm", "arguments": {}}', [])
    assert parse_tool_calls("<tool_call>not json</tool_call>", tools)[1] == []


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json", "X-T1-Session": "bad"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


@pytest.mark.parametrize(
    "body,status,needle",
    [
        ({"messages": [{"role": "robot", "content": "x"}]}, 400, "messages[0].role must be one of"),
        ({"messages": []}, 400, "messages"),
        ({"model": "tiny"}, 400, "messages: Field required"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, 400, "only n=1"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": -1}, 400, "temperature"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "only text parts"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 10**6}, 400, "exceeds the context"),
    ],
)
def test_a_bad_request_is_a_4xx_with_an_openai_error_body(served, body, status, needle):
    server, _ = served
    code, answer = _post(f"{server.url}/v1/chat/completions", body)
    assert code == status, answer
    assert needle in answer["error"]["message"] and answer["error"]["type"] == "invalid_request_error"


def test_a_session_takes_one_request_at_a_time(served):
    """While a session's request is in flight, a second one in that session is a 409 (the first is recorded, the
    refused one is not; another session is unaffected)."""
    server, engine = served
    messages = [SYSTEM, {"role": "user", "content": "wait"}]
    engine.gate, engine.entered = threading.Event(), threading.Event()
    first = threading.Thread(target=lambda: client(server, "one").chat.completions.create(model="t", messages=messages))
    first.start()
    try:
        assert engine.entered.wait(timeout=60)  # the first request is in the engine now
        with pytest.raises(openai.ConflictError, match="already has a request in flight"):
            client(server, "one").chat.completions.create(model="t", messages=messages)
    finally:
        engine.gate.set()
        first.join(timeout=60)
        engine.gate = None
    client(server, "two").chat.completions.create(model="t", messages=messages)
    assert len(recorded(server, "one").turns) == len(recorded(server, "two").turns) == 1


def test_sessions_and_the_shell_api_answer_404_where_there_is_nothing(served):
    server, _ = served
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{server.url}/t1/sessions/never-seen")
    assert err.value.code == 404 and "no session" in json.load(err.value)["error"]["message"]
    code, answer = _post(f"{server.url}/t1/sessions/conv/exec", {"command": "ls"})
    assert code == 404 and "has no shell" in answer["error"]["message"]
    models = json.load(urllib.request.urlopen(f"{server.url}/v1/models"))
    assert [m["id"] for m in models["data"]] == ["tiny"]


@pytest.mark.parametrize("module", ["t1train.serve", "t1train.harness"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_a_session_is_named_by_the_path_the_header_or_the_user_field(served):
    server, _ = served
    plain = openai.OpenAI(base_url=f"{server.url}/v1", api_key="t1", max_retries=0)
    messages = [SYSTEM, {"role": "user", "content": "hi"}]
    before = set(server.sessions)
    plain.chat.completions.create(model="t", messages=messages)  # no session: answered, not recorded
    assert set(server.sessions) == before
    plain.chat.completions.create(model="t", messages=messages, user="by-user")
    plain.chat.completions.create(model="t", messages=messages, extra_headers={"X-T1-Session": "by-header"})
    client(server, "by-path").chat.completions.create(model="t", messages=messages, user="ignored")
    assert set(server.sessions) - before == {"by-user", "by-header", "by-path"}


@pytest.mark.slow
def test_the_t1train_serve_command_serves_and_records():
    """``t1train serve`` as a user starts it: a process on a port, the openai client on a session's base_url."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "t1train", "serve", "--port", str(port), "--max-new-tokens", "4"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in proc.stdout:  # uvicorn says when it listens; EOF means the command failed
            lines.append(line)
            if "Uvicorn running on" in line:
                break
        assert "Uvicorn running on" in lines[-1], "".join(lines)
        assert any(f"http://127.0.0.1:{port}/t1/s/SESSION/v1" in line for line in lines)
        base = f"http://127.0.0.1:{port}"
        c = openai.OpenAI(base_url=f"{base}/t1/s/cli/v1", api_key="t1", max_retries=0)
        reply = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
        assert 1 <= reply.usage.completion_tokens <= 4
        with urllib.request.urlopen(f"{base}/t1/sessions/cli") as response:
            traj = Trajectory.from_dict(json.load(response))
        assert len(traj.turns) == 1 and len(traj.turns[0].sampled_ids) == reply.usage.completion_tokens
    finally:
        proc.terminate()
        proc.wait(timeout=30)

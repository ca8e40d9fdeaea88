"""``t1train serve``: an OpenAI-compatible chat endpoint in front of an Engine that records the exact tokens.

Why
---
Agent developers have harnesses of their own (prompt, tool schema, planning loop, memory) written against an
OpenAI-compatible chat API. To train the policy inside such a harness, the trainer needs the token ids the engine
consumed and sampled, not a chat transcript re-tokenized after the fact (the train-inference mismatch TITO removes,
``t1train/tito.py``). This server speaks the chat API and records, per request, the prompt ids the engine
consumed, the sampled ids, their sampler log-probs, the MoE routing (R3) and the engine's weight version, keyed by
a session the harness names. ``t1train/harness.py`` turns a session into a :class:`~t1train.trajectory.Trajectory`.

Endpoints
---------
* ``GET /v1/models``; ``POST /v1/chat/completions`` (``stream`` true or false, ``tools`` / ``tool_calls`` in the
  OpenAI format, ``logprobs``, ``seed``, ``stop``, ``max_tokens``/``max_completion_tokens``, ``temperature``,
  ``top_p``, and ``top_k`` as an extra field; ``n`` must be 1).
* ``GET /t1/sessions/{id}``: the session's recorded trajectory as JSON (``Trajectory.to_dict()``);
  ``DELETE /t1/sessions/{id}``: drop it.
* ``POST /t1/sessions/{id}/exec`` ``{"command": ...}`` and ``POST /t1/sessions/{id}/submit``: the shell of the t1
  episode the session belongs to, when a runner attached one (:meth:`PolicyServer.attach_shell`).

Sessions
--------
A request belongs to a session named by, first match wins: the path prefix ``/t1/s/{session}/v1`` (so a harness
that only sets its ``base_url`` is recorded), the header ``X-T1-Session``, or the request's ``user`` field. A
request with none of them is answered and not recorded. Requests of one session are taken one at a time (a second
while one is in flight is a 409); sessions never see each other's state.

How the prompt ids are made
---------------------------
The first request of a session renders its ``messages`` (and ``tools``) with the model's chat template
(``apply_chat_template(..., add_generation_prompt=True)``) and tokenizes the text once. A later request whose
messages are the previous request's messages, then the assistant reply this server returned, then new messages
(tool results, a user turn) *extends* it: its prompt ids are the previous prompt ids + the previously sampled ids +
the bridge of the new messages (:meth:`Tito.bridge`, the rollout's own machinery), so the recorded ids are exactly
what the engine consumed, and nothing sampled is ever re-tokenized. Any other request (the harness dropped or
rewrote history, changed its tools, or asked the same thing again) starts a new segment
(``Segment(reason="non_prefix")``): its messages are rendered fresh, and the trajectory keeps both contexts
(``Trajectory.segment_views()``), each a correct training sequence of its own.

Matching the reply: the assistant message a harness sends back is compared with the one returned by its role,
its text (``None`` and ``""`` alike, outer whitespace ignored) and its tool calls (name and parsed arguments; ids
ignored). A client that edits the reply's text starts a new segment, as it should: the model did not sample that
text.

Tool calls
----------
With ``tools`` in the request (and ``tool_choice`` not ``"none"``) the tools are rendered through the chat
template's ``tools=`` and tool calls are parsed from the sampled text: Hermes/Qwen-style
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (any number), or a reply that is one JSON object
``{"name": ..., "arguments": {...}}`` naming a declared tool. The reply's ``content`` is then the text outside the
blocks (``None`` when empty) and ``finish_reason`` is ``"tool_calls"``. Assistant messages with ``tool_calls`` in
a request are passed to the template as they are (arguments parsed from their JSON string); a template that does
not render tool calls (the tiny model's ChatML) shows only their content, which matters only for a fresh render.

Engine calls
------------
Requests run on the server's event loop; their engine calls go to one engine thread, which batches the requests
waiting at the same time into one ``engine.generate`` call per sampling setting (each request keeps its own
seed). A streamed reply is sent after the engine finishes (the in-process engine does not stream): a role chunk,
the text token by token, the tool calls, the finish reason, ``[DONE]``. Streamed and plain replies of the same
request and seed carry the same ids.

Bad requests get a 4xx with OpenAI's error body ``{"error": {"message", "type", "param", "code"}}``; the message
names the field and what to send instead.

Example:
    ``t1train serve --model tiny --port 8000`` then, from any OpenAI client::

        client = openai.OpenAI(base_url="http://127.0.0.1:8000/t1/s/my-session/v1", api_key="t1")
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
        # GET http://127.0.0.1:8000/t1/sessions/my-session  -> the recorded trajectory
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import queue
import re
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from t1train.engines.base import FINISH_LENGTH, Engine, Generation, SamplingParams
from t1train.tito import Tito
from t1train.trajectory import Segment, Trajectory, Turn

log = logging.getLogger(__name__)

SESSION_HEADER = "X-T1-Session"
ROLES = ("system", "developer", "user", "assistant", "tool")
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class APIError(Exception):
    """A request the server refuses: answered with ``status`` and OpenAI's error body."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def response(self) -> JSONResponse:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        body = {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


# ------------------------------------------------------------------------------------------------ request
class ChatRequest(BaseModel):
    """The fields of ``/v1/chat/completions`` this server reads (others are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict] = Field(min_length=1)
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int = 1
    stream: bool = False
    stream_options: dict | None = None
    logprobs: bool | None = False
    user: str | None = None


class ExecRequest(BaseModel):
    """``POST /t1/sessions/{id}/exec``: one shell command in the session's episode."""

    model_config = ConfigDict(extra="forbid")

    command: str
    timeout: float | None = Field(None, gt=0)


def _text_content(content: Any, where: str) -> str:
    """A message's content as text: a string, None (""), or a list of ``{"type": "text"}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise APIError(400, f"{where}.content: only text parts are supported, got {part!r:.80}", where)
            parts.append(part["text"])
        return "".join(parts)
    raise APIError(400, f"{where}.content must be a string, null or a list of text parts", where)


def _arguments(value: Any) -> Any:
    """Tool-call arguments as data: a JSON string is parsed (templates write ``arguments | tojson``)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def template_messages(messages: list[dict]) -> list[dict]:
    """The request's messages as the chat template reads them: text content, parsed tool-call arguments, no
    ``None`` fields. Raises :class:`APIError` naming the first bad message."""
    out = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        role = msg.get("role")
        if role not in ROLES:
            raise APIError(400, f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", f"{where}.role")
        clean = {k: v for k, v in msg.items() if v is not None and k not in ("content", "tool_calls")}
        clean["role"] = "system" if role == "developer" else role
        clean["content"] = _text_content(msg.get("content"), where)
        if msg.get("tool_calls"):
            calls = []
            for j, call in enumerate(msg["tool_calls"]):
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise APIError(
                        400, f"{where}.tool_calls[{j}] needs function.name (OpenAI format)", f"{where}.tool_calls"
                    )
                calls.append(
                    {
                        "id": call.get("id"),
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": _arguments(fn.get("arguments", {}))},
                    }
                )
            clean["tool_calls"] = calls
        out.append(clean)
    return out


def _canonical(msg: dict) -> dict:
    """What must agree for two messages to count as the same (see "Matching the reply")."""
    out = {k: v for k, v in msg.items() if k not in ("content", "tool_calls", "id", "tool_call_id", "name")}
    out["content"] = msg.get("content", "").strip()
    out["tool_calls"] = [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]
    if msg.get("role") == "tool":
        out["tool_call_id"] = msg.get("tool_call_id")
    return out


# ------------------------------------------------------------------------------------------------ tool calls
def parse_tool_calls(text: str, tools: list[dict] | None) -> tuple[str | None, list[dict]]:
    """``(content, tool_calls)`` of a sampled reply (see "Tool calls" in the module docstring).

    Example:
        >>> parse_tool_calls('ok <tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>', [])
        ('ok', [{'name': 'bash', 'arguments': {'command': 'ls'}}])
        >>> parse_tool_calls('{"name": "bash", "arguments": {}}', [{"function": {"name": "bash"}}])
        (None, [{'name': 'bash', 'arguments': {}}])
        >>> parse_tool_calls("just text", [])
        ('just text', [])
    """
    calls = []
    for block in _TOOL_CALL_BLOCK.findall(text):
        call = _call_object(block)
        if call is not None:
            calls.append(call)
    if calls:
        content = _TOOL_CALL_BLOCK.sub("", text).strip()
        return content or None, calls
    declared = {(t.get("function") or {}).get("name") for t in tools or []}
    call = _call_object(text.strip())
    if call is not None and call["name"] in declared:
        return None, [call]
    return text, []


def _call_object(text: str) -> dict | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    args = data.get("arguments", data.get("parameters", {}))
    return {"name": data["name"], "arguments": _arguments(args)}


# ------------------------------------------------------------------------------------------------ engine thread
@dataclass
class _Job:
    prompt: list[int]
    sampling: SamplingParams
    routed_experts_start: int
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class EngineThread:
    """The one thread that calls the engine: jobs waiting together are batched per sampling setting."""

    def __init__(self, engine: Engine, return_routed_experts: bool):
        self.engine = engine
        self.return_routed_experts = return_routed_experts
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="t1-serve-engine", daemon=True)
        self._thread.start()

    def submit(
        self, prompt: list[int], sampling: SamplingParams, routed_experts_start: int
    ) -> concurrent.futures.Future:
        job = _Job(prompt, sampling, routed_experts_start)
        self._jobs.put(job)
        return job.future

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            jobs = [job]
            while True:  # everything that is waiting now goes into this round
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._jobs.put(None)
                    break
                jobs.append(more)
            groups: dict[tuple, list[_Job]] = {}
            for j in jobs:
                key = (replace(j.sampling, seed=None).__repr__(), j.sampling.seed is None)
                groups.setdefault(key, []).append(j)
            for group in groups.values():
                self._run(group)

    def _run(self, group: list[_Job]) -> None:
        sampling = group[0].sampling
        extra: dict = {}
        if self.return_routed_experts:
            extra["routed_experts_start"] = [j.routed_experts_start for j in group]
        if sampling.seed is not None:
            extra["seeds"] = [j.sampling.seed for j in group]
            sampling = replace(sampling, seed=None)
        try:
            gens = self.engine.generate([j.prompt for j in group], sampling, self.return_routed_experts, **extra)
        except Exception as err:  # noqa: BLE001 - handed to each request, answered there
            for j in group:
                j.future.set_exception(err)
            return
        for j, gen in zip(group, gens):
            j.future.set_result(gen)


# ------------------------------------------------------------------------------------------------ sessions
class Session:
    """One harness conversation: the recorded turns, their segments, and what the next request must extend."""

    def __init__(self, session_id: str):
        self.id = session_id
        self.turns: list[Turn] = []
        self.segments: list[Segment] = []
        self.messages: list[dict] = []  # the transcript: every request's new messages and every reply
        self.drift_events: list[dict] = []
        self.busy = False
        # what the next request must extend (None before the first turn)
        self.last_messages: list[dict] | None = None  # template form of the last request's messages
        self.last_reply: dict | None = None  # template form of the reply returned
        self.last_tools: list[dict] | None = None
        self.last_generation: Generation | None = None
        self.ids: list[int] = []  # last prompt + sampled ids: the current segment's sequence so far

    def trajectory(self, task_id: str = "harness", seed: int | None = None) -> Trajectory:
        """The recorded turns as a :class:`Trajectory` (reward, checks and termination are the runner's)."""
        prompt = self.segments[0].prompt_ids if self.segments else []  # no turn yet: one empty segment
        return Trajectory(
            task_id=task_id,
            seed=seed,
            prompt_ids=list(prompt),
            turns=list(self.turns),
            messages=list(self.messages),
            drift_events=list(self.drift_events),
            metadata={"session": self.id},
            segments=list(self.segments),
        )


@dataclass
class _Prepared:
    """A request's prompt, before the engine runs: whether it extends the session, and the bridge if so."""

    session: Session | None
    messages: list[dict]
    tools: list[dict] | None
    prompt: list[int]
    new_segment: str | None  # None: extends the session; else the segment's reason
    bridge_ids: list[int] = field(default_factory=list)
    routed_experts_start: int = 0
    new_messages: list[dict] = field(default_factory=list)
    drift: dict | None = None  # the bridge's repair (a non-prefix-preserving template), recorded with the turn


class _ToolTito(Tito):
    """Tito that renders the request's ``tools`` through the chat template as well."""

    def __init__(self, tokenizer, chat_template, tools):
        super().__init__(tokenizer, chat_template, on_non_prefix="repair")
        self.tools = tools

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools or None,
            chat_template=self.chat_template,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
        )


# ------------------------------------------------------------------------------------------------ the server
class PolicyServer:
    """The endpoint: an app (``self.app``) plus the engine thread and the sessions. See the module docstring.

    Args:
        engine: the policy engine (``HFEngine``, ``SGLangEngine``).
        tokenizer: the model's tokenizer (its chat template renders the prompts).
        model_name: the id ``/v1/models`` lists.
        sampling: defaults for fields a request leaves out (``max_new_tokens``, temperature, ...).
        pin_sampling: use ``sampling``'s temperature, top-p and top-k whatever a request asks, and at most its
            ``max_new_tokens``: a trainer needs the sampler's distribution to be the one it scores with.
        seed_for: ``seed_for(session_id, turn_index) -> seed | None``: the sampling seed of a session's turn when
            the request gives none (the harness runner's per-episode streams).
        chat_template: a Jinja template that overrides the tokenizer's.
        max_context_tokens: refuse a request whose prompt plus ``max_tokens`` would exceed this.
        max_turns: refuse a session's requests after this many recorded turns.
        return_routed_experts: record MoE routing (default: when the engine reports MoE layers).
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer,
        model_name: str = "t1-policy",
        sampling: SamplingParams | None = None,
        pin_sampling: bool = False,
        seed_for: Callable[[str, int], int | None] | None = None,
        chat_template: str | None = None,
        max_context_tokens: int | None = None,
        max_turns: int | None = None,
        return_routed_experts: bool | None = None,
    ):
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.sampling = sampling or SamplingParams()
        self.pin_sampling = pin_sampling
        self.seed_for = seed_for
        self.chat_template = chat_template
        self.max_context_tokens = max_context_tokens or getattr(engine, "max_context_length", None)
        self.max_turns = max_turns
        if return_routed_experts is None:
            return_routed_experts = bool(getattr(engine, "moe_layers", None))
        self.return_routed_experts = return_routed_experts
        Tito(tokenizer, chat_template)  # no chat template: fail now, with Tito's advice
        self.sessions: dict[str, Session] = {}
        self.shells: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._engine_thread: EngineThread | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url: str | None = None
        self.app = self._build_app()

    # ---------------------------------------------------------------- lifecycle
    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve in a background thread; return the base URL (``http://host:port``; port 0 picks a free one)."""
        self._engine_thread = EngineThread(self.engine, self.return_routed_experts)
        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="t1-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"t1train serve: the server did not start on {host}:{port}")
            time.sleep(0.01)
        bound = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{host}:{bound}"
        return self.url

    def serve_forever(self, host: str, port: int) -> None:
        """Serve in this thread until interrupted (``t1train serve``)."""
        self._engine_thread = EngineThread(self.engine, self.return_routed_experts)
        self.url = f"http://{host}:{port}"
        try:
            uvicorn.run(self.app, host=host, port=port, log_level="info", lifespan="off")
        finally:
            self._engine_thread.close()

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
            self._server = None
        if self._engine_thread is not None:
            self._engine_thread.close()
            self._engine_thread = None

    def __enter__(self) -> PolicyServer:
        if self.url is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def session_url(self, session_id: str) -> str:
        """The ``base_url`` that puts every request of an OpenAI client into ``session_id``."""
        return f"{self.url}/t1/s/{session_id}/v1"

    # ---------------------------------------------------------------- sessions (Python side)
    def trajectory(self, session_id: str, task_id: str = "harness", seed: int | None = None) -> Trajectory:
        with self._lock:
            session = self.sessions.get(session_id)
            if session is None:
                raise KeyError(f"no session {session_id!r}: it made no request, or was dropped")
            return session.trajectory(task_id, seed)

    def drop(self, session_id: str) -> None:
        with self._lock:
            self.sessions.pop(session_id, None)
            self.shells.pop(session_id, None)

    def attach_shell(self, session_id: str, shell) -> None:
        """Give ``session_id`` a shell: ``shell.exec(command, timeout) -> dict`` and ``shell.submit() -> dict``
        answer ``POST /t1/sessions/{id}/exec`` and ``/submit``."""
        with self._lock:
            self.shells[session_id] = shell

    # ---------------------------------------------------------------- the app
    def _build_app(self) -> FastAPI:
        app = FastAPI(title="t1train serve", docs_url=None, redoc_url=None, openapi_url=None)

        @app.exception_handler(APIError)
        async def api_error(request: Request, err: APIError):
            return err.response()

        @app.exception_handler(Exception)
        async def server_error(request: Request, err: Exception):
            log.exception("t1train serve: %s %s failed", request.method, request.url.path)
            return APIError(500, f"{type(err).__name__}: {err}").response()

        @app.exception_handler(RequestValidationError)
        async def bad_body(request: Request, err: RequestValidationError):
            first = err.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
            return APIError(400, f"{where}: {first.get('msg')}", where).response()

        @app.get("/v1/models")
        @app.get("/t1/s/{session}/v1/models")
        async def models(session: str | None = None):
            entry = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "t1"}
            return {"object": "list", "data": [entry]}

        @app.post("/v1/chat/completions")
        @app.post("/t1/s/{session}/v1/chat/completions")
        async def chat(body: ChatRequest, request: Request, session: str | None = None):
            session_id = session or request.headers.get(SESSION_HEADER) or body.user
            return await self._chat(body, session_id)

        @app.get("/t1/sessions/{session_id}")
        async def get_session(session_id: str):
            try:
                return self.trajectory(session_id).to_dict()
            except KeyError as err:
                raise APIError(404, str(err.args[0]), code="session_not_found") from None

        @app.delete("/t1/sessions/{session_id}")
        async def delete_session(session_id: str):
            self.drop(session_id)
            return {"deleted": session_id}

        @app.post("/t1/sessions/{session_id}/exec")
        def exec_command(session_id: str, body: ExecRequest):  # a plain def: the shell blocks, FastAPI runs it aside
            return self._shell(session_id).exec(body.command, body.timeout)

        @app.post("/t1/sessions/{session_id}/submit")
        def submit(session_id: str):
            return self._shell(session_id).submit()

        return app

    def _shell(self, session_id: str):
        shell = self.shells.get(session_id)
        if shell is None:
            raise APIError(
                404,
                f"session {session_id!r} has no shell: the exec/submit API exists for sessions a harness runner "
                "started (t1train/harness.py)",
                code="no_shell",
            )
        return shell

    # ---------------------------------------------------------------- one chat request
    async def _chat(self, body: ChatRequest, session_id: str | None):
        if body.n != 1:
            raise APIError(400, f"n: only n=1 is supported, got {body.n}; send n requests instead", "n")
        messages = template_messages(body.messages)
        tools = body.tools if body.tools and body.tool_choice != "none" else None
        for i, tool in enumerate(tools or []):
            if not isinstance(tool.get("function"), dict) or not isinstance(tool["function"].get("name"), str):
                raise APIError(400, f"tools[{i}] needs function.name (OpenAI format)", f"tools[{i}]")
        session = self._claim(session_id)
        try:
            sampling = self._sampling(body, session)
            prepared = self._prepare(session, messages, tools, sampling)
            future = self._engine_thread.submit(prepared.prompt, sampling, prepared.routed_experts_start)
            try:
                gen = await asyncio.wrap_future(future)
            except ValueError as err:  # the engine refused the request (e.g. its context is full)
                code = "context_length_exceeded" if "context" in str(err) else None
                raise APIError(400, str(err), "messages", code) from None
            if session is not None:
                self._record(prepared, gen)
        finally:
            if session is not None:
                session.busy = False
        return self._respond(body, prepared, gen, sampling)

    def _claim(self, session_id: str | None) -> Session | None:
        if session_id is None:
            return None
        with self._lock:
            session = self.sessions.setdefault(session_id, Session(session_id))
            if session.busy:
                raise APIError(
                    409,
                    f"session {session_id!r} already has a request in flight: a session is one conversation; "
                    "send its requests one at a time, or use one session per conversation",
                    code="session_busy",
                )
            if self.max_turns is not None and len(session.turns) >= self.max_turns:
                raise APIError(
                    400,
                    f"session {session_id!r} reached its limit of {self.max_turns} turns (rollout max_turns); "
                    "end the episode",
                    code="turn_limit",
                )
            session.busy = True
            return session

    def _sampling(self, body: ChatRequest, session: Session | None) -> SamplingParams:
        base = self.sampling
        asked = body.max_completion_tokens or body.max_tokens
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
        if self.pin_sampling:
            max_new = min(asked or base.max_new_tokens, base.max_new_tokens)
            temperature, top_p, top_k, seed = base.temperature, base.top_p, base.top_k, None
        else:
            max_new = asked or base.max_new_tokens
            temperature = base.temperature if body.temperature is None else body.temperature
            top_p = base.top_p if body.top_p is None else body.top_p
            top_k = base.top_k if body.top_k is None else body.top_k
            seed = body.seed
        if seed is None and session is not None and self.seed_for is not None:
            seed = self.seed_for(session.id, len(session.turns))
        if seed is None:
            seed = base.seed
        try:
            return SamplingParams(
                max_new_tokens=max_new,
                temperature=temperature,
                top_p=top_p,
                top_k=top_k,
                stop=stop + list(base.stop),
                stop_token_ids=list(base.stop_token_ids),
                seed=seed,
            )
        except ValueError as err:
            raise APIError(400, str(err)) from None

    def _prepare(
        self, session: Session | None, messages: list[dict], tools: list[dict] | None, sampling: SamplingParams
    ) -> _Prepared:
        tito = _ToolTito(self.tokenizer, self.chat_template, tools)
        prepared = None
        if session is not None and session.last_messages is not None:
            n = len(session.last_messages)
            extends = (
                len(messages) > n + 1
                and tools == session.last_tools
                and [_canonical(m) for m in messages[:n]] == [_canonical(m) for m in session.last_messages]
                and _canonical(messages[n]) == _canonical(session.last_reply)
            )
            if extends:
                new = messages[n + 1 :]
                bridge = tito.bridge(session.last_messages, session.last_generation, new, len(session.turns) - 1)
                last = session.turns[-1]
                prepared = _Prepared(
                    session,
                    messages,
                    tools,
                    session.ids + bridge.ids,
                    None,
                    bridge.ids,
                    routed_experts_start=max(0, last.prompt_len + len(last.sampled_ids) - 1),
                    new_messages=new,
                    drift=bridge.drift.to_dict() if bridge.drift is not None else None,
                )
        if prepared is None:
            reason = "start" if session is None or not session.turns else "non_prefix"
            prepared = _Prepared(session, messages, tools, tito.prompt_ids(messages), reason, new_messages=messages)
        limit = self.max_context_tokens
        if limit is not None and len(prepared.prompt) + sampling.max_new_tokens > limit:
            raise APIError(
                400,
                f"the prompt ({len(prepared.prompt)} tokens) plus max_tokens ({sampling.max_new_tokens}) exceeds the "
                f"context of {limit} tokens: shorten the conversation (a rewritten history starts a new segment)",
                "messages",
                "context_length_exceeded",
            )
        if not prepared.prompt:
            raise APIError(400, "the messages render to an empty prompt", "messages")
        return prepared

    def _record(self, prepared: _Prepared, gen: Generation) -> None:
        session = prepared.session
        with self._lock:
            if prepared.drift is not None:
                session.drift_events.append(prepared.drift)
            if prepared.new_segment is None:
                session.turns[-1].bridge_ids = list(prepared.bridge_ids)
                session.turns[-1].observation = "\n".join(m.get("content", "") for m in prepared.new_messages)
            elif prepared.new_segment == "start":
                session.segments = [Segment(list(prepared.prompt), 0, "start")]
            else:
                session.segments.append(Segment(list(prepared.prompt), len(session.turns), prepared.new_segment))
            turn = Turn.sampled(len(prepared.prompt), gen)
            session.turns.append(turn)
            session.messages.extend(prepared.new_messages)
            text, content, calls = self._reply_parts(gen, prepared.tools)
            reply = template_messages([self._assistant_message(content, calls)])[0]
            session.messages.append({"role": "assistant", "content": text})
            session.last_messages = prepared.messages
            session.last_reply = reply
            session.last_tools = prepared.tools
            session.last_generation = gen
            session.ids = list(prepared.prompt) + list(gen.token_ids)

    # ---------------------------------------------------------------- responses
    def _text(self, gen: Generation) -> str:
        text = self.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        if isinstance(gen.matched_stop, str) and gen.matched_stop in text:
            text = text[: text.index(gen.matched_stop)]  # OpenAI's stop: the text ends before the stop string
        return text

    def _reply_parts(self, gen: Generation, tools) -> tuple[str, str | None, list[dict]]:
        text = self._text(gen)
        if tools is None:
            return text, text, []
        content, calls = parse_tool_calls(text, tools)
        return text, content, calls

    @staticmethod
    def _assistant_message(content: str | None, calls: list[dict], ids: list[str] | None = None) -> dict:
        msg: dict = {"role": "assistant", "content": content}
        if calls:
            msg["tool_calls"] = [
                {
                    "id": (ids[i] if ids else f"call_{uuid.uuid4().hex[:12]}"),
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                }
                for i, c in enumerate(calls)
            ]
        return msg

    def _respond(self, body: ChatRequest, prepared: _Prepared, gen: Generation, sampling: SamplingParams):
        _, content, calls = self._reply_parts(gen, prepared.tools)
        message = self._assistant_message(content, calls)
        finish = "tool_calls" if calls else ("length" if gen.finish_reason == FINISH_LENGTH else "stop")
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        usage = {
            "prompt_tokens": len(prepared.prompt),
            "completion_tokens": len(gen.token_ids),
            "total_tokens": len(prepared.prompt) + len(gen.token_ids),
        }
        t1 = {
            "weight_version": gen.weight_version,
            "prompt_tokens": len(prepared.prompt),
            "segment": prepared.new_segment or "extends",
            "session": prepared.session.id if prepared.session else None,
        }
        logprobs = self._logprobs(gen) if body.logprobs else None
        fingerprint = f"t1-w{gen.weight_version}"
        if not body.stream:
            choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}
            return JSONResponse(
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": body.model or self.model_name,
                    "system_fingerprint": fingerprint,
                    "choices": [choice],
                    "usage": usage,
                    "t1": t1,
                }
            )
        include_usage = bool((body.stream_options or {}).get("include_usage"))

        def chunk(delta: dict, finish_reason=None, lps=None, with_usage=False) -> str:
            data = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.model or self.model_name,
                "system_fingerprint": fingerprint,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": lps}],
            }
            if with_usage:
                data["choices"], data["usage"], data["t1"] = [], usage, t1
            return f"data: {json.dumps(data)}\n\n"

        def events():
            yield chunk({"role": "assistant", "content": ""})
            if calls:
                if content:
                    yield chunk({"content": content})
                deltas = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
                yield chunk({"tool_calls": deltas})
            else:
                for piece, lp in self._pieces(gen, content or ""):
                    yield chunk({"content": piece}, lps={"content": [lp]} if logprobs else None)
            yield chunk({}, finish)
            if include_usage:
                yield chunk({}, with_usage=True)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    def _pieces(self, gen: Generation, text: str):
        """The reply's text token by token (a token that ends inside a UTF-8 character waits for the next)."""
        shown = ""
        for i, (tok, lp) in enumerate(zip(gen.token_ids, gen.logprobs)):
            upto = self.tokenizer.decode(gen.token_ids[: i + 1], skip_special_tokens=True)
            if upto.endswith("\ufffd") or len(shown) >= len(text):
                continue
            piece = text[len(shown) : min(len(upto), len(text))]
            if piece:
                shown += piece
                yield piece, self._token_logprob(tok, lp)
        if len(shown) < len(text):  # undecodable bytes at the end: send what the plain reply has
            yield text[len(shown) :], self._token_logprob(gen.token_ids[-1], gen.logprobs[-1])

    def _token_logprob(self, token_id: int, logprob: float) -> dict:
        token = self.tokenizer.decode([token_id])
        return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}

    def _logprobs(self, gen: Generation) -> dict:
        return {"content": [self._token_logprob(t, lp) for t, lp in zip(gen.token_ids, gen.logprobs)]}

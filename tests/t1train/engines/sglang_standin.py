"""A STAND-IN for an SGLang server: a test double for :class:`t1train.engines.sglang.SGLangEngine`. It is not SGLang.

It lives in ``tests/`` (not in the wheel): it has a failure injector (``fail_next``), a hold for abort tests
(``hold_s``) and keeps every ``/generate`` body it receives (``requests``, never trimmed), which suit a test and
nothing else.

It serves the subset of SGLang's native HTTP API that :class:`t1train.engines.sglang.SGLangEngine` uses, with
the request and response schema of sglang 0.5.x (``GenerateReqInput`` in ``sglang/srt/managers/io_struct.py``,
the handlers in ``sglang/srt/entrypoints/http_server.py``), backed by an in-process :class:`HFEngine`:

* ``POST /generate`` — ``input_ids`` (one prompt or a batch), ``sampling_params``, ``return_logprob``,
  ``return_routed_experts`` + ``routed_experts_start_len`` (rows for positions ``[start_len, seqlen - 1)``, one
  slot per decoder layer with zeros for dense layers, as SGLang's capture buffer), ``rid``. Answers ``text``, ``output_ids`` and
  ``meta_info`` (``id``, ``finish_reason``, ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``,
  ``weight_version``, ``output_token_logprobs`` as ``[logprob, token_id, null]``, ``routed_experts`` as base64
  int32). ``text`` prompts and ``stream`` are refused with 400, as are prompts longer than the context.
* ``POST /abort_request`` — ``{"rid": ..., "abort_all": ...}``. A request is aborted if its rid is aborted before
  it answers; with ``hold_s`` > 0 each answer is held that long so a test can abort it in flight. An aborted
  request answers 200 with ``finish_reason={"type": "abort", ...}`` and the first half of its ids.
* ``POST /update_weights_from_disk``, ``GET /health``, ``GET /model_info``, ``POST /flush_cache``,
  ``POST /pause_generation``, ``POST /continue_generation``.

Requests are served one at a time (the HF engine holds a lock); there is no continuous batching or radix cache.
``fail_next(status, body)`` makes the next request answer with an error, for testing client error handling.

Tests import it relatively (``from .engines.sglang_standin import StandInSGLangServer``). For a CPU smoke run of
the SGLang client from a source checkout, serve the tiny model with it::

    python tests/t1train/engines/sglang_standin.py --model tiny --port 30000
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from t1train.engines.base import FINISH_ABORT, FINISH_LENGTH, Generation, SamplingParams
from t1train.engines.hf import HFEngine
from t1train.engines.sglang import encode_routed_experts

_SAMPLING_KEYS = {
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "sampling_seed",
    "skip_special_tokens",
    "no_stop_trim",
    "min_p",
    "n",
}


class _BadRequest(ValueError):
    pass


class StandInSGLangServer:
    """See the module docstring. Use as a context manager; ``url`` is the base URL."""

    def __init__(
        self, engine: HFEngine, host: str = "127.0.0.1", port: int = 0, hold_s: float = 0.0, model_path: str = "tiny"
    ):
        self.engine = engine
        self.hold_s = hold_s
        self.model_path = model_path
        self.aborted: set[str] = set()
        self.abort_all_before = 0.0
        self.requests: list[dict] = []  # every /generate body received, for tests
        self._fail: list[tuple[int, dict]] = []
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, status: int, body: dict | None = None) -> None:
        """Answer the next request (any endpoint) with ``status`` and ``body``."""
        self._fail.append((status, body if body is not None else {"error": {"message": "injected failure"}}))

    def start(self) -> StandInSGLangServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---------------------------------------------------------------- /generate
    def _sampling(self, params: dict) -> SamplingParams:
        unknown = set(params) - _SAMPLING_KEYS
        if unknown:
            raise _BadRequest(f"unknown sampling params: {sorted(unknown)}")
        top_k = params.get("top_k", -1)
        try:
            return SamplingParams(
                max_new_tokens=params.get("max_new_tokens", 128),
                temperature=params.get("temperature", 1.0),
                top_p=params.get("top_p", 1.0),
                top_k=-1 if top_k >= 1 << 30 else top_k,
                stop=params.get("stop") or [],
                stop_token_ids=params.get("stop_token_ids") or [],
                ignore_eos=params.get("ignore_eos", False),
                seed=params.get("sampling_seed"),
            )
        except (TypeError, ValueError) as err:
            raise _BadRequest(str(err)) from err

    def _is_aborted(self, rid: str, t_arrival: float) -> bool:
        return rid in self.aborted or self.abort_all_before > t_arrival

    def generate(self, body: dict) -> dict | list:
        t_arrival = time.monotonic()
        if not isinstance(body, dict):
            raise _BadRequest("the request body must be a JSON object")
        if body.get("text") is not None or body.get("input_ids") is None:
            raise _BadRequest("this stand-in serves `input_ids` only (send token ids, not text)")
        if body.get("stream"):
            raise _BadRequest("this stand-in does not stream")
        ids = body["input_ids"]
        batch = bool(ids) and isinstance(ids[0], list)
        prompts = ids if batch else [ids]
        if not prompts or not all(isinstance(p, list) and p and all(isinstance(t, int) for t in p) for p in prompts):
            raise _BadRequest("input_ids must be a non-empty list of ints (or a list of such lists)")
        limit = self.engine.max_context_length
        for p in prompts:
            if limit is not None and len(p) >= limit:
                raise _BadRequest(
                    f"The input ({len(p)} tokens) is longer than the model's context length ({limit} tokens)."
                )
        sampling = self._sampling(body.get("sampling_params") or {})
        routed = bool(body.get("return_routed_experts"))
        start_len = int(body.get("routed_experts_start_len", 0))
        if routed and not all(0 <= start_len <= len(p) for p in prompts):
            raise _BadRequest(f"routed_experts_start_len={start_len} must be in [0, prompt_tokens]")
        rids = body.get("rid") or [f"standin-{time.monotonic_ns()}-{i}" for i in range(len(prompts))]
        rids = [f"{rids}-{i}" for i in range(len(prompts))] if batch and isinstance(rids, str) else rids
        rids = rids if isinstance(rids, list) else [rids]

        gens = self.engine.generate(
            prompts,
            sampling,
            return_routed_experts=routed,
            routed_experts_start=[min(start_len, len(p) - 1) for p in prompts] if routed else None,
        )
        if self.hold_s:
            deadline = time.monotonic() + self.hold_s
            while time.monotonic() < deadline and not all(self._is_aborted(r, t_arrival) for r in rids):
                time.sleep(0.01)
        outs = []
        for prompt, gen, rid in zip(prompts, gens, rids):
            if self._is_aborted(rid, t_arrival):
                keep = len(gen.token_ids) // 2
                gen = Generation(
                    gen.token_ids[:keep],
                    gen.logprobs[:keep],
                    FINISH_ABORT,
                    None,
                    gen.routed_experts[:keep] if gen.routed_experts and keep else None,
                    gen.weight_version,
                    gen.prompt_routed_experts,
                    gen.routed_experts_start,
                )
            outs.append(self._response(prompt, gen, rid, body, routed, start_len))
        return outs if batch else outs[0]

    def _response(self, prompt, gen: Generation, rid, body, routed, start_len) -> dict:
        if gen.finish_reason == FINISH_ABORT:
            finish = {"type": "abort", "message": "Abort in waiting queue", "status_code": None, "err_type": None}
        elif gen.finish_reason == FINISH_LENGTH:
            finish = {"type": "length", "length": len(gen.token_ids)}
        else:
            finish = {"type": "stop", "matched": gen.matched_stop}
        meta = {
            "id": rid,
            "finish_reason": finish,
            "prompt_tokens": len(prompt),
            "weight_version": self.engine.weight_version,
            "completion_tokens": len(gen.token_ids),
            "cached_tokens": 0,
        }
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [[lp, tok, None] for lp, tok in zip(gen.logprobs, gen.token_ids)]
            meta["input_token_logprobs"] = []
            meta["output_token_logprobs_length"] = len(gen.token_ids)
        if routed and gen.routed_experts is not None:
            meta["routed_experts"] = self._engine_layer_rows(gen, start_len)
        text = self.engine.tokenizer.decode(gen.token_ids) if self.engine.tokenizer is not None else ""
        return {"text": text, "output_ids": list(gen.token_ids), "meta_info": meta}

    def _engine_layer_rows(self, gen: Generation, start_len: int) -> str:
        """SGLang's layout: rows for positions ``[start_len, seqlen - 1)``, one slot per decoder layer (dense layers
        included, zeros there, as in SGLang's capture buffer), base64 int32."""
        rows = np.asarray((gen.prompt_routed_experts or []) + gen.routed_experts, dtype=np.int32)
        rows = rows[start_len - gen.routed_experts_start :]  # start_len == prompt_tokens drops the first row
        num_layers = self.engine.model.config.num_hidden_layers
        table = np.zeros((rows.shape[0], num_layers, rows.shape[2]), dtype=np.int32)
        table[:, [layer.layer_index for layer in self.engine.moe_layers]] = rows
        return encode_routed_experts(table)

    # ---------------------------------------------------------------- HTTP plumbing
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload=None):
                data = b"" if payload is None else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. its timeout)
                    self.close_connection = True

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                return json.loads(raw) if raw else {}

            def _route(self, method: str):
                try:
                    body = self._body() if method == "POST" else {}
                except json.JSONDecodeError as err:
                    return self._send(400, {"error": {"message": f"invalid JSON: {err}"}})
                if server._fail:
                    status, payload = server._fail.pop(0)
                    return self._send(status, payload)
                path = self.path.split("?")[0]
                try:
                    if path in ("/health", "/health_generate"):
                        return self._send(200)
                    if path in ("/model_info", "/get_model_info"):
                        return self._send(
                            200,
                            {
                                "model_path": server.model_path,
                                "is_generation": True,
                                "weight_version": server.engine.weight_version,
                            },
                        )
                    if method == "POST" and path == "/generate":
                        server.requests.append(body)
                        return self._send(200, server.generate(body))
                    if method == "POST" and path == "/abort_request":
                        if body.get("abort_all"):
                            server.abort_all_before = time.monotonic()
                        elif body.get("rid"):
                            server.aborted.add(body["rid"])
                        return self._send(200)
                    if method == "POST" and path == "/update_weights_from_disk":
                        try:
                            server.engine.update_weights_from_disk(body["model_path"], body.get("weight_version"))
                        except (KeyError, OSError, RuntimeError) as err:
                            return self._send(
                                400,
                                {
                                    "success": False,
                                    "message": f"Failed to update weights: {err}",
                                    "num_paused_requests": 0,
                                },
                            )
                        return self._send(
                            200,
                            {
                                "success": True,
                                "message": "Succeeded to update model weights.",
                                "num_paused_requests": 0,
                            },
                        )
                    if path == "/flush_cache":
                        return self._send(200)
                    if method == "POST" and path in ("/pause_generation", "/continue_generation"):
                        return self._send(200, {"message": "ok", "status": "ok"})
                    return self._send(404, {"detail": "Not Found"})
                except _BadRequest as err:
                    return self._send(400, {"error": {"message": str(err)}})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

        return Handler


def main(argv: list[str] | None = None) -> None:
    from t1train.models import load_model_and_tokenizer

    parser = argparse.ArgumentParser(description="Serve a model with the SGLang-compatible stand-in (not SGLang).")
    parser.add_argument("--model", default="tiny", help="'tiny' or a local model folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    model, tokenizer = load_model_and_tokenizer(args.model, args.device)
    server = StandInSGLangServer(HFEngine(model, tokenizer), args.host, args.port, model_path=args.model)
    print(f"stand-in SGLang server (not SGLang) on {server.url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

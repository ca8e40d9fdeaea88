"""SGLangEngine: a client for SGLang's native HTTP API (``/generate`` with token ids, weight updates).

The protocol, as read from the sglang package source (0.5.x: ``sglang/srt/managers/io_struct.py``
``GenerateReqInput``, ``sglang/srt/entrypoints/http_server.py``, ``sglang/srt/managers/tokenizer_manager.py``):

Request ``POST /generate`` (one request per prompt here, so each has its own ``rid`` and can be aborted)::

    {"rid": "t1-…", "input_ids": [..], "return_logprob": true, "logprob_start_len": -1,
     "sampling_params": {"max_new_tokens": .., "temperature": .., "top_p": .., "top_k": .., "stop": [..],
                         "stop_token_ids": [..], "ignore_eos": .., "sampling_seed": .., "skip_special_tokens": false,
                         "no_stop_trim": true},
     "return_routed_experts": true, "routed_experts_start_len": len(input_ids) - 1}   # routing only if asked

Response (HTTP 200)::

    {"text": "...", "output_ids": [..],
     "meta_info": {"id": rid, "finish_reason": {"type": "stop", "matched": 151645} | {"type": "length", "length": n}
                                               | {"type": "abort", "message": ...},
                   "prompt_tokens": .., "completion_tokens": .., "cached_tokens": .., "weight_version": "..",
                   "output_token_logprobs": [[logprob, token_id, null], ...],
                   "routed_experts": "<base64 of int32 [rows, layers, top_k]>"}}

The sampled ids are taken from ``output_token_logprobs`` (one entry per sampled token, in order) and checked
against ``output_ids``. Routed experts cover positions ``[routed_experts_start_len, seqlen - 1)`` (no row for the
last token, which no forward pass consumed), one slot per decoder layer: starting at the last prompt position gives
one row per sampled token, the row of the forward pass that produced it; an earlier start adds the rows of prompt
positions (``Generation.prompt_routed_experts``), which multi-turn rollouts use to cover the bridge tokens since the
previous turn. ``moe_layers`` maps the engine's decoder layers to MoE layers (dense layers dropped).

Errors: a rejected request answers 4xx/5xx with ``{"error": {"message": ...}}`` (FastAPI validation errors use
``{"detail": ...}``); these raise :class:`EngineError`. A request aborted with ``/abort_request`` answers 200 with
``finish_reason.type == "abort"`` and the ids sampled so far; it is returned as a ``Generation`` with
``finish_reason="abort"`` (the rollout loop ends that episode as ``aborted``). Failed connections and 502/503/504
answers are retried with backoff (urllib3's ``Retry``, mounted on the session); a request the server has accepted
is not sent again after a read error or timeout (sampling is not idempotent, and a request that timed out would
time out again). Every transport failure is an :class:`EngineError`.

Sampler log-probs: SGLang reports ``log_softmax(logits / temperature)`` before top-k/top-p (see
``t1train/engines/base.py``). Run the server with the same model the trainer holds, and update its weights with
:meth:`SGLangEngine.update_weights_from_disk` (or the NCCL path, :meth:`init_weights_update_group` +
:meth:`update_weights_from_distributed`) after each optimizer step.
"""

from __future__ import annotations

import base64
import dataclasses
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import requests
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from t1train.engines.base import (
    FINISH_ABORT,
    FINISH_LENGTH,
    FINISH_STOP,
    EngineError,
    Generation,
    SamplingParams,
)

_RETRY_STATUS = (502, 503, 504)


def decode_routed_experts(
    data: str, rows: int, top_k: int | None = None, moe_layers: list[int] | None = None
) -> list[list[list[int]]]:
    """Decode SGLang's base64 int32 routing into ``[rows, layers, top_k]``.

    SGLang writes one slot per *engine* layer (``num_hidden_layers``, dense layers included, their slots
    meaningless). ``moe_layers`` (engine-layer indices of the MoE layers, ``t1train.r3.moe_layer_indices(config)``)
    keeps only those, in order; None keeps every layer (the layer count is inferred from the size).
    """
    flat = np.frombuffer(base64.b64decode(data), dtype=np.int32)
    if rows == 0:
        if flat.size:
            raise EngineError(f"routed_experts has {flat.size} values but no row was expected")
        return []
    if flat.size % rows:
        raise EngineError(
            f"routed_experts has {flat.size} values, not a multiple of {rows} rows; SGLang sends "
            "one row per position in [routed_experts_start_len, seqlen - 1)"
        )
    per_row = flat.size // rows
    k = top_k or per_row
    if per_row % k:
        raise EngineError(f"routed_experts row of {per_row} values is not a multiple of top_k={k}")
    table = flat.reshape(rows, per_row // k, k)
    if moe_layers is not None:
        if max(moe_layers, default=-1) >= table.shape[1]:
            raise EngineError(
                f"routed_experts has {table.shape[1]} layers but moe_layers names layer "
                f"{max(moe_layers)}; is the server running the same model?"
            )
        table = table[:, moe_layers]
    return table.tolist()


def encode_routed_experts(rows: list[list[list[int]]]) -> str:
    """The inverse of :func:`decode_routed_experts` (SGLang's wire format)."""
    return base64.b64encode(np.asarray(rows, dtype=np.int32).tobytes()).decode("ascii")


class SGLangEngine:
    """Client for an SGLang server's native API.

    Args:
        url: base URL, e.g. ``http://127.0.0.1:30000``.
        max_concurrency: requests in flight at once (SGLang batches them continuously).
        timeout: seconds per request.
        retries: how many times a request is sent again after a failed connection or a 502/503/504 answer, with
            backoff (0: sent once).
        top_k_experts: the model's experts per token, to shape routed experts (``num_experts_per_tok``);
            None treats each row as one layer.
        moe_layers: engine-layer indices of the MoE layers (``t1train.r3.moe_layer_indices(config)``): SGLang
            returns a slot per decoder layer, dense ones included; None keeps them all.
        api_key: sent as ``Authorization: Bearer`` when the server requires one.

    Example:
        >>> engine = SGLangEngine("http://127.0.0.1:30000")  # doctest: +SKIP
        >>> engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=8))  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        max_concurrency: int = 64,
        timeout: float = 600.0,
        retries: int = 3,
        top_k_experts: int | None = None,
        api_key: str | None = None,
        moe_layers: list[int] | None = None,
    ):
        if max_concurrency < 1 or retries < 0:
            raise ValueError(f"max_concurrency must be >= 1 and retries >= 0, got {max_concurrency} and {retries}")
        self.url = url.rstrip("/")
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.retries = retries
        self.top_k_experts = top_k_experts
        self.moe_layers = moe_layers
        self.session = requests.Session()
        # one pooled connection per request in flight (requests' default pool keeps 10 and drops the rest), and
        # retries of failed connections and 502/503/504 for every method (/generate is a POST)
        retry = Retry(
            total=retries,
            connect=retries,
            read=False,
            status=retries,
            other=0,
            status_forcelist=_RETRY_STATUS,
            allowed_methods=None,
            backoff_factor=0.5,
            raise_on_status=False,
        )
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max_concurrency, max_retries=retry)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency)

    # ---------------------------------------------------------------- HTTP
    def _call(self, method: str, path: str, body: dict | None = None, timeout: float | None = None):
        timeout = timeout or self.timeout
        try:
            resp = self.session.request(method, self.url + path, json=body, timeout=timeout)
        except requests.ConnectionError as err:  # after the retries
            raise EngineError(
                f"SGLang server at {self.url} is unreachable ({err}); is it running? Check with "
                f"`curl {self.url}/health`."
            ) from err
        except requests.Timeout as err:
            raise EngineError(
                f"SGLang {path} did not answer within {timeout:g}s (raise the engine timeout for long generations)"
            ) from err
        except requests.RequestException as err:
            raise EngineError(f"SGLang {path} failed: {err}") from err
        if resp.status_code >= 400:
            after = f" after {self.retries} retries" if resp.status_code in _RETRY_STATUS and self.retries else ""
            raise EngineError(f"SGLang {path} returned HTTP {resp.status_code}{after}: {_error_message(resp)}")
        return resp.json() if resp.content else None

    # ---------------------------------------------------------------- generation
    def request_body(
        self,
        prompt: list[int],
        sampling: SamplingParams,
        rid: str,
        return_routed_experts: bool,
        routed_experts_start: int | None = None,
    ) -> dict:
        params = {
            "max_new_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "ignore_eos": sampling.ignore_eos,
            "skip_special_tokens": False,
            "no_stop_trim": True,
        }
        if sampling.stop:
            params["stop"] = list(sampling.stop)
        if sampling.stop_token_ids:
            params["stop_token_ids"] = list(sampling.stop_token_ids)
        if sampling.seed is not None:
            params["sampling_seed"] = sampling.seed
        body = {
            "rid": rid,
            "input_ids": list(prompt),
            "sampling_params": params,
            "return_logprob": True,
            "logprob_start_len": -1,
            "stream": False,
        }
        if return_routed_experts:
            body["return_routed_experts"] = True
            body["routed_experts_start_len"] = len(prompt) - 1 if routed_experts_start is None else routed_experts_start
        return body

    def parse_response(
        self,
        data: dict,
        return_routed_experts: bool,
        prompt_len: int | None = None,
        routed_experts_start: int | None = None,
    ) -> Generation:
        """Turn one ``/generate`` response into a Generation (validating the fields TITO relies on)."""
        try:
            meta = data["meta_info"]
            entries = meta["output_token_logprobs"]
            finish = meta["finish_reason"]
        except (KeyError, TypeError) as err:
            raise EngineError(
                f"SGLang response lacks {err}; was return_logprob sent? got keys "
                f"{sorted(data) if isinstance(data, dict) else type(data).__name__}"
            ) from err
        ids = [int(e[1]) for e in entries]
        logprobs = [float(e[0]) for e in entries]
        if "output_ids" in data and list(data["output_ids"]) != ids:
            raise EngineError(
                "SGLang output_ids disagree with output_token_logprobs; refusing to guess which ids were sampled"
            )
        if not isinstance(finish, dict) or "type" not in finish:
            raise EngineError(f"SGLang finish_reason {finish!r} is not a finished request")
        kind = finish["type"]
        if kind == "stop":
            reason, matched = FINISH_STOP, finish.get("matched")
        elif kind == "length":
            reason, matched = FINISH_LENGTH, None
        elif kind == "abort":
            reason, matched = FINISH_ABORT, finish.get("message")
        else:
            raise EngineError(f"unknown SGLang finish_reason type {kind!r}")
        gen = Generation(ids, logprobs, reason, matched, None, meta.get("weight_version"))
        if return_routed_experts and meta.get("routed_experts") and ids:
            # rows cover positions [start, prompt_len + len(ids) - 1): the prompt's, then one per sampled token
            prompt_len = prompt_len if prompt_len is not None else int(meta.get("prompt_tokens", 0))
            start = prompt_len - 1 if routed_experts_start is None else routed_experts_start
            prompt_rows = prompt_len - 1 - start
            rows = decode_routed_experts(
                meta["routed_experts"], prompt_rows + len(ids), self.top_k_experts, self.moe_layers
            )
            gen.routed_experts = rows[prompt_rows:]
            gen.prompt_routed_experts, gen.routed_experts_start = rows[:prompt_rows], start
        return gen

    def _generate_one(self, prompt, sampling, return_routed_experts, start) -> Generation:
        rid = f"t1-{uuid.uuid4().hex}"
        data = self._call("POST", "/generate", self.request_body(prompt, sampling, rid, return_routed_experts, start))
        return self.parse_response(data, return_routed_experts, len(prompt), start)

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingParams,
        return_routed_experts: bool = False,
        routed_experts_start: list[int] | None = None,
        seeds: list[int] | None = None,
    ) -> list[Generation]:
        """Sample one continuation per prompt, one request each (see ``Engine.generate``); ``seeds[i]`` becomes
        request ``i``'s ``sampling_seed``."""
        starts = routed_experts_start if routed_experts_start is not None else [None] * len(prompts)
        if len(starts) != len(prompts):
            raise ValueError(f"{len(starts)} routed_experts_start values for {len(prompts)} prompts")
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        per_prompt = (
            [dataclasses.replace(sampling, seed=s) for s in seeds] if seeds is not None else [sampling] * len(prompts)
        )
        futures = [
            self._pool.submit(self._generate_one, p, sp, return_routed_experts, s)
            for p, sp, s in zip(prompts, per_prompt, starts)
        ]
        return [f.result() for f in futures]

    # ---------------------------------------------------------------- server control
    def health(self) -> bool:
        """One probe, not retried (``wait_until_ready`` polls it)."""
        try:
            requests.get(self.url + "/health", headers=self.session.headers, timeout=10).raise_for_status()
            return True
        except requests.RequestException:
            return False

    def wait_until_ready(self, timeout: float = 600.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.health():
            if time.monotonic() > deadline:
                raise EngineError(f"SGLang server at {self.url} not healthy after {timeout:.0f}s")
            time.sleep(1.0)

    def model_info(self) -> dict:
        return self._call("GET", "/model_info")

    def abort(self, rid: str | None = None, abort_all: bool = False) -> None:
        """Abort one request (by rid) or all; their ``/generate`` calls return with ``finish_reason="abort"``."""
        self._call("POST", "/abort_request", {"rid": rid or "", "abort_all": abort_all})

    def flush_cache(self) -> None:
        self._call("POST", "/flush_cache")

    def pause_generation(self) -> None:
        self._call("POST", "/pause_generation", {})

    def continue_generation(self) -> None:
        self._call("POST", "/continue_generation", {})

    def update_weights_from_disk(
        self,
        path: str,
        weight_version: str | None = None,
        load_format: str | None = None,
        abort_all_requests: bool = False,
        flush_cache: bool = True,
    ) -> dict:
        """Reload weights from a ``save_pretrained`` folder the server can read. Raises on failure."""
        body = {"model_path": str(path), "abort_all_requests": abort_all_requests, "flush_cache": flush_cache}
        if weight_version is not None:
            body["weight_version"] = weight_version
        if load_format is not None:
            body["load_format"] = load_format
        result = self._call("POST", "/update_weights_from_disk", body)
        if not result or not result.get("success", False):
            raise EngineError(f"update_weights_from_disk failed: {result}")
        return result

    def init_weights_update_group(
        self,
        master_address: str,
        master_port: int,
        rank_offset: int,
        world_size: int,
        group_name: str = "weight_update_group",
        backend: str = "nccl",
    ) -> dict:
        """Join the trainer's process group for NCCL weight broadcasts (then use update_weights_from_distributed)."""
        body = {
            "master_address": master_address,
            "master_port": master_port,
            "rank_offset": rank_offset,
            "world_size": world_size,
            "group_name": group_name,
            "backend": backend,
        }
        return self._checked("/init_weights_update_group", body)

    def update_weights_from_distributed(
        self,
        names: list[str],
        dtypes: list[str],
        shapes: list[list[int]],
        group_name: str = "weight_update_group",
        weight_version: str | None = None,
        flush_cache: bool = True,
    ) -> dict:
        """Tell the server to receive the named tensors by broadcast from the trainer's rank 0."""
        body = {
            "names": names,
            "dtypes": dtypes,
            "shapes": shapes,
            "group_name": group_name,
            "flush_cache": flush_cache,
        }
        if weight_version is not None:
            body["weight_version"] = weight_version
        return self._checked("/update_weights_from_distributed", body)

    def _checked(self, path: str, body: dict) -> dict:
        result = self._call("POST", path, body)
        if not result or not result.get("success", False):
            raise EngineError(f"{path} failed: {result}")
        return result

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.session.close()


def _error_message(resp: requests.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:500]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            return str(err.get("message", err))
        if err is not None:
            return str(err)
    return str(data)[:500]

"""R3, rollout routing replay: the trainer's forward uses the experts the sampler chose.

In a Mixture-of-Experts model each MoE layer sends every token to its ``top_k`` highest-scoring experts. The sampler
(bf16, KV cache, its own kernels and batch shapes) and the trainer (fp32 or bf16, full forward) compute slightly
different router scores, so near-tie choices flip, and a flipped expert changes that token's log-prob a lot. R3
records the sampler's choices (``[tokens, moe_layers, top_k]``, see ``t1train/engines/base.py``) and, in the
trainer's forward, replaces each router's top-k *selection* with the recorded ids. The routing *weights* still
come from the live router: its probabilities gathered at the recorded ids and normalised as the family does, so
the router keeps receiving gradients.

Usage (trainer side)::

    replay = RoutingReplay(model)                # raises for a dense model (check_r3_supported)
    routing, mask = align_routing(rows, prompt_lengths, prompt_width, total_width)
    with replay.active(routing, mask, attention_mask):
        logits = model(input_ids, attention_mask=attention_mask).logits   # old log-probs, or the loss forward
        loss.backward()                                                   # checkpoint recompute replays too
    replay.metrics()   # {"r3/agreement": ..., "r3/fallback_tokens": ...}

* ``routing[b, t]`` holds the experts for the token ``input_ids[b, t]`` (the routing of that position's forward);
  ``mask[b, t]`` says whether it was recorded. Positions without recorded routing (padding, the last token of a
  sequence, an old trajectory) use live routing and are counted as fallbacks.
* Row chunks: forwards over consecutive row chunks inside one ``active`` block take consecutive rows (as TRL's
  ``_get_per_token_logps_and_entropies`` runs them); or slice ``routing``/``mask`` and enter ``active`` per chunk.
* Gradient checkpointing: a checkpointed decoder layer captures the routing of the forward that ran it, so its
  recomputation during backward replays the same ids even after the context has exited or another chunk has run.
* The reference model is never patched: ``RoutingReplay`` binds to one model instance, and outside ``active`` the
  routers run unchanged (compute reference log-probs outside the context when the reference shares the module).

Families
--------
One mechanism serves every transformers MoE family whose router is a module returning ``(router_logits,
routing_weights, selected_experts)`` (the ``*TopKRouter`` classes of transformers 5). :data:`FAMILIES` says, per
``config.model_type``, which class is the router and how its weights are normalised. To add a family:

1. Read ``transformers/models/<family>/modeling_<family>.py``: find the router class and its ``forward``.
2. If it computes ``softmax(logits)`` → ``topk`` → optional renormalisation over the k chosen, add a
   :class:`RouterFamily` entry: ``router_class``, ``normalizes`` (e.g. ``lambda r: r.norm_topk_prob``),
   ``weights_in_logits_dtype`` (True if it casts the weights back to the logits' dtype) and ``moe_layers`` (which
   decoder layers are MoE, from the config; needed to map SGLang's per-engine-layer rows). Anything else (sigmoid
   scores, expert bias, group-limited routing) needs its own ``scores``/``weights`` code here first.
3. Add the family's tiny config to ``tests/t1train/test_r3.py`` (``FAMILY_CONFIGS``): the tests check that replaying
   the live routing reproduces the unpatched logits exactly, that capture and replay agree, and that gradients flow.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------------- families
def _every_layer(config) -> list[int]:
    return list(range(config.num_hidden_layers))


def _qwen_moe_layers(config) -> list[int]:
    """Qwen2/3-MoE: MoE unless listed in ``mlp_only_layers``; every ``decoder_sparse_step``-th layer."""
    dense = set(getattr(config, "mlp_only_layers", None) or [])
    step = getattr(config, "decoder_sparse_step", 1) or 1
    return [
        i for i in range(config.num_hidden_layers) if i not in dense and config.num_experts > 0 and (i + 1) % step == 0
    ]


@dataclass(frozen=True)
class RouterFamily:
    """How one transformers MoE family routes (see the module docstring for the recipe)."""

    router_class: str
    """Class name of the router module (returns ``(logits, weights, indices)``)."""
    normalizes: Callable[[torch.nn.Module], bool]
    """Whether the k chosen probabilities are renormalised to sum to 1 (given the router module)."""
    weights_in_logits_dtype: bool
    """True if the family casts the routing weights back to the logits' dtype (Qwen), False if they stay fp32."""
    moe_layers: Callable[[object], list[int]]
    """Decoder-layer indices that are MoE layers, from the model config."""


FAMILIES: dict[str, RouterFamily] = {
    "qwen3_moe": RouterFamily("Qwen3MoeTopKRouter", lambda r: bool(r.norm_topk_prob), True, _qwen_moe_layers),
    "qwen2_moe": RouterFamily("Qwen2MoeTopKRouter", lambda r: bool(r.norm_topk_prob), True, _qwen_moe_layers),
    "olmoe": RouterFamily("OlmoeTopKRouter", lambda r: bool(r.norm_topk_prob), True, _every_layer),
    "mixtral": RouterFamily("MixtralTopKRouter", lambda r: True, False, _every_layer),
}

_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


@dataclass
class MoELayer:
    """One MoE layer of a model: its decoder-layer index and its router module."""

    layer_index: int
    router: torch.nn.Module
    family: RouterFamily


def model_family(model) -> RouterFamily | None:
    config = getattr(model, "config", None)
    return FAMILIES.get(getattr(config, "model_type", None))


def moe_layers(model: torch.nn.Module) -> list[MoELayer]:
    """The model's MoE layers in order, dense layers skipped. ``[]`` for a dense model or an unknown family."""
    family = model_family(model)
    if family is None:
        return []
    layers = []
    for name, module in model.named_modules():
        if type(module).__name__ == family.router_class:
            match = _LAYER_INDEX.search(name)
            if match is None:
                raise ValueError(f"router {name!r} is not under a `layers.<i>.` module; cannot map it to a layer")
            layers.append(MoELayer(int(match.group(1)), module, family))
    layers.sort(key=lambda m: m.layer_index)
    return layers


def check_r3_supported(model: torch.nn.Module) -> list[MoELayer]:
    """Return the model's MoE layers, or raise ``ValueError`` saying why R3 cannot run on it.

    Example:
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> dense = LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...                                      num_attention_heads=2, num_key_value_heads=1, vocab_size=32))
        >>> check_r3_supported(dense)
        Traceback (most recent call last):
        ...
        ValueError: r3 needs a Mixture-of-Experts model with a top-k router, but llama (LlamaForCausalLM) has none. Set r3: false for dense models; for an MoE family t1 does not know yet, add it to t1train/r3.py FAMILIES (recipe in the module docstring).
    """
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", type(model).__name__)
    routers = [n for n, m in model.named_modules() if type(m).__name__.endswith("TopKRouter")]
    layers = moe_layers(model)
    if layers:
        return layers
    if routers and model_family(model) is None:
        raise ValueError(
            f"r3 does not know the MoE family {model_type!r} (routers like {routers[0]!r} of class "
            f"{type(model.get_submodule(routers[0])).__name__}); add it to t1train/r3.py FAMILIES "
            "(recipe in the module docstring), or set r3: false"
        )
    raise ValueError(
        f"r3 needs a Mixture-of-Experts model with a top-k router, but {model_type} "
        f"({type(model).__name__}) has none. Set r3: false for dense models; for an MoE family t1 does "
        "not know yet, add it to t1train/r3.py FAMILIES (recipe in the module docstring)."
    )


def moe_layer_indices(config) -> list[int]:
    """Decoder-layer indices of the MoE layers, from a config alone (maps SGLang's per-layer rows)."""
    family = FAMILIES.get(getattr(config, "model_type", None))
    if family is None:
        raise ValueError(f"unknown MoE family {getattr(config, 'model_type', None)!r}; see t1train/r3.py FAMILIES")
    return family.moe_layers(config)


def engine_routing_shape(config) -> dict:
    """``top_k_experts`` and ``moe_layers`` for an engine client that reports routing per decoder layer (SGLang),
    from the model's config: ``SGLangEngine(url, **engine_routing_shape(config))``. A dense model or a family
    :data:`FAMILIES` does not know gets ``None`` for ``moe_layers`` (every reported layer is kept).

    Example:
        >>> from transformers import Qwen3MoeConfig
        >>> engine_routing_shape(Qwen3MoeConfig(num_hidden_layers=3, mlp_only_layers=[1], num_experts_per_tok=2))
        {'top_k_experts': 2, 'moe_layers': [0, 2]}
    """
    known = getattr(config, "model_type", None) in FAMILIES
    return {
        "top_k_experts": getattr(config, "num_experts_per_tok", None),
        "moe_layers": moe_layer_indices(config) if known else None,
    }


def routing_dtype(num_experts: int) -> torch.dtype:
    """int16 when expert ids fit (they do for every model up to 32767 experts), else int32."""
    return torch.int16 if num_experts <= torch.iinfo(torch.int16).max else torch.int32


# ---------------------------------------------------------------------------------------------------- alignment
def align_routing(
    samples: list,
    prompt_lengths: list[int],
    prompt_width: int,
    total_width: int,
    moe_layers_count: int | None = None,
    top_k: int | None = None,
):
    """Lay per-sequence routing out like TRL's batch: prompts left-padded, completions right-padded.

    Args:
        samples: per row, ``(rows, mask)`` for the whole sequence (prompt then completion): ``rows`` is
            ``[n, moe_layers, top_k]`` (tensor or nested lists), ``mask`` ``[n]`` (True where recorded); or None
            for a row without routing.
        prompt_lengths: each row's unpadded prompt length.
        prompt_width: the padded prompt width ``P`` (``prompt_ids.shape[1]``).
        total_width: ``P + C``, the width of ``torch.cat([prompt_ids, completion_ids], 1)``.

    Returns:
        ``(routing [B, total_width, L, k] int, mask [B, total_width] bool)``; padding positions are unrecorded.

    Example:
        >>> rows = torch.tensor([[[0, 1]], [[1, 2]], [[2, 3]]])  # 3 tokens, 1 MoE layer, top-2
        >>> routing, mask = align_routing([(rows, [True, True, False])], [2], prompt_width=3, total_width=5)
        >>> mask.tolist()
        [[False, True, True, False, False]]
        >>> routing[0, 1:3, 0].tolist()
        [[0, 1], [1, 2]]
    """
    present = [s for s in samples if s is not None]
    if present:
        first = torch.as_tensor(present[0][0])
        layers, k = first.shape[1], first.shape[2]
    elif moe_layers_count is not None and top_k is not None:
        layers, k = moe_layers_count, top_k
    else:
        raise ValueError("no row has routing; pass moe_layers_count and top_k to build an all-fallback batch")
    batch = len(samples)
    routing = torch.zeros((batch, total_width, layers, k), dtype=torch.int32)
    mask = torch.zeros((batch, total_width), dtype=torch.bool)
    for b, (sample, plen) in enumerate(zip(samples, prompt_lengths)):
        if sample is None:
            continue
        rows = torch.as_tensor(sample[0], dtype=torch.int32)
        rmask = torch.as_tensor(sample[1], dtype=torch.bool)
        n = rows.shape[0]
        if rmask.shape[0] != n:
            raise ValueError(f"row {b}: {n} routing rows but a mask of {rmask.shape[0]}")
        if plen > prompt_width or n - plen > total_width - prompt_width:
            raise ValueError(
                f"row {b}: {plen} prompt + {n - plen} completion tokens do not fit the batch "
                f"({prompt_width} + {total_width - prompt_width}); was the prompt or completion "
                "truncated? R3 needs the same tokens the sampler saw"
            )
        start = prompt_width - plen
        routing[b, start : start + n] = rows
        mask[b, start : start + n] = rmask
    return routing, mask


# ---------------------------------------------------------------------------------------------------- replay
class _Batch:
    """The routing of the forwards inside one ``active`` block, on the model's device.

    A forward over the whole batch uses all of it; forwards over row chunks (``[rows, T]``, in order, as TRL's
    ``_get_per_token_logps_and_entropies`` runs them) take consecutive rows, wrapping around at the end."""

    def __init__(self, indices: torch.Tensor, mask: torch.Tensor):
        self.indices = indices  # [L, B, T, k] long
        self.mask = mask  # [B, T] bool
        self.rows, self.seq = mask.shape
        self.offset = 0  # first row of the next chunk
        self.count = True  # False while a checkpointed layer recomputes (do not count twice)

    def take(self, layer: int, tokens: int, last_layer: bool):
        """``(indices [tokens, k], mask [tokens])`` for a router that sees ``tokens`` flattened tokens."""
        if tokens == self.rows * self.seq:
            return self.indices[layer].reshape(tokens, -1), self.mask.reshape(tokens)
        if tokens % self.seq or self.offset + tokens // self.seq > self.rows:
            raise ValueError(
                f"routing for [{self.rows}, {self.seq}] tokens (rows {self.offset}.. next) but a router "
                f"sees {tokens}; the routing tensor must have the shape of input_ids (or of the rows "
                "that the forwards run in chunks, in order)"
            )
        rows = tokens // self.seq
        span = slice(self.offset, self.offset + rows)
        if last_layer and self.count:
            self.offset = (self.offset + rows) % self.rows
        return self.indices[layer, span].reshape(tokens, -1), self.mask[span].reshape(tokens)

    def chunk(self, rows: int) -> _Batch:
        """The rows the next chunk will take, frozen (for a checkpointed layer's recomputation)."""
        if rows == self.rows:
            return self
        span = slice(self.offset, self.offset + rows)
        return _Batch(self.indices[:, span], self.mask[span])


class RoutingReplay:
    """Replays recorded expert ids in one transformers MoE model (see the module docstring).

    The routers are patched once, here; outside :meth:`active` they compute exactly what they did before.
    :meth:`remove` restores them.

    Example:
        >>> from t1train.models import tiny_moe
        >>> model, tok = tiny_moe()
        >>> replay = RoutingReplay(model)
        >>> ids = torch.tensor([tok.encode("ls -la")])
        >>> recorded = torch.zeros(1, ids.shape[1], len(replay.layers), 2, dtype=torch.int16)
        >>> recorded[..., 1] = 3                        # every token to experts 0 and 3
        >>> with replay.active(recorded):
        ...     _ = model(ids)
        >>> replay.metrics()["r3/fallback_tokens"]
        0
    """

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.layers = check_r3_supported(model)
        self.top_k = self.layers[0].router.top_k
        self._current: _Batch | None = None
        self._originals = []
        for i, layer in enumerate(self.layers):
            router = layer.router
            self._originals.append((router, router.__dict__.get("forward")))
            router.forward = self._replaying_forward(i, router, router.forward, layer.family)
        self._ckpt_layers = [
            m
            for m in model.modules()
            if hasattr(m, "_gradient_checkpointing_func") or hasattr(type(m), "gradient_checkpointing")
        ]
        self.reset_metrics()

    def remove(self) -> None:
        """Restore the original router forwards."""
        for router, original in self._originals:
            if original is None:
                del router.forward
            else:
                router.forward = original
        self._originals.clear()

    # ------------------------------------------------------------------ metrics
    def reset_metrics(self) -> None:
        self._tokens = 0
        self._fallback = 0
        self._agree = torch.zeros((), dtype=torch.long)
        self._token_layers = 0

    def metrics(self, reset: bool = True) -> dict:
        """``r3/agreement``: share of replayed token-layers whose live top-k set equals the recorded one (the
        routing mismatch R3 removes); ``r3/fallback_tokens``: real tokens routed live for lack of a record;
        ``r3/replayed_tokens``."""
        agree = int(self._agree)
        out = {
            "r3/agreement": agree / self._token_layers if self._token_layers else 1.0,
            "r3/fallback_tokens": self._fallback,
            "r3/replayed_tokens": self._tokens,
        }
        if reset:
            self.reset_metrics()
        return out

    # ------------------------------------------------------------------ the patch
    def _replaying_forward(self, i: int, router, original, family: RouterFamily):
        def forward(hidden_states):
            batch = self._current
            if batch is None:
                return original(hidden_states)
            hidden = hidden_states.reshape(-1, router.hidden_dim)
            logits = F.linear(hidden, router.weight, getattr(router, "bias", None))
            probs = torch.softmax(logits.float(), dim=-1)
            live = torch.topk(probs, router.top_k, dim=-1).indices
            recorded, mask = batch.take(i, hidden.shape[0], last_layer=i == len(self.layers) - 1)
            indices = torch.where(mask[:, None], recorded, live)
            weights = probs.gather(-1, indices)
            if family.normalizes(router):
                weights = weights / weights.sum(dim=-1, keepdim=True)
            if family.weights_in_logits_dtype:
                weights = weights.to(logits.dtype)
            if batch.count:
                same = (live.sort(-1).values == recorded.sort(-1).values).all(-1) & mask
                self._agree = self._agree.to(same.device) + same.sum()
            return logits, weights, indices

        return forward

    def _checkpointing(self, batch: _Batch):
        """Wrap each checkpointed layer's checkpoint function so its recomputation replays ``batch``."""
        wrapped = []
        for module in self._ckpt_layers:
            func = module.__dict__.get("_gradient_checkpointing_func")
            if func is None:
                continue

            def checkpoint(fn, *args, _func=func, **kwargs):
                hidden = args[0] if args and torch.is_tensor(args[0]) else None
                frozen = batch.chunk(hidden.shape[0]) if hidden is not None and hidden.dim() == 3 else batch
                calls = [0]

                def run(*a, **kw):
                    # the first call is the forward itself; later calls recompute it with the rows it used
                    current = batch if calls[0] == 0 else frozen
                    previous, self._current = self._current, current
                    saved = current.count
                    current.count = saved and calls[0] == 0
                    calls[0] += 1
                    try:
                        return fn(*a, **kw)
                    finally:
                        current.count = saved
                        self._current = previous

                return _func(run, *args, **kwargs)

            module._gradient_checkpointing_func = checkpoint
            wrapped.append((module, func))
        return wrapped

    @contextlib.contextmanager
    def active(self, routed_experts, mask=None, attention_mask=None):
        """Replay ``routed_experts`` (``[B, T, moe_layers, top_k]``, aligned with ``input_ids``) in the forwards
        run inside the block: over the whole batch, or over consecutive row chunks in order. ``mask`` ``[B, T]``
        marks recorded positions (default: all); ``attention_mask`` keeps padding out of the fallback count."""
        routed = torch.as_tensor(routed_experts)
        if routed.dim() != 4 or routed.shape[2] != len(self.layers) or routed.shape[3] != self.top_k:
            raise ValueError(
                f"routed experts of shape {tuple(routed.shape)}; expected [batch, seq, "
                f"{len(self.layers)} MoE layers, top_k={self.top_k}]"
            )
        batch_size, seq = routed.shape[:2]
        mask = torch.ones((batch_size, seq), dtype=torch.bool) if mask is None else torch.as_tensor(mask).bool()
        valid = torch.ones_like(mask) if attention_mask is None else torch.as_tensor(attention_mask).bool().cpu()
        if mask.shape != (batch_size, seq) or valid.shape != (batch_size, seq):
            raise ValueError(
                f"mask {tuple(mask.shape)} / attention_mask {tuple(valid.shape)} do not match the "
                f"routing's [batch, seq] = {(batch_size, seq)}"
            )
        device = self.layers[0].router.weight.device
        batch = _Batch(routed.to(device=device, dtype=torch.long).permute(2, 0, 1, 3), mask.to(device))
        cpu_mask = mask.cpu()
        self._tokens += int((cpu_mask & valid).sum())
        self._fallback += int((~cpu_mask & valid).sum())
        self._token_layers += int(cpu_mask.sum()) * len(self.layers)
        wrapped = self._checkpointing(batch)
        previous, self._current = self._current, batch
        try:
            yield self
        finally:
            self._current = previous
            for module, func in wrapped:
                module._gradient_checkpointing_func = func


# ---------------------------------------------------------------------------------------------------- capture
class RoutingRecorder:
    """Forward hooks that keep, per MoE layer, the expert ids its router chose in the latest forward pass.

    Used by ``HFEngine`` (capture in the sampler) and by tests and benches (what a forward actually routed).
    """

    def __init__(self, layers: list[MoELayer]):
        self.layers = layers
        self.latest: list[torch.Tensor | None] = [None] * len(layers)
        self._handles = []

    def __enter__(self):
        for i, layer in enumerate(self.layers):
            self._handles.append(layer.router.register_forward_hook(self._hook(i)))
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, i: int):
        def hook(module, args, output):
            self.latest[i] = output[-1].detach()  # (router_logits, routing_weights, selected_experts)

        return hook

    def stacked(self, batch: int, seq: int) -> torch.Tensor:
        """``[batch, seq, moe_layers, top_k]`` expert ids of the latest ``[batch, seq]`` forward, on CPU, int32."""
        return torch.stack([t.reshape(batch, seq, -1) for t in self.latest], dim=2).to("cpu", torch.int32)


def routing_agreement(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Share of token-layers whose top-k *sets* are equal in ``a`` and ``b`` (``[..., layers, top_k]``)."""
    same = (torch.as_tensor(a).sort(-1).values == torch.as_tensor(b).sort(-1).values).all(-1)  # [..., layers]
    if mask is not None:
        same = same[torch.as_tensor(mask).bool()]
    return float(same.float().mean()) if same.numel() else 1.0

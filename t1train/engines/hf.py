"""HFEngine: sampling with a transformers model in this process (CPU or GPU), batched, with a KV cache.

The decode loop is written out here rather than calling ``model.generate`` so that the engine controls exactly
which distribution each token is drawn from and returns that distribution's log-prob (see
``t1train/engines/base.py``), and so that it can record MoE routing (R3 capture, ``t1train/r3.py``): forward hooks
on the routers of the MoE layers (dense layers skipped) keep the expert ids of every forward; the prefill gives
the prompt positions' rows, each decode step the row of the position that produced the next token.

Prompts in a batch are left-padded; position ids are computed from the attention mask, so a padded prompt sees
the same positions as it would alone. Sequences that finish early keep receiving pad tokens (ignored) until the
whole batch is done.
"""

from __future__ import annotations

import inspect
import threading
from pathlib import Path

import torch

from t1train.engines.base import FINISH_LENGTH, FINISH_STOP, Generation, SamplingParams
from t1train.r3 import RoutingRecorder, moe_layers


def sample_from_logits(
    logits: torch.Tensor, sampling: SamplingParams, generator: torch.Generator | list[torch.Generator] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of ``logits`` ``[batch, vocab]``; return ``(token_ids, logprobs)``.

    The log-probs are those of the distribution sampled from: temperature, then top-k, then top-p, renormalized.
    Greedy (temperature 0) returns ``log_softmax(logits)`` of the argmax. ``generator`` is one generator for the
    whole batch or a list with one per row (each row then draws from its own stream).
    """
    logits = logits.float()
    if sampling.temperature == 0:
        tokens = logits.argmax(dim=-1)
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, tokens[:, None])[:, 0]
        return tokens, logprobs
    scores = logits / sampling.temperature
    if sampling.top_k > 0 and sampling.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampling.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
        probs = torch.softmax(sorted_scores, dim=-1)
        mass_before = torch.cumsum(probs, dim=-1) - probs  # mass of strictly more likely tokens
        drop_sorted = mass_before >= sampling.top_p  # never drops the most likely token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    logprobs_all = torch.log_softmax(scores, dim=-1)
    probs = logprobs_all.exp()
    if isinstance(generator, list):
        tokens = torch.cat([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(generator)])
    else:
        tokens = torch.multinomial(probs, 1, generator=generator)[:, 0]
    return tokens, logprobs_all.gather(-1, tokens[:, None])[:, 0]


class HFEngine:
    """In-process sampling with a transformers causal LM.

    Args:
        model: a causal LM (``AutoModelForCausalLM``), already on its device.
        tokenizer: needed for stop strings (to decode the tail of the output) and for the pad/eos ids.
        max_batch_size: prompts per forward pass; longer lists are split.
        seed: seed of the engine's generator, used when ``SamplingParams.seed`` is None.

    Example:
        >>> from t1train.models import tiny_moe
        >>> from t1train.engines.hf import HFEngine
        >>> from t1train.engines.base import SamplingParams
        >>> model, tokenizer = tiny_moe()
        >>> engine = HFEngine(model, tokenizer)
        >>> [g] = engine.generate([tokenizer.encode("ls")], SamplingParams(max_new_tokens=4, seed=0))
        >>> len(g.token_ids) == len(g.logprobs) <= 4
        True
    """

    max_concurrency = 1

    def __init__(self, model, tokenizer=None, max_batch_size: int = 32, seed: int = 0):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(self.device).manual_seed(seed)
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None:
            eos = model.config.eos_token_id
        self.eos_token_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = pad if pad is not None else next(iter(self.eos_token_ids), 0)
        self.max_context_length = getattr(model.config, "max_position_embeddings", None)
        self.moe_layers = moe_layers(model)
        # transformers 5.x renamed `past_key_values` to `cache`; support both spellings. Read the model class's own
        # forward: a PEFT wrapper's or a patched instance forward takes **kwargs and would hide the new name.
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        forward = inspect.signature(type(base).forward).parameters
        self._cache_kwarg = "cache" if "cache" in forward else "past_key_values"
        self.weight_version = "0"
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- generation
    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingParams,
        return_routed_experts: bool = False,
        routed_experts_start: list[int] | None = None,
        seeds: list[int] | None = None,
    ) -> list[Generation]:
        """Sample one continuation per prompt (``seeds``: one sampling seed per prompt). With
        ``return_routed_experts``, each Generation carries the rows of the sampled tokens and, from
        ``routed_experts_start[i]`` (a prompt position; default ``len(prompt) - 1``: none), the rows of the prompt
        positions before the last (see ``Generation.prompt_routed_experts``)."""
        if sampling.stop and self.tokenizer is None:
            raise ValueError("stop strings need a tokenizer: pass HFEngine(model, tokenizer)")
        for prompt in prompts:
            if not prompt:
                raise ValueError("empty prompt: a prompt needs at least one token id")
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        starts = _routing_starts(prompts, routed_experts_start)
        results: list[Generation] = []
        with self._lock, torch.inference_mode():
            generator = self.generator
            if sampling.seed is not None:
                generator = torch.Generator(self.device).manual_seed(sampling.seed)
            for start in range(0, len(prompts), self.max_batch_size):
                chunk = prompts[start : start + self.max_batch_size]
                chunk_starts = starts[start : start + self.max_batch_size]
                if seeds is not None:
                    generator = [
                        torch.Generator(self.device).manual_seed(s) for s in seeds[start : start + self.max_batch_size]
                    ]
                results.extend(self._generate_batch(chunk, sampling, generator, return_routed_experts, chunk_starts))
        return results

    def _generate_batch(self, prompts, sampling, generator, want_routing, starts) -> list[Generation]:
        batch = len(prompts)
        width = max(len(p) for p in prompts)
        budget = sampling.max_new_tokens
        if self.max_context_length is not None:
            budget = min(budget, self.max_context_length - width)
            if budget < 1:
                raise ValueError(
                    f"prompt of {width} tokens leaves no room in the {self.max_context_length}-token "
                    "context; end the episode before the context fills (rollout max_context_tokens)"
                )
        input_ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long, device=self.device)
        mask = torch.zeros((batch, width), dtype=torch.long, device=self.device)
        for i, p in enumerate(prompts):
            input_ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
        stop_ids = set(sampling.stop_token_ids) | (set() if sampling.ignore_eos else self.eos_token_ids)
        stop_tail = 4 * max((len(s) for s in sampling.stop), default=0) + 2

        out_ids: list[list[int]] = [[] for _ in range(batch)]
        out_lps: list[list[float]] = [[] for _ in range(batch)]
        out_routes: list[list[torch.Tensor]] = [[] for _ in range(batch)]
        finish: list[tuple[str, int | str | None] | None] = [None] * batch

        prompt_routes: list[list | None] = [None] * batch
        recorder = RoutingRecorder(self.moe_layers if want_routing else [])
        with recorder:
            cache = None
            step_ids = input_ids
            for step in range(budget):
                positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -step_ids.shape[1] :]
                out = self.model(
                    input_ids=step_ids,
                    attention_mask=mask,
                    position_ids=positions,
                    use_cache=True,
                    logits_to_keep=1,
                    **{self._cache_kwarg: cache},
                )
                cache = out.cache if self._cache_kwarg == "cache" else out.past_key_values
                tokens, logprobs = sample_from_logits(out.logits[:, -1], sampling, generator)
                routes = None
                if recorder.layers:
                    stacked = recorder.stacked(batch, step_ids.shape[1])  # [batch, seq, moe_layers, top_k]
                    routes = stacked[:, -1]
                    if step == 0:  # the prefill: prompt positions
                        for i, p in enumerate(prompts):
                            pad = width - len(p)
                            prompt_routes[i] = stacked[i, pad + starts[i] : pad + len(p) - 1].tolist()
                for i in range(batch):
                    if finish[i] is not None:
                        continue
                    tok = int(tokens[i])
                    out_ids[i].append(tok)
                    out_lps[i].append(float(logprobs[i]))
                    if routes is not None:
                        out_routes[i].append(routes[i])
                    if tok in stop_ids:
                        finish[i] = (FINISH_STOP, tok)
                    elif sampling.stop:
                        tail = self.tokenizer.decode(out_ids[i][-stop_tail:])
                        hit = next((s for s in sampling.stop if s in tail), None)
                        if hit is not None:
                            finish[i] = (FINISH_STOP, hit)
                if all(f is not None for f in finish):
                    break
                step_ids = tokens[:, None]
                mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=self.device)], dim=1)

        results = []
        for i in range(batch):
            reason, matched = finish[i] or (FINISH_LENGTH, None)
            routed = torch.stack(out_routes[i]).tolist() if out_routes[i] else None
            gen = Generation(out_ids[i], out_lps[i], reason, matched, routed, self.weight_version)
            if routed is not None:
                gen.prompt_routed_experts, gen.routed_experts_start = prompt_routes[i], starts[i]
            results.append(gen)
        return results

    # ---------------------------------------------------------------- weights
    def load_state_dict(self, state_dict: dict, weight_version: str | None = None) -> None:
        """Copy new weights in (for a trainer in the same process)."""
        with self._lock:
            self.model.load_state_dict(state_dict, strict=True)
            self.weight_version = weight_version or str(
                int(self.weight_version) + 1 if self.weight_version.isdigit() else self.weight_version
            )

    def update_weights_from_disk(self, path: str, weight_version: str | None = None) -> None:
        """Load a ``save_pretrained`` folder into the model, in place.

        The folder is read with ``from_pretrained`` (on CPU) so that transformers' checkpoint conversions apply
        (e.g. transformers 5 saves MoE experts per expert but holds them fused in memory)."""
        if not any(Path(path).glob("*.safetensors")) and not any(Path(path).glob("*.bin")):
            raise FileNotFoundError(f"no weight files in {path}; write them with model.save_pretrained()")
        fresh = type(self.model).from_pretrained(path, dtype=next(self.model.parameters()).dtype)
        self.load_state_dict(fresh.state_dict(), weight_version)
        del fresh


def _routing_starts(prompts: list[list[int]], starts: list[int] | None) -> list[int]:
    """Validate per-prompt routing start positions (default: the last prompt position, i.e. no prompt rows)."""
    if starts is None:
        return [len(p) - 1 for p in prompts]
    if len(starts) != len(prompts):
        raise ValueError(f"{len(starts)} routed_experts_start values for {len(prompts)} prompts")
    for p, s in zip(prompts, starts):
        if not 0 <= s <= len(p) - 1:
            raise ValueError(f"routed_experts_start {s} is outside the prompt [0, {len(p) - 1}]")
    return list(starts)

"""The Engine protocol: token ids in, token ids out.

An engine turns prompt token ids into sampled token ids. It never sees text: the rollout loop owns the chat
template and the tokenizer, so the ids the trainer scores are exactly the ids the engine sampled (TITO, see
``t1train/tito.py``).

Sampler log-probs
-----------------
``Generation.logprobs[i]`` is the log-probability of ``token_ids[i]`` under the distribution the engine actually
sampled from at that step:

* ``HFEngine``: the model's logits divided by ``temperature``, then restricted by ``top_k`` and ``top_p`` and
  renormalized. With ``top_k=-1`` and ``top_p=1`` this is ``log_softmax(logits / temperature)``.
* ``SGLangEngine``: SGLang returns ``log_softmax(logits / temperature)`` *before* top-k/top-p truncation (see
  ``sglang/srt/layers/sampler.py``). The two agree whenever ``top_k=-1`` and ``top_p=1``, the usual choice for
  RL; with truncation enabled SGLang's values are lower than the truncated distribution's by the log of the
  kept mass.
* Greedy decoding (``temperature=0``) samples from a point mass; both engines then report
  ``log_softmax(logits)`` of the chosen token (temperature 1), as SGLang does.

A trainer that wants the importance ratio ``pi_theta / pi_sampler`` must compute ``pi_theta`` with the same
temperature (and, for HFEngine, the same truncation).

Routed experts
--------------
For MoE models an engine can return, per sampled token, the experts each MoE layer chose at the position that
*produced* that token (the position whose logits it was sampled from): an int array ``[num_tokens, moe_layers,
top_k]``. Row ``i`` belongs to the forward pass that emitted ``token_ids[i]``, so the rows line up with
``logprobs``. R3 (rollout routing replay) replays these choices when the trainer recomputes log-probs.

The trainer's forward also routes the prompt tokens, so an engine can return their rows too: with
``routed_experts_start=[s, ...]`` (one prompt position per prompt) ``Generation.prompt_routed_experts`` holds the
rows of prompt positions ``[s, len(prompt) - 1)`` (the last prompt position's row is ``routed_experts[0]``). The
rollout loop asks each turn only for the positions the previous turns did not cover, and
``Trajectory.routed_experts_by_position`` stitches them into one row per position of the training sequence.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from t1env.errors import T1Error

FINISH_STOP = "stop"  # a stop token or stop string ended the generation
FINISH_LENGTH = "length"  # max_new_tokens (or the context limit) ended it
FINISH_ABORT = "abort"  # the server aborted the request; token_ids holds what was sampled before the abort


@dataclass
class SamplingParams:
    """How to sample one turn. Field names follow SGLang's ``sampling_params`` where they overlap."""

    max_new_tokens: int = 256
    """Most tokens to sample in one turn."""
    temperature: float = 1.0
    """Softmax temperature; 0 means greedy."""
    top_p: float = 1.0
    """Nucleus sampling mass (1 keeps every token)."""
    top_k: int = -1
    """Keep the k most likely tokens (-1 keeps every token)."""
    stop: list[str] = field(default_factory=list)
    """Stop strings: generation ends once the decoded output contains one. The token that completed the string
    is kept in ``token_ids`` (the ids are never trimmed; only text is)."""
    stop_token_ids: list[int] = field(default_factory=list)
    """Extra stop token ids, on top of the tokenizer's end-of-sequence id (unless ``ignore_eos``)."""
    ignore_eos: bool = False
    """Do not stop at the end-of-sequence token."""
    seed: int | None = None
    """Seed for sampling (SGLang: ``sampling_seed``); None draws from the engine's own generator. With a seed, a
    ``RolloutRunner`` derives one seed per episode and turn (:func:`episode_seed`) and passes them as ``seeds=``,
    so what an episode samples does not depend on which other episodes share its batch."""

    def __post_init__(self):
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 is greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k == 0 or self.top_k < -1:
            raise ValueError(f"top_k must be -1 (off) or >= 1, got {self.top_k}")


@dataclass
class Generation:
    """What an engine returns for one prompt."""

    token_ids: list[int]
    """The sampled ids, in order, including the stop token when one was sampled."""
    logprobs: list[float]
    """Sampler log-prob of each sampled id (see the module docstring)."""
    finish_reason: str
    """``"stop"``, ``"length"`` or ``"abort"``."""
    matched_stop: int | str | None = None
    """The stop token id or stop string that ended the turn (None for length/abort)."""
    routed_experts: list[list[list[int]]] | None = None
    """``[len(token_ids), moe_layers, top_k]`` expert ids, when requested and the model is MoE."""
    weight_version: str | None = None
    """The engine's weight version when this was sampled."""
    prompt_routed_experts: list[list[list[int]]] | None = None
    """Rows of prompt positions ``[routed_experts_start, len(prompt) - 1)`` when requested (see the module docstring)."""
    routed_experts_start: int | None = None
    """The first prompt position ``prompt_routed_experts`` covers."""

    def __post_init__(self):
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} log-probs")
        if self.routed_experts is not None and len(self.routed_experts) != len(self.token_ids):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.routed_experts)} routed-expert rows")

    @property
    def stopped_on_token(self) -> bool:
        """True when the last sampled id is the stop token that ended the turn."""
        return self.finish_reason == FINISH_STOP and isinstance(self.matched_stop, int)


class EngineError(T1Error, RuntimeError):
    """The engine could not serve a request (server error, bad request, unreachable)."""


@runtime_checkable
class Engine(Protocol):
    """Samples continuations of token-id prompts.

    ``max_concurrency`` is how many ``generate`` calls may run at once: 1 for an in-process model (calls are
    batched instead), many for a server that batches internally.
    """

    max_concurrency: int

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingParams,
        return_routed_experts: bool = False,
        routed_experts_start: list[int] | None = None,
        seeds: list[int] | None = None,
    ) -> list[Generation]:
        """Sample one continuation per prompt (``routed_experts_start``: see "Routed experts" above). ``seeds``
        gives each prompt its own sampling seed (overriding ``sampling.seed``): the same prompt and seed give the
        same sample whatever else is in the batch."""
        ...

    def update_weights_from_disk(self, path: str, weight_version: str | None = None) -> None:
        """Load new weights from a ``save_pretrained`` folder, in place."""
        ...


def episode_seed(base: int, episode: int, turn: int) -> int:
    """The sampling seed of one episode's turn, from a run's base seed: well mixed, so neighbouring episodes and
    turns get unrelated random streams, and stable across runs and processes (no Python ``hash``).

    Example:
        >>> episode_seed(0, 0, 0) == episode_seed(0, 0, 0) != episode_seed(0, 1, 0)
        True
    """
    digest = hashlib.blake2b(f"{base}:{episode}:{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # < 2**63: fits a torch and an SGLang seed

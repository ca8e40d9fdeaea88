"""``--agent hf --model PATH``: a local Hugging Face checkpoint, sampled in-process with ``transformers`` (the
``train`` extra), speaking the agent protocol it was trained with (:mod:`t1env.agent.protocol`, ``docs/protocol.md``).

A ``t1train`` checkpoint folder holds ``t1_protocol.json``: the protocol style, the system prompt, the observation
limit and role, the tokens per turn, the context and turn limits and what a turn cut at the token limit does. Each
is the default here, so ``t1env eval --agent hf --model CKPT`` plays the episodes the way ``t1train``'s own
evaluation does: the same prompt ids for the same conversation (the chat template over the conversation so far,
rendered as text and tokenized, as the rollout renders its first prompt), the same parser and observation messages,
and at temperature 0 the same greedy turns. ``--protocol``, ``--max-tokens`` and ``--max-observation-chars``
override the record; a folder without one (any other checkpoint) gets the ``text`` protocol's defaults.

As in the rollout, a turn without an action is answered with the action format and counts as a turn; the trial
is submitted at the turn limit (the record's ``max_turns``, else the env's: ``--max-turns`` or the task's
``limits.max_turns``) or when the next turn would not fit in ``max_context_tokens``.

The model and tokenizer are loaded once per process and shared by the job's trials; generation runs one request
at a time (a lock), so ``--concurrency`` overlaps sandboxes with sampling but not two samplings. Tokens are counted
exactly (prompt ids in, new ids out). For a large model, serve it (``transformers serve``, vLLM, SGLang) and use
``--agent openai`` instead.
"""

from __future__ import annotations

import threading

from t1env.agent.protocol import NONE, Protocol
from t1env.eval.options import EvalOptions
from t1env.task import Task

DEFAULT_MAX_TOKENS = 1024

_LOADED: dict[str, tuple] = {}
_LOAD_LOCK = threading.Lock()
_GENERATE_LOCK = threading.Lock()


def load(path: str) -> tuple:
    """``(model, tokenizer)`` for a checkpoint folder, loaded once per process."""
    with _LOAD_LOCK:
        if path not in _LOADED:
            try:
                from transformers import AutoModelForCausalLM, AutoTokenizer  # transformers (the train extra)
            except ImportError:
                raise ValueError("--agent hf needs transformers and torch: pip install -e '.[train]'") from None
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path).eval()
            except Exception as e:  # noqa: BLE001 - transformers raises OSError, ValueError, ... for a folder it cannot read
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise ValueError(f"--model {path}: not a loadable checkpoint folder ({first})") from None
            _LOADED[path] = (model, tokenizer)
        return _LOADED[path]


def agent_protocol(options: EvalOptions) -> Protocol:
    """The protocol for ``options.model``: its ``t1_protocol.json`` (else the defaults), with the options given."""
    recorded = Protocol.load(options.model) or Protocol()
    protocol = recorded.replace(
        name=options.protocol, max_new_tokens=options.max_tokens, max_observation_chars=options.max_observation_chars
    )
    if protocol.name != "text":
        raise ValueError(
            f"--agent hf speaks --protocol text (the model writes its action in its reply), got "
            f"--protocol {protocol.name}; for tool calling serve the model and use --agent openai"
        )
    return protocol


class HFAgent:
    """One trial's conversation with a local checkpoint (see the module docstring)."""

    def __init__(self, task: Task, options: EvalOptions):
        self.task, self.options = task, options
        self.model, self.tokenizer = load(options.model)
        self.protocol = agent_protocol(options)
        self.max_new_tokens = self.protocol.max_new_tokens or DEFAULT_MAX_TOKENS
        eos = self.tokenizer.eos_token_id
        if eos is None:
            eos = self.model.config.eos_token_id
        self.stop_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.messages: list[dict] = []
        self.prompt_ids: list[int] = []  # the last prompt the model saw
        self.turns = 0
        self.last_turn: dict | None = None
        self.env_max_turns: int | None = None  # the env's turn limit (reset's info): the default of the protocol's

    def act(self, observation: str, info: dict) -> dict:
        if not self.messages:
            self.messages = self.protocol.first_messages(observation)
            self.env_max_turns = info.get("max_turns") or self.task.spec.limits.max_turns
        else:
            self.messages.append(self.protocol.observation_message(observation, info))
        turn: dict = {"prompt_tokens": 0, "completion_tokens": 0}
        texts: list[str] = []
        action = None
        while action is None:
            if self.protocol.at_turn_limit(self.turns, self.env_max_turns):
                texts.append(f"[t1] {self.turns} turns, the turn limit: the trial is submitted")
                action = {"submit": True}
                break
            self.prompt_ids = self.render()
            if not self.protocol.fits(len(self.prompt_ids), self.max_new_tokens):
                texts.append(
                    f"[t1] the next turn would not fit in {self.protocol.max_context_tokens} tokens: "
                    "the trial is submitted"
                )
                action = {"submit": True}
                break
            new = self._generate(self.prompt_ids, turn)
            self.turns += 1
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            texts.append(text)
            self.messages.append({"role": "assistant", "content": text})
            cut = len(new) >= self.max_new_tokens and new[-1] not in self.stop_ids
            parsed = self.protocol.parse(text, cut=cut)
            if parsed.kind != NONE:
                action = parsed.to_env()
            else:
                self.messages.append(self.protocol.answer_message(parsed))
        turn["message"] = "\n\n".join(t for t in texts if t)
        self.last_turn = turn
        return action

    def render(self) -> list[int]:
        """The prompt ids of the conversation so far: the chat template rendered as text, then tokenized (as
        ``t1train``'s rollout renders its first prompt)."""
        text = self.tokenizer.apply_chat_template(
            self.messages, chat_template=self.protocol.chat_template, tokenize=False, add_generation_prompt=True
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _generate(self, ids: list[int], turn: dict) -> list[int]:
        new = self.sample(ids)
        turn["prompt_tokens"] += len(ids)
        turn["completion_tokens"] += len(new)
        return new

    def sample(self, ids: list[int]) -> list[int]:
        """The model's next turn after the prompt ``ids``: its new token ids, the stop token included if sampled."""
        import torch  # torch (the train extra): only when an HF agent samples

        prompt = torch.tensor([list(ids)])
        sample = self.options.temperature > 0
        with _GENERATE_LOCK, torch.inference_mode():
            out = self.model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=self.max_new_tokens,
                do_sample=sample,
                temperature=self.options.temperature if sample else None,
                top_p=None,
                top_k=None,
                eos_token_id=sorted(self.stop_ids) or None,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        return out[0, prompt.shape[1] :].tolist()

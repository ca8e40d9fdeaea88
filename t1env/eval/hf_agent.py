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
``limits.max_turns``) or when the next turn would not fit in ``max_context_tokens`` and the record's
``context_policy`` (``--context-policy``) is ``end``. Under ``drop_observations`` and ``summary`` the trial goes on
in a new segment, built from the same messages as the rollout's (:meth:`Protocol.segment_messages`), so a model
trained on long episodes is evaluated on the prompts it was trained on.

The model and tokenizer are loaded once per process and shared by the job's trials; generation runs one request
at a time (a lock), so ``--concurrency`` overlaps sandboxes with sampling but not two samplings. Tokens are counted
exactly (prompt ids in, new ids out). For a large model, serve it (``transformers serve``, vLLM, SGLang) and use
``--agent openai`` instead.
"""

from __future__ import annotations

import collections
import threading

from t1env.agent.protocol import NONE, OMITTED_OBSERVATION, Protocol
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
        name=options.protocol,
        max_new_tokens=options.max_tokens,
        max_observation_chars=options.max_observation_chars,
        context_policy=options.context_policy,
        max_context_tokens=options.max_context_tokens,
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
        self.first: list[dict] = []  # system + instruction: every segment starts from them
        self.recent: collections.deque = collections.deque(maxlen=self.protocol.keep_last_turns)
        self.segments = 1
        self.summarizing = False  # the next turn is the summary (context_policy: summary)
        self.summary_reserve: int | None = None

    def act(self, observation: str, info: dict) -> dict:
        if not self.messages:
            self.first = self.protocol.first_messages(observation)
            self.messages = list(self.first)
            self.env_max_turns = info.get("max_turns") or self.task.spec.limits.max_turns
            going_on = True
        else:
            going_on = self._add(self.protocol.observation_message(observation, info))
        turn: dict = {"prompt_tokens": 0, "completion_tokens": 0}
        texts: list[str] = []
        action = None
        while action is None:
            if self.protocol.at_turn_limit(self.turns, self.env_max_turns):
                texts.append(f"[t1] {self.turns} turns, the turn limit: the trial is submitted")
                action = {"submit": True}
                break
            self.prompt_ids = self.render()
            if not (going_on and self.protocol.fits(len(self.prompt_ids), self.max_new_tokens)):
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
            if self.summarizing:  # the summary turn: the env is not stepped, the next segment starts from it
                self.summarizing = False
                going_on = self._new_segment(summary=text)
                continue
            cut = len(new) >= self.max_new_tokens and new[-1] not in self.stop_ids
            parsed = self.protocol.parse(text, cut=cut)
            if parsed.kind != NONE:
                action = parsed.to_env()
            else:
                going_on = self._add(self.protocol.answer_message(parsed))
        turn["message"] = "\n\n".join(t for t in texts if t)
        self.last_turn = turn
        return action

    # -- the context policy (t1train's rollout does the same in token space) ---------------------------------
    def _add(self, message: dict) -> bool:
        """Append the message after the last turn; when the next turn would not fit, apply the protocol's
        ``context_policy`` as t1train's rollout does. False: the episode ends at the context limit."""
        policy = self.protocol.context_policy
        self.recent.append((self.messages[-1], message))
        grown = self.messages + [message]
        fits = self._fits(grown, self._reserve())
        if fits or policy == "end" or self.segments >= self.protocol.max_segments:
            self.messages = grown
            return fits or self._fits(grown)
        if policy == "drop_observations":
            return self._new_segment()
        request = self.protocol.summary_request(message["content"])  # summary: ask in this segment
        if not self._fits(self.messages + request):
            request = self.protocol.summary_request(OMITTED_OBSERVATION)
            if not self._fits(self.messages + request):
                return self._new_segment()  # no room to ask: drop instead
        self.messages = self.messages + request
        self.summarizing = True
        return True

    def _new_segment(self, summary: str | None = None) -> bool:
        """Go on from the first messages (+ the summary) and as many of the last turns as fit (False: none fits,
        or ``max_segments`` is reached)."""
        if self.segments >= self.protocol.max_segments:
            return False
        recent = list(self.recent)
        for keep in range(len(recent), -1, -1):
            messages = self.protocol.segment_messages(self.first, recent[len(recent) - keep :], self.turns, summary)
            if self._fits(messages, self._reserve()):
                self.messages, self.segments = messages, self.segments + 1
                return True
        return False

    def _fits(self, messages: list[dict], reserve: int = 0) -> bool:
        return self.protocol.fits(len(self.render(messages)) + reserve, self.max_new_tokens)

    def _reserve(self) -> int:
        """Room kept free beyond the next turn under ``summary``: the request after a placeholder observation and
        its answer (measured once by rendering, as the rollout measures it by its bridge)."""
        if self.protocol.context_policy != "summary":
            return 0
        if self.summary_reserve is None:
            probe = [
                {"role": "system", "content": "x"},
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": ""},
            ]
            grown = self.render(probe + self.protocol.summary_request(OMITTED_OBSERVATION))
            self.summary_reserve = len(grown) - len(self.render(probe, prompt=False)) + 1 + self.max_new_tokens
        return self.summary_reserve

    def render(self, messages: list[dict] | None = None, prompt: bool = True) -> list[int]:
        """The prompt ids of the conversation so far (or of ``messages``): the chat template rendered as text, then
        tokenized (as ``t1train``'s rollout renders its first prompt and each new segment's)."""
        text = self.tokenizer.apply_chat_template(
            self.messages if messages is None else messages,
            chat_template=self.protocol.chat_template,
            tokenize=False,
            add_generation_prompt=prompt,
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

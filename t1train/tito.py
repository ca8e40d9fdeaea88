"""TITO: token in, token out. The trainer sees exactly the token ids the sampler produced.

Why
---
A multi-turn rollout alternates sampled assistant turns with environment observations. The obvious pipeline
decodes each turn to text, appends it to the chat, and re-tokenizes the whole conversation for the next prompt
and for training. That changes ids: BPE merges differently than the sampler chose (a random or RL-shifted policy
often samples non-canonical splits such as ``"he" + "llo"``), a stop string ends a turn where the end-of-turn
token was never sampled, a turn cut at ``max_new_tokens`` gets an end-of-turn token it never produced. The
trainer then scores tokens the sampler never produced, and the train-inference mismatch grows with every turn.

How
---
The conversation is kept as token ids and only ever grows::

    ids(turn t+1) = ids(turn t) + sampled ids(turn t) + bridge ids(turn t)

The sampled ids are appended as returned by the engine and are never re-encoded. The **bridge** is everything the
chat template puts between the end of the assistant's content and the start of the next assistant turn: the
template's end-of-turn close (e.g. ChatML's ``<|im_end|>\\n``), the new message(s), and the next generation prompt.
It is obtained from the chat template as the difference between two renders of the same history, with the
latest assistant content replaced by a sentinel string::

    A = render(history + [assistant: SENTINEL])
    B = render(history + [assistant: SENTINEL] + new messages, add_generation_prompt=True)
    bridge text = B after the sentinel;  bridge ids = tokenize(bridge text)

Boundary cases, each handled here and tested in ``tests/t1train/test_tito.py``:

* **Post-stop newline.** ChatML renders ``<|im_end|>\\n`` but the model stops at ``<|im_end|>`` and never samples
  the newline. The bridge starts with the template's close; when the turn ended on a sampled stop token equal to
  the bridge's first id, that id is dropped from the bridge (it is already in the sequence), so the newline
  follows the sampled ``<|im_end|>``.
* **Stop-string stops.** The end-of-turn token was never sampled; the bridge keeps the template's full close, so
  the sequence reads ``...sampled ids, <|im_end|>, \\n, <|im_start|>user ...``. The token that completed the stop
  string stays in the sequence even when it runs past the stop string.
* **Turns truncated at max tokens** (``finish_reason="length"``): same as a stop string, the full close is added.
* **Templates that are not prefix-preserving** (appending a message re-renders earlier text, e.g. templates that
  group consecutive tool messages, move the system prompt into the last user turn, or render the last assistant
  message differently from earlier ones). :meth:`Tito.check_template` detects them up front with a probe
  conversation and raises :class:`TemplateNotPrefixPreserving` explaining what to do.

Prefix check and repair
-----------------------
Every turn :meth:`Tito.bridge` checks the prefix property on the two renders: (1) the assistant message renders
as the generation prompt the model saw followed by its content, and (2) appending the new messages leaves
everything up to the end of that content unchanged. When either fails the bridge is **repaired at the turn
boundary**: the already-committed ids are kept (they are what the model saw; rewriting them would break the
sampled turns' log-probs), and the bridge is the text ``B`` renders after the *last* occurrence of the sentinel,
i.e. anchored at the end of the latest assistant content. A :class:`DriftEvent` records the turn, the kind and
the first differing characters. The loss region is unaffected (its ids are the sampler's by construction); the
event says that the context differs from what the template would render from scratch.

Metrics
-------
:func:`loss_region_drift` counts loss-region tokens of a trajectory that differ from the ids the engine returned
(0 with TITO, in every segment; it guards the bookkeeping). :func:`retokenize_drift` measures, on the same
rollouts, how many loss-region tokens a decode-and-re-tokenize pipeline would have gotten wrong.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

from t1env.errors import T1Error
from t1train.engines.base import Generation

SENTINEL = "T1TITOSENTINEL"


@dataclass
class DriftEvent:
    """A turn where the chat template was not prefix-preserving and the bridge was repaired."""

    turn: int
    """Index of the assistant turn whose bridge was repaired."""
    kind: str
    """``"assistant_render"`` (check 1 failed) or ``"history_rewrite"`` (check 2 failed)."""
    detail: str
    """The first characters where the renders differ."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Bridge:
    ids: list[int]
    """Ids to append after the sampled ids."""
    text: str
    """The bridge text as rendered by the template (before dropping an already-sampled stop token)."""
    dropped_stop_token: bool
    """True when the first template id was the sampled stop token and was not appended again."""
    drift: DriftEvent | None = None


class TemplateError(T1Error, ValueError):
    """The chat template cannot be used for TITO bridges."""


class TemplateNotPrefixPreserving(TemplateError):
    """Appending a message to a conversation changes how earlier messages render."""


def _first_difference(a: str, b: str, context: int = 30) -> str:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return f"at char {i}: {a[max(0, i - context) : i + context]!r} vs {b[max(0, i - context) : i + context]!r}"


class Tito:
    """Builds TITO prompts and bridges with a tokenizer's chat template.

    Args:
        tokenizer: a transformers tokenizer with a chat template.
        chat_template: overrides the tokenizer's template (a Jinja string).
        on_non_prefix: ``"repair"`` (default) repairs non-prefix turns and records drift events; ``"error"`` raises
            :class:`TemplateNotPrefixPreserving` at the first such turn.

    Example:
        >>> from t1train.models import tiny_moe
        >>> _, tokenizer = tiny_moe()
        >>> tito = Tito(tokenizer)
        >>> messages = [{"role": "user", "content": "hi"}]
        >>> prompt = tito.prompt_ids(messages)
        >>> from t1train.engines.base import Generation
        >>> sampled = tokenizer.encode("ok") + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
        >>> turn = Generation(sampled, [0.0] * len(sampled), "stop", sampled[-1])
        >>> bridge = tito.bridge(messages, turn, [{"role": "user", "content": "out"}], turn_index=0)
        >>> tokenizer.decode(prompt + sampled + bridge.ids)
        '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\nok<|im_end|>\\n<|im_start|>user\\nout<|im_end|>\\n<|im_start|>assistant\\n'
    """

    def __init__(self, tokenizer, chat_template: str | None = None, on_non_prefix: str = "repair"):
        if on_non_prefix not in ("repair", "error"):
            raise ValueError(f"on_non_prefix must be 'repair' or 'error', got {on_non_prefix!r}")
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.on_non_prefix = on_non_prefix
        if chat_template is None and getattr(tokenizer, "chat_template", None) is None:
            raise TemplateError("the tokenizer has no chat template; pass chat_template= (a Jinja string)")

    # ---------------------------------------------------------------- rendering
    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, chat_template=self.chat_template, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        """Tokenize template text (special tokens written in the text are parsed; no BOS/EOS is added)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """Ids of the first prompt: the messages rendered with the generation prompt, tokenized once."""
        return self.encode(self.render(messages, add_generation_prompt=True))

    def assistant_text(self, generation: Generation) -> str:
        """The assistant's message text, for action parsing and for rendering history (never re-encoded)."""
        return self.tokenizer.decode(generation.token_ids, skip_special_tokens=True)

    # ---------------------------------------------------------------- bridges
    def bridge(self, history: list[dict], generation: Generation, new_messages: list[dict], turn_index: int) -> Bridge:
        """Ids that follow ``generation``'s sampled ids: the template's close, ``new_messages``, the next
        generation prompt.

        Args:
            history: the conversation as the model saw it before this turn (ends with a user/tool message).
            generation: this turn's engine output.
            new_messages: the message(s) to add after the assistant turn (the observation).
            turn_index: used in drift events.
        """
        sentinel_turn = {"role": "assistant", "content": SENTINEL}
        prompt_text = self.render(history, add_generation_prompt=True)
        a_text = self.render(history + [sentinel_turn], add_generation_prompt=False)
        b_text = self.render(history + [sentinel_turn] + new_messages, add_generation_prompt=True)

        drift = None
        content_end = len(prompt_text) + len(SENTINEL)
        if not a_text.startswith(prompt_text + SENTINEL):
            drift = DriftEvent(turn_index, "assistant_render", _first_difference(prompt_text + SENTINEL, a_text))
        elif not b_text.startswith(a_text[:content_end]):
            drift = DriftEvent(turn_index, "history_rewrite", _first_difference(a_text[:content_end], b_text))
        if drift is not None:
            if self.on_non_prefix == "error":
                raise TemplateNotPrefixPreserving(
                    f"turn {turn_index}: the chat template is not prefix-preserving ({drift.kind}, {drift.detail}). "
                    + _NON_PREFIX_ADVICE
                )
            anchor = b_text.rfind(SENTINEL)
            if anchor < 0:
                raise TemplateError(
                    "the chat template dropped the latest assistant message's content when a message was appended; "
                    "TITO cannot place a bridge. " + _NON_PREFIX_ADVICE
                )
            content_end = anchor + len(SENTINEL)

        text = b_text[content_end:]
        ids = self.encode(text)
        dropped = bool(generation.stopped_on_token and ids and ids[0] == generation.token_ids[-1])
        if dropped:
            ids = ids[1:]
        return Bridge(ids=ids, text=text, dropped_stop_token=dropped, drift=drift)

    # ---------------------------------------------------------------- template probe
    def check_template(self, observation_role: str = "user") -> None:
        """Probe the template with a short conversation; raise :class:`TemplateNotPrefixPreserving` if appending
        an assistant turn plus an observation re-renders earlier text."""
        history = [
            {"role": "system", "content": "You operate a terminal."},
            {"role": "user", "content": "Create hello.txt."},
        ]
        for turn in range(3):
            sentinel_turn = {"role": "assistant", "content": SENTINEL}
            observation = {"role": observation_role, "content": f"output {turn}"}
            prompt_text = self.render(history, add_generation_prompt=True)
            a_text = self.render(history + [sentinel_turn], add_generation_prompt=False)
            b_text = self.render(history + [sentinel_turn, observation], add_generation_prompt=True)
            if not a_text.startswith(prompt_text + SENTINEL):
                raise TemplateNotPrefixPreserving(
                    "the template renders an assistant message differently from the generation prompt the model "
                    f"saw ({_first_difference(prompt_text + SENTINEL, a_text)}). " + _NON_PREFIX_ADVICE
                )
            content_end = len(prompt_text) + len(SENTINEL)
            if not b_text.startswith(a_text[:content_end]):
                raise TemplateNotPrefixPreserving(
                    f"appending a {observation_role!r} message re-renders earlier text "
                    f"({_first_difference(a_text[:content_end], b_text)}). " + _NON_PREFIX_ADVICE
                )
            history = history + [{"role": "assistant", "content": f"step {turn}"}, observation]

    def check_template_or_warn(self, observation_role: str = "user") -> bool:
        """Like :meth:`check_template`, but with ``on_non_prefix="repair"`` only warns. Returns True if clean."""
        try:
            self.check_template(observation_role)
            return True
        except TemplateNotPrefixPreserving as err:
            if self.on_non_prefix == "error":
                raise
            warnings.warn(
                f"{err} Continuing: each affected turn is repaired and recorded as a drift event.", stacklevel=2
            )
            return False


_NON_PREFIX_ADVICE = (
    "TITO still trains on exactly the sampled ids, but the model's context will differ from a fresh render of the "
    "conversation. To fix it, pass a prefix-preserving chat template (rollout config `chat_template:`; e.g. one "
    "that renders every assistant turn the same way and never edits earlier messages), or use observation_role "
    "'user' if tool messages are grouped; set `on_non_prefix: repair` to accept repaired turns (each recorded as "
    "a drift event)."
)


# ---------------------------------------------------------------------------------------------------- metrics
def loss_region_drift(trajectory) -> int:
    """Loss-region tokens of ``trajectory``'s training sequences that differ from the engine's sampled ids.

    Each segment's training sequence is rebuilt from the trajectory (the segment's prompt, then per turn sampled +
    bridge ids); each turn's sampled ids must sit exactly at the position the engine continued from
    (``turn.prompt_len``, relative to the turn's segment). Summed over the segments; 0 with TITO.
    """
    return sum(segment_drift(view) for view in trajectory.segment_views())


def segment_drift(view) -> int:
    """:func:`loss_region_drift` of one segment (a ``t1train.trajectory.SegmentView``)."""
    ids = view.token_ids()
    mask = view.loss_mask()
    drift = 0
    for turn in view.turns:
        start, n = turn.prompt_len, len(turn.sampled_ids)
        window = ids[start : start + n]
        drift += sum(a != b for a, b in zip(window, turn.sampled_ids)) + abs(len(window) - n)
        drift += sum(1 for m in mask[start : start + n] if m != 1)
    return drift


def retokenize_drift_per_turn(trajectory, tokenizer, chat_template: str | None = None) -> list[int]:
    """Drifted loss-region tokens per assistant turn for the decode-and-re-tokenize baseline.

    The baseline decodes each assistant turn to text, renders the whole conversation with the chat template,
    tokenizes it once, and marks each assistant message's tokens (its content and the end-of-turn token the
    template writes after it) as the loss region, as SFT-style pipelines do. Per turn, drift is the number of
    positions where that region differs from the sampled ids, plus the length difference.

    An episode of several segments is measured on its first segment's turns only (their messages are the start of
    ``trajectory.messages``): the baseline renders every prefix of the conversation, which over a whole 300-turn
    episode would cost time quadratic in its turns.
    """
    turns = _baseline_turns(trajectory)
    messages = _messages_through(trajectory.messages, len(turns))
    text = tokenizer.apply_chat_template(
        messages, chat_template=chat_template, tokenize=False, add_generation_prompt=False
    )
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    special = set(tokenizer.all_special_ids)
    assistant_turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    drift = []
    for turn, msg_index in zip(turns, assistant_turns):
        prefix = tokenizer.apply_chat_template(
            messages[:msg_index], chat_template=chat_template, tokenize=False, add_generation_prompt=True
        )
        start = len(prefix)
        end = start + len(messages[msg_index]["content"])
        # the region: tokens overlapping the content, plus the template's end-of-turn token right after it
        region = [i for i, (s, e) in enumerate(offsets) if e > start and s < end]
        after = (region[-1] + 1) if region else next((i for i, (s, _) in enumerate(offsets) if s >= end), len(ids))
        if after < len(ids) and ids[after] in special:
            region.append(after)
        baseline = [ids[i] for i in region]
        sampled = turn.sampled_ids
        drift.append(sum(a != b for a, b in zip(baseline, sampled)) + abs(len(baseline) - len(sampled)))
    return drift


def retokenize_drift(trajectory, tokenizer, chat_template: str | None = None) -> tuple[int, int]:
    """``(drifted_tokens, loss_tokens)`` of the decode-and-re-tokenize baseline on one trajectory
    (see :func:`retokenize_drift_per_turn`)."""
    per_turn = retokenize_drift_per_turn(trajectory, tokenizer, chat_template)
    return sum(per_turn), sum(len(t.sampled_ids) for t in _baseline_turns(trajectory))


def _baseline_turns(trajectory) -> list:
    """The turns the re-tokenize baseline measures: all of a one-segment episode's, else the first segment's."""
    segments = getattr(trajectory, "segments", None) or []
    return trajectory.turns[: segments[1].first_turn] if len(segments) > 1 else trajectory.turns


def _messages_through(messages: list[dict], n_turns: int) -> list[dict]:
    """``messages`` up to and including what followed the ``n_turns``-th assistant message."""
    seen = 0
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            if seen == n_turns:
                return list(messages[:i])
            seen += 1
    return list(messages)

"""TITO boundary cases, each against the real tiny tokenizer and its ChatML template."""

import pytest

from t1train.engines.base import Generation
from t1train.tito import (
    SENTINEL,
    TemplateError,
    TemplateNotPrefixPreserving,
    Tito,
    loss_region_drift,
    retokenize_drift_per_turn,
)
from t1train.trajectory import Trajectory, Turn

SYSTEM = {"role": "system", "content": "sys"}
USER = {"role": "user", "content": "do it"}
OBS = {"role": "user", "content": "output"}


def gen(ids, reason="stop", matched=None):
    return Generation(list(ids), [0.0] * len(ids), reason, matched)


@pytest.fixture
def tok(tiny):
    return tiny[1]


@pytest.fixture
def tito(tok):
    return Tito(tok)


def ids_of(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_post_stop_newline_follows_the_sampled_end_of_turn(tito, tok):
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    sampled = ids_of(tok, "ls") + [im_end]
    bridge = tito.bridge([SYSTEM, USER], gen(sampled, matched=im_end), [OBS], 0)
    assert bridge.dropped_stop_token
    assert tok.decode(bridge.ids).startswith("\n<|im_start|>user\noutput<|im_end|>")
    full = tito.prompt_ids([SYSTEM, USER]) + sampled + bridge.ids
    assert tok.decode(full) == tito.render([SYSTEM, USER, {"role": "assistant", "content": "ls"}, OBS], True)


@pytest.mark.parametrize("reason,matched", [("stop", "```"), ("length", None)])
def test_turn_without_end_of_turn_token_gets_the_full_close(tito, tok, reason, matched):
    sampled = ids_of(tok, "```bash\nls\n```")
    bridge = tito.bridge([USER], gen(sampled, reason, matched), [OBS], 0)
    assert not bridge.dropped_stop_token
    assert tok.convert_ids_to_tokens(bridge.ids[:2]) == ["<|im_end|>", "Ċ"]
    assert tok.decode(sampled + bridge.ids).startswith("```bash\nls\n```<|im_end|>\n<|im_start|>user\n")


def test_stop_string_token_running_past_the_string_is_kept(tito, tok):
    # the last sampled token completes the stop string "``" and carries one more char: it stays as sampled
    sampled = ids_of(tok, "echo ") + ids_of(tok, "```")
    bridge = tito.bridge([USER], gen(sampled, "stop", "``"), [OBS], 0)
    assert tok.decode(sampled + bridge.ids).startswith("echo ```<|im_end|>")


def test_stop_token_that_is_not_the_template_end_of_turn(tito, tok):
    eot_other = tok.convert_tokens_to_ids("<|endoftext|>")
    sampled = ids_of(tok, "hi") + [eot_other]
    bridge = tito.bridge([USER], gen(sampled, "stop", eot_other), [OBS], 0)
    assert not bridge.dropped_stop_token
    assert tok.convert_ids_to_tokens(bridge.ids[0]) == "<|im_end|>"


def test_sampled_ids_are_never_re_encoded(tito, tok):
    # a non-canonical split: "hello" sampled one character per token
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    sampled = [ids_of(tok, c)[0] for c in "hello"] + [im_end]
    assert ids_of(tok, "hello") != sampled[:-1]
    prompt = tito.prompt_ids([USER])
    bridge = tito.bridge([USER], gen(sampled, matched=im_end), [OBS], 0)
    seq = prompt + sampled + bridge.ids
    assert seq[len(prompt) : len(prompt) + len(sampled)] == sampled


def test_exact_ids_over_twelve_turns_and_baseline_drift(tito, tok):
    """12 turns mixing every boundary case: the TITO sequence holds each turn's ids at its position, and the
    decode-and-re-tokenize baseline gets the non-canonical, stop-string and truncated turns wrong."""
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    history = [SYSTEM, USER]
    ids = tito.prompt_ids(history)
    traj = Trajectory("t", 0, list(ids), messages=list(history))
    cases = [
        (ids_of(tok, "ls -la") + [im_end], "stop", im_end),  # canonical, stopped on <|im_end|>
        ([ids_of(tok, c)[0] for c in "cat a"] + [im_end], "stop", im_end),  # non-canonical split
        (ids_of(tok, "```bash\npwd\n```"), "stop", "```"),  # stop string
        (ids_of(tok, "echo hello wor"), "length", None),  # truncated at max tokens
    ] * 3
    for t, (sampled, reason, matched) in enumerate(cases):
        g = gen(sampled, reason, matched)
        turn = Turn(prompt_len=len(ids), sampled_ids=list(sampled), logprobs=g.logprobs, finish_reason=reason)
        text = tito.assistant_text(g)
        obs = {"role": "user", "content": f"out {t}\n"}
        bridge = tito.bridge(history, g, [obs], t)
        assert bridge.drift is None
        turn.bridge_ids = bridge.ids
        traj.turns.append(turn)
        history = history + [{"role": "assistant", "content": text}, obs]
        traj.messages = list(history)
        ids = ids + sampled + bridge.ids
    seq = traj.token_ids()
    assert seq == ids
    for turn, (sampled, _, _) in zip(traj.turns, cases):
        assert seq[turn.prompt_len : turn.prompt_len + len(sampled)] == sampled
    assert loss_region_drift(traj) == 0
    per_turn = retokenize_drift_per_turn(traj, tok)
    assert per_turn[0::4] == [0, 0, 0]  # canonical turns survive re-tokenizing
    assert all(d > 0 for d in per_turn[1::4])  # non-canonical split is merged back
    assert all(d > 0 for d in per_turn[3::4])  # truncated turn gains an <|im_end|> it never sampled
    assert sum(per_turn) > 0


LAST_USER_MARKED = (  # re-renders the previous last user message when a new one arrives
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "{% if m['role'] == 'user' and loop.last %} (latest){% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PAST_ASSISTANT_RELABELED = (  # the header of an assistant turn changes once a message follows it
    "{% for m in messages %}<|im_start|>{{ m['role'] }}{% if m['role'] == 'assistant' and not loop.last %}-past"
    "{% endif %}{{ '\\n' + m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
THINK_IN_HISTORY = (  # renders past assistant turns with an empty think block the model never saw
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'assistant' %}<think></think>{% endif %}{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.mark.parametrize(
    "template,kind",
    [
        (LAST_USER_MARKED, "assistant_render"),
        (THINK_IN_HISTORY, "assistant_render"),
        (PAST_ASSISTANT_RELABELED, "history_rewrite"),
    ],
)
def test_non_prefix_templates_are_detected_and_repaired(tok, template, kind):
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    with pytest.raises(TemplateNotPrefixPreserving, match="prefix-preserving"):
        Tito(tok, chat_template=template).check_template()
    with pytest.warns(UserWarning, match="drift event"):
        assert not Tito(tok, chat_template=template).check_template_or_warn()

    repairing = Tito(tok, chat_template=template, on_non_prefix="repair")
    sampled = ids_of(tok, "ls") + [im_end]
    bridge = repairing.bridge([USER], gen(sampled, matched=im_end), [OBS], 3)
    assert bridge.drift is not None and bridge.drift.kind == kind and bridge.drift.turn == 3
    # anchored at the end of the assistant content: the close, the observation, the generation prompt
    assert tok.decode(bridge.ids).startswith("\n<|im_start|>user\noutput")
    assert tok.decode(bridge.ids).endswith("<|im_start|>assistant\n")

    strict = Tito(tok, chat_template=template, on_non_prefix="error")
    with pytest.raises(TemplateNotPrefixPreserving):
        strict.bridge([USER], gen(sampled, matched=im_end), [OBS], 0)


def test_template_that_drops_assistant_content_is_refused(tok):
    drops = (
        "{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}<|im_start|>{{ m['role'] }}\n"
        "{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    with pytest.raises(TemplateError, match="dropped"):
        Tito(tok, chat_template=drops).bridge([USER], gen(ids_of(tok, "x"), "length"), [OBS], 0)


def test_tool_role_observation(tito, tok):
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    tito.check_template(observation_role="tool")
    bridge = tito.bridge([USER], gen([im_end], matched=im_end), [{"role": "tool", "content": "x"}], 0)
    assert tok.decode(bridge.ids) == "\n<|im_start|>tool\nx<|im_end|>\n<|im_start|>assistant\n"


def test_sentinel_is_plain_text(tok):
    assert SENTINEL.isalnum()

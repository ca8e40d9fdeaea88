"""Context policies: 300-turn episodes in a 2048-token context, segment by segment, token-exact.

The scripted engine stands in for a policy that always acts (the random tiny model rarely writes a command): it
writes one ```bash block per turn, or a summary when the last message asks for one, and records every prompt it
got. Its "routing" for the token at position p of a prompt is a function of (p, token), so the R3 tables of every
segment can be checked position by position. The real tiny model runs the same loop in
``test_real_tiny_model_continues_past_the_context`` (and 300 turns of it in the slow test).
"""

import pytest

from t1train.engines.base import Generation, SamplingParams
from t1train.rollout import (
    DEFAULT_SUMMARY_PROMPT,
    EpisodeSpec,
    RolloutConfig,
    RolloutRunner,
    rollout_metrics,
)
from t1train.tito import loss_region_drift, segment_drift

from .conftest import RecordingEngine, ScriptedEnv

CTX = 2048
MAX_NEW = 24


def route(position: int, token: int) -> list[list[int]]:
    """The scripted engine's expert choice for ``token`` read at ``position`` ([moe_layers=1][top_k=2])."""
    return [[token % 7, position % 5]]


class ScriptedEngine:
    """Writes ``echo <n>`` commands, or a summary when asked; keeps every (prompt, generation)."""

    max_concurrency = 1

    def __init__(self, tok):
        self.tok = tok
        self.im_end = tok.convert_tokens_to_ids("<|im_end|>")
        self.calls: list[tuple[list[int], Generation]] = []
        # how a prompt that asks for the summary ends (the request closes the last user message)
        self.asked = tok(DEFAULT_SUMMARY_PROMPT[-30:] + "<|im_end|>\n<|im_start|>assistant\n")["input_ids"][-12:]

    def generate(self, prompts, sampling, return_routed_experts=False, routed_experts_start=None, seeds=None):
        gens = []
        for i, prompt in enumerate(prompts):
            text = self.reply(prompt, len(self.calls))
            ids = self.tok(text, add_special_tokens=False)["input_ids"][: sampling.max_new_tokens - 1] + [self.im_end]
            routing = start = prompt_rows = None
            if return_routed_experts:
                seq = prompt + ids
                start = routed_experts_start[i]
                prompt_rows = [route(p, seq[p]) for p in range(start, len(prompt) - 1)]
                routing = [route(p, seq[p]) for p in range(len(prompt) - 1, len(prompt) - 1 + len(ids))]
            gen = Generation(
                ids,
                [-0.5] * len(ids),
                "stop",
                self.im_end,
                routed_experts=routing,
                prompt_routed_experts=prompt_rows,
                routed_experts_start=start,
            )
            self.calls.append((list(prompt), gen))
            gens.append(gen)
        return gens

    def reply(self, prompt: list[int], n: int) -> str:
        return f"Summary: I ran echo up to {n}." if prompt[-12:] == self.asked else f"```bash\necho {n}\n```"


class VerboseEnv(ScriptedEnv):
    """``ScriptedEnv`` whose commands print a dozen lines: a few turns fill a 2048-token context."""

    def step(self, action):
        obs, *rest = super().step(action)
        if isinstance(action, str):
            obs += "".join(f"output line {i} of step {self.turn}\n" for i in range(12))
        return (obs, *rest)


def run_long(tok, policy, max_turns=300, ctx=CTX, keep=3, episodes=1, **kw):
    engine = ScriptedEngine(tok)
    config = RolloutConfig(
        system_prompt="Use ```bash blocks.",
        max_turns=max_turns,
        max_context_tokens=ctx,
        context_policy=policy,
        keep_last_turns=keep,
        return_routed_experts=True,
        concurrency=2,
        **kw,
    )
    runner = RolloutRunner(
        engine, tok, lambda task: VerboseEnv(task, max_turns=10_000), SamplingParams(max_new_tokens=MAX_NEW), config
    )
    return engine, runner.run([EpisodeSpec("scripted", seed) for seed in range(episodes)])


def check_exact(engine, traj):
    """Every turn was sampled from exactly its segment's prefix, every segment began at its recorded prompt, the
    loss region is the sampled ids, and R3's table is the engine's routing at every recorded position."""
    by_prompt = {tuple(p): g for p, g in engine.calls}
    assert len(by_prompt) == len(engine.calls)  # no two calls shared a prompt: the lookup is unambiguous
    for view in traj.segment_views():
        seq = view.token_ids()
        assert view.turns and view.turns[0].prompt_len == len(view.prompt_ids)
        for turn in view.turns:
            g = by_prompt[tuple(seq[: turn.prompt_len])]
            assert g.token_ids == turn.sampled_ids and g.logprobs == turn.logprobs
            assert turn.prompt_len + MAX_NEW <= CTX
        assert segment_drift(view) == 0
        assert sum(view.loss_mask()) == sum(len(t.sampled_ids) for t in view.turns)
        rows, recorded = view.routed_experts_by_position()
        last = view.turns[-1]
        consumed = last.prompt_len + len(last.sampled_ids) - 1  # positions some forward of the segment read
        assert recorded == [p < consumed for p in range(len(seq))]
        assert all(rows[p] == route(p, seq[p]) for p in range(consumed))  # R3 agreement: 100%
    assert loss_region_drift(traj) == 0


@pytest.mark.parametrize("policy", ["drop_observations", "summary"])
def test_300_turns_in_2048_tokens_stay_exact(tiny, policy):
    _, tok = tiny
    engine, trajs = run_long(tok, policy)
    for traj in trajs:
        assert traj.num_turns == 300 and traj.termination == "max_turns"
        assert traj.num_segments >= 10
        assert {s.reason for s in traj.segments[1:]} == {policy}
        check_exact(engine, traj)
        views = traj.segment_views()
        if policy == "summary":
            summaries = [t for t in traj.turns if t.action.get("summary")]
            # each summary turn ends its segment, and the next segment's prompt carries its text
            assert len(summaries) == traj.num_segments - 1
            for view, nxt in zip(views, views[1:]):
                assert view.turns[-1].action == {"kind": "none", "summary": True}
                assert view.turns[-1].bridge_ids == []
                said = tok.decode(view.turns[-1].sampled_ids, skip_special_tokens=True)
                assert said.startswith("Summary:") and said in tok.decode(nxt.prompt_ids)
        else:
            assert all(t.action["kind"] == "command" for t in traj.turns)
            for view, nxt in zip(views, views[1:]):
                assert view.turns[-1].bridge_ids == []  # the segment ended there: nothing was sampled after it
                prompt = tok.decode(nxt.prompt_ids)
                assert "earlier turns of this conversation were removed" in prompt
                # the last 3 turns, each command with its observation, are the new segment's tail
                for turn in view.turns[-3:]:
                    assert turn.action["command"] in prompt and turn.observation in prompt
    metrics = rollout_metrics(trajs, tok)
    assert metrics["tito_drift_tokens"] == 0 and metrics["segments_mean"] >= 10


def test_end_policy_stops_at_the_context_as_before(tiny):
    _, tok = tiny
    engine, trajs = run_long(tok, "end", episodes=2)
    for traj in trajs:
        assert traj.termination == "context_limit" and traj.num_segments == 1 and traj.num_turns < 300
        check_exact(engine, traj)
        # the loop submitted for the agent: the reward of the last (its own) step is on the last turn
        assert traj.checks["total"] == 2


def test_a_segment_that_cannot_fit_ends_the_episode(tiny):
    _, tok = tiny
    probe = RolloutRunner(ScriptedEngine(tok), tok, ScriptedEnv, SamplingParams(max_new_tokens=MAX_NEW))
    first = probe.tito.prompt_ids(probe.protocol.replace(system_prompt="Use ```bash blocks.").first_messages("x"))
    # room for the first prompt and one turn, not for the first messages + the note + the reply
    ctx = len(first) + MAX_NEW + 60
    engine, trajs = run_long(tok, "drop_observations", ctx=ctx)
    for traj in trajs:
        assert traj.termination == "context_limit" and traj.num_segments == 1
        assert 1 <= traj.num_turns <= 3


def test_max_segments_bounds_the_episode(tiny):
    _, tok = tiny
    engine, trajs = run_long(tok, "drop_observations", max_segments=2)
    for traj in trajs:
        assert traj.num_segments == 2 and traj.termination == "context_limit"
        check_exact(engine, traj)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"context_policy": "forget"}, "context_policy must be one of end, drop_observations, summary"),
        ({"keep_last_turns": -1}, "keep_last_turns must be >= 0"),
        ({"max_segments": 0}, "max_segments >= 1"),
        ({"context_policy": "summary", "summary_prompt": " "}, "summary_prompt is empty"),
    ],
)
def test_bad_policy_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        RolloutConfig(**kw)


# ------------------------------------------------------------------------------------------------ the real tiny model
def check_real(model, engine, traj, ctx, max_new):
    """As ``check_exact``, with the model itself: every segment's full forward routes as the sampler recorded
    (R3 agreement 1.0) and reproduces the sampler's log-probs in the loss region."""
    import torch

    from t1train.r3 import RoutingRecorder, moe_layers, routing_agreement

    by_prompt = {tuple(p): g for p, g in engine.calls}
    for view in traj.segment_views():
        seq = view.token_ids()
        for turn in view.turns:
            g = by_prompt[tuple(seq[: turn.prompt_len])]
            assert g.token_ids == turn.sampled_ids and turn.prompt_len + max_new <= ctx
        assert segment_drift(view) == 0
        with RoutingRecorder(moe_layers(model)) as rec, torch.no_grad():
            logits = model(torch.tensor([seq])).logits[0].float()
        rows, recorded = view.routed_experts_by_position()
        assert sum(recorded) > 0
        live = rec.stacked(1, len(seq))[0]
        assert routing_agreement(torch.tensor(rows), live, torch.tensor(recorded)) == 1.0
        lp = torch.log_softmax(logits, -1)
        mask, sampler = view.loss_mask(), view.sampler_logprobs()
        got = [lp[i - 1, seq[i]].item() for i in range(1, len(seq)) if mask[i]]
        assert got == pytest.approx([sampler[i] for i in range(1, len(seq)) if mask[i]], abs=1e-4)


def run_real(tiny, tiny_engine, policy, max_turns, ctx, max_new=8, episodes=2):
    model, tok = tiny
    engine = RecordingEngine(tiny_engine)
    config = RolloutConfig(
        system_prompt="Use ```bash blocks.",
        max_turns=max_turns,
        max_context_tokens=ctx,
        context_policy=policy,
        keep_last_turns=2,
        return_routed_experts=True,
        concurrency=episodes,
    )
    runner = RolloutRunner(
        engine, tok, lambda t: ScriptedEnv(t, max_turns=10_000), SamplingParams(max_new_tokens=max_new, seed=0), config
    )
    trajs = runner.run([EpisodeSpec("scripted", s) for s in range(episodes)])
    for traj in trajs:
        assert traj.termination == "max_turns" and traj.num_turns == max_turns and traj.num_segments >= 2
        assert {s.reason for s in traj.segments[1:]} == {policy}
        check_real(model, engine, traj, ctx, max_new)
    return trajs


def test_real_tiny_model_continues_past_the_context(tiny, tiny_engine):
    """The tiny model through HFEngine (it rarely writes an action: most turns are answered with the format help):
    12 turns in 400 tokens under drop_observations (``summary`` with the real model: the slow test below)."""
    run_real(tiny, tiny_engine, "drop_observations", max_turns=12, ctx=400)


@pytest.mark.slow
def test_real_tiny_model_300_turns_in_2048_tokens(tiny, tiny_engine):
    """The tiny model plays 300 turns in 2048 tokens under ``summary`` (the policy that samples its own summaries):
    exact ids, drift 0 and R3 agreement 1.0 in every segment, no prompt past the context. The trainer's step on
    multi-segment episodes is ``test_segments.py``'s; both policies at 2048 and 4096 tokens with a training step
    each, and their time and memory, are ``bench/long_episode.py``'s (docs/benchmarks-training.md, about 8 min of
    CPU and up to 8 GB for the steps: too heavy for CI)."""
    (traj,) = run_real(tiny, tiny_engine, "summary", max_turns=300, ctx=2048, max_new=16, episodes=1)
    assert traj.num_segments >= 3

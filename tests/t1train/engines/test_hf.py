"""HFEngine against the real tiny MoE on CPU."""

import pytest
import torch

from t1train.engines.base import Engine, SamplingParams
from t1train.engines.hf import HFEngine, sample_from_logits


def recompute_logprobs(model, prompt, sampled, temperature=1.0):
    """What a trainer computes: a full forward over prompt + sampled ids, temperature-scaled log-softmax."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + sampled])).logits[0].float()
    lp = torch.log_softmax(logits / temperature, dim=-1)
    return [lp[len(prompt) - 1 + j, t].item() for j, t in enumerate(sampled)]


def test_is_an_engine(tiny_engine):
    assert isinstance(tiny_engine, Engine)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logprobs_match_a_full_forward(tiny, tiny_engine, temperature):
    model, tok = tiny
    prompts = [tok.encode("hello world"), tok.encode("ls -la && cat README.md | grep error")]  # different lengths
    gens = tiny_engine.generate(
        prompts, SamplingParams(max_new_tokens=20, temperature=temperature, seed=1, ignore_eos=True)
    )
    for prompt, g in zip(prompts, gens):
        assert len(g.token_ids) == 20 and g.finish_reason == "length"
        assert g.logprobs == pytest.approx(recompute_logprobs(model, prompt, g.token_ids, temperature), abs=1e-4)


def test_greedy_is_batch_invariant(tiny, tiny_engine):
    _, tok = tiny
    prompts = [tok.encode("pwd"), tok.encode("git log --oneline | head -5"), tok.encode("x")]
    sp = SamplingParams(max_new_tokens=12, temperature=0, ignore_eos=True)
    batched = tiny_engine.generate(prompts, sp)
    alone = [tiny_engine.generate([p], sp)[0] for p in prompts]
    assert [g.token_ids for g in batched] == [g.token_ids for g in alone]


def test_seeded_sampling_is_reproducible(tiny, tiny_engine):
    _, tok = tiny
    sp = SamplingParams(max_new_tokens=16, seed=7)
    a = tiny_engine.generate([tok.encode("hi")], sp)[0]
    b = tiny_engine.generate([tok.encode("hi")], sp)[0]
    assert a.token_ids == b.token_ids and a.logprobs == b.logprobs


def test_per_prompt_seeds_make_samples_independent_of_the_batch(tiny, tiny_engine):
    _, tok = tiny
    hi, other = tok.encode("hi"), tok.encode("git status --short")
    sp = SamplingParams(max_new_tokens=16, ignore_eos=True)
    alone = tiny_engine.generate([hi], sp, seeds=[11])[0]
    batched = tiny_engine.generate([other, hi, hi], sp, seeds=[5, 11, 12])
    assert batched[1].token_ids == alone.token_ids
    assert batched[1].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert batched[2].token_ids != alone.token_ids  # same prompt, another seed: another sample
    with pytest.raises(ValueError, match="2 seeds for 1 prompts"):
        tiny_engine.generate([hi], sp, seeds=[1, 2])


def test_truncated_distribution_logprobs():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    gen = torch.Generator().manual_seed(0)
    tokens, lps = sample_from_logits(logits, SamplingParams(top_k=2, temperature=1.0), gen)
    kept = torch.log_softmax(torch.tensor([2.0, 1.0]), -1)
    assert int(tokens[0]) in (0, 1) and lps[0].item() == pytest.approx(kept[int(tokens[0])].item())
    # top_p=0.5: only the most likely token survives (it alone holds > 50%), so its log-prob is 0
    tokens, lps = sample_from_logits(torch.tensor([[5.0, 1.0, 0.0]]), SamplingParams(top_p=0.5), gen)
    assert int(tokens[0]) == 0 and lps[0].item() == pytest.approx(0.0)


def test_stop_token_and_stop_string(tiny, tiny_engine):
    _, tok = tiny
    prompt = tok.encode("cat README.md")
    free = tiny_engine.generate([prompt], SamplingParams(max_new_tokens=30, seed=3, ignore_eos=True))[0]
    # stop on the 5th sampled token's id: generation ends right after it, the id included
    stop_id = free.token_ids[4]
    first = free.token_ids.index(stop_id)
    g = tiny_engine.generate(
        [prompt], SamplingParams(max_new_tokens=30, seed=3, ignore_eos=True, stop_token_ids=[stop_id])
    )[0]
    assert g.token_ids == free.token_ids[: first + 1]
    assert g.finish_reason == "stop" and g.matched_stop == stop_id and g.stopped_on_token
    # stop string = the text of sampled tokens 6..7: the ids are kept up to the token that completes it
    stop = tok.decode(free.token_ids[6:8])
    g = tiny_engine.generate([prompt], SamplingParams(max_new_tokens=30, seed=3, ignore_eos=True, stop=[stop]))[0]
    assert g.finish_reason == "stop" and g.matched_stop == stop and not g.stopped_on_token
    assert g.token_ids == free.token_ids[: len(g.token_ids)]
    assert stop in tok.decode(g.token_ids) and stop not in tok.decode(g.token_ids[:-1])


def test_routed_experts_per_sampled_token_match_a_full_forward(tiny, tiny_engine):
    model, tok = tiny
    prompt = tok.encode("grep -rn error logs/")
    g = tiny_engine.generate(
        [prompt], SamplingParams(max_new_tokens=10, seed=0, ignore_eos=True), return_routed_experts=True
    )[0]
    assert len(g.routed_experts) == 10 and all(len(r) == 2 and len(r[0]) == 2 for r in g.routed_experts)
    from t1train.r3 import RoutingRecorder, moe_layers

    with RoutingRecorder(moe_layers(model)) as rec, torch.no_grad():
        seq = prompt + g.token_ids
        model(torch.tensor([seq]))
        full = rec.stacked(1, len(seq))[0, len(prompt) - 1 : len(prompt) + 9].tolist()
    # same expert sets (order within top-k follows the router's scores)
    assert [[sorted(layer) for layer in row] for row in g.routed_experts] == [
        [sorted(layer) for layer in row] for row in full
    ]


def test_update_weights_from_disk(tiny, tmp_path):
    from t1train.models import tiny_moe

    model, tok = tiny_moe()  # a private copy: this test changes weights
    engine = HFEngine(model, tok)
    sp = SamplingParams(max_new_tokens=8, temperature=0, ignore_eos=True)
    before = engine.generate([tok.encode("ls")], sp)[0]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    model.save_pretrained(tmp_path)
    fresh, _ = tiny_moe()
    engine2 = HFEngine(fresh, tok)
    engine2.update_weights_from_disk(str(tmp_path), weight_version="step-1")
    after = engine2.generate([tok.encode("ls")], sp)[0]
    assert engine2.weight_version == "step-1" and after.weight_version == "step-1"
    assert after.token_ids == engine.generate([tok.encode("ls")], sp)[0].token_ids != before.token_ids
    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        engine2.update_weights_from_disk(str(tmp_path / "missing"))


def test_bad_inputs(tiny_engine):
    with pytest.raises(ValueError, match="empty prompt"):
        tiny_engine.generate([[]], SamplingParams())
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)

"""R3 replay (t1train/r3.py): exact reproduction of recorded routing, live weights and gradients, fallbacks,
TRL's padding layout and row chunks, gradient-checkpoint recompute, every registered family, dense-model errors."""

from __future__ import annotations

import pytest
import torch

from t1train.r3 import (
    FAMILIES,
    RoutingRecorder,
    RoutingReplay,
    align_routing,
    check_r3_supported,
    moe_layer_indices,
    moe_layers,
    routing_agreement,
)

_COMMON = dict(
    vocab_size=96,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    num_experts_per_tok=2,
    max_position_embeddings=256,
)

# One tiny config per registered family (a new family adds its line here; see the recipe in t1train/r3.py).
FAMILY_CONFIGS = {
    "qwen3_moe": (
        "Qwen3MoeConfig",
        dict(intermediate_size=48, moe_intermediate_size=16, num_experts=8, norm_topk_prob=True, mlp_only_layers=[1]),
    ),  # layer 1 dense
    "mixtral": ("MixtralConfig", dict(intermediate_size=16, num_local_experts=8)),
    "qwen2_moe": (
        "Qwen2MoeConfig",
        dict(
            intermediate_size=48,
            moe_intermediate_size=16,
            num_experts=8,
            shared_expert_intermediate_size=16,
            norm_topk_prob=False,
            decoder_sparse_step=1,
        ),
    ),
    "olmoe": ("OlmoeConfig", dict(intermediate_size=16, num_experts=8, norm_topk_prob=False)),
}


def tiny_family_model(family: str, seed: int = 0):
    import transformers

    cls_name, extra = FAMILY_CONFIGS[family]
    config = getattr(transformers, cls_name)(**_COMMON, **extra)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # routers are zero-initialised: give them scores so tokens spread over experts
        for layer in moe_layers(model):
            layer.router.weight.normal_(0.0, 0.3)
    return model.eval()


def live_routing(model, input_ids, **kwargs) -> torch.Tensor:
    """``[B, T, moe_layers, top_k]``: what the model's routers choose in a plain forward."""
    with RoutingRecorder(moe_layers(model)) as rec, torch.no_grad():
        model(input_ids, **kwargs)
    return rec.stacked(*input_ids.shape)


def random_routing(shape, num_experts: int, top_k: int, seed: int = 0) -> torch.Tensor:
    """Distinct random expert ids per token-layer, ``shape + (top_k,)``."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(*shape, num_experts, generator=g)
    return scores.topk(top_k, dim=-1).indices.to(torch.int16)


def test_families_cover_tested_configs():
    assert set(FAMILY_CONFIGS) == set(FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_replaying_live_routing_reproduces_the_unpatched_forward(family):
    """Weights are the live probabilities at the recorded ids, normalised as the family does: exact match."""
    model = tiny_family_model(family)
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = model(ids).logits
    routing = live_routing(model, ids)
    replay = RoutingReplay(model)
    with replay.active(routing), torch.no_grad():
        replayed = model(ids).logits
    torch.testing.assert_close(replayed, plain, rtol=0, atol=1e-6)
    assert replay.metrics()["r3/agreement"] == 1.0
    replay.remove()


@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_layer_mapping_is_explicit_and_skips_dense_layers(family):
    model = tiny_family_model(family)
    layers = moe_layers(model)
    assert [m.layer_index for m in layers] == moe_layer_indices(model.config)
    if family == "qwen3_moe":
        assert [m.layer_index for m in layers] == [0, 2]


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_replay_forces_recorded_experts_and_gradients_reach_routers(family):
    model = tiny_family_model(family)
    ids = torch.randint(0, 96, (2, 10), generator=torch.Generator().manual_seed(2))
    replay = RoutingReplay(model)
    forced = random_routing((2, 10, len(replay.layers)), num_experts=8, top_k=2)
    with RoutingRecorder(replay.layers) as rec, replay.active(forced):
        logits = model(ids).logits
        logits.log_softmax(-1)[..., 0].sum().backward()
    assert routing_agreement(rec.stacked(2, 10), forced) == 1.0
    for layer in replay.layers:
        grad = layer.router.weight.grad
        assert grad is not None and grad.abs().sum() > 0, f"no gradient at the router of layer {layer.layer_index}"
    assert replay.metrics()["r3/agreement"] < 1.0  # random choices mostly disagree with the live router


def test_fallback_tokens_route_live_and_are_counted():
    model = tiny_family_model("qwen3_moe")
    ids = torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(3))
    live = live_routing(model, ids)
    replay = RoutingReplay(model)
    forced = random_routing((2, 8, 2), num_experts=8, top_k=2, seed=5)
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[0, :3] = False  # no record for three tokens of row 0
    attention = torch.ones(2, 8, dtype=torch.long)
    attention[1, :2] = 0  # padding, also unrecorded: not a fallback that matters
    mask[1, :2] = False
    with RoutingRecorder(replay.layers) as rec, replay.active(forced, mask, attention), torch.no_grad():
        model(ids, attention_mask=attention)
    got = rec.stacked(2, 8)
    assert routing_agreement(got[0, 3:], forced[0, 3:]) == 1.0
    assert routing_agreement(got[1, 2:], forced[1, 2:]) == 1.0
    metrics = replay.metrics()
    assert metrics["r3/fallback_tokens"] == 3 and metrics["r3/replayed_tokens"] == 11
    # unrecorded tokens of row 0 routed live (the first of them sees only itself, so its routing is the plain one)
    assert routing_agreement(got[0, :1], live[0, :1]) == 1.0


def test_padding_layout_and_row_chunks_align_with_input_ids():
    """Two sequences in TRL's layout (left-padded prompt | right-padded completion), replayed in a batch and in
    one-row chunks, route exactly as each sequence's own record says."""
    model = tiny_family_model("mixtral")
    g = torch.Generator().manual_seed(4)
    seqs = [
        (torch.randint(1, 96, (5,), generator=g), torch.randint(1, 96, (7,), generator=g)),
        (torch.randint(1, 96, (8,), generator=g), torch.randint(1, 96, (3,), generator=g)),
    ]
    replay = RoutingReplay(model)
    records = [random_routing((len(p) + len(c), 3), 8, 2, seed=i) for i, (p, c) in enumerate(seqs)]
    samples = [(rec, torch.ones(rec.shape[0], dtype=torch.bool)) for rec in records]
    P, C = 8, 7
    routing, mask = align_routing(samples, [len(p) for p, _ in seqs], P, P + C)
    ids = torch.zeros(2, P + C, dtype=torch.long)
    attention = torch.zeros(2, P + C, dtype=torch.long)
    for b, (p, c) in enumerate(seqs):
        ids[b, P - len(p) : P], ids[b, P : P + len(c)] = p, c
        attention[b, P - len(p) : P + len(c)] = 1
    assert torch.equal(mask, attention.bool())
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    with RoutingRecorder(replay.layers) as rec, replay.active(routing, mask, attention), torch.no_grad():
        batch_logits = model(ids, attention_mask=attention, position_ids=positions).logits
    batch_routing = rec.stacked(2, P + C)
    for b, (p, c) in enumerate(seqs):
        n = len(p) + len(c)
        span = slice(P - len(p), P + len(c))
        assert routing_agreement(batch_routing[b, span], records[b]) == 1.0
        # a one-row chunk, sliced like the trainer does
        with (
            RoutingRecorder(replay.layers) as rec,
            replay.active(routing[b : b + 1], mask[b : b + 1], attention[b : b + 1]),
            torch.no_grad(),
        ):
            chunk_logits = model(
                ids[b : b + 1], attention_mask=attention[b : b + 1], position_ids=positions[b : b + 1]
            ).logits
        assert routing_agreement(rec.stacked(1, P + C)[0, span], records[b]) == 1.0
        torch.testing.assert_close(chunk_logits[0, span], batch_logits[b, span], rtol=1e-4, atol=1e-5)
        # and alone, unpadded
        with replay.active(records[b][None]), torch.no_grad():
            alone = model(torch.cat([p, c])[None]).logits
        torch.testing.assert_close(alone[0], batch_logits[b, span], rtol=1e-4, atol=1e-5)
        assert n == alone.shape[1]
    assert replay.metrics()["r3/fallback_tokens"] == 0


def test_align_routing_refuses_truncated_sequences():
    rows = torch.zeros(6, 1, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="truncated"):
        align_routing([(rows, [True] * 6)], [4], prompt_width=3, total_width=5)


def test_wrong_shape_says_what_is_expected():
    model = tiny_family_model("qwen3_moe")
    replay = RoutingReplay(model)
    with pytest.raises(ValueError, match=r"2 MoE layers, top_k=2"):
        with replay.active(torch.zeros(1, 4, 3, 2)):
            pass
    with pytest.raises(ValueError, match="shape of input_ids"):
        with replay.active(torch.zeros(1, 4, 2, 2, dtype=torch.long)), torch.no_grad():
            model(torch.zeros(1, 5, dtype=torch.long))


@pytest.mark.parametrize("one_block", [False, True], ids=["context-per-chunk", "chunks-inside-one-context"])
def test_gradient_checkpoint_recompute_replays_each_chunks_routing(one_block):
    """Two chunks forward, one backward: the recomputation of each checkpointed layer must replay that chunk's
    routing (not the live one, not the other chunk's), so the gradients equal those without checkpointing. The
    chunks either enter the context each with their rows, or run in order inside one context for the whole batch
    (as the trainer's old-logprob and loss forwards do)."""
    ids = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(6))
    forced = random_routing((2, 9, 2), 8, 2, seed=7)

    def grads(checkpointing: bool, one_block: bool = one_block):
        model = tiny_family_model("qwen3_moe")
        if checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        replay = RoutingReplay(model)
        loss = 0
        if one_block:
            with replay.active(forced):
                for rows in (slice(0, 1), slice(1, 2)):
                    loss = loss + model(ids[rows]).logits.log_softmax(-1)[..., 3].sum()
        else:
            for rows in (slice(0, 1), slice(1, 2)):
                with replay.active(forced[rows]):
                    loss = loss + model(ids[rows]).logits.log_softmax(-1)[..., 3].sum()
        loss.backward()  # outside the context: recompute must still replay
        metrics = replay.metrics()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, metrics

    plain, m_plain = grads(False, one_block=False)  # reference: no checkpointing, a context per chunk
    ckpt, m_ckpt = grads(True)
    assert set(plain) == set(ckpt)
    for name in plain:
        torch.testing.assert_close(ckpt[name], plain[name], rtol=1e-4, atol=1e-6, msg=name)
    assert m_plain == m_ckpt  # recomputation is not counted twice


def test_reference_model_and_code_outside_the_context_are_untouched():
    model = tiny_family_model("qwen3_moe")
    reference = tiny_family_model("qwen3_moe")
    ids = torch.randint(0, 96, (1, 6), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        before = model(ids).logits
    replay = RoutingReplay(model)
    forced = random_routing((1, 6, 2), 8, 2, seed=9)
    with replay.active(forced), torch.no_grad():
        ref = reference(ids).logits  # another instance: never replayed
        replayed = model(ids).logits
    with torch.no_grad():
        after = model(ids).logits
    torch.testing.assert_close(ref, before, rtol=0, atol=0)
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    assert not torch.allclose(replayed, before)
    replay.remove()
    assert "forward" not in moe_layers(model)[0].router.__dict__


def test_dense_model_gets_a_clear_error():
    from transformers import LlamaConfig, LlamaForCausalLM

    dense = LlamaForCausalLM(
        LlamaConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            vocab_size=32,
        )
    )
    with pytest.raises(ValueError, match="r3: false"):
        check_r3_supported(dense)
    with pytest.raises(ValueError, match="has none"):
        RoutingReplay(dense)


def test_unknown_moe_family_says_how_to_add_it():
    model = tiny_family_model("olmoe")
    model.config.model_type = "my_moe"
    with pytest.raises(ValueError, match="add it to t1train/r3.py FAMILIES"):
        check_r3_supported(model)

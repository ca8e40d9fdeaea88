"""R3 capture: HFEngine and SGLang (stand-in) record routing for prompt and sampled positions, the rollout stitches
turns into one row per position, and replaying it in a full forward reproduces the sampler's routing exactly."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from t1train.engines.base import SamplingParams
from t1train.engines.hf import HFEngine
from t1train.engines.sglang import SGLangEngine, decode_routed_experts, encode_routed_experts
from t1train.r3 import RoutingRecorder, RoutingReplay, moe_layer_indices, moe_layers, routing_agreement
from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner

from .engines.sglang_standin import StandInSGLangServer
from .test_r3 import tiny_family_model

ROLLOUT = RolloutConfig(system_prompt="Use ```bash blocks.", max_turns=4, concurrency=2, return_routed_experts=True)


def full_forward_routing(model, ids: list[int]) -> torch.Tensor:
    with RoutingRecorder(moe_layers(model)) as rec, torch.no_grad():
        model(torch.tensor([ids]))
    return rec.stacked(1, len(ids))[0]


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_hf_engine_records_prompt_and_sampled_positions(family):
    model = tiny_family_model(family)
    engine = HFEngine(model, max_batch_size=4)
    engine.eos_token_ids = set()
    prompts = [[5, 9, 13, 2, 7, 11], [3, 4]]  # different lengths: the short one is left-padded
    gens = engine.generate(
        prompts, SamplingParams(max_new_tokens=5, seed=0), return_routed_experts=True, routed_experts_start=[1, 0]
    )
    for prompt, start, gen in zip(prompts, [1, 0], gens):
        layers = len(moe_layers(model))
        assert np.asarray(gen.routed_experts).shape == (5, layers, 2)
        assert gen.routed_experts_start == start and len(gen.prompt_routed_experts) == len(prompt) - 1 - start
        seq = prompt + gen.token_ids
        full = full_forward_routing(model, seq)  # same dtype, no padding: same choices as the sampler
        recorded = torch.tensor(gen.prompt_routed_experts + gen.routed_experts)
        assert routing_agreement(recorded, full[start : len(seq) - 1]) == 1.0


def test_default_is_sampled_tokens_only(tiny_engine, tiny):
    _, tok = tiny
    g = tiny_engine.generate([tok.encode("ls")], SamplingParams(max_new_tokens=3, seed=0), True)[0]
    assert g.prompt_routed_experts == [] and g.routed_experts_start == len(tok.encode("ls")) - 1
    with pytest.raises(ValueError, match="outside the prompt"):
        tiny_engine.generate([[1, 2]], SamplingParams(max_new_tokens=1), True, routed_experts_start=[2])


def rollout(engine, tok, scripted_env, episodes=2):
    runner = RolloutRunner(
        engine, tok, lambda task: scripted_env(task), SamplingParams(max_new_tokens=10, seed=0), ROLLOUT
    )
    return runner.run([EpisodeSpec("scripted", seed) for seed in range(episodes)])


def test_multi_turn_trajectory_has_a_row_for_every_consumed_position(tiny, tiny_engine, scripted_env):
    _, tok = tiny
    for traj in rollout(tiny_engine, tok, scripted_env):
        rows, recorded = traj.routed_experts_by_position()
        ids = traj.token_ids()
        assert len(rows) == len(ids) and np.asarray(rows).shape[1:] == (2, 2)
        # every position a sampler forward consumed is recorded; only the very last token (never fed) is not
        consumed = traj.turns[-1].prompt_len + len(traj.turns[-1].sampled_ids) - 1
        assert all(recorded[:consumed]) and not any(recorded[consumed:])
        # the sampled-token rows are the per-token routing the loss region already carried
        for turn in traj.turns:
            assert rows[turn.prompt_len - 1 : turn.prompt_len - 1 + len(turn.sampled_ids)] == turn.routed_experts
        # and each turn asked only for what earlier turns had not covered
        starts = [t.routed_experts_start for t in traj.turns]
        assert starts[0] == 0 and all(
            s == p.prompt_len + len(p.sampled_ids) - 1 for s, p in zip(starts[1:], traj.turns)
        )


def test_replay_reproduces_bf16_kv_cache_sampler_routing_in_fp32_trainer(tiny, scripted_env):
    """The issue's acceptance test: sampler bf16 + KV cache (batched, left-padded), trainer fp32 full forward.
    Under replay the trainer routes exactly as the sampler did (100%)."""
    model, tok = tiny
    sampler = HFEngine(copy.deepcopy(model).to(torch.bfloat16), tok)
    trajs = rollout(sampler, tok, scripted_env, episodes=3)
    replay = RoutingReplay(model)
    for traj in trajs:
        rows, recorded = traj.routed_experts_by_position()
        ids = torch.tensor([traj.token_ids()])
        sampled = torch.tensor(rows)[None]
        mask = torch.tensor(recorded)[None]
        with RoutingRecorder(replay.layers) as rec, replay.active(sampled, mask), torch.no_grad():
            model(ids)
        assert routing_agreement(rec.stacked(*ids.shape), sampled, mask) == 1.0
    metrics = replay.metrics()
    assert metrics["r3/fallback_tokens"] == len(trajs)  # the last token of each episode
    assert 0 < metrics["r3/agreement"] <= 1.0


# ---------------------------------------------------------------------------------------------------- SGLang
def test_decode_maps_engine_layers_to_moe_layers():
    # 3 rows (positions [start, seqlen - 1)), 4 engine layers of which 1 and 3 are MoE, top-2
    table = np.arange(3 * 4 * 2, dtype=np.int32).reshape(3, 4, 2)
    rows = decode_routed_experts(encode_routed_experts(table), rows=3, top_k=2, moe_layers=[1, 3])
    assert rows == table[:, [1, 3]].tolist()
    with pytest.raises(Exception, match="same model"):
        decode_routed_experts(encode_routed_experts(table), rows=3, top_k=2, moe_layers=[4])
    with pytest.raises(Exception, match="seqlen - 1"):
        decode_routed_experts(encode_routed_experts(table), rows=5, top_k=2)


@pytest.fixture
def dense_gap_stack():
    """An HFEngine on a Qwen3-MoE whose layer 1 is dense, behind the stand-in, and a client that maps layers."""
    model = tiny_family_model("qwen3_moe")
    engine = HFEngine(model)
    engine.eos_token_ids = set()
    with StandInSGLangServer(engine) as server:
        client = SGLangEngine(server.url, top_k_experts=2, moe_layers=moe_layer_indices(model.config), retries=1)
        yield engine, server, client
        client.close()


def test_sglang_prompt_rows_and_layer_map_match_the_local_engine(dense_gap_stack):
    engine, server, client = dense_gap_stack
    prompt = [4, 8, 15, 16, 23, 42]
    sp = SamplingParams(max_new_tokens=4, seed=3)
    remote = client.generate([prompt], sp, return_routed_experts=True, routed_experts_start=[2])[0]
    local = engine.generate([prompt], sp, return_routed_experts=True, routed_experts_start=[2])[0]
    assert server.requests[-1]["routed_experts_start_len"] == 2
    assert remote.token_ids == local.token_ids
    assert remote.routed_experts == local.routed_experts and remote.prompt_routed_experts == local.prompt_routed_experts
    assert remote.routed_experts_start == 2 and np.asarray(remote.routed_experts).shape == (4, 2, 2)


def test_sglang_wire_rows_cover_start_to_seqlen_minus_one(dense_gap_stack):
    _, server, client = dense_gap_stack
    prompt = [4, 8, 15, 16, 23]
    body = client.request_body(prompt, SamplingParams(max_new_tokens=3, seed=0), "t1-x", True, 0)
    data = server.generate(body)
    raw = np.frombuffer(__import__("base64").b64decode(data["meta_info"]["routed_experts"]), dtype=np.int32)
    assert raw.size == (len(prompt) + 3 - 1) * 3 * 2  # (seq_len - 1) rows x 3 engine layers x top-2
    assert not raw.reshape(-1, 3, 2)[:, 1].any()  # the dense layer's slots are zeros, as in SGLang's buffer


def test_sglang_multi_turn_stitching_matches_the_local_engine(tiny, tiny_engine, scripted_env):
    _, tok = tiny
    local = rollout(tiny_engine, tok, scripted_env, episodes=1)  # one episode: the same sampling stream as remote
    with StandInSGLangServer(tiny_engine) as server:
        client = SGLangEngine(server.url, top_k_experts=2, moe_layers=moe_layer_indices(tiny_engine.model.config))
        try:
            remote = rollout(client, tok, scripted_env, episodes=1)
        finally:
            client.close()
        starts = [b["routed_experts_start_len"] for b in server.requests]
    assert 0 in starts and any(s > 0 for s in starts)  # the first turn from 0, later turns from the last coverage
    [a], [b] = local, remote
    assert a.num_turns > 1 and a.token_ids() == b.token_ids()
    assert a.routed_experts_by_position() == b.routed_experts_by_position()

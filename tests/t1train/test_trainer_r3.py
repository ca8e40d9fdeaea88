"""T1Trainer with ``r3: true``: rollouts record routing, every policy forward replays it, router still learns."""

from __future__ import annotations

import copy

import pytest
import torch

from t1train.rollout import EpisodeSpec
from t1train.trainer import T1Config, T1Trainer

from .conftest import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def r3_trainer(tiny, tmp_path, scripted_env, **kw) -> T1Trainer:
    model, tokenizer = tiny
    return T1Trainer(
        copy.deepcopy(model),
        tiny_config(tmp_path / "out", **{"algorithm": "grpo", "r3": True, **kw}),
        processing_class=tokenizer,
        make_env=lambda task: scripted_env(task),
    )


def test_batch_carries_every_positions_routing_aligned_with_input_ids(tiny, tmp_path, scripted_env):
    trainer = r3_trainer(tiny, tmp_path, scripted_env)
    trajectories = trainer.rollout([EpisodeSpec("scripted", i) for i in range(4)])
    batch = trainer.score_trajectories(trajectories, [{"prompt": "s", "task": "scripted", "seed": i} for i in range(4)])
    routing, recorded = batch["r3_routing"], batch["r3_mask"]
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1).bool()
    assert routing.shape[:2] == input_ids.shape and routing.shape[2:] == (2, 2)  # 2 MoE layers, top-2
    assert not recorded[~attention].any()  # padding is never "recorded"
    # every real token but each sequence's last one went through the sampler's forward
    assert (recorded.sum(1) == attention.sum(1) - 1).all()
    # the in-process engine shares the trainer's weights: replay agrees with live routing everywhere
    m = batch["_metrics"]
    assert m["r3/agreement"] == 1.0 and m["r3/replayed_tokens"] > 0


def test_training_step_replays_routing_and_the_router_learns(tiny, tmp_path, scripted_env):
    trainer = r3_trainer(tiny, tmp_path, scripted_env)
    routers = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "mlp.gate" in n}
    assert routers
    trainer.train()
    logs = trainer.state.log_history[0]
    assert logs["r3/agreement"] == 1.0 and logs["r3/replayed_tokens"] > 0
    moved = [n for n, p in trainer.model.named_parameters() if n in routers and not torch.equal(routers[n], p)]
    assert moved  # gradients reach the router weights through the replayed forward


def test_sglang_engine_is_built_with_the_policys_routing_shape(tiny, tmp_path, scripted_env):
    """``engine="sglang"`` with ``r3``: SGLang reports one routing slot per decoder layer, so the client must know
    the policy's top-k and MoE layers, or the batch's routing has the wrong shape for the replay."""
    from t1train.engines.hf import HFEngine

    from .engines.sglang_standin import StandInSGLangServer

    model, tokenizer = tiny
    served = HFEngine(copy.deepcopy(model), tokenizer)  # the server's own copy: weight updates load into it
    with StandInSGLangServer(served) as server:
        trainer = r3_trainer(tiny, tmp_path, scripted_env, engine="sglang", engine_url=server.url)
        try:
            assert (trainer.engine.top_k_experts, trainer.engine.moe_layers) == (2, [0, 1])
            trainer.train()
        finally:
            trainer.engine.close()
    logs = trainer.state.log_history[0]
    assert trainer.state.global_step == 1 and served.weight_version == "0"  # synced from disk before the rollout
    assert logs["r3/replayed_tokens"] > 0 and logs["r3/agreement"] == 1.0  # same weights: same routing


def test_r3_on_a_dense_model_is_a_clear_error(tmp_path, scripted_env):
    from transformers import LlamaConfig, LlamaForCausalLM

    from t1train.models import load_model_and_tokenizer

    _, tokenizer = load_model_and_tokenizer("tiny")
    dense = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    args = T1Config(
        output_dir=str(tmp_path / "o"),
        tasks=["scripted"],
        train_seeds=[0, 1],
        num_generations=2,
        per_device_train_batch_size=4,
        max_steps=1,
        algorithm="grpo",
        r3=True,
        save_strategy="no",
    )
    with pytest.raises(ValueError, match="r3"):
        T1Trainer(dense, args, processing_class=tokenizer, make_env=lambda task: scripted_env(task))

"""SGLangEngine against the stand-in server (SGLang's schema, backed by the tiny model; not SGLang)."""

import dataclasses
import logging
import threading
import time

import pytest

from t1train.engines.base import EngineError, SamplingParams
from t1train.engines.sglang import SGLangEngine, decode_routed_experts, encode_routed_experts

from .sglang_standin import StandInSGLangServer


@pytest.fixture
def server(tiny_engine):
    with StandInSGLangServer(tiny_engine) as srv:
        yield srv


@pytest.fixture
def client(server):
    engine = SGLangEngine(server.url, top_k_experts=2, retries=2)
    yield engine
    engine.close()


def test_request_follows_sglang_schema(client, server, tiny):
    _, tok = tiny
    prompt = tok.encode("ls -la")
    client.generate([prompt], SamplingParams(max_new_tokens=5, seed=4), return_routed_experts=True)
    body = server.requests[-1]
    assert body["input_ids"] == prompt and body["return_logprob"] is True and body["stream"] is False
    assert body["rid"].startswith("t1-")
    # routing from the last prompt position: one row per sampled token, none for the prompt
    assert body["return_routed_experts"] is True and body["routed_experts_start_len"] == len(prompt) - 1


def test_each_sampling_param_reaches_the_server_with_its_meaning(client, tiny):
    """Every ``SamplingParams`` field changes what the server samples, so a field the client drops or misnames
    fails here (the stand-in, like SGLang, refuses sampling keys it does not know)."""
    _, tok = tiny
    prompt = tok.encode("ls -la")
    base = SamplingParams(max_new_tokens=8, ignore_eos=True, seed=4)

    def sample(**changes):
        return client.generate([prompt], dataclasses.replace(base, **changes))[0]

    free = sample()
    assert len(free.token_ids) == 8 and free.finish_reason == "length"  # max_new_tokens, ignore_eos
    assert sample().token_ids == free.token_ids  # sampling_seed: the same seed, the same ids
    assert sample(seed=5).token_ids != free.token_ids
    # stop_token_ids: stop at the first token not sampled before, and keep it (no_stop_trim: TITO needs its id)
    k = next(i for i in range(1, 8) if free.token_ids[i] not in free.token_ids[:i])
    stopped = sample(stop_token_ids=[free.token_ids[k]])
    assert stopped.token_ids == free.token_ids[: k + 1]
    assert stopped.finish_reason == "stop" and stopped.matched_stop == free.token_ids[k]
    # stop strings: stop at the text of that token, keeping it
    word = tok.decode(free.token_ids[k : k + 1])
    by_text = sample(stop=[word])
    assert by_text.finish_reason == "stop" and by_text.matched_stop == word
    assert tok.decode(by_text.token_ids).endswith(word) and len(by_text.token_ids) <= k + 1
    # temperature 0, top_k=1 and a tiny top_p are greedy: the seed no longer matters, and all give the same ids
    greedy = sample(temperature=0.0, seed=1).token_ids
    assert greedy != free.token_ids and sample(temperature=0.0, seed=2).token_ids == greedy
    assert sample(top_k=1, seed=1).token_ids == greedy == sample(top_k=1, seed=2).token_ids
    assert sample(top_p=1e-6, seed=1).token_ids == greedy == sample(top_p=1e-6, seed=2).token_ids
    # another temperature, another distribution: the same seed reports other log-probs
    assert sample(temperature=0.5).logprobs != free.logprobs


def test_per_prompt_seeds_become_per_request_sampling_seeds(client, server, tiny):
    _, tok = tiny
    prompt = tok.encode("ls")
    gens = client.generate([prompt, prompt], SamplingParams(max_new_tokens=8, seed=1, ignore_eos=True), seeds=[3, 9])
    seeds = sorted(body["sampling_params"]["sampling_seed"] for body in server.requests[-2:])
    assert seeds == [3, 9]
    again = client.generate([prompt], SamplingParams(max_new_tokens=8, ignore_eos=True), seeds=[9])[0]
    assert again.token_ids == gens[1].token_ids


def test_ids_logprobs_and_routing_come_back_exactly(client, tiny, tiny_engine):
    _, tok = tiny
    prompts = [tok.encode("ls -la"), tok.encode("git status")]
    sp = SamplingParams(max_new_tokens=12, seed=5, ignore_eos=True)
    remote = client.generate(prompts, sp, return_routed_experts=True)
    local = [tiny_engine.generate([p], sp, return_routed_experts=True)[0] for p in prompts]
    for r, loc in zip(remote, local):
        assert r.token_ids == loc.token_ids and r.logprobs == loc.logprobs
        assert r.routed_experts == loc.routed_experts and len(r.routed_experts) == 12
        assert r.finish_reason == "length" and r.weight_version == "0"


def test_finish_reasons(client):
    sp = SamplingParams(max_new_tokens=40, seed=1)
    g = client.parse_response(
        {
            "output_ids": [5, 2],
            "meta_info": {
                "finish_reason": {"type": "stop", "matched": 2},
                "output_token_logprobs": [[-1.0, 5, None], [-0.5, 2, None]],
            },
        },
        False,
    )
    assert g.finish_reason == "stop" and g.matched_stop == 2 and g.stopped_on_token
    g = client.parse_response(
        {
            "meta_info": {
                "finish_reason": {"type": "stop", "matched": "```"},
                "output_token_logprobs": [[-1.0, 5, None]],
            }
        },
        False,
    )
    assert g.matched_stop == "```" and not g.stopped_on_token
    g = client.generate([[1, 2]], dataclasses.replace(sp, max_new_tokens=3, ignore_eos=True))[0]
    assert g.finish_reason == "length" and len(g.token_ids) == 3


@pytest.mark.parametrize(
    "response,match",
    [
        ({"meta_info": {"finish_reason": {"type": "length"}}}, "return_logprob"),
        (
            {
                "output_ids": [1],
                "meta_info": {"finish_reason": {"type": "length"}, "output_token_logprobs": [[-1.0, 2, None]]},
            },
            "disagree",
        ),
        ({"meta_info": {"finish_reason": None, "output_token_logprobs": []}}, "not a finished"),
        ({"meta_info": {"finish_reason": {"type": "weird"}, "output_token_logprobs": []}}, "unknown"),
    ],
)
def test_malformed_responses_raise(client, response, match):
    with pytest.raises(EngineError, match=match):
        client.parse_response(response, False)


def test_http_errors_raise_with_the_server_message(client, server):
    server.fail_next(400, {"error": {"message": "The input (9 tokens) is longer than the model's context"}})
    with pytest.raises(EngineError, match="HTTP 400: The input"):
        client.generate([[1, 2]], SamplingParams(max_new_tokens=2))
    server.fail_next(422, {"detail": [{"msg": "field required"}]})
    with pytest.raises(EngineError, match="422.*field required"):
        client.generate([[1, 2]], SamplingParams(max_new_tokens=2))


def test_the_stand_in_rejects_what_sglang_rejects(client, server):
    with pytest.raises(EngineError, match="input_ids. only"):
        client._call("POST", "/generate", {"text": "hi"})
    with pytest.raises(EngineError, match="unknown sampling params"):
        client._call("POST", "/generate", {"input_ids": [1], "sampling_params": {"bogus": 1}})
    with pytest.raises(EngineError, match="context length"):
        client.generate([[1] * 9000], SamplingParams(max_new_tokens=2))


def test_retries_transient_errors(client, server):
    server.fail_next(503, {"error": {"message": "busy"}})
    assert len(client.generate([[1, 2]], SamplingParams(max_new_tokens=3, ignore_eos=True))[0].token_ids) == 3


def test_retries_give_up_with_the_last_answer(client, server):
    for _ in range(3):  # the first try and both retries (client: retries=2)
        server.fail_next(503, {"error": {"message": "busy"}})
    with pytest.raises(EngineError, match="HTTP 503 after 2 retries: busy"):
        client.generate([[1, 2]], SamplingParams(max_new_tokens=3))
    assert server.requests == []  # no attempt reached /generate
    assert len(client.generate([[1, 2]], SamplingParams(max_new_tokens=3))) == 1  # no failure left queued


def test_zero_retries_sends_once(server):
    engine = SGLangEngine(server.url, retries=0)
    server.fail_next(503, {"error": {"message": "busy"}})
    try:
        with pytest.raises(EngineError, match="HTTP 503: busy"):
            engine.generate([[1, 2]], SamplingParams(max_new_tokens=2))
        engine.generate([[1, 2]], SamplingParams(max_new_tokens=2))
        assert len(server.requests) == 1  # the 503 was answered to the only try; the next call went through
    finally:
        engine.close()
    with pytest.raises(ValueError, match="retries >= 0"):
        SGLangEngine(server.url, retries=-1)


def test_a_request_that_times_out_is_an_engine_error_and_not_sent_again(server):
    server.hold_s = 3.0
    engine = SGLangEngine(server.url, timeout=0.5)
    try:
        with pytest.raises(EngineError, match="did not answer within 0.5s"):
            engine.generate([[1, 2]], SamplingParams(max_new_tokens=2))
        assert len(server.requests) == 1  # sampling is not idempotent: a read timeout is not retried
    finally:
        engine.close()


def test_one_pooled_connection_per_request_in_flight(server, caplog):
    """With 16 requests in flight at once, every connection goes back to the pool (requests' default pool holds
    10 and drops the others, with a warning, and opens new ones next time)."""
    server.hold_s = 0.5  # keep all 16 open at once
    engine = SGLangEngine(server.url, max_concurrency=16)
    try:
        with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
            gens = engine.generate([[1, 2]] * 16, SamplingParams(max_new_tokens=2, ignore_eos=True))
    finally:
        engine.close()
    assert len(gens) == 16 and all(len(g.token_ids) == 2 for g in gens)
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]


def test_unreachable_server():
    engine = SGLangEngine("http://127.0.0.1:9", retries=1)
    with pytest.raises(EngineError, match="unreachable"):
        engine.generate([[1]], SamplingParams())
    assert engine.health() is False
    engine.close()


@pytest.mark.parametrize("how", ["rid", "all"])
def test_aborted_request_returns_partial_ids(client, server, how):
    server.hold_s = 5.0
    out = {}
    t = threading.Thread(
        target=lambda: out.update(
            g=client.generate([[1, 2, 3]], SamplingParams(max_new_tokens=10, ignore_eos=True, seed=0))[0]
        )
    )
    t.start()
    while not server.requests:
        time.sleep(0.01)
    if how == "rid":
        client.abort(rid=server.requests[-1]["rid"])
    else:
        client.abort(abort_all=True)
    t.join(timeout=10)
    g = out["g"]
    assert g.finish_reason == "abort" and len(g.token_ids) == 5 == len(g.logprobs)


def test_weight_updates(client, server, tmp_path, tiny):
    model, _ = tiny
    model.save_pretrained(tmp_path)  # same weights, new version
    result = client.update_weights_from_disk(str(tmp_path), weight_version="step-3")
    assert result["success"] and client.model_info()["weight_version"] == "step-3"
    assert client.generate([[1, 2]], SamplingParams(max_new_tokens=2))[0].weight_version == "step-3"
    server.engine.weight_version = "0"
    with pytest.raises(EngineError, match="400.*Failed to update"):
        client.update_weights_from_disk(str(tmp_path / "nope"))
    client.flush_cache()
    client.pause_generation()
    client.continue_generation()


def test_routed_experts_wire_format():
    rows = [[[0, 3], [1, 2]], [[2, 1], [3, 0]]]
    assert decode_routed_experts(encode_routed_experts(rows), rows=2, top_k=2) == rows
    with pytest.raises(EngineError, match="multiple"):
        decode_routed_experts(encode_routed_experts(rows), rows=3)

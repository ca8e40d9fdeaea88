"""The latency ``t1train serve`` adds per request, against calling the bare engine, on the tiny MoE (CPU).

Both sides in one run, taking turns request by request: a request goes to the endpoint (HTTP on 127.0.0.1, a
kept-alive connection; and, as a second column, through the official ``openai`` client), then the bare engine
generates from the exact prompt ids the endpoint recorded for that request, with the same seed, sampling and
routing capture, so both sides sample the same tokens. A session extends its conversation each request (the TITO
bridge path) and a new session starts every ``--turns`` requests (the fresh-render path). Added latency is the
endpoint's time minus the bare engine's on the same prompt, paired request by request.

On a loaded machine the engine's own time varies by more than the endpoint adds, so a second pass isolates the
endpoint: the same HTTP requests again, to an endpoint whose engine replays the generations of the first pass
instantly (a dictionary lookup), so what is timed is the endpoint alone: HTTP, validation, the chat template and
the TITO bridge, recording, the engine-thread hand-off, the JSON reply.

    python bench/serve_latency.py --requests 60 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class ReplayEngine:
    """Answers each (prompt, seed) with the Generation the real engine gave it in the first pass."""

    def __init__(self, engine, generations: dict):
        self.engine, self.generations = engine, generations
        self.max_concurrency, self.moe_layers = 1, engine.moe_layers
        self.max_context_length = engine.max_context_length

    def generate(self, prompts, sampling, return_routed_experts=False, routed_experts_start=None, seeds=None):
        seeds = seeds or [sampling.seed] * len(prompts)
        return [self.generations[(tuple(p), s)] for p, s in zip(prompts, seeds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60, help="requests per column")
    parser.add_argument("--turns", type=int, default=6, help="requests per session before a new one starts")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()

    import openai
    import torch

    from t1train.engines.base import SamplingParams
    from t1train.engines.hf import HFEngine
    from t1train.models import tiny_moe
    from t1train.serve import PolicyServer

    torch.set_num_threads(args.threads)
    model, tokenizer = tiny_moe()
    engine = HFEngine(model, tokenizer)
    server = PolicyServer(engine, tokenizer, model_name="tiny", sampling=SamplingParams(max_new_tokens=16))
    url = server.start()
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))

    sent: list[tuple[str, str]] = []  # (session, body) of every HTTP request, for the replay pass

    def via_http(session: str, body: dict) -> dict:
        sent.append((session, json.dumps(body)))
        conn.request(
            "POST",
            "/v1/chat/completions",
            json.dumps(body),
            {"Content-Type": "application/json", "X-T1-Session": session},
        )
        response = conn.getresponse()
        data = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(data)
        return data["choices"][0]["message"]

    def via_openai(session: str, body: dict) -> dict:
        if session not in clients:  # one client (one connection pool) per session, as a harness holds it
            clients[session] = openai.OpenAI(base_url=server.session_url(session), api_key="t1")
        client = clients[session]
        reply = client.chat.completions.create(**body)
        return reply.choices[0].message.model_dump(exclude_none=True)

    clients: dict[str, openai.OpenAI] = {}
    columns = {"http": via_http, "openai": via_openai}
    times: dict[str, list[float]] = {"bare": [], "http": [], "openai": []}
    added: dict[str, list[float]] = {"http": [], "openai": []}
    conversations: dict[str, list[dict]] = {}
    generations: dict = {}
    for _ in range(3):  # warm-up: the first forward passes and the first connection
        engine.generate([tokenizer.encode("warm up")], SamplingParams(max_new_tokens=args.max_new_tokens, seed=0))
    for i in range(args.requests):
        for column, send in columns.items():
            session = f"{column}-{i // args.turns}"
            messages = conversations.setdefault(
                session, [{"role": "system", "content": "You run shell commands."}, {"role": "user", "content": "ls"}]
            )
            body = {"model": "tiny", "messages": messages, "max_tokens": args.max_new_tokens, "seed": i}
            t0 = time.perf_counter()
            reply = send(session, body)
            served = time.perf_counter() - t0
            messages += [reply, {"role": "user", "content": f"output {i}\n[exit code: 0]"}]
            turn = server.sessions[session].turns[-1]
            prompt = server.sessions[session].ids[: turn.prompt_len]
            sampling = SamplingParams(max_new_tokens=args.max_new_tokens, seed=i)
            start = turn.routed_experts_start if turn.routed_experts_start is not None else turn.prompt_len - 1
            t0 = time.perf_counter()
            [gen] = engine.generate([prompt], sampling, True, routed_experts_start=[start])
            bare = time.perf_counter() - t0
            if gen.token_ids != turn.sampled_ids:
                raise AssertionError("the bare engine sampled other ids than the endpoint: not the same work")
            generations[(tuple(prompt), i)] = gen
            times[column].append(served)
            times["bare"].append(bare)
            added[column].append(served - bare)
    server.stop()

    # -- the endpoint alone: the same HTTP requests, answered by an engine that replays the first pass
    replay = PolicyServer(ReplayEngine(engine, generations), tokenizer, sampling=SamplingParams(max_new_tokens=16))
    host, port = replay.start().removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))
    alone = []
    for session, body in sent:
        t0 = time.perf_counter()
        conn.request(
            "POST", "/v1/chat/completions", body, {"Content-Type": "application/json", "X-T1-Session": session}
        )
        response = conn.getresponse()
        response.read()
        alone.append(time.perf_counter() - t0)
        if response.status != 200:
            raise RuntimeError(f"replay: HTTP {response.status}")
    replay.stop()

    ms = 1000.0
    print(
        f"tiny MoE on CPU, {args.requests} requests per column, {args.max_new_tokens} new tokens, "
        f"sessions of {args.turns} turns, torch threads {args.threads}\n"
    )
    header = f"{'path':<44} {'median ms':>10} {'p90 ms':>8}"
    print(header)
    print("-" * len(header))
    rows = [
        ("bare engine.generate (same prompt ids, seed)", times["bare"]),
        ("endpoint, HTTP keep-alive (http.client)", times["http"]),
        ("endpoint, official openai client", times["openai"]),
        ("added by the endpoint (HTTP - bare, paired)", added["http"]),
        ("added with the openai client (paired)", added["openai"]),
        ("the endpoint alone (engine replayed instantly)", alone),
    ]
    for name, values in rows:
        print(f"{name:<44} {statistics.median(values) * ms:>10.2f} {pct(values, 0.9) * ms:>8.2f}")
    for name, values in (("paired", added["http"]), ("endpoint alone", alone)):
        goal = statistics.median(values) * ms
        print(f"goal <= 5 ms added per request, median, {name}: {goal:.2f} ms, {'met' if goal <= 5 else 'not met'}")


if __name__ == "__main__":
    main()

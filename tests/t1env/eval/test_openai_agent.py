"""The OpenAI-compatible agent over real HTTP: against a real `transformers serve` of the tiny model (slow), and
against a scripted local server for what a real model cannot be made to do on cue (429/5xx, refusing tools,
exact tool calls). The sandbox and verifier are real throughout."""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("openai")

from t1env.agent.reference import oracle_command
from t1env.eval import EvalConfig, EvalOptions, run_job
from t1env.eval.results import read_json
from t1env.registry import get_task

pytestmark = pytest.mark.needs_bwrap


class ScriptedServer:
    """A local /v1/chat/completions that answers from a script and records every request body."""

    def __init__(self, script):
        self.script, self.requests = list(script), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                status, payload = outer.script.pop(0)
                if callable(payload):
                    status, payload = payload(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def reply(content=None, tool_calls=None, prompt=100, completion=7):
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(tool_calls)
        ]
    return 200, {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": msg}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def error(status):
    return status, {"error": {"message": f"scripted {status}", "type": "x", "code": status}}


@pytest.fixture
def server():
    servers = []

    def make(script):
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _job(tmp_path, url, **opts):
    options = EvalOptions(model="m", base_url=url, **opts)
    m = run_job(EvalConfig(tasks=["hello-file"], agent="openai", options=options), tmp_path / "job")
    return (
        m,
        read_json(tmp_path / "job" / "hello-file__0" / "result.json"),
        read_json(tmp_path / "job" / "hello-file__0" / "trajectory.json"),
    )


def test_refused_tools_fall_back_to_text_and_429_503_are_retried(tmp_path, server):
    solve = oracle_command(get_task("hello-file"))
    s = server(
        [error(400), error(429), error(503), reply(f"Let me solve it.\n```bash\n{solve}\n```"), reply("Done.\nSUBMIT")]
    )
    _, r, traj = _job(tmp_path, s.url, price_prompt_per_mtok=1.0, price_completion_per_mtok=2.0)
    assert r["resolved"] and r["error"] is None and r["turns"] == 1
    assert ["tools" in q for q in s.requests] == [True, False, False, False, False]
    assert "SUBMIT" in s.requests[1]["messages"][0]["content"]  # the text-mode system prompt
    assert r["tokens"] == {"prompt": 200, "completion": 14}
    assert r["cost_usd"] == pytest.approx((200 * 1.0 + 14 * 2.0) / 1e6)
    assert traj["final_metrics"]["total_prompt_tokens"] == 200
    assert [st["tool_calls"][0]["function_name"] for st in traj["steps"][1:]] == ["bash", "submit"]


def test_tool_calls_run_in_order_and_long_output_is_cut(tmp_path, server):
    solve = oracle_command(get_task("hello-file"))
    s = server(
        [
            reply(tool_calls=[("bash", {"command": "seq 1 5000"}), ("bash", {"command": solve})]),
            reply(tool_calls=[("submit", {})]),
        ]
    )
    _, r, _ = _job(tmp_path, s.url, max_observation_chars=300)
    assert r["resolved"] and r["turns"] == 2 and len(s.requests) == 2
    tool_msgs = [msg for msg in s.requests[1]["messages"] if msg["role"] == "tool"]
    assert [t["tool_call_id"] for t in tool_msgs] == ["call_0", "call_1"]
    assert "characters cut" in tool_msgs[0]["content"] and tool_msgs[0]["content"].startswith("1\n2\n")
    assert len(tool_msgs[0]["content"]) < 400
    assert r["tokens"] == {"prompt": 200, "completion": 14}  # two calls from one reply are counted once


def test_an_invalid_tool_call_is_answered_and_asked_again(tmp_path, server):
    s = server([reply(tool_calls=[("bash", {"cmd": "ls"})]), reply(tool_calls=[("submit", {})])])
    _, r, _ = _job(tmp_path, s.url)
    assert r["end_reason"] == "submitted" and r["turns"] == 0 and r["error"] is None
    answer = s.requests[1]["messages"][-1]
    assert answer["role"] == "tool" and "bash needs a non-empty string 'command'" in answer["content"]


def test_a_server_that_keeps_failing_is_an_agent_error(tmp_path, server):
    s = server([error(500)] * 3)
    m, r, _ = _job(tmp_path, s.url, max_retries=2)
    assert r["error"]["kind"] == "agent_error" and "500" in r["error"]["message"] and len(s.requests) == 3
    assert m["errors_by_kind"] == {"agent_error": 1}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def transformers_server():
    if shutil.which("transformers") is None:
        pytest.skip("the transformers CLI is not installed (pip install 'transformers[serving]')")
    pytest.importorskip("fastapi")
    from t1train.models import tiny_moe_path

    model = str(tiny_moe_path())
    port = _free_port()
    log = open(Path(model).parent / f"serve-{port}.log", "w")  # noqa: SIM115 - the server writes it until teardown
    proc = subprocess.Popen(
        ["transformers", "serve", model, "--host", "127.0.0.1", "--port", str(port)],
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    import urllib.request

    deadline = time.monotonic() + 240  # waiting for the server to come up, not a timed assertion
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"transformers serve did not come up: {Path(log.name).read_text()[-2000:]}")
    yield model, url
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    log.close()


@pytest.mark.slow
@pytest.mark.parametrize("tool_mode", ["auto", "text"])
def test_real_transformers_serve(tmp_path, transformers_server, tool_mode):
    model, url = transformers_server
    options = EvalOptions(model=model, base_url=url, max_tokens=32, tool_mode=tool_mode)
    m = run_job(EvalConfig(tasks=["hello-file"], agent="openai", max_turns=2, options=options), tmp_path / "job")
    r = read_json(tmp_path / "job" / "hello-file__0" / "result.json")
    traj = read_json(tmp_path / "job" / "hello-file__0" / "trajectory.json")
    assert r["error"] is None, r["error"]
    assert r["end_reason"] in ("submitted", "max_turns") and r["total"] == 5
    assert r["tokens"]["prompt"] > 0 and r["tokens"]["completion"] > 0
    steps = traj["steps"][1:]
    assert sum(st["metrics"]["prompt_tokens"] for st in steps if "metrics" in st) == r["tokens"]["prompt"]
    assert all(st["model_name"] == model for st in steps)
    assert m["tokens"]["prompt"] == r["tokens"]["prompt"]

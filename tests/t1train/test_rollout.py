"""The agent loop with the real tiny model: exact ids over long episodes, drift, concurrency, limits, real env."""

import shutil
import threading
import time

import pytest
import torch

from t1train.engines.base import SamplingParams
from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner, format_observation, rollout_metrics
from t1train.tito import loss_region_drift

from .conftest import RecordingEngine, ScriptedEnv

SHORT = RolloutConfig(system_prompt="Use ```bash blocks. SUBMIT when done.", max_turns=12, concurrency=3)


def test_exact_ids_over_twelve_turn_episodes(tiny, tiny_engine):
    model, tok = tiny
    engine = RecordingEngine(tiny_engine)
    runner = RolloutRunner(
        engine, tok, lambda task: ScriptedEnv(task), SamplingParams(max_new_tokens=12, seed=0), SHORT
    )
    trajs = runner.run([EpisodeSpec("scripted", seed) for seed in range(4)])
    assert [t.num_turns for t in trajs] == [12] * 4
    assert {t.termination for t in trajs} == {"max_turns"}
    by_prompt = {tuple(p): g for p, g in engine.calls}
    assert len(engine.calls) == 48
    for traj in trajs:
        seq = traj.token_ids()
        for turn in traj.turns:
            # the engine was called with exactly the trajectory's prefix, and returned exactly the turn's ids
            g = by_prompt[tuple(seq[: turn.prompt_len])]
            assert g.token_ids == turn.sampled_ids and g.logprobs == turn.logprobs
            assert seq[turn.prompt_len : turn.prompt_len + len(turn.sampled_ids)] == turn.sampled_ids
        assert loss_region_drift(traj) == 0
        assert sum(traj.loss_mask()) == sum(len(t.sampled_ids) for t in traj.turns)
    # a trainer's forward over the whole episode reproduces the sampler's log-probs in the loss region
    traj = trajs[0]
    with torch.no_grad():
        logits = model(torch.tensor([traj.token_ids()])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    ids, mask, sampler = traj.token_ids(), traj.loss_mask(), traj.sampler_logprobs()
    recomputed = [lp[i - 1, ids[i]].item() for i in range(1, len(ids)) if mask[i]]
    assert recomputed == pytest.approx([sampler[i] for i in range(1, len(ids)) if mask[i]], abs=1e-4)


def test_metrics_tito_drift_zero_and_retokenize_baseline_positive(tiny, tiny_engine):
    _, tok = tiny
    runner = RolloutRunner(
        tiny_engine, tok, lambda task: ScriptedEnv(task), SamplingParams(max_new_tokens=16, seed=1), SHORT
    )
    trajs = runner.run([EpisodeSpec("scripted", s) for s in range(3)])
    m = rollout_metrics(trajs, tok)
    assert m["tito_drift_tokens"] == 0
    assert m["retokenize_drift_tokens"] > 0 and m["retokenize_drift_turns"] > 0
    assert m["loss_tokens"] == sum(sum(t.loss_mask()) for t in trajs)
    assert m["episodes"] == 3 and m["turns_mean"] == 12 and m["drift_events"] == 0


def test_env_calls_overlap_and_results_keep_order(tiny, tiny_engine):
    _, tok = tiny
    in_flight, peak, lock = [0], [0], threading.Lock()

    class SlowEnv(ScriptedEnv):
        def reset(self, seed=None):
            self._track(+1)
            time.sleep(0.1)
            self._track(-1)
            return super().reset(seed)

        def step(self, action):
            self._track(+1)
            time.sleep(0.05)
            self._track(-1)
            return super().step(action)

        @staticmethod
        def _track(d):
            with lock:
                in_flight[0] += d
                peak[0] = max(peak[0], in_flight[0])

    cfg = RolloutConfig(system_prompt="x", max_turns=2, concurrency=4)
    runner = RolloutRunner(tiny_engine, tok, lambda task: SlowEnv(task), SamplingParams(max_new_tokens=4), cfg)
    specs = [EpisodeSpec(f"task-{i}", i) for i in range(6)]
    trajs = runner.run(specs)
    assert [t.task_id for t in trajs] == [s.task for s in specs]
    assert peak[0] > 1  # several sandboxes were busy at once


def test_seeded_rollouts_do_not_depend_on_concurrency(tiny, tiny_engine):
    """With ``SamplingParams.seed`` each episode and turn samples from its own stream, so an evaluation gives the
    same episodes however the runner happens to batch them (env timing decides the batches)."""
    _, tok = tiny
    specs = [EpisodeSpec("scripted", 0)] * 3 + [EpisodeSpec("scripted", 1)]
    runs = []
    for concurrency in (1, 4):
        cfg = RolloutConfig(system_prompt="x", max_turns=3, concurrency=concurrency)
        runner = RolloutRunner(
            tiny_engine, tok, lambda task: ScriptedEnv(task), SamplingParams(max_new_tokens=6, seed=3), cfg
        )
        runs.append([t.token_ids() for t in runner.run(specs)])
    assert runs[0] == runs[1]
    assert len({tuple(ids) for ids in runs[0][:3]}) > 1  # same task and seed, different episodes: not clones


def test_env_failure_ends_only_that_episode(tiny, tiny_engine):
    _, tok = tiny

    def make_env(task):
        if task == "broken":
            raise RuntimeError("sandbox could not start")
        return ScriptedEnv(task)

    runner = RolloutRunner(
        tiny_engine, tok, make_env, SamplingParams(max_new_tokens=4), RolloutConfig(system_prompt="x", max_turns=2)
    )
    ok, broken = runner.run([EpisodeSpec("fine"), EpisodeSpec("broken")])
    assert ok.termination == "max_turns" and ok.num_turns == 2
    assert broken.termination == "error" and "sandbox could not start" in broken.error


def test_context_limit_submits_for_the_agent(tiny, tiny_engine):
    _, tok = tiny
    cfg = RolloutConfig(system_prompt="x", max_turns=50, max_context_tokens=200)
    runner = RolloutRunner(tiny_engine, tok, lambda t: ScriptedEnv(t), SamplingParams(max_new_tokens=16), cfg)
    [traj] = runner.run([EpisodeSpec("scripted", 0)])
    assert traj.termination == "context_limit"
    assert len(traj.token_ids()) + 16 > 200 >= traj.turns[-1].prompt_len + 16
    assert traj.checks["total"] == 2  # the loop submitted, so the verifier's result was collected


def test_format_observation():
    assert format_observation("out\n", {"exit_code": 2}, 100) == "out\n[exit code: 2]"
    assert format_observation("", {"exit_code": 0}, 100) == "[exit code: 0]"
    cut = format_observation("y" * 50, {"timed_out": True, "exit_code": 124}, 20)
    assert cut.count("y") == 20 and "30 characters cut" in cut
    assert "[the command timed out]" in format_observation("", {"timed_out": True}, 100)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the real t1 env")
def test_real_t1_env(tiny, tiny_engine):
    gym = pytest.importorskip("gymnasium")
    import t1env  # noqa: F401  registers T1Terminal-v0

    _, tok = tiny
    cfg = RolloutConfig(max_turns=3, concurrency=2)
    runner = RolloutRunner(
        tiny_engine,
        tok,
        lambda task: gym.make("T1Terminal-v0", task=task),
        SamplingParams(max_new_tokens=24, seed=0),
        cfg,
    )
    trajs = runner.run([EpisodeSpec("hello-file", 0), EpisodeSpec("hello-file", 1)])
    for traj in trajs:
        assert traj.task_id == "hello-file" and traj.termination in ("max_turns", "submit", "env_truncated")
        assert traj.checks["total"] == 5 and len(traj.checks["checks"]) == 5
        assert traj.reward == traj.checks["passed"]
        assert loss_region_drift(traj) == 0


def test_engine_error_closes_every_sandbox(tiny):
    _, tok = tiny
    envs = []

    def make_env(task):
        envs.append(ScriptedEnv(task))
        return envs[-1]

    from t1train.engines.base import EngineError
    from t1train.engines.sglang import SGLangEngine

    unreachable = SGLangEngine("http://127.0.0.1:9", retries=1)  # a real client with no server behind it
    runner = RolloutRunner(unreachable, tok, make_env, SamplingParams(), RolloutConfig(concurrency=3))
    with pytest.raises(EngineError, match="unreachable"):
        runner.run([EpisodeSpec("a"), EpisodeSpec("b"), EpisodeSpec("c")])
    assert envs and all(env.closed for env in envs)


def test_actions_step_the_env_and_submit_collects_the_reward(tiny, tiny_engine):
    """Drive the loop's turn handling with sampled-looking turns (the random tiny model rarely writes actions)."""
    from concurrent.futures import ThreadPoolExecutor, wait

    from t1train.engines.base import Generation
    from t1train.rollout import _Episode

    _, tok = tiny
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    runner = RolloutRunner(tiny_engine, tok, lambda t: ScriptedEnv(t), SamplingParams(), RolloutConfig(max_turns=5))
    ep = runner._start(_Episode(EpisodeSpec("scripted", 0)))
    turns = [
        "```bash\ntouch a\n```",
        '<tool_call>{"name": "bash", "arguments": {"command": "touch b"}}</tool_call>',
        "thinking",
        "SUBMIT",
    ]
    with ThreadPoolExecutor(2) as pool:
        for text in turns:
            ids = tok(text, add_special_tokens=False)["input_ids"] + [im_end]
            futures, ready = {}, []
            finished = runner._on_generation(
                ep, Generation(ids, [-1.0] * len(ids), "stop", im_end), futures, pool, ready
            )
            assert not finished
            for fut in wait(list(futures)).done:
                finished = runner._on_step(ep, fut.result(), futures, pool, ready)
            assert ready == ([] if text == "SUBMIT" else [ep])
    traj = ep.traj
    assert finished and traj.termination == "submit" and traj.reward == 2.0 and traj.checks["resolved"]
    assert [t.action["kind"] for t in traj.turns] == ["command", "command", "none", "submit"]
    assert ep.env.commands == ["touch a", "touch b"]
    assert "ran 'touch a'" in traj.turns[0].observation and "[exit code: 0]" in traj.turns[0].observation
    assert "No valid action" in traj.turns[2].observation
    assert [t.reward for t in traj.turns] == [0.0, 0.0, 0.0, 2.0]
    assert traj.turns[-1].bridge_ids == [] and loss_region_drift(traj) == 0
    assert tok.decode(traj.token_ids()).endswith("SUBMIT<|im_end|>")


class FailsOnCall:
    """A real engine that raises ``EngineError`` on its ``n``-th generate call (as an SGLang server that dies)."""

    def __init__(self, engine, n):
        self.engine, self.n, self.calls = engine, n, 0
        self.max_concurrency = engine.max_concurrency

    def generate(self, prompts, sampling, return_routed_experts=False, **kwargs):
        from t1train.engines.base import EngineError

        self.calls += 1
        if self.calls >= self.n:
            raise EngineError("the server went away")
        return self.engine.generate(prompts, sampling, return_routed_experts, **kwargs)


def test_engine_error_after_finished_episodes_closes_every_env(tiny, tiny_engine):
    """Finished episodes' envs are closed too (the loop used to cancel their queued close and skip them)."""
    from t1train.engines.base import EngineError

    _, tok = tiny
    envs, finished = [], []

    def make_env(task):
        envs.append(ScriptedEnv(task))
        return envs[-1]

    cfg = RolloutConfig(system_prompt="x", max_turns=1, concurrency=2)  # one turn, then the loop submits
    runner = RolloutRunner(FailsOnCall(tiny_engine, 3), tok, make_env, SamplingParams(max_new_tokens=4), cfg)
    with pytest.raises(EngineError, match="went away"):
        runner.run([EpisodeSpec(f"t{i}", i) for i in range(8)], on_episode=lambda i, t: finished.append(i))
    assert finished and len(finished) < 8  # some episodes had finished when the engine failed
    assert envs and all(env.closed for env in envs)


def test_on_episode_gets_each_episode_as_it_finishes(tiny, tiny_engine):
    _, tok = tiny
    seen = []
    cfg = RolloutConfig(system_prompt="x", max_turns=2, concurrency=2)
    runner = RolloutRunner(tiny_engine, tok, lambda t: ScriptedEnv(t), SamplingParams(max_new_tokens=4), cfg)
    trajs = runner.run(
        [EpisodeSpec(f"t{i}", i) for i in range(4)], on_episode=lambda i, t: seen.append((i, t.task_id, t.termination))
    )
    assert sorted(seen) == [(i, f"t{i}", "max_turns") for i in range(4)]
    assert [t.task_id for t in trajs] == ["t0", "t1", "t2", "t3"]


def test_an_error_in_on_episode_stops_the_run_and_closes_every_env(tiny, tiny_engine):
    _, tok = tiny
    envs = []

    def make_env(task):
        envs.append(ScriptedEnv(task))
        return envs[-1]

    def disk_full(index, traj):
        raise OSError(28, "No space left on device")

    runner = RolloutRunner(
        tiny_engine,
        tok,
        make_env,
        SamplingParams(max_new_tokens=4),
        RolloutConfig(system_prompt="x", max_turns=1, concurrency=3),
    )
    with pytest.raises(OSError, match="No space"):
        runner.run([EpisodeSpec(f"t{i}", i) for i in range(6)], on_episode=disk_full)
    assert envs and all(env.closed for env in envs)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the real t1 env")
def test_engine_error_leaves_no_sandbox_behind(tiny, tiny_engine, live_sandboxes):
    """Real envs from the one env factory: after an engine error no sandbox process or episode folder is left."""
    from t1train.engines.base import EngineError
    from t1train.rollout import make_env_factory

    _, tok = tiny
    before = live_sandboxes()
    started = []
    factory = make_env_factory()

    def make_env(task):
        started.append(factory(task))
        return started[-1]

    cfg = RolloutConfig(system_prompt="x", max_turns=1, concurrency=2)
    runner = RolloutRunner(FailsOnCall(tiny_engine, 3), tok, make_env, SamplingParams(max_new_tokens=4), cfg)
    with pytest.raises(EngineError):
        runner.run([EpisodeSpec("hello-file", i) for i in range(6)])
    assert len(started) >= 2 and live_sandboxes() == before
    assert all(env.unwrapped.prestart is False for env in started)  # no spare sandbox per episode

"""One agent protocol (t1env/agent/protocol.py): the same scripted transcript gives the same token ids in t1train's
rollout, ``t1env eval --agent hf`` and ``--agent openai``.

``rollout_transcript.json`` holds what t1train's rollout rendered for a scripted episode of ``chain@0`` before the
protocol had one home (commit bce6b5c): the prompt and observation token ids with the tiny model's tokenizer, and
the messages. Training must not change (the CI learning test's margins were calibrated on it), so the rollout must
still render exactly these ids; and each eval agent, fed the same model turns, must send the model the same ids
(``hf``) or the same messages (``openai``, whose server applies the template). The sandbox, shell and env are real;
the model turns are scripted (a tiny random model rarely writes an action).
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from t1env.agent.protocol import DEFAULT_SUMMARY_PROMPT, PROTOCOL_FILE, Protocol
from t1env.env import TerminalEnv
from t1env.eval import EvalOptions
from t1env.eval.hf_agent import HFAgent
from t1env.registry import get_task
from t1train.engines.base import Generation, SamplingParams
from t1train.models import load_tokenizer, tiny_moe_path
from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner, make_env_factory
from t1train.sft import OracleEngine

PINNED = json.loads((Path(__file__).parent / "rollout_transcript.json").read_text())
TURNS = PINNED["turns"]
VARIANTS = sorted(PINNED["variants"])


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


def _checkpoint(tmp_path: Path, system_prompt: str | None) -> str:
    """The tiny model's folder, as a checkpoint that records ``system_prompt`` (links: the cache stays as it is)."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for f in Path(tiny_moe_path()).iterdir():
        (folder / f.name).symlink_to(f)
    if system_prompt is not None:
        Protocol(system_prompt=system_prompt, max_observation_chars=PINNED["max_observation_chars"]).save(folder)
    return str(folder)


def _turn_ids(tokenizer, text: str) -> list[int]:
    """A scripted turn as the model would sample it: its tokens, then the end-of-turn token."""
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def _play(env, agent) -> list:
    """Play one episode of ``env`` with ``agent``; the actions it took."""
    obs, info = env.reset(seed=0)
    actions = []
    while True:
        action = agent.act(obs, info)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return actions


@pytest.mark.slow  # a whole scripted episode in a real sandbox, verifier included
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_rollout_renders_the_pinned_ids(tokenizer, variant):
    pinned = PINNED["variants"][variant]
    prompt = pinned["system_prompt"]
    cfg = RolloutConfig(
        max_observation_chars=PINNED["max_observation_chars"],
        max_turns=8,
        concurrency=1,
        **({"system_prompt": prompt} if prompt is not None else {}),
    )
    runner = RolloutRunner(
        OracleEngine(tokenizer, [TURNS]), tokenizer, make_env_factory(), SamplingParams(max_new_tokens=64, seed=0), cfg
    )
    (traj,) = runner.run([EpisodeSpec(PINNED["task"], 0)])
    assert traj.termination == "submit", traj.error
    assert traj.messages == pinned["messages"]
    assert [t.action for t in traj.turns] == pinned["actions"]
    assert traj.token_ids() == pinned["ids"]


class ScriptedHFAgent(HFAgent):
    """``--agent hf`` with the model's turns scripted; records every prompt it sends."""

    def __init__(self, task, options, tokenizer):
        super().__init__(task, options)
        self.script = [_turn_ids(tokenizer, t) for t in TURNS]
        self.prompts: list[list[int]] = []
        self.sampled: list[list[int]] = []

    def sample(self, ids):
        self.prompts.append(list(ids))
        self.sampled.append(self.script.pop(0))
        return self.sampled[-1]


@pytest.mark.slow  # a whole scripted episode in a real sandbox, verifier included
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_hf_agent_sends_the_rollouts_ids(tmp_path, tokenizer, variant):
    """Each prompt ``--agent hf`` sends is the rollout's sequence up to that turn; the system prompt comes from the
    checkpoint's t1_protocol.json (the ``act`` variant) or is the text protocol's (``default``)."""
    pinned = PINNED["variants"][variant]
    ckpt = _checkpoint(tmp_path, pinned["system_prompt"])
    options = EvalOptions(model=ckpt, max_tokens=64, max_observation_chars=PINNED["max_observation_chars"])
    agent = ScriptedHFAgent(get_task(PINNED["task"]), options, tokenizer)
    with TerminalEnv(task=PINNED["task"], prestart=False) as env:
        actions = _play(env, agent)
    assert actions[-1] == {"submit": True} and len(agent.prompts) == len(TURNS)
    for prompt in agent.prompts:
        assert prompt == pinned["ids"][: len(prompt)]
    assert agent.prompts[-1] + agent.sampled[-1] == pinned["ids"]
    assert agent.messages == pinned["messages"]


class ScriptedOpenAI:
    """The ``openai`` client's ``chat.completions.create`` answering from the scripted turns (text replies)."""

    def __init__(self):
        self.script, self.requests = list(TURNS), []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **kwargs):
        self.requests.append(json.loads(json.dumps(kwargs)))
        msg = SimpleNamespace(content=self.script.pop(0), tool_calls=None)
        usage = SimpleNamespace(prompt_tokens=1, completion_tokens=1)
        return SimpleNamespace(choices=[SimpleNamespace(message=msg)], usage=usage)


@pytest.mark.slow  # a whole scripted episode in a real sandbox, verifier included
def test_the_openai_agent_sends_the_rollouts_messages(tokenizer):
    """``--agent openai --protocol text``: the server gets the rollout's conversation, which its chat template
    renders to the rollout's ids."""
    pytest.importorskip("openai")
    from t1env.eval.openai_agent import OpenAIAgent

    pinned = PINNED["variants"]["default"]
    client = ScriptedOpenAI()
    options = EvalOptions(model="m", protocol="text", max_observation_chars=PINNED["max_observation_chars"])
    agent = OpenAIAgent(get_task(PINNED["task"]), options, client=client)
    with TerminalEnv(task=PINNED["task"], prestart=False) as env:
        actions = _play(env, agent)
    assert actions[-1] == {"submit": True} and len(client.requests) == len(TURNS)
    assert "tools" not in client.requests[0]
    last = client.requests[-1]["messages"] + [{"role": "assistant", "content": TURNS[-1]}]
    assert last == pinned["messages"]
    text = tokenizer.apply_chat_template(client.requests[-1]["messages"], tokenize=False, add_generation_prompt=True)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids + _turn_ids(tokenizer, TURNS[-1]) == pinned["ids"]


def test_a_checkpoint_records_its_protocol(tmp_path):
    """What t1train writes into a checkpoint is what the hf agent reads back; a broken record is one line."""
    cfg = RolloutConfig(
        system_prompt="Act in the shell.", max_turns=6, truncated_turns="reject", context_policy="summary",
        keep_last_turns=2,
    )  # fmt: skip
    cfg.agent_protocol(max_new_tokens=24).save(tmp_path)
    got = Protocol.load(tmp_path)
    assert got == Protocol(
        system_prompt="Act in the shell.",
        max_turns=6,
        truncated_turns="reject",
        max_new_tokens=24,
        max_context_tokens=8192,
        context_policy="summary",
        keep_last_turns=2,
    )
    assert Protocol.load(tmp_path / "none") is None
    (tmp_path / PROTOCOL_FILE).write_text('{"name": "telepathy"}')
    with pytest.raises(ValueError, match=r"t1_protocol.json: protocol must be one of text, tools, got 'telepathy'"):
        Protocol.load(tmp_path)


# ------------------------------------------------------------------------------------------------ context policies
class ChattyEnv:
    """A ``T1Terminal-v0`` look-alike without a sandbox: each command's output is a few lines (the context fills in
    a few turns), SUBMIT ends the episode."""

    def reset(self, seed=None):
        return "Count to ten, one echo a turn, then submit.", {"max_turns": 20}

    def step(self, action):
        if isinstance(action, dict) and action.get("submit"):
            return "", 1.0, True, False, {"passed": 1, "total": 1, "resolved": True}
        command = action["command"] if isinstance(action, dict) else action  # the eval agents send {"command": ...}
        return f"ran {command}\n" + "output line\n" * 6, 0.0, False, False, {"exit_code": 0}

    def close(self):
        pass


def chatty_turn(tokenizer, prompt: list[int], n: int) -> list[int]:
    """The scripted policy: a summary when the prompt ends by asking for one, else ``echo n`` (SUBMIT at 10)."""
    asked = DEFAULT_SUMMARY_PROMPT[-40:] in tokenizer.decode(prompt[-60:])
    text = f"Summary: echoed up to {n}." if asked else ("SUBMIT" if n >= 10 else f"```bash\necho {n}\n```")
    return _turn_ids(tokenizer, text)


class ChattyEngine:
    """The rollout's engine for :func:`chatty_turn`."""

    max_concurrency = 1

    def __init__(self, tokenizer):
        self.tokenizer, self.n = tokenizer, 0

    def generate(self, prompts, sampling, return_routed_experts=False, **kwargs):
        ids = chatty_turn(self.tokenizer, prompts[0], self.n)
        self.n += 1
        return [Generation(ids, [-0.5] * len(ids), "stop", self.tokenizer.eos_token_id)]


class ChattyHFAgent(HFAgent):
    """``--agent hf`` answering with :func:`chatty_turn`; records every prompt it sends."""

    def __init__(self, task, options, tokenizer):
        super().__init__(task, options)
        self.prompts: list[list[int]] = []

    def sample(self, ids):
        self.prompts.append(list(ids))
        return chatty_turn(self.tokenizer, ids, len(self.prompts) - 1)


@pytest.mark.parametrize("policy", ["drop_observations", "summary"])
def test_the_hf_agent_goes_on_in_segments_as_the_rollout_does(tmp_path, tokenizer, policy):
    """``t1env eval --agent hf`` on a checkpoint that records a context policy (``t1_protocol.json``): when the next
    turn would not fit, the agent starts a new segment (or asks for a summary first) as t1train's rollout does:
    every prompt it sends is the rollout's prompt of that turn, token for token, in every segment."""
    cfg = RolloutConfig(
        system_prompt="Act.", max_turns=20, concurrency=1, max_context_tokens=360, context_policy=policy,
        keep_last_turns=1,
    )  # fmt: skip
    runner = RolloutRunner(ChattyEngine(tokenizer), tokenizer, lambda t: ChattyEnv(), SamplingParams(24, seed=0), cfg)
    (traj,) = runner.run([EpisodeSpec("chatty", 0)])
    assert traj.termination == "submit" and traj.num_segments > 2, (traj.termination, traj.num_segments, traj.error)
    expected = [view.token_ids()[: turn.prompt_len] for view in traj.segment_views() for turn in view.turns]
    ckpt = _checkpoint(tmp_path, None)
    cfg.agent_protocol(24).save(ckpt)  # as a checkpoint of a run with this rollout config records it
    agent = ChattyHFAgent(get_task("hello-file"), EvalOptions(model=ckpt), tokenizer)
    actions = _play(ChattyEnv(), agent)
    assert actions[-1] == {"submit": True}
    assert agent.prompts == expected and agent.segments == traj.num_segments
    if policy == "drop_observations":  # --context-policy end: submitted where the first segment ended
        agent = ChattyHFAgent(get_task("hello-file"), EvalOptions(model=ckpt, context_policy="end"), tokenizer)
        assert _play(ChattyEnv(), agent)[-1] == {"submit": True}
        first = len(traj.segment_views()[0].turns)
        assert agent.prompts == expected[:first] and agent.segments == 1

"""SFT warm-start: fine-tune the policy on oracle episodes rendered exactly as RL will see them.

A random or weak model rarely emits a valid action, so RL has nothing to reinforce. The warm-start plays each
task's oracle (``solution/solve.sh``) through the *same* agent loop, chat template and TITO bridges that RL uses:
an :class:`OracleEngine` stands in for the model and "samples" the oracle's turns as token ids (a fenced
``bash`` block with the solution, then ``SUBMIT``), the real env runs them and the verifier scores them. The
resulting trajectories have the RL layout (prompt, action tokens with loss mask 1, observations with mask 0), and
TRL's ``SFTTrainer`` trains on the action tokens only (``assistant_masks``).

Example (the tokens RL will sample are the tokens SFT trains on)::

    trajectories = oracle_trajectories(tokenizer, ["hello-file"], seeds=[0, 1])
    dataset = sft_dataset(trajectories)      # input_ids + assistant_masks
    run_sft(model, tokenizer, dataset, SFTConfig(output_dir="runs/sft", max_steps=100))
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from t1env.agent.reference import oracle_command, typed_script
from t1env.registry import get_task
from t1train.engines.base import FINISH_STOP, Generation, SamplingParams, episode_seed
from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner, make_env_factory
from t1train.trajectory import Trajectory

ORACLE_TURNS = ("script", "lines")


def oracle_turns(command: str, turns: str = "script") -> list[str]:
    r"""The assistant turns of an oracle episode, then ``SUBMIT``: the whole solution in one turn (``script``), or
    one turn per line (``lines``: for solutions whose every line is a whole command, so the agent learns to read
    each command's output before it types the next).

    Example:
        >>> oracle_turns("cat name.txt\nmkdir red", "lines")
        ['```bash\ncat name.txt\n```', '```bash\nmkdir red\n```', 'SUBMIT']
    """
    if turns not in ORACLE_TURNS:
        raise ValueError(f"oracle turns must be one of {ORACLE_TURNS}, got {turns!r}")
    commands = [command] if turns == "script" else [line for line in command.splitlines() if line.strip()]
    return [f"```bash\n{c}\n```" for c in commands] + ["SUBMIT"]


class OracleEngine:
    """An Engine that replays scripted assistant turns as token ids (log-prob 0: a point mass).

    ``scripts`` says which turns a prompt gets: ``{instruction text: [turn text, ...]}`` picks the script whose
    instruction is in the prompt; ``[[turn text, ...], ...]`` gives one script per episode, in the order the episodes
    are given to the ``RolloutRunner``, which must sample with ``SamplingParams(seed=sampling_seed)``: the per-episode
    seed it passes (:func:`t1train.engines.base.episode_seed`) says which episode and turn a prompt is, so episodes
    that share an instruction (the instances of ``chain``, a task's demos) can play different scripts in one batch.
    With an instruction key, the turn index is the number of assistant turns already in the prompt.
    """

    max_concurrency = 1

    def __init__(self, tokenizer, scripts: dict[str, list[str]] | list[list[str]], sampling_seed: int = 0):
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.by_seed = (
            None
            if isinstance(scripts, dict)
            else {
                episode_seed(sampling_seed, episode, turn): text
                for episode, turns in enumerate(scripts)
                for turn, text in enumerate(turns)
            }
        )
        self.stop_id = tokenizer.eos_token_id
        self.weight_version = "oracle"

    def _turn(self, prompt: list[int], seed: int | None) -> str:
        if self.by_seed is not None:
            if seed not in self.by_seed:
                raise KeyError(
                    "no episode script has this sampling seed; run the episodes in the order of the "
                    "scripts with SamplingParams(seed=sampling_seed)"
                )
            return self.by_seed[seed]
        text = self.tokenizer.decode(prompt)
        for instruction, turns in self.scripts.items():
            if instruction.strip() in text:
                return turns[min(text.count("<|im_start|>assistant") - 1, len(turns) - 1)]
        raise KeyError("no oracle script matches this prompt; pass the env's reset observation as the key")

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingParams,
        return_routed_experts: bool = False,
        routed_experts_start: list[int] | None = None,
        seeds: list[int] | None = None,
    ) -> list[Generation]:
        out = []
        for prompt, seed in zip(prompts, seeds or [None] * len(prompts)):
            ids = self.tokenizer(self._turn(prompt, seed), add_special_tokens=False)["input_ids"] + [self.stop_id]
            out.append(Generation(ids, [0.0] * len(ids), FINISH_STOP, self.stop_id, None, self.weight_version))
        return out

    def update_weights_from_disk(self, path: str, weight_version: str | None = None) -> None:
        raise NotImplementedError("the oracle has no weights")


def oracle_trajectories(
    tokenizer,
    tasks: list[str],
    seeds: list[int],
    make_env: Callable[[str], Any] | None = None,
    rollout: RolloutConfig | None = None,
    require_resolved: bool = True,
    turns: str = "script",
    demos: bool = False,
) -> list[Trajectory]:
    """Play every (task, seed) with the task's oracle in the real env; keep the episodes the verifier resolved.

    ``turns``: how the solution is split into assistant turns (:func:`oracle_turns`). ``demos``: also play each of
    the task's demonstrations (``solution/demos/*.sh``, :attr:`t1env.task.Task.demos`) and keep those episodes
    whatever they score: they are a demonstrator's, flawed ones included.
    """
    make_env = make_env or make_env_factory()
    plays: list[tuple[EpisodeSpec, list[str], bool]] = []  # (episode, its script's turns, is a demo)
    for task in tasks:
        spec = get_task(task)
        scripts = [(oracle_turns(oracle_command(spec, typed=True), turns), False)]
        if demos:
            scripts += [(oracle_turns(typed_script(p.read_text(encoding="utf-8")), turns), True) for p in spec.demos]
        plays += [(EpisodeSpec(task, seed), script, is_demo) for seed in seeds for script, is_demo in scripts]
    rollout = rollout or RolloutConfig(max_turns=4)
    if turns == "lines":  # room for every command and the SUBMIT
        rollout = dataclasses.replace(rollout, max_turns=max(rollout.max_turns, *(len(s) for _, s, _ in plays)))
    runner = RolloutRunner(
        OracleEngine(tokenizer, [script for _, script, _ in plays]),
        tokenizer,
        make_env,
        SamplingParams(max_new_tokens=1024, seed=0),
        rollout,
    )
    played = list(zip(runner.run([episode for episode, _, _ in plays]), [is_demo for _, _, is_demo in plays]))
    if require_resolved:
        oracle = [t for t, is_demo in played if not is_demo]
        unresolved = [t.task_id for t in oracle if not t.checks.get("resolved")]
        if len(unresolved) == len(oracle):
            raise RuntimeError(
                f"no oracle episode was resolved (tasks {sorted(set(unresolved))}); "
                "check the tasks with `t1env validate`"
            )
        played = [(t, is_demo) for t, is_demo in played if is_demo or t.checks.get("resolved")]
    return [t for t, _ in played]


def sft_dataset(trajectories: list[Trajectory]):
    """A pre-tokenized dataset for TRL's ``SFTTrainer``: ``input_ids`` and ``assistant_masks`` (the loss mask), one
    row per segment of each episode (``Trajectory.segment_views``)."""
    import datasets  # the train extra: only when SFT runs

    return datasets.Dataset.from_list(
        [
            {"input_ids": v.token_ids(), "assistant_masks": v.loss_mask()}
            for t in trajectories
            for v in t.segment_views()
        ]
    )


def run_sft(model, tokenizer, dataset, config):
    """Train with TRL's ``SFTTrainer`` on the action tokens; returns the trainer (``trainer.model`` is tuned)."""
    from trl import SFTTrainer  # the train extra: only when SFT runs

    router_logits = getattr(model.config, "output_router_logits", None)
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    if router_logits is not None:  # SFTTrainer turns MoE router logits on for its aux loss; sampling needs them off
        model.config.output_router_logits = router_logits
    return trainer

"""The private TRL names T1Trainer relies on (t1train/trl_surface.py) still fit the installed TRL and transformers.

When a TRL release renames, removes or changes one of them, these tests fail with one line per name, e.g.
``trl.GRPOTrainer._calculate_rewards (trl 1.17.0, transformers 5.24.0): parameters are now (...), t1 passes (...)``.
The static checks need no model; the instance checks build one tiny trainer (no training) and check what t1 does with
TRL's instance attributes. A last test checks that t1train uses no private TRL name the list does not hold.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib.metadata
import tomllib
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from trl import GRPOTrainer

from t1train import trl_surface
from t1train.trainer import T1Trainer
from t1train.trl_surface import SURFACE, check, missing_instance_attributes

from .conftest import ScriptedEnv, tiny_config

ROOT = Path(__file__).resolve().parents[2]


def _fail_on(lines: list[str]) -> None:
    if lines:
        pytest.fail("\n".join(lines), pytrace=False)


def test_installed_trl_is_the_version_pyproject_allows():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["train"]
    for name in ("trl", "transformers"):
        requirement = next(Requirement(d) for d in dependencies if Requirement(d).name == name)
        installed = importlib.metadata.version(name)
        assert requirement.specifier.contains(installed, prereleases=True), (
            f"{name} {installed} is installed but pyproject.toml asks for {requirement}: pip install '{requirement}'"
        )


def test_every_pinned_private_name_fits_the_installed_trl():
    _fail_on(check())


# ------------------------------------------------------------------------------------------------ the check itself
class _ChangedTrainer(GRPOTrainer):
    """GRPOTrainer as a future TRL might change it: a new required parameter, one renamed, one method gone."""

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list, mode):
        raise NotImplementedError

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, num_logits, batch_size=None):
        raise NotImplementedError

    def _generate_and_score_completions(self, inputs, mode="train"):
        raise NotImplementedError


def _against(cls, name: str) -> list[str]:
    entry = next(e for e in SURFACE if e.name == name)
    return check((dataclasses.replace(entry, owner=f"{__name__}.{cls.__name__}"),))


def test_the_check_names_a_changed_or_missing_method_in_one_line():
    cases = {
        "_calculate_rewards": "new required parameters ('mode',) that t1 does not pass",
        "_get_per_token_logps_and_entropies": "t1 passes ('self', 'model', 'input_ids', 'attention_mask', "
        "'logits_to_keep', 'batch_size', 'compute_entropy', 'compute_aux_loss')",
        "_generate_and_score_completions": "t1's override takes ('self', 'inputs')",  # TRL would pass mode=
    }
    for name, why in cases.items():
        lines = _against(_ChangedTrainer, name)
        assert len(lines) == 1 and "\n" not in lines[0], lines
        assert lines[0].startswith(f"{__name__}._ChangedTrainer.{name} (trl "), lines[0]
        assert why in lines[0] and "t1train/trl_surface.py" in lines[0], lines[0]
    gone = check((dataclasses.replace(SURFACE[0], owner=f"{__name__}._NoTrainer"),))
    assert len(gone) == 1 and "cannot be imported" in gone[0], gone
    gone = check((dataclasses.replace(SURFACE[0], owner="torch.nn.Module"),))
    assert gone == [
        (
            f"torch.nn.Module._generate_and_score_completions ({trl_surface.versions()}): gone. "
            f"t1 overrides it: {SURFACE[0].why}. Update T1Trainer and this entry in t1train/trl_surface.py"
        )
    ]


def test_a_version_bound_entry_is_checked_only_where_it_applies():
    private = next(e for e in SURFACE if e.name == "_rotate_checkpoints")
    public = next(e for e in SURFACE if e.name == "rotate_checkpoints")
    major = int(importlib.metadata.version("transformers").split(".")[0])
    assert trl_surface.applies(private) == (major < 5) and trl_surface.applies(public) == (major >= 5)
    if major >= 5:  # transformers 5 has no Trainer._rotate_checkpoints: checked anyway, the entry is "gone"
        assert ": gone." in check((dataclasses.replace(private, applies=None),))[0]
    assert check((dataclasses.replace(private, applies="transformers<0"),)) == []  # not checked where not needed


# ------------------------------------------------------------------------------------------------ a built trainer
@pytest.fixture(scope="module")
def trainer(tiny, tmp_path_factory):
    model, tokenizer = tiny
    args = tiny_config(tmp_path_factory.mktemp("surface"), rollout_concurrency=8, learning_rate=1e-6)
    return T1Trainer(copy.deepcopy(model), args, processing_class=tokenizer, make_env=lambda task: ScriptedEnv(task))


def test_the_trainer_still_has_the_attributes_t1_uses(trainer):
    _fail_on(missing_instance_attributes(trainer))


def test_metrics_written_to_trl_metrics_reach_the_log_averaged(trainer):
    """t1 appends its metrics to TRL's private ``_metrics[mode]``; TRL's ``log()`` must average and clear them."""
    trainer.model.train()
    trainer._metrics["train"]["t1/surface_probe"].extend([1.0, 3.0])
    trainer.log({"loss": 0.5})
    logged = trainer.state.log_history[-1]
    assert logged.get("t1/surface_probe") == 2.0, (
        f"trl.GRPOTrainer._metrics ({trl_surface.versions()}): a value appended to _metrics['train'] did not reach "
        f"the log averaged (got {logged}); T1Trainer's metrics would vanish: update t1train/trl_surface.py"
    )
    assert "t1/surface_probe" not in trainer._metrics["train"]


def test_per_token_logps_returns_what_t1_unpacks(trainer):
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        out = trainer._get_per_token_logps_and_entropies(trainer.model, ids, torch.ones_like(ids), 3, batch_size=1)
    assert isinstance(out, tuple) and len(out) == 3, (
        f"trl.GRPOTrainer._get_per_token_logps_and_entropies ({trl_surface.versions()}): returns "
        f"{type(out).__name__} of {len(out) if isinstance(out, tuple) else '?'}; t1 unpacks (logps, entropies, aux)"
    )
    assert out[0].shape == (1, 3) and (out[0] <= 0).all()


def test_gradient_checkpointing_calls_the_function_r3_replaces():
    """R3 swaps each layer's ``_gradient_checkpointing_func`` to replay routing in the recomputation."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_layers import GradientCheckpointingLayer

    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=32,
            hidden_size=8,
            intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    assert layers and all("_gradient_checkpointing_func" in vars(m) for m in layers), (
        f"transformers ({trl_surface.versions()}): gradient_checkpointing_enable() no longer sets "
        "_gradient_checkpointing_func on the layers; R3 would not replay recomputed forwards "
        "(t1train/r3.py, t1train/trl_surface.py)"
    )
    calls = []
    for layer in layers:
        inner = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = lambda fn, *a, _inner=inner, **kw: (calls.append(1), _inner(fn, *a, **kw))[
            1
        ]
    model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    assert len(calls) == len(layers), "the layers no longer call _gradient_checkpointing_func (t1train/r3.py)"


def test_the_critic_steps_once_per_optimizer_step(tiny, tmp_path, scripted_env):
    """The critic's optimizer steps from a public callback (``on_optimizer_step``), not by counting TRL's private
    micro-step counter: two optimizer steps of two micro-batches each step it twice, and it learns."""
    model, tokenizer = tiny
    args = tiny_config(
        tmp_path / "out",
        train_seeds=[0, 1, 2, 3],
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        max_steps=2,
        rollout_concurrency=8,
        learning_rate=1e-6,
        critic_learning_rate=1e-2,
    )
    trainer = T1Trainer(
        copy.deepcopy(model), args, processing_class=tokenizer, make_env=lambda task: scripted_env(task)
    )
    with torch.no_grad():  # the untrained policy scores 0: a critic that predicts 0.5 has something to learn
        trainer.value_model.head.bias.fill_(0.5)
    steps = []
    inner = trainer._critic_optimizer_step
    trainer._critic_optimizer_step = lambda: (steps.append(trainer.state.global_step), inner())
    trainer.train()
    assert steps == [0, 1]  # once per optimizer step, before global_step counts it
    assert trainer.value_model.head.bias.item() < 0.5  # towards the returns (0)
    assert trainer.current_gradient_accumulation_steps == 2  # set by the loop; read by T1Trainer._value_normalizer


def test_checkpoints_over_the_limit_are_rotated_in_the_run_folder(tiny, tmp_path, scripted_env):
    """Checkpoints are staged in a temp folder, so t1 rotates the run folder itself (``rotate_checkpoints``)."""
    model, tokenizer = tiny
    args = tiny_config(
        tmp_path / "out",
        algorithm="grpo",
        max_steps=2,
        save_strategy="steps",
        save_steps=1,
        save_total_limit=1,
        rollout_concurrency=8,
        learning_rate=1e-6,
    )
    T1Trainer(copy.deepcopy(model), args, processing_class=tokenizer, make_env=lambda task: scripted_env(task)).train()
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if "checkpoint" in p.name) == ["checkpoint-2"]


# ------------------------------------------------------------------------------------------------ completeness
def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_names_t1train_uses() -> dict[str, str]:
    """``{name: file:line}`` for every private name a GRPOTrainer subclass in t1train overrides, or uses on ``self``,
    ``super()`` or a ``trainer`` without defining it itself (so it comes from TRL or transformers)."""
    inherited = {name for base in GRPOTrainer.__mro__ for name in vars(base)}
    trees = {path: ast.parse(path.read_text()) for path in sorted((ROOT / "t1train").rglob("*.py"))}
    subclasses = [
        (path, cls)
        for path, tree in trees.items()
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and any(ast.unparse(b).endswith("GRPOTrainer") for b in cls.bases)
    ]
    own: set[str] = set()  # what t1's subclasses define or assign themselves
    for _, cls in subclasses:
        own |= {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
        own |= {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        own |= {
            t.attr
            for n in ast.walk(cls)
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self"
        }
    used: dict[str, str] = {}
    for path, cls in subclasses:  # overrides, class attributes included (_tag_names)
        for node in cls.body:
            names = (
                [node.name]
                if isinstance(node, ast.FunctionDef)
                else [t.id for t in node.targets if isinstance(t, ast.Name)]
                if isinstance(node, ast.Assign)
                else []
            )
            used |= {n: f"{path.name}:{node.lineno}" for n in names if _is_private(n) and n in inherited}
        for node in ast.walk(cls):  # self._x / super()._x
            if (
                isinstance(node, ast.Attribute)
                and _is_private(node.attr)
                and ast.unparse(node.value) in ("self", "super()")
                and (node.attr in inherited or node.attr not in own)
            ):
                used.setdefault(node.attr, f"{path.name}:{node.lineno}")
    for path, tree in trees.items():  # trainer._x / self.trainer._x (callbacks and helpers)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _is_private(node.attr)
                and ast.unparse(node.value).endswith("trainer")
                and (node.attr in inherited or node.attr not in own)
            ):
                used.setdefault(node.attr, f"{path.name}:{node.lineno}")
    return used


def test_the_scan_finds_the_names_t1train_is_known_to_use():
    used = _private_names_t1train_uses()
    for name in ("_generate_and_score_completions", "_calculate_rewards", "_metrics", "_save_checkpoint", "_tag_names"):
        assert name in used, name
    assert "_critic_optimizer_step" not in used and "_pad_batch" not in used  # t1's own


def test_every_private_trl_name_t1train_uses_is_listed():
    listed = {e.name for e in SURFACE} | set(trl_surface.INSTANCE_ATTRIBUTES)
    unlisted = {n: w for n, w in _private_names_t1train_uses().items() if n not in listed}
    assert unlisted == {}, (
        f"t1train uses private TRL/transformers names not pinned in t1train/trl_surface.py: "
        f"{unlisted}; add each to SURFACE (owner, how, why, params), or use a public hook"
    )

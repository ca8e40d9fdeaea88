"""One PPO step (critic, GAE, R3) on the tiny MoE, run by ``torchrun --nproc_per_node N`` for N = 1 and 2 by
``tests/t1train/test_multiprocess.py``: the same generation batch of 8 episodes, played and trained in one process
or split over two. Writes the policy and critic before (``OUT/initial``) and after the step (``OUT``), from the main
process only.

``adam_epsilon=1e-3`` (for the policy and the critic): the tiny model's gradients are far below it, so the first
Adam step is ``lr * g / eps``, linear in the gradient, and comparing updates compares gradients. With the default
1e-8 the first step is ``lr * sign(g)``: an element whose gradient is at float32 rounding level takes either sign,
and the updates differ by up to 2 * lr there whatever the implementation.

Usage: torchrun --nproc_per_node N tests/t1train/multiprocess/one_step.py TASK_DIR OUT
"""

import os
import sys

import torch

from t1train.models import load_model_and_tokenizer
from t1train.trainer import T1Config, T1Trainer


def spread(trajectory, **kwargs) -> list[float]:
    """A reward that varies within groups (the untrained tiny model passes no checks): the advantages, the critic's
    targets and so the gradients are non-zero. A function of the sampled tokens only, so equal data gives equal
    rewards in every process layout."""
    return [float(sum(t.token_ids()[len(t.prompt_ids) :]) % 5) for t in trajectory]


def main(task: str, out: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.manual_seed(0)
    model, tokenizer = load_model_and_tokenizer("tiny")
    args = T1Config(
        output_dir=out,
        algorithm="ppo",
        r3=True,
        tasks=[task],
        train_seeds=[0, 1, 2, 3],
        num_generations=2,
        per_device_train_batch_size=8 // world,
        gradient_accumulation_steps=1,
        max_steps=1,
        max_turns=2,
        max_new_tokens=8,
        rollout_concurrency=4,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        adam_epsilon=1e-3,
        critic_warmup_iterations=0,
        critic_learning_rate=1e-3,
        off_policy_correction="token_truncate",
        save_strategy="no",
        seed=0,
        torch_compile=False,
        system_prompt="Act in the shell.",
        disable_tqdm=True,
    )
    trainer = T1Trainer(model, args, processing_class=tokenizer, reward_funcs=[spread])
    if trainer.accelerator.is_main_process:  # the starting point, to compare updates rather than weights
        model.save_pretrained(os.path.join(out, "initial"))
        trainer.value_model.save_pretrained(os.path.join(out, "initial", "value_model"))
    trainer.train()
    trainer.save_model(out)  # the policy (main process) and value_model/


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

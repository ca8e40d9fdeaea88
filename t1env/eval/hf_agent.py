"""``--agent hf --model PATH``: a local Hugging Face checkpoint, sampled in-process with ``transformers`` (the
``train`` extra), speaking the plain-text action format of :mod:`t1env.eval.openai_agent` (one command in a
```` ```bash ```` block, or ``SUBMIT``).

The model and tokenizer are loaded once per process and shared by the job's trials; generation runs one request
at a time (a lock), so ``--concurrency`` overlaps sandboxes with sampling but not two samplings. The prompt is the
tokenizer's chat template over the conversation so far; tokens are counted exactly (prompt ids in, new ids out).
For a large model, serve it (``transformers serve``, vLLM, SGLang) and use ``--agent openai`` instead.
"""

from __future__ import annotations

import threading

from t1env.eval.agents import EvalOptions
from t1env.eval.openai_agent import HOW_TEXT, REMINDER, SYSTEM_PROMPT, parse_text_action, truncate_observation
from t1env.task import Task

_LOADED: dict[str, tuple] = {}
_LOAD_LOCK = threading.Lock()
_GENERATE_LOCK = threading.Lock()


def load(path: str) -> tuple:
    """``(model, tokenizer)`` for a checkpoint folder, loaded once per process."""
    with _LOAD_LOCK:
        if path not in _LOADED:
            try:
                from transformers import AutoModelForCausalLM, AutoTokenizer
            except ImportError:
                raise ValueError("--agent hf needs transformers and torch: pip install -e '.[train]'") from None
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path).eval()
            except Exception as e:  # noqa: BLE001 - transformers raises OSError, ValueError, ... for a folder it cannot read
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise ValueError(f"--model {path}: not a loadable checkpoint folder ({first})") from None
            _LOADED[path] = (model, tokenizer)
        return _LOADED[path]


class HFAgent:
    """One trial's conversation with a local checkpoint (see the module docstring)."""

    def __init__(self, task: Task, options: EvalOptions):
        self.task, self.options = task, options
        self.model, self.tokenizer = load(options.model)
        self.messages: list[dict] = []
        self.last_turn: dict | None = None

    def act(self, observation: str, info: dict) -> dict:
        obs = truncate_observation(observation, self.options.max_observation_chars)
        if not self.messages:
            self.messages = [{"role": "system", "content": SYSTEM_PROMPT.format(how=HOW_TEXT)},
                             {"role": "user", "content": obs}]
        else:
            self.messages.append({"role": "user", "content": f"Output:\n```\n{obs}\n```"})
        turn: dict = {"prompt_tokens": 0, "completion_tokens": 0}
        texts = []
        for reminder in (False, True):
            text = self._generate(turn)
            texts.append(text)
            self.messages.append({"role": "assistant", "content": text})
            action = parse_text_action(text)
            if action is not None:
                break
            if reminder:
                texts.append("[t1] two replies without a command: the trial is submitted")
                action = {"submit": True}
                break
            self.messages.append({"role": "user", "content": REMINDER})
        turn["message"] = "\n\n".join(t for t in texts if t)
        self.last_turn = turn
        return action

    def _generate(self, turn: dict) -> str:
        import torch

        ids = self.tokenizer.apply_chat_template(self.messages, add_generation_prompt=True, tokenize=True,
                                                 return_dict=False)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        prompt = torch.tensor([list(ids)])
        sample = self.options.temperature > 0
        with _GENERATE_LOCK, torch.inference_mode():
            out = self.model.generate(
                prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=self.options.max_tokens,
                do_sample=sample, temperature=self.options.temperature if sample else None, top_p=None, top_k=None,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new = out[0, prompt.shape[1]:].tolist()
        turn["prompt_tokens"] += prompt.shape[1]
        turn["completion_tokens"] += len(new)
        return self.tokenizer.decode(new, skip_special_tokens=True)

"""A tiny Mixture-of-Experts causal LM for tests and CPU smoke runs, built on demand without downloads.

The model is a random-initialized ``Qwen3MoeForCausalLM`` (2 layers, 4 experts, top-2 routing, hidden size 64)
paired with a byte-level BPE tokenizer that t1 trains with ``tokenizers`` on a small corpus written here (shell
sessions, chat turns, JSON tool calls), and a ChatML chat template. It knows nothing, but it exercises every path
a real model does: chat templates, special tokens, BPE merges across turn boundaries, MoE routing.

Building takes about a second. The result is cached in t1's cache folder (``t1env.resources.cache_dir()``:
``$T1_CACHE_DIR``, default ``~/.cache/t1``) in a folder keyed by a hash of the recipe, so changing the recipe rebuilds it and two processes never read a half-written
folder (the build is written to a temporary folder and renamed into place).

Example:
    >>> from t1train.models import tiny_moe
    >>> model, tokenizer = tiny_moe()
    >>> tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
    ...                               add_generation_prompt=True)
    '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
    >>> model.config.num_experts, model.config.num_experts_per_tok
    (4, 2)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from t1env.resources import cache_dir

# ChatML, as used by Qwen models: each message is `<|im_start|>{role}\n{content}<|im_end|>\n`.
# Note the newline *after* `<|im_end|>`: the model stops at `<|im_end|>` and never samples that newline,
# which is one of the boundary cases TITO handles (see t1train/tito.py).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

MODEL_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_experts=4,
    num_experts_per_tok=2,
    decoder_sparse_step=1,
    norm_topk_prob=True,
    max_position_embeddings=8192,
    rope_theta=10000.0,
    tie_word_embeddings=False,
)

VOCAB_SIZE = 1024
SEED = 0
RECIPE_VERSION = 1  # bump when the build code changes in a way the other fields do not show


def corpus() -> list[str]:
    """The training corpus for the tiny tokenizer: short shell sessions, chat turns and tool calls."""
    commands = [
        "ls -la",
        "cat README.md",
        "echo hello > hello.txt",
        "grep -rn error logs/",
        "cd /workspace && ls",
        "python3 -c 'print(1+1)'",
        "git status",
        "git log --oneline | head -5",
        "git checkout -b fix",
        "find . -name '*.py' | wc -l",
        "sed -n 1,20p main.py",
        "awk '{print $1}' access.log | sort | uniq -c",
        "mkdir -p out && cp data.csv out/",
        "head -n 3 data.csv",
        "tail -f /var/log/syslog",
        "pwd",
        "whoami",
        "chmod +x run.sh && ./run.sh",
        "export PATH=$PATH:/usr/local/bin",
        "pip install requests",
    ]
    outputs = [
        "total 8\ndrwxr-xr-x 2 root root 4096 Jan 1 00:00 .\n-rw-r--r-- 1 root root 6 Jan 1 00:00 hello.txt",
        "hello",
        "2",
        "On branch main\nnothing to commit, working tree clean",
        "error: file not found",
        "Traceback (most recent call last):\n  File \"main.py\", line 3, in <module>\nNameError: name 'x' is not defined",
        "/workspace",
        "root",
        "42 lines",
        "Permission denied",
        "[exit code: 0]",
        "[exit code: 1]",
    ]
    prose = [
        "You are a helpful assistant that operates a Linux terminal to solve the task.",
        "Create a file named hello.txt containing the word hello.",
        "Summarize the errors in the log file and write the counts to summary.txt.",
        "I will list the files first to see what is in the working directory.",
        "The file exists now. I am done, so I submit.",
        "Recover the deleted git branch and make sure its last commit is restored.",
        "Let me check the output of the previous command before continuing.",
    ]
    lines: list[str] = []
    for i, cmd in enumerate(commands):
        out = outputs[i % len(outputs)]
        lines.append(f"{prose[i % len(prose)]}\n```bash\n{cmd}\n```")
        lines.append(f'<tool_call>\n{{"name": "bash", "arguments": {{"command": {json.dumps(cmd)}}}}}\n</tool_call>')
        lines.append(f"$ {cmd}\n{out}")
    lines.append('<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>')
    lines.extend(prose)
    return lines * 3


def recipe() -> dict:
    """Everything the build depends on; its hash names the cache folder."""
    import tokenizers  # the train extra: torch, transformers and tokenizers load only when a model is built or loaded
    import transformers  # the train extra

    return {
        "version": RECIPE_VERSION,
        "model": MODEL_CONFIG,
        "vocab_size": VOCAB_SIZE,
        "special_tokens": SPECIAL_TOKENS,
        "chat_template": CHATML_TEMPLATE,
        "corpus": hashlib.sha256("\n".join(corpus()).encode()).hexdigest(),
        "seed": SEED,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


def recipe_hash() -> str:
    return hashlib.sha256(json.dumps(recipe(), sort_keys=True).encode()).hexdigest()[:16]


def build_tokenizer():
    """Train the byte-level BPE tokenizer and wrap it as a ``PreTrainedTokenizerFast`` with the ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # the train extra
    from transformers import PreTrainedTokenizerFast  # the train extra

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_model(tokenizer):
    """A random-initialized ``Qwen3MoeForCausalLM`` sized to the tokenizer (deterministic for a given seed)."""
    import torch  # the train extra
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM  # the train extra

    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **MODEL_CONFIG,
    )
    torch.manual_seed(SEED)
    model = Qwen3MoeForCausalLM(config)
    # Router weights are zero-initialized by transformers, which makes routing a tie everywhere; give them
    # random values so different tokens go to different experts, as in a trained model.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("mlp.gate.weight"):
                param.normal_(0.0, 0.5)
    return model.eval()


def tiny_moe_path() -> Path:
    """Build the tiny model and tokenizer if needed; return the cached folder (loadable with ``from_pretrained``)."""
    path = cache_dir() / f"tiny-moe-{recipe_hash()}"
    if (path / "done").exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=path.parent))
    try:
        tokenizer = build_tokenizer()
        model = build_model(tokenizer)
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        (tmp / "recipe.json").write_text(json.dumps(recipe(), indent=2, sort_keys=True))
        (tmp / "done").write_text("")
        try:
            tmp.rename(path)
        except OSError:  # another process finished first; its build is identical
            if not (path / "done").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def tiny_moe(device: str = "cpu"):
    """Return ``(model, tokenizer)`` for the tiny MoE, building and caching it on first use."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # the train extra

    path = tiny_moe_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).to(device).eval()
    return model, tokenizer


def load_model_and_tokenizer(name_or_path: str, device: str = "cpu", dtype: str = "auto"):
    """``"tiny"`` builds the tiny MoE; anything else is a local folder for ``from_pretrained`` (no downloads)."""
    if name_or_path == "tiny":
        return tiny_moe(device)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # the train extra

    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype).to(device).eval()
    return model, tokenizer


def load_tokenizer(name_or_path: str):
    """The tokenizer alone (for engines that run the model elsewhere, such as SGLang)."""
    from transformers import AutoTokenizer  # the train extra

    path = tiny_moe_path() if name_or_path == "tiny" else name_or_path
    return AutoTokenizer.from_pretrained(path)


def unpatch_forward(model) -> bool:
    """Remove a *stale* instance-level ``forward`` from ``model``; True if one was removed.

    TRL's trainers (``add_fused_lm_head``) replace ``model.forward`` with a wrapper whose closure holds the original
    bound ``forward``. ``copy.deepcopy`` of such a model copies the wrapper but not what it closes over, so the copy's
    forward silently runs the *original* model's weights: sampling and training on the copy never see its own
    updates. A patch whose wrapped forward is bound to ``model`` itself is left alone (TRL's trainers need it).

    Example:
        >>> import copy, types, torch
        >>> def patch(module):  # what TRL does: wrap the bound forward in a closure
        ...     original_forward = module.forward
        ...     module.forward = types.MethodType(lambda self, x: original_forward(x), module)
        >>> m = torch.nn.Linear(1, 1)
        >>> patch(m)
        >>> unpatch_forward(m), unpatch_forward(copy.deepcopy(m))
        (False, True)
    """
    patched = vars(model).get("forward")
    if patched is None:
        return False
    if any(getattr(bound, "__self__", model) is not model for bound in _wrapped_forwards(patched)):
        del model.forward
        return True
    return False


def _wrapped_forwards(method) -> list:
    """The bound methods a patched forward closes over (what it calls through to); empty cells are skipped."""
    func = getattr(method, "__func__", method)
    found = []
    for cell in getattr(func, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not yet bound
            continue
        if hasattr(value, "__self__"):
            found.append(value)
    return found

from t1train import models


def test_tiny_moe_is_a_cached_moe_with_chatml(tiny):
    model, tokenizer = tiny
    assert model.config.num_experts == 4 and model.config.num_experts_per_tok == 2
    assert model.config.num_hidden_layers == 2
    assert (models.tiny_moe_path() / "done").exists()
    assert models.tiny_moe_path().name.endswith(models.recipe_hash())
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token_id == im_end
    assert tokenizer.encode("<|im_end|>") == [im_end]  # special tokens are single ids


def test_tokenizer_build_is_deterministic():
    a, b = models.build_tokenizer(), models.build_tokenizer()
    assert a.get_vocab() == b.get_vocab()


def test_tiny_model_is_built_in_the_t1_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("T1_CACHE_DIR", str(tmp_path))
    path = models.tiny_moe_path()
    assert path.parent == tmp_path and (path / "done").exists()

"""The tiny Qwen3.5-MoE is built offline, deterministically from its seed, with the real Qwen3.5 template."""

from __future__ import annotations

import json

import pytest

from execcritic.training.tiny_model import MANIFEST, TinyRecipe, chat_template_text, ensure_tiny_model


@pytest.mark.train
def test_same_seed_same_bytes_other_seed_other_weights(tiny_model_dir, tmp_path):
    again = ensure_tiny_model(tmp_path / "a")
    assert again.name == tiny_model_dir.name                       # same recipe, same cache key
    files = sorted(p.name for p in tiny_model_dir.iterdir())
    assert files == sorted(p.name for p in again.iterdir())
    for name in files:
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    assert ensure_tiny_model(tmp_path / "a") == again              # cached: no rebuild

    other = ensure_tiny_model(tmp_path / "b", TinyRecipe(seed=1))
    assert other.name != tiny_model_dir.name
    assert (other / "tokenizer.json").read_bytes() == (tiny_model_dir / "tokenizer.json").read_bytes()
    assert (other / "model.safetensors").read_bytes() != (tiny_model_dir / "model.safetensors").read_bytes()

    manifest = json.loads((tiny_model_dir / MANIFEST).read_text())
    assert manifest["architecture"] == "Qwen3_5MoeForCausalLM" and manifest["parameters"] == 455_592
    assert (tiny_model_dir / "chat_template.jinja").read_text() == chat_template_text("qwen3_5_nothink")


@pytest.mark.train
def test_loads_offline_and_renders_the_bash_tool(tiny_model):
    from execcritic.agents.models.base import BASH_TOOL

    model, tok = tiny_model
    assert type(model).__name__ == "Qwen3_5MoeForCausalLM" and len(tok) == model.config.vocab_size
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tools=[BASH_TOOL], tokenize=False,
                                   add_generation_prompt=True)
    assert '"name": "bash"' in text and text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    for marker in ("<tool_call>", "</tool_call>", "<tool_response>", "<|im_end|>"):
        assert len(tok.encode(marker, add_special_tokens=False)) == 1, marker

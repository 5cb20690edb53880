"""A tiny reward model for tests: a seeded, random 2-layer LlamaForSequenceClassification (num_labels=1) with the
embedded SmolLM2 tokenizer, saved with safetensors into a directory `reward.functions` accepts."""

from __future__ import annotations

from pathlib import Path


def build_tiny_reward_model(out: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    """Save the tiny reward model (config, safetensors weights, tokenizer) into `out` and return it."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    tok = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        num_labels=1,
        pad_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(seed)
    LlamaForSequenceClassification(config).save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out

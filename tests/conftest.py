"""Shared pytest fixtures. Tests never reach the Hugging Face Hub."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The converted SmolLM2-135M-Instruct directory (converted once into the grpokit cache, ~1 min)."""
    from grpokit.models import ensure_embedded_model

    return ensure_embedded_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def smollm_tokenizer(embedded_model_dir: Path) -> Any:
    """The real SmolLM2-Instruct tokenizer (ChatML chat template, left padding, pad = eos). Do not mutate."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok

"""Models, tokenizers and precision: real models and the real SmolLM2 tokenizer, no mocks."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from packaging.version import Version

from grpokit.models import (
    MODEL_CHOICES,
    SANITY_PROMPT,
    ModelSpecError,
    Precision,
    autocast_ctx,
    build_tiny_model,
    cpu_bf16_is_fast,
    enable_activation_checkpointing,
    ensure_embedded_model,
    greedy_chat,
    load_model_and_tokenizer,
    resolve_precision,
)


def _params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


# ----------------------------------------------------------------------------------------- embedded model


def test_embedded_model_is_a_plain_local_hf_directory(embedded_model_dir: Path) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (embedded_model_dir / name).is_file(), name
    config = json.loads((embedded_model_dir / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["model_type"] == "llama" and config["vocab_size"] == 49152
    assert not list(embedded_model_dir.parent.glob(".smollm2-135m-instruct-*"))  # no half-built leftovers
    t = time.perf_counter()
    assert ensure_embedded_model() == embedded_model_dir  # cached: no conversion the second time
    assert time.perf_counter() - t < 1.0


def test_embedded_model_greedy_answers_with_chat_template(embedded_model_dir: Path) -> None:
    model, tok = load_model_and_tokenizer("smollm2-135m-instruct", dtype="fp32")
    assert model.dtype == torch.float32
    assert "<|im_start|>" in tok.chat_template
    assert tok.padding_side == "left" and tok.pad_token is not None
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert "5" in greedy_chat(model, tok, SANITY_PROMPT, max_new_tokens=12)
    assert "paris" in greedy_chat(model, tok, "What is the capital of France?", max_new_tokens=12).lower()


# ----------------------------------------------------------------------------------------- tiny model


def test_tiny_model_matches_the_real_tokenizer(smollm_tokenizer: Any) -> None:
    tok = smollm_tokenizer
    model = build_tiny_model(tokenizer=tok, seed=0)
    assert model.config.vocab_size == len(tok) == 49152
    assert model.config.eos_token_id == tok.eos_token_id
    assert model.config.bos_token_id == tok.bos_token_id
    assert model.config.pad_token_id == tok.pad_token_id
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_tiny_model_forward_and_generate(smollm_tokenizer: Any) -> None:
    tok = smollm_tokenizer
    model = build_tiny_model(tokenizer=tok, seed=0)
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        for q in ("What is 2 + 3?", "Name a colour of the sky on a clear summer day.")
    ]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert (enc["attention_mask"][:, -1] == 1).all()  # left padded
    out = model(**enc, labels=enc["input_ids"])
    assert out.logits.shape == (*enc["input_ids"].shape, len(tok))
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    with torch.inference_mode():
        gen = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    assert gen.shape[0] == 2 and enc["input_ids"].shape[1] < gen.shape[1] <= enc["input_ids"].shape[1] + 6
    torch.manual_seed(0)
    with torch.inference_mode():
        sampled = model.generate(**enc, max_new_tokens=6, do_sample=True, pad_token_id=tok.pad_token_id)
    assert sampled.shape[0] == 2


def test_tiny_model_is_deterministic_and_leaves_global_rng_alone() -> None:
    state = torch.random.get_rng_state()
    a, b, c = (_params(build_tiny_model(vocab_size=256, seed=s)) for s in (7, 7, 8))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert not all(torch.equal(a[n], c[n]) for n in a)
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_model(vocab_size=256, hidden=30, heads=4)


def test_load_tiny_spec(smollm_tokenizer: Any) -> None:
    model, tok = load_model_and_tokenizer("tiny", dtype="fp32", seed=3)
    assert tok.padding_side == "left" and tok.pad_token_id is not None
    assert len(tok) == len(smollm_tokenizer) == model.config.vocab_size
    same = build_tiny_model(tokenizer=tok, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), same.parameters()))
    bf16, _ = load_model_and_tokenizer("tiny", dtype="bf16")
    assert bf16.dtype == torch.bfloat16


# ----------------------------------------------------------------------------------------- local directories


def test_missing_model_path_is_one_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelSpecError) as err:
        load_model_and_tokenizer(str(missing))
    msg = str(err.value)
    assert str(missing) in msg and "--model" in msg
    assert all(choice in msg for choice in MODEL_CHOICES)
    assert isinstance(err.value, ValueError)
    with pytest.raises(ModelSpecError, match="config.json"):
        load_model_and_tokenizer(str(tmp_path))  # exists, but is not a model directory


def test_load_any_local_directory(tmp_path: Path, smollm_tokenizer: Any) -> None:
    model = build_tiny_model(tokenizer=smollm_tokenizer, seed=1)
    model.save_pretrained(tmp_path)
    tok = type(smollm_tokenizer).from_pretrained(
        smollm_tokenizer.name_or_path, local_files_only=True
    )  # a fresh copy: the fixture is shared
    tok.pad_token = None
    tok.padding_side = "right"
    tok.save_pretrained(tmp_path)
    loaded, ltok = load_model_and_tokenizer(str(tmp_path), dtype="fp32")
    assert ltok.padding_side == "left"
    assert ltok.pad_token == ltok.eos_token  # falls back to eos
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), loaded.parameters()))


# ----------------------------------------------------------------------------------------- precision


def test_precision_names() -> None:
    assert resolve_precision("fp32", "cpu") == Precision("fp32", torch.float32, None)
    assert resolve_precision("bf16-autocast", "cpu") == Precision("bf16-autocast", torch.float32, torch.bfloat16)
    assert resolve_precision("bf16", "cuda") == Precision("bf16", torch.bfloat16, None)
    assert resolve_precision("float32", "cpu").name == "fp32"
    with pytest.raises(ValueError, match="bf16-autocast"):
        resolve_precision("fp8", "cpu")


def test_auto_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    from grpokit.models import cpu_bf16_decision, precision_reason
    from grpokit.models import precision as prec

    expected = "bf16-autocast" if cpu_bf16_is_fast() else "fp32"
    assert resolve_precision("auto", "cpu").name == expected
    assert resolve_precision("auto", torch.device("cpu")).name == expected
    if not torch.cuda.is_available() or torch.cuda.is_bf16_supported():
        assert resolve_precision("auto", "cuda").name == "bf16-autocast"
    try:
        for env, name in (("1", "bf16-autocast"), ("0", "fp32")):
            monkeypatch.setenv("GRPOKIT_CPU_BF16", env)
            cpu_bf16_decision.cache_clear()
            assert resolve_precision("auto", "cpu").name == name
            assert precision_reason("auto", "cpu") == f"auto on CPU: GRPOKIT_CPU_BF16={env} set in the environment"
        # without the override: a CPU without bf16 arithmetic is fp32 from its flags alone, no timing involved
        monkeypatch.delenv("GRPOKIT_CPU_BF16", raising=False)
        monkeypatch.setattr(prec, "cpu_flags", lambda: {"avx2", "avx512f"})
        monkeypatch.setattr(prec, "_matmul_ratio", lambda: pytest.fail("timed a CPU without bf16 arithmetic"))
        cpu_bf16_decision.cache_clear()
        assert resolve_precision("auto", "cpu").name == "fp32"
        assert "no bf16 arithmetic" in precision_reason("auto", "cpu")
        # with AMX: the probe confirms it, with a margin (0.6) that a loaded machine does not cross
        for ms, name in (((10.0, 2.0), "bf16-autocast"), ((10.0, 7.0), "fp32"), ((10.0, 25.0), "fp32")):
            monkeypatch.setattr(prec, "cpu_flags", lambda: {"avx512f", "amx_bf16", "amx_tile"})
            monkeypatch.setattr(prec, "_matmul_ratio", lambda ms=ms: ms)
            cpu_bf16_decision.cache_clear()
            assert resolve_precision("auto", "cpu").name == name, ms
            assert "amx_bf16" in precision_reason("auto", "cpu")
        assert precision_reason("fp32", "cpu") == "model.precision=fp32 set in the config"
    finally:
        monkeypatch.undo()
        cpu_bf16_decision.cache_clear()


def test_autocast_ctx() -> None:
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with autocast_ctx("fp32", "cpu"):
        assert (a @ b).dtype == torch.float32
    with autocast_ctx(resolve_precision("bf16-autocast", "cpu"), "cpu"):
        assert (a @ b).dtype == torch.bfloat16
    with autocast_ctx("bf16", "cpu"):  # pure bf16 needs no autocast: the weights are bf16 already
        assert (a @ b).dtype == torch.float32


def test_bf16_autocast_loss_and_grads_close_to_fp32(smollm_tokenizer: Any) -> None:
    tok = smollm_tokenizer
    enc = tok(["The capital of France is Paris. The capital of Italy is Rome."] * 2, return_tensors="pt")
    losses, grads = {}, {}
    for name in ("fp32", "bf16-autocast"):
        model = build_tiny_model(tokenizer=tok, seed=0, hidden=128)
        with autocast_ctx(name, "cpu"):
            loss = model(**enc, labels=enc["input_ids"]).loss
        loss.backward()
        losses[name] = loss.item()
        grads[name] = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert abs(losses["bf16-autocast"] - losses["fp32"]) / losses["fp32"] < 1e-2
    g32, g16 = grads["fp32"], grads["bf16-autocast"]
    assert ((g16 - g32).norm() / g32.norm()).item() < 5e-2


def test_activation_checkpointing_is_enabled_by_transformers_current_name() -> None:
    """model.gradient_checkpointing=true: `activation_checkpointing_enable` where transformers has it (5.23 on, the
    newest-releases lane), `gradient_checkpointing_enable` only where it has not (the main lane's 5.19); neither
    raises a deprecation, with or without LoRA, and the checkpointed model still trains."""
    lora = {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    for model in (build_tiny_model(seed=0, hidden=32), load_model_and_tokenizer("tiny", dtype="fp32", lora=lora)[0]):
        new = hasattr(model, "activation_checkpointing_enable")
        assert new == (Version(transformers.__version__) >= Version("5.23"))
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            warnings.simplefilter("error", DeprecationWarning)
            enable_activation_checkpointing(model)
            assert model.is_activation_checkpointing if new else model.is_gradient_checkpointing
        model.train()
        ids = torch.randint(3, 100, (2, 6), generator=torch.Generator().manual_seed(0))
        model(input_ids=ids, labels=ids).loss.backward()
        assert any(p.grad is not None for p in model.parameters() if p.requires_grad)


# ----------------------------------------------------------------------------------------- LoRA


def test_lora_leaves_only_adapter_params_trainable(smollm_tokenizer: Any) -> None:
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    model, tok = load_model_and_tokenizer("tiny", dtype="fp32", lora=lora)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert trainable and frozen
    assert all("lora_" in n for n in trainable)
    assert len(trainable) == 2 * 2 * 2  # 2 layers x (q, v) x (A, B)
    enc = tok(["What is 2 + 3?"], return_tensors="pt")
    model(**enc, labels=enc["input_ids"]).loss.backward()
    assert all((p.grad is not None) == p.requires_grad for p in model.parameters())
    again, _ = load_model_and_tokenizer("tiny", dtype="fp32", lora=lora)  # seeded adapter init
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))
    with pytest.raises(ValueError, match="unknown LoRA option"):
        load_model_and_tokenizer("tiny", lora={"rank": 4})

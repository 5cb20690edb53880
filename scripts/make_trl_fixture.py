"""Produce the real TRL log fixtures under tests/fixtures/logs/ (trl_healthy/, trl_constant_reward/).

Runs TRL's own `GRPOTrainer` twice on CPU with a tiny randomly initialised Llama (the real SmolLM2 tokenizer, so the
prompts and completions are real tokens) and keeps only what `grpokit doctor` reads: `trainer_state.json` (its
`log_history`) and the TensorBoard event file(s) TRL's `report_to=["tensorboard"]` wrote. No weights are kept.

- `trl_healthy`: a reward that varies between completions of the same prompt (so advantages are non-zero);
- `trl_constant_reward`: every completion gets reward 1.0, so every group has zero reward variance
  (`frac_reward_zero_std` = 1 on every step: advantage collapse).

TRL is not a grpokit dependency, so this runs in its own virtual environment (see tests/fixtures/logs/README.md):

    python3 -m venv /tmp/trlvenv
    /tmp/trlvenv/bin/pip install torch==2.13.0
    /tmp/trlvenv/bin/pip install trl tensorboard
    HF_HUB_OFFLINE=1 /tmp/trlvenv/bin/python scripts/make_trl_fixture.py

The tokenizer is read from ~/.cache/grpokit/models/smollm2-135m-instruct (override with --tokenizer).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "logs"
DEFAULT_TOKENIZER = Path.home() / ".cache" / "grpokit" / "models" / "smollm2-135m-instruct"

PROMPTS = [f"What is {a} + {b}? Answer with a number." for a, b in [(i, (7 * i) % 11) for i in range(1, 17)]]


def varied_reward(completions: list[str], **kwargs) -> list[float]:
    """Healthy run: distinct characters / 10 — random completions of one prompt differ, so groups have variance."""
    return [len(set(c)) / 10.0 for c in completions]


def constant_reward(completions: list[str], **kwargs) -> list[float]:
    """Collapsed run: the same reward for every completion, so every group's reward std is 0."""
    return [1.0 for _ in completions]


def run_one(name: str, reward_func, tokenizer_path: Path, out_dir: Path, max_steps: int, seed: int) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path), local_files_only=True)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    dataset = Dataset.from_dict({"prompt": PROMPTS})

    with tempfile.TemporaryDirectory(prefix=f"trl_{name}_") as tmp:
        # With beta != 0 TRL loads the reference model from the policy's path, so the tiny model is saved first
        model_dir = Path(tmp) / "tiny-llama"
        LlamaForCausalLM(cfg).save_pretrained(model_dir)
        tok.save_pretrained(model_dir)
        out = Path(tmp) / "out"
        args = GRPOConfig(
            output_dir=str(out),
            num_generations=4,
            max_completion_length=8,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=1,
            learning_rate=1e-3,
            beta=0.04,
            logging_steps=1,
            max_steps=max_steps,
            save_strategy="no",
            report_to=["tensorboard"],
            use_cpu=True,
            bf16=False,
            fp16=False,
            seed=seed,
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=str(model_dir), reward_funcs=reward_func, args=args, train_dataset=dataset, processing_class=tok
        )
        trainer.train()
        trainer.save_state()  # writes <output_dir>/trainer_state.json (no checkpoint, no weights)

        dest = out_dir / name
        if dest.exists():
            shutil.rmtree(dest)
        (dest / "tensorboard").mkdir(parents=True)
        state = json.loads((out / "trainer_state.json").read_text())
        (dest / "trainer_state.json").write_text(json.dumps(state, indent=2) + "\n")
        events = sorted(out.rglob("events.out.tfevents.*"))
        if not events:
            raise SystemExit(f"{name}: TRL wrote no TensorBoard event file under {tmp}")
        for ev in events:
            shutil.copy2(ev, dest / "tensorboard" / ev.name)
        print(f"{name}: {len(state['log_history'])} log entries, {len(events)} event file(s) -> {dest}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    import torch
    import transformers
    import trl

    torch.set_num_threads(2)
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"trl {trl.__version__}"
    )
    a.out.mkdir(parents=True, exist_ok=True)
    run_one("trl_healthy", varied_reward, a.tokenizer, a.out, a.max_steps, a.seed)
    run_one("trl_constant_reward", constant_reward, a.tokenizer, a.out, a.max_steps, a.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

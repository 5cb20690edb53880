"""The TRL side of `bench/vs_trl.py`: TRL's GRPOTrainer on the benchmark config (SmolLM2-135M-Instruct, the add1
prompts, 4 prompts x 8 samples x `max_new` tokens, forced to `min_new` through `generation_kwargs`), timed per step.

TRL comes from the `bench` extra (`pip install 'grpokit[bench]'`). grpokit is used only to find the embedded model
directory, the add1 prompts and the exact-answer reward (pure Python), so both frameworks train on the same thing.

Per step it records the whole step (TrainerCallback on_step_begin -> on_step_end, which includes the optimizer step)
and, by wrapping the trainer's own methods on the instance, the time in `_generate` (sampling), in
`_generate_and_score_completions` minus `_generate` (rewards, advantages, any log-prob passes), in
`training_step` minus both (the loss forward and backward), and the rest of the step (the optimizer step).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

PRECISIONS = {"bf16": True, "fp32": False}  # TRL's bf16 flag: autocast to bf16 over fp32 weights


def _timed(obj: Any, name: str, acc: dict[str, float]) -> None:
    """Replace obj.name by a wrapper that adds its wall time to acc[name]."""
    fn = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[name] = acc.get(name, 0.0) + time.perf_counter() - t0

    setattr(obj, name, wrapper)


def _dataset_and_reward(kind: str = "exact") -> tuple[Any, Callable[..., list[float]]]:
    from datasets import Dataset

    from grpokit.data import Example, get_task
    from grpokit.rewards import load_reward

    examples = get_task("add1").examples("train", None, 0)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": e.prompt}], "answer": e.answer} for e in examples])
    exact = load_reward("exact_numeric")
    if kind == "parity":  # random weights (bench/race_reward.py)
        from race_reward import parity

        return ds, parity

    def reward(completions: list[Any], answer: list[str], **kw: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return exact(texts, [Example(prompt="", answer=a) for a in answer])

    return ds, reward


def _grpo_config(out: str, steps: int, precision: str, vllm: bool, min_new: int, max_new: int, loss: str) -> Any:
    import torch
    from trl import GRPOConfig

    if min_new:  # transformers' generate takes min_new_tokens, vLLM's SamplingParams min_tokens
        gen_kwargs: dict[str, Any] | None = {"min_tokens" if vllm else "min_new_tokens": min_new}
    else:
        gen_kwargs = None
    extra: dict[str, Any] = {"use_vllm": True, "vllm_mode": "colocate"} if vllm else {}
    return GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=32,
        num_generations=8,
        max_completion_length=max_new,
        gradient_accumulation_steps=1,
        learning_rate=2e-5,
        beta=0.0,
        loss_type=loss,
        temperature=1.0,
        logging_steps=1,
        max_steps=steps,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),  # on a GPU box TRL runs on the GPU too
        bf16=PRECISIONS[precision],
        save_strategy="no",
        seed=0,
        generation_kwargs=gen_kwargs,
        **extra,
    )


def run_trl(
    steps: int,
    precision: str,
    *,
    vllm: bool = False,
    min_new: int = 48,
    max_new: int = 48,
    loss: str = "dapo",
    model_path: str | None = None,
    reward_kind: str = "exact",
) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """`steps` TRL steps (the first is the warm-up, dropped); returns per-step rows and run facts."""
    if vllm:  # the same KV-cache bound grpokit's vLLM engine uses on CPU (rollout.vllm_kv_cache_gib=2)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    import torch
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer

    from grpokit.models import ensure_embedded_model

    t_start = time.perf_counter()
    path = model_path or ensure_embedded_model()  # model_path: a local model directory (bench/gpu_check.py)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    ds, reward = _dataset_and_reward(reward_kind)
    acc: dict[str, float] = {}
    rows: list[dict[str, float]] = []
    lengths: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            acc.clear()
            self.t = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            rows.append({"step": time.perf_counter() - self.t, **acc})

        def on_log(self, *a: Any, logs: dict[str, float] | None = None, **k: Any) -> None:
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))

    with tempfile.TemporaryDirectory() as out:
        cfg = _grpo_config(out, steps, precision, vllm, min_new, max_new, loss)
        trainer = GRPOTrainer(
            model=model, reward_funcs=reward, args=cfg, train_dataset=ds, processing_class=tok, callbacks=[Timer()]
        )
        for name in ("_generate", "_generate_and_score_completions", "training_step"):
            _timed(trainer, name, acc)
        setup = time.perf_counter() - t_start
        trainer.train()
    for r, length in zip(rows, lengths):
        r["tokens"] = 32 * length
    facts = {"framework": f"TRL {trl.__version__}", "precision": precision, "setup_s": setup}
    return [_phases(r) for r in rows[1:]], facts


def _phases(r: dict[str, float]) -> dict[str, float]:
    """A TRL step row in the table's phases (see the module docstring)."""
    gen = r.get("_generate", 0.0)
    prep = r.get("_generate_and_score_completions", 0.0)
    train = r.get("training_step", 0.0)
    return {
        "step": r["step"],
        "generate": gen,
        "score": prep - gen,
        "fwd+bwd": train - prep,
        "optimizer": r["step"] - train,  # the optimizer step, gradient clipping, scheduler, callbacks
        "tokens": r.get("tokens", float("nan")),
    }

"""Seconds per step of TRL's GRPOTrainer on the same config as `bench/step_throughput.py` (SmolLM2-135M-Instruct,
4 prompts x 8 samples x 48 max new tokens, single-digit addition, fp32 on this CPU), for a same-hardware ratio.

TRL is not a grpokit dependency; run this with a separate environment that has it, e.g.

    python3 -m venv /tmp/trlvenv && /tmp/trlvenv/bin/pip install torch==2.13.0 && /tmp/trlvenv/bin/pip install trl
    HF_HUB_OFFLINE=1 PYTHONPATH=src /tmp/trlvenv/bin/python bench/trl_compare.py --steps 4

It uses grpokit only to find the embedded model directory and the add1 prompts (both pure Python).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4, help="measured steps (after one warm-up step)")
    ap.add_argument("--loss-type", default="dapo")
    ap.add_argument("--min-new-tokens", type=int, default=0, help="force completions to at least this length")
    args = ap.parse_args()

    import torch
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpokit.data import get_task
    from grpokit.models import ensure_embedded_model
    from grpokit.rewards import load_reward

    path = ensure_embedded_model()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    examples = get_task("add1").examples("train", None, 0)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": e.prompt}], "answer": e.answer} for e in examples])
    exact = load_reward("exact_numeric")

    def reward(completions, answer, **kw):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        from grpokit.data import Example

        return exact(texts, [Example(prompt="", answer=a) for a in answer])

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t = time.perf_counter()

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - self.t)

    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=32,
            num_generations=8,
            max_completion_length=48,
            gradient_accumulation_steps=1,
            learning_rate=2e-5,
            beta=0.0,
            loss_type=args.loss_type,
            temperature=1.0,
            logging_steps=1,
            max_steps=args.steps + 1,
            report_to=[],
            use_cpu=True,
            bf16=False,
            save_strategy="no",
            seed=0,
            generation_kwargs={"min_new_tokens": args.min_new_tokens} if args.min_new_tokens else None,
        )
        trainer = GRPOTrainer(
            model=model, reward_funcs=reward, args=cfg, train_dataset=ds, processing_class=tok, callbacks=[Timer()]
        )
        trainer.train()
    measured = times[1:]
    print(
        f"TRL {trl.__version__} GRPOTrainer, loss_type={args.loss_type}, 4 prompts x 8 samples x 48 max new tokens, "
        f"fp32, torch threads {torch.get_num_threads()}"
    )
    print(f"seconds per step: {[round(t, 2) for t in measured]}  median {statistics.median(measured):.2f}")


if __name__ == "__main__":
    main()

"""The decode table: ms per decode step of the `hf` engine's decode modes (rollout.decode: eager, static, graphs),
at the embedded model's shape (SmolLM2-135M) and at a 0.4B shape (Qwen2.5-0.5B's layout: hidden 896, 24 layers,
14 heads over 2 KV heads, intermediate 4864; the SmolLM2 tokenizer, random weights), `--rows` rows x
`--new-tokens` forced tokens. A benchmark, not a test; bench/gpu_check.py runs it on a GPU.

    flock /tmp/torch.lock .venv/bin/python bench/decode_table.py --shapes 135m --rows 32 --new-tokens 64
    .venv/bin/python bench/decode_table.py --shapes 135m,0.4b --modes eager,graphs        # on a GPU

Per shape and mode: one warm-up generate (graphs: the capture), then `--repeats` timed pairs of generates from the
same seed, one of `--new-tokens` tokens and one of a single token (prefill + first draw):

  ms per decode step = median over repeats of (t(new tokens) - t(1 token)) / (new tokens - 1)
  tokens/s           = rows / (ms per decode step / 1000)
  same tokens        = share of the drawn tokens equal to the eager mode's from the same seed
  graphs             = Dynamo's unique graphs this mode made; recompiles after warm-up = those made by the timed
                       generates (0 when one capture serves the run); cudagraph skips = inductor's declined graphs

The weights: the embedded model's real weights at 135m when it is here (else random weights of its shape), random
at 0.4b; bf16 on CUDA, fp32 on CPU. `--model DIR` takes a local model directory for the 135m row instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the checkout's grpokit, installed or not

SHAPES = {
    # SmolLM2-135M-Instruct
    "135m": dict(
        hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536
    ),
    # Qwen2.5-0.5B's layout
    "0.4b": dict(
        hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864
    ),
}


def device_and_dtype() -> tuple[torch.device, torch.dtype]:
    return (torch.device("cuda"), torch.bfloat16) if torch.cuda.is_available() else (torch.device("cpu"), torch.float32)


def tokenizer_and_weights(tokenizer_dir: str | None) -> tuple[Any, str | None]:
    """(tokenizer, real-weights directory or None): the embedded model's when it is here or convertible."""
    from transformers import AutoTokenizer

    if tokenizer_dir:
        return AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True), None
    from grpokit.models import ensure_embedded_model

    path = ensure_embedded_model()
    return AutoTokenizer.from_pretrained(path, local_files_only=True), str(path)


def build_model(shape: str, tok: Any, weights: str | None, device: torch.device, dtype: torch.dtype) -> tuple[Any, str]:
    """The model of `shape` and a word on its weights."""
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    if shape == "135m" and weights:
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=dtype, local_files_only=True)
        return model.to(device).eval(), "real"
    cfg = LlamaConfig(
        vocab_size=len(tok),
        tie_word_embeddings=True,
        max_position_embeddings=8192,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        **SHAPES[shape],
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(dtype)
    return model.to(device).eval(), "random"


def prompts(tok: Any, rows: int, group: int = 8) -> list[list[int]]:
    from grpokit.data import get_task, render_prompt

    examples = get_task("add1").examples("train", max(1, rows // group), 0)
    return [tok(render_prompt(tok, e), add_special_tokens=False)["input_ids"] for e in examples]


def timed(engine: Any, ps: list[list[int]], params: Any, seed: int) -> tuple[float, Any]:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = engine.generate(ps, params)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def compile_counts() -> tuple[int, int]:
    """(Dynamo's unique graphs so far, inductor's cudagraph skips so far) in this process."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], counters["inductor"]["cudagraph_skips"]


def measure(model: Any, tok: Any, mode: str, rows: int, new: int, repeats: int, seed: int) -> dict[str, Any]:
    """One row of the table for `mode` (see the module docstring)."""
    from grpokit.rollout import SamplingParams
    from grpokit.rollout.hf import SharedPrefixSampler

    ps = prompts(tok, rows)
    group = rows // len(ps)
    engine = SharedPrefixSampler(model, tok, decode=mode)
    full = SamplingParams(n=group, max_new_tokens=new, min_new_tokens=new)
    one = SamplingParams(n=group, max_new_tokens=1, min_new_tokens=1)
    graphs0, skips0 = compile_counts()
    t_warm, out = timed(engine, ps, full, seed)
    graphs_warm, _ = compile_counts()
    steps = []
    for _ in range(repeats):
        t_full, out = timed(engine, ps, full, seed)
        t_one, _ = timed(engine, ps, one, seed)
        steps.append((t_full - t_one) / (new - 1))
    ms = 1000 * statistics.median(steps)
    graphs, skips = compile_counts()
    counts = {
        "graphs": graphs - graphs0,
        "recompiles_after_warmup": graphs - graphs_warm,
        "cudagraph_skips": skips - skips0,
    }
    return {
        "mode": mode,
        "ms_per_step": ms,
        "tokens_per_s": rows / (ms / 1000),
        "warmup_s": t_warm,
        "ids": out,
        **counts,
    }


def table(shapes: list[str], modes: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    device, dtype = device_and_dtype()
    tok, weights = tokenizer_and_weights(args.tokenizer)
    if args.model:
        weights = args.model
    out = []
    for shape in shapes:
        model, kind = build_model(shape, tok, weights, device, dtype)
        ref = None
        for mode in modes:
            r = measure(model, tok, mode, args.rows, args.new_tokens, args.repeats, args.seed)
            ids = r.pop("ids").completion_ids
            ref = ids if ref is None else ref
            same = float((ids == ref).float().mean())
            out.append({"shape": shape, "weights": kind, "device": device.type, **r, "same_tokens": same})
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
        del model
    return out


def markdown(rows: list[dict[str, Any]], n_rows: int, new: int) -> str:
    lines = [
        f"| shape ({n_rows} rows x {new} tokens) | weights | mode | ms per decode step | tokens/s | same as eager "
        "| graphs | recompiles after warm-up | cudagraph skips |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['shape']} | {r['weights']} | {r['mode']} | {r['ms_per_step']:.2f} | {r['tokens_per_s']:,.0f} | "
            f"{r['same_tokens']:.0%} | {r['graphs']} | {r['recompiles_after_warmup']} | {r['cudagraph_skips']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="135m,0.4b", help="comma-separated: 135m, 0.4b")
    default_modes = "eager,static,graphs" if torch.cuda.is_available() else "eager,static"
    ap.add_argument("--modes", default=default_modes, help="comma-separated rollout.decode modes (eager first)")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=None, help="a tokenizer directory (random weights then at every shape)")
    ap.add_argument("--model", default=None, help="a local model directory for the 135m row")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    rows = table(args.shapes.split(","), args.modes.split(","), args)
    print(markdown(rows, args.rows, args.new_tokens))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

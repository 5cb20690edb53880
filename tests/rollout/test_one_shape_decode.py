"""The graphed decode's one shape per run (rollout/one_shape.py), proven on CPU where the graph is traced by Dynamo
with `backend="aot_eager"` (AOTAutograd and its input-mutation analysis, no inductor): a run-like sequence of
rollouts (row counts 8, 16, 4 and 6, an evaluation at another temperature, prompts of several widths) is one
graph with no recompile, on a grouped-query model under bf16 autocast, and in fp32 it draws the eager loop's
tokens. The captured CUDA step itself runs where CUDA is."""

from __future__ import annotations

import contextlib
import logging

import pytest
import torch
from torch._dynamo.utils import counters
from transformers import LlamaConfig, LlamaForCausalLM

from grpokit.data import get_task, render_prompt
from grpokit.models import load_model_and_tokenizer
from grpokit.models.prefix import decoder_and_head
from grpokit.rollout import SamplingParams
from grpokit.rollout.hf import SharedPrefixSampler
from grpokit.rollout.static_decode import StaticDecoder


def prompts(tok, k: int, start: int = 0) -> list[list[int]]:
    rows = get_task("add1").examples("train", start + k, 0)[start:]
    return [tok(render_prompt(tok, e), add_special_tokens=False)["input_ids"] for e in rows]


def gqa_model(tok) -> LlamaForCausalLM:
    """A small random Llama with 4 query heads over 2 key/value heads (the grouped-query path), fp32 weights."""
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
    )
    return LlamaForCausalLM(cfg).eval()


def graphed(eng: SharedPrefixSampler, backend: str, min_len: int) -> StaticDecoder:
    decoder, head = decoder_and_head(eng.model)
    eng.static = StaticDecoder(decoder, head, eng.model.config, autocast=eng.autocast, graphs=backend, min_len=min_len)
    return eng.static


RUN = [  # (prompts, start, SamplingParams): a run's rollouts and an evaluation between them
    (2, 0, dict(n=4, max_new_tokens=12, top_k=20, min_new_tokens=2)),
    (4, 2, dict(n=4, max_new_tokens=12, top_k=20)),
    (1, 6, dict(n=4, max_new_tokens=12, top_k=20)),
    (6, 20, dict(n=1, max_new_tokens=12, top_k=20, temperature=0.7)),  # the evaluation
    (2, 7, dict(n=4, max_new_tokens=12, top_k=20)),
]


def run_like(eng: SharedPrefixSampler, tok) -> list[torch.Tensor]:
    outs = []
    for k, start, params in RUN:
        outs.append(eng.generate(prompts(tok, k, start), SamplingParams(**params)).completion_ids)
    return outs


def longest(tok) -> int:
    return max(len(p) for k, start, _ in RUN for p in prompts(tok, k, start)) + 12


@pytest.mark.slow
def test_a_run_like_sequence_is_one_graph_on_a_grouped_query_model_under_bf16_autocast() -> None:
    _, tok = load_model_and_tokenizer("tiny")
    model = gqa_model(tok)
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731  (model.precision=bf16-autocast)
    eng = SharedPrefixSampler(
        model, tok, decode="static", autocast=autocast, generator=torch.Generator().manual_seed(0)
    )
    torch._dynamo.reset()
    counters.clear()
    static = graphed(eng, "aot_eager", longest(tok))
    outs = run_like(eng, tok)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])  # no recompile across the run
    assert static.shape == (8, 128) and set(static.caches) == {(8, 128)}  # one cache: the run's rows and length
    assert [o.shape[0] for o in outs] == [8, 16, 4, 6, 8]  # each rollout's own rows came back
    assert not static.warned_no_graph


@pytest.mark.slow
def test_the_one_shape_decode_draws_the_eager_tokens() -> None:
    model, tok = load_model_and_tokenizer("tiny")
    runs = {}
    for mode in ("eager", "graphed"):
        eng = SharedPrefixSampler(model, tok, decode="eager" if mode == "eager" else "static")
        eng.generator = torch.Generator().manual_seed(3)
        if mode == "graphed":
            graphed(eng, "aot_eager", longest(tok))
        runs[mode] = run_like(eng, tok)
    for a, b in zip(runs["eager"], runs["graphed"], strict=True):
        assert torch.equal(a, b)


def test_a_step_that_records_no_graph_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    model, tok = load_model_and_tokenizer("tiny")
    eng = SharedPrefixSampler(model, tok, decode="static", generator=torch.Generator().manual_seed(1))
    static = graphed(eng, "aot_eager", 0)
    static.step = static._step  # what a declined capture leaves: the step runs, and nothing is recorded
    with caplog.at_level(logging.WARNING):
        for k, start, params in RUN[:2]:
            eng.generate(prompts(tok, k, start), SamplingParams(**params))
    said = [r.getMessage() for r in caplog.records if "recorded 0 graph(s)" in r.getMessage()]
    assert len(said) == 1 and "TORCH_LOGS=recompiles" in said[0], said


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda.CUDAGraph records on CUDA only")
def test_the_captured_cuda_step_draws_the_eager_tokens() -> None:
    model, tok = load_model_and_tokenizer("tiny", device="cuda")
    runs = {}
    for mode in ("eager", "graphs"):
        eng = SharedPrefixSampler(model, tok, decode=mode, autocast=contextlib.nullcontext)
        eng.generator, eng.min_len = torch.Generator("cuda").manual_seed(3), longest(tok)
        runs[mode] = run_like(eng, tok)
    assert eng.static.step.graphs == 1
    for a, b in zip(runs["eager"], runs["graphs"], strict=True):
        assert torch.equal(a, b)

"""`sdpa_gqa` (models/attention.py): on CPU a grouped-query model attends without copying its key/value heads, and
computes what transformers' `sdpa` computes, with padding masks, through a KV cache, and in the backward pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from grpokit.models import load_model_and_tokenizer
from grpokit.models.attention import SDPA_GQA, register_sdpa_gqa, use_cpu_gqa
from grpokit.models.cache_arg import cache_arg

ATOL = 2e-5


def llama_config(heads: int, kv: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=128,
        hidden_size=16 * heads,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        attn_implementation="sdpa",
    )


def gqa_pair(heads: int = 4, kv: int = 2) -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    """The same random grouped-query Llama twice: under transformers' `sdpa`, then switched to `sdpa_gqa`."""
    register_sdpa_gqa()
    config = llama_config(heads, kv)
    torch.manual_seed(0)
    ref = LlamaForCausalLM(config).eval()
    gqa = LlamaForCausalLM(copy.deepcopy(config)).eval()
    gqa.load_state_dict(ref.state_dict())
    assert use_cpu_gqa(gqa, None, "cpu") and gqa.config._attn_implementation == SDPA_GQA
    return ref, gqa


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three left-padded rows of different lengths: transformers builds a mask, so `sdpa` repeats the KV heads."""
    ids = torch.randint(3, 128, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    mask[2, :2] = 0
    return ids, mask


def test_padded_forward_and_backward_match_sdpa() -> None:
    ref, gqa = gqa_pair()
    ids, mask = padded_batch()
    out = {}
    for name, model in (("ref", ref), ("gqa", gqa)):
        model.zero_grad()
        logits = model(input_ids=ids, attention_mask=mask).logits
        (logits.float().log_softmax(-1)[mask.bool()].sum()).backward()
        out[name] = (logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    (lr, gr), (lg, gg) = out["ref"], out["gqa"]
    real = mask.bool()
    assert float((lr - lg)[real].abs().max()) <= ATOL
    assert float(lr[real].abs().max()) > 0.1  # not comparing zeros
    for name, g in gr.items():
        assert torch.allclose(gg[name], g, atol=ATOL, rtol=1e-4), name
    k_grad = gr["model.layers.0.self_attn.k_proj.weight"]
    assert float(k_grad.abs().max()) > 0  # the key/value heads' gradient flows (summed over each group's heads)


def test_decoding_through_a_kv_cache_matches_sdpa() -> None:
    """Prefill the padded prompts, then 4 one-token steps with the growing mask, as the sampler decodes."""
    ref, gqa = gqa_pair(heads=6, kv=2)
    ids, mask = padded_batch()
    steps = torch.randint(3, 128, (3, 4), generator=torch.Generator().manual_seed(2))
    logits = {}
    with torch.no_grad():
        for name, model in (("ref", ref), ("gqa", gqa)):
            cache, attn = DynamicCache(), mask
            pos = (attn.cumsum(1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=attn, position_ids=pos, **cache_arg(model, cache))
            rows = [out.logits[:, -1]]
            for t in range(steps.shape[1]):
                attn = torch.cat([attn, torch.ones_like(attn[:, :1])], 1)
                pos = pos[:, -1:] + 1
                tok = steps[:, t : t + 1]
                out = model(input_ids=tok, attention_mask=attn, position_ids=pos, **cache_arg(model, cache))
                rows.append(out.logits[:, -1])
            logits[name] = torch.stack(rows, 1)
    assert float((logits["ref"] - logits["gqa"]).abs().max()) <= ATOL


def test_only_grouped_query_models_on_cpu_without_a_request_are_switched(tmp_path: Path) -> None:
    ref, _ = gqa_pair()
    assert not use_cpu_gqa(ref, "sdpa", "cpu")  # asked for by name: kept
    assert not use_cpu_gqa(ref, None, "cuda:0")  # CUDA: transformers' choice (its fused kernels take no masked GQA)
    assert ref.config._attn_implementation == "sdpa"
    mha = LlamaForCausalLM(llama_config(4, 4))
    assert not use_cpu_gqa(mha, None, "cpu")  # no KV groups: nothing to copy
    # the tiny model has as many KV heads as heads; the embedded SmolLM2-135M (9 / 3) is the grouped-query case
    tiny, _ = load_model_and_tokenizer("tiny", dtype="fp32")
    assert tiny.config._attn_implementation == "sdpa"
    # a saved model does not carry the name: it loads anywhere, without grpokit
    _, gqa = gqa_pair()
    gqa.save_pretrained(tmp_path)
    assert SDPA_GQA not in json.loads((tmp_path / "config.json").read_text()).values()

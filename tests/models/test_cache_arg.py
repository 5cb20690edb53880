"""The cache keyword (grpokit/models/cache_arg.py): `cache` on a transformers that has it (5.24 on, where
`past_key_values` is deprecated), `past_key_values` on one that has not. Both lanes of `make test` run this file:
the main lane's transformers 5.19 takes the older name, the newest-releases lane's 5.24 the new one; each test
asserts against what the installed transformers really does, and grpokit's own cache calls (prefill, the
shared-prompt forward, the eager and static decode loops) raise no FutureWarning under warnings-as-errors."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch
import transformers
from packaging.version import Version
from torch import nn
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM, LlamaModel

from grpokit.models import load_model_and_tokenizer
from grpokit.models.cache_arg import CACHE, PAST_KEY_VALUES, cache_arg, cache_kwarg, library_cache_kwarg
from grpokit.models.prefix import prefill, shared_prefix_hidden
from grpokit.rollout import SamplingParams
from grpokit.rollout.hf import SharedPrefixSampler

NEW = Version(transformers.__version__) >= Version("5.24")  # the release that renamed it


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


def forward_warnings(model: nn.Module, name: str) -> tuple[list[warnings.WarningMessage], DynamicCache]:
    """Call `model` with a fresh cache under keyword `name`; the warnings it raised and the cache."""
    cache = DynamicCache()
    with warnings.catch_warnings(record=True) as seen, torch.no_grad():
        warnings.simplefilter("always")
        model(input_ids=torch.tensor([[1, 5, 7, 9]]), use_cache=True, **{name: cache})
    return [w for w in seen if issubclass(w.category, (FutureWarning, DeprecationWarning))], cache


def test_the_installed_transformers_gets_its_current_name() -> None:
    want = CACHE if NEW else PAST_KEY_VALUES
    assert library_cache_kwarg() == want
    model = tiny_llama()
    assert cache_kwarg(model) == want and cache_kwarg(model.model) == want
    # read off the real forward signatures (transformers' deprecate_kwarg keeps the wrapped one)
    for cls in (LlamaModel, LlamaForCausalLM):
        assert want in inspect.signature(cls.forward).parameters
        assert (CACHE in inspect.signature(cls.forward).parameters) == NEW


def test_the_chosen_name_fills_the_cache_without_a_deprecation() -> None:
    model = tiny_llama()
    caught, cache = forward_warnings(model, cache_kwarg(model))
    assert caught == []
    assert cache.get_seq_length() == 4  # the cache was taken, not swallowed by **kwargs


@pytest.mark.skipif(not NEW, reason="transformers < 5.24 has no `cache` argument: `past_key_values` is current")
def test_the_older_name_is_deprecated_where_cache_exists() -> None:
    caught, cache = forward_warnings(tiny_llama(), PAST_KEY_VALUES)
    assert cache.get_seq_length() == 4  # still accepted (until 5.40), renamed with a warning
    assert any("past_key_values" in str(w.message) and "cache" in str(w.message) for w in caught), caught


@pytest.mark.skipif(NEW, reason="transformers >= 5.24 takes `cache`")
def test_an_older_transformers_takes_past_key_values_only() -> None:
    assert CACHE not in inspect.signature(LlamaModel.forward).parameters
    caught, cache = forward_warnings(tiny_llama(), PAST_KEY_VALUES)
    assert caught == [] and cache.get_seq_length() == 4


def test_a_forward_is_read_by_its_own_signature() -> None:
    class Old(nn.Module):  # a remote-code model written for transformers < 5.24
        def forward(self, input_ids=None, past_key_values=None, **kwargs): ...

    class New(nn.Module):
        def forward(self, input_ids=None, cache=None, **kwargs): ...

    class Wrapper(nn.Module):  # names neither: what the installed transformers' own models take
        def forward(self, *args, **kwargs): ...

    assert cache_kwarg(Old()) == PAST_KEY_VALUES
    assert cache_kwarg(New()) == CACHE
    assert cache_kwarg(Wrapper()) == library_cache_kwarg()
    marker = object()
    assert cache_arg(Old(), marker) == {PAST_KEY_VALUES: marker}


def test_grpokits_cache_calls_raise_no_deprecation() -> None:
    """prefill, the shared-prompt forward and both decode loops, with FutureWarning and DeprecationWarning as
    errors wherever they are raised (transformers' deprecate_kwarg warns from torch's Module.__call__ frame, so a
    filter on grpokit's modules alone would not see it)."""
    model, tok = load_model_and_tokenizer("tiny", dtype="fp32")
    prompts = [[5, 6, 7, 8], [9, 10]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        decoder = model.get_decoder()
        ids = torch.tensor([[5, 6, 7, 8], [2, 2, 9, 10]])
        mask = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
        cache, h = prefill(decoder, ids, mask)
        assert cache.get_seq_length() == 4 and h.shape[0] == 2
        h = shared_prefix_hidden(model, ids, mask, torch.tensor([[11, 12, 13], [14, 15, 16]]))
        assert h.shape[:2] == (2, 3)
        for mode in ("eager", "static"):
            eng = SharedPrefixSampler(model, tok, decode=mode, generator=torch.Generator().manual_seed(0))
            out = eng.generate(prompts, SamplingParams(n=2, max_new_tokens=4, min_new_tokens=4))
            assert out.completion_ids.shape == (4, 4)
        out = SharedPrefixSampler(model, tok).continue_rows(
            prompts, [0, 1], [[3, 4], [5]], SamplingParams(n=1, max_new_tokens=4)
        )
        assert out.completion_ids.shape[0] == 2

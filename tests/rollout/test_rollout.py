"""Rollout engines on a real (tiny) model with the real tokenizer: grpokit's shared-prefix sampler draws the same
samples as transformers `generate` for the same seed, its log-probs are the learner's, and flags are right."""

from __future__ import annotations

import torch

from grpokit.data import get_task, render_prompt
from grpokit.models import load_model_and_tokenizer
from grpokit.models.forward import completion_forward
from grpokit.rollout import SamplingParams, make_engine
from grpokit.rollout.hf import multinomial_tokens, process_logits, sample_tokens


def _prompts(tok) -> list[list[int]]:
    return [
        tok(render_prompt(tok, e), add_special_tokens=False)["input_ids"]
        for e in get_task("add1").examples("train", 3, 0)
    ]


def test_sampler_matches_generate_and_learner() -> None:
    model, tok = load_model_and_tokenizer("tiny")
    prompts = _prompts(tok)
    outs = {}
    for name in ("hf-generate", "hf"):
        torch.manual_seed(0)
        kw = {"draw": multinomial_tokens} if name == "hf" else {}  # generate's random stream, for equal samples
        outs[name] = make_engine(name, model=model, tokenizer=tok, **kw).generate(
            prompts, SamplingParams(n=4, max_new_tokens=6)
        )
    a, b = outs["hf-generate"], outs["hf"]
    assert a.texts == b.texts
    torch.testing.assert_close(a.sampler_logp, b.sampler_logp, rtol=1e-4, atol=1e-4)
    assert b.completion_ids.shape == (12, 6) and bool(b.truncated.all())  # a random tiny model never ends
    assert b.prompt_index.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    lp, _, _ = completion_forward(model, b.prompt_ids, b.prompt_mask, b.completion_ids, b.completion_mask.float())
    m = b.completion_mask.bool()
    assert float((lp.detach() - b.sampler_logp)[m].abs().max()) < 1e-4  # on-policy: sampler == learner


def test_eos_ends_a_row_and_sets_the_mask() -> None:
    """A stop id ends its row: the token the model emits first (near-greedy) is made the EOS id."""
    model, tok = load_model_and_tokenizer("tiny")
    eng = make_engine("hf", model=model, tokenizer=tok)
    params = SamplingParams(n=2, max_new_tokens=5, temperature=1e-3)
    first = int(eng.generate(_prompts(tok)[:1], params).completion_ids[0, 0])
    eng.eos_ids = [first]
    out = eng.generate(_prompts(tok)[:1], params)
    assert bool(out.eos.all()) and not bool(out.truncated.any())
    assert out.completion_mask.sum(1).tolist() == [1, 1]  # the EOS token is part of the response


def test_top_k_and_top_p_filtering() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    z = process_logits(logits, 1.0, top_k=2, top_p=1.0)
    assert torch.isinf(z[0, 2:]).all() and torch.isfinite(z[0, :2]).all()
    p = torch.softmax(logits, -1)[0]
    z = process_logits(logits, 1.0, top_k=0, top_p=float(p[0]) + 1e-6)  # mass of the top token is just short
    assert torch.isfinite(z[0, :2]).all() and torch.isinf(z[0, 2:]).all()
    z = process_logits(logits, 0.5, top_k=0, top_p=1.0)
    torch.testing.assert_close(z, logits / 0.5)


def test_generation_stops_when_every_row_has_ended() -> None:
    """Rows end at different steps (every third token id is a stop id, so each step ends a row with p ~ 1/3);
    the loop must stop once the last row has ended, not run to max_new_tokens (issue 8: `done` was per-step).
    With compaction off, finished rows stay in the batch and must write nothing after their EOS."""
    model, tok = load_model_and_tokenizer("tiny")
    eng = make_engine("hf", model=model, tokenizer=tok, compact_below=0.0)
    eng.eos_ids = list(range(0, len(tok), 3))
    decoder = model.get_decoder()
    calls = []
    handle = decoder.register_forward_hook(lambda *_: calls.append(1))
    try:
        torch.manual_seed(0)
        out = eng.generate(_prompts(tok)[:2], SamplingParams(n=6, max_new_tokens=60))
    finally:
        handle.remove()
    lengths = out.completion_mask.sum(1)
    assert bool(out.eos.all()), "with p(stop) ~ 1/3 per token every row ends well before 60 tokens"
    assert len(set(lengths.tolist())) > 1, "rows must end at different steps for this test to mean anything"
    # one prefill, then one decode step per token after the first, up to the longest row's last token
    assert len(calls) == 1 + int(lengths.max()) - 1 < 60
    pad = eng.pad_id
    after_end = ~out.completion_mask.bool()
    assert bool((out.completion_ids[after_end] == pad).all()) and float(out.sampler_logp[after_end].abs().sum()) == 0


def test_min_new_tokens_holds_eos_back_on_both_hf_engines() -> None:
    """rollout.min_new_tokens (TRL's min_new_tokens): no row ends before it, EOS allowed from then on."""
    model, tok = load_model_and_tokenizer("tiny")
    for name in ("hf", "hf-generate"):
        eng = make_engine(name, model=model, tokenizer=tok)
        params = SamplingParams(n=2, max_new_tokens=6, temperature=1e-3)
        first = int(eng.generate(_prompts(tok)[:1], params).completion_ids[0, 0])
        eng.eos_ids = [first]  # the near-greedy first token now ends a row at once ...
        if hasattr(eng.model, "generation_config"):
            eng.model.generation_config.eos_token_id = [first]
        out = eng.generate(_prompts(tok)[:1], SamplingParams(n=2, max_new_tokens=6, temperature=1e-3, min_new_tokens=3))
        lengths = out.completion_mask.sum(1)
        assert int(lengths.min()) >= 3, (name, lengths.tolist())  # ... but not before 3 tokens
        assert int(lengths.max()) <= 6


def test_inverse_cdf_draw_has_the_distribution_and_skips_zero_probability() -> None:
    torch.manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.0, 0.15, 0.05, 0.0])
    n = 200_000
    tok = sample_tokens(p.log().expand(n, -1))
    freq = torch.bincount(tok, minlength=6).double() / n
    assert int(freq[2] * n) == 0 and int(freq[5] * n) == 0  # probability 0: never drawn, also as the last token
    se = (p.double() * (1 - p.double()) / n).sqrt()
    assert bool(((freq - p.double()).abs() <= 5 * se + 1e-12).all()), freq  # within 5 standard errors


def test_default_sampler_log_probs_are_the_learners() -> None:
    model, tok = load_model_and_tokenizer("tiny")
    torch.manual_seed(1)
    out = make_engine("hf", model=model, tokenizer=tok).generate(_prompts(tok), SamplingParams(n=4, max_new_tokens=6))
    lp, _, _ = completion_forward(
        model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.completion_mask.float()
    )
    m = out.completion_mask.bool()
    assert int(m.sum()) == 72
    assert float((lp.detach() - out.sampler_logp)[m].abs().max()) < 1e-4


def test_learner_scores_the_truncated_distribution_the_sampler_drew_from() -> None:
    """Under top-p / top-k the sampler reports log-probs of the truncated distribution; the learner, given the same
    truncation, computes the same numbers (without it the gap is log of the kept mass: about log 0.8 per token at
    top-p 0.8 on the near-uniform tiny model, a ratio of ~0.8, TRL issue 6789's bias)."""
    model, tok = load_model_and_tokenizer("tiny")
    prompts = _prompts(tok)
    for top_k, top_p in ((0, 0.8), (50, 1.0), (200, 0.5)):
        torch.manual_seed(0)
        out = make_engine("hf", model=model, tokenizer=tok).generate(
            prompts, SamplingParams(n=4, max_new_tokens=6, top_k=top_k, top_p=top_p)
        )
        args = (out.prompt_ids, out.prompt_mask, out.completion_ids, out.completion_mask.float())
        m = out.completion_mask.bool()
        lp, _, _ = completion_forward(model, *args, top_k=top_k, top_p=top_p)
        assert float((lp.detach() - out.sampler_logp)[m].abs().max()) < 1e-4, (top_k, top_p)
        full, _, _ = completion_forward(model, *args)
        assert float((full.detach() - out.sampler_logp)[m].mean()) < -0.1  # the bias the truncation removes


def test_top_p_run_logs_an_importance_ratio_of_one(tmp_path) -> None:  # noqa: ANN001
    """A real step at top-p 0.8: pi_learner / pi_sampler has mean 1 within sampling noise (exactly on-policy, fp32)."""
    import json

    from tiny_config import tiny_overrides

    from grpokit.config import build_config
    from grpokit.training import Trainer, fit

    overrides = tiny_overrides("model.precision=fp32", "rollout.top_p=0.8", "train.steps=1")
    overrides.append("algo.is_correction=token_truncate")
    fit(Trainer(build_config("dapo", overrides=overrides), tmp_path), None, eval_before=False)
    row = next(json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if "time/step" in x)
    assert abs(row["mismatch/rho_mean"] - 1.0) < 1e-3, row["mismatch/rho_mean"]
    assert row["mismatch/kl_k3"] < 1e-5

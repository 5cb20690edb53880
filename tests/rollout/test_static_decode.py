"""The static-cache decode (`rollout.decode=static`, the code CUDA graphs capture) against the eager loop: for the
same seed it draws the same tokens with the same log-probs, rows ending at different steps move to smaller row
buckets, the learner scores its samples as the sampler did, and it holds under each CPU kernel set."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from grpokit.data import get_task, render_prompt
from grpokit.models import load_model_and_tokenizer
from grpokit.models.forward import completion_forward
from grpokit.rollout import SamplingParams
from grpokit.rollout.hf import SharedPrefixSampler, decode_mode
from grpokit.rollout.static_decode import buckets

# temperature 1.0 and a truncated, tempered, EOS-banned distribution
SETTINGS = [
    dict(n=8, max_new_tokens=24),
    dict(n=8, max_new_tokens=24, temperature=0.8, top_k=20, top_p=0.9, min_new_tokens=3),
]


def _prompts(tok, k: int) -> list[list[int]]:
    rows = get_task("add1").examples("train", k, 0)
    return [tok(render_prompt(tok, e), add_special_tokens=False)["input_ids"] for e in rows]


def _compare(model, tok, settings: dict, seed: int, stop_ids: list[int] = ()) -> dict:
    prompts = _prompts(tok, 4)
    outs, engines = {}, {}
    for mode in ("eager", "static"):
        torch.manual_seed(seed)
        engines[mode] = SharedPrefixSampler(model, tok, decode=mode)
        engines[mode].eos_ids = engines[mode].eos_ids + list(stop_ids)
        outs[mode] = engines[mode].generate(prompts, SamplingParams(**settings))
    a, b = outs["eager"], outs["static"]
    return {
        "same_tokens": bool(torch.equal(a.completion_ids, b.completion_ids)),
        "logp_diff": float((a.sampler_logp - b.sampler_logp).abs().max()),
        "lengths": b.lengths.tolist(),
        "buckets_used": sorted(key[0] for key in engines["static"].static.caches),
        "min_new_tokens_held": bool((b.lengths >= settings.get("min_new_tokens", 0)).all()),
    }


def test_buckets_are_the_batch_then_powers_of_two() -> None:
    assert buckets(32) == [32, 16, 8, 4, 2, 1]
    assert buckets(24) == [24, 16, 8, 4, 2, 1]
    assert buckets(1) == [1]


@pytest.mark.slow
@pytest.mark.parametrize("settings", SETTINGS, ids=["plain", "truncated"])
def test_static_draws_the_eager_tokens(settings: dict) -> None:
    model, tok = load_model_and_tokenizer("smollm2-135m-instruct")
    r = _compare(model, tok, settings, seed=1)
    assert r["same_tokens"], r
    assert r["logp_diff"] < 1e-3, r
    # rows ended at different steps (the real model answers add1 in a few tokens)
    assert min(r["lengths"]) < settings["max_new_tokens"] <= max(r["lengths"]), r
    assert r["min_new_tokens_held"], r


@pytest.mark.parametrize("settings", SETTINGS, ids=["plain", "truncated"])
def test_ended_rows_move_to_smaller_buckets(settings: dict) -> None:
    """A random tiny model with one id in twelve a stop id: most rows end early, and the rows still running move
    to smaller buckets (the caches used), drawing the eager loop's tokens all the while."""
    model, tok = load_model_and_tokenizer("tiny")
    r = _compare(model, tok, settings, seed=0, stop_ids=range(100, 4200))
    assert r["same_tokens"] and r["logp_diff"] < 1e-4 and r["min_new_tokens_held"], r
    assert len(set(r["lengths"])) > 4, r
    assert r["buckets_used"][0] < 32 and 32 in r["buckets_used"], r


def test_a_rows_tokens_do_not_depend_on_compaction() -> None:
    """Each row reads its own uniforms: never compacting and compacting at every ended row draw the same tokens."""
    model, tok = load_model_and_tokenizer("tiny")
    prompts = _prompts(tok, 3)
    params = SamplingParams(n=4, max_new_tokens=8)
    outs = []
    for compact_below in (0.0, 1.01):
        eng = SharedPrefixSampler(model, tok, compact_below=compact_below, generator=torch.Generator().manual_seed(3))
        eng.eos_ids = eng.eos_ids + list(range(100, 4000))  # many stop ids: rows end at different steps
        outs.append(eng.generate(prompts, params))
    assert len(set(outs[0].lengths.tolist())) > 1
    assert torch.equal(outs[0].completion_ids, outs[1].completion_ids)


def test_static_log_probs_are_the_learners() -> None:
    model, tok = load_model_and_tokenizer("tiny")
    eng = SharedPrefixSampler(model, tok, decode="static", generator=torch.Generator().manual_seed(0))
    out = eng.generate(_prompts(tok, 3), SamplingParams(n=4, max_new_tokens=6, top_k=50, top_p=0.95))
    lp, _, _ = completion_forward(
        model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.completion_mask.float(), top_k=50, top_p=0.95
    )
    m = out.completion_mask.bool()
    assert float((lp.detach() - out.sampler_logp)[m].abs().max()) < 1e-4


def test_decode_modes_are_checked() -> None:
    cpu = torch.device("cpu")
    assert decode_mode("auto", cpu) == "eager" and decode_mode("auto", torch.device("cuda")) == "graphs"
    with pytest.raises(ValueError, match="rollout.decode=graphs needs CUDA"):
        decode_mode("graphs", cpu)
    with pytest.raises(ValueError, match="rollout.decode='fast' is not a decode mode"):
        decode_mode("fast", cpu)


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["default", "avx2"])
def test_static_draws_the_eager_tokens_under_each_kernel_set(kernels: str) -> None:
    """The same comparison in a fresh interpreter under ATEN_CPU_CAPABILITY (the in-process test covers this
    CPU's best set)."""
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1]]; import test_static_decode as t; "
        "from grpokit.models import load_model_and_tokenizer as load; m, k = load('smollm2-135m-instruct'); "
        "print(json.dumps(t._compare(m, k, t.SETTINGS[1], seed=2)))"
    )
    env = dict(os.environ, ATEN_CPU_CAPABILITY=kernels)
    here = os.path.dirname(__file__)
    run = subprocess.run([sys.executable, "-c", code, here], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["same_tokens"] and r["logp_diff"] < 1e-3 and r["min_new_tokens_held"], r


def test_the_static_step_is_one_graph() -> None:
    """What CUDA graphs capture is the whole step: torch.compile(fullgraph=True) traces the model's forward, the
    head and the draw without a break (a break would be a host round-trip per token), and draws the same tokens."""
    model, tok = load_model_and_tokenizer("tiny")
    params = SamplingParams(n=4, max_new_tokens=10, top_k=20, top_p=0.9, min_new_tokens=2)
    outs = []
    for compiled in (False, True):
        eng = SharedPrefixSampler(model, tok, decode="static", generator=torch.Generator().manual_seed(0))
        if compiled:
            static = eng.static_decoder()
            static.step = torch.compile(static.step, fullgraph=True, backend="eager", dynamic=False)
        outs.append(eng.generate(_prompts(tok, 2), params))
    assert torch.equal(outs[0].completion_ids, outs[1].completion_ids)
    torch.testing.assert_close(outs[0].sampler_logp, outs[1].sampler_logp)


def test_continued_rows_draw_the_eager_tokens() -> None:
    """Multi-turn episodes continue rows after a tail (agents/engine.py): the static cache takes the prompt's and
    the tails' keys/values and draws what the eager loop draws."""
    model, tok = load_model_and_tokenizer("tiny")
    prompts = _prompts(tok, 2)
    tails = [[11, 12, 13], [14], [15, 16]]
    outs = []
    for mode in ("eager", "static"):
        eng = SharedPrefixSampler(model, tok, decode=mode, generator=torch.Generator().manual_seed(5))
        outs.append(eng.continue_rows(prompts, [0, 1, 1], tails, SamplingParams(max_new_tokens=7, top_k=40)))
    assert torch.equal(outs[0].completion_ids, outs[1].completion_ids)
    torch.testing.assert_close(outs[0].sampler_logp, outs[1].sampler_logp, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.trains
@pytest.mark.parametrize("precision", ["fp32", "bf16-autocast"])
def test_a_run_with_static_decode_trains_as_the_eager_run(tmp_path, precision: str) -> None:
    """rollout.decode=static through the trainer, 3 steps of the tiny model. fp32: the same completions as eager, so
    the rewards, lengths and losses logged are the eager run's. bf16 autocast: the static cache holds the values in
    bf16 as the step computes them, where the eager cache promotes them to its fp32 keys' dtype, so the draws part
    after a rounding; what must hold is that the sampler's log-probs are the learner's as closely as eager's are."""
    from tiny_config import tiny_overrides

    from grpokit.config import build_config
    from grpokit.training import Trainer, fit

    logs = {}
    for mode in ("eager", "static"):
        changes = ("train.steps=3", f"rollout.decode={mode}", f"model.precision={precision}")
        cfg = build_config("grpo", overrides=tiny_overrides(*changes))
        run_dir = tmp_path / mode
        fit(Trainer(cfg, run_dir), None)
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        logs[mode] = [_learned(r) for r in rows if "reward/mean" in r]
    assert len(logs["eager"]) == 3 and "actor/loss" in logs["eager"][0], logs
    if precision == "fp32":
        for a, b in zip(logs["eager"], logs["static"], strict=True):
            assert a.keys() == b.keys()
            for k in a:
                assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-6), (k, logs)
        return
    eager = max(r["mismatch/abs_diff_max"] for r in logs["eager"])
    static = max(r["mismatch/abs_diff_max"] for r in logs["static"])
    assert len(logs["static"]) == 3 and static <= max(2 * eager, 0.05), (eager, static)


def _learned(row: dict) -> dict:
    """What a step learned and drew (rewards, lengths, the update's losses), without timings."""
    keep = ("reward/", "length/", "actor/", "entropy", "mismatch/")
    return {
        k: v for k, v in row.items() if k.startswith(keep) and not k.endswith("seconds") and isinstance(v, float | int)
    }


def test_a_capture_that_fails_decodes_on_without_graphs_and_says_so(caplog) -> None:
    """Where graph capture raises (a model torch.compile cannot take), the rollout goes on with the static step,
    the cache put back where the failed step found it, and one warning names rollout.decode=graphs."""
    model, tok = load_model_and_tokenizer("tiny")
    params = SamplingParams(n=4, max_new_tokens=10, top_k=20)
    outs = []
    for broken in (False, True):
        eng = SharedPrefixSampler(model, tok, decode="static", generator=torch.Generator().manual_seed(4))
        if broken:
            static = eng.static_decoder()

            def fails(cache, *args):
                for layer in cache.layers:  # a capture that got as far as writing the cache
                    layer.cumulative_length.add_(1)
                raise RuntimeError("capture failed\nwith a second line")

            static.graphs, static.step = True, fails
        with caplog.at_level("WARNING"):
            outs.append(eng.generate(_prompts(tok, 2), params))
    assert torch.equal(outs[0].completion_ids, outs[1].completion_ids)
    warned = [r.getMessage() for r in caplog.records if "rollout.decode=graphs" in r.getMessage()]
    assert len(warned) == 1 and "RuntimeError: capture failed" in warned[0] and "\n" not in warned[0]

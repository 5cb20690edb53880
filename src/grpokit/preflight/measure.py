"""Measuring the starting model: sample and score a seeded set of training prompts, token entropies at the
sampling temperature, one timed forward+backward, the estimated cost of a training step; the report and its
files."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from ..training.phases.scoring import completion_id_lists
from .cost import MachineClock, forward_rows, step_cost, time_update
from .estimates import (
    GROUP_SIZES,
    LOW_ENTROPY_NATS,
    NEAR_UNIFORM,
    RELATIVE_LOW,
    ZV_TARGET,
    entropy_verdict,
    histogram,
    percentiles,
    recommend_group_size,
    recommend_length,
    reward_model_noise,
    zero_variance,
)
from .sampling import Progress, sample_in_rounds


def _sample_indices(n_total: int, n_prompts: int, seed: int) -> list[int]:
    perm = torch.randperm(n_total, generator=torch.Generator().manual_seed(seed + 4099)).tolist()
    return perm[: min(n_prompts, n_total)]


def _entropy_pass(session: Any, out: Any) -> tuple[torch.Tensor, float]:
    """Token entropies of all sampled completion tokens (full distribution, at the sampling temperature)."""
    ents, n = [], out.completion_ids.shape[0]
    t0 = time.perf_counter()
    mbs = session.cfg.train.micro_batch_size
    with torch.no_grad():
        for s in range(0, n, mbs):
            idx = slice(s, min(n, s + mbs))
            _, ent, _ = forward_rows(session, out, idx)
            ents.append(ent.float().cpu()[out.completion_mask[idx].bool()])
    return torch.cat(ents) if ents else torch.zeros(0), time.perf_counter() - t0


def run_preflight(
    cfg: Any, n_prompts: int = 32, out_dir: str | Path | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """Sample, score and time the starting model; returns the report (also written to out_dir if given).
    `progress` receives a line after each sampling round and measurement phase."""
    from ..training.session import open_session

    session = open_session(cfg)
    try:
        report = _measure(session, n_prompts, progress)
    finally:
        session.close()
    if out_dir is not None:
        write_outputs(report, out_dir)
    return report


def _sample_and_score(
    session: Any, idx: list[int], examples: list[Any], timings: dict[str, Any], progress: Progress | None
) -> tuple[Any, Any]:
    """Generate G completions for each sampled prompt in training-shaped rounds and score them, timing both."""
    out, timings["rounds"] = sample_in_rounds(session, idx, progress)
    t0 = time.perf_counter()
    res = session.rewards.score(
        out.texts, [examples[int(i)] for i in out.prompt_index], completion_ids=completion_id_lists(out)
    )
    timings["score"] = time.perf_counter() - t0
    return out, res


def _pass_rates(res: Any, n: int, g: int) -> tuple[list[float], float]:
    """Per-prompt pass rates (accuracy >= 0.5) and the observed share of groups with zero reward spread."""
    acc = torch.tensor(res.accuracy, dtype=torch.float64).nan_to_num(0.0)
    rewards = torch.tensor(res.rewards, dtype=torch.float64)
    solved = (acc >= 0.5).double().view(n, g)
    rew = rewards.view(n, g)
    observed_zv = float(
        sum(bool(torch.isfinite(row).all() and (row.max() - row.min()) < 1e-9) for row in rew) / max(n, 1)
    )
    return solved.mean(1).tolist(), observed_zv


def _measure(session: Any, n_prompts: int, progress: Progress | None = None) -> dict[str, Any]:
    cfg = session.cfg
    g = cfg.rollout.group_size
    say = progress or (lambda _line: None)
    clock = MachineClock()
    idx = _sample_indices(len(session.data.train), n_prompts, cfg.train.seed)
    examples = [session.data.train[i] for i in idx]
    timings: dict[str, Any] = {}
    out, res = _sample_and_score(session, idx, examples, timings, progress)
    n = len(examples)
    pass_rates, observed_zv = _pass_rates(res, n, g)
    table = {s: zero_variance(pass_rates, s, samples=g) for s in sorted(set(GROUP_SIZES) | {g})}
    say(f"scored {len(out.texts)} completions in {timings['score']:.1f} s; token entropies (no-grad forward)")
    ents, timings["forward"] = _entropy_pass(session, out)
    say("timing a training-shaped forward+backward and an optimizer step")
    timings.update(time_update(session, out))
    correct = torch.tensor(res.accuracy, dtype=torch.float64).nan_to_num(0.0) >= 0.5
    vocab = int(getattr(session.model.config, "vocab_size", 0) or len(session.tokenizer))
    return {
        "config": _config_section(session, n),
        "pass_rates": _pass_rate_section(examples, pass_rates, len(res.failures)),
        "zero_variance": {
            "target": ZV_TARGET,
            "observed_at_group_size": observed_zv,
            "expected": {str(s): v for s, v in table.items()},
            "recommended_group_size": recommend_group_size(table),
        },
        "filtered": _filtered_section(examples, pass_rates, len(session.data.train)),
        "entropy": _entropy_section(ents, vocab),
        "length": _length_section(out, cfg.rollout.max_new_tokens, correct),
        "cost": {
            "measured": {
                "generate_s": sum(timings["rounds"]),
                "generation_rounds": len(timings["rounds"]),
                "round_s": timings["rounds"],
                "generated_samples": len(out.texts),
                "gen_tokens": int(out.gen_tokens),
                "score_s": timings["score"],
                "forward_s": timings["forward"],
                "fwd_bwd_s": timings["fwd_bwd"],
                "fwd_bwd_micro_batch": int(timings["fwd_bwd_n"]),
                "optimizer_s": timings["optimizer"],
            },
            "machine": clock.summary(session),
            **step_cost(cfg, timings, len(out.texts), table[g]["zero_variance"]),
        },
        "train_command": {"reward": _reward_name(session), "precision": session.precision.name},
        "reward_models": _reward_model_section(session, out, res, examples, g),
    }


def _verifier(session: Any, texts: list[str], examples: list[Any], res: Any) -> tuple[str | None, list[float] | None]:
    """The verifier a reward model is compared with: the run's correctness reward (or first rule reward) when it is
    one, else the data's default reward scored here on the same completions; (None, None) without either."""
    from ..rewards import RewardManager

    mgr = session.rewards
    rules = [r.name for r in mgr.rewards if r.name not in mgr.reward_models]
    if rules:
        name = mgr.correctness if mgr.correctness in rules else rules[0]
        return name, list(res.per_reward[name])
    default = session.data.default_reward
    if default is None:
        return None, None
    with RewardManager([(default, 1.0)], timeout_s=session.cfg.reward.timeout_s, max_fail_frac=1.0) as verifier:
        return str(default), list(verifier.score(texts, examples).rewards)


def _reward_model_section(session: Any, out: Any, res: Any, examples: list[Any], g: int) -> dict[str, Any]:
    """Each reward model's noise within the G samples of a prompt against a verifier (estimates.reward_model_noise);
    empty when the run has no reward model."""
    names = session.rewards.reward_models
    if not names:
        return {}
    per_sample = [examples[int(i)] for i in out.prompt_index]
    verifier, labels = _verifier(session, out.texts, per_sample, res)
    return {n: {"verifier": verifier, **reward_model_noise(res.per_reward[n], labels, g)} for n in names}


def _reward_name(session: Any) -> str:
    """The reward functions preflight scored with, as `reward.functions` takes them."""
    funcs = [str(f) for f in session.cfg.reward.functions] or [str(session.data.default_reward)]
    return "[" + ",".join(funcs) + "]"


def _config_section(session: Any, n: int) -> dict[str, Any]:
    cfg = session.cfg
    return {
        "model": cfg.model.name,
        "data": cfg.data.task,
        "recipe": cfg.recipe,
        "group_size": cfg.rollout.group_size,
        "prompts": n,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "temperature": cfg.rollout.temperature,
        "prompts_per_step": cfg.rollout.prompts_per_step,
        "device": session.device,
        "precision": session.precision.name,
    }


def _pass_rate_section(examples: list[Any], pass_rates: list[float], failures: int) -> dict[str, Any]:
    n = len(examples)
    return {
        "mean": sum(pass_rates) / max(n, 1),
        "per_prompt": [{"id": ex.id, "pass_rate": p} for ex, p in zip(examples, pass_rates)],
        "histogram": histogram(pass_rates),
        "always_solved": sum(p == 1.0 for p in pass_rates),
        "never_solved": sum(p == 0.0 for p in pass_rates),
        "reward_failures": failures,
    }


def _filtered_section(examples: list[Any], pass_rates: list[float], dataset_size: int) -> dict[str, Any]:
    """The sampled prompts the model solves sometimes (neither always nor never): the difficulty filter."""
    kept = [
        {"prompt": ex.prompt, "answer": ex.answer, "pass_rate": p}
        for ex, p in zip(examples, pass_rates)
        if 0.0 < p < 1.0
    ]
    n = len(examples)
    return {
        "kept": len(kept),
        "dropped_always": sum(p == 1.0 for p in pass_rates),
        "dropped_never": sum(p == 0.0 for p in pass_rates),
        "sampled": n,
        "dataset_size": dataset_size,
        "note": f"only the {n} sampled prompts were scored (of {dataset_size}); "
        "sample more with --prompts to filter the whole dataset",
        "rows": kept,
    }


def _entropy_section(ents: torch.Tensor, vocab: int) -> dict[str, Any]:
    mean_ent = float(ents.mean()) if ents.numel() else math.nan
    verdict, advice = entropy_verdict(mean_ent, vocab)
    return {
        "mean_nats": mean_ent,
        **percentiles(ents),
        "frac_below_0.1": float((ents < 0.1).double().mean()) if ents.numel() else math.nan,
        "ln_vocab": math.log(max(vocab, 2)),
        "verdict": verdict,
        "advice": advice,
        "rule": f"too low if mean < {LOW_ENTROPY_NATS} nats or < {RELATIVE_LOW} x ln(vocab size); "
        f"near-uniform if > {NEAR_UNIFORM} x ln(vocab size)",
    }


def _length_section(out: Any, max_new_tokens: int, correct: torch.Tensor) -> dict[str, Any]:
    lengths, truncated = out.lengths, out.truncated.bool()
    return {
        "mean": float(lengths.double().mean()),
        **percentiles(lengths),
        "max": int(lengths.max()) if lengths.numel() else 0,
        "eos_rate": float(out.eos.double().mean()),
        **recommend_length(lengths, truncated, max_new_tokens, correct),
    }


def write_outputs(report: dict[str, Any], out_dir: str | Path) -> dict[str, str]:
    """Write preflight.json and filtered.jsonl into out_dir; their paths are added to the report."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    filtered = out / "filtered.jsonl"
    with filtered.open("w", encoding="utf-8") as f:
        for row in report["filtered"]["rows"]:
            f.write(json.dumps(row) + "\n")
    report["filtered"]["path"] = str(filtered)
    path = out / "preflight.json"
    report["files"] = {"report": str(path), "filtered": str(filtered)}
    path.write_text(json.dumps(report, indent=2, default=float))
    return report["files"]

"""`grpokit preflight`: measure the starting model on the training data before spending compute on RL.

It samples G completions for a seeded sample of training prompts with the recipe's rollout settings, scores
them with the run's rewards, and reports:

- per-prompt pass rates, and the expected fraction of zero-variance groups (no learning signal: all correct
  or all wrong) for several group sizes, from the binomial formula P(zv) = p^G + (1-p)^G averaged over
  prompts, with a recommended G;
- a difficulty-filtered JSONL of the sampled prompts that were neither always nor never solved;
- the model's token entropy at the sampling temperature (is it too peaked to explore?);
- completion lengths, truncation rate, and a recommended `rollout.max_new_tokens` / `algo.overlong_cache`;
- the estimated seconds per training step on this machine.

Pass rates are plug-in estimates from G samples, so with small G they are coarse (a prompt solved 4/4 counts
as p = 1 at every group size); sample more prompts or a larger G for sharper numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

from .phases.scoring import completion_id_lists

GROUP_SIZES = (2, 4, 8, 16, 32, 64)
ZV_TARGET = 0.5
LOW_ENTROPY_NATS = 0.5  # absolute rule: below this the policy barely explores (seeds' rule)
RELATIVE_LOW = 0.1  # relative rule: below 0.1 x ln(vocab size) (the entropy of a uniform next token)
NEAR_UNIFORM = 0.5  # above 0.5 x ln(vocab): near-uniform, an untrained model or a too-high temperature
LENGTH_MARGIN = 1.25
CACHE_FRACTION = 0.2


# ------------------------------------------------------------------------------------------ pure helpers


def zero_variance(pass_rates: list[float], group_size: int) -> dict[str, float]:
    """Expected fraction of groups of `group_size` with zero reward variance: mean of p^G + (1-p)^G."""
    n = len(pass_rates)
    if n == 0:
        return {"all_correct": math.nan, "all_wrong": math.nan, "zero_variance": math.nan}
    correct = sum(p**group_size for p in pass_rates) / n
    wrong = sum((1 - p) ** group_size for p in pass_rates) / n
    return {"all_correct": correct, "all_wrong": wrong, "zero_variance": correct + wrong}


def recommend_group_size(table: dict[int, dict[str, float]], target: float = ZV_TARGET) -> int | None:
    """The smallest group size whose expected zero-variance fraction is below `target`, or None."""
    for g in sorted(table):
        if table[g]["zero_variance"] < target:
            return g
    return None


def histogram(values: list[float], bins: int = 5) -> list[dict[str, Any]]:
    """Counts of `values` in [0, 1] over `bins` equal bins (the last bin includes 1.0)."""
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int(v * bins))] += 1
    return [{"lo": i / bins, "hi": (i + 1) / bins, "count": c} for i, c in enumerate(counts)]


def percentiles(values: torch.Tensor, qs: tuple[int, ...] = (10, 50, 90, 99)) -> dict[str, float]:
    if values.numel() == 0:
        return {f"p{q}": math.nan for q in qs}
    v = values.double()
    return {f"p{q}": float(torch.quantile(v, q / 100)) for q in qs}


def entropy_verdict(mean_nats: float, vocab_size: int) -> tuple[str, str]:
    """(verdict, advice) for the starting model's mean token entropy."""
    ln_v = math.log(max(vocab_size, 2))
    if not math.isfinite(mean_nats):
        return "unknown", "no completion tokens were sampled"
    if mean_nats < LOW_ENTROPY_NATS or mean_nats < RELATIVE_LOW * ln_v:
        rule = f"< {LOW_ENTROPY_NATS} nats" if mean_nats < LOW_ENTROPY_NATS else f"< {RELATIVE_LOW} x ln(V)"
        return (
            f"too low to explore ({rule}): strong SFT bias",
            "use clip-higher (algo.eps_high=0.28), an entropy bonus (algo.entropy_coef>0), a higher "
            "rollout.temperature, or an earlier / less over-fitted checkpoint",
        )
    if mean_nats > NEAR_UNIFORM * ln_v:
        return (
            "near-uniform: the model looks untrained or the temperature is too high",
            "check the model and its chat template; lower rollout.temperature",
        )
    return "healthy: enough entropy to explore", "no change needed"


def recommend_length(lengths: torch.Tensor, truncated: torch.Tensor, max_new_tokens: int) -> dict[str, Any]:
    """Recommended max_new_tokens (p99 of untruncated lengths x 1.25, rounded up to 8) and overlong cache."""
    done = lengths[~truncated].double()
    trunc_rate = float(truncated.double().mean()) if truncated.numel() else math.nan
    if done.numel() == 0:
        rec = 2 * max_new_tokens
        note = "every completion was truncated: the limit is far too short; re-run preflight with a larger one"
    else:
        p99 = float(torch.quantile(done, 0.99))
        rec = max(8, int(math.ceil(p99 * LENGTH_MARGIN / 8) * 8))
        note = "p99 of untruncated lengths x 1.25, rounded up to a multiple of 8"
        if trunc_rate > 0.05:
            rec = max(rec, 2 * max_new_tokens)
            note = (
                f"{trunc_rate:.0%} truncated: untruncated lengths under-estimate the need; "
                "doubled the current limit (re-run preflight with it to confirm)"
            )
    return {
        "recommended_max_new_tokens": rec,
        "recommended_overlong_cache": max(1, round(CACHE_FRACTION * rec)),
        "note": note,
        "truncation_rate": trunc_rate,
    }


# ------------------------------------------------------------------------------------------ measurement


def _sample_indices(n_total: int, n_prompts: int, seed: int) -> list[int]:
    perm = torch.randperm(n_total, generator=torch.Generator().manual_seed(seed + 4099)).tolist()
    return perm[: min(n_prompts, n_total)]


def _entropy_pass(session: Any, out: Any) -> tuple[torch.Tensor, float]:
    """Token entropies of all sampled completion tokens (full distribution, at the sampling temperature)."""
    from .learner import completion_forward

    ents, n = [], out.completion_ids.shape[0]
    t0 = time.perf_counter()
    mbs = session.cfg.train.micro_batch_size
    with torch.no_grad():
        for s in range(0, n, mbs):
            idx = slice(s, min(n, s + mbs))
            with session.autocast():
                _, ent, _ = completion_forward(
                    session.model,
                    out.prompt_ids[idx],
                    out.prompt_mask[idx],
                    out.completion_ids[idx],
                    out.completion_mask[idx],
                    temperature=session.cfg.rollout.temperature,
                )
            ents.append(ent.float().cpu()[out.completion_mask[idx].bool()])
    return torch.cat(ents) if ents else torch.zeros(0), time.perf_counter() - t0


def _fwd_bwd(session: Any, out: Any, idx: torch.Tensor) -> float:
    from .learner import completion_forward

    t0 = time.perf_counter()
    with session.autocast():
        logp, _, _ = completion_forward(
            session.model,
            out.prompt_ids[idx],
            out.prompt_mask[idx],
            out.completion_ids[idx],
            out.completion_mask[idx],
            temperature=session.cfg.rollout.temperature,
        )
    mask = out.completion_mask[idx].to(logp.device).float()
    loss = -(logp.float() * mask).sum() / mask.sum().clamp(min=1)
    loss.backward()
    seconds = time.perf_counter() - t0
    session.model.zero_grad(set_to_none=True)
    return seconds


def _time_fwd_bwd(session: Any, out: Any) -> tuple[float, int]:
    """Seconds of one forward+backward of a training-shaped micro-batch (no optimizer step), and its size.

    The micro-batch is the first `train.micro_batch_size` samples (whole groups, as in training), timed after a
    2-sample warm-up (the first backward pays one-off allocation costs).
    """
    n = min(session.cfg.train.micro_batch_size, out.completion_ids.shape[0])
    session.model.train()
    _fwd_bwd(session, out, torch.arange(min(2, n)))
    return _fwd_bwd(session, out, torch.arange(n)), n


def _step_cost(cfg: Any, t: dict[str, float], n_sampled: int, zv: float, fb_n: int) -> dict[str, Any]:
    a, r, tr = cfg.algo, cfg.rollout, cfg.train
    n_step = r.prompts_per_step * r.group_size
    gen = t["generate"] / n_sampled * n_step
    rounds = 1.0
    if a.dynamic_sampling and math.isfinite(zv):  # refill rounds to replace zero-variance groups
        rounds = min(float(a.max_gen_rounds), 1.0 / max(1e-9, 1.0 - zv))
    on_policy = tr.epochs == 1 and tr.mini_batches == 1
    need_old = (
        (not on_policy)
        or a.top_entropy_rho is not None
        or a.uses_critic
        or (a.kl_placement != "loss" and a.kl_coef > 0)
    )
    passes = int(need_old) + int(a.needs_reference)
    parts = {
        "generate": gen * rounds,
        "score": t["score"] / n_sampled * n_step * rounds,
        "logprob_passes": passes * t["forward"] / n_sampled * n_step,
        "update": t["fwd_bwd"] / fb_n * n_step * tr.epochs,
    }
    return {
        "samples_per_step": n_step,
        "expected_generation_rounds": rounds,
        "forward_only_passes": passes,
        "seconds": parts,
        "seconds_per_step": sum(parts.values()),
    }


def run_preflight(cfg: Any, n_prompts: int = 32, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Sample, score and time the starting model; returns the report (also written to out_dir if given)."""
    from .session import open_session

    session = open_session(cfg)
    try:
        report = _measure(session, n_prompts)
    finally:
        session.close()
    if out_dir is not None:
        write_outputs(report, out_dir)
    return report


def _measure(session: Any, n_prompts: int) -> dict[str, Any]:
    cfg = session.cfg
    g = cfg.rollout.group_size
    idx = _sample_indices(len(session.data.train), n_prompts, cfg.train.seed)
    examples = [session.data.train[i] for i in idx]
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    out = session.engine.generate([session.data.train_tokens[i] for i in idx], session.sampling_params())
    timings["generate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = session.rewards.score(
        out.texts, [examples[int(i)] for i in out.prompt_index], completion_ids=completion_id_lists(out)
    )
    timings["score"] = time.perf_counter() - t0
    acc = torch.tensor(res.accuracy, dtype=torch.float64).nan_to_num(0.0)
    rewards = torch.tensor(res.rewards, dtype=torch.float64)
    n = len(examples)
    solved = (acc >= 0.5).double().view(n, g)
    pass_rates = solved.mean(1).tolist()
    rew = rewards.view(n, g)
    observed_zv = float(
        sum(bool(torch.isfinite(row).all() and (row.max() - row.min()) < 1e-9) for row in rew) / max(n, 1)
    )
    sizes = sorted(set(GROUP_SIZES) | {g})
    table = {s: zero_variance(pass_rates, s) for s in sizes}
    rec_g = recommend_group_size(table)

    ents, timings["forward"] = _entropy_pass(session, out)
    timings["fwd_bwd"], fb_n = _time_fwd_bwd(session, out)
    vocab = int(getattr(session.model.config, "vocab_size", 0) or len(session.tokenizer))
    mean_ent = float(ents.mean()) if ents.numel() else math.nan
    verdict, advice = entropy_verdict(mean_ent, vocab)

    lengths, truncated = out.lengths, out.truncated.bool()
    kept = [
        {"prompt": ex.prompt, "answer": ex.answer, "pass_rate": p}
        for ex, p in zip(examples, pass_rates)
        if 0.0 < p < 1.0
    ]
    return {
        "config": {
            "model": cfg.model.name,
            "data": cfg.data.task,
            "recipe": cfg.recipe,
            "group_size": g,
            "prompts": n,
            "max_new_tokens": cfg.rollout.max_new_tokens,
            "temperature": cfg.rollout.temperature,
            "prompts_per_step": cfg.rollout.prompts_per_step,
            "device": session.device,
            "precision": session.precision.name,
        },
        "pass_rates": {
            "mean": sum(pass_rates) / max(n, 1),
            "per_prompt": [{"id": ex.id, "pass_rate": p} for ex, p in zip(examples, pass_rates)],
            "histogram": histogram(pass_rates),
            "always_solved": sum(p == 1.0 for p in pass_rates),
            "never_solved": sum(p == 0.0 for p in pass_rates),
            "reward_failures": len(res.failures),
        },
        "zero_variance": {
            "target": ZV_TARGET,
            "observed_at_group_size": observed_zv,
            "expected": {str(s): v for s, v in table.items()},
            "recommended_group_size": rec_g,
        },
        "filtered": {
            "kept": len(kept),
            "dropped_always": sum(p == 1.0 for p in pass_rates),
            "dropped_never": sum(p == 0.0 for p in pass_rates),
            "sampled": n,
            "dataset_size": len(session.data.train),
            "note": f"only the {n} sampled prompts were scored (of {len(session.data.train)}); "
            "sample more with --prompts to filter the whole dataset",
            "rows": kept,
        },
        "entropy": {
            "mean_nats": mean_ent,
            **percentiles(ents),
            "frac_below_0.1": float((ents < 0.1).double().mean()) if ents.numel() else math.nan,
            "ln_vocab": math.log(max(vocab, 2)),
            "verdict": verdict,
            "advice": advice,
            "rule": f"too low if mean < {LOW_ENTROPY_NATS} nats or < {RELATIVE_LOW} x ln(vocab size); "
            f"near-uniform if > {NEAR_UNIFORM} x ln(vocab size)",
        },
        "length": {
            "mean": float(lengths.double().mean()),
            **percentiles(lengths),
            "max": int(lengths.max()) if lengths.numel() else 0,
            "eos_rate": float(out.eos.double().mean()),
            **recommend_length(lengths, truncated, cfg.rollout.max_new_tokens),
        },
        "cost": {
            "measured": {
                "generate_s": timings["generate"],
                "generated_samples": len(out.texts),
                "gen_tokens": int(out.gen_tokens),
                "score_s": timings["score"],
                "forward_s": timings["forward"],
                "fwd_bwd_s": timings["fwd_bwd"],
                "fwd_bwd_micro_batch": fb_n,
            },
            **_step_cost(cfg, timings, len(out.texts), table[g]["zero_variance"], fb_n),
        },
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


# ------------------------------------------------------------------------------------------ rendering


def render(report: dict[str, Any]) -> str:
    """The report as a terminal page."""
    c, pr, zv = report["config"], report["pass_rates"], report["zero_variance"]
    fl, en, ln, co = report["filtered"], report["entropy"], report["length"], report["cost"]
    g = c["group_size"]
    lines = [
        f"preflight: model {c['model']}, data {c['data']}, recipe {c['recipe']} "
        f"({c['prompts']} prompts x G={g}, {c['max_new_tokens']} new tokens, T={c['temperature']})",
        "",
        f"pass rate: mean {pr['mean']:.1%}; {pr['always_solved']} always solved, {pr['never_solved']} never solved"
        + (f"; {pr['reward_failures']} reward failures" if pr["reward_failures"] else ""),
    ]
    width = max((b["count"] for b in pr["histogram"]), default=1) or 1
    for b in pr["histogram"]:
        bar = "#" * round(30 * b["count"] / width)
        lines.append(f"  [{b['lo']:.1f}, {b['hi']:.1f}{']' if b['hi'] >= 1 else ')'} {b['count']:>4} {bar}")
    lines += ["", f"zero-variance groups (no learning signal; observed at G={g}: {zv['observed_at_group_size']:.0%})"]
    lines.append("     G  expected  all-correct  all-wrong")
    for s, v in zv["expected"].items():
        mark = " <- chosen" if int(s) == g else ""
        lines.append(
            f"  {int(s):>4}  {v['zero_variance']:>8.1%}  {v['all_correct']:>11.1%}  {v['all_wrong']:>9.1%}{mark}"
        )
    lines.append(f"  (plug-in estimates from G={g} samples: a prompt never/always solved counts as p=0/1 at every G)")
    rec = zv["recommended_group_size"]
    lines.append(
        f"  recommended G: {rec} (smallest with < {zv['target']:.0%} wasted groups)"
        if rec is not None
        else f"  recommended G: none reaches < {zv['target']:.0%}; filter the data (below) or change the task"
    )
    lines += [
        "",
        f"difficulty filter: kept {fl['kept']} of {fl['sampled']} sampled prompts (dropped {fl['dropped_always']} "
        f"always / {fl['dropped_never']} never solved) -> {fl.get('path', '(not written)')}",
        f"  note: {fl['note']}",
        "",
        f"entropy: mean {en['mean_nats']:.3f} nats (p10 {en['p10']:.3f}, p50 {en['p50']:.3f}, p90 {en['p90']:.3f}, "
        f"p99 {en['p99']:.3f}; {en['frac_below_0.1']:.0%} of tokens < 0.1; ln V = {en['ln_vocab']:.2f})",
        f"  verdict: {en['verdict']}",
        f"  advice: {en['advice']}",
        "",
        f"length: mean {ln['mean']:.1f} tokens (p50 {ln['p50']:.0f}, p90 {ln['p90']:.0f}, p99 {ln['p99']:.0f}, "
        f"max {ln['max']}); truncated at {c['max_new_tokens']}: {ln['truncation_rate']:.1%}",
        f"  recommended: --set rollout.max_new_tokens={ln['recommended_max_new_tokens']} "
        f"--set algo.overlong_cache={ln['recommended_overlong_cache']} ({ln['note']})",
        "",
    ]
    m, s = co["measured"], co["seconds"]
    lines += [
        f"cost on {c['device']} ({c['precision']}): generation {m['generate_s']:.1f} s for {m['generated_samples']} "
        f"samples; fwd+bwd {m['fwd_bwd_s']:.2f} s for a micro-batch of {m['fwd_bwd_micro_batch']}",
        f"  estimated {co['seconds_per_step']:.1f} s per step ({c['prompts_per_step']} prompts x G={g} = "
        f"{co['samples_per_step']} samples): generate {s['generate']:.1f}, score {s['score']:.2f}, "
        f"log-prob passes {s['logprob_passes']:.1f}, update {s['update']:.1f}"
        + (
            f" (dynamic sampling: ~{co['expected_generation_rounds']:.1f} generation rounds)"
            if co["expected_generation_rounds"] > 1
            else ""
        ),
    ]
    if "files" in report:
        lines.append(f"\nreport: {report['files']['report']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ command line


def cmd_preflight(args: argparse.Namespace) -> int:
    from .config import build_config

    overrides = list(args.set or [])
    if args.group_size is not None:
        overrides.append(f"rollout.group_size={args.group_size}")
    if args.max_new_tokens is not None:
        overrides.append(f"rollout.max_new_tokens={args.max_new_tokens}")
    cfg = build_config(args.recipe, overrides, **{"model.name": args.model, "data.task": args.data})
    out = Path(args.out or f"runs/preflight-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        report = run_preflight(cfg, args.prompts, out)
    except (ValueError, FileNotFoundError) as e:  # unknown task, missing file, bad reward spec
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, default=float))
    else:
        print(render(report))
    return 0


def register_cli(sub: Any) -> argparse.ArgumentParser:
    """Add the `preflight` subcommand to an argparse sub-parsers object."""
    p = sub.add_parser("preflight", help="measure the starting model on the data before training")
    p.add_argument("--model", default="smollm2-135m-instruct", help="smollm2-135m-instruct, tiny, or a local dir")
    p.add_argument("--data", default="add1", help="built-in task (add1, add2, mul1, countdown) or a data file")
    p.add_argument("--recipe", default="grpo", help="recipe whose rollout settings to use")
    p.add_argument("--prompts", type=int, default=32, help="prompts to sample (default 32)")
    p.add_argument("--group-size", type=int, default=None, help="samples per prompt (default: the recipe's)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the recipe's")
    p.add_argument("--out", default=None, help="output directory (default runs/preflight-<stamp>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=cmd_preflight)
    return p

"""The preflight report as a terminal page."""

from __future__ import annotations

from typing import Any


def _pass_rate_lines(c: dict[str, Any], pr: dict[str, Any]) -> list[str]:
    lines = [
        f"preflight: model {c['model']}, data {c['data']}, recipe {c['recipe']} "
        f"({c['prompts']} prompts x G={c['group_size']}, {c['max_new_tokens']} new tokens, T={c['temperature']})",
        "",
        f"pass rate: mean {pr['mean']:.1%}; {pr['always_solved']} always solved, {pr['never_solved']} never solved"
        + (f"; {pr['reward_failures']} reward failures" if pr["reward_failures"] else ""),
    ]
    width = max((b["count"] for b in pr["histogram"]), default=1) or 1
    for b in pr["histogram"]:
        bar = "#" * round(30 * b["count"] / width)
        lines.append(f"  [{b['lo']:.1f}, {b['hi']:.1f}{']' if b['hi'] >= 1 else ')'} {b['count']:>4} {bar}")
    return lines


def _zero_variance_lines(g: int, zv: dict[str, Any]) -> list[str]:
    lines = ["", f"zero-variance groups (no learning signal; observed at G={g}: {zv['observed_at_group_size']:.0%})"]
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
    return lines


def _filter_entropy_length_lines(
    c: dict[str, Any], fl: dict[str, Any], en: dict[str, Any], ln: dict[str, Any]
) -> list[str]:
    return [
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


def _cost_lines(c: dict[str, Any], co: dict[str, Any]) -> list[str]:
    m, s = co["measured"], co["seconds"]
    return [
        f"cost on {c['device']} ({c['precision']}): generation {m['generate_s']:.1f} s for {m['generated_samples']} "
        f"samples; fwd+bwd {m['fwd_bwd_s']:.2f} s for a micro-batch of {m['fwd_bwd_micro_batch']}",
        f"  estimated {co['seconds_per_step']:.1f} s per step ({c['prompts_per_step']} prompts x G={c['group_size']} = "
        f"{co['samples_per_step']} samples): generate {s['generate']:.1f}, score {s['score']:.2f}, "
        f"log-prob passes {s['logprob_passes']:.1f}, update {s['update']:.1f}"
        + (
            f" (dynamic sampling: ~{co['expected_generation_rounds']:.1f} generation rounds)"
            if co["expected_generation_rounds"] > 1
            else ""
        ),
    ]


def render(report: dict[str, Any]) -> str:
    """The report as a terminal page: pass rates, zero-variance groups per G, the difficulty filter, entropy,
    length, cost."""
    c = report["config"]
    lines = _pass_rate_lines(c, report["pass_rates"])
    lines += _zero_variance_lines(c["group_size"], report["zero_variance"])
    lines += _filter_entropy_length_lines(c, report["filtered"], report["entropy"], report["length"])
    lines += _cost_lines(c, report["cost"])
    if "files" in report:
        lines.append(f"\nreport: {report['files']['report']}")
    return "\n".join(lines)

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


def _reward_model_lines(g: int, models: dict[str, Any]) -> list[str]:
    """Each reward model's spread within groups of G and its agreement with the verifier."""
    lines = []
    for name, m in models.items():
        lines.append(
            f"reward model {name}: score std {m['spread_within_groups']:.3g} within groups of G={g} "
            f"({m['spread_overall']:.3g} overall)"
            + (
                f"; vs verifier {m['verifier']}: AUC {m['agreement_auc']:.2f} over {m['pairs']} right/wrong pairs, "
                f"gap {m['gap']:.3g}, noise/signal {m['noise_to_signal']:.2f}"
                if m["pairs"]
                else ""
            )
        )
        lines.append(f"  verdict: {m['verdict']}")
    return [""] + lines if lines else []


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
        (
            f"  correct answers: {ln['correct_n']}, length p50 {ln['correct_p50']:.0f}, p99 {ln['correct_p99']:.0f}"
            if ln.get("correct_n")
            else "  correct answers: none sampled"
        ),
        f"  recommended: --set rollout.max_new_tokens={ln['recommended_max_new_tokens']} "
        f"--set algo.overlong_cache={ln['recommended_overlong_cache']} ({ln['note']})",
        "",
    ]


def _cost_lines(c: dict[str, Any], co: dict[str, Any]) -> list[str]:
    m, s, mc = co["measured"], co["seconds"], co["machine"]
    rounds = co["expected_generation_rounds"]
    return [
        f"cost on {mc['device']} ({mc['precision']}, {mc['torch_threads']} threads): generation "
        f"{m['generate_s']:.1f} s for {m['generated_samples']} samples in {m['generation_rounds']} rounds of "
        f"{c['prompts_per_step']} prompts; fwd+bwd {m['fwd_bwd_s']:.2f} s for a micro-batch of "
        f"{m['fwd_bwd_micro_batch']}; optimizer step {m['optimizer_s']:.2f} s",
        f"  estimated {co['seconds_per_step']:.1f} s per step ({c['prompts_per_step']} prompts x G={c['group_size']} = "
        f"{co['samples_per_step']} samples): generate {s['generate']:.1f}, score {s['score']:.2f}, "
        f"log-prob passes {s['logprob_passes']:.1f}, update {s['update']:.1f}, optimizer {s['optimizer']:.1f}"
        + (f" (dynamic sampling: ~{rounds:.1f} generation rounds)" if rounds > 1 else ""),
        f"  {mc['note']}",
    ]


def train_command(report: dict[str, Any]) -> str | None:
    """The command that trains on the difficulty-filtered prompts with the recommended settings."""
    path = report["filtered"].get("path")
    if not path or not report["filtered"]["kept"]:
        return None
    c, tc = report["config"], report["train_command"]
    g = report["zero_variance"]["recommended_group_size"] or c["group_size"]
    ln = report["length"]
    return (
        f"grpokit train --recipe {c['recipe']} --model {c['model']} --task {path} "
        f"--set rollout.group_size={g} --set rollout.max_new_tokens={ln['recommended_max_new_tokens']} "
        f"--set algo.overlong_cache={ln['recommended_overlong_cache']} --set 'reward.functions={tc['reward']}' "
        f"--set model.precision={tc['precision']}"
    )


def render(report: dict[str, Any]) -> str:
    """The report as a terminal page: pass rates, zero-variance groups per G, the difficulty filter, entropy,
    length, cost."""
    c = report["config"]
    lines = _pass_rate_lines(c, report["pass_rates"])
    lines += _reward_model_lines(c["group_size"], report.get("reward_models") or {})
    lines += _zero_variance_lines(c["group_size"], report["zero_variance"])
    lines += _filter_entropy_length_lines(c, report["filtered"], report["entropy"], report["length"])
    lines += _cost_lines(c, report["cost"])
    if "files" in report:
        lines.append(f"\nreport: {report['files']['report']}")
    command = train_command(report)
    lines.append(
        f"\ntrain on the filtered prompts ({report['filtered']['kept']} kept):\n  {command}"
        if command
        else "\nno prompt kept by the difficulty filter: nothing to train on from filtered.jsonl"
    )
    return "\n".join(lines)

"""NeMo-RL's GRPO console (`nemo_rl/algorithms/grpo.py`): a `===== Step N/M =====` banner per step (N is the step
NeMo-RL logs to its trackers), then the "📊 Training Results:" bullets (`  • Loss: x`, `  • Generation KL Error: x`,
`  • Avg Reward: x`, `  • Mean Generation Length: x`) and the "⏱️ Timing:" bullets (`  • Total step time: Ts`,
`  • generation: Ts (p%)`), values printed with 4 and 2 decimals; a step that validates also prints
"📊 Validation Results:" (`    • Accuracy: x`). The detectors' context comes from the config that
NeMo-RL's example scripts pretty-print at start ("Final config:")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .canonical import RawRows, Segment
from .console_text import NUMBER, TextLogReader, in_table_order, merge, read_text, table_mapper
from .names_more import NEMO_RL_CONSOLE, NEMO_RL_NAMES

_BANNER = re.compile(r"^[ \t]*={5,} Step (\d+)/(\d+) ={5,}[ \t]*$", re.M)
_BULLET = re.compile(r"^\s*•\s*([^:]{1,80}?):\s*(" + NUMBER + r")s?\b")
# bullet blocks, the validation timing block before the step's timing block ("Validation Timing:" ends in "Timing:")
_SECTIONS = (
    ("Training Results:", "results"),
    ("Validation Results:", "validation"),
    ("Validation Timing:", "validation timing"),
    ("Timing:", "timing"),
    ("Performance Metrics:", "perf"),
)
_LABELS = {"results": NEMO_RL_CONSOLE, "timing": NEMO_RL_CONSOLE, "validation": {"Accuracy": "validation/accuracy"}}
_STEP_WORK = ("Training Results:", "▶ Preparing batch", "▶ Generating responses")

# keys of the pretty-printed config (`pprint` of the MasterConfig dict)
_CFG = {
    key: re.compile(rf"'{key}':\s*({NUMBER}|True|False|None)")
    for key in (
        "ratio_clip_min",
        "ratio_clip_max",
        "use_dynamic_sampling",
        "dynamic_sampling_max_gen_batches",
        "use_importance_sampling_correction",
        "num_prompts_per_step",
        "num_generations_per_prompt",
        "train_global_batch_size",
    )
}


def _section(line: str, current: str | None) -> str | None:
    """The bullet block a line opens (results, timing, performance), else the current one."""
    for marker, name in _SECTIONS:
        if marker in line:
            return name
    return current


def _bullet(line: str, section: str | None) -> dict[str, float]:
    """A results, timing or validation bullet as {NeMo-RL tracker key: value}; other bullets are skipped."""
    m = _BULLET.match(line)
    if not m or section not in _LABELS:
        return {}
    key = _LABELS[section].get(m.group(1).strip())
    return {key: float(m.group(2))} if key else {}


def nemo_rows(text: str) -> RawRows:
    """NeMo-RL console text -> rows by the banner's step number (bullets before the first banner are skipped: an
    excerpt may start inside a step whose number it does not show)."""
    rows: RawRows = {}
    step: int | None = None
    section: str | None = None
    for line in text.splitlines():
        if "Step" in line and (m := _BANNER.match(line)):
            step, section = int(m.group(1)), None
        elif ":" in line:
            section = _section(line, section)
            if step is not None and "•" in line and (values := _bullet(line, section)):
                merge(rows, step, values)
    return in_table_order(rows, NEMO_RL_NAMES)


def _config(text: str) -> dict[str, str]:
    head = text[: 2 << 20]
    return {key: m.group(1) for key, pat in _CFG.items() if (m := pat.search(head))}


def nemo_context(text: str) -> dict[str, Any]:
    """The detectors' context from the printed config: clip range, dynamic sampling, importance-sampling correction,
    optimizer steps per GRPO step ({} when the log does not print the config)."""
    found = _config(text)
    if not found:
        return {}
    ctx: dict[str, Any] = {"trainer": "nemo-rl"}
    for src, dst in (("ratio_clip_min", "eps_low"), ("ratio_clip_max", "eps_high")):
        if found.get(src, "None") != "None":
            ctx[dst] = float(found[src])
    if "use_dynamic_sampling" in found:
        ctx["dynamic_sampling"] = found["use_dynamic_sampling"] == "True"
        if ctx["dynamic_sampling"] and found.get("dynamic_sampling_max_gen_batches", "None") != "None":
            ctx["max_gen_rounds"] = int(float(found["dynamic_sampling_max_gen_batches"]))
    if "use_importance_sampling_correction" in found:
        ctx["is_correction"] = found["use_importance_sampling_correction"] == "True"
    sizes = [found.get(k) for k in ("num_prompts_per_step", "num_generations_per_prompt", "train_global_batch_size")]
    if all(s not in (None, "None") for s in sizes) and float(sizes[2]) > 0:
        ctx["mini_batches"] = max(int(float(sizes[0]) * float(sizes[1]) // float(sizes[2])), 1)
    return ctx


class NemoRLReader(TextLogReader):
    """NeMo-RL's printed GRPO output (a pod log, or a console excerpt pasted in a README)."""

    name = "nemo-rl"

    def claims(self, head: str) -> bool:
        return bool(_BANNER.search(head)) and any(p in head for p in _STEP_WORK)

    def read(self, files: list[Path]) -> list[Segment]:
        text = read_text(files[0])
        rows = nemo_rows(text)
        notes = []
        first = _BANNER.search(text)
        if first and text[: first.start()].count("•"):
            notes.append("bullets before the first 'Step N/M' banner were skipped (their step is not shown)")
        return [Segment(rows, table_mapper(NEMO_RL_NAMES), "nemo-rl", "", nemo_context(text), {}, notes)]

"""Warnings the training prints, each true for its run and saying what to do (issue 45 item 4): the advantage-collapse
fix when nearly every group has no signal or GPG's filter is on, the line that ends value pretraining, and the
doctor's sampler-mismatch warning on a run whose precision was `auto`."""

from __future__ import annotations

import json
import math
from pathlib import Path

from grpokit import metric_names as mn
from grpokit.config.sections import CriticConfig
from grpokit.monitor.detectors import AdvantageCollapse
from grpokit.monitor.doctor import diagnose
from grpokit.run.directory import MARKER
from grpokit.training.loop import pretrain_note


def _alert(frac: float, **context: object):
    det = AdvantageCollapse(context)
    row = {mn.ZV_ACC_FRAC: frac, mn.ZV_ALL_CORRECT: 0.0, mn.ZV_ALL_WRONG: frac}
    alerts = [a for step in range(1, 9) if (a := det.observe(step, dict(row))) is not None]
    assert len(alerts) == 1
    return alerts[0]


def test_every_group_without_signal_puts_the_data_before_dynamic_sampling() -> None:
    # a model that fails every sample: dynamic sampling alone would draw algo.max_gen_rounds and stop the run (the
    # dapo recipes on the tiny model), so the fix leads with the data and says why the filter is not enough
    fix = _alert(1.0, dynamic_sampling=False, group_filter="all").fix
    assert fix.startswith("a data mix with easier prompts")
    assert "alone would find almost none to keep" in fix
    # some groups with signal: dropping the rest is the first fix, as before
    fix = _alert(0.9, dynamic_sampling=False, group_filter="all").fix
    assert fix.startswith("DAPO dynamic sampling (algo.group_filter=dynamic_sampling) to drop degenerate groups")


def test_gpg_filter_is_not_told_to_switch_to_dynamic_sampling() -> None:
    a = _alert(1.0, dynamic_sampling=False, group_filter="gpg")
    assert a.fix.startswith("GPG's group filter is on")
    assert "algo.group_filter=dynamic_sampling" not in a.fix
    assert "algo.group_filter=dynamic_sampling" not in a.actions  # the autopilot keeps the recipe's filter
    assert "algo.group_filter=dynamic_sampling" in _alert(0.9, dynamic_sampling=False, group_filter="all").actions


def _rows(*evs: float) -> list[dict[str, float]]:
    return [{mn.CRITIC_PRETRAIN_EXPLAINED_VARIANCE: ev} for ev in evs]


def test_value_pretraining_line_says_why_it_stopped_short() -> None:
    cc = CriticConfig(pretrain_max_steps=3, pretrain_ev=0.5, pretrain_patience=2)
    met = pretrain_note(_rows(0.2, 0.6, 0.7), cc)
    assert met == "value pretraining: 3 batches, explained variance 0.70 (target 0.5)"
    short = pretrain_note(_rows(0.1, 0.2, 0.3), cc)
    assert "0.30; stopped at critic.pretrain_max_steps=3 short of the target 0.5" in short
    assert "lower critic.pretrain_ev" in short
    # returns that barely vary (every answer wrong) make explained variance undefined: said so, never "nan"
    undefined = pretrain_note(_rows(math.nan, math.nan, math.nan), cc)
    assert "nan" not in undefined
    assert "undefined" in undefined and "every answer equally right or wrong" in undefined
    assert "grpokit preflight" in undefined


def _mismatch_run(tmp_path: Path, run_json: dict | None) -> Path:
    """A grpokit run directory whose sampler and learner differ by bf16 rounding alone (mismatch KL 1.08e-3, as
    the demo logged), with model.precision=auto in config.yaml and `run_json` as run.json."""
    run = tmp_path / "run"
    run.mkdir()
    (run / MARKER).write_text("")
    (run / "config.yaml").write_text("recipe: dapo\nmodel:\n  precision: auto\nalgo:\n  group_filter: all\n")
    rows = [{"step": s, mn.MISMATCH_KL_K3: 1.08e-3, mn.MISMATCH_FRAC_HIGH: 0.0} for s in range(1, 7)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if run_json is not None:
        (run / "run.json").write_text(json.dumps(run_json))
    return run


def test_doctor_judges_an_auto_precision_run_by_the_precision_it_resolved_to(tmp_path: Path) -> None:
    # the live run knew bf16-autocast and did not warn; the doctor, reading only "auto", warned of a mismatch that
    # rounding alone gives
    fired = {a["detector"] for a in diagnose(_mismatch_run(tmp_path, {"precision": "bf16-autocast"}))["alerts"]}
    assert "sampler_mismatch" not in fired
    other = tmp_path / "fp32"
    other.mkdir()
    fired = {a["detector"] for a in diagnose(_mismatch_run(other, {"precision": "fp32"}))["alerts"]}
    assert "sampler_mismatch" in fired  # at fp32 the same KL is a mismatch

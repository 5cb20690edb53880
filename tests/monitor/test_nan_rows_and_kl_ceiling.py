"""Issue 40's two log defects, each on a TRL console log of the shape that showed it: rows whose printed dict holds a
bare `nan` (dropped whole before: `ast.literal_eval` and `json.loads` both refuse it), and a KL blow-up in the first
logged row (excused as an "offset" before)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grpokit.monitor.detectors.kl_drift import KLDrift
from grpokit.monitor.doctor import diagnose
from grpokit.monitor.readers import read_run
from grpokit.monitor.readers.values import dict_at

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def trl_console(path: Path, rows: list[str], every: int = 1, total: int | None = None) -> Path:
    """A console log as transformers' Trainer prints it for TRL's GRPOTrainer: a tqdm bar line then the step's dict
    (`rows`: the dict bodies, printed as they are, so `nan` stays a bare token), and the end-of-training summary."""
    total = total or len(rows) * every
    lines = ["***** Running training *****", "  Num examples = 1000"]
    for i, body in enumerate(rows, 1):
        n = i * every
        lines.append(f" {100 * n // total:3d}%|#####     | {n}/{total} [00:{i:02d}<01:00,  2.10s/it]")
        lines.append("{" + body + "}")
    lines.append(
        f"{{'train_runtime': 120.5, 'train_samples_per_second': 1.3, 'train_steps_per_second': 0.17, "
        f"'train_loss': nan, 'epoch': {0.01 * len(rows):.2f}}}"
    )
    path.write_text("\n".join(lines) + "\n")
    return path


def grpo_row(n: int, loss: str = "0.0", grad_norm: str = "0.42", kl: str = "0.001") -> str:
    """One GRPOTrainer log dict body with TRL's names; loss, grad_norm and kl as printed tokens."""
    return (
        f"'loss': {loss}, 'grad_norm': {grad_norm}, 'learning_rate': 1e-06, 'num_tokens': {n * 2048}.0, "
        f"'completions/mean_length': 143.5, 'completions/clipped_ratio': 0.0, 'rewards/accuracy_reward/mean': 0.25, "
        f"'reward': 0.25, 'reward_std': 0.31, 'frac_reward_zero_std': 0.25, 'kl': {kl}, 'entropy': 0.71, "
        f"'clip_ratio/region_mean': 0.0, 'epoch': {0.01 * n:.2f}"
    )


def doctor_json(path: Path) -> tuple[int, dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "doctor", str(path), "--json"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


def alerts_of(diag: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    return [a for a in diag["alerts"] if a["mode"] == mode]


# ------------------------------------------------------------------------------------------- bare nan / inf


def test_printed_dicts_read_bare_nonfinite_floats_and_nothing_else() -> None:
    line = (
        "12%| {'loss': 0.0, 'grad_norm': nan, 'a': inf, 'b': -inf, 'c': NaN, 'd': Infinity, 'e': -Infinity, "
        "'f': [1, nan], 'g': 'nan'}"
    )
    d = dict_at(line, line.index("{"))
    assert d is not None and d["loss"] == 0.0 and d["g"] == "nan" and d["f"][0] == 1
    assert math.isnan(d["grad_norm"]) and math.isnan(d["c"]) and math.isnan(d["f"][1])
    assert d["a"] == d["d"] == math.inf and d["b"] == d["e"] == -math.inf
    # only those names become floats: any other name, call or attribute is still refused, never evaluated
    for bad in (
        "{'loss': nan, 'x': os}",
        "{'loss': nan, 'x': __import__('os').getcwd()}",
        "{'loss': nan, 'x': nan.real}",
        "{'loss': nan, 'x': nan + 1}",
        "{'loss': nan_value}",
    ):
        assert dict_at(bad, 0) is None, bad


def test_a_trl_console_with_nan_gradients_at_every_step_is_read_and_critical(tmp_path: Path) -> None:
    """The run that vanished whole: `{'loss': 0.0, 'grad_norm': nan, ...}` at all 20 steps."""
    log_path = trl_console(tmp_path / "nan_grads.log", [grpo_row(n, grad_norm="nan") for n in range(1, 21)])
    log = read_run(log_path)
    assert log.source == "trl-console" and log.steps == list(range(1, 21))
    assert all(math.isnan(r["train/grad_norm"]) for r in log.rows)
    assert [r["train/nonfinite_grad"] for r in log.rows] == [1.0] * 20
    assert [r["actor/loss"] for r in log.rows] == [0.0] * 20 and [r["reward/mean"] for r in log.rows] == [0.25] * 20

    rc, diag = doctor_json(log_path)
    assert rc == 1 and diag["steps"] == 20 and diag["verdict"].startswith("failing")
    (num,) = alerts_of(diag, "numerical trouble")
    assert (num["severity"], num["step"], num["evidence"], num["cleared_at"]) == (
        "critical",
        1,
        {"nonfinite_grad": 1},
        None,
    )
    assert "NaN" in num["message"]
    assert "numerical" not in diag["not_measurable"]


def test_a_trl_console_turning_nan_midway_is_critical_from_that_row(tmp_path: Path) -> None:
    """12 healthy steps, an `inf` gradient norm at step 13, a NaN loss and gradient at steps 14-19, a finite step 20:
    every row is kept, the healthy ones with their values, and the numerical detector fires at step 13, not before,
    and clears at step 20."""
    rows = [grpo_row(n, loss=f"{0.01 * n:.3f}", grad_norm=f"{0.3 + 0.01 * n:.3f}") for n in range(1, 13)]
    rows += [grpo_row(13, grad_norm="inf")] + [grpo_row(n, loss="nan", grad_norm="nan") for n in range(14, 20)]
    rows += [grpo_row(20, loss="0.2", grad_norm="0.5")]
    log_path = trl_console(tmp_path / "mixed.log", rows)
    log = read_run(log_path)
    assert log.steps == list(range(1, 21))
    assert log.series("train/grad_norm")[1] == pytest.approx([0.3 + 0.01 * n for n in range(1, 13)] + [0.5])
    assert log.rows[12]["train/grad_norm"] == math.inf
    assert [r["train/nonfinite_grad"] for r in log.rows] == [0.0] * 12 + [1.0] * 7 + [0.0]
    assert [r["train/nonfinite_loss"] for r in log.rows] == [0.0] * 13 + [1.0] * 6 + [0.0]

    diag = diagnose(log_path)
    (num,) = alerts_of(diag, "numerical trouble")
    assert (num["severity"], num["step"], num["cleared_at"]) == ("critical", 13, 20)
    assert num["message"] == "non-finite gradient: the gradient norm is NaN or infinite"
    assert num["current"] == {"step": 19, "message": "the loss is NaN or infinite", "evidence": {"nonfinite_loss": 1}}


def test_a_printed_dict_that_cannot_be_read_is_said_not_dropped_silently(tmp_path: Path) -> None:
    """A dict that no literal parser takes (a tensor repr) is skipped, and the diagnosis says so."""
    rows = [grpo_row(n) for n in range(1, 6)] + [grpo_row(6, loss="tensor(0.1, device='cuda:0')")]
    log = read_run(trl_console(tmp_path / "tensor.log", rows))
    assert log.steps == [1, 2, 3, 4, 5]
    assert "1 printed metric dict(s) could not be read and were skipped" in log.notes
    only_bad = trl_console(tmp_path / "all_bad.log", [grpo_row(n, kl="tensor(0.1)") for n in range(1, 4)])
    assert "3 printed metric dict(s) could not be read and were skipped" in diagnose(only_bad)["notes"]


# ------------------------------------------------------------------------------------- KL beyond any offset


def test_kl_above_the_ceiling_at_the_first_row_is_critical_at_once() -> None:
    det = KLDrift()
    alert = det.observe(10, {"kl_ref/k3": 10832.9})
    assert alert is not None and (alert.severity, alert.step, alert.fired_at) == ("critical", 10, 10)
    assert alert.evidence == {"kl": 10832.9, "ceiling": 10.0, "signal": "kl_ref/k3"}
    assert "first logged row" in alert.message
    # a first KL above kl_max but under the ceiling is still an offset (a teacher reference): judged against 3x it
    det = KLDrift()
    assert det.observe(1, {"kl_ref/k1": 0.55}) is None and det.observe(2, {"kl_ref/k1": 1.6}) is None
    assert det.observe(3, {"kl_ref/k1": 1.7}) is not None  # above 3 x 0.55


def test_doctor_flags_a_first_row_kl_blow_up_logged_every_10_steps(tmp_path: Path) -> None:
    """The TRL + LoRA run of issue 40: kl 10,832.9, loss 1,083 and grad_norm 4.2e5 at step 10 (logging every 10
    steps, beta 0.1), then falling (the author switched the KL term off)."""
    kls = [10832.9, 2210.4, 812.0, 95.3, 12.1, 3.2]
    norms = [4.2e5, 9.1e4, 2.3e4, 3.1e3, 410.0, 55.0]
    rows = [grpo_row(10 * (i + 1), f"{0.1 * k:.2f}", f"{g}", f"{k}") for i, (k, g) in enumerate(zip(kls, norms))]
    rc, diag = doctor_json(trl_console(tmp_path / "lora_kl.log", rows, every=10, total=100))
    assert rc == 1 and diag["logging_interval"] == 10
    (kl,) = alerts_of(diag, "KL drift")
    assert (kl["severity"], kl["step"], kl["fired_at"]) == ("critical", 10, 10)
    assert kl["evidence"] == {"kl": 10832.9, "ceiling": 10.0, "signal": "kl_ref/k3"}
    (num,) = alerts_of(diag, "numerical trouble")
    assert num["step"] == 10 and num["evidence"] == {"grad_norm": 4.2e5, "ceiling": 1e5}
    # the ceiling adds nothing to a healthy log of the same shape: KL 0.05 at the first row (step 10), then rising
    # by 0.005 a row to 0.145
    rows = [grpo_row(10 * n, f"{0.004 * n:.3f}", "0.35", f"{0.05 + 0.005 * (n - 1):.3f}") for n in range(1, 21)]
    rc, diag = doctor_json(trl_console(tmp_path / "healthy.log", rows, every=10))
    assert rc == 0 and diag["steps"] == 20 and not any(a["severity"] != "info" for a in diag["alerts"]), diag["alerts"]

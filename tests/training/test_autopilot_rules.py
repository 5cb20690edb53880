"""What the autopilot does for the failures `bench/rescue.py` causes (issue 40 item 4): the entropy detector's
actions for a cold sampler and for a reward that falls as entropy falls; an alert the autopilot cannot act on is
logged once, with why and what it would need; a temperature change reaches the sampler."""

from __future__ import annotations

from pathlib import Path

from grpokit.config import build_config
from grpokit.monitor.detectors import Alert
from grpokit.monitor.detectors.collapse import EntropyCollapse
from grpokit.training import Trainer
from grpokit.training.autopilot import Autopilot, Bounds

ON_POLICY = {"epochs": 1, "mini_batches": 1, "eps_low": 0.2, "eps_high": 0.28, "entropy_coef": 0.0}


def fire(context: dict, rewards: list[float], entropies: list[float]) -> Alert:
    """Feed (reward, entropy) rows to an entropy detector of patience 2; the first alert it raises."""
    det = EntropyCollapse(context, patience=2)
    for step, (r, h) in enumerate(zip(rewards, entropies), 1):
        alert = det.observe(
            step, {"reward/mean": r, "reward/accuracy": r, "entropy/token_mean": h, "zv/acc_frac": 0.25}
        )
        if alert is not None:
            return alert
    raise AssertionError("no alert")


def test_a_falling_reward_during_collapse_asks_for_a_lower_learning_rate() -> None:
    """Reward 0.4 -> 0.1 while entropy falls under 0.5: critical, and the first action lowers the learning rate;
    the same entropy with a flat reward does not ask for it."""
    fell = fire(ON_POLICY, [0.4, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1], [2.0, 1.5, 0.4, 0.3, 0.2, 0.2, 0.2])
    assert fell.severity == "critical" and fell.actions[0] == "train.lr*=0.25"
    assert fell.evidence["reward_later"] < fell.evidence["reward_earlier"]
    assert "lower learning rate" in fell.fix
    flat = fire(ON_POLICY, [0.3] * 7, [2.0, 1.5, 0.4, 0.3, 0.2, 0.2, 0.2])
    assert flat.severity == "critical" and flat.actions == ["algo.entropy_coef+=0.001"]


def test_a_cold_sampler_is_asked_to_sample_at_one() -> None:
    alert = fire({**ON_POLICY, "temperature": 0.3}, [0.3] * 7, [2.0, 1.5, 0.4, 0.3, 0.2, 0.2, 0.2])
    assert alert.actions[0] == "rollout.temperature=1.0" and "rollout.temperature is 0.3" in alert.fix
    assert "a higher sampling temperature" not in alert.fix  # said once, as the action
    warm = fire({**ON_POLICY, "temperature": 1.0}, [0.3] * 7, [2.0, 1.5, 0.4, 0.3, 0.2, 0.2, 0.2])
    assert "rollout.temperature=1.0" not in warm.actions and "a higher sampling temperature" in warm.fix


def alert(mode: str, actions: list[str], severity: str = "critical") -> Alert:
    return Alert(mode, mode, 3, 3, severity, f"{mode} happened", {}, f"fix for {mode}", actions)


def test_the_autopilot_says_once_what_it_cannot_do_and_what_it_would_need(tmp_path: Path) -> None:
    cfg = build_config("dapo", overrides=["model.name=tiny", "rollout.temperature=0.5"])
    pilot = Autopilot(cfg, Bounds(max_interventions=1))
    rows, changes = pilot.react(3, [alert("truncation", []), alert("low entropy", [], "info")], {})
    assert [r["kind"] for r in rows] == ["unable"]  # an info alert asks for nothing
    assert rows[0]["mode"] == "truncation" and rows[0]["needs"] == "fix for truncation" and changes == []
    assert "not a config change" in rows[0]["why"] or "none of its fixes" in rows[0]["why"]
    assert pilot.react(4, [alert("truncation", [])], {}) == ([], [])  # said once per mode
    rows, changes = pilot.react(5, [alert("entropy collapse", ["rollout.temperature=1.0"])], {})
    assert [r["kind"] for r in rows] == ["intervention"] and changes[0].key == "rollout.temperature"
    rows, _ = pilot.react(6, [alert("KL drift", ["algo.kl_controller=adaptive"])], {})
    assert rows[0]["kind"] == "unable" and "budget of 1 interventions is spent" in rows[0]["why"]
    state = pilot.state_dict()
    again = Autopilot(cfg, Bounds(max_interventions=1))
    again.load_state_dict(state)
    assert again.react(7, [alert("KL drift", ["algo.kl_controller=adaptive"])], {})[0] == []  # survives resume
    in_force = Autopilot(cfg)
    rows, _ = in_force.react(3, [alert("advantage collapse", ["algo.group_filter=dynamic_sampling"])], {})
    assert rows[0]["kind"] == "unable" and "in force already" in rows[0]["why"]  # dapo filters already


def test_a_temperature_change_reaches_the_sampler(tmp_path: Path) -> None:
    cfg = build_config("dapo", overrides=["model.name=tiny", "rollout.max_new_tokens=2", "rollout.temperature=0.3"])
    trainer = Trainer(cfg, tmp_path)
    assert trainer.sampling.temperature == 0.3
    change = Autopilot(trainer.cfg).change("rollout.temperature=1.0")
    trainer.apply_changes([change])
    assert trainer.sampling.temperature == 1.0 and trainer.monitor_context["temperature"] == 1.0


def test_zero_variance_groups_under_a_cold_sampler_ask_for_temperature_one_first() -> None:
    """Groups that repeat one answer (60% zero-variance, half all-correct, half all-wrong) at T=0.3: sampling at 1
    comes before dynamic sampling; at T=1 only dynamic sampling is offered."""
    from grpokit.monitor.detectors.collapse import AdvantageCollapse

    def first_alert(temperature: float) -> Alert:
        det = AdvantageCollapse({"temperature": temperature, "dynamic_sampling": False}, window=3)
        for step in range(1, 6):
            a = det.observe(step, {"zv/acc_frac": 0.6, "zv/all_correct": 0.3, "zv/all_wrong": 0.3})
            if a is not None:
                return a
        raise AssertionError("no alert")

    cold = first_alert(0.3)
    assert cold.actions == ["rollout.temperature=1.0", "algo.group_filter=dynamic_sampling"]
    assert cold.fix.startswith("sample at temperature 1 (rollout.temperature is 0.3")
    assert first_alert(1.0).actions == ["algo.group_filter=dynamic_sampling"]


def test_all_correct_groups_under_a_cold_sampler_are_not_read_as_learned() -> None:
    """90% zero-variance, all of them all-correct: at T=1 the task is learned (info); at T=0.3 the groups may be one
    answer repeated, so it is advantage collapse with sampling at 1 as its first action."""
    from grpokit.monitor.detectors.collapse import AdvantageCollapse

    def first_alert(temperature: float) -> Alert:
        det = AdvantageCollapse({"temperature": temperature, "dynamic_sampling": True}, window=3)
        for step in range(1, 6):
            a = det.observe(step, {"zv/acc_frac": 0.9, "zv/all_correct": 0.9, "zv/all_wrong": 0.0})
            if a is not None:
                return a
        raise AssertionError("no alert")

    assert (first_alert(1.0).mode, first_alert(1.0).severity) == ("convergence", "info")
    cold = first_alert(0.3)
    assert (cold.mode, cold.severity, cold.actions) == ("advantage collapse", "critical", ["rollout.temperature=1.0"])


def test_dynamic_sampling_switched_on_mid_run_trains_short_batches_rather_than_stopping() -> None:
    """dapo's ds_shortfall=error would end a run whose filter cannot fill a batch: switched on by the autopilot, the
    filter first takes ds_shortfall=partial."""
    from grpokit.monitor.detectors.collapse import AdvantageCollapse

    det = AdvantageCollapse({"temperature": 1.0, "dynamic_sampling": False, "ds_shortfall": "error"}, window=3)
    alerts = [det.observe(s, {"zv/acc_frac": 1.0, "zv/all_correct": 0.0, "zv/all_wrong": 1.0}) for s in (1, 2, 3)]
    alerts = [a for a in alerts if a is not None]
    assert alerts[-1].actions == ["algo.ds_shortfall=partial", "algo.group_filter=dynamic_sampling"]
    cfg = build_config("dapo", overrides=["model.name=tiny", "algo.group_filter=all"])
    rows, changes = Autopilot(cfg).react(3, [alerts[-1]], {})
    assert [(c.key, c.value) for c in changes] == [
        ("algo.ds_shortfall", "partial"),
        ("algo.group_filter", "dynamic_sampling"),
    ]


def test_the_relative_entropy_rule_takes_its_baseline_from_training_steps_not_rows() -> None:
    """A log written every 10 steps whose entropy starts under 0.5 (so only the relative rule judges it) and falls to
    0.02 after its first row: the baseline is the first 10 training steps (one row here), so the fall is seen; a
    baseline of 10 rows would have averaged the collapse into itself (0.063, whose tenth 0.02 is not under)."""
    det = EntropyCollapse({})
    fired = []
    for step in range(10, 210, 10):
        a = det.observe(step, {"entropy/token_mean": 0.45 if step == 10 else 0.02, "reward/mean": 0.3})
        fired += [a] if a is not None else []
    # the row at step 20 covers steps 11-20: at step 70, 60 steps below (more than the patience of 50); at 60, 50
    assert fired and fired[0].mode == "entropy collapse" and fired[0].fired_at == 70
    assert fired[0].evidence["initial_entropy"] == 0.45 and fired[0].evidence["threshold"] == 0.045

"""grpokit's diagnosis inside a real TRL `GRPOTrainer` (TRL's own trainer on CPU, a tiny random Llama with the real
SmolLM2 tokenizer): the callback raises an alert while the run trains, stops it on a critical one with a checkpoint
kept, counts its windows in training steps whatever `logging_steps` is, and posts to a webhook on 127.0.0.1."""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from grpokit.integrations.trl import HealthCallback, trl_context  # noqa: E402
from grpokit.monitor.notify import Notifier  # noqa: E402

pytestmark = pytest.mark.slow

PROMPTS = [f"What is {a} + {b}?" for a in range(4) for b in range(4)]


def constant_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Every completion scores 1.0: every group has zero reward variance (advantage collapse by construction)."""
    return [1.0 for _ in completions]


def tiny_trainer(tmp: Path, tokenizer_dir: Path, callback: HealthCallback, **overrides: Any) -> Any:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        tie_word_embeddings=True,
    )
    model_dir = tmp / "tiny-llama"
    LlamaForCausalLM(cfg).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    args = dict(
        output_dir=str(tmp / "out"),
        num_generations=4,
        max_completion_length=6,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=1,
        learning_rate=1e-3,
        beta=0.04,
        logging_steps=1,
        max_steps=8,
        save_strategy="no",
        report_to=["tensorboard"],
        log_completions=True,
        use_cpu=True,
        bf16=False,
        seed=0,
        dataloader_num_workers=0,
    )
    args.update(overrides)
    return GRPOTrainer(
        model=str(model_dir),
        reward_funcs=constant_reward,
        args=GRPOConfig(**args),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tok,
        callbacks=[callback],
    )


def test_callback_alerts_during_training_and_stops_on_critical(tmp_path: Path, embedded_model_dir: Path) -> None:
    """A reward that cannot vary: advantage collapse (critical) fires at step 2 of 8 (window shortened to 2) while
    TRL trains; `stop_on="critical"` ends the run there with a checkpoint, and the alert names TRL's knobs and
    carries completions TRL logged."""
    out = io.StringIO()
    cb = HealthCallback(stop_on="critical", thresholds={"advantage_collapse": {"window": 2}}, out=out)
    trainer = tiny_trainer(tmp_path, embedded_model_dir, cb)
    trainer.train()
    assert cb.context["kl_coef"] == 0.04 and cb.context["num_generations"] == 4 and cb.context["peft"] is False
    assert cb.stopped_at == 2 and trainer.state.global_step == 2
    assert (tmp_path / "out" / "checkpoint-2").is_dir(), "stop_on saves a checkpoint before stopping"
    rows = [json.loads(x) for x in (tmp_path / "out" / "grpokit_alerts.jsonl").read_text().splitlines()]
    collapse = [r for r in rows if r["detector"] == "advantage_collapse"]
    assert collapse and collapse[0]["event"] == "onset" and collapse[0]["severity"] == "critical"
    assert collapse[0]["evidence"]["zero_variance_frac"] == 1.0
    assert "algo.group_filter" in collapse[0]["in_trl"]  # the fix in TRL's terms
    assert collapse[0]["completions"] and "completion" in collapse[0]["completions"][0]
    text = out.getvalue()
    assert "CRITICAL: advantage collapse" in text and "stopping at step 2" in text and "in TRL:" in text
    # the alert reached TRL's tracker (report_to=["tensorboard"]) as a scalar and a text
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags: set[str] = set()
    for d in {p.parent for p in (tmp_path / "out").rglob("events.out.tfevents.*")}:
        acc = EventAccumulator(str(d))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"]) | set(acc.Tags().get("tensors", []))
    assert "grpokit/alerts_active" in tags and any(t.startswith("grpokit/advantage_collapse") for t in tags)


def test_windows_are_training_steps_whatever_logging_steps_is(tmp_path: Path, embedded_model_dir: Path) -> None:
    """Logged every 2 steps, a 4-step window is full after the rows of steps 2 and 4: it fires at step 4."""
    cb = HealthCallback(thresholds={"advantage_collapse": {"window": 4}}, out=io.StringIO())
    trainer = tiny_trainer(tmp_path, embedded_model_dir, cb, logging_steps=2, max_steps=4, log_completions=False)
    trainer.train()
    fired = [a for e, a in cb.events if e == "onset" and a["detector"] == "advantage_collapse"]
    assert fired and fired[0]["fired_at"] == 4 and cb.stopped_at is None and trainer.state.global_step == 4


def test_peft_run_is_offered_beta_not_sync_ref_model() -> None:
    """TRL refuses `sync_ref_model` for a PEFT model: the KL fix names beta / learning_rate there instead."""
    from types import SimpleNamespace

    from grpokit.monitor.doctor.knobs import equivalents

    peft_model = SimpleNamespace(peft_config={"default": object()})
    ctx = trl_context(SimpleNamespace(beta=0.04, epsilon=0.2), peft_model)
    alert = {"fix": "a larger KL coefficient (algo.kl_coef), an EMA reference (algo.reference=ema)", "actions": []}
    lora = equivalents(alert, "trl", ctx)
    assert ctx["peft"] and lora["algo.kl_coef"] == "beta" and "not with PEFT" in lora["algo.reference"]
    assert "sync_ref_model=True" in equivalents(alert, "trl", trl_context(SimpleNamespace(beta=0.04)))["algo.reference"]


# ------------------------------------------------------------------------------------------ notifications


class Hook(BaseHTTPRequestHandler):
    """A webhook on 127.0.0.1 that records each POSTed JSON body; it answers only once `release` is set."""

    bodies: list[dict[str, Any]] = []
    release = threading.Event()
    received = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        type(self).received.set()
        type(self).release.wait(timeout=30)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Any:
    Hook.bodies, Hook.release, Hook.received = [], threading.Event(), threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", Hook
    Hook.release.set()
    server.shutdown()


def test_notifier_posts_onset_escalation_and_clearance_once_without_waiting(webhook: Any) -> None:
    from grpokit.monitor.detectors import Monitor

    url, hook = webhook
    notifier = Notifier(url, run="runs/x")
    mon = Monitor(thresholds={"advantage_collapse": {"window": 2}})
    for step, zv in enumerate([0.6, 0.6, 0.9, 0.9, 0.0, 0.0, 0.0], start=1):
        mon.observe(step, {"zv/frac": zv})
        notifier.update(mon.alerts)  # returns at once although the endpoint has not answered
    assert not hook.release.is_set() and hook.received.wait(10)
    hook.release.set()
    notifier.close()
    events = [b["grpokit"]["event"] for b in hook.bodies]
    assert events == ["onset", "escalated", "cleared"], events
    first = hook.bodies[0]
    assert first["text"] == first["content"] and "advantage collapse" in first["text"] and "fix:" in first["text"]
    assert first["text"].startswith("runs/x: [warning]") and notifier.failures == 0


def test_callback_notifies_a_local_webhook(tmp_path: Path, embedded_model_dir: Path, webhook: Any) -> None:
    url, hook = webhook
    hook.release.set()
    cb = HealthCallback(notify=url, thresholds={"advantage_collapse": {"window": 2}}, out=io.StringIO())
    trainer = tiny_trainer(tmp_path, embedded_model_dir, cb, max_steps=3, log_completions=False)
    trainer.train()
    assert [b["grpokit"]["alert"]["detector"] for b in hook.bodies].count("advantage_collapse") == 1
    assert "CRITICAL" in hook.bodies[0]["text"]


def test_a_dead_endpoint_is_said_once_and_never_raises(capsys: Any) -> None:
    notifier = Notifier("http://127.0.0.1:9/nothing-listens", timeout_s=2)
    notifier.update([{"mode": "m", "detector": "d", "severity": "warning", "message": "x", "fired_at": 1}])
    notifier.update([{"mode": "m2", "detector": "d2", "severity": "warning", "message": "y", "fired_at": 2}])
    notifier.close()
    assert notifier.failures == 2 and capsys.readouterr().err.count("could not post") == 1
    with pytest.raises(ValueError, match="http"):
        Notifier("hooks.slack.com/x")

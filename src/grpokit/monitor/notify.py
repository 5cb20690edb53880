"""Alerts pushed to a person: each alert's onset, escalation and clearance posted once to a webhook.

The payload is one JSON object that both Slack and Discord incoming webhooks accept: Slack reads `text`, Discord
reads `content`; the structured alert rides along under `grpokit` for any other receiver (a custom HTTP endpoint,
a chat bot). Posting happens on a background thread with a timeout, so a slow or dead endpoint never slows
training; a failed post is counted and said once, never raised.

    notifier = Notifier("https://hooks.slack.com/services/...")
    notifier.update(step, monitor.alerts)      # after each observed step: posts what changed, once
    notifier.close()                           # waits (at most `timeout_s`) for posts in flight
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import urllib.request
from dataclasses import dataclass, field
from typing import Any

SEVERITY_MARK = {"critical": "CRITICAL", "warning": "warning", "info": "info"}


def message_of(event: str, alert: dict[str, Any], run: str) -> str:
    """One readable line (plus the fix) for a chat message."""
    sev = SEVERITY_MARK.get(alert.get("severity", ""), alert.get("severity", ""))
    where = f"{run}: " if run else ""
    if event == "cleared":
        return f"{where}{alert['mode']} cleared at step {alert.get('cleared_at')}"
    head = f"{where}[{sev}] {alert['mode']} at step {alert.get('fired_at')}: {alert.get('message', '')}"
    if event == "escalated":
        head = f"{where}[{sev}] {alert['mode']} escalated: {alert.get('message', '')}"
    fix = alert.get("fix")
    return f"{head}\nfix: {fix}" if fix else head


def payload(event: str, alert: dict[str, Any], run: str) -> dict[str, Any]:
    """The JSON body: Slack's `text`, Discord's `content` (2000-character cap), and the alert itself."""
    text = message_of(event, alert, run)
    return {"text": text, "content": text[:2000], "grpokit": {"event": event, "run": run, "alert": alert}}


@dataclass
class Notifier:
    """Posts alert events to `url` once each: `onset` (a new alert), `escalated` (its severity rose), `cleared`."""

    url: str
    run: str = ""
    timeout_s: float = 5.0
    sent: list[dict[str, Any]] = field(default_factory=list)  # bodies handed to the sender, in order
    failures: int = 0
    _seen: dict[tuple[str, Any], tuple[str, int | None]] = field(default_factory=dict)
    _queue: queue.Queue = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None
    _warned: bool = False

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"--notify {self.url!r}: give an http(s) URL (a Slack or Discord incoming webhook)")

    def update(self, alerts: list[Any]) -> int:
        """Queue the events of `alerts` (Alert objects or dicts) not posted yet; returns how many were queued."""
        queued = 0
        for alert in alerts:
            a = alert.to_dict() if hasattr(alert, "to_dict") else dict(alert)
            key = (a.get("detector", a.get("mode", "")), a.get("step", a.get("fired_at")))  # one episode
            state = (a.get("severity", ""), a.get("cleared_at"))
            before = self._seen.get(key)
            if before == state:
                continue
            if before is None:
                event = "cleared" if a.get("cleared_at") is not None else "onset"
            elif state[1] is not None:
                event = "cleared"
            elif before[1] is not None:
                event = "onset"  # the same episode came back after it cleared
            else:
                event = "escalated"
            self._seen[key] = state
            self._post(payload(event, a, self.run))
            queued += 1
        return queued

    def _post(self, body: dict[str, Any]) -> None:
        self.sent.append(body)
        if self._thread is None:
            self._thread = threading.Thread(target=self._worker, name="grpokit-notify", daemon=True)
            self._thread.start()
        self._queue.put(body)

    def _worker(self) -> None:
        while True:
            body = self._queue.get()
            if body is None:
                return
            try:
                req = urllib.request.Request(
                    self.url,
                    data=json.dumps(body, default=str).encode(),
                    headers={"Content-Type": "application/json", "User-Agent": "grpokit"},
                    method="POST",
                )
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 (the user's URL)
                    resp.read()
            except Exception as e:  # noqa: BLE001 - a notification must never stop training
                self.failures += 1
                if not self._warned:
                    self._warned = True
                    print(
                        f"grpokit: could not post an alert to {self.url} ({e}); later failures are counted silently",
                        file=sys.stderr,
                    )

    def close(self) -> None:
        """Wait for queued posts (each bounded by `timeout_s`); never blocks longer than the queue needs."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=self.timeout_s * (self._queue.qsize() + 1))
            self._thread = None

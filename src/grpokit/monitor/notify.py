"""Alerts pushed to a person: each alert's onset, escalation and clearance posted once to a webhook.

The payload is one JSON object that both Slack and Discord incoming webhooks accept: Slack reads `text`, Discord
reads `content`; the structured alert rides along under `grpokit` for any other receiver (a custom HTTP endpoint,
a chat bot). Its text passes through `common.safe_text`: alert messages carry metric names and paths from the log.

A dead endpoint never slows anything: posts go out on a background thread, each bounded by `timeout_s` (3 s), at
most `QUEUE_MAX` wait their turn, and `close()` waits at most `close_wait_s` (2 s) for all of them together, then
drops the rest and says how many in one line. A failed post is counted and said once, never raised. The webhook URL
is a credential (a Slack or Discord webhook URL is all it takes to post to the channel): it is never printed, only
its host.

    notifier = Notifier("https://hooks.slack.com/services/...")
    notifier.update(step, monitor.alerts)      # after each observed step: posts what changed, once
    notifier.close()                           # waits at most `close_wait_s` for the posts not sent yet
"""

from __future__ import annotations

import json
import queue
import socket
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..common.safe_text import safe_text

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


TEXT_CHARS = 4000  # Slack's `text`, cut past this (Slack shows about 4,000 characters of a message)
CONTENT_CHARS = 2000  # Discord's `content` cap


def _safe(value: Any) -> Any:
    """Every string in `value` (a dict's keys too, in lists and dicts) made safe to show (`common.safe_text`)."""
    if isinstance(value, str):
        return safe_text(value, limit=CONTENT_CHARS, multiline=True)
    if isinstance(value, dict):
        return {_safe(k): _safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(v) for v in value]
    return value


def payload(event: str, alert: dict[str, Any], run: str) -> dict[str, Any]:
    """The JSON body: Slack's `text`, Discord's `content` (2000-character cap), and the alert itself; no control
    character in any of them."""
    text = safe_text(message_of(event, alert, run), limit=TEXT_CHARS, multiline=True)
    content = safe_text(text, limit=CONTENT_CHARS, multiline=True)
    return {"text": text, "content": content, "grpokit": _safe({"event": event, "run": run, "alert": alert})}


def host_of(url: str) -> str:
    """The host (and port) of `url`, the one part of a webhook URL that is safe to print."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        return safe_text(f"{host}:{parts.port}" if parts.port else host, limit=200)
    except ValueError:  # a port that is not a number
        return "?"


def _reason(e: BaseException, timeout_s: float) -> str:
    """Why a post failed, in words that never hold the URL."""
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code}"
    cause = e.reason if isinstance(e, urllib.error.URLError) else e
    if isinstance(cause, TimeoutError | socket.timeout):
        return f"no answer within {timeout_s:g} s"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return type(cause).__name__


POST_TIMEOUT_S = 3.0  # one post: connecting, sending and reading the answer
CLOSE_WAIT_S = 2.0  # at close, for every post not sent yet, together
QUEUE_MAX = 100  # posts waiting their turn; more are dropped (and counted)


@dataclass
class Notifier:
    """Posts alert events to `url` once each: `onset` (a new alert), `escalated` (its severity rose), `cleared`.

    `failures`: posts that failed; `dropped`: posts never sent (the queue was full, or `close` gave up on them)."""

    url: str
    run: str = ""
    timeout_s: float = POST_TIMEOUT_S
    close_wait_s: float = CLOSE_WAIT_S
    sent: list[dict[str, Any]] = field(default_factory=list)  # bodies handed to the sender, in order
    failures: int = 0
    dropped: int = 0
    _seen: dict[tuple[str, Any], tuple[str, int | None]] = field(default_factory=dict)
    _queue: queue.Queue = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None
    _closing: threading.Event = field(default_factory=threading.Event)
    _given_up: threading.Event = field(default_factory=threading.Event)  # `close` stopped waiting for the thread
    _warned: bool = False

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):  # the value is not echoed: it may be a token
            raise ValueError("--notify: give an http(s) URL (a Slack or Discord incoming webhook), starting http(s)://")

    @property
    def host(self) -> str:
        """The webhook's host: what messages name instead of the URL."""
        return host_of(self.url)

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
        if self._closing.is_set() or self._queue.qsize() >= QUEUE_MAX:
            self.dropped += 1
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._worker, name="grpokit-notify", daemon=True)
            self._thread.start()
        self._queue.put(body)

    def _send(self, body: dict[str, Any]) -> None:
        req = urllib.request.Request(
            self.url,
            data=json.dumps(body, default=str).encode(),
            headers={"Content-Type": "application/json", "User-Agent": "grpokit"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 (the user's URL)
            resp.read()

    def _worker(self) -> None:
        while True:
            body = self._queue.get()
            if body is None:
                return
            try:
                self._send(body)
            except Exception as e:  # noqa: BLE001 - a notification must never stop training
                if self._given_up.is_set():
                    return  # `close` already counted this post as not sent and said so
                self.failures += 1
                if not self._warned:
                    self._warned = True
                    print(
                        f"grpokit: could not post an alert to {self.host} ({_reason(e, self.timeout_s)}); "
                        "later failures are counted silently",
                        file=sys.stderr,
                    )

    def close(self) -> None:
        """Wait at most `close_wait_s`, all posts together, for the posts not sent yet; drop (and count) the rest."""
        if self._thread is None:
            return
        self._closing.set()
        self._queue.put(None)
        self._thread.join(timeout=self.close_wait_s)
        left = 0
        if self._thread.is_alive():  # a post still waits for its answer: the thread (a daemon) is abandoned
            self._given_up.set()
            left = 1
            while True:
                try:
                    left += self._queue.get_nowait() is not None
                except queue.Empty:
                    break
            self._queue.put(None)  # the thread ends after its post, should it ever come back
        self._thread = None
        self.dropped += left
        if self.dropped:
            print(
                f"grpokit: {self.dropped} alert notification(s) to {self.host} not sent "
                f"(it did not answer within {self.close_wait_s:g} s at exit, or too many were waiting)",
                file=sys.stderr,
            )

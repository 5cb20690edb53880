"""`--notify` to a webhook that accepts connections and never answers: `grpokit watch` still ends within a bounded
time (posts off the main thread, each with a short timeout; at exit at most `close_wait_s` for all of them), and a
failed post names the host only, never the URL (a Slack or Discord webhook URL is a credential). Issue 38 and 40.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from grpokit.monitor.notify import Notifier, host_of

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
SECRET = "T0AAAAAAA/B0BBBBBBB/s3cr3tW3bh00kT0k3n"  # the part of a webhook URL that lets anyone post


@contextmanager
def silent_listener(lifetime_s: float = 60.0) -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts every connection and never answers; it stops by itself after
    `lifetime_s` (or when the block ends), closing what it accepted."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        held, end = [], time.monotonic() + lifetime_s
        while not stop.is_set() and time.monotonic() < end:
            try:
                held.append(srv.accept()[0])  # kept open, never read, never answered
            except TimeoutError:
                pass
        for conn in held:
            conn.close()
        srv.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)


def _alert(i: int) -> dict[str, Any]:
    return {"mode": f"m{i}", "detector": f"d{i}", "severity": "warning", "message": "x", "fired_at": i}


def test_close_waits_a_bounded_total_for_posts_to_a_silent_endpoint_and_counts_the_dropped(capsys: Any) -> None:
    with silent_listener() as port:
        notifier = Notifier(f"http://127.0.0.1:{port}/services/{SECRET}", timeout_s=3.0, close_wait_s=1.0)
        t0 = time.monotonic()
        assert notifier.update([_alert(i) for i in range(10)]) == 10
        assert time.monotonic() - t0 < 0.5  # queued, not posted, on the caller's thread
        t1 = time.monotonic()
        notifier.close()
        waited = time.monotonic() - t1
    assert waited < 1.8, f"close waited {waited:.1f} s for 10 posts (1 s in all is the bound, not 1 s per post)"
    assert notifier.dropped == 10 and len(notifier.sent) == 10
    err = capsys.readouterr().err
    assert "10 alert notification(s) to 127.0.0.1:" in err and "not sent" in err
    assert SECRET not in err and "/services" not in err


def test_a_failed_post_names_the_host_never_the_url(capsys: Any) -> None:
    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        notifier = Notifier(f"http://127.0.0.1:{port}/services/{SECRET}?token={SECRET}")
        notifier.update([_alert(1), _alert(2)])
        notifier.close()
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert notifier.failures == 2 and err.count("could not post") == 1
    assert f"could not post an alert to 127.0.0.1:{port} (HTTP 404)" in err
    assert SECRET not in err and "services" not in err


def test_a_bad_notify_value_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError, match="http") as e:
        Notifier(f"hooks.slack.com/services/{SECRET}")
    assert SECRET not in str(e.value)
    assert host_of("https://hooks.slack.com/services/x") == "hooks.slack.com"
    assert host_of("http://127.0.0.1:8080/x") == "127.0.0.1:8080"
    assert host_of("https://user:pa55@example.com/hook") == "example.com"  # no password either


@pytest.mark.slow
def test_watch_with_a_webhook_that_never_answers_exits_in_bounded_time(tmp_path: Path) -> None:
    log = tmp_path / "verl_run.jsonl"
    rows = []
    for step in range(1, 9):  # verl's JSONL file logger; an infinite gradient norm at step 4: a critical alert
        data = {"actor/entropy": 1.2, "critic/score/mean": 0.4, "actor/pg_loss": -0.01, "response_length/mean": 40.0}
        data["actor/grad_norm"] = float("inf") if step == 4 else 0.8
        rows.append(json.dumps({"step": step, "data": data}))
    log.write_text("\n".join(rows) + "\n")
    cmd = [sys.executable, "-m", "grpokit.cli", "watch", str(log), "--interval", "0.2", "--idle-exit", "1"]

    def timed(*extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
        t0 = time.monotonic()
        done = subprocess.run([*cmd, *extra], capture_output=True, text=True, env=ENV, timeout=120)
        return done, time.monotonic() - t0

    _, alone = timed()  # start-up, reading and the 1 s idle on this machine, without a webhook
    with silent_listener() as port:
        done, took = timed("--notify", f"http://127.0.0.1:{port}/services/{SECRET}")
    assert done.returncode == 1, done.stdout + done.stderr  # the critical alert was seen
    assert "CRITICAL" in done.stdout
    # at most 2 s more for the webhook, all posts together (it was 5 s per queued post, and a hang without bound)
    assert took - alone < 4.0, f"watch took {took:.1f} s with the silent webhook, {alone:.1f} s without"
    assert "not sent" in done.stderr and f"127.0.0.1:{port}" in done.stderr
    assert SECRET not in done.stderr + done.stdout and "/services" not in done.stderr

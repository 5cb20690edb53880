"""`grpokit watch` on the trackers' own stores as a run writes them (issue 47 item 1): a W&B offline run's `.wandb`
file and a trackio database, each written by the tracker's real client in a child process that logs half its rows,
waits for the watch to have read them, then logs the rest; the watch feeds the new rows and alerts on the failing
one. The `.wandb` file is watched from before its first history record (wandb writes it lazily)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grpokit.monitor.watch import Watcher

pytestmark = pytest.mark.slow

ROWS = """
def row(s):
    return {"train/reward": 0.4 + 0.01 * s, "train/reward_std": 0.3, "train/loss": 0.01, "train/entropy": 0.5,
            "train/grad_norm": float("nan") if s == 15 else 1.0, "train/global_step": s}
"""

WRITERS = {
    "wandb": """
import wandb
run = wandb.init(mode="offline", dir=".", project="grpo", name="live")
log, finish = wandb.log, run.finish
""",
    "trackio": """
import trackio
trackio.init(project="grpo", name="live")
log, finish = trackio.log, trackio.finish
""",
}

REST = """
import time
from pathlib import Path
for s in range(1, 11):
    log(row(s))
Path("half").touch()
deadline = time.time() + 120
while not Path("go").exists() and time.time() < deadline:
    time.sleep(0.1)
for s in range(11, 21):
    log(row(s))
finish()
Path("done").touch()
"""


def _store(tmp: Path, tracker: str) -> Path | None:
    if tracker == "trackio":
        found = sorted((tmp / "trackio").glob("*.db"))
    else:
        found = sorted((tmp / "wandb").rglob("*.wandb"))
    return found[0] if found else None


@pytest.mark.parametrize("tracker", sorted(WRITERS))
def test_watch_follows_a_trackers_store_as_rows_arrive(tmp_path: Path, tracker: str) -> None:
    pytest.importorskip(tracker)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "TRACKIO_DIR": str(tmp_path / "trackio")}
    script = textwrap.dedent(ROWS) + textwrap.dedent(WRITERS[tracker]) + textwrap.dedent(REST)
    err = (tmp_path / "stderr").open("wb")
    writer = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env, stderr=err)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and writer.poll() is None:
            if (tmp_path / "half").exists() and (store := _store(tmp_path, tracker)) is not None:
                break  # trackio creates its database with its first flush
            time.sleep(0.1)
        store = _store(tmp_path, tracker)
        assert store is not None, (tmp_path / "stderr").read_text()[-3000:]
        out = io.StringIO()
        w = Watcher(store, out=out)
        w.poll()
        first = w.last_step  # what the store held (a .wandb file may not hold its first rows yet)
        assert first <= 10 and "numerical trouble" not in out.getvalue()
        (tmp_path / "go").touch()
        while not (tmp_path / "done").exists() and time.time() < deadline:
            w.poll()
            time.sleep(0.2)
        assert writer.wait(60) == 0
        w.poll(final=True)
        w.close()
    finally:
        if writer.poll() is None:
            writer.kill()
        err.close()
    assert w.last_step == 20 and w.log is not None
    assert "[CRITICAL] numerical trouble at step 15" in out.getvalue() and w.critical_seen

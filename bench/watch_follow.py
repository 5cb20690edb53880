"""`grpokit watch` following a long verl console log while a writer appends to it (issue 40): seconds from a failing
row's write to its alert line, and the watch process's peak memory.

In a temporary directory: a verl console log of `--lines` healthy steps (10^6 by default: 160 MB), the config verl
prints at start first. `grpokit watch LOG` starts on it (a subprocess, default `--interval 2`). Once it has read the
existing log (its CPU time stops growing after it has read the file's size; the new code also says so), a writer
appends one row every `--every` seconds (0.5): healthy rows, with a NaN gradient norm (critical), a gradient-norm
spike (warning) and, as the very last row, another NaN gradient norm among them. Each alert line of watch's output
(`[...] <mode> at step N`) is matched to the time step N was written: that difference is the latency. Peak RSS is
the watch process's own (`ru_maxrss` from `wait4`); RSS is also sampled once the existing log is read and at the
end. The peak RSS of the watch's process tree (the watch and the background pass that reads the old rows, sampled
every 0.2 s) is given too. The last appended row fails, so its latency is also how long after the writer stopped the
last alert came. The watch's verdicts on the old rows (printed "before the watch began") are counted.

    .venv/bin/python bench/watch_follow.py                       # this tree's grpokit watch, 10^6 lines
    .venv/bin/python bench/watch_follow.py --old HEAD~3          # and the same on an older commit's src/ (git archive)
    .venv/bin/python bench/watch_follow.py --lines 100000        # a shorter log
    .venv/bin/python bench/watch_follow.py --every 5 --appended 20   # rows seconds apart, as a real run writes them
    .venv/bin/python bench/watch_follow.py --format jsonl --append-after 15 --old HEAD~1   # issue 47's start-up case

Run it alone (`flock /tmp/torch.lock ...` on a shared machine): a busy CPU lengthens every number.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFIG = (
    "(TaskRunner pid=7) {'actor_rollout_ref': {'actor': {'ppo_mini_batch_size': 32, 'ppo_epochs': 1, "
    "'clip_ratio_low': 0.2, 'clip_ratio_high': 0.28, 'entropy_coeff': 0}}, 'data': {'train_batch_size': 128}, "
    "'algorithm': {'adv_estimator': 'grpo'}}\n"
)
ALERT = re.compile(r"\[(CRITICAL|warning|info)\] (.+?) at step (\d+):")


def row(step: int, grad: str = "") -> str:
    """One verl console line (about 160 bytes, as the issue's log); healthy unless `grad` says otherwise."""
    g = grad or f"{0.5 + 0.01 * (step % 7):.4f}"
    return (
        f"(TaskRunner pid=7) step:{step} - actor/entropy:{1.1 + 0.001 * (step % 13):.4f} - actor/grad_norm:{g} - "
        f"actor/pg_loss:-0.0100 - critic/score/mean:{0.4 + 0.001 * (step % 11):.4f} - "
        f"response_length/mean:{300 + step % 17:.1f} - actor/ppo_kl:0.0010\n"
    )


def jsonl_row(step: int, grad: str = "") -> str:
    """One line of verl's JSONL file logger (about 230 bytes), the values of `row`."""
    g = grad or f"{0.5 + 0.01 * (step % 7):.4f}"
    return (
        f'{{"step": {step}, "data": {{"actor/entropy": {1.1 + 0.001 * (step % 13):.4f}, "actor/grad_norm": '
        f'{"NaN" if g == "nan" else g}, "actor/pg_loss": -0.01, "critic/score/mean": {0.4 + 0.001 * (step % 11):.4f}, '
        f'"response_length/mean": {300 + step % 17:.1f}, "actor/ppo_kl": 0.001, "timing_s/gen": 9.5, '
        f'"timing_s/update_actor": 4.2, "timing_s/step": 15.1}}}}\n'
    )


FORMATS = {"console": (row, CONFIG, "train.log"), "jsonl": (jsonl_row, "", "verl_run.jsonl")}


def write_log(path: Path, lines: int, fmt: str = "console") -> None:
    line, head, _ = FORMATS[fmt]
    with path.open("w") as f:
        f.write(head)
        for start in range(1, lines + 1, 10_000):
            f.write("".join(line(s) for s in range(start, min(start + 10_000, lines + 1))))


def failing(n: int) -> dict[int, str]:
    """The appended rows that fail (index in the appended rows -> grad norm); the others are healthy. Each comes
    more than the numerical detector's 10-step cooldown after the one before has cleared (or it is not a new alert):
    the spike only when there are 34 rows or more."""
    if n < 20:
        raise SystemExit("--appended: at least 20 rows")
    return {8: "nan", n: "nan"} | ({22: "50.0"} if n >= 34 else {})


def _proc(pid: int, key: str) -> int:
    """A kB field of /proc/<pid>/status (0 once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree_rss(pid: int) -> int:
    """kB of RSS of a process and its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _proc(p, "VmRSS")
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return total


def _cpu_and_read(pid: int) -> tuple[int, int]:
    """(user + system clock ticks, bytes read) of a process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rchar = next(
            int(x.split()[1]) for x in Path(f"/proc/{pid}/io").read_text().splitlines() if x.startswith("rchar")
        )
        return int(fields[11]) + int(fields[12]), rchar
    except (OSError, StopIteration, IndexError, ValueError):
        return 0, 0


class Child:
    """A subprocess reaped with `wait4`, which gives its own resource usage (peak RSS)."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.pid, self.status, self.usage = self.p.pid, None, None

    def done(self, block: bool = False) -> bool:
        if self.status is None:
            pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
            if pid:
                self.status, self.usage = os.waitstatus_to_exitcode(status), usage
                self.p.returncode = self.status  # reaped here: Popen must not wait for it again
        return self.status is not None


def run(src: Path, label: str, log: Path, args: argparse.Namespace) -> dict:
    appended, every, interval, limit = args.appended, args.every, args.interval, args.limit
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    t0 = time.monotonic()
    idle = 10 + (args.append_after or 0)  # the watch must not end before the first row is appended
    cmd = [sys.executable, "-m", "grpokit.cli", "watch", str(log), "--interval", str(interval), "--idle-exit"]
    cmd.append(str(idle))
    child = Child(cmd, env)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert child.p.stdout is not None
        for line in child.p.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    peak_tree = [0]

    def sample() -> None:
        while not child.done():
            peak_tree[0] = max(peak_tree[0], _tree_rss(child.pid))
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()

    # the existing log is read when the watch says so, or has read its size and its CPU time stops growing
    size, last_cpu, still_since = log.stat().st_size, -1, None
    while not child.done() and time.monotonic() - t0 < limit:
        if args.append_after is not None:
            time.sleep(max(0.0, args.append_after - (time.monotonic() - t0)))
            break
        if any("following new rows" in text for _, text in lines):
            still_since = time.monotonic()
            break
        cpu, rchar = _cpu_and_read(child.pid)
        now = time.monotonic()
        if rchar >= size and cpu == last_cpu:
            still_since = still_since or now
            if now - still_since >= 1.0:
                break
        else:
            still_since = None
        last_cpu = cpu
        time.sleep(0.1)
    caught_up = (still_since or time.monotonic()) - t0
    said = [t for t, text in lines if "following new rows" in text]
    caught_up = said[0] - t0 if said else caught_up  # as the watch says it
    rss_caught_up = _proc(child.pid, "VmRSS")

    written: dict[int, float] = {}
    fails = failing(appended)
    first = 1 + int(re.findall(r'(?:"step": |step:)(\d+)', log.read_bytes()[-400:].decode())[-1])
    line = FORMATS[args.format][0]
    for i in range(1, appended + 1):
        step = first + i - 1
        with log.open("a") as f:
            f.write(line(step, fails.get(i, "")))
        written[step] = time.monotonic()
        time.sleep(every)
    rss_end = 0
    while not child.done() and time.monotonic() - t0 < limit:
        rss_end = _proc(child.pid, "VmRSS") or rss_end
        time.sleep(0.2)
    killed = not child.done()
    if killed:
        child.p.kill()
        child.done(block=True)
    reader.join(10)

    alerts = []
    for t, line in lines:
        m = ALERT.search(line)
        if m and int(m.group(3)) in written:
            alerts.append((int(m.group(3)), m.group(2), t - written[int(m.group(3))]))
    missed = [first + i - 1 for i in fails if not any(a[0] == first + i - 1 for a in alerts)]
    old = [text for _, text in lines if "before the watch began: [" in text]
    for text in old[:3]:
        print(f"  {label}: {text.strip()}")
    return {
        "old_verdicts": len(old),
        "peak_tree_mib": peak_tree[0] / 1024,
        "label": label,
        "caught_up": caught_up,
        "alerts": alerts,
        "missed": missed,
        "peak_mib": child.usage.ru_maxrss / 1024 if child.usage else float("nan"),
        "rss_caught_up_mib": rss_caught_up / 1024,
        "rss_end_mib": rss_end / 1024,
        "status": child.status,
        "killed": killed,
    }


def old_src(ref: str, into: Path) -> Path:
    """`src/` of an older commit, by `git archive` (the working tree is not touched)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000, help="healthy steps in the log before the watch starts")
    ap.add_argument("--appended", type=int, default=40, help="rows appended while watching, >= 20 (the last fails)")
    ap.add_argument("--every", type=float, default=0.5, help="seconds between appended rows")
    ap.add_argument("--interval", type=float, default=2.0, help="grpokit watch --interval")
    ap.add_argument("--old", default=None, metavar="REF", help="also run the watch of this commit (git archive)")
    ap.add_argument("--limit", type=float, default=600, help="seconds one watch may run before it is killed")
    ap.add_argument("--format", choices=sorted(FORMATS), default="console", help="the log: verl console or JSONL")
    ap.add_argument(
        "--append-after", type=float, default=None, metavar="S", help="append S s after the watch started (issue 47)"
    )
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="watch_follow_") as tmp:
        tmpd = Path(tmp)
        runs = [("this tree", ROOT / "src")]
        if args.old:
            (tmpd / "old").mkdir()
            runs.append((f"old ({args.old})", old_src(args.old, tmpd / "old")))
        results = []
        for label, src in runs:
            log = tmpd / FORMATS[args.format][2]
            t = time.monotonic()
            write_log(log, args.lines, args.format)
            mb = log.stat().st_size / 1e6
            took = time.monotonic() - t
            print(f"{label}: a {args.lines:,}-line verl {args.format} log ({mb:.0f} MB) in {took:.1f} s")
            r = run(src, label, log, args)
            results.append(r)
            for step, mode, lat in r["alerts"]:
                print(f"  step {step}: {mode} alert {lat:.1f} s after the row was written")
            if r["missed"]:
                print(f"  no alert for steps {r['missed']}")
            log.unlink()

    cpu = platform.processor() or platform.machine()
    start = "once the log was read" if args.append_after is None else f"from {args.append_after:g} s after the start"
    print(
        f"\n{args.lines:,} lines ({args.format}), {args.appended} rows appended every {args.every} s {start}, "
        f"--interval {args.interval}; "
        f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}\n"
    )
    print(
        "| code | existing log read (s) | alert latency, s: max (each failing row) | peak RSS (MiB) "
        "| RSS read up / at end (MiB) | peak RSS, watch + background (MiB) | verdicts on old rows | missed alerts "
        "| exit |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        lats = [lat for _, _, lat in r["alerts"]]
        lat = f"{max(lats):.1f} ({', '.join(f'{x:.1f}' for x in lats)})" if lats else "none"
        killed = " (killed at --limit)" if r["killed"] else ""
        print(
            f"| {r['label']}{killed} | {r['caught_up']:.0f} | {lat} | {r['peak_mib']:.0f} | "
            f"{r['rss_caught_up_mib']:.0f} / {r['rss_end_mib']:.0f} | {r['peak_tree_mib']:.0f} | {r['old_verdicts']} | "
            f"{len(r['missed'])} | {r['status']} |"
        )


if __name__ == "__main__":
    main()

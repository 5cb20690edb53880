"""The reward sandbox in one line: which protections are active and which the kernel refused, with the reason.

Every run that executes user code (a reward or tool in the worker) prints this line at start and records it, with
the mechanism of each limit, in run.json (`grpokit.training.loop.run_info`). Its parts come from the worker's own
report (`sandbox.apply_sandbox`, `sandbox.confine_files`), so it says what holds, not what was asked for.
"""

from __future__ import annotations

# the worker's report keys, in the order and with the names the line gives them
PARTS = (
    ("filesystem", "files"),
    ("reading", "reads"),
    ("network", "network"),
    ("memory", "memory"),
    ("processes", "processes"),
    ("process tree", "process tree"),
    ("user", "privileges"),
    ("unix sockets", "unix sockets"),
    ("signals", "signals"),
    ("keyrings", "keyrings"),
    ("environment", "environment"),
    ("directory", "directory"),
)


def sandbox_line(enforced: dict[str, str]) -> str:
    """`reward sandbox: files landlock; reads ...; ...; unavailable: memory cgroup (not root)` for a worker's
    report; an empty report (no sandbox) says that the worker runs unconfined."""
    if not enforced:
        return "reward sandbox: none (sandbox=None): reward and tool code runs unconfined, with only a timeout"
    active = "; ".join(f"{name} {enforced[key]}" for key, name in PARTS if key in enforced)
    unavailable = enforced.get("unavailable") or "none"
    return f"reward sandbox: {active}; unavailable: {unavailable}"

"""The trainer's handle on one reward worker: start it as a fresh interpreter in its own private directory (the
allow-listed environment, a new session, the `Boot` message over its pipe), read how it ended, kill its whole
process group; the table's functions pickled for it; and the sweep of private directories left by trainers that
were killed. The worker's own side (its loop, its sandbox) is `worker.py`; the pool of runners is `isolation.py`.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

from ..common.foreign_output import ForeignOutput, drain
from . import cgroups
from .env_vars import worker_environment
from .sandbox import SandboxLimits
from .worker import WORKDIR_PREFIX, Boot, Table, WorkerSpec, describe_exception

output_log = logging.getLogger("grpokit.rewards.worker")  # what a worker prints: escaped, cut, said once

# The worker interpreter's first lines: its end of the pipe is argv[1]; the trainer's sys.path comes first,
# so that grpokit and the reward modules import as in the trainer.
BOOT = (
    "import pickle, sys\n"
    "sys.stdout.reconfigure(line_buffering=True)\n"  # its lines reach the trainer as printed (it ends by os._exit)
    "from multiprocessing.connection import Connection\n"
    "conn = Connection(int(sys.argv[1]))\n"
    "sys.path[:] = pickle.loads(conn.recv_bytes())\n"
    "from grpokit.rewards.worker import boot\n"
    "boot(conn)\n"
)


def absolute_sys_path(cwd: str) -> list[str]:
    """The trainer's `sys.path` with relative entries ("" is the working directory) made absolute."""
    return [os.path.join(cwd, p) for p in sys.path]


class Worker:
    """One worker process (a fresh interpreter), the parent's end of its pipe and its private directory."""

    def __init__(
        self, table: dict[str, Any], limits: SandboxLimits | None, cpu_s: float, files: tuple[str, ...] = ()
    ) -> None:
        # the trainer's pid in the name lets a later trainer remove it if this one is killed (see sweep_workdirs)
        self.workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
        self.enforced: dict[str, str] | None = None
        self.loaded: dict[str, dict[str, str]] | None = None  # each spec's report or error, once reported
        cwd = os.getcwd()
        if limits is not None:
            env = worker_environment(os.environ, limits.env, self.workdir)
            dropped = sum(1 for k in os.environ if k not in env)
            extra = f", plus {', '.join(limits.env)}" if limits.env else ""
            report = f"allow-list (grpokit.rewards.env_vars{extra}), a fresh interpreter: {dropped} dropped"
        else:
            env, report = dict(os.environ), "the trainer's (no sandbox)"
        mine, there = socket.socketpair()
        self.conn = Connection(mine.detach())
        # its stdout and stderr are one pipe of its own: what the reward and its libraries print reaches the
        # trainer's log escaped, cut and deduplicated (`common.foreign_output`), never the terminal raw
        out_r, out_w = os.pipe()
        # a new session: its own process group (killed whole on timeout), no Ctrl-C from the terminal
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", BOOT, str(there.fileno())],
                pass_fds=(there.fileno(),),
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=out_w,
                start_new_session=True,
            )
        except BaseException:
            os.close(out_r)
            raise
        finally:
            os.close(out_w)
        there.close()
        self.output = drain(out_r, ForeignOutput(self._said), self._said_summary)
        self.conn.send_bytes(pickle.dumps(absolute_sys_path(cwd)))
        self.conn.send_bytes(pickle.dumps(Boot(table, limits, cpu_s, self.workdir, os.getpid(), cwd, report, files)))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _said(self, line: str) -> None:
        """One line the worker printed (already escaped and cut), into the trainer's log."""
        output_log.warning("reward worker (pid %d) printed: %s", self.proc.pid, line)

    def _said_summary(self, summary: str) -> None:
        if summary:
            output_log.warning("reward worker (pid %d): %s", self.proc.pid, summary)

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def exitcode(self) -> int | None:
        """Its exit code once it ended, negative for the signal that killed it (as `Popen.returncode`)."""
        return self.proc.poll()

    def join(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        """Kill the worker's process group (it and whatever the reward started), reap it, remove its dir."""
        self.conn.close()
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        self.join(timeout=5)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # children the reward left behind in the group
        except OSError:
            pass
        self.output.join(timeout=1)  # its last lines and the count of what was held back, before it is gone
        shutil.rmtree(self.workdir, ignore_errors=True)
        cgroups.remove(os.path.basename(self.workdir))

    def close(self) -> None:
        """Close the pipe so an idle worker exits by itself; kill it if it does not within 0.5 s."""
        self.conn.close()
        self.join(timeout=0.5)
        self.kill()


def pickle_table(table: Table) -> dict[str, Any]:
    """`table` for a `Boot` message: each function cloudpickled (ValueError naming the reward when it cannot
    be), specs as they are."""
    import cloudpickle

    out: dict[str, Any] = {}
    for key, entry in table.items():
        if isinstance(entry, (str, WorkerSpec)):
            out[key] = entry
            continue
        try:
            out[key] = cloudpickle.dumps(entry)
        except Exception as e:
            raise ValueError(
                f"reward {key!r} cannot be sent to the reward worker ({describe_exception(e)}): a function given "
                "in Python must be picklable by cloudpickle (no open files, locks or sockets in what it refers to); "
                "or name it as 'module:function'"
            ) from e
    return out


def function_files(table: Table) -> list[str]:
    """The source files of the modules that the functions of `table` come from (read by the worker to import
    them): they are granted under read="limited" (`readable.module_grants`)."""
    files = []
    for entry in table.values():
        if isinstance(entry, (str, WorkerSpec)):
            continue
        target = getattr(entry, "fn", entry)  # an adapted reward keeps the user's function as .fn
        module = sys.modules.get(getattr(target, "__module__", None) or type(target).__module__)
        path = getattr(module, "__file__", None)
        if path and getattr(module, "__name__", "") != "__main__":
            files.append(os.path.abspath(path))
    return files


def sweep_workdirs(older_than_s: float = 60.0) -> int:
    """Remove private directories of workers whose trainer is gone (killed before it could clean up).

    Only directories named after a trainer pid that no longer exists are touched: a live trainer's worker may
    have its private tmpfs mounted on its directory, and removing that would detach it.
    """
    removed = 0
    base = tempfile.gettempdir()
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(WORKDIR_PREFIX) and e.is_dir()]
    except OSError:
        return 0
    for entry in entries:
        owner = entry.name[len(WORKDIR_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # that trainer is alive
        except ProcessLookupError:
            pass
        except OSError:  # alive but not ours to signal
            continue
        try:
            if time.time() - entry.stat().st_mtime > older_than_s:
                shutil.rmtree(entry.path)
                removed += 1
        except OSError:
            continue
    return removed

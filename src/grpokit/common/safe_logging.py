"""Log records made safe before any handler writes them: grpokit's and every library's (math_verify, sympy,
transformers, vLLM).

A record's message can quote text grpokit did not write: a reward's exception, a log's field, the 2,000,000-digit
answer math_verify's parser gave up on. `SafeRecords`, a filter on every handler, rewrites each record once:

- its message (with the formatted exception and stack, if any) escaped and cut by `safe_text` (`limit`
  characters, lines kept);
- a record already passed on (same logger, level and text) is counted and dropped: `repeats` holds the counts and
  `summary()` says them in one line.

`install()` puts one `SafeRecords` on logging's last-resort handler, on every handler that exists, and, through
the record factory, on each handler a library adds later (transformers and vLLM add their own when first imported)
the first time a record passes it. Handlers keep their formats; only what they print is made safe.
"""

from __future__ import annotations

import logging
import traceback

from .safe_text import safe_text

__all__ = ["SafeRecords", "install", "uninstall"]

LIMIT = 20_000  # characters of one record: an error message with its traceback, not a 20 MB text
SEEN_MAX = 10_000  # distinct records remembered for deduplication; older ones are then forgotten in bulk


class SafeRecords(logging.Filter):
    """Escape and cut each record's text once; drop a record that repeats one already shown (module docstring)."""

    def __init__(self, limit: int = LIMIT) -> None:
        super().__init__()
        self.limit = limit
        self.repeats: dict[tuple[str, int, str], int] = {}  # (logger, level, text) -> repeats dropped

    def filter(self, record: logging.LogRecord) -> bool:
        shown = getattr(record, "grpokit_shown", None)
        if shown is not None:  # a record that reaches several handlers is judged once
            return shown
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.stack_info:
            text += "\n" + record.stack_info
        record.msg, record.args = safe_text(text, limit=self.limit, multiline=True), None
        record.exc_info = record.exc_text = record.stack_info = None
        key = (record.name, record.levelno, record.msg)
        shown = key not in self.repeats
        if len(self.repeats) >= SEEN_MAX and shown:
            self.repeats = {k: n for k, n in self.repeats.items() if n}
        self.repeats[key] = self.repeats.get(key, -1) + 1
        record.grpokit_shown = shown
        return shown

    def summary(self) -> str:
        """The records dropped as repeats, in one line ("" when none were)."""
        dropped = {k: n for k, n in self.repeats.items() if n}
        if not dropped:
            return ""
        total = sum(dropped.values())
        return f"{total:,} repeat(s) of {len(dropped)} log record(s) already shown were not shown again"


_FILTER = SafeRecords()


def _guard(handler: logging.Handler) -> None:
    if not any(isinstance(f, SafeRecords) for f in handler.filters):
        handler.addFilter(_FILTER)


def _guard_chain(name: str) -> None:
    """Every handler a record of logger `name` can reach (its logger and the ancestors it propagates to)."""
    logger: logging.Logger | None = logging.getLogger(name) if name != "root" else logging.getLogger()
    while logger is not None:
        for handler in logger.handlers:
            _guard(handler)
        if not logger.propagate:
            break
        logger = logger.parent  # type: ignore[assignment]


def install() -> SafeRecords:
    """Make every record safe from now on, whichever handler writes it (module docstring); idempotent. The records
    remembered for deduplication start afresh: one command's repeats are counted, not another's."""
    _FILTER.repeats = {}
    if logging.lastResort is not None:
        _guard(logging.lastResort)
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", ()):
            _guard(handler)
    previous = logging.getLogRecordFactory()
    if not getattr(previous, "grpokit_safe", False):

        def factory(*args: object, **kwargs: object) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _guard_chain(record.name)
            return record

        factory.grpokit_safe = True  # type: ignore[attr-defined]
        factory.grpokit_previous = previous  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)
    return _FILTER


def uninstall() -> None:
    """Undo `install()`: the record factory it replaced comes back and no handler keeps the filter (a command run
    in a process that goes on, such as a test calling the CLI's `main`, leaves logging as it found it)."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "grpokit_safe", False):
        logging.setLogRecordFactory(factory.grpokit_previous)  # type: ignore[attr-defined]
    handlers = [logging.lastResort] if logging.lastResort is not None else []
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        handlers += getattr(logger, "handlers", [])
    for handler in handlers:
        handler.removeFilter(_FILTER)

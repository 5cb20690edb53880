"""What a reward is called: the spec text of a reward given as a name or a function, and its display name."""

from __future__ import annotations

from .registry import RewardFn


def spec_text(entry: str | RewardFn) -> str:
    """A reward's spec: the string itself, or `module:qualname` of a function (TypeError for anything else)."""
    if isinstance(entry, str):
        return entry
    if callable(entry):
        name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None) or type(entry).__name__
        return f"{getattr(entry, '__module__', '?')}:{name}"
    raise TypeError(f"a reward is a name, a 'module:function' string or a function, got {entry!r}")


def display_name(spec: str, taken: set[str]) -> str:
    """The function's own name (`brevity` for `__main__:make.<locals>.brevity`), the full spec when taken."""
    name = spec.rpartition(":")[2].rpartition(".")[2] if ":" in spec else spec
    return spec if name in taken else name

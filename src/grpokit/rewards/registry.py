"""Name -> built-in reward table, and `load_reward` for built-in names or user `module:function` specs."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..common.registry import Registry
from ..data.example import Example


class RewardFn(Protocol):
    """A batch reward: one float (or None when it cannot score that sample) per completion."""

    def __call__(self, completions: list[str], examples: list[Example]) -> Sequence[float | None]: ...


@dataclass(frozen=True)
class BuiltinReward:
    """A built-in reward: where its function lives, what it checks, and whether it runs in the worker process.

    `isolated` rewards can hang on adversarial input (sympy inside math_verify) or run untrusted code
    (code_exec) and run in the killable, sandboxed worker; the others are pure regex/`ast` code with bounded
    cost and run in-process.
    """

    target: str  # "module:function", imported on first use so heavy dependencies load only when needed
    description: str
    isolated: bool = False


REWARDS = Registry.of(
    "built-in reward",
    {
        "exact_numeric": BuiltinReward(
            "grpokit.rewards.numeric:exact_numeric",
            "1.0 if the last number in the completion equals the numeric answer (handles -3, 1,234, 2.5)",
        ),
        "math_verify": BuiltinReward(
            "grpokit.rewards.mathverify:math_verify_reward",
            "1.0 if math_verify finds the completion's answer equivalent to the reference (\\boxed{}, fractions)",
            isolated=True,
        ),
        "format": BuiltinReward(
            "grpokit.rewards.numeric:format_reward",
            "1.0 if the completion is just a number (sign, commas, decimals, optional trailing period)",
        ),
        "code_exec": BuiltinReward(
            "grpokit.rewards.codeexec:code_exec",
            "fraction of the answer's Python test cases the completion's code passes (run in the reward sandbox)",
            isolated=True,
        ),
        "countdown": BuiltinReward(
            "grpokit.rewards.countdown:countdown",
            "1.0 if the expression on the last line / after 'Answer:' hits the target using each number once",
        ),
        "gsm8k": BuiltinReward(
            "grpokit.rewards.gsm8k:gsm8k_answer",
            "1.0 if the number after the last '#### ' equals the answer string (verl's default GSM8K scorer)",
        ),
        "verl_data_source": BuiltinReward(
            "grpokit.rewards.verl_sources:by_data_source",
            "each row scored by the built-in for its data_source column, as verl's default_compute_score dispatches",
            isolated=True,
        ),
    },
)


def list_rewards() -> dict[str, str]:
    """Built-in reward name -> one-line description."""
    return {name: r.description for name, r in sorted(REWARDS.items())}


def is_isolated(spec: str) -> bool:
    """Whether `spec` runs in the worker process: user functions and the built-ins marked `isolated`."""
    return spec not in REWARDS or REWARDS[spec].isolated


def _file_of(spec: str, module: str, cwd: str | None) -> Path:
    """The file of a `path/file.py` module, relative paths taken from `cwd`; ValueError when it is not a file."""
    path = Path(module).expanduser()
    if cwd is not None and not path.is_absolute():
        path = Path(cwd) / path
    if not path.is_file():
        raise ValueError(f"reward {spec!r}: file {module!r} does not exist (looked for {str(path.absolute())!r})")
    return path


def _from_directory(module: str, where: Path) -> object | None:
    """`module` imported from the folder `where` (a `name.py` or a `name/` package there), or None when the folder
    has neither. Found with a stat of each name, not a listing: a sandboxed worker may not list the folder."""
    top = module.split(".")[0]
    package, file = where / top / "__init__.py", where / f"{top}.py"
    if not package.is_file() and not file.is_file():
        return None
    origin = package if package.is_file() else file
    locations = [str(package.parent)] if origin is package else None
    mspec = importlib.util.spec_from_file_location(top, origin, submodule_search_locations=locations)
    if mspec is None or mspec.loader is None:
        return None
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[top] = mod
    try:
        mspec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(top, None)
        raise
    return mod if top == module else importlib.import_module(module)


def _import_module(spec: str, module: str, attr: str, cwd: str | None = None) -> object:
    if module.endswith(".py"):
        path = _file_of(spec, module, cwd)
        name = f"grpokit_user_reward_{path.stem}"
        mspec = importlib.util.spec_from_file_location(name, path)
        if mspec is None or mspec.loader is None:
            raise ValueError(f"reward {spec!r}: cannot load {str(path)!r} as a Python module")
        mod = importlib.util.module_from_spec(mspec)
        sys.modules[name] = mod
        mspec.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        where = Path(cwd or os.getcwd()).resolve()
        if e.name == module.split(".")[0]:
            found = _from_directory(module, where)  # TRL users pass functions of the script beside them
            if found is not None:
                return found
        what = "it" if e.name == module else f"{e.name!r}, which it imports,"
        top = module.split(".")[0]
        raise ValueError(
            f"reward {spec!r}: cannot import module {module!r} ({e}); looked for {top}.py and {top}/ in the working "
            f"directory {str(where)!r} and on the Python path ({len(sys.path)} entries: installed packages, "
            f"PYTHONPATH); make sure {what} is there, or give a file path such as path/to/rewards.py:{attr}"
        ) from e


def _split(spec: str, target: str) -> tuple[str, str]:
    module, _, attr = target.rpartition(":")
    if not module or not attr:
        raise ValueError(f"reward {spec!r}: expected 'module:function', e.g. 'my_rewards:length_penalty'")
    return module, attr


def _load_target(spec: str, target: str, cwd: str | None = None) -> Callable[..., object]:
    module, attr = _split(spec, target)
    try:
        mod = _import_module(spec, module, attr, cwd)
    except ValueError:
        raise
    except Exception as e:
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, MemoryError):
            cause = cause.__cause__ or cause.__context__
        memory = " (out of memory: the reward sandbox allows 4 GiB of address space)" if cause is not None else ""
        raise ValueError(f"reward {spec!r}: importing {module!r} failed with {type(e).__name__}: {e}{memory}") from e
    fn = getattr(mod, attr, None)
    if fn is None:
        public = sorted(k for k, v in vars(mod).items() if callable(v) and not k.startswith("_"))
        raise ValueError(
            f"reward {spec!r}: module {module!r} has no attribute {attr!r}; its public callables: {public}"
        )
    if not callable(fn):
        raise ValueError(f"reward {spec!r}: {module}.{attr} is a {type(fn).__name__}, not a function")
    return fn


def _unknown(spec: str) -> ValueError:
    close = difflib.get_close_matches(spec, list(REWARDS), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ValueError(
        f"unknown reward {spec!r}.{hint} Built-ins: {', '.join(sorted(REWARDS))}; "
        "or give your own function as 'module:function'"
    )


def check_spec(spec: str) -> None:
    """The errors `load_reward` would raise before importing anything (an unknown name, a spec that is not
    `module:function`, a file that does not exist): for the trainer, which never imports a user's module."""
    if spec in REWARDS:
        return
    if ":" not in spec:
        raise _unknown(spec)
    module, _ = _split(spec, spec)
    if module.endswith(".py"):
        _file_of(spec, module, None)


def load_reward(spec: str, cwd: str | None = None) -> RewardFn:
    """A built-in reward by name, or a user function: `pkg.module:function` or `path/file.py:function` (a
    relative path is taken from `cwd`, default the working directory). Imports the module: its top-level code
    runs here."""
    if spec in REWARDS:
        return _load_target(spec, REWARDS[spec].target)  # type: ignore[return-value]
    if ":" not in spec:
        raise _unknown(spec)
    return _load_target(spec, spec, cwd)  # type: ignore[return-value]


def load_callable(spec: str, *, what: str, cwd: str | None = None) -> Callable[..., object]:
    """A user function given as `module:function` or `path/file.py:function` (imported here) for the config key
    `what` (e.g. agent.tools); ValueError naming the key, the spec and the fix."""
    if ":" not in spec:
        raise ValueError(f"{what}: {spec!r} is neither a built-in name nor 'module:function' (e.g. my_tools:search)")
    try:
        return _load_target(spec, spec, cwd)
    except ValueError as e:
        raise ValueError(f"{what}: {str(e).removeprefix('reward ')}") from None

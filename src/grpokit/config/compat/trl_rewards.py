"""A TRL file's `reward_funcs` -> grpokit reward specs (`module:function`), each one checked to exist.

Who resolves a name in TRL's world, and so how it is translated:

* `trl grpo` (TRL 1.16 `trl/scripts/grpo.py`): a name of its registry (`accuracy_reward`,
  `reasoning_accuracy_reward`, `think_format_reward`, all in `trl.rewards`) or a dotted import path
  `pkg.module.function` -> `trl.rewards:NAME` / `pkg.module:function`.
* a recipe's own project: open-r1's recipes say `reward_funcs: [accuracy, format, tag_count]`, names its script
  resolves with `get_reward_funcs` (src/open_r1/rewards.py: `accuracy` is `accuracy_reward`). grpokit cannot
  guess that project, so the user names its module: `--reward-module open_r1.rewards` (or `reward_module:` in the
  file), where NAME resolves to the function NAME or NAME_reward, the open-r1 convention.

A name that resolves to no function that exists is not translated: it is returned as unresolved, with the
`--set reward.functions=[...]` / `--reward-module` fix, and the run is refused rather than trained on another
reward. Existence is checked without running the module: its source is parsed for top-level definitions
(`trl.rewards` is read from its lazy `__all__`), so a module importing heavy libraries costs nothing here.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

from ...rewards.reward_model import is_reward_model_spec

# the names `trl grpo` resolves itself (TRL 1.16 trl/scripts/grpo.py reward_funcs_registry, reward functions only)
TRL_SCRIPT_REWARDS = ("accuracy_reward", "reasoning_accuracy_reward", "think_format_reward")


def _source_of(module: str) -> Path | None:
    """The source file of `module` (a dotted name or a path ending in .py), or None when there is none."""
    if module.endswith(".py"):
        p = Path(module).expanduser()
        return p if p.is_file() else None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a parent package that is missing or fails to import
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def defined_names(module: str) -> set[str] | None:
    """Top-level function, class and variable names of `module`'s source, or None when it cannot be found."""
    src = _source_of(module)
    if src is None:
        return None
    try:
        tree = ast.parse(src.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def trl_rewards() -> set[str]:
    """The reward functions `trl.rewards` exports (read from its lazy `__all__`; empty without TRL)."""
    try:
        mod = importlib.import_module("trl.rewards")
    except ImportError:
        return set()
    return set(getattr(mod, "__all__", dir(mod))) & set(TRL_SCRIPT_REWARDS)


def resolve(names: list[str], module: str | None) -> tuple[list[str], list[str]]:
    """(grpokit specs of the names that resolve to a function that exists, the names that do not)."""
    found: list[str] = []
    missing: list[str] = []
    for name in names:
        spec = _resolve_one(str(name), module)
        (found if spec else missing).append(spec or str(name))
    return found, missing


def _resolve_one(name: str, module: str | None) -> str | None:
    if is_reward_model_spec(name):  # TRL's model-path reward: a local sequence-classification model directory
        return name
    if ":" in name:  # already grpokit's module:function
        mod, _, fn = name.rpartition(":")
        return name if fn in (defined_names(mod) or ()) else None
    if "." in name and not name.endswith(".py"):  # TRL's dotted import path
        mod, _, fn = name.rpartition(".")
        return f"{mod}:{fn}" if fn in (defined_names(mod) or ()) else None
    if module:
        there = defined_names(module) or set()
        for fn in (name, f"{name}_reward"):
            if fn in there:
                return f"{module}:{fn}"
        return None
    return f"trl.rewards:{name}" if name in trl_rewards() else None


def fix(missing: list[str], module: str | None) -> str:
    """What to pass instead of names that resolve to nothing."""
    where = f"--reward-module {module} has no function NAME or NAME_reward for them" if module else (
        f"they are not TRL's own rewards ({', '.join(TRL_SCRIPT_REWARDS)}) but names the recipe's project resolves "
        "(open-r1's get_reward_funcs: accuracy -> open_r1.rewards:accuracy_reward)"
    )  # fmt: skip
    example = ",".join(f"MODULE:{n}_reward" for n in missing[:3])
    return (
        f"reward_funcs {missing} resolve to no function: {where}; pass --reward-module MODULE (a module or .py file "
        f"where NAME is NAME or NAME_reward, e.g. --reward-module open_r1.rewards) "
        f"or --set reward.functions=[{example}]"
    )

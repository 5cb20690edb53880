"""grpokit's own run directory: `metrics.jsonl` (names already canonical) and the detectors' context from
`config.yaml`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...common.bounded_read import CONFIG_LIMIT, open_regular, read_json, read_text
from ...run.directory import MARKER
from .canonical import Reader, Segment, identity_mapper
from .jsonl import jsonl_flavor, jsonl_rows, read_jsonl_objects


def yaml_load(text: str) -> dict[str, Any]:
    import yaml

    from ...common import safe_yaml

    try:
        cfg = safe_yaml.load(text)
    except yaml.YAMLError:
        return {}
    return cfg if isinstance(cfg, dict) else {}


def _precision(cfg: dict[str, Any]) -> str | None:
    """`model.precision` of a grpokit config when it names one (`auto` resolves on the machine that ran it)."""
    m = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    p = m.get("precision")
    return p if isinstance(p, str) and p != "auto" else None


def grpokit_context(cfg: dict[str, Any]) -> dict[str, Any]:
    """The detectors' context from a grpokit config (config.yaml, or the copy in TensorBoard)."""
    if not cfg:
        return {}
    a = cfg.get("algo") if isinstance(cfg.get("algo"), dict) else {}
    t = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    r = cfg.get("rollout") if isinstance(cfg.get("rollout"), dict) else {}
    ctx = {
        "dynamic_sampling": a.get("group_filter") == "dynamic_sampling"
        if "group_filter" in a
        else a.get("dynamic_sampling"),
        "group_filter": a.get("group_filter"),
        "policy_loss": a.get("policy_loss"),
        "eps_low": a.get("eps_low"),
        "eps_high": a.get("eps_high"),
        "epochs": t.get("ppo_epochs", t.get("epochs", 1)),
        "mini_batches": t.get("mini_batches", 1),
        "is_correction": a.get("is_correction"),
        "entropy_coef": a.get("entropy_coef"),
        "kl_controller": a.get("kl_controller"),
        "soft_overlong": a.get("soft_overlong"),
        "max_gen_rounds": a.get("max_gen_rounds"),
        "temperature": r.get("temperature"),
        "max_new_tokens": r.get("max_new_tokens"),
        "truncated_reward": a.get("truncated_reward"),
        "recipe": cfg.get("recipe"),
        "precision": _precision(cfg),
        **agent_context(cfg),
    }
    return {k: v for k, v in ctx.items() if v is not None}


#: `agent.*` settings the multi-turn detectors name in their fixes (`detectors/episodes.py`)
AGENT_KEYS = ("max_turns", "max_episode_tokens", "tool_timeout_s", "tool_result_max_chars", "tool_format")


def agent_context(cfg: dict[str, Any]) -> dict[str, Any]:
    """The `agent.*` settings of a grpokit config (none when the run has no agent section)."""
    ag = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    return {k: ag[k] for k in AGENT_KEYS if ag.get(k) is not None}


class GrpokitReader(Reader):
    name = "grpokit"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        f = path / "metrics.jsonl" if path.is_dir() else path
        if f.is_file() and (f.parent / MARKER).is_file():
            # a directory grpokit train claimed: its metrics.jsonl is grpokit's whatever its first lines hold (50
            # value-pretraining rows at step 0 carry no name the sniffing below knows)
            return [("", [f])]
        if f.is_file() and f.suffix == ".jsonl":
            flavor = jsonl_flavor(f)
            if flavor == "grpokit" or (flavor is None and f.name == "metrics.jsonl" and _looks_empty(f)):
                return [("", [f])]
        return []

    def read(self, files: list[Path]) -> list[Segment]:
        f = files[0]
        cfg_path = f.parent / "config.yaml"
        cfg = yaml_load(read_text(cfg_path, CONFIG_LIMIT, errors="replace")) if cfg_path.is_file() else {}
        ctx = grpokit_context(cfg)
        if ctx and ctx.get("precision") is None:
            ctx["precision"] = _resolved_precision(f.parent / "run.json")
        return [Segment(jsonl_rows(read_jsonl_objects(f)), identity_mapper, "grpokit", "", ctx, cfg)]


def _resolved_precision(run_json: Path) -> str | None:
    """The precision `model.precision=auto` resolved to, as run.json records it. Without it the doctor judged a
    bf16-autocast run by fp32's sampler-mismatch threshold and warned of a mismatch rounding alone gives (the demo:
    mismatch KL 1.08e-3 against 1e-3; the live run, knowing bf16, rightly did not)."""
    try:
        info = read_json(run_json)  # bounded: a FIFO or /dev/zero as run.json is refused, not read
    except (OSError, ValueError):
        return None
    p = info.get("precision") if isinstance(info, dict) else None
    return p if isinstance(p, str) and p != "auto" else None


def _looks_empty(f: Path) -> bool:
    """A just-started grpokit run: metrics.jsonl exists but holds no complete line yet."""
    try:
        with open_regular(f) as fh:  # a FIFO swapped in is not a hang
            return not fh.read(65536).strip()
    except (OSError, ValueError):
        return False

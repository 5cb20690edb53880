"""Local data files -> `Example`s: JSONL, and what `datasets` reads locally (json/csv/parquet/save_to_disk).

Only local paths are accepted (runs are offline). Every problem with the data raises one `ValueError` that
names the file, the line or row, the field, and how to fix it.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from .example import Example
from .registry import TASKS, get_task, unknown_name_error
from .task import sample_pool

_PROMPT_ALIASES = ("prompt", "question", "problem", "input", "query", "instruction")
_ANSWER_ALIASES = ("answer", "solution", "output", "target", "label", "final_answer")
_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}


def _suggest_key(wanted: str, present: list[str], aliases: tuple[str, ...]) -> str | None:
    """The present field most likely meant instead of `wanted`."""
    close = difflib.get_close_matches(wanted, present, n=1)
    if close:
        return close[0]
    return next((a for a in aliases if a in present), None)


def _missing_key_error(source: str, where: str, field: str, present: list[str], arg: str) -> ValueError:
    aliases = _PROMPT_ALIASES if arg == "prompt_key" else _ANSWER_ALIASES
    guess = _suggest_key(field, present, aliases)
    fix = f"pass {arg}={guess!r}" if guess else f"add a {field!r} field or pass {arg}=<field name>"
    return ValueError(f"{source}, {where}: missing field {field!r} (fields present: {present}); {fix}")


def _answer_text(value: Any) -> str:
    """Reference answers as text: strings stripped, numbers via str, lists/dicts as JSON."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def record_to_example(
    record: Any, *, source: str, where: str, prompt_key: str, answer_key: str, default_id: str
) -> Example:
    """Validate one record (a dict) and turn it into an `Example`; other fields go to `meta`."""
    if not isinstance(record, dict):
        raise ValueError(
            f"{source}, {where}: expected a JSON object like {{{prompt_key!r}: ..., {answer_key!r}: ...}}, "
            f"got {type(record).__name__}"
        )
    present = list(record)
    for key, arg in ((prompt_key, "prompt_key"), (answer_key, "answer_key")):
        if key not in record or record[key] is None:
            raise _missing_key_error(source, where, key, present, arg)
    prompt = record[prompt_key]
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(
            f"{source}, {where}: field {prompt_key!r} must be a non-empty string, got {prompt!r}; "
            "fix or drop this record"
        )
    meta = {k: v for k, v in record.items() if k not in (prompt_key, answer_key, "id")}
    rid = record.get("id")
    return Example(
        prompt=prompt,
        answer=_answer_text(record[answer_key]),
        meta=meta,
        id=str(rid) if rid is not None else default_id,
        columns=dict(record),
    )


def _existing(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(
            f"data path {str(path)!r} does not exist (resolved to {p.resolve()}); grpokit reads local files "
            "only, so download or save the data first"
        )
    return p


def load_jsonl(path: str | Path, prompt_key: str = "prompt", answer_key: str = "answer") -> list[Example]:
    """Examples from a JSON-lines file, one object per line (blank lines skipped)."""
    p = _existing(path)
    out: list[Example] = []
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{p}, line {lineno}: invalid JSON ({e.msg} at column {e.colno}); each line must be one "
                    f'JSON object such as {{"{prompt_key}": "...", "{answer_key}": "..."}}'
                ) from None
            out.append(
                record_to_example(
                    record,
                    source=str(p),
                    where=f"line {lineno}",
                    prompt_key=prompt_key,
                    answer_key=answer_key,
                    default_id=f"{p.stem}/{lineno}",
                )
            )
    if not out:
        raise ValueError(f"{p}: no examples (the file is empty)")
    return out


def _open_local(p: Path, split: str) -> Any:
    """A `datasets.Dataset` for a local file or directory."""
    import datasets

    if p.is_dir() and (p / "dataset_dict.json").exists():
        dd = datasets.load_from_disk(str(p))
        if split not in dd:
            raise ValueError(f"{p}: no split {split!r}; available splits: {sorted(dd)}")
        return dd[split]
    if p.is_dir() and (p / "state.json").exists():
        return datasets.load_from_disk(str(p))  # a single saved Dataset: the split argument does not apply
    if p.is_dir():
        return datasets.load_dataset(str(p), split=split)
    builder = _BUILDERS.get(p.suffix.lower())
    if builder is None:
        raise ValueError(f"{p}: unsupported file type {p.suffix!r}; use one of {sorted(_BUILDERS)}")
    return datasets.load_dataset(builder, data_files=str(p), split="train")


def load_hf_dataset(
    path_or_name: str | Path, split: str = "train", prompt_key: str = "prompt", answer_key: str = "answer"
) -> list[Example]:
    """Examples from a local json/jsonl/csv/parquet file or a `save_to_disk` directory via `datasets`.

    A single file is one split (`split` is ignored); a saved `DatasetDict` is indexed by `split`. Rows are
    numbered from 1 in errors and ids (row k of a JSONL file without blank lines is line k).
    """
    p = _existing(path_or_name)
    try:
        ds = _open_local(p, split)
    except Exception as e:  # datasets raises many types; name the path in all of them
        if isinstance(e, ValueError) and str(e).startswith(str(p)):
            raise
        cause = f"; caused by {type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ else ""
        raise ValueError(f"{p}: could not be loaded with datasets ({type(e).__name__}: {e}{cause})") from e
    columns = list(ds.column_names)
    for key, arg in ((prompt_key, "prompt_key"), (answer_key, "answer_key")):
        if key not in columns:
            raise _missing_key_error(str(p), "all rows", key, columns, arg)
    out = [
        record_to_example(
            row,
            source=str(p),
            where=f"row {i + 1}",
            prompt_key=prompt_key,
            answer_key=answer_key,
            default_id=f"{p.stem}/{i + 1}",
        )
        for i, row in enumerate(ds)
    ]
    if not out:
        raise ValueError(f"{p}: no examples (the dataset is empty)")
    return out


def load_examples(
    spec: str,
    split: str = "train",
    n: int | None = None,
    seed: int = 0,
    *,
    prompt_key: str = "prompt",
    answer_key: str = "answer",
) -> list[Example]:
    """Examples from a built-in task name or a local data path.

    Files are taken as given (a single file is one split; pass a separate file for evaluation); `n` draws a
    seeded sample from them (cycling through reshuffled copies for "train" when `n` exceeds the file).
    """
    if spec in TASKS:
        return get_task(spec).examples(split, n, seed)
    p = Path(spec).expanduser()
    if not p.exists():
        looks_like_path = any(c in spec for c in "/\\") or Path(spec).suffix.lower() in _BUILDERS
        if looks_like_path:
            _existing(spec)
        raise unknown_name_error("task", spec, list(TASKS), " Or give the path of a local data file.")
    if p.is_file() and p.suffix.lower() == ".jsonl":
        examples = load_jsonl(p, prompt_key=prompt_key, answer_key=answer_key)
    else:
        examples = load_hf_dataset(p, split=split, prompt_key=prompt_key, answer_key=answer_key)
    return sample_pool(examples, n, seed, cycle=split == "train")

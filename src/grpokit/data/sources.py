"""Where a dataset comes from: a local file or directory, a `save_to_disk` directory, or a `datasets.load_dataset`
name (a Hub dataset, from the Hub or from the datasets cache).

Hub access follows the environment: with `HF_HUB_OFFLINE=1` (or `HF_DATASETS_OFFLINE=1`) only what the datasets
cache already holds loads, and a name it does not hold gets an error saying so and how to get the data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".arrow": "arrow"}


def hub_offline() -> bool:
    """Whether `datasets` keeps off the Hub in this process (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE at import)."""
    import datasets

    return bool(datasets.config.HF_HUB_OFFLINE)


def looks_like_path(spec: str) -> bool:
    """Whether `spec` reads as a file path rather than a dataset name (`org/name` is a name)."""
    return (
        spec.startswith((".", "/", "~"))
        or "\\" in spec
        or spec.count("/") > 1
        or Path(spec).suffix.lower() in FILE_BUILDERS
    )


def open_local(p: Path, split: str) -> Any:
    """A `datasets.Dataset` for a local file or directory (a saved DatasetDict is indexed by `split`)."""
    import datasets

    if p.is_dir() and (p / "dataset_dict.json").exists():
        dd = datasets.load_from_disk(str(p))
        if split not in dd:
            raise ValueError(f"{p}: no split {split!r}; available splits: {sorted(dd)}")
        return dd[split]
    if p.is_dir() and (p / "state.json").exists():
        return datasets.load_from_disk(str(p))  # a single saved Dataset: the split argument does not apply
    if p.is_dir():
        return _split_of(datasets.load_dataset(str(p)), split, str(p))
    builder = FILE_BUILDERS.get(p.suffix.lower())
    if builder is None:
        raise ValueError(f"{p}: unsupported file type {p.suffix!r}; use one of {sorted(FILE_BUILDERS)}")
    return datasets.load_dataset(builder, data_files=str(p), split="train")


def _split_of(dd: Any, split: str, source: str) -> Any:
    if split in dd:
        return dd[split]
    if split == "test" and "validation" in dd:
        return dd["validation"]
    if len(dd) == 1 and split == "train":
        return next(iter(dd.values()))
    raise ValueError(f"{source}: no split {split!r}; available splits: {sorted(dd)} (set data.split)")


def open_hub(name: str, split: str, subset: str | None = None) -> Any:
    """`datasets.load_dataset(name, subset)[split]`; errors name the dataset and, offline, say how to get it."""
    import datasets

    try:
        dd = datasets.load_dataset(name, subset)
    except Exception as e:  # datasets raises many types; one message naming the dataset for all of them
        raise ValueError(hub_error(name, subset, e)) from e
    return _split_of(dd, split, name)


def hub_error(name: str, subset: str | None, e: Exception) -> str:
    """The message for a dataset name that did not load."""
    what = f"{name!r}" + (f" (subset {subset!r})" if subset else "")
    detail = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    if hub_offline():
        return (
            f"dataset {what} is not in the local datasets cache and HF_HUB_OFFLINE=1 keeps the Hub off ({detail}); "
            "unset HF_HUB_OFFLINE (and HF_DATASETS_OFFLINE) to download it, or give a local file or directory "
            "(json, jsonl, parquet, csv, arrow, or a Dataset.save_to_disk folder)"
        )
    return (
        f"dataset {what} could not be loaded with datasets.load_dataset ({detail}); check the name (and data.subset "
        "for datasets with several configurations), or give a local file or directory"
    )

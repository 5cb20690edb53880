"""A run directory and its files, written by the trainer and read by resume, the doctor and the report.

- `directory.py`: run directories claimed atomically; `output_dir.py`: `--output-dir` as TRL's `output_dir`.
- `writer.py`: config.yaml, run.json, metrics.jsonl, completions.jsonl, alerts.jsonl; `trackers.py`: the
  experiment trackers of `train.report_to` (TensorBoard, W&B, MLflow, trackio), registered by name.
- `checkpoint.py`: checkpoints as Hugging Face model directories with the trainer state beside them, read without
  running code; `rng.py`: random number generator states as plain JSON numbers.

This layer knows files, not training: it imports only `grpokit.common` and `grpokit.metric_names`.
"""

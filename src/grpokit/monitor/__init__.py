"""Diagnosis: why training fails, live and after the fact.

- `detectors/`: one detector per failure mode, fed canonical rows (live runs and other trainers' logs alike);
- `readers/`: other trainers' logs (TRL, verl, OpenRLHF, SkyRL, NeMo-RL, prime-rl, slime, ROLL, AReaL, TensorBoard,
  W&B) read into canonical rows; `doctor/`: `grpokit doctor`, a diagnosis of a log;
- `report/` and `compare/`: `grpokit report` and `grpokit compare` pages (`rundata.py`: one run loaded for them,
  `outputs.py`: where their files go);
- `watch.py` (`grpokit watch`, following a log with `tail.py` and `follow.py`) and `notify.py` (webhooks) follow a run
  as it is written.

The §17 formulas the training step's signals phase calls are pure torch, in `grpokit.algos.measures`.
"""

"""Diagnosis: why training fails, live and after the fact.

- `detectors/`: one detector per failure mode, fed canonical rows (live runs and other trainers' logs alike);
- `readers/`: other trainers' logs (TRL, verl, OpenRLHF, SkyRL, NeMo-RL, prime-rl, slime, ROLL, AReaL, TensorBoard,
  W&B) read into canonical rows; `doctor/`: `grpokit doctor`, a diagnosis of a log;
- `report/` and `compare/`: `grpokit report` and `grpokit compare` pages (`rundata.py`: one run loaded for them,
  `outputs.py`: where their files go);
- `measures.py`: the §17 formulas the training step's signals phase calls; `divergence.py`: the divergence detector
  (needs the weights, so live only); `watch.py` (`grpokit watch`) and `notify.py` (webhooks) follow a run as it is
  written.
"""

# the divergence detector registers itself in the detectors' registry (after the detectors package's own)
from . import divergence as divergence  # noqa: E402,F401

"""`grpokit audit-reward`: test a reward function before training on it.

The reward is loaded with `load_reward` and called through a one-reward `RewardManager`, the same isolation as
training (user functions in a killable worker with the timeout; exceptions, None and NaN caught). Checks:

- with a labeled file (JSONL rows `completion`, `answer`, optional `prompt`, `expected` true/false): false-
  positive and false-negative rates with 95% Wilson intervals, and the rows it gets wrong;
- without one, probes for the answer kind (`numeric`, `math`, `code`): equivalent forms of the right answer must score
  like the plain answer; known hacks (several answers, a wrong number, the prompt echoed, an empty or huge
  answer, the answer only inside <think>) must score below it;
- determinism (the same input scored repeatedly, alone and in a batch), exceptions, and latency per call
  against the timeout;
- for a reward model (a local sequence-classification model directory, grpokit/rewards/reward_model.py): its
  agreement with a verifier, the spread of its scores, and its sensitivity to length, format and harmless rewrites,
  each against the gap between right and wrong answers (`model_checks`, registered in `MODEL_CHECKS`).

The reward may follow any convention `RewardManager` knows (grpokit, TRL keyword style, verl `compute_score`);
probe examples carry the reference as the columns `answer` and `solution` (TRL's name), labeled rows carry
their own fields. Each case is one call of one sample (a hung call costs one timeout); after two timeouts
the remaining cases are skipped.

Modules: `probes` (probe sets), `caller` (the reward behind a manager), `checks`, `model_checks` (a reward
model's), `report` (issues, verdict), `render`, `command`.
"""

from __future__ import annotations

from .caller import MAX_TIMEOUTS
from .checks import REPEATS, Z95, labeled_example, read_labeled, wilson
from .command import cmd_audit_reward
from .probes import PROBES, probe_example
from .render import render
from .report import SLOW_FRACTION, audit_reward

__all__ = [
    "MAX_TIMEOUTS",
    "PROBES",
    "REPEATS",
    "SLOW_FRACTION",
    "Z95",
    "audit_reward",
    "cmd_audit_reward",
    "labeled_example",
    "probe_example",
    "read_labeled",
    "render",
    "wilson",
]

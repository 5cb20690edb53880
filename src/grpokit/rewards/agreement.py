"""How far a reward model agrees with a verifier, and how much of its spread is noise: shared by `audit-reward`
(grpokit/audit/model_checks.py) and `preflight` (grpokit/preflight/estimates.py), with one set of thresholds.

- AUC: P(score(right) > score(wrong)) over every right/wrong pair, ties counted 1/2 — the Mann-Whitney U statistic
  divided by n_right x n_wrong (Mann & Whitney 1947; Hanley & McNeil 1982 for its reading as the ROC area). 0.5 is
  chance, 1 is the verifier's order; below `AGREEMENT_MIN` the model ranks answers unlike the verifier.
- noise / signal: the spread a harmless edit, or the verifier's own label, does not explain, over the gap between
  the mean score of right and of wrong answers; above `NOISE_MAX`, that share of a group's score differences (its
  advantages) is noise that the policy learns as if it were signal.
"""

from __future__ import annotations

AGREEMENT_MIN = 0.75
NOISE_MAX = 0.5


def auc(right: list[float], wrong: list[float]) -> float:
    """P(a right answer outscores a wrong one), ties 1/2: Mann-Whitney U / (n_right n_wrong); NaN without both."""
    if not right or not wrong:
        return float("nan")
    wins = sum((r > w) + 0.5 * (r == w) for r in right for w in wrong)
    return wins / (len(right) * len(wrong))

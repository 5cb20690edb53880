"""Dynamic sampling with `algo.ds_shortfall=partial` training on short batches."""

from __future__ import annotations

import math
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .rows import number_at


@register
class ShortBatch(Windowed):
    """Dynamic sampling with the opt-in `algo.ds_shortfall=partial` trained on short batches (`sampling/short_batch`)
    in at least `threshold` of the last `window` steps: the filter could not find enough groups with varying
    accuracy in `algo.max_gen_rounds` rounds, so those updates see fewer groups than the recipe asks for. grpokit
    logs `sampling/short_batch` = 0 on full batches and on runs without dynamic sampling."""

    name, mode = "short_batch", "short batches"
    threshold, window = 0.5, 5
    requires = ((mn.SAMPLING_SHORT_BATCH,),)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        short = number_at(m, mn.SAMPLING_SHORT_BATCH)
        if not math.isfinite(short) or self.context.get("dynamic_sampling") is False:
            return self.active, None
        self.values.add(step, 1.0 if short > 0 else 0.0)
        if not self.full() or self.mean() < self.threshold:
            return False, None
        solved, failed = number_at(m, mn.ZV_ALL_CORRECT), number_at(m, mn.ZV_ALL_WRONG)
        cause = (
            "the model solves nearly every prompt: the task is learned — stop, or train on harder data"
            if math.isfinite(solved) and (not math.isfinite(failed) or solved >= failed)
            else "the model fails nearly every prompt: filter the data to prompts it sometimes solves"
        )
        return True, self.new_alert(
            step,
            "warning",
            f"{self.mean():.0%} of the last {len(self.vals())} steps trained on a short batch "
            "(dynamic sampling could not fill it within algo.max_gen_rounds)",
            {
                "short_frac": round(self.mean(), 3),
                "all_correct_frac": solved if math.isfinite(solved) else None,
                "all_wrong_frac": failed if math.isfinite(failed) else None,
                "batch_size_now": number_at(m, mn.TRAIN_BATCH_SIZE)
                if math.isfinite(number_at(m, mn.TRAIN_BATCH_SIZE))
                else None,
            },
            f"{cause} (grpokit preflight shows pass rates per prompt); or raise algo.max_gen_rounds / "
            "algo.ds_oversample",
            onset=self.values.first_step(),
        )

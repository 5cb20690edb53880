"""One training step in phases, each a module named for its job:

rollout (sample groups) -> scoring (rewards, shaping) -> filter (which groups train) -> advantage (old/ref
log-probs, values, KL placement, advantages) -> update (the learner's optimizer steps) -> signals (every
docs/math.md §17 signal of the step, in one pass). `grpokit.training.trainer` calls them in order;
`grpokit.training.loop` adds eval, logging, alerts and checkpoints around the steps.
"""

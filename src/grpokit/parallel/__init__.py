"""Training beyond one process, below the trainer and the rollout engines that both use it: `distributed.py`
(torchrun process groups, ranks, collective helpers) and `sharding.py` (how the learner's weights are laid out over
the ranks: registered layouts chosen by `train.sharding`). Imports torch only."""

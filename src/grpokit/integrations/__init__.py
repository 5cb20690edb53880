"""grpokit inside other trainers' jobs: `grpokit.integrations.trl.HealthCallback` for a TRL `GRPOTrainer` (verl and
everything else: `grpokit watch`, which follows the logs they write)."""

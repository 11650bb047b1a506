"""Evaluation checks on logs a team already has, before any gap hunt: success rates of rollouts
with exact intervals and the rollouts still needed (`rollouts`), whether sim preserves the
ranking of policies or checkpoints (`rank_fidelity`), and whether the latency budget fits the
control tick (`latency`). Pure math and table reading; no DuckDB, HTML or printing here.
"""

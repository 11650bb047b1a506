"""Every bootstrap interval of the engine is `metrics.bootstrap.centred_ci`: it holds its estimate
even where resampling noise only pushes the statistic one way (a plain percentile interval of
such a statistic can lie entirely on one side of the estimate)."""

from perception_gap.evaluation.rank_fidelity import PolicyRates, rank_fidelity


def test_rank_fidelity_interval_holds_a_perfect_ranking():
    # Sim orders the close policies as real does (MMRV 0); with 10 episodes each, redrawn rates
    # swap most replicates' order, so the replicates' MMRV is almost always above 0.
    rates = [PolicyRates(f"p{i}", "t", s, s, 10, 10) for i, s in enumerate([0.4, 0.5, 0.6])]
    t = rank_fidelity(rates, n_boot=400).tasks["t"]
    assert t.mmrv == 0.0
    assert t.mmrv_ci[0] < 0.0 <= t.mmrv_ci[1]
    assert t.pearson_ci[0] <= t.pearson <= t.pearson_ci[1]

"""perception_gap.wording: known answers for every rule, both signs, and the sentences built from it."""

from __future__ import annotations

import math

import pytest

from perception_gap.commands.output import fmt
from perception_gap.wording import MISSING, pct, points, sig, signed, stops, times


@pytest.mark.parametrize("x, text", [
    (1, "1"), (1.0, "1"), (0.52, "0.52"), (0.0562551, "0.0563"), (0.000382, "3.82e-4"), (5.57e-06, "5.57e-6"),
    (-76496.3, "-76,496"), (1234.5, "1234"), (99.96, "100"), (0.0, "0"), (-0.0004, "-4e-4"), (12345, "12,345"),
    (None, MISSING), (math.nan, MISSING), (math.inf, MISSING), (True, "yes"), ("pixel", "pixel"),
])
def test_sig_known_answers(x, text):
    assert sig(x) == text


def test_sig_keeps_zeros_for_columns_and_scientific_only_below_1e_minus_3():
    assert sig(0.52, keep_zeros=True) == "0.520" and sig(1.0, keep_zeros=True) == "1.00"
    assert sig(0.001) == "0.001" and sig(0.000999) == "9.99e-4"
    assert "e" not in sig(-76496.0) and "e" not in sig(3.2e7)


def test_cli_numbers_share_the_format():
    assert [fmt(v) for v in (1, 0.000382, 5.57e-06, -76496.0, None, [0.5, 2.0])] == \
        ["1", "3.82e-4", "5.57e-6", "-76,496", "-", "[0.5, 2]"]


def test_percent_points_stops_and_factors_read_right_for_both_signs():
    assert (pct(0.28), pct(0.004), pct(0.0), pct(1.14)) == ("28%", "0.4%", "0%", "114%")
    assert points(0.28, 0.04) == "24 percentage points more"
    assert points(0.04, 0.28) == "24 percentage points fewer"
    assert points(0.1, 0.1) == "the same share"
    # 2**-1.09 = 0.4697: sim darker at 47% of real's luminance; 2**1.09 = 2.13 -> 213%
    assert stops(-1.09) == "1.09 stops darker (luminance 47% of the other's)"
    assert stops(1.09) == "1.09 stops brighter (luminance 213% of the other's)"
    assert times(1001.2) == "1,000x" and times(0.47) == "0.47x" and times(math.nan) == MISSING
    assert (signed(0.12), signed(-0.12), signed(0)) == ("+0.12", "-0.12", "0")


def test_gate_words_one_each():
    from perception_gap.wording import FAIL, PASS, SKIP, gate_word

    assert [gate_word(x) for x in ("passed", "failed", "skipped", True, False)] == [PASS, FAIL, SKIP, PASS, FAIL]
    assert (PASS, FAIL, SKIP) == ("PASS", "FAIL", "SKIP")


def test_white_balance_action_names_only_the_gains_that_moved():
    """Red gained 1.25x in 8-bit values (1.25**2.2 in linear light), blue and green untouched: the
    action asks for R/G only, at the gain the title states, never for a ±0% on B/G."""
    import numpy as np

    from tests.test_plumbing import image_set, run
    from tests.test_unpaired_colour import _warm_scenes

    real = _warm_scenes(3, 12)
    sim = [np.clip(a.astype(float) * np.array([1.25, 1.0, 1.0]), 0, 255).astype(np.uint8) for a in real]
    keys = [f"k{i}" for i in range(12)]
    (wb,) = [f for f in run(image_set("s", "sim", sim, keys=keys), image_set("r", "real", real, keys=keys))
             if f.code == "white_balance"]
    gain = float(wb.evidence["gain_r_sim_over_real"])
    assert gain == pytest.approx(1.25 ** 2.2, rel=0.05) and "B/G gain x1.00" in wb.title
    assert f"at least ±{pct(gain - 1)} on R/G, or match" in wb.action
    assert "B/G" not in wb.action and "0%" not in wb.action

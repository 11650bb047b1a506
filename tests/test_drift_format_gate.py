"""Drift's format gate at large n: the binomial tail matches exact rational arithmetic past a
thousand frames, and a 1,200-frame current set with one greyscale frame runs to the end."""

from __future__ import annotations

import decimal
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from PIL import Image

from perception_gap import cli
from perception_gap.workflows import drift_gates


def _exact_tail(k: int, n: int, p: Fraction) -> float:
    """P(X >= k), X ~ Binomial(n, p), in exact rational arithmetic (an independent reference),
    summed over the shorter side of k."""
    def term(i: int) -> Fraction:
        return math.comb(n, i) * p ** i * (1 - p) ** (n - i)

    if k > n // 2:
        return float(sum(term(i) for i in range(k, n + 1)))
    return float(1 - sum(term(i) for i in range(k)))


@pytest.mark.parametrize("k", [1, 20, 35, 60, 1200])
def test_binomial_tail_past_a_thousand_frames_matches_exact_arithmetic(k):
    p = Fraction(1, 60)
    got = drift_gates.binomial_tail(k, 1200, float(p))
    want = _exact_tail(k, 1200, p)
    assert math.isfinite(got) and got == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_binomial_tail_edges():
    assert drift_gates.binomial_tail(0, 5000, 0.3) == 1.0
    assert drift_gates.binomial_tail(1, 5000, 0.0) == 0.0
    assert drift_gates.binomial_tail(3, 100_000, 1e-5) == pytest.approx(_decimal_tail(3, 100_000, "1e-5"), rel=1e-9)


def _decimal_tail(k: int, n: int, p: str) -> float:
    """P(X >= k) = 1 - P(X < k) in 60-digit decimal arithmetic (an independent reference; the exact
    rationals of `_exact_tail` take seconds at n = 100,000)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        q = decimal.Decimal(p)
        below = sum(math.comb(n, i) * q ** i * (1 - q) ** (n - i) for i in range(k))
        return float(1 - below)


def test_drift_with_1200_current_frames_and_one_grey_frame(tmp_path):
    """The case that crashed: a 1,200-frame current set with one greyscale frame, against a
    baseline holding one in sixty (the tail's sum overflowed a float at that rate)."""
    rng = np.random.default_rng(1)
    for name, n in (("base", 60), ("cur", 1200)):
        (tmp_path / name).mkdir()
        for i in range(n):
            a = rng.integers(90, 160, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(a).save(tmp_path / name / f"{i:04d}.png")
    for name in ("base", "cur"):
        Image.fromarray(np.full((8, 8), 128, np.uint8)).save(tmp_path / name / "0000.png")
    db = str(tmp_path / "d.duckdb")
    for name in ("base", "cur"):
        assert cli.main(["index", str(tmp_path / name), "--set", name, "--domain", "real", "--db", db, "-q"]) == 0
    out = tmp_path / "o"
    rc = cli.main(["drift", "--baseline", "base", "--current", "cur", "--encoders", "none", "--out", str(out),
                   "--db", db, "-q"])
    res = json.loads((out / "results.json").read_text())
    fmt = next(g for g in res["drift"]["gates"] if g["name"] == "format")
    # 1 odd frame in 1200 where the baseline has 1 in 60: fewer than expected, the gate passes
    assert fmt["passed"] and fmt["value"] == pytest.approx(1 / 1200 - 1 / 60) and rc in (0, 1)
    assert fmt["detail"]["p_value"] == pytest.approx(1 - (59 / 60) ** 1200, rel=1e-9)

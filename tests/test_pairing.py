"""Pairing frames by pair key: one rule (first frame of a key on each side), duplicates reported."""

from __future__ import annotations

import logging

import numpy as np

from perception_gap.pairing import pair_by_key
from perception_gap.statistics.records import FrameRecord, SetRecords, paired


def test_pairs_come_in_sim_order_and_skip_keys_on_one_side_only():
    p = pair_by_key(["c", "a", "x", "b"], ["a", "b", "c", "y"])
    assert p.pairs == ((0, 2), (1, 0), (3, 1))
    assert p.duplicates_sim == () and p.duplicates_real == () and p.note() is None
    np.testing.assert_array_equal(p.array(), [[0, 2], [1, 0], [3, 1]])
    assert p.array().dtype == np.int64 and pair_by_key([], ["a"]).array().shape == (0, 2)


def test_first_occurrence_wins_on_each_side_and_duplicates_are_returned():
    p = pair_by_key(["a", "b", "a", "a"], ["b", "a", "b", "a"])
    assert p.pairs == ((0, 1), (1, 0))  # each position paired once, with the first twin
    assert p.duplicates_sim == ("a",) and p.duplicates_real == ("b", "a")
    assert "sim: 1 ('a')" in p.note() and "real: 2 ('b', 'a')" in p.note()


def test_frames_without_a_key_pair_with_nothing():
    p = pair_by_key([None, "a", None], [None, "a"])
    assert p.pairs == ((1, 1),) and p.duplicates_sim == ()


def test_paired_records_keep_the_first_twin_and_log_the_duplicate(caplog):
    sim = SetRecords("s", "sim", (FrameRecord("k", episode="first"), FrameRecord("k", episode="second")))
    real = SetRecords("r", "real", (FrameRecord("k", episode="r1"), FrameRecord("k", episode="r2")))
    with caplog.at_level(logging.WARNING, logger="perception_gap.pairing"):
        pairs = paired(sim, real)
    assert [(s.episode, r.episode) for s, r in pairs] == [("first", "r1")]
    assert "duplicate pair keys" in caplog.text and "'k'" in caplog.text

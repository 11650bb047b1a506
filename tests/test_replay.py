"""Replay error: rotation angle against an independent reference, known offsets and onsets given back."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from perception_gap.errors import InputError
from perception_gap.geometry.replay import (
    TRANSLATION_TOL_M,
    change_point,
    replay_episode,
    replay_findings,
    rotation_error_deg,
    summarize_replay,
)


def _wxyz(rot: Rotation) -> np.ndarray:
    return np.roll(rot.as_quat(), 1, axis=1)  # scipy is (x, y, z, w)


def test_rotation_error_matches_the_rotation_matrix_angle():
    a, b = Rotation.random(200, random_state=1), Rotation.random(200, random_state=2)
    qa, qb = _wxyz(a), _wxyz(b)
    qb[::2] *= -1  # q and -q are the same rotation
    qa[1::3] *= 3.0  # unnormalized input
    rel = a.as_matrix().transpose(0, 2, 1) @ b.as_matrix()
    ref = np.degrees(np.arccos(np.clip((np.trace(rel, axis1=1, axis2=2) - 1) / 2, -1, 1)))
    np.testing.assert_allclose(rotation_error_deg(qa, qb), ref, atol=1e-6)
    small = Rotation.from_rotvec([[1e-7, 0, 0]])
    assert rotation_error_deg(_wxyz(Rotation.identity(1)), _wxyz(small))[0] == pytest.approx(np.degrees(1e-7), rel=1e-6)
    with pytest.raises(InputError, match="non-zero"):
        rotation_error_deg(np.zeros((1, 4)), qa[:1])


def _traj(n: int = 60):
    rng = np.random.default_rng(0)
    steps = np.arange(n)
    p = np.cumsum(rng.normal(0, 0.01, (n, 3)), axis=0)
    q = _wxyz(Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.02, (n, 3)), axis=0)))
    return steps, p, q


def test_constant_offset_from_the_start_is_given_back_as_tracking_offset():
    steps, p, q = _traj()
    offset = np.array([0.006, -0.008, 0.0])  # 10 mm
    e = replay_episode("e0", steps, p, q, p + offset, q)
    np.testing.assert_allclose(e.translation_error, 0.01, rtol=1e-9)
    np.testing.assert_allclose(e.rotation_error_deg, 0.0, atol=1e-6)
    assert e.divergence_step == 0 and e.causes == ("tracking_offset",)
    r = summarize_replay([e])
    assert r.translation_mean == pytest.approx(0.01) and r.divergence_step == 0
    assert [f.code for f in replay_findings(r)] == ["tracking_offset"]


@pytest.mark.parametrize("onset", [17, 35])
def test_onset_at_first_contact_is_given_back_as_contact_divergence(onset):
    steps, p, q = _traj()
    rng = np.random.default_rng(onset)
    drift = np.zeros((len(steps), 3))
    drift[onset:, 0] = 0.002 + 0.001 * np.arange(len(steps) - onset)  # a jump at contact, then a growing slip
    noise = rng.normal(0, 0.0003, (len(steps), 3))  # well inside tolerance
    contact = steps >= onset
    e = replay_episode("e1", steps, p, q, p + drift + noise, q, contact)
    assert e.divergence_step == onset and e.first_contact_step == onset
    assert e.causes == ("contact_divergence",)
    # the same divergence with no contact logged is a tracking problem, not contact
    assert replay_episode("e1", steps, p, q, p + drift + noise, q).causes == ("tracking_offset",)


def test_error_within_tolerance_never_diverges():
    steps, p, q = _traj()
    rng = np.random.default_rng(3)
    e = replay_episode("e", steps, p, q, p + rng.normal(0, TRANSLATION_TOL_M / 10, p.shape), q, steps > 20)
    assert e.divergence_step is None and e.causes == ()
    assert replay_findings(summarize_replay([e])) == []


def test_change_point_on_a_pure_ramp_finds_its_start():
    y = np.concatenate([np.zeros(30), 0.5 * np.arange(1, 21)])
    assert change_point(y)[0] == 30
    assert change_point(np.ones(50))[1] == pytest.approx(0.0)

"""Geometry and the policy itself: the checks after the appearance gap hunt, as pure math.

This folder owns the numbers of three offline checks on data a team already has, each a pure
function on arrays that returns a frozen dataclass (no files, no catalog, no printing):
`camera` (a validated OpenCV pinhole + Brown-Conrady camera and its projection),
`reprojection` (the sim-vs-real reprojection error over a workspace grid and its growth away from
the grid centre), `camera_fit` (the principal point, focal, k1, translation and rotation offsets
that explain it: `intrinsics` / `extrinsics`), `coverage` (training initial states and failures on
the same grid: `thin_coverage`, or `extrinsics` when the error grows toward the failures), `replay` (logged real vs open-loop sim
end-effector trajectories: per-step translation and geodesic rotation error, divergence onset,
`tracking_offset` / `contact_divergence`) and `policy` (a frozen policy's sim vs real actions
per dimension, `action_collapse` / `policy_obs_mismatch`). Loading a policy (torch) lives in
`perception_gap.encoders.policy`; reading the input files lives in `perception_gap.workflows.check_inputs`
(the jobs that run these checks in `perception_gap.workflows.checks`), reading the catalog's frames
for a policy in `perception_gap.workflows.policy_check`.
"""

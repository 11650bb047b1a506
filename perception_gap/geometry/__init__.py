"""Geometry and the policy itself: the checks after the appearance gap hunt, as pure math.

This folder owns the numbers of three offline checks on data a team already has, each a pure
function on arrays that returns a frozen dataclass (no files, no catalog, no printing):
`camera` (a validated OpenCV pinhole + Brown-Conrady camera and its projection),
`reprojection` (the sim-vs-real reprojection error over a workspace grid, its growth away from
the grid centre and the `extrinsics` finding), `replay` (logged real vs open-loop sim
end-effector trajectories: per-step translation and geodesic rotation error, divergence onset,
`tracking_offset` / `contact_divergence`) and `policy` (a frozen policy's sim vs real actions
per dimension, `action_collapse` / `policy_obs_mismatch`). Loading a policy (torch) lives in
`encoders.policy`; reading files and the catalog lives in `perception_gap.commands`.
"""

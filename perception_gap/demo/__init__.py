"""A built-in paired demo: a MuJoCo tabletop rendered as "sim" and through a camera model as "real".

`build_demo(out_dir)` writes a small, deterministic paired data set that exercises every part
of the engine without any data on disk:

- a MuJoCo scene (a checkered wooden table plane, a red cube, a green cylinder and a blue cube,
  a key light, a fixed camera and a mocap "gripper"), scripted per episode along smooth random
  paths; per step it records the action of a scripted expert reaching for the red cube
  (`expert_action`: the gripper's offset to a pre-grasp point above the cube and the yaw back to
  square, so an action is what its frame shows) and proprio (gripper position, yaw and pitch in
  radians, then each object's position);
- sim frames: the render itself (RGB PNG, depth float32 `.npy` in metres, an instance-id mask
  PNG per frame and a mask-categories JSON);
- "real" frames: the same states through a physically motivated camera model (lens blur,
  +0.15 stop exposure, a mild white-balance shift, vignetting, shot + read noise, JPEG q90;
  depth as uint16 millimetres with multiplicative noise and ~8% dropout at object edges and
  random blobs, so the demo shows a `depth_dropout` gap: a gap, not a bug);
- a colour-segmentation detector ("colour") run on both sides, and ground truth for both (the
  sim's instance masks; for "real" the same states' segmentation at the real camera's size),
  as COCO files keyed by the file names the manifest indexes;
- a JSONL manifest naming both sets (`demo_sim`, `demo_real`).

`inject=CODE` adds one plumbing fault (a code of docs/contract.md) so that it is the top finding of
`stats`; see `INJECTIONS`. Everything is pure file generation: no catalog, no printing.

Modules: `scene` (MJCF scene, episodes, rendering), `camera` (the "real" camera model, depth
noise, JPEG), `detector` (colour detector, mask boxes, COCO files), `build` (`build_demo`, the
injections, `DemoFiles`).
"""

from perception_gap.demo.build import INJECTIONS, REAL_SET, SIM_SET, DemoFiles, build_demo
from perception_gap.demo.camera import (
    REAL_BLUR_SIGMA,
    REAL_DEPTH_DROPOUT,
    REAL_DEPTH_REL_NOISE,
    REAL_EXPOSURE_STOPS,
    REAL_FULL_WELL,
    REAL_JPEG_QUALITY,
    REAL_READ_NOISE,
    REAL_VIGNETTE,
    REAL_WB_GAINS,
    camera_model,
)
from perception_gap.demo.detector import colour_detect
from perception_gap.demo.scene import OBJECTS

__all__ = ["DemoFiles", "INJECTIONS", "SIM_SET", "REAL_SET", "OBJECTS", "build_demo", "colour_detect",
           "camera_model", "REAL_EXPOSURE_STOPS", "REAL_WB_GAINS", "REAL_BLUR_SIGMA", "REAL_VIGNETTE",
           "REAL_FULL_WELL", "REAL_READ_NOISE", "REAL_JPEG_QUALITY", "REAL_DEPTH_REL_NOISE", "REAL_DEPTH_DROPOUT"]

"""`camera-model`: the real camera measured against the sim, written as camera_model.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from perception_gap.commands.output import check_outputs, progress_bar, say
from perception_gap.commands.parsing import Parents


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `camera-model` subparser."""
    cm = sub.add_parser("camera-model", parents=[parents.common], help="measure the real camera against the sim: camera_model.json",
                        description="Fit the real camera's factors (exposure, white balance, tone curve, vignetting, "
                                    "blur, sensor noise, JPEG, and the pipeline fixes the diagnoses call for) from a "
                                    "sim set and a real set, and write them as camera_model.json for a renderer or "
                                    "an augmentation (perception_gap.apply_camera_model).")
    cm.add_argument("--sim", required=True, help="sim set name")
    cm.add_argument("--real", required=True, help="real set name")
    cm.add_argument("--out", required=True, help="output folder (camera_model.json)")
    cm.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.camera.model import describe
    from perception_gap.catalog import Catalog
    from perception_gap.outputs import dumps, write_files
    from perception_gap.workflows.camera import CAMERA_MODEL_FILE, camera_model_job

    out_dir = Path(args.out)
    check_outputs(out_dir)
    progress, close = progress_bar(args, "camera model")
    with Catalog(args.db, wait=args.wait, create=False) as cat:
        try:
            model, _ = camera_model_job(cat, args.sim, args.real, workers=args.workers, progress=progress)
        finally:
            close()
    path = out_dir / CAMERA_MODEL_FILE
    write_files([(path, dumps(model.to_dict()))])
    say(args, f"camera model of {args.real!r} against {args.sim!r} ({model.basis}, {model.n} "
              f"{'pairs' if model.basis == 'pairs' else 'frames a side'}): {len(model.factors)} factor(s)")
    for f in model.factors:
        ci = "; ".join(f"{k} [{lo:g}, {hi:g}]" for k, (lo, hi) in f.ci.items())
        say(args, f"  {f.code}: {describe(f)}{' (pipeline fix)' if f.bug else ''}{f'  ({ci})' if ci else ''}")
    for x in model.not_modelled:
        say(args, f"  not modelled: {x['code']}: {x['reason']}")
    say(args, f"written: {path}")
    return 0

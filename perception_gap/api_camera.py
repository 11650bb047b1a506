"""The camera model in the Python API: the real camera measured against the sim (`camera_model`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from perception_gap.camera.model import CameraModel
from perception_gap.catalog import Catalog

PathLike = str | os.PathLike[str]
Progress = Callable[[int, int], None]


def camera_model(catalog: Catalog, sim: str, real: str, *, out: PathLike | None = None, workers: int | None = None,
                 random_state: int = 0, progress: Progress | None = None) -> CameraModel:
    """The real camera measured against the sim: the factors that turn sim frames into real-looking ones.

    Fitted from the raw statistics' findings and a sample of at most 256 pairs (or frames a side
    when the sets share no pair keys); no encoder runs (docs/camera-model.md).

    Args:
        catalog: an open, writable catalog (the statistics are cached in it).
        sim: the sim set's name.
        real: the real set's name.
        out: when given, write `camera_model.json` into this folder.
        workers: processes for the statistics (default: all cores).
        random_state: the sample, the tiles and the bootstrap draws.
        progress: called as progress(done, total) by the statistics.

    Returns:
        CameraModel: `factors` (code, params, ci, method, bug), `to_dict()`, `save(path)`; apply it
        with `apply_camera_model(frame, model)`.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog()) as cat:
        ...     model = pg.camera_model(cat, "sim", "real", workers=1)
        >>> model.codes()[0]
        'channel_swap'
    """
    from perception_gap.workflows.camera import CAMERA_MODEL_FILE, camera_model_job

    model, _ = camera_model_job(catalog, sim, real, workers=workers, random_state=random_state, progress=progress)
    if out is not None:
        from perception_gap.outputs import check_outputs, dumps, write_files

        check_outputs(out)
        write_files([(Path(out) / CAMERA_MODEL_FILE, dumps(model.to_dict()))])
    return model

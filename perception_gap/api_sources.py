"""The Python API of the container sources, the boxes and the sets (part of `perception_gap.api`).

Frames inside videos, LeRobot datasets, robomimic HDF5 files and ROS bags are indexed like files
(keyed by the container's content hash and the frame index, decoded in one pass per container);
boxes come from COCO JSON (ground truth or a detector) or instance-id masks. Each function
indexes into an open catalog and returns its report; the command line's `index` calls the same.
`list_sets`, `rename_set` and `drop_set` are the `sets`, `rename` and `drop` commands.
"""

from __future__ import annotations

import os
from pathlib import Path

from perception_gap.catalog import Catalog
from perception_gap.catalog.sets import SetSummary
from perception_gap.ingest import IndexReport, Progress
from perception_gap.ingest.annotations import AnnotationReport

PathLike = str | os.PathLike[str]


def index_video(catalog: Catalog, path: PathLike, set_name: str, domain: str, *, tags: list[str] | None = None,
                workers: int | None = None, progress: Progress | None = None) -> IndexReport:
    """Index a video file, or a folder of them (one episode per file), as one set.

    Pair key = `<episode>/<frame index>`; the episode is the file's name without its suffix.

    Args:
        catalog: an open, writable catalog.
        path: a video file (.mp4, .mkv, .avi, .mov, .webm) or a folder of them.
        set_name: the set to (re)index.
        domain: `sim` or `real`.
        tags: the set's tags.
        workers: decoding processes (default: all cores).
        progress: a callback progress(done, total).

    Returns:
        The `IndexReport`; a frame is keyed by its video's content hash and its index.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> db = example_catalog()  # the example frames, also as db.parent / "sim.mp4"
        >>> with pg.open_catalog(db) as cat:
        ...     pg.index_video(cat, db.parent / "sim.mp4", "sim_video", "sim", workers=1).usable
        8
    """
    from perception_gap.ingest.video import index_video as _index

    return _index(catalog, Path(path), set_name, domain, tags=tags, workers=workers, progress=progress)


def index_hdf5(catalog: Catalog, path: PathLike, camera: str, set_name: str, domain: str, *,
               proprio: list[str] | None = None, tags: list[str] | None = None, workers: int | None = None,
               progress: Progress | None = None) -> IndexReport:
    """Index one camera of a robomimic-layout HDF5 file (`data/demo_N/obs/<camera>`, `actions`) as one set.

    Args:
        catalog: an open, writable catalog.
        path: the HDF5 file.
        camera: the obs key of the images (e.g. `agentview_image`).
        set_name: the set to (re)index.
        domain: `sim` or `real`.
        proprio: obs keys concatenated into proprio (e.g. `["robot0_eef_pos"]`).
        tags: the set's tags.
        workers: decoding processes (default: all cores).
        progress: a callback progress(done, total).

    Returns:
        The `IndexReport`; a frame is keyed by the file's content hash, its dataset and its index.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()  # the example frames, also as one demo of a robomimic file
        >>> with pg.open_catalog(files.root / "gap.duckdb") as cat:
        ...     pg.index_hdf5(cat, files.hdf5, "agentview_image", "sim_h5", "sim", proprio=["eef_pos"], workers=1).usable
        8
    """
    from perception_gap.ingest.hdf5 import index_hdf5 as _index

    return _index(catalog, Path(path), camera, set_name, domain, proprio=proprio, tags=tags, workers=workers,
                  progress=progress)


def index_lerobot(catalog: Catalog, root: PathLike, camera: str, set_name: str, domain: str, *,
                  depth_camera: str | None = None, depth_unit: str | None = None, tags: list[str] | None = None,
                  workers: int | None = None, progress: Progress | None = None) -> IndexReport:
    """Index one camera of a local LeRobot dataset (v2.1 or v3.0) as one set.

    Args:
        catalog: an open, writable catalog.
        root: the dataset's folder (holding `meta/info.json`).
        camera: the camera feature (e.g. `observation.images.top`).
        set_name: the set to (re)index.
        domain: `sim` or `real`.
        depth_camera: the camera feature holding depth maps, with `depth_unit`.
        depth_unit: `m`, `mm`, `cm`, `tum` or units per metre.
        tags: the set's tags.
        workers: decoding processes (default: all cores).
        progress: a callback progress(done, total).

    Returns:
        The `IndexReport`; a frame is keyed by its video's (or Parquet file's) content hash and index.

    Examples:
        A folder that is no dataset is one error naming what is missing:

        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> db = example_catalog()
        >>> with pg.open_catalog(db) as cat:  # doctest: +ELLIPSIS
        ...     pg.index_lerobot(cat, db.parent, "observation.images.top", "robot", "real")
        Traceback (most recent call last):
        perception_gap.errors.InputError: Expected a LeRobot dataset at '...': meta/info.json not found.
        >>> with pg.open_catalog("gap.duckdb") as cat:  # a dataset of yours  # doctest: +SKIP
        ...     pg.index_lerobot(cat, "datasets/pick_cube", "observation.images.top", "real", "real").usable
        1200
    """
    from perception_gap.ingest.lerobot import index_lerobot as _index

    return _index(catalog, Path(root), camera, set_name, domain, depth_camera=depth_camera, depth_unit=depth_unit,
                  tags=tags, workers=workers, progress=progress)


def index_rosbag(catalog: Catalog, path: PathLike, topic: str, set_name: str, domain: str, *,
                 depth_topic: str | None = None, tolerance: float | None = None, tags: list[str] | None = None,
                 workers: int | None = None, progress: Progress | None = None) -> IndexReport:
    """Index one image topic of a ROS 1 bag, a ROS 2 bag (sqlite3 or MCAP) or a folder of bags as one set.

    Args:
        catalog: an open, writable catalog.
        path: the bag, or a folder of bags (one episode per bag).
        topic: a `sensor_msgs/Image` or `CompressedImage` topic.
        set_name: the set to (re)index.
        domain: `sim` or `real`.
        depth_topic: depth images (16UC1 mm, 32FC1 m) paired to the nearest colour frame.
        tolerance: the largest time difference that pairs depth to colour, seconds (default 0.02).
        tags: the set's tags.
        workers: decoding processes (default: all cores).
        progress: a callback progress(done, total).

    Returns:
        The `IndexReport`; one episode per bag, a frame keyed by its bag's content hash and message index.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> folder = write_examples().root
        >>> with pg.open_catalog(folder / "gap.duckdb") as cat:  # doctest: +ELLIPSIS
        ...     pg.index_rosbag(cat, folder, "/camera/color/image_raw", "robot", "real")
        Traceback (most recent call last):
        perception_gap.errors.InputError: Expected `--rosbag` to be ... got '...' (a folder holding no bag).
        >>> with pg.open_catalog("gap.duckdb") as cat:  # bags of yours  # doctest: +SKIP
        ...     pg.index_rosbag(cat, "bags/run1.mcap", "/camera/color/image_raw", "real", "real").usable
        900
    """
    from perception_gap.ingest.rosbag import SYNC_TOLERANCE
    from perception_gap.ingest.rosbag import index_rosbag as _index

    return _index(catalog, Path(path), topic, set_name, domain, depth_topic=depth_topic,
                  tolerance=SYNC_TOLERANCE if tolerance is None else tolerance, tags=tags, workers=workers,
                  progress=progress)


def attach_coco(catalog: Catalog, path: PathLike, set_name: str, source: str) -> AnnotationReport:
    """Attach the boxes of a COCO JSON file to an indexed set (joined by image file name and category name).

    Args:
        catalog: an open, writable catalog.
        path: the COCO file.
        set_name: an indexed set.
        source: `gt` for ground truth, or the detector's name; a source's earlier boxes are replaced.

    Returns:
        The `AnnotationReport` (boxes, frames, clipped, dropped, unmatched).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> db = example_catalog()
        >>> with pg.open_catalog(db) as cat:
        ...     r = pg.attach_coco(cat, db.parent / "coco.json", "sim", "detector")
        >>> r.n_boxes, r.n_images
        (8, 8)
    """
    from perception_gap.ingest.annotations import attach_coco as _attach

    return _attach(catalog, Path(path), set_name, source)


def attach_masks(catalog: Catalog, folder: PathLike, set_name: str, *,
                 categories: dict[int, str] | PathLike | None = None) -> AnnotationReport:
    """Attach ground-truth boxes from instance-id masks (`<folder>/<pair key>.png`) to an indexed set.

    Args:
        catalog: an open, writable catalog.
        folder: the masks, one per pair key (.png or .npy; 0 is background).
        set_name: an indexed set.
        categories: instance id -> category name, or a JSON file of it; None: the id is the name.

    Returns:
        The `AnnotationReport`; its `source` is `gt` (masks are ground truth).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> db = example_catalog()
        >>> with pg.open_catalog(db) as cat:
        ...     r = pg.attach_masks(cat, db.parent / "masks", "sim", categories={1: "box"})
        >>> r.n_boxes, r.source
        (8, 'gt')
    """
    from perception_gap.ingest.annotations import attach_masks as _attach
    from perception_gap.ingest.annotations import load_mask_categories

    names = categories if isinstance(categories, dict) or categories is None else \
        load_mask_categories(Path(categories))
    return _attach(catalog, Path(folder), set_name, categories=names)


def list_sets(catalog: Catalog) -> list[SetSummary]:
    """Every set of the catalog, by name: domain, frames, usable, skipped, source.

    Args:
        catalog: an open catalog.

    Returns:
        One `SetSummary` per set (`to_dict()` for its JSON form).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog(), read_only=True) as cat:
        ...     [(s.name, s.domain, s.usable) for s in pg.list_sets(cat)]
        [('real', 'real', 8), ('sim', 'sim', 8)]
    """
    return catalog.set_summaries()


def rename_set(catalog: Catalog, old: str, new: str) -> None:
    """Rename a set; its frames and boxes follow (earlier runs keep the names they ran with).

    Args:
        catalog: an open, writable catalog.
        old: the set's name.
        new: its new name (no set may have it).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog()) as cat:
        ...     pg.rename_set(cat, "real", "robot")
        ...     [s.name for s in pg.list_sets(cat)]
        ['robot', 'sim']
    """
    from perception_gap.ingest import validate_set_name

    validate_set_name(new)
    catalog.rename_set(old, new)


def drop_set(catalog: Catalog, name: str) -> int:
    """Remove a set, its frames and its boxes; cached statistics and embeddings stay (keyed by content).

    Args:
        catalog: an open, writable catalog.
        name: the set.

    Returns:
        The number of frames the set had.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog()) as cat:
        ...     pg.drop_set(cat, "real"), [s.name for s in pg.list_sets(cat)]
        (8, ['sim'])
    """
    return catalog.drop_set(name)

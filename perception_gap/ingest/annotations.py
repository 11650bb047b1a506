"""Attach boxes to indexed frames: COCO files (ground truth or detector output) and
simulator instance-segmentation masks.

COCO exports renumber image and category ids, so boxes join frames by image *file name* and
categories by *name*. Boxes partly outside their frame are clipped (and counted), boxes wholly
outside are dropped (and counted); `area`, `iscrowd` and scores are kept as the file gives
them, so the numbers match the official evaluator's on the same file.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.catalog import Catalog
from perception_gap.errors import FrameError, InputError

log = logging.getLogger(__name__)

GT = "gt"
MASK_EXTS = (".png", ".npy", ".tif", ".tiff")


@dataclass(frozen=True)
class AnnotationReport:
    """What one attach call did.

    Attributes:
        set_name, source: where the boxes went (`gt` or a detector name).
        n_images: images of the file (or masks) matched to a frame.
        n_boxes: boxes stored.
        n_clipped, n_dropped: boxes clipped to their frame / dropped as wholly outside or empty.
        unmatched: image file names (or mask files) that match no usable frame of the set.
        n_unlabelled: mask instances dropped because their id is not in `--mask-categories`
            (unlabelled render layers: walls, the robot); unlabelled_ids: those ids, ascending.
    """

    set_name: str
    source: str
    n_images: int
    n_boxes: int
    n_clipped: int
    n_dropped: int
    unmatched: tuple[str, ...] = field(default_factory=tuple)
    n_unlabelled: int = 0
    unlabelled_ids: tuple[int, ...] = ()


def validate_source(source: str) -> str:
    if not isinstance(source, str) or not source.strip() or any(ord(c) < 32 for c in source):
        raise InputError(f"Expected `--source` to be `gt` or a detector name, got {source!r}.")
    return source


def _frame_index(catalog: Catalog, set_name: str) -> tuple[dict[str, tuple[str, int, int]], dict[str, list[str]]]:
    """Lookups from a COCO `file_name` to a frame: by path suffix and by base name."""
    if catalog.get_set(set_name) is None:
        known = ", ".join(repr(s) for s in catalog.list_sets()) or "none indexed yet"
        raise InputError(f"Unknown set {set_name!r} for --set (known: {known}); index its frames first.")
    frames = {p: (p, w, h) for p, _key, w, h in catalog.frame_sizes(set_name)}
    by_name: dict[str, list[str]] = {}
    for p in frames:
        by_name.setdefault(Path(p).name, []).append(p)
    return frames, by_name


def _match(file_name: str, frames: dict[str, tuple[str, int, int]], by_name: dict[str, list[str]]) -> str | None:
    """The frame a COCO file name refers to: a unique path suffix, else a unique base name."""
    rel = file_name.replace("\\", "/").lstrip("./")
    hits = [p for p in frames if p.replace("\\", "/").endswith("/" + rel)]
    if len(hits) == 1:
        return hits[0]
    cands = by_name.get(Path(rel).name, [])
    return cands[0] if len(cands) == 1 else None


def attach_coco(catalog: Catalog, path: Path, set_name: str, source: str) -> AnnotationReport:
    """Read a COCO file and store its boxes for the frames of a set (replacing that source's).

    Raises:
        InputError: unreadable or malformed JSON, an unknown set, or no image of the file
            matching any frame of the set.
    """
    from perception_gap import detection

    validate_source(source)
    from perception_gap.ingest.frames import read_bytes  # refuses a FIFO or device instead of waiting on it

    try:
        obj = json.loads(read_bytes(Path(path)).decode("utf-8"))
    except FrameError as e:
        raise InputError(f"Expected `--coco` to be an existing regular file, got {str(path)!r} ({e}).") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"Cannot read COCO file {str(path)!r}: not valid JSON ({str(e).splitlines()[0]}).") from None
    parsed = detection.parse_coco(obj, kind="gt" if source == GT else "det")
    frames, by_name = _frame_index(catalog, set_name)
    rows: list[dict[str, Any]] = []
    unmatched: list[str] = []
    covered: list[str] = []
    n_clipped = n_dropped = 0
    for file_name in sorted(parsed.boxes):  # every image of the file, with or without boxes
        frame = _match(file_name, frames, by_name)
        if frame is None:
            unmatched.append(file_name)
            continue
        covered.append(frame)
        boxes = parsed.boxes.get(file_name, [])
        _, w, h = frames[frame]
        kept, c, d = detection.clip_boxes(boxes, w, h) if w and h else (boxes, 0, 0)
        n_clipped += c
        n_dropped += d
        rows.extend({"rgb_path": frame, "category": b.category, "bbox": b.bbox, "score": b.score,
                     "area": b.area, "iscrowd": b.iscrowd} for b in kept)
    n_images = len(covered)
    if n_images == 0:
        raise InputError(f"No image of {str(path)!r} matches a frame of set {set_name!r} by file name "
                         f"(first: {(unmatched or ['none'])[0]!r}).")
    catalog.replace_annotations(set_name, source, rows, covered)
    if unmatched:
        log.warning("%d images of %s match no frame of %s", len(unmatched), path, set_name)
    return AnnotationReport(set_name=set_name, source=source, n_images=n_images, n_boxes=len(rows),
                            n_clipped=n_clipped, n_dropped=n_dropped, unmatched=tuple(sorted(unmatched)))


def load_mask_categories(path: Path | None) -> dict[int, str] | None:
    """`{"1": "cube", "2": "bowl"}` (instance id -> category name) from a JSON file."""
    if path is None:
        return None
    from perception_gap.ingest.frames import read_bytes

    try:
        raw = json.loads(read_bytes(Path(path)).decode("utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("expected a JSON object")
        return {int(k): str(v) for k, v in raw.items()}
    except FrameError as e:
        raise InputError(f"Expected `--mask-categories` to be an existing regular file, got {str(path)!r} ({e}).") from None
    except (ValueError, json.JSONDecodeError) as e:
        raise InputError(f"Expected `--mask-categories` to map instance ids to names as JSON, got {str(path)!r} ({e}).") from None


def _read_mask(path: Path) -> np.ndarray:
    """An (H, W) array of instance ids; FrameError saying what is wrong with the file otherwise."""
    from perception_gap.ingest.frames import decode_depth, probe, read_bytes

    data = read_bytes(path)
    header = probe(path, data)
    if header.channels != 1:
        raise FrameError(f"has {header.channels} channels ({header.mode}); an instance mask has one channel of "
                         f"integer ids")
    a = decode_depth(path, data)  # single-channel integer image or array, own dtype
    if not np.issubdtype(a.dtype, np.integer):
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            raise FrameError(f"holds {a.dtype} values that are not whole numbers (e.g. {a[bad].flat[0]:g}); an "
                             f"instance mask holds integer ids")
        a = a.astype(np.int64)
    return a


def attach_masks(catalog: Catalog, mask_dir: Path, set_name: str, *,
                 categories: dict[int, str] | None = None) -> AnnotationReport:
    """Ground-truth boxes from instance-id masks: `<mask_dir>/<pair key>.png` (or .npy) per frame."""
    from perception_gap import detection

    if not Path(mask_dir).is_dir():
        raise InputError(f"Expected `--masks` to be an existing folder, got {str(mask_dir)!r}.")
    frames = catalog.frame_sizes(set_name) if catalog.get_set(set_name) else None
    if frames is None:
        raise InputError(f"Unknown set {set_name!r} for --set; index its frames first.")
    rows: list[dict[str, Any]] = []
    unmatched: list[str] = []
    unusable: list[str] = []  # mask files found but not usable, each with its reason
    covered: list[str] = []
    unlabelled: set[int] = set()
    n_clipped = n_dropped = n_unlabelled = 0
    for rgb_path, key, w, h in frames:
        mask_path = next((Path(mask_dir) / f"{key}{ext}" for ext in MASK_EXTS
                          if (Path(mask_dir) / f"{key}{ext}").is_file()), None)
        if mask_path is None:
            unmatched.append(key)
            continue
        try:
            mask = _read_mask(mask_path)
        except FrameError as e:
            unusable.append(f"{mask_path.name}: {e}")
            continue
        if w and h and mask.shape != (h, w):
            unusable.append(f"{mask_path.name}: {mask.shape[1]}x{mask.shape[0]} pixels, its frame is {w}x{h}")
            continue
        covered.append(rgb_path)
        if categories is not None:  # ids the mapping lacks are dropped: count them, never silently
            missing = [i for i in np.unique(mask).tolist() if i != 0 and i not in categories]
            n_unlabelled += len(missing)
            unlabelled.update(missing)
        for b in detection.mask_to_boxes(mask, categories=categories):
            rows.append({"rgb_path": rgb_path, "category": b.category, "bbox": b.bbox, "score": None,
                         "area": b.area, "iscrowd": False})
    n_images = len(covered)
    if n_images == 0:
        if unusable:  # masks found, but unusable: say why
            raise InputError(f"No usable mask in {str(mask_dir)!r} for set {set_name!r}: {len(unusable)} found, none "
                             f"usable; first: {unusable[0]}.")
        raise InputError(f"No mask in {str(mask_dir)!r} matches a frame of set {set_name!r} "
                         f"(expected <pair key>.png, e.g. {(frames[0][1] if frames else 'frame') + '.png'!r}).")
    catalog.replace_annotations(set_name, GT, rows, covered)
    return AnnotationReport(set_name=set_name, source=GT, n_images=n_images, n_boxes=len(rows),
                            n_clipped=n_clipped, n_dropped=n_dropped, unmatched=tuple(unmatched + unusable),
                            n_unlabelled=n_unlabelled, unlabelled_ids=tuple(sorted(unlabelled)))

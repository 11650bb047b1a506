"""COCO ground-truth and detection-results objects -> validated boxes keyed by file and category name."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from perception_gap.detection.boxes import Box
from perception_gap.errors import InputError
from perception_gap.results import Result


@dataclass(frozen=True)
class ParsedCoco(Result):
    """A validated COCO object, keyed by image file name and category name.

    Attributes:
        kind: `gt` or `det`.
        boxes: file name -> boxes, in file order. Every listed image has an entry (possibly
            empty), so ground-truth images without objects still count in `coco_summary`.
        sizes: file name -> (width, height) in pixels, for images that state both.
        categories: category names in file order (empty for a bare results list).
        image_names: COCO image id -> file name (pass to `parse_coco` for a bare results list).
        category_names: COCO category id -> name (likewise).
        n_boxes: boxes kept.
        n_degenerate: boxes with w <= 0 or h <= 0 (kept here; `clip_boxes` drops them).
        n_crowd: crowd boxes.
        n_images_without_boxes: listed images with no box.
    """

    kind: str
    boxes: dict[str, list[Box]]
    sizes: dict[str, tuple[int, int]]
    categories: list[str]
    image_names: dict[int, str]
    category_names: dict[int, str]
    n_boxes: int
    n_degenerate: int
    n_crowd: int
    n_images_without_boxes: int


# -- parsing -----------------------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _finite(v: Any, what: str) -> float:
    if not _is_number(v) or not math.isfinite(float(v)):
        raise InputError(f"Expected {what} to be a finite number, got {v!r}.")
    return float(v)


def _bbox(v: Any, what: str) -> tuple[float, float, float, float]:
    if not isinstance(v, (list, tuple)) or len(v) != 4 or not all(_is_number(x) for x in v):
        raise InputError(f"Expected {what} `bbox` to be 4 numbers [x, y, w, h], got {v!r}.")
    out = tuple(float(x) for x in v)
    if not all(math.isfinite(x) for x in out):
        raise InputError(f"Expected {what} `bbox` to hold finite numbers, got {v!r}.")
    return out  # type: ignore[return-value]


def _id(v: Any, what: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer, str)):
        raise InputError(f"Expected {what} to be an integer id, got {v!r}.")
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            raise InputError(f"Expected {what} to be an integer id, got {v!r}.") from None
    return int(v)


def _list_of_dicts(obj: Any, key: str) -> list[dict]:
    v = obj.get(key)
    if not isinstance(v, list):
        raise InputError(f"Expected COCO key `{key}` to be a list, got {type(v).__name__}.")
    for i, x in enumerate(v):
        if not isinstance(x, dict):
            raise InputError(f"Expected `{key}[{i}]` to be an object, got {type(x).__name__}.")
    return v


def _id_and_name(entry: dict, section: str, i: int, name_key: str) -> tuple[int, str]:
    """The id and the name of `images[i]` (name key `file_name`) or `categories[i]` (`name`)."""
    for key in ("id", name_key):
        if key not in entry:
            raise InputError(f"COCO `{section}[{i}]` lacks `{key}`.")
    eid = _id(entry["id"], f"`{section}[{i}].id`")
    name = entry[name_key]
    if not isinstance(name, str) or not name:
        raise InputError(f"Expected `{section}[{i}].{name_key}` to be a non-empty string, got {name!r}.")
    return eid, name


def _images_and_categories(obj: dict, kind: str, boxes: dict[str, list[Box]], sizes: dict[str, tuple[int, int]]
                           ) -> tuple[dict[int, str], dict[int, str]]:
    """A COCO dict's image id -> file name and category id -> name maps, validated; each image gets an
    empty box list in `boxes` and its size, when given, in `sizes`."""
    for key in ("images", "annotations", "categories"):
        if key not in obj:
            raise InputError(f"COCO {kind} object lacks the `{key}` key.")
    imgs: dict[int, str] = {}
    for i, im in enumerate(_list_of_dicts(obj, "images")):
        iid, name = _id_and_name(im, "images", i, "file_name")
        if iid in imgs:
            raise InputError(f"COCO image id {iid} appears twice in `images`.")
        if name in boxes:
            raise InputError(f"COCO image file_name {name!r} appears twice in `images`.")
        imgs[iid] = name
        boxes[name] = []
        w, h = im.get("width"), im.get("height")
        if w is not None and h is not None:
            if not (_is_number(w) and _is_number(h) and w > 0 and h > 0):
                raise InputError(f"Expected `images[{i}]` width/height > 0, got {w!r} x {h!r}.")
            sizes[name] = (int(w), int(h))
    cats: dict[int, str] = {}
    for i, c in enumerate(_list_of_dicts(obj, "categories")):
        cid, name = _id_and_name(c, "categories", i, "name")
        if cid in cats:
            raise InputError(f"COCO category id {cid} appears twice in `categories`.")
        if name in cats.values():
            raise InputError(f"COCO category name {name!r} appears twice in `categories`.")
        cats[cid] = name
    return imgs, cats


def parse_coco(obj: dict | list, *, kind: Literal["gt", "det"],
               image_names: Mapping[int, str] | None = None,
               category_names: Mapping[int, str] | None = None) -> ParsedCoco:
    """Validate a COCO object and key its boxes by image file name and category name.

    Args:
        obj: a COCO dict with `images` (id, file_name, optional width/height), `annotations`
            (image_id, category_id, bbox; detections also score) and `categories` (id, name);
            or, for `kind="det"`, a bare results list of {image_id, category_id, bbox, score}.
        kind: `gt` (score ignored, kept None) or `det` (score required).
        image_names, category_names: id -> name maps for a bare results list, usually the
            ground truth's `ParsedCoco.image_names` / `.category_names`. Without them a bare
            list is keyed by `str(id)`. Ignored for a dict (it carries its own maps).

    Returns:
        ParsedCoco. `area`, `iscrowd` and `score` are kept exactly as given.

    Raises:
        InputError: one line naming the first problem (missing key, bbox not 4 finite numbers,
            unknown image or category id, duplicate id or file name, missing score...).
    """
    if kind not in ("gt", "det"):
        raise InputError(f"Expected `kind` in ('gt', 'det'), got {kind!r}.")
    sizes: dict[str, tuple[int, int]] = {}
    boxes: dict[str, list[Box]] = {}
    if isinstance(obj, dict):
        imgs, cats = _images_and_categories(obj, kind, boxes, sizes)
        anns = _list_of_dicts(obj, "annotations")
        strict = strict_img = strict_cat = True
    elif isinstance(obj, list):
        if kind != "det":
            raise InputError("Expected a COCO ground-truth dict with images/annotations/categories, got a list.")
        imgs = dict(image_names) if image_names is not None else {}
        cats = dict(category_names) if category_names is not None else {}
        strict_img, strict_cat = image_names is not None, category_names is not None
        for i, a in enumerate(obj):
            if not isinstance(a, dict):
                raise InputError(f"Expected detection [{i}] to be an object, got {type(a).__name__}.")
        anns = obj
        strict = False
    else:
        raise InputError(f"Expected a COCO dict or a list of detections, got {type(obj).__name__}.")

    n_deg = n_crowd = 0
    for i, a in enumerate(anns):
        what = f"annotation [{i}]" if strict else f"detection [{i}]"
        for key in ("image_id", "category_id", "bbox") + (("score",) if kind == "det" else ()):
            if key not in a:
                raise InputError(f"COCO {what} lacks `{key}`.")
        iid = _id(a["image_id"], f"{what} `image_id`")
        cid = _id(a["category_id"], f"{what} `category_id`")
        if iid not in imgs:
            if strict or strict_img:
                raise InputError(f"COCO {what} names image id {iid}, which is not in `images`.")
            imgs[iid] = str(iid)
        if cid not in cats:
            if strict or strict_cat:
                raise InputError(f"COCO {what} names category id {cid}, which is not in `categories`.")
            cats[cid] = str(cid)
        bbox = _bbox(a["bbox"], what)
        area = a.get("area")
        area = None if area is None else _finite(area, f"{what} `area`")
        score = _finite(a["score"], f"{what} `score`") if kind == "det" else None
        crowd = a.get("iscrowd", 0)
        if crowd not in (0, 1, True, False):
            raise InputError(f"Expected {what} `iscrowd` to be 0 or 1, got {crowd!r}.")
        crowd = bool(crowd)
        n_crowd += crowd
        n_deg += bbox[2] <= 0 or bbox[3] <= 0
        boxes.setdefault(imgs[iid], []).append(Box(cats[cid], bbox, score, area, crowd))

    n_boxes = sum(len(v) for v in boxes.values())
    return ParsedCoco(
        kind=kind, boxes=boxes, sizes=sizes,
        categories=list(cats.values()) if isinstance(obj, dict) else [],
        image_names=imgs, category_names=cats, n_boxes=n_boxes, n_degenerate=int(n_deg),
        n_crowd=int(n_crowd), n_images_without_boxes=sum(1 for v in boxes.values() if not v))

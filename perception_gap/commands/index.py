"""`index`: frames from a folder, a manifest, videos or a LeRobot dataset; boxes from COCO JSON or instance masks."""

from __future__ import annotations

import argparse
from pathlib import Path

from perception_gap.commands.output import fail, progress_bar, say


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_folder, index_manifest

    tags = [t for t in (args.tags or "").split(",") if t] or None
    if args.coco is not None or args.masks is not None:
        return _index_boxes(args)
    sources = [name for name, v in (("a folder PATH", args.path), ("--manifest", args.manifest),
                                    ("--video", args.video), ("--lerobot", args.lerobot)) if v is not None]
    if not sources:
        return fail("index: give a folder PATH, --manifest FILE, --video PATH or --lerobot ROOT (with --set and --domain).")
    if len(sources) > 1:
        return fail(f"index: give one source, got {' and '.join(sources)}.")
    if args.manifest is None and (args.set is None or args.domain is None):
        return fail(f"index: {sources[0]} needs --set NAME and --domain sim|real.")
    if (args.lerobot is None) != (args.camera is None):
        return fail("index: --lerobot ROOT needs --camera KEY (and --camera goes with --lerobot).")
    progress, close = progress_bar(args, "index")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            if args.video is not None or args.lerobot is not None:
                reports = [_index_container_source(cat, args, tags, progress)]
            elif args.manifest is not None:
                reports = index_manifest(cat, Path(args.manifest), tags=tags, workers=args.workers, progress=progress)
            else:
                reports = [index_folder(cat, Path(args.path), args.set, args.domain, pair_regex=args.pair_regex,
                                        depth_unit=args.depth_unit, tags=tags, workers=args.workers, progress=progress)]
        finally:
            close()
    status = 0
    for r in reports:
        say(args, f"{r.set_name} ({r.domain}): {r.listed} listed, {r.new} new, {r.changed} changed, "
                   f"{r.unchanged} unchanged, {r.vanished} vanished; {r.usable} usable, {r.n_skipped} skipped")
        for path, reason in r.skipped[:20]:
            say(args, f"  skipped {path}: {reason}")
        if len(r.skipped) > 20:
            say(args, f"  ... and {len(r.skipped) - 20} more (see `stats --json`)")
        if r.usable == 0:
            status = fail(f"set {r.set_name!r} has no usable frame ({r.n_skipped} skipped).")
    return status


def _index_container_source(cat, args: argparse.Namespace, tags: list[str] | None, progress):
    from perception_gap.ingest.lerobot import index_lerobot
    from perception_gap.ingest.video import index_video

    if args.video is not None:
        return index_video(cat, Path(args.video), args.set, args.domain, tags=tags, workers=args.workers, progress=progress)
    return index_lerobot(cat, Path(args.lerobot), args.camera, args.set, args.domain, tags=tags,
                         workers=args.workers, progress=progress)


def _index_boxes(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest.annotations import attach_coco, attach_masks, load_mask_categories

    if args.coco is not None and args.masks is not None:
        return fail("index: give either --coco FILE or --masks DIR, not both.")
    if args.set is None:
        return fail("index: boxes need --set NAME (an indexed set).")
    if args.path is not None or args.manifest is not None:
        return fail("index: --coco/--masks attach boxes to an indexed set; index its frames in a separate call.")
    with Catalog(args.db, wait=args.wait) as cat:
        if args.coco is not None:
            if args.source is None:
                return fail("index: --coco needs --source gt|DETECTOR.")
            r = attach_coco(cat, Path(args.coco), args.set, args.source)
        else:
            r = attach_masks(cat, Path(args.masks), args.set, categories=load_mask_categories(
                Path(args.mask_categories) if args.mask_categories else None))
    unlabelled = ""
    if r.n_unlabelled:  # ids missing from --mask-categories: dropped, and said so
        ids = ", ".join(map(str, r.unlabelled_ids[:10])) + (", ..." if len(r.unlabelled_ids) > 10 else "")
        unlabelled = f", {r.n_unlabelled} dropped (id {ids} not in --mask-categories)"
    say(args, f"{r.set_name} [{r.source}]: {r.n_boxes} boxes on {r.n_images} frames; {r.n_clipped} clipped to "
               f"the frame, {r.n_dropped} dropped (outside or empty){unlabelled}; {len(r.unmatched)} unmatched")
    for u in r.unmatched[:10]:
        say(args, f"  unmatched {u}")
    if len(r.unmatched) > 10:
        say(args, f"  ... and {len(r.unmatched) - 10} more")
    return 0

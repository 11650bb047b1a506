"""`index`: frames from a folder, a manifest, videos, a LeRobot dataset, an HDF5 file or ROS bags; boxes from COCO JSON or instance masks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perception_gap.commands.flags import positive
from perception_gap.commands.output import fail, progress_bar, say, skip_lines
from perception_gap.commands.parsing import Parents

# The source each source option belongs to (the positional folder is `path`), checked by `execute`
# before anything is read: "--root goes with --manifest".
GOES_WITH = {"--root": "--manifest", "--proprio": "--hdf5", "--depth-topic": "--rosbag", "--depth-camera": "--lerobot",
             "--sync-tolerance": "--depth-topic", "--pair-regex": "path"}


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `index` subparser."""
    ix = sub.add_parser("index", parents=[parents.common], help="index a folder or a manifest of frames into the catalog",
                        description="Index frames (incremental: only new or changed files are read).")
    ix.add_argument("path", nargs="?", help="folder of frames (pair key = relative path without extension)")
    ix.add_argument("--set", help="set name")
    ix.add_argument("--domain", choices=("sim", "real"), help="domain of the set")
    ix.add_argument("--manifest", help="CSV, JSONL or Parquet manifest (columns: set, domain, rgb, pair_key, ...)")
    ix.add_argument("--video", metavar="PATH", help="a video file, or a folder of them (one episode per file; "
                                                    "pair key = <episode>/<frame>)")
    ix.add_argument("--lerobot", metavar="ROOT", help="a local LeRobot dataset folder (v2.1 or v3.0); with --camera")
    ix.add_argument("--hdf5", metavar="FILE", help="a robomimic-layout HDF5 file (data/demo_N/obs/KEY, actions); "
                                                   "with --camera")
    ix.add_argument("--rosbag", metavar="PATH", help="a ROS 1 .bag, a ROS 2 bag folder (sqlite3 or MCAP) or a "
                                                     "folder of bags (one episode per bag); with --topic")
    ix.add_argument("--topic", help="with --rosbag: the sensor_msgs/Image or CompressedImage topic")
    ix.add_argument("--depth-topic", metavar="TOPIC", help="with --rosbag: depth images (16UC1 mm, 32FC1 m) paired "
                                                           "to the nearest colour frame within --sync-tolerance")
    ix.add_argument("--sync-tolerance", type=positive, default=None, metavar="SECONDS",
                    help="with --depth-topic: the largest time difference that pairs (default 0.02)")
    ix.add_argument("--camera", metavar="KEY", help="with --lerobot: the camera feature (e.g. observation.images.top); "
                                                    "with --hdf5: the obs key (e.g. agentview_image)")
    ix.add_argument("--depth-camera", metavar="KEY", help="with --lerobot: the camera feature holding depth maps "
                                                          "(give its unit with --depth-unit)")
    ix.add_argument("--proprio", metavar="KEY[,KEY]", help="with --hdf5: obs keys concatenated into proprio "
                                                           "(e.g. robot0_eef_pos,robot0_gripper_qpos)")
    ix.add_argument("--root", metavar="DIR", help="with --manifest: the folder relative paths start from "
                                                  "(default: the manifest's folder)")
    ix.add_argument("--pair-regex", help="regex on the relative path whose first group (or group 'key') is the pair key")
    ix.add_argument("--depth-unit", help="declared depth unit: m, mm, cm, tum (1/5000 m) or units per metre")
    ix.add_argument("--tags", help="comma-separated tags for the set")
    ix.add_argument("--coco", help="COCO JSON of boxes to attach to the indexed --set (joined by image file name "
                                   "and category name)")
    ix.add_argument("--source", help="with --coco: `gt` for ground truth, or the detector's name")
    ix.add_argument("--masks", help="folder of instance-id masks (<pair key>.png): ground-truth boxes for --set")
    ix.add_argument("--mask-categories", help="with --masks: JSON mapping instance id to category name")
    ix.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_folder, index_manifest

    tags = [t for t in (args.tags or "").split(",") if t] or None
    if args.coco is not None or args.masks is not None:
        return _index_boxes(args)
    sources = [name for name, v in (("a folder PATH", args.path), ("--manifest", args.manifest), ("--video", args.video),
                                    ("--lerobot", args.lerobot), ("--hdf5", args.hdf5), ("--rosbag", args.rosbag))
               if v is not None]
    if not sources:
        return fail("index: give a folder PATH, --manifest FILE, --video PATH, --lerobot ROOT, --hdf5 FILE or "
                    "--rosbag PATH (with --set and --domain).")
    if len(sources) > 1:
        return fail(f"index: give one source, got {' and '.join(sources)}.")
    if args.manifest is None and (args.set is None or args.domain is None):
        return fail(f"index: {sources[0]} needs --set NAME and --domain sim|real.")
    needs_camera = args.lerobot is not None or args.hdf5 is not None
    if needs_camera != (args.camera is not None):
        return fail(f"index: {sources[0]} needs --camera KEY." if needs_camera
                    else "index: --camera goes with --lerobot ROOT or --hdf5 FILE.")
    if (args.rosbag is not None) != (args.topic is not None):
        return fail("index: --rosbag PATH needs --topic TOPIC." if args.rosbag is not None
                    else "index: --topic goes with --rosbag PATH.")
    for flag, owner in GOES_WITH.items():
        if getattr(args, _dest(flag)) is not None and getattr(args, _dest(owner)) is None:
            return fail(f"index: {flag} goes with {'a folder PATH' if owner == 'path' else owner}.")
    progress, close = progress_bar(args, "index")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            if args.video is not None or args.rosbag is not None or needs_camera:
                reports = [_index_container_source(cat, args, tags, progress)]
            elif args.manifest is not None:
                reports = index_manifest(cat, Path(args.manifest), root=None if args.root is None else Path(args.root),
                                         tags=tags, workers=args.workers, progress=progress, set_name=args.set,
                                         domain=args.domain)
            else:
                reports = [index_folder(cat, Path(args.path), args.set, args.domain, pair_regex=args.pair_regex,
                                        depth_unit=args.depth_unit, tags=tags, workers=args.workers, progress=progress)]
        finally:
            close()
    status = 0
    for r in reports:
        say(args, f"{r.set_name} ({r.domain}): {r.listed} listed, {r.new} new, {r.changed} changed, "
                   f"{r.unchanged} unchanged, {r.vanished} vanished"
                   + (f", {r.removed} no longer listed (removed)" if r.removed else "")
                   + f"; {r.usable} usable, {r.n_skipped} skipped")
        for w in r.warnings:
            if not args.quiet:
                print(f"perception-gap: warning: {r.set_name}: {w}", file=sys.stderr)
        for line in skip_lines(r.skipped, "`stats --json`"):
            say(args, f"  {line}")
        if r.usable == 0:
            status = fail(f"set {r.set_name!r} has no usable frame ({r.n_skipped} skipped).")
    return status


def _index_container_source(cat, args: argparse.Namespace, tags: list[str] | None, progress):
    from perception_gap.ingest.hdf5 import index_hdf5
    from perception_gap.ingest.lerobot import index_lerobot
    from perception_gap.ingest.rosbag import SYNC_TOLERANCE, index_rosbag
    from perception_gap.ingest.video import index_video

    if args.rosbag is not None:
        tolerance = SYNC_TOLERANCE if args.sync_tolerance is None else args.sync_tolerance
        return index_rosbag(cat, Path(args.rosbag), args.topic, args.set, args.domain, depth_topic=args.depth_topic,
                            tolerance=tolerance, tags=tags, workers=args.workers, progress=progress)
    if args.video is not None:
        return index_video(cat, Path(args.video), args.set, args.domain, tags=tags, workers=args.workers, progress=progress)
    if args.hdf5 is not None:
        proprio = [k.strip() for k in (args.proprio or "").split(",") if k.strip()]
        return index_hdf5(cat, Path(args.hdf5), args.camera, args.set, args.domain, proprio=proprio, tags=tags,
                          workers=args.workers, progress=progress)
    return index_lerobot(cat, Path(args.lerobot), args.camera, args.set, args.domain, depth_camera=args.depth_camera,
                         depth_unit=args.depth_unit, tags=tags, workers=args.workers, progress=progress)


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

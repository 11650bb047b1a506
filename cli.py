"""perception-gap command line: parses argv, prints, writes files, sets exit codes.

Exit codes: 0 ok; 1 a gate failed; 2 bad input or usage (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from perception_gap import __version__
from perception_gap.errors import PerceptionGapError

DEFAULT_DB = "perception_gap.duckdb"


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line (its default prints the whole usage too)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sub = self.prog.removeprefix("perception-gap").strip()
        raise SystemExit(_fail(f"{sub}: {message}" if sub else message))


def _fail(message: str) -> int:
    print(f"perception-gap: error: {message}", file=sys.stderr)
    return 2


def _progress(args: argparse.Namespace, desc: str) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A progress callback on stderr, or None when quiet or stderr is not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit="frame", file=sys.stderr, leave=False)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return update, bar.close


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file so readers see the old or the new content, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=_json_default, allow_nan=False, ensure_ascii=False)


def _say(args: argparse.Namespace, text: str = "") -> None:
    if not args.quiet:
        print(text)


# -- index -------------------------------------------------------------------------------------

def cmd_index(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_folder, index_manifest

    tags = [t for t in (args.tags or "").split(",") if t] or None
    if args.coco is not None or args.masks is not None:
        return _index_boxes(args)
    if args.manifest is None and args.path is None:
        return _fail("index: give a folder PATH (with --set and --domain) or --manifest FILE.")
    if args.manifest is not None and args.path is not None:
        return _fail("index: give either a folder PATH or --manifest FILE, not both.")
    if args.path is not None and (args.set is None or args.domain is None):
        return _fail("index: a folder needs --set NAME and --domain sim|real.")
    progress, close = _progress(args, "index")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            if args.manifest is not None:
                reports = index_manifest(cat, Path(args.manifest), tags=tags, workers=args.workers, progress=progress)
            else:
                reports = [index_folder(cat, Path(args.path), args.set, args.domain, pair_regex=args.pair_regex,
                                        depth_unit=args.depth_unit, tags=tags, workers=args.workers, progress=progress)]
        finally:
            close()
    status = 0
    for r in reports:
        _say(args, f"{r.set_name} ({r.domain}): {r.listed} listed, {r.new} new, {r.changed} changed, "
                   f"{r.unchanged} unchanged, {r.vanished} vanished; {r.usable} usable, {len(r.skipped)} skipped")
        for path, reason in r.skipped[:20]:
            _say(args, f"  skipped {path}: {reason}")
        if len(r.skipped) > 20:
            _say(args, f"  ... and {len(r.skipped) - 20} more (see `stats --json`)")
        if r.usable == 0:
            status = _fail(f"set {r.set_name!r} has no usable frame ({len(r.skipped)} skipped).")
    return status


def _index_boxes(args: argparse.Namespace) -> int:
    from perception_gap.annotate import attach_coco, attach_masks, load_mask_categories
    from perception_gap.catalog import Catalog

    if args.coco is not None and args.masks is not None:
        return _fail("index: give either --coco FILE or --masks DIR, not both.")
    if args.set is None:
        return _fail("index: boxes need --set NAME (an indexed set).")
    if args.path is not None or args.manifest is not None:
        return _fail("index: --coco/--masks attach boxes to an indexed set; index its frames in a separate call.")
    with Catalog(args.db, wait=args.wait) as cat:
        if args.coco is not None:
            if args.source is None:
                return _fail("index: --coco needs --source gt|DETECTOR.")
            r = attach_coco(cat, Path(args.coco), args.set, args.source)
        else:
            r = attach_masks(cat, Path(args.masks), args.set, categories=load_mask_categories(
                Path(args.mask_categories) if args.mask_categories else None))
    _say(args, f"{r.set_name} [{r.source}]: {r.n_boxes} boxes on {r.n_images} frames; {r.n_clipped} clipped to "
               f"the frame, {r.n_dropped} dropped (outside or empty); {len(r.unmatched)} unmatched")
    for u in r.unmatched[:10]:
        _say(args, f"  unmatched {u}")
    if len(r.unmatched) > 10:
        _say(args, f"  ... and {len(r.unmatched) - 10} more")
    return 0


# -- stats -------------------------------------------------------------------------------------

def _fmt(x: Any, nd: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "-"
        return f"{x:.{nd}g}" if abs(x) < 1e4 else f"{x:.0f}"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(v, nd) for v in x) + "]"
    return str(x)


def _print_stats(res: dict[str, Any]) -> None:
    sets, stats = res["sets"], res["stats"]
    for name, info in sets.items():
        s = stats.get(name, {})
        print(f"{info['role']} set {name!r} ({info['domain']}): {info['n_usable']} usable of {info['n_frames']} frames, {info['n_skipped']} skipped")
        for sk in info["skipped"][:10]:
            print(f"    skipped {sk['path']}: {sk['reason']}")
        if info["n_skipped"] > 10:
            print(f"    ... and {info['n_skipped'] - 10} more (see --json)")
        if s.get("n_images"):
            print(f"    size {_fmt(s['sizes'])}  dtype {_fmt(s['dtypes'])}  jpeg {_fmt(s['jpeg_fraction'])}")
            print(f"    channel mean {_fmt(s['channel_mean'])}  std {_fmt(s['channel_std'])}  range [{_fmt(min(s['channel_min']))}, {_fmt(max(s['channel_max']))}]")
            lp = s["lum_percentiles"]
            print(f"    luma p1/p50/p99 {_fmt(lp['p1'])}/{_fmt(lp['p50'])}/{_fmt(lp['p99'])}  sharpness {_fmt(s['sharpness'])}  hf ratio {_fmt(s['hf_ratio'])}")
        d = s.get("depth")
        if d:
            p = d["percentiles"] or {}
            print(f"    depth {_fmt(d['dtypes'])} unit {_fmt(d['inferred_units'])} p1/p50/p99 {_fmt(p.get('p1'))}/{_fmt(p.get('p50'))}/{_fmt(p.get('p99'))}  dropout {_fmt(d['dropout_mean'])}")
        for vec in ("action", "proprio"):
            v = s.get(vec)
            if v:
                print(f"    {vec} ({v['dim']}-d) min {_fmt(v['min'])} max {_fmt(v['max'])}")
    p = res["pairs"]
    print(f"pairs: {p['n_pairs']} matched, {p['n_unpaired_sim']} sim and {p['n_unpaired_real']} real frames unpaired")
    findings = res["findings"]
    if not findings:
        print("findings: none (no plumbing bug and no appearance gap found in the raw statistics)")
    for i, f in enumerate(findings, 1):
        print(f"{i}. [{f['severity']}] {f['code']}: {f['title']}")
        if f.get("action"):
            print(f"   action: {f['action']}")


def cmd_stats(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.pipeline import stats_job

    progress, close = _progress(args, "stats")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            res = stats_job(cat, args.sim, args.real, workers=args.workers, progress=progress)
        finally:
            close()
    if args.json:
        atomic_write_text(Path(args.json), _dumps(res))
    if not args.quiet:
        _print_stats(res)
    return 0


# -- encoders and embed --------------------------------------------------------------------------

def cmd_encoders(args: argparse.Namespace) -> int:
    import encoders

    infos = encoders.describe_encoders()
    if args.json:
        atomic_write_text(Path(args.json), _dumps([
            {"name": i.name, "family": i.family, "dim": i.dim, "preprocessing": i.preprocessing.to_dict(),
             "weights_available": i.weights_available, "weights": i.weights} for i in infos]))
    if not args.quiet:
        print(f"{'name':<20} {'family':<9} {'dim':>5}  {'input':<8} {'resize':<22} {'mean / std':<34} weights")
        for i in infos:
            p = i.preprocessing
            ms = f"{_fmt(list(p.mean))} / {_fmt(list(p.std))}"
            print(f"{i.name:<20} {i.family:<9} {i.dim:>5}  {p.size[0]}x{p.size[1]:<5} "
                  f"{p.interpolation + ' ' + p.resize_mode:<22} {ms:<34} {'yes' if i.weights_available else 'NO'}")
        print("also: open_clip:ARCH:PRETRAINED (an open_clip tag cached locally, or a checkpoint path "
              ".pt/.bin/.safetensors or local-dir:PATH)")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.embed import embed_sets, parse_encoder_list

    names = parse_encoder_list(args.encoder)
    progress, close = _progress(args, "embed")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            reports = embed_sets(cat, names, args.set, device=args.device, batch_size=args.batch_size,
                                 workers=args.workers or 2, progress=progress)
        finally:
            close()
    for r in reports:
        rate = f", {r.embedded / r.seconds:.1f} frames/s" if r.embedded and r.seconds > 0 else ""
        _say(args, f"{r.encoder} ({r.dim}-d, fingerprint {r.fingerprint[:12]}): {r.embedded} embedded, "
                   f"{r.skipped} skipped, {r.todo - r.embedded - r.skipped} left{rate}; "
                   f"{'all cached' if not r.todo else f'{r.seconds:.1f}s'}")
    return 0


# -- run -----------------------------------------------------------------------------------------

def _print_run(res: dict[str, Any], out_dir: Path) -> None:
    print(f"sim {res['config']['sim']!r} vs real {res['config']['real']!r}: {res['pairs']['n_pairs']} pairs")
    print(f"{'rank':>4}  {'encoder':<22} {'distance (95% CI)':<24} {'floor':>6} {'AUC':>5} {'cos':>6} {'probe s->r':>10}")
    for e in res["encoders"]:
        ci = e.get("centroid_distance_norm_ci") or {}
        dist = (f"{_fmt(e['centroid_distance_norm'])} ({_fmt(ci.get('low'))}-{_fmt(ci.get('high'))})"
                if e.get("centroid_distance_norm") is not None else "-")
        front = "*" if e.get("pareto_front") else " "
        print(f"{_fmt(e.get('rank')):>4}{front} {e['name']:<22} {dist:<24} {_fmt(e.get('noise_floor')):>6} "
              f"{_fmt(e.get('domain_auc')):>5} {_fmt((e.get('paired_cosine') or {}).get('mean')):>6} "
              f"{_fmt((e.get('probe') or {}).get('sim_to_real')):>10}")
    print("(* on the Pareto front of gap vs probe; distance = normalized PCA centroid distance, floor = real-vs-real)")
    if not res["findings"]:
        print("findings: none")
    for i, f in enumerate(res["findings"], 1):
        print(f"{i}. [{f['severity']}] {f['code']}: {f['title']}")
        if f.get("action"):
            print(f"   action: {f['action']}")
    print(f"results: {out_dir / 'results.json'}, report: {out_dir / 'report.html'}")


def cmd_run(args: argparse.Namespace) -> int:
    from perception_gap.analysis import run_job
    from perception_gap.catalog import Catalog
    from perception_gap.embed import parse_encoder_list

    names = parse_encoder_list(args.encoders) if args.encoders else None
    out_dir = Path(args.out)
    progress, close = _progress(args, "run")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            res = run_job(cat, args.sim, args.real, encoder_names=names, device=args.device,
                          batch_size=args.batch_size, workers=args.workers, progress=progress)
        finally:
            close()
    _write_outputs(res, out_dir, args.json)
    if not args.quiet:
        _print_run(res, out_dir)
    return 0


def _write_outputs(res: dict[str, Any], out_dir: Path, json_path: str | None) -> None:
    """results.json, the optional --json copy and report.html, each written atomically."""
    text = _dumps(res)
    atomic_write_text(out_dir / "results.json", text)
    if json_path:
        atomic_write_text(Path(json_path), text)
    from reports import write_report

    write_report(json.loads(text), out_dir / "report.html")  # from the JSON form: what the report may read


def _encoder_names(spec: list[str] | None) -> list[str] | None:
    """--encoders: None = every available; `none` = raw statistics only."""
    from perception_gap.embed import parse_encoder_list

    if not spec:
        return None
    names = parse_encoder_list(spec)
    return [] if [n.lower() for n in names] == ["none"] else names


# -- screen --------------------------------------------------------------------------------------

def _print_screen(res: dict[str, Any], out_dir: Path) -> None:
    scr = res["screen"]
    print(f"screening {len(scr['ranking'])} renderings against real {res['config']['real']!r} "
          f"over {len(scr['views'])} views ({', '.join(scr['views'])}); {scr['n_scenes']} scenes")
    print(f"{'rank':>4}  {'sim set':<28} {'distance (95% CI)':<26}")
    for r in scr["ranking"]:
        c = r["ci"]
        print(f"{r['rank']:>4}  {r['set']:<28} {_fmt(r['distance'])} ({_fmt(c.get('low'))}-{_fmt(c.get('high'))})")
    for p in scr["pairwise"]:
        c = p["ci"]
        verdict = "significant" if p["significant"] else "not significant"
        print(f"  {p['closer']} closer than {p['farther']} by {_fmt(p['difference'])} "
              f"(95% CI {_fmt(c.get('low'))} to {_fmt(c.get('high'))}): {verdict}")
    print(f"closest: {scr['closest']!r}" if scr["closest"] else "closest: no rendering is significantly closer than every other")
    if "baseline" in scr:
        print(f"--fail-if-worse {scr['baseline']!r}: " + ("passed" if scr["passed"] else
              "FAILED (significantly farther: " + ", ".join(scr["worse_than_baseline"]) + ")"))
    print(f"results: {out_dir / 'results.json'}, report: {out_dir / 'report.html'}")


def cmd_screen(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.workflows import screen_job

    sims = [s for item in args.sim for s in item.split(",") if s]
    out_dir = Path(args.out)
    progress, close = _progress(args, "screen")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            res = screen_job(cat, sims, args.real, encoder_names=_encoder_names(args.encoders),
                             baseline=args.fail_if_worse, device=args.device, batch_size=args.batch_size,
                             workers=args.workers, n_boot=args.n_boot, progress=progress)
        finally:
            close()
    _write_outputs(res, out_dir, args.json)
    if not args.quiet:
        _print_screen(res, out_dir)
    return 1 if res["screen"].get("passed") is False else 0


# -- drift ---------------------------------------------------------------------------------------

def _print_drift(res: dict[str, Any], out_dir: Path) -> None:
    d = res["drift"]
    print(f"drift check: {d['current']!r} against baseline {d['baseline']!r}")
    print(f"  {'gate':<34} {'value':>9} {'threshold':>9}  result")
    for g in d["gates"]:
        extra = f" ({g['reason']})" if g["status"] == "skipped" and g.get("reason") else ""
        print(f"  {g['name']:<34} {_fmt(g['value']):>9} {_fmt(g['threshold']):>9}  {g['status']}{extra}")
    print("PASSED" if d["passed"] else "FAILED: " + ", ".join(g["name"] for g in d["gates"] if g["status"] == "failed"))
    for f in res["findings"]:
        print(f"- {f['title']}\n  action: {f['action']}")
    print(f"results: {out_dir / 'results.json'}, report: {out_dir / 'report.html'}")


def _print_history(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no drift runs recorded yet")
        return
    print(f"{'run':>5}  {'when':<26} {'baseline':<20} {'current':<20} result")
    for h in rows:
        res = "passed" if h["passed"] else "FAILED: " + ", ".join(h["failed"])
        print(f"{h['run_id']:>5}  {h['started_at'][:26]:<26} {str(h['baseline'])[:20]:<20} {str(h['current'])[:20]:<20} {res}")


def cmd_drift(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.drift import load_config
    from perception_gap.workflows import drift_history, drift_job

    if args.history:
        with Catalog(args.db, read_only=True, wait=args.wait) as cat:
            rows = drift_history(cat, args.baseline)
        if args.json:
            atomic_write_text(Path(args.json), _dumps({"drift": {"history": rows}}))
        if not args.quiet:
            _print_history(rows)
        return 0
    missing = [f for f, v in (("--baseline", args.baseline), ("--current", args.current), ("--out", args.out)) if not v]
    if missing:
        return _fail(f"drift needs {', '.join(missing)} (or --history).")
    cfg = load_config(args.config)
    if args.current_dir:
        rc = main(["index", args.current_dir, "--set", args.current, "--domain", args.domain, "--db", args.db, "-q"]
                  + (["--workers", str(args.workers)] if args.workers else []))
        if rc:
            return rc
    out_dir = Path(args.out)
    progress, close = _progress(args, "drift")
    with Catalog(args.db, wait=args.wait) as cat:
        try:
            res = drift_job(cat, args.baseline, args.current, encoder_names=_encoder_names(args.encoders), config=cfg,
                            device=args.device, batch_size=args.batch_size, workers=args.workers, progress=progress)
        finally:
            close()
    _write_outputs(res, out_dir, args.json)
    if not args.quiet:
        _print_drift(res, out_dir)
    return 0 if res["drift"]["passed"] else 1


# -- demo ----------------------------------------------------------------------------------------

def cmd_demo(args: argparse.Namespace) -> int:
    from perception_gap.demo import INJECTIONS, build_demo

    if args.inject is not None and args.inject not in INJECTIONS:
        return _fail(f"demo: expected --inject in {', '.join(INJECTIONS)}, got {args.inject!r}.")
    out_dir = Path(args.out)
    db = args.db if args.db != DEFAULT_DB else str(out_dir / DEFAULT_DB)
    if Path(db).exists():
        Path(db).unlink()  # the demo rebuilds its data: start from a fresh catalog
    _say(args, f"building the demo data set in {out_dir / 'data'} (MuJoCo){' with ' + args.inject if args.inject else ''} ...")
    files = build_demo(out_dir / "data", inject=args.inject)
    common = ["--db", db, "--quiet"]
    steps = [["index", "--manifest", str(files.manifest)],
             ["index", "--masks", str(files.sim_masks), "--set", files.sim_set, "--mask-categories", str(files.mask_categories)],
             ["index", "--coco", str(files.sim_coco), "--set", files.sim_set, "--source", "colour-detector"],
             ["index", "--coco", str(files.real_coco), "--set", files.real_set, "--source", "colour-detector"]]
    if files.real_gt_coco is not None:
        steps.append(["index", "--coco", str(files.real_gt_coco), "--set", files.real_set, "--source", "gt"])
    for step in steps:
        code = main(step + common)
        if code != 0:
            return code
    run = ["run", "--sim", files.sim_set, "--real", files.real_set, "--out", str(out_dir), "--db", db]
    if args.encoders:
        run += ["--encoders", ",".join(args.encoders)]
    return main(run + (["--quiet"] if args.quiet else []))


# -- parser ------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=DEFAULT_DB, help=f"catalog file (default: {DEFAULT_DB})")
    common.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors; no progress bar")
    common.add_argument("--workers", type=int, default=None, help="worker processes/threads (default: all cores)")
    common.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    common.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="when another command is writing the catalog, wait up to this long for it "
                             "(default 0: exit 2 at once, naming it)")

    p = _Parser(prog="perception-gap", description="Measure the gap between simulated and real camera frames, offline.")
    p.add_argument("--version", action="version", version=f"perception-gap {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ix = sub.add_parser("index", parents=[common], help="index a folder or a manifest of frames into the catalog",
                        description="Index frames (incremental: only new or changed files are read).")
    ix.add_argument("path", nargs="?", help="folder of frames (pair key = relative path without extension)")
    ix.add_argument("--set", help="set name")
    ix.add_argument("--domain", choices=("sim", "real"), help="domain of the set")
    ix.add_argument("--manifest", help="CSV, JSONL or Parquet manifest (columns: set, domain, rgb, pair_key, ...)")
    ix.add_argument("--pair-regex", help="regex on the relative path whose first group (or group 'key') is the pair key")
    ix.add_argument("--depth-unit", help="declared depth unit: m, mm, cm, tum (1/5000 m) or units per metre")
    ix.add_argument("--tags", help="comma-separated tags for the set")
    ix.add_argument("--coco", help="COCO JSON of boxes to attach to the indexed --set (joined by image file name "
                                   "and category name)")
    ix.add_argument("--source", help="with --coco: `gt` for ground truth, or the detector's name")
    ix.add_argument("--masks", help="folder of instance-id masks (<pair key>.png): ground-truth boxes for --set")
    ix.add_argument("--mask-categories", help="with --masks: JSON mapping instance id to category name")
    ix.set_defaults(func=cmd_index)

    st = sub.add_parser("stats", parents=[common], help="raw statistics and plumbing diagnoses, sim vs real",
                        description="Raw statistics per set and named plumbing diagnoses (sim set vs real set).")
    st.add_argument("--sim", required=True, help="sim set name")
    st.add_argument("--real", required=True, help="real set name")
    st.add_argument("--json", help="write the results (sets, stats, pairs, findings) to this JSON file")
    st.set_defaults(func=cmd_stats)

    en = sub.add_parser("encoders", parents=[common], help="list encoders: width, preprocessing, weights available",
                        description="List registered encoders with their width, preprocessing and whether weights are available.")
    en.add_argument("--json", help="also write the list to this JSON file")
    en.set_defaults(func=cmd_encoders)

    em = sub.add_parser("embed", parents=[common], help="embed frames through encoders (cached by content)",
                        description="Embed every usable frame through each encoder; cached by (content hash, "
                                    "encoder fingerprint), resumable, only missing frames are embedded.")
    em.add_argument("--encoder", required=True, action="append",
                    help="encoder name(s), comma-separated or repeated (see `encoders`)")
    em.add_argument("--set", action="append", help="set to embed (repeatable; default: every set)")
    em.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where the model runs")
    em.add_argument("--batch-size", type=int, default=32, help="frames per model call (default 32)")
    em.set_defaults(func=cmd_embed)

    rn = sub.add_parser("run", parents=[common], help="the whole analysis: statistics, embeddings, gap, probes, ranking",
                        description="Raw statistics and plumbing diagnoses, embeddings, sim-vs-real gap metrics with "
                                    "noise floors and CIs, linear probes, encoder ranking and findings; writes "
                                    "DIR/results.json and DIR/report.html.")
    rn.add_argument("--sim", required=True, help="sim set name")
    rn.add_argument("--real", required=True, help="real set name")
    rn.add_argument("--encoders", action="append",
                    help="encoder name(s), comma-separated or repeated (default: every encoder with weights available)")
    rn.add_argument("--out", required=True, help="output folder (results.json, report.html)")
    rn.add_argument("--json", help="also write results.json to this file")
    rn.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where the models run")
    rn.add_argument("--batch-size", type=int, default=32, help="frames per model call (default 32)")
    rn.set_defaults(func=cmd_run)

    sc = sub.add_parser("screen", parents=[common], help="which rendering is closer to real, with confidence",
                        description="Screen two or more renderings (sim sets of the same scenes) against one real set: "
                                    "distance to real in raw statistics and in each encoder, a paired bootstrap over "
                                    "scenes for confidence; writes DIR/results.json and DIR/report.html. Exit 1 with "
                                    "--fail-if-worse A when another rendering is significantly farther from real than A.")
    sc.add_argument("--sim", required=True, action="append", help="a sim set (repeat, or comma-separate; at least two)")
    sc.add_argument("--real", required=True, help="real set name")
    sc.add_argument("--encoders", action="append",
                    help="encoder name(s), comma-separated or repeated (default: every available one; `none`: raw "
                         "statistics only)")
    sc.add_argument("--fail-if-worse", metavar="SIM", help="exit 1 when another rendering is significantly farther "
                                                            "from real than this one (for CI on a renderer)")
    sc.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default 1000)")
    sc.add_argument("--out", required=True, help="output folder (results.json, report.html)")
    sc.add_argument("--json", help="also write results.json to this file")
    sc.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where the models run")
    sc.add_argument("--batch-size", type=int, default=32, help="frames per model call (default 32)")
    sc.set_defaults(func=cmd_screen)

    dr = sub.add_parser("drift", parents=[common], help="drift check of new frames against a stored baseline",
                        description="Gate new frames (--current) against a baseline set: format, per-channel shifts "
                                    "in stops, sharpness, depth dropout, embedding distance over the baseline's own "
                                    "noise floor, domain AUC, detector AP. Thresholds from --config (TOML; defaults in "
                                    "the README). Exit 1 when a gate fails, 0 otherwise. Only new frames are "
                                    "decoded and embedded. --history lists earlier checks.")
    dr.add_argument("--baseline", help="the reference set (indexed earlier)")
    dr.add_argument("--current", help="the new set")
    dr.add_argument("--current-dir", help="index this folder into --current first (incremental)")
    dr.add_argument("--domain", choices=("sim", "real"), default="real", help="domain for --current-dir (default real)")
    dr.add_argument("--config", help="TOML file of gate thresholds (see README: Drift checks)")
    dr.add_argument("--encoders", action="append",
                    help="encoder name(s) (default: every available one; `none`: statistics gates only)")
    dr.add_argument("--history", action="store_true", help="list earlier drift checks (of --baseline, if given)")
    dr.add_argument("--out", help="output folder (results.json, report.html)")
    dr.add_argument("--json", help="also write results.json to this file")
    dr.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where the models run")
    dr.add_argument("--batch-size", type=int, default=32, help="frames per model call (default 32)")
    dr.set_defaults(func=cmd_drift)

    dm = sub.add_parser("demo", parents=[common], help="build the built-in paired MuJoCo demo set, then run it",
                        description="Render a small paired tabletop data set with MuJoCo (sim: RGB, depth, "
                                    "segmentation; real: the same states through a camera model), run a colour "
                                    "detector on both, then run the whole analysis into DIR/report.html.")
    dm.add_argument("--out", required=True, help="output folder (data, catalog, results.json, report.html)")
    dm.add_argument("--inject", help="add one plumbing fault to the demo (a finding code, e.g. channel_swap)")
    dm.add_argument("--encoders", action="append", help="encoders for the run (default: every available one)")
    dm.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.workers is not None and args.workers < 1:
        return _fail(f"Expected `--workers` >= 1, got {args.workers}.")
    try:
        return args.func(args)
    except PerceptionGapError as e:
        return _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    except KeyboardInterrupt:
        return _fail("interrupted; finished batches are kept in the catalog, rerun to complete.")


if __name__ == "__main__":
    sys.exit(main())

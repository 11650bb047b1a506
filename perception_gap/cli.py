"""perception-gap command line: parses argv and dispatches to a command.

Each command lives in `perception_gap.commands.<name>` (`execute(args) -> exit code`), with the
text it prints beside it. Exit codes: 0 ok; 1 a gate failed; 2 bad input or usage (one line on
stderr).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Callable

# OpenMP threads (torch's) that wait between parallel regions sleep instead of spinning: the
# embed stage decodes and resizes frames in threads while the model runs, and on a small
# machine a spinning OpenMP thread takes a core from them (measured in bench/README.md, "The
# embed stage and OpenMP's wait policy"). Set before torch is imported; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from perception_gap.commands.flags import bounded_int, finite_float, non_negative, positive
from perception_gap.commands.output import fail as _fail
from perception_gap.errors import PerceptionGapError
from perception_gap.version import __version__

DEFAULT_DB = "perception_gap.duckdb"
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a process ended by SIGPIPE


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line (its default prints the whole usage too)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sub = self.prog.removeprefix("perception-gap").strip()
        raise SystemExit(_fail(f"{sub}: {message}" if sub else message))


def _command(module: str, function: str = "execute") -> Callable[[argparse.Namespace], int]:
    """The handler `perception_gap.commands.<module>.<function>`, imported when the command runs."""

    def handler(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"perception_gap.commands.{module}"), function)(args)

    return handler


def _batch_size(text: str) -> int | str:
    """`--batch-size`: a positive int, or `auto` (from free GPU memory on CUDA, 32 on the CPU)."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'auto', got {text!r}")
    return value


def _model_options(parser: argparse.ArgumentParser, where: str) -> None:
    """--device, --batch-size and --precision: how the encoders run (embed, run, screen, drift)."""
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help=f"{where} (auto: CUDA when present; cuda without CUDA is an error)")
    parser.add_argument("--batch-size", type=_batch_size, default=32,
                        help="frames per model call (default 32; auto: from free GPU memory on CUDA, 32 on the CPU)")
    parser.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32",
                        help="forward precision (default fp32; fp16 needs CUDA; reduced precisions are cached "
                             "apart from fp32, tolerances in the README)")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=DEFAULT_DB, help=f"catalog file (default: {DEFAULT_DB})")
    common.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors; no progress bar")
    common.add_argument("--workers", type=bounded_int(1, 1024), default=None,
                        help="worker processes/threads, 1 to 1024 (default: all cores)")
    common.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    common.add_argument("--wait", type=finite_float(0.0, 86_400.0), default=0.0, metavar="SECONDS",
                        help="when another command is writing the catalog, wait up to this long for it "
                             "(default 0: exit 2 at once, naming it)")
    # resampling of the reported intervals (run, screen, drift); unset: each interval's own default
    common.add_argument("--bootstrap", type=bounded_int(10, 100_000), default=None, metavar="N",
                        help="bootstrap replicates for every interval, 10 to 100000 (default: each one's own)")
    common.add_argument("--ci-level", type=finite_float(0.5, 1.0, low_open=True, high_open=True), default=None,
                        metavar="LEVEL", help="confidence level of the intervals, in (0.5, 1) (default 0.95)")

    engine = argparse.ArgumentParser(add_help=False)
    engine.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="where statistics and embeddings are computed: this machine (default) or Ray Data "
                             "workers (needs perception-gap[ray]; see README 'Fleets')")
    engine.add_argument("--address", metavar="ADDR", help="with --engine ray: the Ray cluster to use (e.g. "
                                                         "ray://head:10001 or auto; default: a local Ray instance)")

    p = _Parser(prog="perception-gap", description="Measure the gap between simulated and real camera frames, offline.")
    p.add_argument("--version", action="version", version=f"perception-gap {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ix = sub.add_parser("index", parents=[common], help="index a folder or a manifest of frames into the catalog",
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
    ix.set_defaults(func=_command("index"))

    st = sub.add_parser("stats", parents=[common, engine], help="raw statistics and plumbing diagnoses, sim vs real",
                        description="Raw statistics per set and named plumbing diagnoses (sim set vs real set).")
    st.add_argument("--sim", required=True, help="sim set name")
    st.add_argument("--real", required=True, help="real set name")
    st.add_argument("--json", help="write the results (sets, stats, pairs, findings) to this JSON file")
    st.set_defaults(func=_command("stats"))

    cm = sub.add_parser("camera-model", parents=[common], help="measure the real camera against the sim: camera_model.json",
                        description="Fit the real camera's factors (exposure, white balance, tone curve, vignetting, "
                                    "blur, sensor noise, JPEG, and the pipeline fixes the diagnoses call for) from a "
                                    "sim set and a real set, and write them as camera_model.json for a renderer or "
                                    "an augmentation (perception_gap.apply_camera_model).")
    cm.add_argument("--sim", required=True, help="sim set name")
    cm.add_argument("--real", required=True, help="real set name")
    cm.add_argument("--out", required=True, help="output folder (camera_model.json)")
    cm.set_defaults(func=_command("camera_model"))

    en = sub.add_parser("encoders", parents=[common], help="list encoders: width, preprocessing, weights available",
                        description="List registered encoders with their width, preprocessing and whether weights are available.")
    en.add_argument("--json", help="also write the list to this JSON file")
    en.set_defaults(func=_command("embed", "execute_encoders"))

    em = sub.add_parser("embed", parents=[common, engine], help="embed frames through encoders (cached by content)",
                        description="Embed every usable frame through each encoder; cached by (content hash, "
                                    "encoder fingerprint), resumable, only missing frames are embedded.")
    em.add_argument("--encoder", "--encoders", dest="encoder", required=True, action="append",
                    help="encoder name(s), comma-separated or repeated (see `encoders`), or @FILE: a candidates "
                         "file of [[encoder]] tables (docs/encoders.md, Sweeps)")
    em.add_argument("--set", action="append", help="set to embed (repeatable; default: every set)")
    _model_options(em, "where the model runs")
    em.set_defaults(func=_command("embed"))

    rn = sub.add_parser("run", parents=[common, engine], help="the whole analysis: statistics, embeddings, gap, probes, ranking",
                        description="Raw statistics and plumbing diagnoses, embeddings, sim-vs-real gap metrics with "
                                    "noise floors and CIs, linear probes, encoder ranking and findings; writes "
                                    "DIR/results.json and DIR/report.html.")
    rn.add_argument("--sim", required=True, help="sim set name")
    rn.add_argument("--real", required=True, help="real set name")
    rn.add_argument("--encoders", action="append",
                    help="encoder name(s), comma-separated or repeated, or @FILE (a candidates TOML file; "
                         "docs/encoders.md, Sweeps) (default: every encoder with weights available)")
    rn.add_argument("--out", required=True, help="output folder (results.json, report.html)")
    rn.add_argument("--json", help="also write results.json to this file")
    _model_options(rn, "where the models run")
    rn.add_argument("--no-attribution", dest="attribution", action="store_false",
                    help="skip the camera model and the counterfactual attribution of each encoder's gap")
    rn.add_argument("--rollouts", metavar="FILE", help="also include the rollouts section of this log (see `rollouts`)")
    rn.add_argument("--inception-weights", metavar="FILE",
                    help="a local FID Inception v3 state dict (pytorch-fid's pt_inception-2015-12-05-6726825d.pth): "
                         "also the FID and KID of the reference implementations (nothing downloads)")
    rn.set_defaults(func=_command("run"))

    sc = sub.add_parser("screen", parents=[common], help="which rendering is closer to real, with confidence",
                        description="Screen two or more renderings (sim sets of the same scenes) against one real set: "
                                    "distance to real in raw statistics and in each encoder, a paired bootstrap over "
                                    "scenes for confidence; writes DIR/results.json and DIR/report.html. Exit 1 with "
                                    "--fail-if-worse A when another rendering is significantly farther from real than A.")
    sc.add_argument("--sim", required=True, action="append", help="a sim set (repeat, or comma-separate; at least two)")
    sc.add_argument("--real", required=True, help="real set name")
    sc.add_argument("--encoders", action="append",
                    help="encoder name(s), comma-separated or repeated, or @FILE (a candidates TOML file) "
                         "(default: every available one; `none`: raw statistics only)")
    sc.add_argument("--fail-if-worse", metavar="SIM", help="exit 1 when another rendering is significantly farther "
                                                            "from real than this one (for CI on a renderer)")
    sc.add_argument("--n-boot", type=bounded_int(10, 100_000), default=1000,
                    help="bootstrap replicates, 10 to 100000 (default 1000)")
    sc.add_argument("--out", required=True, help="output folder (results.json, report.html)")
    sc.add_argument("--json", help="also write results.json to this file")
    _model_options(sc, "where the models run")
    sc.set_defaults(func=_command("screen"))

    dr = sub.add_parser("drift", parents=[common, engine], help="drift check of new frames against a stored baseline",
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
                    help="encoder name(s), or @FILE (a candidates TOML file) (default: every available one; "
                         "`none`: statistics gates only)")
    dr.add_argument("--history", action="store_true", help="list earlier drift checks (of --baseline, if given)")
    dr.add_argument("--out", help="output folder (results.json, report.html)")
    dr.add_argument("--json", help="also write results.json to this file")
    _model_options(dr, "where the models run")
    dr.add_argument("--rollouts", metavar="FILE", help="also include the rollouts section of this log (see `rollouts`)")
    dr.set_defaults(func=_command("drift"))

    outputs = argparse.ArgumentParser(add_help=False)  # what every evaluation command writes
    outputs.add_argument("--out", help="output folder (results.json, report.html)")
    outputs.add_argument("--json", help="write the results to this JSON file")
    ro = sub.add_parser("rollouts", parents=[common, outputs], help="success rates with exact CIs, sim vs real, rollouts needed",
                        description="Success rates per policy x task x domain with exact (Clopper-Pearson) intervals, "
                                    "the sim-vs-real drop with a Newcombe interval, the rollouts needed per side, "
                                    "failure modes and episode lengths. FILE: CSV, JSONL or Parquet with columns "
                                    "policy, task, domain (sim|real), success (0/1); optional episode_length, "
                                    "failure_mode. Exit 1 when --max-drop is crossed.")
    ro.add_argument("file", metavar="FILE", help="rollouts log (CSV, JSONL or Parquet)")
    ro.add_argument("--ci", choices=("exact", "wilson"), default="exact", help="per-group interval (default exact)")
    ro.add_argument("--confidence", type=finite_float(0.0, 1.0, low_open=True, high_open=True), default=0.95,
                    help="interval level, in (0, 1) (default 0.95)")
    ro.add_argument("--max-drop", type=finite_float(-1.0, 1.0),
                    help="gate: exit 1 when a sim-minus-real success drop exceeds this (in [-1, 1])")
    ro.set_defaults(func=_command("rollouts"))

    rf = sub.add_parser("rank-fidelity", parents=[common, outputs], help="MMRV and Pearson of sim vs real success across policies",
                        description="Does sim rank policies or checkpoints as real does? Pearson correlation and the "
                                    "SimplerEnv mean maximum rank violation (MMRV: order from sim and real, violation "
                                    "size from real success), per task and averaged. FILE: rows policy, task, sim, "
                                    "real (rates; optional n_sim, n_real counts for bootstrap CIs), or a rollouts log. "
                                    "Finding rank_fidelity when the mean Pearson is below 0.7 or the mean MMRV "
                                    "above 0.1. Exit 1 when the mean Pearson is under --min-pearson.")
    rf.add_argument("file", metavar="FILE", help="rates table or rollouts log (CSV, JSONL or Parquet)")
    rf.add_argument("--n-boot", type=bounded_int(200, 100_000), default=2000,
                    help="bootstrap replicates when counts are known, 200 to 100000 (default 2000)")
    rf.add_argument("--min-pearson", type=finite_float(-1.0, 1.0),
                    help="gate: exit 1 when the mean Pearson over tasks is below this (in [-1, 1])")
    rf.set_defaults(func=_command("rank_fidelity"))

    la = sub.add_parser("latency", parents=[common, outputs], help="per-stage and end-to-end latency vs the control tick",
                        description="Per-tick timestamp log (one column per stage, in pipeline order): per-stage and "
                                    "end-to-end p50/p95/p99 in ms, overruns of the control tick, staleness in ticks, "
                                    "jitter. Finding latency_unit when the logged tick interval and --fps disagree "
                                    "tenfold or more (a wrong --unit). Exit 1 when the end-to-end p95 exceeds "
                                    "--max-p95-ms.")
    la.add_argument("file", metavar="FILE", help="tick log (CSV, JSONL or Parquet)")
    la.add_argument("--fps", type=finite_float(1e-3, 1e6), required=True,
                    help="control frequency in Hz, 0.001 to 1e6 (tick = 1000/fps ms)")
    la.add_argument("--stages", help="stage columns in pipeline order, comma-separated (default: the columns as "
                                     "they appear, less tick/index/frame/step/episode/seq)")
    la.add_argument("--unit", choices=("s", "ms", "us", "ns"), default="s", help="timestamp unit (default s)")
    la.add_argument("--max-p95-ms", type=positive, help="gate: exit 1 when end-to-end p95 exceeds this many ms")
    la.set_defaults(func=_command("latency"))

    ls = sub.add_parser("sets", parents=[common], help="list the catalog's sets: domain, frames, usable, skipped, source",
                        description="List every set of the catalog with its domain, frame counts and source.")
    ls.add_argument("--json", help="also write the list to this JSON file")
    ls.set_defaults(func=_command("sets"))

    dp = sub.add_parser("drop", parents=[common], help="remove a set (its frames and boxes) from the catalog",
                        description="Remove a set, its frames and its boxes; cached statistics and embeddings stay "
                                    "(keyed by content).")
    dp.add_argument("name", metavar="NAME", help="the set to remove")
    dp.set_defaults(func=_command("drop"))

    rn2 = sub.add_parser("rename", parents=[common], help="rename a set",
                         description="Rename a set; its frames and boxes follow. Earlier runs keep the names they "
                                     "were run with.")
    rn2.add_argument("old", metavar="OLD", help="the set's name")
    rn2.add_argument("new", metavar="NEW", help="its new name (no set may have it)")
    rn2.set_defaults(func=_command("rename"))

    dm = sub.add_parser("demo", parents=[common], help="build the built-in paired MuJoCo demo set, then run it",
                        description="Render a small paired tabletop data set with MuJoCo (sim: RGB, depth, "
                                    "segmentation; real: the same states through a camera model), run a colour "
                                    "detector on both, then run the whole analysis into DIR/report.html and "
                                    "policy-check, replay and reprojection on the demo's own inputs into DIR/after/.")
    dm.add_argument("--out", required=True, help="output folder (data, catalog, results.json, report.html)")
    dm.add_argument("--inject", help="add one plumbing fault to the demo (a finding code, e.g. channel_swap)")
    dm.add_argument("--encoders", action="append", help="encoders for the run (default: every available one)")
    dm.set_defaults(func=_command("demo"))
    _geometry_parsers(sub, common)
    return p


def _geometry_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """policy-check, replay, reprojection: the checks after the gap hunt (README: After the gap hunt)."""
    pc = sub.add_parser("policy-check", parents=[common], help="matched sim/real observations through a frozen policy",
                        description="Push paired sim and real frames (with their proprio) through a frozen policy "
                                    "(TorchScript file, torch.export .pt2 program, or module:function) called as "
                                    "policy(images float32 N x 3 x H x W in [0, 1], proprio float32 N x D) -> (N, A) "
                                    "actions; compare the actions per dimension. Exit 1 when --max-rel-diff is crossed.")
    pc.add_argument("--policy", required=True, metavar="SPEC", help="policy.pt (TorchScript), program.pt2, or "
                                                                    "module:function / file.py:function")
    pc.add_argument("--preprocess", metavar="module:function", help="the policy's own preprocessing: called as "
                                                                    "fn(images, proprio) -> (images, proprio), numpy in and out")
    pc.add_argument("--sim", required=True, help="sim set name")
    pc.add_argument("--real", required=True, help="real set name")
    pc.add_argument("--batch-size", type=int, default=32, help="frames per policy call (default 32)")
    pc.add_argument("--max-rel-diff", type=non_negative, metavar="R", help="gate: exit 1 when any dimension's "
                                                                    "|real - sim| / sim std exceeds R")
    pc.add_argument("--out", help="output folder (results.json, report.html)")
    pc.add_argument("--json", help="write the results to this JSON file")
    pc.set_defaults(func=_command("policy_check"))

    file_checks = (
        ("replay", "logged real vs open-loop sim end-effector trajectories",
         ("Per-step translation and geodesic rotation error between real and open-loop sim end-effector poses (CSV, "
          "JSONL or Parquet rows: episode, step, domain, x, y, z, qw, qx, qy, qz, optional contact), the step where "
          "divergence starts and whether it starts at first contact. Exit 1 when --max-translation-m is crossed."),
         "CSV, JSONL or Parquet pose log", "--max-translation-m", "M",
         "gate: exit 1 when the mean translation error exceeds M m"),
        ("reprojection", "sim vs real camera models: reprojection error surface",
         ("Project a workspace grid through the sim and the real camera (OpenCV pinhole + k1, k2, p1, p2, k3; camera "
          "pose in the robot base frame) and measure where they disagree. Exit 1 when --max-mean-px is crossed."),
         'JSON: {"sim": CAM, "real": CAM, "grid": {...}, "points": [...]}', "--max-mean-px", "PX",
         "gate: exit 1 when the mean error exceeds PX"),
    )
    for name, short, description, file_help, gate_flag, gate_metavar, gate_help in file_checks:
        fc = sub.add_parser(name, parents=[common], help=short, description=description)
        fc.add_argument("file", metavar="FILE", help=file_help)
        fc.add_argument(gate_flag, type=non_negative, metavar=gate_metavar, help=gate_help)
        fc.add_argument("--out", help="output folder (results.json, report.html)")
        fc.add_argument("--json", help="write the results to this JSON file")
        if name == "reprojection":
            fc.add_argument("--initial-states", metavar="STATES.csv",
                            help="training initial states (CSV, JSONL or Parquet; columns x, y, z in metres, "
                                 "optional success 0/1): their density and the failures on the grid beside the error surface")
        fc.set_defaults(func=_command(name))


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout replaced by an object without a descriptor (tests)
        pass


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
    args.main = main  # commands that chain others (demo, drift --current-dir) call back through it
    try:
        code = args.func(args)
        sys.stdout.flush()  # a pipe's buffer is written here, where a closed reader can still be handled
        return code
    except BrokenPipeError:  # the reader went away (`... | head -1`): stop quietly, as `cat` does
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except PerceptionGapError as e:
        return _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    except ModuleNotFoundError as e:  # an optional install reached deep in a command: name it, no traceback
        from perception_gap.extras import extra_of, missing_message

        extra = extra_of(e)
        if extra is None:
            raise
        return _fail(missing_message(f"`{args.command}` ({e.name} is not installed)", extra))
    except KeyboardInterrupt:
        return _fail("interrupted; finished batches are kept in the catalog, rerun to complete.")


if __name__ == "__main__":
    sys.exit(main())

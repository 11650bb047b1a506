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

# OpenMP threads (torch's) that wait between parallel regions sleep instead of spinning: the
# embed stage decodes and resizes frames in threads while the model runs, and on a small
# machine a spinning OpenMP thread takes a core from them (measured in bench/README.md, "The
# embed stage and OpenMP's wait policy"). Set before torch is imported; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from perception_gap.commands.flags import bounded_int, finite_float
from perception_gap.commands.output import fail as _fail
from perception_gap.commands.parsing import Parents
from perception_gap.errors import PerceptionGapError
from perception_gap.version import __version__

DEFAULT_DB = "perception_gap.duckdb"
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a process ended by SIGPIPE


# The commands in the order `--help` lists them: (module under perception_gap.commands, the function
# that adds its subparser beside its `execute`).
COMMANDS: tuple[tuple[str, str], ...] = (
    ("index", "add_parser"), ("stats", "add_parser"), ("camera_model", "add_parser"),
    ("embed", "add_encoders_parser"), ("embed", "add_parser"), ("run", "add_parser"), ("screen", "add_parser"),
    ("drift", "add_parser"), ("rollouts", "add_parser"), ("rank_fidelity", "add_parser"), ("latency", "add_parser"),
    ("sets", "add_parser"), ("drop", "add_parser"), ("rename", "add_parser"), ("demo", "add_parser"),
    ("policy_check", "add_parser"), ("replay", "add_parser"), ("reprojection", "add_parser"),
)


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line (its default prints the whole usage too)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sub = self.prog.removeprefix("perception-gap").strip()
        raise SystemExit(_fail(f"{sub}: {message}" if sub else message))


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

    outputs = argparse.ArgumentParser(add_help=False)  # what every evaluation command writes
    outputs.add_argument("--out", help="output folder (results.json, report.html)")
    outputs.add_argument("--json", help="write the results to this JSON file")

    p = _Parser(prog="perception-gap", description="Measure the gap between simulated and real camera frames, offline.")
    p.add_argument("--version", action="version", version=f"perception-gap {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    parents = Parents(common, engine, outputs)
    for module, function in COMMANDS:
        getattr(importlib.import_module(f"perception_gap.commands.{module}"), function)(sub, parents)
    return p


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

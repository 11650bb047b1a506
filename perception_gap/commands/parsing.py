"""What the commands' subparsers share: the parent parsers, the model options, the file-check shape.

Each `perception_gap.commands.<name>` module adds its own subparser (`add_parser(sub, parents)`)
beside its `execute`; `perception_gap.cli.build_parser` only builds the parents and calls them in
order. Command modules are imported to build the parser, so they import nothing heavy at module level.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from perception_gap.commands.flags import non_negative


@dataclass(frozen=True)
class Parents:
    """The parent parsers a subparser picks from.

    Attributes:
        common: `--db`, `--quiet`, `--workers`, ... (every command).
        engine: `--engine`, `--address` (the commands that compute statistics or embeddings).
        outputs: `--out`, `--json` (what every evaluation command writes).
    """

    common: argparse.ArgumentParser
    engine: argparse.ArgumentParser
    outputs: argparse.ArgumentParser


def batch_size(text: str) -> int | str:
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


def model_options(parser: argparse.ArgumentParser, where: str) -> None:
    """--device, --batch-size and --precision: how the encoders run (embed, run, screen, drift)."""
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help=f"{where} (auto: CUDA when present; cuda without CUDA is an error)")
    parser.add_argument("--batch-size", type=batch_size, default=32,
                        help="frames per model call (default 32; auto: from free GPU memory on CUDA, 32 on the CPU)")
    parser.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32",
                        help="forward precision (default fp32; fp16 needs CUDA; reduced precisions are cached "
                             "apart from fp32, tolerances in the README)")


def file_check_parser(sub: argparse._SubParsersAction, parents: Parents, name: str, *, short: str, description: str,
                      file_help: str, gate: tuple[str, str, str],
                      execute: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """A check after the gap hunt that reads one FILE (replay, reprojection): FILE, its gate flag
    (`gate` = flag, metavar, help), `--out` and `--json`."""
    fc = sub.add_parser(name, parents=[parents.common], help=short, description=description)
    fc.add_argument("file", metavar="FILE", help=file_help)
    flag, metavar, gate_help = gate
    fc.add_argument(flag, type=non_negative, metavar=metavar, help=gate_help)
    fc.add_argument("--out", help="output folder (results.json, report.html)")
    fc.add_argument("--json", help="write the results to this JSON file")
    fc.set_defaults(func=execute)
    return fc

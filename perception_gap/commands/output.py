"""What every command shares: one-line errors, progress on stderr, atomic output files, number format."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from perception_gap.errors import OutputError


def fail(message: str) -> int:
    print(f"perception-gap: error: {message}", file=sys.stderr)
    return 2


def progress_bar(args: argparse.Namespace, desc: str) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
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


def _nearest_existing(path: Path) -> Path:
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _check_folder(folder: Path, flag: str, given: str) -> None:
    """`folder` is, or can be created as, a folder this process can write into."""
    base = _nearest_existing(folder)
    if not base.is_dir():
        what = "is a file" if base == Path(given) else f"lies under the file {str(base)!r}"
        kind = "a folder" if Path(given) == folder else "a file in a folder"
        raise OutputError(f"Expected `{flag}` to name {kind}, got {given!r}, which {what}.")
    try:  # write access as the kernel sees it (root ignores mode bits, not a read-only mount)
        fd, probe = tempfile.mkstemp(prefix=".perception-gap-probe.", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"Cannot write `{flag}` {given!r}: {e.strerror or e} (in {str(base)!r}).") from None


def check_outputs(out_dir: str | Path | None = None, json_path: str | Path | None = None,
                  json_flag: str = "--json") -> None:
    """Fail fast, before any analysis: `--out` can be a folder and `--json` a file, both writable.

    Raises:
        OutputError: naming the flag and what is wrong with the path.
    """
    if out_dir is not None:
        _check_folder(Path(out_dir), "--out", str(out_dir))
    if json_path:
        j = Path(json_path)
        if j.is_dir():
            raise OutputError(f"Expected `{json_flag}` to name a file, got the directory {str(json_path)!r}.")
        _check_folder(j.parent, json_flag, str(json_path))


def write_files(files: list[tuple[Path, str]]) -> None:
    """Write every file or none: each to a temp file beside it, then all renamed into place.

    Readers see the old or the new content, never a partial one; a failure (a full disk)
    before the renames leaves every target as it was.

    Raises:
        OutputError: a file cannot be written (the temp files are removed).
    """
    temps: list[tuple[str, Path]] = []
    try:
        for path, text in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        for tmp, path in temps:
            os.replace(tmp, path)
    except BaseException as e:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            names = ", ".join(str(p) for p, _ in files)
            raise OutputError(f"Cannot write {names}: {e.strerror or e}; nothing was written "
                              f"(files already there are kept as they were).") from None
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file so readers see the old or the new content, never a partial one."""
    write_files([(path, text)])


def json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


NON_FINITE_REASON = "not a finite number (JSON has none): written as null"


def _finite(o: Any, path: str, bad: list[dict[str, str]]) -> Any:
    """`o` as plain JSON values with each NaN or infinity replaced by None and its path noted in `bad`."""
    if isinstance(o, float):  # numpy float64 too
        if math.isfinite(o):
            return o
        bad.append({"path": path or "$", "value": repr(float(o)), "reason": NON_FINITE_REASON})
        return None
    if o is None or isinstance(o, (str, int, bool)):
        return o
    if isinstance(o, dict):
        return {k: _finite(v, f"{path}.{k}" if path else str(k), bad) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v, f"{path}[{i}]", bad) for i, v in enumerate(o)]
    if hasattr(o, "tolist"):  # numpy arrays and scalars
        return _finite(o.tolist(), path, bad)
    converted = json_default(o)
    return converted if isinstance(converted, str) else _finite(converted, path, bad)


def finite_json(obj: Any) -> tuple[Any, list[dict[str, str]]]:
    """`obj` with every non-finite float replaced by None, and where each was.

    JSON has no NaN or infinity: a statistic that came out non-finite (a zero variance, an
    overflow on extreme input) is written as null, and the returned list names it by its path
    (`rank_fidelity.tasks.pick.pearson`) with the value it had.

    Returns:
        (the cleaned object, a list of {"path", "value", "reason"}).
    """
    bad: list[dict[str, str]] = []
    return _finite(obj, "", bad), bad


def dumps(obj: Any) -> str:
    """The JSON text of a result: non-finite numbers become null, listed under the top-level `non_finite`."""
    try:  # the usual case, all numbers finite: one pass, no copy
        return json.dumps(obj, indent=2, default=json_default, allow_nan=False, ensure_ascii=False)
    except ValueError as e:
        if "JSON compliant" not in str(e):
            raise
    clean, bad = finite_json(obj)
    if bad and isinstance(clean, dict):
        clean["non_finite"] = list(clean.get("non_finite") or []) + bad
    return json.dumps(clean, indent=2, default=json_default, allow_nan=False, ensure_ascii=False)


def say(args: argparse.Namespace, text: str = "") -> None:
    if not args.quiet:
        print(text)


def fmt(x: Any, nd: int = 3) -> str:
    """A number for the CLI's text: `nd` significant digits via perception_gap.wording.sig ("-" when absent)."""
    from perception_gap.wording import sig

    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, list):
        return "[" + ", ".join(fmt(v, nd) for v in x) + "]"
    return sig(x, nd)


def write_outputs(res: dict[str, Any], out_dir: Path | None, json_path: str | None,
                  render: Callable[[Any], str] | None = None) -> None:
    """report.html, results.json and the optional --json copy: all of them or, on failure, none.

    `render` turns the JSON form into HTML (default: the analysis report); no `out_dir`: only --json.
    """
    text = dumps(res)
    files = []
    if out_dir is not None:
        if render is None:
            from perception_gap.reports import render_report as render
        html = render(json.loads(text))  # from the JSON form: what the report may read
        files = [(out_dir / "report.html", html), (out_dir / "results.json", text)]  # renamed in this order
    write_files(files + ([(Path(json_path), text)] if json_path else []))


def encoder_names(spec: list[str] | None) -> list[str] | None:
    """--encoders: None = every available; `none` = raw statistics only."""
    from perception_gap.embed import parse_encoder_list

    if not spec:
        return None
    names = parse_encoder_list(spec)
    return [] if [n.lower() for n in names] == ["none"] else names


def gate(name: str, value: float | None, threshold: float | None) -> dict[str, Any] | None:
    """A `--max-...` gate: passed when `value` is at most `threshold` (None without a threshold)."""
    if threshold is None:
        return None
    passed = value is not None and math.isfinite(value) and value <= threshold
    return {"name": name, "value": value, "threshold": threshold, "passed": bool(passed)}


def finish_check(args: argparse.Namespace, section: str, res: dict[str, Any], summary: list[str]) -> int:
    """Write a geometry check's `--json` file and `--out` folder, print its summary; 1 when its gate failed."""
    from perception_gap.reports.geometry import render_geometry_report

    text = dumps(res)
    files = []
    if getattr(args, "out", None):
        out = Path(args.out)
        files = [(out / "report.html", render_geometry_report(json.loads(text))), (out / "results.json", text)]
    if args.json:
        files.append((Path(args.json), text))
    if files:
        write_files(files)
    g = res[section].get("gate")
    for line in summary + [f"  finding {f['code']} ({f['severity']}): {f['title']}" for f in res["findings"]]:
        say(args, line)
    if g is not None:
        say(args, f"gate {g['name']}: {fmt(g['value'])} vs {fmt(g['threshold'])}: {'passed' if g['passed'] else 'FAILED'}")
        return 0 if g["passed"] else 1
    return 0

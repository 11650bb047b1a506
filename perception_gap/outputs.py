"""Writing results: atomic output files, results.json with null for non-finite numbers, the reports.

The command line and the Python API write through these functions: every file of one result is
written or none is (`write_files`), `results.json` is strict JSON (`dumps`), and a report is
rendered from the JSON form, the only thing a report may read.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from perception_gap.errors import OutputError
from perception_gap.jsonsafe import NON_FINITE_REASON, finite_json, json_default  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from perception_gap.schema import Results


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


def as_results(res: Mapping[str, Any]) -> Results:
    """A job's results as `Results`, read from the JSON text `write_outputs` writes for them.

    What a function returns is then exactly what `load_results` reads back from its results.json:
    non-finite numbers null (listed under `non_finite`), numpy values plain, keys in their order.
    `Results` are returned as they are.

    Raises:
        InputError: a section lacks a key it must have (a defect of the job that wrote it).
    """
    from perception_gap.schema import Results

    if isinstance(res, Results):
        return res
    return Results.from_dict(json.loads(dumps(res)), where="results.json")


def write_outputs(res: Results | Mapping[str, Any], out_dir: str | Path | None, json_path: str | Path | None = None,
                  render: Callable[[Any], str] | None = None) -> None:
    """report.html, results.json and the optional --json copy: all of them or, on failure, none.

    `res` is a job's dict or `Results` (written as its JSON form). `render` turns the JSON form
    into HTML (default: the analysis report); no `out_dir`: only --json.
    """
    if not isinstance(res, dict):  # `Results`, a mapping of its JSON form
        res = res.to_dict() if hasattr(res, "to_dict") else dict(res)
    text = dumps(res)
    files = []
    if out_dir is not None:
        if render is None:
            from perception_gap.reports import render_report
            render = render_report
        html = render(json.loads(text))  # from the JSON form: what the report may read
        files = [(Path(out_dir) / "report.html", html), (Path(out_dir) / "results.json", text)]  # renamed in this order
        if isinstance(res.get("camera_model"), dict):  # the measured camera, for a renderer or an augmentation
            files.append((Path(out_dir) / "camera_model.json", dumps(res["camera_model"])))
    write_files(files + ([(Path(json_path), text)] if json_path else []))


def render_check(res: Mapping[str, Any]) -> str:
    """The report of the checks after the gap hunt (policy check, replay, reprojection) from their JSON form."""
    from perception_gap.reports.geometry import render_geometry_report

    return render_geometry_report(res)


def render_evaluation(res: Mapping[str, Any]) -> str:
    """The report of an evaluation check (rollouts, rank fidelity, latency) from its JSON form."""
    from perception_gap.reports.evaluation import render_evaluation as render

    return render(res)


def render_for(res: Mapping[str, Any]) -> Callable[[Any], str] | None:
    """The report renderer of a result's kind: None (the analysis report) for `run`, `screen`, `drift`
    and `stats` results, else the evaluation or the geometry check report."""
    if any(k in res for k in ("encoders", "screen", "drift", "stats")):
        return None
    if any(k in res for k in ("rollouts", "rank_fidelity", "latency")):
        return render_evaluation
    if any(k in res for k in ("policy_check", "replay", "reprojection")):
        return render_check
    return None

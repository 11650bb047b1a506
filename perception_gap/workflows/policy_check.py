"""The `policy-check` job: matched sim/real observations of a catalog through a frozen policy.

Frames are decoded the way the statistics stage decodes them, whatever the set's source: an
image or `.npy` file from the bytes that still hash to the content hash `index` recorded; a
frame inside a container (a LeRobot or plain video, a Parquet image column, an HDF5 dataset, a
ROS bag topic) from one sequential, hash-verified pass over its container
(`perception_gap.ingest.containers.verified_group`). Pairs are visited in the sim set's decode
order, so a container is walked front to back once when the real set lies in the same order (a
pass restarts only for a frame behind it). A frame whose file or container changed since
`index`, or that does not decode, skips its pair with the reason.

The policy is called as `policy(images, proprio)` with images float32 (N, 3, H, W) RGB: 8-bit
frames / 255, 16-bit / 65535, observation arrays of other dtypes as they are (docs/contract.md);
`--preprocess` (module:function) may map each batch first. Proprio of one width on sim frames
and another on real frames is `control_dims`, as `stats` names it (the run goes on: a policy may
read images only); when the policy then raises, its one-line error says so too. The
`--max-rel-diff` gate covers every action dimension or is `not computed` (exit 1, with the
dimensions it could not measure in its `reason`; `perception_gap.gates`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.catalog import Catalog
from perception_gap.errors import FrameError, InputError
from perception_gap.gates import threshold_gate
from perception_gap.pairing import pair_by_key
from perception_gap.version import __version__

Policy = Callable[[np.ndarray, np.ndarray], np.ndarray]
CHANGED = "changed since `index` (re-index the set)"


def policy_array(img: Any) -> np.ndarray:
    """(3, H, W) float32 of a decoded frame: 8-bit / 255, 16-bit / 65535, other arrays as they are.

    Args:
        img: what the decoders give: a Pillow image, an (H, W, C) array, or a video's `RGB8Frame`.

    Raises:
        FrameError: not 1 or 3 channels.
    """
    from perception_gap.ingest.containers import RGB8Frame

    if isinstance(img, RGB8Frame):
        img = img.array
    if isinstance(img, np.ndarray):
        a = img if img.ndim == 3 else img[:, :, None]
        a = a.astype(np.float32) / {np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0}.get(a.dtype, 1.0)
    else:
        a = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    if a.shape[2] != 3:
        raise FrameError(f"expected 1 or 3 channels, got {a.shape[2]}")
    return np.ascontiguousarray(a.transpose(2, 0, 1))


class FrameReader:
    """Decoded frames of one set's rows, files and containers alike (see the module docstring).

    Args:
        rows: catalog rows with `rgb_path`, `content_hash`, `container_path`, `member`,
            `frame_index` and `container_hash`.
    """

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self._groups: dict[tuple[str, str], list[tuple[str, int, str | None]]] = {}
        for r in rows:
            if r.get("member"):
                self._groups.setdefault((r["container_path"], r["member"]), []).append(
                    (r["content_hash"], int(r["frame_index"]), r["container_hash"]))
        for frames in self._groups.values():
            frames.sort(key=lambda f: f[1])
        self._open: dict[tuple[str, str], tuple[Iterator[tuple[tuple, tuple[str, Any]]], list[int]]] = {}

    def close(self) -> None:
        self._open.clear()

    def frame(self, row: dict[str, Any]) -> np.ndarray:
        """(3, H, W) float32 of a row's frame.

        Raises:
            FrameError: unreadable, changed since `index`, or not 1 or 3 channels.
        """
        if row.get("member"):
            img = self._container(row)
        else:
            img = self._file(row)
        if isinstance(img, FrameError):
            raise img
        if img is None:
            raise FrameError(CHANGED)
        return policy_array(img)

    @staticmethod
    def _file(row: dict[str, Any]) -> Any:
        from perception_gap.ingest.entries import content_hash
        from perception_gap.ingest.frames import decode_rgb, read_bytes

        data = read_bytes(Path(row["rgb_path"]))
        if row.get("content_hash") and content_hash(data) != row["content_hash"]:
            return None
        return decode_rgb(Path(row["rgb_path"]), data)

    def _container(self, row: dict[str, Any]) -> Any:
        from perception_gap.ingest.containers import verified_group

        key, index = (row["container_path"], row["member"]), int(row["frame_index"])
        state = self._open.get(key)
        if state is None or state[1][0] > index:  # not open yet, or already past this frame: a fresh pass
            frames = [f for f in self._groups[key] if f[1] >= index]
            state = (zip(frames, verified_group(key[0], key[1], frames, arrays=True)), [index])
            self._open[key] = state
        for (_, i, _), (_, img) in state[0]:
            state[1][0] = i + 1
            if i == index:
                return img
            if i > index:
                break
        return FrameError(f"frame {index} of {key[0]} was not decoded")


def catalog_pairs(catalog: Catalog, sim: str, real: str) -> tuple[list[str], list[dict], list[dict]]:
    """(pair keys, sim rows, real rows) of the usable frames both sets share, in the sim set's decode order.

    Raises:
        InputError: an unknown set, or fewer than 2 shared pair keys.
    """
    for name, flag in ((sim, "--sim"), (real, "--real")):
        if catalog.get_set(name) is None:
            raise InputError(f"Unknown set {name!r} for {flag} (known: {', '.join(map(repr, catalog.list_sets()))}).")
    rows = {}
    for name in (sim, real):
        usable = catalog.load_frames(name)
        full = {r["rgb_path"]: r for r in catalog.frames_at_paths([r["rgb_path"] for r in usable])
                if r["set_name"] == name}
        rows[name] = [{**full.get(r["rgb_path"], {}), **r} for r in usable]
    pairing = pair_by_key([r["pair_key"] for r in rows[sim]], [r["pair_key"] for r in rows[real]])
    pairing.log_duplicates(f"policy check {sim!r} vs {real!r}")
    if len(pairing) < 2:
        raise InputError(f"Expected at least 2 pair keys shared by {sim!r} and {real!r}, got {len(pairing)}.")

    def order(ij: tuple[int, int]) -> tuple:
        r = rows[sim][ij[0]]
        return (r.get("container_path") or r["rgb_path"], r.get("member") or "", r.get("frame_index") or 0,
                r["pair_key"])

    pairs = sorted(pairing.pairs, key=order)
    return ([rows[sim][i]["pair_key"] for i, _ in pairs], [rows[sim][i] for i, _ in pairs],
            [rows[real][j] for _, j in pairs])


def proprio_width(rows: list[dict], domain: str) -> int:
    """The one proprio length of a domain's rows (0 without proprio).

    Raises:
        InputError: the rows carry proprio vectors of different lengths (frames without one count as 0).
    """
    dims = {len(r["proprio"] or []) for r in rows}
    if len(dims) > 1:
        raise InputError(f"Expected the same proprio length for every {domain} frame, got lengths {sorted(dims)}.")
    return dims.pop() if dims else 0


def _stack(rows: list[dict], images: list[np.ndarray], domain: str) -> tuple[np.ndarray, np.ndarray]:
    shapes = {im.shape for im in images}
    if len(shapes) > 1:
        raise InputError(f"Expected one frame size across the {domain} frames, got {sorted(shapes)}.")
    width = proprio_width(rows, domain)
    proprio = np.array([r["proprio"] or [] for r in rows], dtype=np.float32).reshape(len(rows), width)
    return np.stack(images), proprio


def _preprocess(prep: Callable, images: np.ndarray, proprio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    try:
        images, proprio = prep(images, proprio)
        return np.asarray(images, np.float32), np.asarray(proprio, np.float32)
    except Exception as e:  # noqa: BLE001 - the user's hook failing is bad input, one line
        raise InputError(f"`--preprocess` raised or returned something else than (images, proprio): "
                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def run_policy(policy: Policy, prep: Callable | None, keys: list[str], sim: list[dict], real: list[dict],
               batch: int, fed: dict[str, set[int]] | None = None) -> tuple[np.ndarray, np.ndarray, list[str],
                                                                             list[dict[str, str]]]:
    """(sim actions (N, A), real actions (N, A), the pair keys used, skipped pairs with reasons).

    Each frame is decoded once (`FrameReader`); a pair with an unreadable frame is skipped.
    `fed`, when given, collects the proprio widths the policy was called with per domain
    (after `--preprocess`).
    """
    readers = {"sim": FrameReader(sim), "real": FrameReader(real)}
    out: dict[str, list[np.ndarray]] = {"sim": [], "real": []}
    used, skipped = [], []
    for i in range(0, len(keys), batch):
        got: dict[str, list] = {"sim": [], "real": []}
        for k, rs, rr in zip(keys[i:i + batch], sim[i:i + batch], real[i:i + batch]):
            ims, bad = {}, []
            for dom, row in (("sim", rs), ("real", rr)):
                try:
                    ims[dom] = readers[dom].frame(row)
                except FrameError as e:
                    bad.append(f"{dom}: {e}")
            if bad:
                skipped.append({"pair_key": k, "reason": "; ".join(bad)})
                continue
            used.append(k)
            got["sim"].append((rs, ims["sim"]))
            got["real"].append((rr, ims["real"]))
        for dom, items in got.items():
            if items:
                images, proprio = _stack([r for r, _ in items], [im for _, im in items], dom)
                if prep is not None:
                    images, proprio = _preprocess(prep, images, proprio)
                if fed is not None:
                    fed.setdefault(dom, set()).add(int(proprio.shape[1]) if proprio.ndim == 2 else -1)
                out[dom].append(policy(np.asarray(images, np.float32), np.asarray(proprio, np.float32)))
    for r in readers.values():
        r.close()
    widths = {a.shape[1] for d in out.values() for a in d}
    if len(widths) > 1:
        raise InputError(f"Expected the policy to return the same action width for every batch, got {sorted(widths)}.")
    if len(used) < 2:
        raise InputError(f"Expected at least 2 readable pairs, got {len(used)} ({len(skipped)} skipped: "
                         f"{skipped[0]['reason'] if skipped else 'none'}).")
    return np.concatenate(out["sim"]), np.concatenate(out["real"]), used, skipped


def _exit_message(e: BaseException, stage: str, policy: str, preprocess: str | None) -> str:
    """One line for user code (the policy or --preprocess) that tried to end the process."""
    what = f"sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"raise {type(e).__name__}"
    return (f"The user code {stage} called {what}; expected `--policy` {policy!r}"
            f"{f' and `--preprocess` {preprocess!r}' if preprocess else ''} to return actions, "
            "not to end the process. No results were written.")


def _proprio_findings(fed: dict[str, set[int]], catalog_widths: dict[str, int]) -> list:
    """`control_dims` (as `stats` names it) when the policy got proprio of one width on sim frames
    and another on real frames."""
    from perception_gap.diagnoses.control import control_dims_finding

    ws, wr = sorted(fed.get("sim", ())), sorted(fed.get("real", ()))
    if ws == wr or not ws or not wr:
        return []
    return [control_dims_finding(
        "proprio", ws[0], wr[0], {"fed_to_policy": True, "catalog_sim_dims": catalog_widths["sim"],
                                  "catalog_real_dims": catalog_widths["real"]},
        where=": the policy was fed both layouts" + (" (after `--preprocess`)" if (ws[0], wr[0]) != (
            catalog_widths["sim"], catalog_widths["real"]) else ""))]


def check_batch_size(batch_size: Any) -> None:
    """`batch_size` is a whole number >= 1 (checked before the catalog is opened)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"Expected `--batch-size` >= 1, got {batch_size!r}.")


def policy_check_job(catalog: Catalog, sim: str, real: str, policy: str, *, preprocess: str | None = None,
                     batch_size: int = 32, max_rel_diff: float | None = None) -> dict[str, Any]:
    """Push the paired frames of `sim` and `real` through a frozen policy and compare the actions.

    Args:
        catalog: an open catalog holding both sets (any source: files, LeRobot, HDF5, video, ROS bags).
        sim, real: set names.
        policy: a TorchScript file, a `.pt2` program or `module:function`.
        preprocess: optional `module:function` called on each batch as fn(images, proprio).
        batch_size: frames per policy call.
        max_rel_diff: gate on the largest |real - sim| / sim std over every action dimension; None: no
            gate. The gate is `not computed` (it does not pass) when a dimension's value is undefined
            (sim constant there, real different) or not finite.

    Returns:
        The results: `policy_check` (`policy`, `per_dim`, `n_pairs`, ..., `skipped`, `proprio_dims`
        (the proprio widths the policy was called with per domain), `gate`), `findings` (with
        `control_dims` when those widths differ, as `stats` names them), `version`, `config`.

    Raises:
        InputError: unknown sets, too few pairs, a policy that cannot be loaded or fails.
    """
    from perception_gap.encoders.errors import EncoderError
    from perception_gap.encoders.policy import PolicyCall, import_function, load_policy
    from perception_gap.findings import order_findings
    from perception_gap.geometry.policy import compare_actions, policy_findings, rel_diff_gate_value

    check_batch_size(batch_size)
    keys, sim_rows, real_rows = catalog_pairs(catalog, sim, real)
    widths = {"sim": proprio_width(sim_rows, "sim"), "real": proprio_width(real_rows, "real")}
    fed: dict[str, set[int]] = {}
    stage = "loading `--policy`"
    try:
        call = PolicyCall(load_policy(policy), policy)
        stage = "importing `--preprocess`"
        prep = import_function(preprocess) if preprocess else None
        stage = "running the policy" + (" or `--preprocess`" if preprocess else "")
        a_sim, a_real, used, skipped = run_policy(call, prep, keys, sim_rows, real_rows, batch_size, fed)
    except EncoderError as e:
        hint = (f" (sim proprio is {widths['sim']}-d, real proprio {widths['real']}-d: `stats` names this "
                "control_dims)" if widths["sim"] != widths["real"] else "")
        raise InputError(f"{str(e).rstrip('.')}{hint}." if hint else str(e)) from None
    except (Exception, KeyboardInterrupt):  # errors with their own message; Ctrl-C as the CLI reports it
        raise
    except BaseException as e:  # noqa: BLE001 - sys.exit() in user code must not end the run with exit 0
        raise InputError(_exit_message(e, stage, policy, preprocess)) from None
    step_of = {k: r["step"] if r["step"] is not None else rr["step"] for k, r, rr in zip(keys, sim_rows, real_rows)}
    pc = compare_actions(a_sim, a_real, used, [step_of[k] for k in used])
    section = {"policy": policy, **pc.to_dict(), "skipped": skipped,
               "proprio_dims": {d: sorted(fed.get(d, ())) for d in ("sim", "real")}}
    worst, why = rel_diff_gate_value(pc)
    section["gate"] = threshold_gate("max_paired_diff_rel", worst, max_rel_diff, reason=why)
    findings = policy_findings(pc) + _proprio_findings(fed, widths)
    return {"policy_check": section, "findings": [f.to_dict() for f in order_findings(findings)],
            "version": __version__, "config": {"policy": policy, "sim": sim, "real": real, "preprocess": preprocess}}

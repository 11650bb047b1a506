"""Spatial diagnoses on the frames' luma thumbnails: `orientation`, `field_of_view`, `pair_sync`.

All three compare where things are in the frame, which no per-frame statistic sees: a flipped or
rotated frame has the same histogram, spectrum and noise as the original. They read the
`THUMB` x `THUMB` thumbnails (`diagnoses.thumbs`) and rely on matched pairs; unpaired,
`orientation` and `field_of_view` compare the two sets' mean images when the camera is fixed
enough for those to show the same scene structure, and say nothing otherwise.

Orientation runs first: the later checks compare real frames turned the way it found sim frames
to be.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from perception_gap.diagnoses.common import num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.thumbs import (
    DIHEDRAL,
    INVERSE,
    aligned_pairs,
    fixed_camera,
    ncc,
    set_thumbs,
    zoom_operator,
    zoom_stack,
)
from perception_gap.findings import Finding

# Orientation, paired: a non-identity turn must match a pair better than the frames as they are
# by ORIENT_MARGIN (correlation), reach ORIENT_MIN_NCC, and be the best turn for ORIENT_SHARE of pairs.
ORIENT_MARGIN = 0.15
ORIENT_MIN_NCC = 0.5
ORIENT_SHARE = 0.6
# Unpaired, on the sets' mean images: the turned mean must correlate ORIENT_MEAN_NCC and beat the
# untouched one by ORIENT_MEAN_MARGIN (mean images of different scenes correlate weakly; a fixed
# robot view's mean keeps its layout, so a flip or a turn shows there and nowhere on clean splits).
ORIENT_MEAN_NCC = 0.5
ORIENT_MEAN_MARGIN = 0.3
ORIENT_MIN_FRAMES = 8

# Field of view: magnifications searched (log-spaced) and shifts (thumbnail pixels).
FOV_ZOOMS = np.exp(np.linspace(math.log(0.6), math.log(1.0 / 0.6), 61))
FOV_SHIFTS = np.array([(dy, dx) for dy in (-1.0, 0.0, 1.0) for dx in (-1.0, 0.0, 1.0)])
# A zoom is named at FOV_MIN_ZOOM or more (either way), when it beats zoom 1 by FOV_MARGIN in
# correlation and FOV_SHARE of pairs agree within FOV_AGREE (log zoom).
FOV_MIN_ZOOM = 1.08
FOV_MARGIN = 0.03
FOV_SHARE = 0.6
FOV_AGREE = 0.04
# Unpaired, on the sets' mean images (a fixed camera's mean image keeps the scene's layout): the
# zoom of the real mean that best matches the sim mean must correlate FOV_MEAN_NCC, beat zoom 1 by
# FOV_MEAN_GAIN (median over FOV_BOOT resamplings of the frames of each side), lie inside the
# searched range, and FOV_BOOT_SHARE of the resamplings must find a zoom of FOV_MIN_ZOOM or more
# the same way: photometric faults and flips move the gain far less than a real zoom does, and
# means of different scenes correlate too weakly to name anything.
FOV_MIN_FRAMES = 8
FOV_BOOT = 16
FOV_MEAN_NCC = 0.5
FOV_MEAN_GAIN = 0.08
FOV_BOOT_SHARE = 0.5
# ... and each side must show one fixed camera (`thumbs.fixed_camera`): the even/odd mean images of
# a moving camera whose views look alike agree as well as a fixed camera's, and read false zooms.
# Degrees of horizontal field of view the evidence converts the zoom for (typical robot cameras).
FOV_NOMINAL_DEG = (60.0, 90.0)
# The zoom search costs ~40 ms a pair: at most this many pairs, evenly spread, are searched.
FOV_MAX_PAIRS = 48

# Pair sync: neighbours searched within +-SYNC_STEPS steps of the same episode; a neighbour must
# beat the own pair by SYNC_MARGIN, for SYNC_SHARE of the pairs that have neighbours.
SYNC_STEPS = 3
SYNC_MARGIN = 0.05
# ... or, where consecutive frames barely differ (a slow camera: neighbours correlate 0.985 on the
# tune RGB-D sequence, so no neighbour can beat the own pair by SYNC_MARGIN), a neighbour that
# leaves at most SYNC_DECORR of the own pair's decorrelation (1 - ncc) and beats it by SYNC_MIN_GAIN.
SYNC_DECORR = 0.5
SYNC_MIN_GAIN = 0.005
SYNC_SHARE = 0.5
SYNC_MIN_PAIRS = 4

_TURN_WORDS = {
    "flip_vertical": "upside down (flipped vertically)", "flip_horizontal": "mirrored (flipped horizontally)",
    "rotate_180": "rotated by 180 degrees", "transpose": "transposed (height and width swapped)",
    "rotate_90_cw": "rotated 90 degrees clockwise", "rotate_90_ccw": "rotated 90 degrees counter-clockwise",
    "anti_transpose": "transposed across the other diagonal",
}


def skipped_for_moving_camera(ctx: Context, code: str) -> None:
    """Note that an unpaired set-level reading did not run because the frames show no fixed camera
    (the `moving_camera` info says so once, for every such check)."""
    ctx.memo.setdefault("skipped_for_moving_camera", []).append(code)


def _turn_action(turn: str) -> str:
    undo = INVERSE.get(turn, turn)
    hint = {"flip_vertical": " (an OpenGL-style bottom-left image origin is the usual cause)",
            "transpose": " (an image array read as W x H)"}.get(turn, "")
    return (f"Fix the sim camera or its loader so frames come out the way the real camera's do: apply "
            f"`{undo}` to the sim frames{hint}. This is a pipeline bug; no randomization covers it.")


def check_orientation(ctx: Context) -> Finding | None:
    """Sim frames flipped, rotated or transposed against their real pairs (or, unpaired, the mean images)."""
    al = aligned_pairs(ctx)
    if al is not None and len(al[0]) >= 3:
        pairs, ts, tr = al
        scores = _turn_scores(ctx, pairs, ts, tr)  # (8, n)
        best = scores.argmax(axis=0)
        names = list(DIHEDRAL)
        margin = scores[best, np.arange(len(pairs))] - scores[0]
        votes = Counter(names[b] for b, m, s in zip(best, margin, scores.max(axis=0))
                        if b != 0 and m >= ORIENT_MARGIN and s >= ORIENT_MIN_NCC)
        if not votes:
            return None
        turn, n = votes.most_common(1)[0]
        if n < ORIENT_SHARE * len(pairs):
            return None
        k = names.index(turn)
        ev = basis_evidence("pairs", len(pairs), ctx)
        ev.update({"transform": turn, "pairs_agreeing": n, "share": num(n / len(pairs), 3),
                   "ncc_as_is_median": num(float(np.median(scores[0])), 3),
                   "ncc_turned_median": num(float(np.median(scores[k])), 3),
                   "ncc_by_transform": {t: num(float(np.median(scores[i])), 3) for i, t in enumerate(names)}})
        score = float(np.median(scores[k] - scores[0])) / ORIENT_MARGIN
    else:
        found = _orientation_unpaired(ctx)
        if found is None:
            return None
        turn, ev, score = found
    ev["see"] = "maps (mean images)"
    ctx.memo["orientation"] = turn
    ctx.memo.pop("aligned_pairs", None)  # the later checks compare the turned frames
    title = f"Sim frames are {_TURN_WORDS[turn]} relative to real ({ev.get('share', 1.0):.0%} of pairs)." \
        if ev["basis"] == "pairs" else f"Sim frames look {_TURN_WORDS[turn]} relative to real (set mean images)."
    return Finding("orientation", "bug", title, ev, _turn_action(turn), num(max(score, 1.0)))


def _orientation_unpaired(ctx: Context) -> tuple[str, dict, float] | None:
    sides = set_thumbs(ctx, ORIENT_MIN_FRAMES)
    if sides is None:
        return None
    ts, tr = sides
    fixed = fixed_camera(ctx, ts, tr)
    if not fixed["passed"]:
        skipped_for_moving_camera(ctx, "orientation")
        return None
    ms, mr = np.nanmean(ts, axis=0), np.nanmean(tr, axis=0)
    scores = {t: float(ncc(ms, f(mr))) for t, f in DIHEDRAL.items()}
    turn = max(scores, key=scores.get)
    if turn == "identity" or scores[turn] < ORIENT_MEAN_NCC or scores[turn] - scores["identity"] < ORIENT_MEAN_MARGIN:
        return None
    ev = basis_evidence("distribution", 0, ctx)
    ev.update({"transform": turn, "mean_image_ncc_as_is": num(scores["identity"], 3),
               "mean_image_ncc_turned": num(scores[turn], 3),
               "ncc_by_transform": {t: num(v, 3) for t, v in scores.items()}, "fixed_camera": fixed})
    return turn, ev, (scores[turn] - scores["identity"]) / ORIENT_MEAN_MARGIN


def _best_zoom(ts: np.ndarray, tr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: (best zoom of real onto sim, its correlation, the correlation at zoom 1)."""
    zz = np.repeat(FOV_ZOOMS, len(FOV_SHIFTS))
    sh = np.tile(FOV_SHIFTS, (len(FOV_ZOOMS), 1))
    one = int(np.argmin(np.abs(np.log(FOV_ZOOMS))))
    op, inside = zoom_operator(zz, sh)
    best_z, best_c, at_one = [], [], []
    for s, r in zip(ts, tr):
        if np.isfinite(s).all():
            warped = (op @ np.nan_to_num(np.asarray(r, dtype=np.float64)).ravel()).reshape(inside.shape)
            c = _ncc_inside(np.asarray(s, dtype=np.float64).ravel(), warped, inside)
        else:
            c = _ncc_one(s, zoom_stack(r, zz, sh))
        c = c.reshape(len(FOV_ZOOMS), -1)
        per_zoom = c.max(axis=1)
        k = int(per_zoom.argmax())
        best_z.append(FOV_ZOOMS[k]); best_c.append(per_zoom[k]); at_one.append(per_zoom[one])
    return np.array(best_z), np.array(best_c), np.array(at_one)


def _ncc_inside(a: np.ndarray, warped: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """`ncc` of one image `a` (P,) against each row of `warped` (K, P), over the samples each row
    has inside the frame (`inside`, 0/1; `warped` is 0 elsewhere), from the five sums of the
    overlap: one product per sum instead of K centred copies (values in [0, 1]: the moments lose
    nothing a correlation bar could see, tested against `ncc`)."""
    n = np.maximum(inside.sum(axis=1), 1.0)
    sa, saa = inside @ a, inside @ (a * a)
    sb, sbb, sab = warped.sum(axis=1), np.einsum("kp,kp->k", warped, warped), warped @ a
    cov = sab - sa * sb / n
    den = np.sqrt(np.maximum(saa - sa * sa / n, 0.0) * np.maximum(sbb - sb * sb / n, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, cov / np.maximum(den, 1e-300), 0.0)


def _ncc_one(a: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """`ncc(a, b)` for one (H, W) image against each (H, W) image of a (K, H, W) stack, without K copies
    of `a` (the same two-pass arithmetic; the field of view search compares 549 warps a pair)."""
    if not np.isfinite(a).all():
        return ncc(np.broadcast_to(a, stack.shape), stack)
    k = len(stack)
    av = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(stack, dtype=np.float64).reshape(k, -1)
    m = np.isfinite(b)
    mf = m.astype(np.float64)
    n = np.maximum(m.sum(axis=1), 1)
    bz = np.where(m, b, 0.0)
    am = (mf @ av) / n
    bm = bz.sum(axis=1) / n
    ac = (av[None] - am[:, None]) * mf
    bc = (bz - bm[:, None]) * mf
    den = np.sqrt(np.einsum("kp,kp->k", ac, ac) * np.einsum("kp,kp->k", bc, bc))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, np.einsum("kp,kp->k", ac, bc) / np.maximum(den, 1e-300), 0.0)


def _pair_key(pair: tuple) -> tuple[int, int]:
    return id(pair[0].image), id(pair[1].image)


def _turn_scores(ctx: Context, pairs: list, ts: np.ndarray, tr: np.ndarray) -> np.ndarray:
    """(8, n) correlation of each sim thumbnail with its real one under each `DIHEDRAL` turn, kept
    per pair across resamples (`ctx.cache`)."""
    cache = ctx.cache.setdefault("turn_scores", {})
    todo = [i for i, pr in enumerate(pairs) if _pair_key(pr) not in cache]
    if todo:
        got = np.stack([ncc(ts[todo], DIHEDRAL[t](tr[todo])) for t in DIHEDRAL])
        for j, i in enumerate(todo):
            cache[_pair_key(pairs[i])] = got[:, j]
    return np.stack([cache[_pair_key(pr)] for pr in pairs], axis=1)


def _pair_zooms(ctx: Context, pairs: list, ts: np.ndarray, tr: np.ndarray):
    """(best zoom, its correlation, correlation at 1, indices) of at most FOV_MAX_PAIRS pairs, evenly
    spread. Within a resample (`ctx.resampled`) the drawn pairs that the full sets searched are read
    back instead (the search costs ~40 ms a pair)."""
    cache = ctx.cache.setdefault("pair_zooms", {})
    if ctx.resampled and cache:
        pick = np.array([i for i, pr in enumerate(pairs) if _pair_key(pr) in cache], dtype=int)
    else:
        pick = np.unique(np.linspace(0, len(pairs) - 1, min(len(pairs), FOV_MAX_PAIRS)).round().astype(int))
        todo = [i for i in pick if _pair_key(pairs[i]) not in cache]
        if todo:
            for i, row in zip(todo, zip(*_best_zoom(ts[todo], tr[todo]))):
                cache[_pair_key(pairs[i])] = row
    if len(pick) == 0:
        return np.array([]), np.array([]), np.array([]), pick
    z, c, c1 = (np.array(v) for v in zip(*[cache[_pair_key(pairs[i])] for i in pick]))
    return z, c, c1, pick


def _fov_deg(real_deg: float, zoom: float) -> float:
    return math.degrees(2 * math.atan(math.tan(math.radians(real_deg) / 2) / zoom))


def _fov_unpaired(ctx: Context) -> tuple[float, dict] | None:
    """(zoom, evidence) from the sets' mean images, or None when they do not show it clearly: the
    zoom of the real mean image that best matches the sim mean image, then (only when that one
    passes) the same search over FOV_BOOT resamplings of each side's frames."""
    sides = set_thumbs(ctx, FOV_MIN_FRAMES)
    if sides is None:
        return None
    ts, tr = sides
    fixed = fixed_camera(ctx, ts, tr)
    if not fixed["passed"]:  # a mean image of a moving camera or of different scenes has no layout to zoom
        skipped_for_moving_camera(ctx, "field_of_view")
        return None
    z, c, c1 = (float(v[0]) for v in _best_zoom(np.nanmean(ts, axis=0)[None], np.nanmean(tr, axis=0)[None]))
    if not (FOV_ZOOMS[0] < z < FOV_ZOOMS[-1] and abs(math.log(z)) >= math.log(FOV_MIN_ZOOM)
            and c >= FOV_MEAN_NCC and c - c1 >= FOV_MEAN_GAIN / 2):  # the resamplings decide the gain
        return None
    if ctx.resampled:  # within a resample of `verdicts`, the resampling is the bootstrap
        if c - c1 < FOV_MEAN_GAIN:
            return None
        ev = basis_evidence("distribution", 0, ctx)
        ev.update({"zoom_sim_over_real": num(z, 3), "fixed_camera": fixed})
        return z, ev
    rng = np.random.default_rng(0)
    bs = np.array([np.nanmean(ts[rng.integers(0, len(ts), len(ts))], axis=0) for _ in range(FOV_BOOT)])
    br = np.array([np.nanmean(tr[rng.integers(0, len(tr), len(tr))], axis=0) for _ in range(FOV_BOOT)])
    bz, bc, bc1 = _best_zoom(bs, br)
    lz = np.log(bz)
    gain = float(np.median(bc - bc1))
    same_way = float(np.mean((np.sign(lz) == np.sign(math.log(z))) & (np.abs(lz) >= math.log(FOV_MIN_ZOOM))))
    if gain < FOV_MEAN_GAIN or same_way < FOV_BOOT_SHARE:
        return None
    ev = basis_evidence("distribution", 0, ctx)
    ev.update({"zoom_sim_over_real": num(z, 3), "focal_ratio_sim_over_real": num(z, 3),
               "method": "zoom of the real mean image that best matches the sim mean image",
               "mean_image_ncc_at_zoom": num(c, 3), "mean_image_ncc_at_1": num(c1, 3),
               "resampled_gain_median": num(gain, 3), "resampled_share_same_way": num(same_way, 3),
               "resampled_zoom_iqr": nums([float(np.exp(np.percentile(lz, q))) for q in (25, 75)], 3),
               "frames": {"sim": len(ts), "real": len(tr)}, "fixed_camera": fixed})
    return z, ev


def check_field_of_view(ctx: Context) -> Finding | None:
    """Sim and real frames of a pair showing the scene at different magnifications (focal length or crop)."""
    al = aligned_pairs(ctx)
    if al is None or len(al[0]) < 3:
        found = _fov_unpaired(ctx)
        return None if found is None else _fov_finding(ctx, *found)
    pairs, ts, tr = al
    z, c, c1, pick = _pair_zooms(ctx, pairs, ts, tr)
    if len(pick) < 3:
        return None
    lz = np.log(z)
    med = float(np.median(lz))
    agree = np.abs(lz - med) <= FOV_AGREE
    if abs(med) < math.log(FOV_MIN_ZOOM) or agree.mean() < FOV_SHARE:
        return None
    gain = c[agree] - c1[agree]
    if float(np.median(gain)) < FOV_MARGIN or float(np.median(c[agree])) < ORIENT_MIN_NCC:
        return None
    zoom = math.exp(med)
    ev = basis_evidence("pairs", len(pairs), ctx)
    ev.update({"zoom_sim_over_real": num(zoom, 3), "focal_ratio_sim_over_real": num(zoom, 3),
               "pairs_searched": int(len(pick)), "pairs_agreeing": int(agree.sum()),
               "share": num(float(agree.mean()), 3),
               "ncc_at_zoom": num(float(np.median(c[agree])), 3), "ncc_at_1": num(float(np.median(c1[agree])), 3),
               "per_pair_zoom": nums(z[:50].tolist(), 3)})
    return _fov_finding(ctx, zoom, ev)


def _fov_finding(ctx: Context, zoom: float, ev: dict) -> Finding:
    ev.update({"sim_fov_deg_if_real_is": {f"{d:g}": num(_fov_deg(d, zoom), 1) for d in FOV_NOMINAL_DEG},
               "see": "maps (mean images and difference maps)"})
    word = "narrower (zoomed in)" if zoom > 1 else "wider (zoomed out)"
    d60 = _fov_deg(60.0, zoom)
    how = "" if ev["basis"] == "pairs" else " (read from the set mean images of a fixed camera)"
    title = (f"Sim field of view is {word}: the scene appears {zoom:.2f}x as large as in real at the same "
             f"resolution (a 60 degree real camera would be {d60:.0f} degrees in sim){how}.")
    action = ("Set the sim camera's intrinsics (focal length, or fovy) from the real camera's calibration, "
              f"and apply the same crop on both sides: focal ratio sim/real = {zoom:.3f}. A bug, not a "
              "randomization budget.")
    return Finding("field_of_view", "bug", title, ev, action, num(abs(math.log(zoom)) / math.log(FOV_MIN_ZOOM)))


def _neighbours(ctx: Context, pairs: list) -> dict[tuple, int]:
    """Position of each real frame in its episode's order, keyed by (episode, position)."""
    by_ep: dict = {}
    for i, (_, r) in enumerate(pairs):
        by_ep.setdefault(r.episode, []).append((r.step if r.step is not None else math.inf, r.pair_key, i))
    pos = {}
    for ep, rows in by_ep.items():
        for p, (_, _, i) in enumerate(sorted(rows, key=lambda x: (x[0], x[1]))):
            pos[(ep, p)] = i
    return pos


def _sync_per_pair(ctx: Context, pairs: list, ts: np.ndarray, tr: np.ndarray) -> list:
    """Per pair: None without two neighbours, else (offset of the best-matching real frame, 0 when the
    own pair is best or not beaten clearly; its correlation gain; the seconds between the two frames
    or None)."""
    pos = _neighbours(ctx, pairs)
    index_pos = {i: key for key, i in pos.items()}
    out: list = []
    for i in range(len(pairs)):
        ep, p = index_pos[i]
        cands = {k: pos[(ep, p + k)] for k in range(-SYNC_STEPS, SYNC_STEPS + 1) if (ep, p + k) in pos}
        if len(cands) < 2:
            out.append(None)
            continue
        ks = list(cands)
        c = ncc(np.broadcast_to(ts[i], (len(ks),) + ts[i].shape), tr[[cands[k] for k in ks]])
        own = float(c[ks.index(0)])
        b = int(np.argmax(c))
        better = c[b] - own >= SYNC_MARGIN or (c[b] - own >= SYNC_MIN_GAIN and 1 - c[b] <= SYNC_DECORR * (1 - own))
        if ks[b] != 0 and better:
            t_own, t_match = pairs[i][1].timestamp, pairs[cands[ks[b]]][1].timestamp
            sec = t_match - t_own if t_own is not None and t_match is not None else None
            out.append((ks[b], float(c[b]) - own, sec))
        else:
            out.append((0, 0.0, None))
    return out


def check_pair_sync(ctx: Context) -> Finding | None:
    """Pairs out of step: a sim frame matches a neighbouring real frame of its episode better than its own."""
    al = aligned_pairs(ctx)
    if al is None or len(al[0]) < SYNC_MIN_PAIRS:
        return None
    pairs, ts, tr = al
    key = lambda pr: (id(pr[0].image), id(pr[1].image))  # noqa: E731
    cache = ctx.cache.get("pair_sync")
    if ctx.resampled and cache is not None:
        # a resample breaks the time order its neighbours need: read each drawn pair's own outcome
        # on the full sets instead (None: the pair had no neighbours)
        per = [cache.get(key(pr)) for pr in pairs]
    else:
        per = _sync_per_pair(ctx, pairs, ts, tr)
        ctx.cache["pair_sync"] = {key(pr): o for pr, o in zip(pairs, per)}
    offsets, gains, seconds, counted = [], [], [], 0
    for o in per:
        if o is None:
            continue
        counted += 1
        if o[0] != 0:
            offsets.append(o[0]); gains.append(o[1])
            if o[2] is not None:
                seconds.append(o[2])
    if counted < SYNC_MIN_PAIRS or not offsets:
        return None
    step, n = Counter(offsets).most_common(1)[0]
    if n < SYNC_SHARE * counted:
        return None
    ev = basis_evidence("pairs", len(pairs), ctx)
    ev.update({"offset_steps": int(step), "pairs_off": len(offsets), "pairs_checked": counted,
               "share_off": num(len(offsets) / counted, 3), "pairs_at_offset": n,
               "median_ncc_gain": num(float(np.median(gains)), 3),
               "offset_histogram": {str(k): v for k, v in sorted(Counter(offsets).items())},
               "offset_seconds_median": num(float(np.median(seconds)), 4) if seconds else None})
    direction = "later" if step > 0 else "earlier"
    when = f" ({abs(float(np.median(seconds))):.3g} s)" if seconds else ""
    title = (f"{len(offsets)} of {counted} pairs are out of sync: a sim frame matches the real frame "
             f"{abs(step)} step(s){when} {direction} better than its own pair.")
    action = (f"Re-key the pairs (real frame = sim step {step:+d}) or fix the timestamp alignment of the "
              f"two logs before comparing; every paired statistic is read against the wrong frame until then.")
    return Finding("pair_sync", "bug", title, ev, action, num(len(offsets) / counted / SYNC_SHARE))

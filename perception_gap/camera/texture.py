"""Blur, sensor noise and compression of the real camera, by analysis through synthesis.

Blur and noise are told apart by how they act across spatial frequency, which a single
high-frequency energy cannot do (a blur and a noise of the right sizes cancel in it). Paired, on
tiles where the two frames agree: the transfer function real/sim (the cross-spectrum over the sim
spectrum, immune to independent noise) and the noise spectrum left beside it, per frequency
band; unpaired, the two sets' band spectra. Candidates (blur sigma, then noise level, twice in
turn) go through the same camera as the real frames (blur on linear light before it clips, noise
on the encoded values, the JPEG of the real files on 16-pixel-aligned tiles so its blocks line
up), and the candidate whose statistics match the real frames' is kept. Intervals: the tiles
resampled by the unit of their frame, the last search curves read again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.camera import ops
from perception_gap.camera.model import Factor
from perception_gap.metrics.settings import REPLICATES

MIN_SIGMA, MIN_NOISE = 0.3, 0.6  # smallest blur (px) and noise (levels at mid grey) kept in a model
N_BOOT = REPLICATES["camera_texture"]
TILE, MARGIN = 48, 12         # tile size (JPEG-block aligned) and blur context around it
MAX_TILES, TILES_PER_FRAME, MAX_FRAMES = 64, 4, 32
TILE_MIN_STD = 0.02           # a tile needs this much luma texture to carry a transfer function
TILE_MAX_DIFF = 0.04          # ... and its low-passed sim and real luma to agree this well (paired)
BANDS = np.array([0.03, 0.07, 0.11, 0.16, 0.22, 0.28, 0.35, 0.42, 0.5])
SIGMA_GRID = np.array([0.0, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.15, 1.3, 1.5, 1.7, 1.95, 2.2, 2.5, 2.9, 3.4, 4.0])
NOISE_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 15.0])
NOISE_EPS = (0.25 * ops.LEVEL) ** 2
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


@dataclass(frozen=True)
class JpegInfo:
    """What the files say about compression: real and sim IJG quality (None: not JPEG) and the real
    files' chroma subsampling."""

    real_quality: float | None = None
    sim_quality: float | None = None
    subsampling: str = "4:4:4"


def boot_weights(units: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """(n_boot, n_units) draw counts of a cluster bootstrap of the units."""
    g = int(units.max()) + 1 if len(units) else 0
    return rng.multinomial(g, np.full(g, 1.0 / g), size=n_boot).astype(np.float64) if g else np.zeros((n_boot, 0))


def _ci(samples: np.ndarray, estimate: float) -> list[float]:
    """The engine's interval (`metrics.bootstrap.centred_ci`) of `estimate` from bootstrap replicates."""
    from perception_gap.metrics.bootstrap import centred_ci

    s = np.asarray(samples, np.float64)
    s = s[np.isfinite(s)]
    if not s.size:
        return [math.nan, math.nan]
    lo, hi, _ = centred_ci(s, float(estimate), 0.95)
    return [round(max(lo, 0.0), 3), round(hi, 3)]


@dataclass
class _Tiles:
    """Tiles (with context) of the photometrically matched sim frames and their real counterparts,
    stacked: every candidate is synthesized for all tiles at once."""

    sim: np.ndarray             # (n, TILE + 2 MARGIN, TILE + 2 MARGIN, 3) linear light, not clipped
    real: np.ndarray | None     # (n, TILE, TILE, 3) sRGB (paired), else None
    units: np.ndarray           # (n,) resampling unit of each tile's frame
    noise: np.ndarray           # (n, TILE, TILE, 3) fixed standard normal fields
    ref: np.ndarray | None = None  # (n, TILE, TILE, 3) the sim tiles encoded: the reference signal

    def __len__(self) -> int:
        return len(self.sim)


def _luma(v: np.ndarray) -> np.ndarray:
    return v @ _LUMA


def _pick_tiles(s: np.ndarray, r: np.ndarray | None, limit: int) -> list[tuple[int, int]]:
    """Tile origins (16-aligned, so JPEG blocks line up) with texture and, paired, agreement."""
    from scipy.ndimage import gaussian_filter

    h, w = s.shape[:2]
    ls = _luma(s)
    lp = gaussian_filter(ls, 3.0) if r is not None else None
    lr = gaussian_filter(_luma(r), 3.0) if r is not None else None
    cands = []
    y0 = ((MARGIN + 15) // 16) * 16
    for y in range(y0, h - TILE - MARGIN + 1, TILE if h >= 4 * TILE else 16):
        for x in range(y0, w - TILE - MARGIN + 1, TILE if w >= 4 * TILE else 16):
            sd = float(ls[y:y + TILE, x:x + TILE].std())
            if sd < TILE_MIN_STD:
                continue
            if lp is not None and float(np.abs(lp[y:y + TILE, x:x + TILE] - lr[y:y + TILE, x:x + TILE]).mean()) > TILE_MAX_DIFF:
                continue
            cands.append((sd, y, x))
    cands.sort(reverse=True)
    picked: list[tuple[int, int]] = []
    for _, y, x in cands:
        if all(abs(y - py) >= TILE or abs(x - px) >= TILE for py, px in picked):
            picked.append((y, x))
        if len(picked) >= limit:
            break
    return picked


def _tiles(sim: list[np.ndarray], real: list[np.ndarray] | None, units: np.ndarray, rng: np.random.Generator) -> _Tiles:
    """Tiles of linear-light sim frames (`sim`, not clipped) and of the real frames (sRGB)."""
    order = rng.permutation(len(sim))[:MAX_FRAMES]
    regions, reals, us = [], [], []
    for i in order:
        lin = sim[i]
        r = real[i] if real is not None else None
        if r is not None and r.shape != lin.shape:
            continue
        for y, x in _pick_tiles(ops.linear_to_srgb(lin), r, TILES_PER_FRAME):
            regions.append(lin[y - MARGIN:y + TILE + MARGIN, x - MARGIN:x + TILE + MARGIN])
            if r is not None:
                reals.append(r[y:y + TILE, x:x + TILE])
            us.append(int(units[i]))
        if len(regions) >= MAX_TILES:
            break
    side = TILE + 2 * MARGIN
    sim_arr = np.stack(regions).astype(np.float32) if regions else np.zeros((0, side, side, 3), np.float32)
    t = _Tiles(sim_arr, np.stack(reals) if reals else None, np.array(us, np.int64),
               rng.standard_normal((len(regions), TILE, TILE, 3), dtype=np.float32))
    t.ref = ops.linear_to_srgb(sim_arr[:, MARGIN:MARGIN + TILE, MARGIN:MARGIN + TILE])
    return t


_WIN = np.outer(np.hanning(TILE), np.hanning(TILE)).astype(np.float32)
_FR = np.hypot(*np.meshgrid(np.fft.fftfreq(TILE), np.fft.rfftfreq(TILE), indexing="ij"))
_BAND = np.digitize(_FR, BANDS) - 1  # -1 below the first band, len(BANDS)-1 at/above Nyquist
_NB = len(BANDS) - 1
# (bins, bands) indicator: band sums of a stack of spectra in one product
_BANDS_OF = np.zeros((_FR.size, _NB))
_k = (_BAND.ravel() >= 0) & (_BAND.ravel() < _NB)
_BANDS_OF[np.flatnonzero(_k), _BAND.ravel()[_k]] = 1.0
_NORM = float((_WIN ** 2).sum()) * _BANDS_OF.sum(0)
# the same bands split by orientation (|fx| >= |fy|, then the rest): a line blur lowers one half only
_FX = np.abs(np.meshgrid(np.fft.fftfreq(TILE), np.fft.rfftfreq(TILE), indexing="ij")[1]).ravel()
_FY = np.abs(np.meshgrid(np.fft.fftfreq(TILE), np.fft.rfftfreq(TILE), indexing="ij")[0]).ravel()
_BANDS_DIR = np.hstack([_BANDS_OF * (_FX >= _FY)[:, None], _BANDS_OF * (_FX < _FY)[:, None]])
_NORM_DIR = float((_WIN ** 2).sum()) * np.maximum(_BANDS_DIR.sum(0), 1.0)
LENGTH_GRID = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 15.0])
MIN_LENGTH = 2.0  # px: a shorter line blur is not kept in a model


def _spec(v: np.ndarray) -> np.ndarray:
    """(n, TILE, TILE, 3) -> (n, bins) windowed luma spectra."""
    y = _luma(v)
    y = (y - y.mean(axis=(1, 2), keepdims=True)) * _WIN
    return np.fft.rfft2(y, axes=(1, 2)).reshape(len(v), -1)


def _jpeg_stack(x: np.ndarray, jpeg: JpegInfo) -> np.ndarray:
    """JPEG of each tile, encoded as one mosaic (tiles are 16-aligned: blocks never straddle two)."""
    n = len(x)
    cols = int(math.ceil(math.sqrt(n)))
    rows = int(math.ceil(n / cols))
    mosaic = np.zeros((rows * TILE, cols * TILE, 3), np.float32)
    for i in range(n):
        r, c = divmod(i, cols)
        mosaic[r * TILE:(r + 1) * TILE, c * TILE:(c + 1) * TILE] = x[i]
    back = ops.jpeg(mosaic, int(round(jpeg.real_quality or 95)), jpeg.subsampling)
    return np.stack([back[(i // cols) * TILE:(i // cols + 1) * TILE, (i % cols) * TILE:(i % cols + 1) * TILE]
                     for i in range(n)])


class _Blurred:
    """The tiles blurred at one sigma and encoded (kept while the noise level is searched)."""

    def __init__(self, t: _Tiles) -> None:
        self.t = t
        self._cache: dict[float, np.ndarray] = {}

    def at(self, sigma: float, length: float = 1.0, angle: float = 0.0) -> np.ndarray:
        key = (round(float(sigma), 6), round(float(length), 6))
        if key not in self._cache:
            if len(self._cache) > 4:
                self._cache.clear()
            x = self.t.sim
            if sigma > 0:
                from scipy.ndimage import gaussian_filter

                x = gaussian_filter(x, sigma=(0, sigma, sigma, 0), mode="mirror", truncate=3.5)
            if length > 1:
                from scipy.ndimage import convolve

                x = convolve(x, ops.motion_kernel(length, angle)[None, :, :, None], mode="mirror")
            self._cache[key] = ops.linear_to_srgb(x[:, MARGIN:MARGIN + TILE, MARGIN:MARGIN + TILE])
        return self._cache[key]


def _synth(base: np.ndarray, z: np.ndarray, noise_mid: float, shot_frac: float, jpeg: JpegInfo | None) -> np.ndarray:
    """Blurred encoded tiles -> with noise, quantized, through the real files' JPEG."""
    x = base
    if noise_mid > 0:
        read2, shot = noise_mid ** 2 * (1 - shot_frac), noise_mid ** 2 * shot_frac / 127.5
        x = x + z * np.sqrt(read2 + shot * np.clip(x, 0, 1) * 255.0) * ops.LEVEL
    x = np.clip(x, 0.0, 1.0)
    if jpeg is not None and jpeg.real_quality is not None:
        return _jpeg_stack(x, jpeg)
    return np.rint(x * 255.0) * ops.LEVEL


def _tile_stats(t: _Tiles, outs: np.ndarray, paired: bool, bands: np.ndarray = _BANDS_OF) -> np.ndarray:
    """(n_tiles, 3, bands): paired (P_ss, P_xs, P_xx) per band; unpaired (0, 0, P_xx)."""
    st = np.zeros((len(outs), 3, bands.shape[1]))
    X = _spec(outs)
    if paired:
        S = _spec(t.ref)
        st[:, 0] = (np.abs(S) ** 2) @ bands
        st[:, 1] = (X * np.conj(S)).real @ bands
    st[:, 2] = (np.abs(X) ** 2) @ bands
    return st


def _summ(st: np.ndarray, w: np.ndarray | None = None, paired: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Transfer function H and noise power N per band from summed tile statistics (weights w)."""
    s = st.sum(0) if w is None else np.tensordot(w, st, 1)
    tot = max(float(w.sum()) if w is not None else float(len(st)), 1e-9)
    norm = _NORM if st.shape[-1] == _NB else _NORM_DIR
    if not paired:
        return np.zeros(st.shape[-1]), s[2] / (norm * tot)
    pss = np.maximum(s[0], 1e-20)
    h = s[1] / pss
    n = np.maximum(s[2] - s[1] ** 2 / pss, 0.0) / (norm * tot)
    return h, n


def _loss_blur(hr: np.ndarray, hx: np.ndarray, nr: np.ndarray, nx: np.ndarray, paired: bool) -> float:
    if paired:
        return float(np.sum((hr - hx) ** 2))
    return float(np.sum((np.log(nr + NOISE_EPS) - np.log(nx + NOISE_EPS)) ** 2))


def _loss_noise(nr: np.ndarray, nx: np.ndarray, w: np.ndarray | None = None) -> float:
    d = (np.log(nr + NOISE_EPS) - np.log(nx + NOISE_EPS)) ** 2
    return float(np.sum(d if w is None else d * w))


def _argmin(grid: np.ndarray, losses: np.ndarray) -> float:
    """Grid minimum refined by the parabola through it and its neighbours."""
    i = int(np.argmin(losses))
    if 0 < i < len(grid) - 1:
        x0, x1, x2 = grid[i - 1:i + 2]
        y0, y1, y2 = losses[i - 1:i + 2]
        den = (x0 - x1) * (x0 - x2) * (x1 - x2)
        a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den if den else 0.0
        b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den if den else 0.0
        if a > 0:
            return float(np.clip(-b / (2 * a), x0, x2))
    return float(grid[i])


class _Search:
    """Synthesis over the tiles for each candidate; stats kept per tile for the bootstrap."""

    def __init__(self, t: _Tiles, real_stats: np.ndarray, paired: bool, jpeg: JpegInfo | None,
                 bands: np.ndarray = _BANDS_OF, angle: float = 0.0) -> None:
        self.t, self.paired, self.jpeg, self.bands, self.angle = t, paired, jpeg, bands, angle
        self.real_stats = real_stats  # per real tile (paired: aligned with t; unpaired: the real tiles)
        self.hr, self.nr = _summ(real_stats, paired=paired)
        self.blurred = _Blurred(t)
        self.length = 1.0  # the line blur held while sigma and the noise are searched

    def stats(self, sigma: float, noise: float, shot: float, length: float | None = None) -> np.ndarray:
        base = self.blurred.at(sigma, self.length if length is None else length, self.angle)
        return _tile_stats(self.t, _synth(base, self.t.noise, noise, shot, self.jpeg), self.paired, self.bands)

    def blur_curve(self, noise: float, shot: float) -> np.ndarray:
        return np.stack([self.stats(s, noise, shot) for s in SIGMA_GRID])

    def noise_curve(self, sigma: float, shot: float) -> np.ndarray:
        return np.stack([self.stats(sigma, n, shot) for n in NOISE_GRID])

    def length_curve(self, sigma: float, noise: float, shot: float) -> np.ndarray:
        return np.stack([self.stats(sigma, noise, shot, length) for length in LENGTH_GRID])

    def pick(self, curve: np.ndarray, which: str, w_sim: np.ndarray | None = None,
             w_real: np.ndarray | None = None) -> float:
        if self.paired:
            hr, nr = _summ(self.real_stats, w_sim, True)
        else:
            hr, nr = _summ(self.real_stats, w_real, False)
        summ = [_summ(st, w_sim, self.paired) for st in curve]
        bw = None
        if which == "noise":
            # bands weigh by how much the noise moves them: compression noise fills the upper bands
            # whatever the sensor noise, and would only add its own scatter there
            lo, hi = np.log(summ[0][1] + NOISE_EPS), np.log(summ[-1][1] + NOISE_EPS)
            bw = (hi - lo) ** 2
            bw = bw / max(float(bw.sum()), 1e-12)
        losses = [_loss_noise(nr, nx, bw) if which == "noise" else _loss_blur(hr, hx, nr, nx, self.paired)
                  for hx, nx in summ]
        grid = NOISE_GRID if which == "noise" else LENGTH_GRID if which == "length" else SIGMA_GRID
        return _argmin(grid, np.array(losses))


def _shot_fraction(search: _Search, sigma: float) -> float:
    """Share of the noise variance at mid grey that grows with the signal (shot noise), from the
    residual variance of real tiles against the noiseless synthesis, by level."""
    t = search.t
    if t.real is None:
        return 0.0
    x0 = _synth(search.blurred.at(sigma), t.noise, 0.0, 0.0, search.jpeg)
    lv, rv = [x0.reshape(-1, 3)], [(t.real - x0).reshape(-1, 3)]
    if not lv:
        return 0.0
    lvl, res = np.concatenate(lv).ravel(), np.concatenate(rv).ravel()
    edges = np.quantile(lvl, [0.05, 0.3, 0.55, 0.8, 0.95])
    xs, vs = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        k = (lvl >= lo) & (lvl < hi)
        if k.sum() > 200:
            mad = float(np.median(np.abs(res[k] - np.median(res[k]))))
            xs.append(float(lvl[k].mean()) * 255.0)
            vs.append((1.4826 * mad * 255.0) ** 2)
    if len(xs) < 3:
        return 0.0
    b, a = np.polyfit(xs, vs, 1)
    b, a = max(float(b), 0.0), max(float(a), 0.0)
    mid = a + b * 127.5
    return float(np.clip(b * 127.5 / mid, 0.0, 1.0)) if mid > 0 else 0.0


def texture_fit(sim: list[np.ndarray], real: list[np.ndarray], units_s: np.ndarray, units_r: np.ndarray,
                paired: bool, jpeg: JpegInfo | None, rng: np.random.Generator, motion_angle: float | None = None
                ) -> tuple[list[Factor], list[dict[str, str]], dict[str, Any]]:
    """Blur and sensor noise by synthesis (see the module docstring), compression from the files; a
    line blur at `motion_angle` (degrees) too when the diagnoses found the real side blurred one way."""
    out: list[Factor] = []
    left: list[dict[str, str]] = []
    comp = None
    if jpeg is not None and jpeg.real_quality is not None and (jpeg.sim_quality is None or jpeg.sim_quality > jpeg.real_quality + 5):
        comp = Factor("compression", {"quality": int(round(jpeg.real_quality)), "subsampling": jpeg.subsampling},
                      {}, "the real files' JPEG quantization tables and chroma sampling")
    use_jpeg = jpeg if comp is not None else None
    t = _tiles(sim, real if paired else None, units_s, rng)
    if paired and len(t) < 8:
        paired = False  # too few tiles where the pairs agree: compare the sets' spectra instead
        t = _tiles(sim, None, units_s, rng)
        if len(t) >= 4:
            left.append({"code": "sharpness", "reason": "few tiles where sim and real pairs line up: blur and noise "
                                                        "read from the sets' spectra"})
    info: dict[str, Any] = {"tiles": len(t), "basis": "pairs" if paired else "sets"}
    if len(t) < 4:
        left.append({"code": "sharpness", "reason": f"too few textured {TILE} x {TILE} tiles to measure blur and noise"})
        return ([comp] if comp else []), left, info
    bands = _BANDS_OF if motion_angle is None else _BANDS_DIR
    if paired:
        real_stats = _tile_stats(t, t.real, True, bands)
        rt_units = t.units
    else:
        tr = _tiles(real, None, units_r, rng)
        if len(tr) < 4:
            return ([comp] if comp else []), left, info
        real_stats = _tile_stats(tr, tr.ref, False, bands)
        rt_units = tr.units
    search = _Search(t, real_stats, paired, use_jpeg, bands, motion_angle or 0.0)
    noise, shot, sigma = 0.0, 0.0, 0.0
    bc = nc = lc = None
    for rnd in range(2):
        if motion_angle is not None:
            lc = search.length_curve(sigma, noise, shot)
            search.length = search.pick(lc, "length")
        bc = search.blur_curve(noise, shot)
        sigma = search.pick(bc, "blur")
        if rnd == 0 and paired:
            shot = _shot_fraction(search, sigma)
        nc = search.noise_curve(sigma, shot)
        noise = search.pick(nc, "noise")
    # intervals: the tiles resampled (by the unit of their frame), the last curves re-read
    ws = boot_weights(t.units, rng, N_BOOT)
    wr = boot_weights(rt_units, rng, N_BOOT)
    s_b, n_b, l_b = [], [], []
    for a, b in zip(ws, wr):
        w_sim = a[t.units]
        w_real = b[rt_units]
        s_b.append(search.pick(bc, "blur", w_sim, w_real if not paired else None))
        n_b.append(search.pick(nc, "noise", w_sim, w_real if not paired else None))
        if lc is not None:
            l_b.append(search.pick(lc, "length", w_sim, w_real if not paired else None))
    s_ci, n_ci = _ci(np.array(s_b), sigma), _ci(np.array(n_b), noise)
    hr0 = search.hr
    info.update({"transfer_real": [round(float(v), 4) for v in hr0], "bands": BANDS.tolist(),
                 "blur_sigma": round(sigma, 3), "noise_mid_levels": round(noise, 3), "shot_fraction": round(shot, 3)})
    how = ("pairs: transfer function and noise spectrum of aligned tiles matched by synthesis" if paired
           else "sets: band spectra of textured tiles matched by synthesis")
    if sigma >= MIN_SIGMA and s_ci[0] > 0:
        out.append(Factor("sharpness", {"sigma_px": round(sigma, 3)}, {"sigma_px": s_ci}, how))
    elif paired and float(np.nanmax(hr0[-3:])) > 1.15:
        left.append({"code": "sharpness", "reason": "real frames are sharper than sim: render sharper (no blur can add detail)"})
    if lc is not None:
        l_ci = _ci(np.array(l_b), search.length)
        if search.length >= MIN_LENGTH and l_ci[0] > 1.0:
            out.append(Factor("motion_blur", {"length_px": round(search.length, 2), "angle_deg": float(motion_angle or 0.0)},
                              {"length_px": l_ci}, how + "; a line blur along the direction the diagnosis named"))
    if noise >= MIN_NOISE and n_ci[0] > 0:
        read = noise * math.sqrt(1 - shot)
        shot2 = noise ** 2 * shot / 127.5
        out.append(Factor("sensor_noise", {"read_levels": round(read, 3), "shot_levels2": round(shot2, 4),
                                           "mid_grey_levels": round(noise, 3)},
                          {"mid_grey_levels": n_ci}, how + f"; shot share at mid grey {shot:.2f}"))
    if comp is not None:
        out.append(comp)
    return out, left, info

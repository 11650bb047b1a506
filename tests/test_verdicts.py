"""Verdicts that hold on real data (`perception_gap.diagnoses.verdicts`, `thumbs.fixed_camera`).

Through the CLI (`stats --json`): a moving camera's clean split stays quiet; a fixed camera's flip is
still a bug; a camera-like tone curve is a gap and a doubled encode a bug; a finding at its bar
reads "borderline" and never heads the list. The pure parts are checked against closed forms.
"""

from __future__ import annotations

import diagnosis_cases as D
import numpy as np
import pytest
from PIL import Image

from perception_gap.diagnoses import verdicts
from perception_gap.diagnoses.thumbs import fixed_view
from perception_gap.findings import Finding
from perception_gap.statistics.records import FrameRecord, SetRecords


@pytest.fixture(scope="module")
def frames(shared_data):
    return D.load_frames(D.voc_sources(shared_data))


def _big_photo(shared_data) -> np.ndarray:
    path = sorted((shared_data / "cleargrasp" / "real-val" / "d435").glob("*-rgb-img.jpg"))[0]
    return np.asarray(Image.open(path).convert("RGB"))


def moving_camera(img: np.ndarray, n: int, seed: int, size=(D.W, D.H)) -> list[np.ndarray]:
    """A camera moving across a real scene: crops of `img` along a smooth path (bouncing at the
    edges), slowly moving forward (the crop shrinks), resized to `size`."""
    rng = np.random.default_rng(seed)
    h, w = img.shape[:2]
    cw, ch = int(w * 0.5), int(h * 0.5)
    x, y = rng.uniform(0, w - cw), rng.uniform(0, h - ch)
    vx, vy = rng.choice([-1, 1]) * w * 0.025, rng.normal(0, h * 0.005)
    out = []
    for k in range(n):
        s = 1.0 - 0.3 * k / n
        ww, hh = int(cw * s), int(ch * s)
        x0 = int(np.clip(x + (cw - ww) / 2, 0, w - ww))
        y0 = int(np.clip(y + (ch - hh) / 2, 0, h - hh))
        out.append(np.asarray(Image.fromarray(img[y0:y0 + hh, x0:x0 + ww]).resize(size, Image.BILINEAR)))
        x, y = x + vx, y + vy
        if not 0 <= x <= w - cw:
            vx, x = -vx, float(np.clip(x, 0, w - cw))
        if not 0 <= y <= h - ch:
            vy, y = -vy, float(np.clip(y, 0, h - ch))
    return out


# --- the fixed-camera test ----------------------------------------------------------------------------

def test_fixed_view_tells_a_fixed_camera_from_a_moving_one(shared_data):
    img = _big_photo(shared_data)
    rng = np.random.default_rng(1)
    y0, x0 = 200, 300

    def thumb(a: np.ndarray) -> np.ndarray:
        return np.asarray(Image.fromarray(a).convert("L").resize((32, 32), Image.BOX), np.float64) / 255

    fixed = [img[y0 + rng.integers(-3, 4): y0 + 360, x0 + rng.integers(-3, 4): x0 + 480] for _ in range(12)]
    fixed = np.stack([thumb(np.asarray(Image.fromarray(np.ascontiguousarray(a)).resize((160, 120))))
                      for a in fixed])
    moving = np.stack([thumb(a) for a in moving_camera(img, 16, seed=0)])
    assert fixed_view(fixed) > 0.6 > 0.4 > fixed_view(moving), (fixed_view(fixed), fixed_view(moving))
    # duplicates (a resample) count once; identical frames agree perfectly
    assert fixed_view(np.concatenate([fixed, fixed[:4]])) == pytest.approx(fixed_view(fixed))
    assert np.isnan(fixed_view(fixed[:2]))


def test_moving_camera_clean_split_stays_quiet(shared_data, tmp_path):
    """Random halves of one moving camera, unpaired, at 8 and 16 frames a side: no bug, and the
    set-level spatial readings say why they did not run."""
    img = _big_photo(shared_data)
    for seed, n in ((0, 16), (1, 32)):
        seq = moving_camera(img, n, seed=seed)
        order = np.random.default_rng(seed).permutation(n)
        sim = {f"s{i:02d}": seq[j] for i, j in enumerate(order[: n // 2])}
        real = {f"r{i:02d}": seq[j] for i, j in enumerate(order[n // 2:])}
        res = D.run_folders(tmp_path / f"split{seed}", sim, real)
        assert not [c for c, s in D.codes(res) if s == "bug"], D.codes(res)
        moving = [f for f in res["findings"] if f["code"] == "moving_camera"]
        assert moving and moving[0]["severity"] == "info", D.codes(res)
        fixed = moving[0]["evidence"]["fixed_camera"]
        assert not fixed["passed"] and min(fixed["sim"], fixed["real"]) < fixed["bar"], fixed


def test_fixed_camera_flip_is_still_a_bug(shared_data, tmp_path):
    """One fixed view (a few pixels of vibration, +-0.3 stops), no shared keys, sim upside down."""
    img = _big_photo(shared_data)
    rng = np.random.default_rng(0)

    def view() -> np.ndarray:
        y, x = 200 + rng.integers(-3, 4), 300 + rng.integers(-3, 4)
        a = np.asarray(Image.fromarray(np.ascontiguousarray(img[y:y + 360, x:x + 480])).resize((D.W, D.H)))
        return D.expose(a, rng.uniform(-0.3, 0.3))
    sim = {f"s{i:02d}": np.ascontiguousarray(view()[::-1]) for i in range(12)}
    real = {f"r{i:02d}": view() for i in range(12)}
    res = D.run_folders(tmp_path, sim, real)
    ev = D.first(res, "orientation", "bug")
    assert ev["transform"] == "flip_vertical" and ev["fixed_camera"]["passed"], ev
    assert ev["bug_basis"].startswith("signature") and ev["stability"] >= 0.8, ev


def test_fixed_camera_zoom_is_read_from_the_mean_images(shared_data, tmp_path):
    """The same vibrating fixed view, sim zoomed 1.5x (the centre two thirds, upscaled): field of view,
    unpaired, first, with its interval clear of the bug bar."""
    img = _big_photo(shared_data)
    rng = np.random.default_rng(2)

    def view() -> np.ndarray:
        y, x = 200 + rng.integers(-3, 4), 300 + rng.integers(-3, 4)
        return np.asarray(Image.fromarray(np.ascontiguousarray(img[y:y + 360, x:x + 480])).resize((D.W, D.H)))
    sim = {f"s{i:02d}": D.zoom(view(), 1.5) for i in range(12)}
    real = {f"r{i:02d}": view() for i in range(12)}
    res = D.run_folders(tmp_path, sim, real)
    ev = D.first(res, "field_of_view", "bug")
    assert ev["basis"] == "distribution" and ev["fixed_camera"]["passed"], ev
    assert ev["zoom_sim_over_real"] == pytest.approx(1.5, rel=0.08), ev
    assert ev["bug_basis"] == "interval wholly beyond the bug bar" and ev["ci"][0] > ev["bug_bar"], ev


# --- severity -----------------------------------------------------------------------------------------

def test_camera_tone_curve_is_a_gap_with_its_interval(frames, tmp_path):
    """Sim linear light to the power 0.74 (a camera's curve, not an encode): a gap worded with its
    interval and bar, never the renderer-bug action."""
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=lambda a: D.to_srgb8(D.to_linear(a) ** 0.74)))
    f = res["findings"][0]
    assert (f["code"], f["severity"]) == ("tone_curve", "gap"), D.codes(res)
    ev = f["evidence"]
    assert ev["value"] == pytest.approx(0.74, abs=0.08) and ev["ci"][0] <= ev["value"] <= ev["ci"][1], ev
    assert ev["bar"] == pytest.approx(1 / 1.3, rel=1e-3) and ev["margin"] > 0, ev
    assert "milder than a missing or doubled sRGB encode" in f["title"] and "[" in f["title"], f
    assert "a bug, not a randomization budget" not in f["action"], f


def test_doubled_encode_is_a_bug_by_its_signature(frames, tmp_path):
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=D.double_encode))
    ev = D.first(res, "tone_curve", "bug")
    assert ev["bug_basis"].startswith("signature: sRGB encode applied twice"), ev
    assert ev["stability"] >= 0.8, ev


# --- stability ----------------------------------------------------------------------------------------

def test_borderline_finding_reads_borderline_and_is_not_the_verdict(frames, tmp_path):
    """Per-pair exposure offsets scattered about the brightness bar (0.12 stops): the finding fires on
    the full set but not on most resamples. A clear white-balance shift rides along and heads the list."""
    # offsets spread evenly over 0.065-0.225 stops, in random order: the median pair reads ~0.134 once
    # sRGB rounding and clipping are through, just over the 0.12-stop bar
    stops = np.random.default_rng(3).permutation(0.145 + 0.08 * np.linspace(-1, 1, 24))

    def warm(a: np.ndarray) -> np.ndarray:
        gains = np.array([1.25, 1.0, 0.8])
        gains /= gains @ np.array([0.2126, 0.7152, 0.0722])  # luminance unchanged: only the chroma moves
        return D.to_srgb8(D.to_linear(a) * gains)
    sim = {f"k{i:02d}": warm(D.expose(frames[i], float(stops[i]))) for i in range(24)}
    real = {f"k{i:02d}": frames[i] for i in range(24)}
    res = D.run_folders(tmp_path, sim, real)
    first = res["findings"][0]
    assert first["code"] == "white_balance" and not first["evidence"].get("borderline"), D.codes(res)
    br = [f for f in res["findings"] if f["code"] == "brightness"]
    assert br, D.codes(res)
    ev = br[0]["evidence"]
    assert ev["borderline"] and ev["stability"] < verdicts.STABLE, ev
    assert br[0]["title"].startswith("Borderline (fires in"), br[0]["title"]
    assert ev["ci"][0] <= ev["bar"] <= ev["ci"][1], ev


# --- the pure parts -----------------------------------------------------------------------------------

def _records(n: int, episodes: int | None = None) -> tuple[SetRecords, SetRecords]:
    ep = (lambda i: f"e{i % episodes}") if episodes else (lambda i: None)
    sim = SetRecords("s", "sim", tuple(FrameRecord(f"k{i}", ep(i), i) for i in range(n)))
    real = SetRecords("r", "real", tuple(FrameRecord(f"k{i}", ep(i), i) for i in range(n)))
    return sim, real


def test_resample_keeps_pairs_together_and_draws_episodes():
    sim, real = _records(30, episodes=6)
    rs, rr = verdicts.resample(sim, real, np.random.default_rng(0))
    assert [f.pair_key for f in rs.frames] == [f.pair_key for f in rr.frames]
    assert len(set(f.pair_key for f in rs.frames)) == len(rs.frames)  # copies get their own keys
    # whole episodes: each drawn episode brings its five frames
    base = [f.pair_key.split("\x1f")[0] for f in rs.frames]
    eps = {}
    for k in base:
        eps.setdefault(int(k[1:]) % 6, []).append(k)
    assert all(len(v) % 5 == 0 for v in eps.values()), eps
    assert len(rs.frames) == 30


def test_settle_interval_counts_a_silent_resample_at_the_bar():
    """Ten resamples: eight fire with values 1..8 stops, two are silent (counted at the 0.5 bar)."""
    f = Finding("brightness", "gap", "t", {"stops_sim_minus_real": 4.0, "threshold_stops": 0.5}, "a", 8.0)
    runs = [Finding("brightness", "gap", "t", {"stops_sim_minus_real": float(v), "threshold_stops": 0.5}, "a", 1.0)
            for v in range(1, 9)] + [None, None]
    s = verdicts.settle_one(f, runs)
    vals = [float(v) for v in range(1, 9)] + [0.5, 0.5]
    assert s.stability == pytest.approx(0.8)
    assert s.ci == pytest.approx(tuple(np.percentile(vals, [2.5, 97.5])))
    assert s.margin == pytest.approx((4.0 - 0.5) / (s.ci[1] - s.ci[0]))
    out = verdicts.apply(f, s)
    assert out.severity == "gap" and not out.evidence.get("borderline")
    # a bug without a signature and without an interval beyond its bug bar is a gap
    bug = Finding("field_of_view", "bug", "t", {"zoom_sim_over_real": 1.12, "basis": "pairs"}, "a", 1.5)
    near = [Finding("field_of_view", "bug", "t", {"zoom_sim_over_real": z}, "a", 1.0) for z in (1.09, 1.12, 1.2)]
    settled = verdicts.apply(bug, verdicts.settle_one(bug, near * 10))
    assert settled.severity == "gap" and "1.12x" in settled.title, settled
    far = [Finding("field_of_view", "bug", "t", {"zoom_sim_over_real": z}, "a", 1.0) for z in (1.3, 1.35, 1.4)]
    big = Finding("field_of_view", "bug", "t", {"zoom_sim_over_real": 1.35, "basis": "pairs"}, "a", 4.0)
    settled = verdicts.apply(big, verdicts.settle_one(big, far * 10))
    assert settled.severity == "bug" and settled.evidence["bug_basis"] == "interval wholly beyond the bug bar"


# --- the report -------------------------------------------------------------------------------------

def test_report_shows_the_reading_and_never_heads_with_a_borderline_finding():
    from perception_gap.reports.html import render_report

    def finding(code, sev, title, **ev):
        return {"code": code, "severity": sev, "title": title, "action": "do it", "score": 1.0, "evidence": ev}
    settled = finding("tone_curve", "gap", "The transfer curves differ", value=0.74, ci=[0.7, 0.79], bar=0.769,
                      bug_bar=0.595, unit="exponent", margin=0.4, stability=0.96, n_resamples=50, bug_basis=None,
                      exponent_sim_over_real=0.74)
    shaky = finding("resize_filter", "gap", "Borderline (fires in 52% of 50 resamples): filters",
                    value=0.57, ci=[0.5, 0.61], bar=0.57, unit="band shape", stability=0.52, n_resamples=50,
                    borderline=True)
    html = render_report({"findings": [settled, shaky], "sets": {}, "config": {"sim": "s", "real": "r"}})
    assert "0.74 [0.7, 0.79] exponent" in html and "bar 0.769 (a bug beyond 0.595)" in html
    assert "fires in 96% of 50 resamples" in html and "borderline: fires in 52% of 50 resamples" in html
    assert html.index('id="verdict-title">The transfer curves differ') > 0
    # the reading's keys are not repeated as evidence rows
    assert ">margin<" not in html and ">stability<" not in html
    only_shaky = render_report({"findings": [shaky], "sets": {}, "config": {"sim": "s", "real": "r"}})
    assert 'id="verdict-title">Nothing stands firm: 1 finding(s) are borderline' in only_shaky


def test_paired_unpaired_and_a_subset_share_the_headline(frames, tmp_path):
    """The same frames read paired, unpaired (keys dropped) and as a two-thirds subset: one headline code."""
    sim, real = D.paired(frames, real_fn=lambda a: D.expose(a, -1.5), n=24)
    heads = []
    for name, (s, r) in {"paired": (sim, real),
                         "unpaired": (sim, {f"u{k}": a for k, a in real.items()}),
                         "subset": ({k: sim[k] for k in list(sim)[:16]}, {k: real[k] for k in list(real)[:16]})}.items():
        res = D.run_folders(tmp_path / name, s, r)
        loud = [f for f in res["findings"] if f["severity"] != "info"]
        assert loud, (name, D.codes(res))
        heads.append((loud[0]["code"], bool(loud[0]["evidence"].get("borderline"))))
    assert {h for h, _ in heads} == {"brightness"} and not any(b for _, b in heads), heads

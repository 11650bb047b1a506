"""The measured real camera as a model the sim can use: factors, their JSON file, and `apply_camera_model`.

A `CameraModel` is what `perception_gap.camera.fit` measured between a sim set and a real set:
each `Factor` is one image difference (a diagnosis code), its parameters, their units and
intervals and how they were measured. Applied to a sim frame it gives the frame as the real
camera would deliver it: the team can put it in its renderer or its training augmentation,
and the engine applies it to measure how much of each encoder's gap it closes
(`perception_gap.camera.attribution`).

Factors apply in the order a camera produces them, whatever order they are listed in
(`PIPELINE`): pipeline fixes first (frame size, channel order, value scale, flips, field of
view), then linear light (gains, tone curve, vignetting, optical and motion blur), then the
encoded frame (resampling artefacts, sensor noise, 8-bit quantization, JPEG).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.camera import ops
from perception_gap.errors import InputError

FORMAT = "perception-gap camera model"
FORMAT_VERSION = 1

# Application order (see the module docstring).
PIPELINE = ("resolution", "channel_swap", "value_range", "orientation", "field_of_view", "brightness",
            "white_balance", "tone_curve", "vignetting", "sharpness", "motion_blur", "resize_filter",
            "sensor_noise", "compression")
# Linear-light factors applied in one pass.
_LINEAR = ("brightness", "white_balance", "tone_curve", "vignetting")
# Pipeline fixes: where one of these is in a model, the pipeline is wrong (a bug), not the camera.
BUGS = frozenset({"resolution", "channel_swap", "value_range", "orientation", "field_of_view", "resize_filter"})
# What each factor's parameters are, with their units (for the JSON file and the report).
PARAMS: dict[str, dict[str, str]] = {
    "resolution": {"width": "px", "height": "px"},
    "channel_swap": {"order": "channel order of real frames in sim's terms"},
    "value_range": {"scale": "x (real values per sim value)"},
    "orientation": {"transform": "flip or rotation applied to sim frames"},
    "field_of_view": {"zoom_sim_over_real": "x (sim magnification over real)"},
    "brightness": {"stops": "stops (real over sim, linear light)"},
    "white_balance": {"r_gain": "x (real R/G over sim R/G)", "b_gain": "x (real B/G over sim B/G)"},
    "tone_curve": {"exponent": "power on linear light (real = sim ** exponent)"},
    "vignetting": {"corner_stops": "stops at the corners relative to the centre"},
    "sharpness": {"sigma_px": "px (Gaussian, linear light)"},
    "motion_blur": {"length_px": "px", "angle_deg": "degrees (0 = horizontal)"},
    "resize_filter": {"signature": "resampling artefact", "factor": "x"},
    "sensor_noise": {"read_levels": "8-bit levels (std)", "shot_levels2": "8-bit levels^2 per level of signal"},
    "compression": {"quality": "IJG JPEG quality (1-100)", "subsampling": "chroma subsampling"},
}


@dataclass(frozen=True)
class Factor:
    """One measured difference between the sim and the real camera.

    Attributes:
        code: the diagnosis code of the factor (`brightness`, `sharpness`, ...; see `PARAMS`).
        params: its parameters (names and units in `PARAMS[code]`).
        ci: 95% interval per numeric parameter, [low, high], where one was measured.
        method: how it was measured (pairs or set statistics, which quantity).
        bug: a pipeline fix rather than a camera property (`BUGS`).
    """

    code: str
    params: dict[str, Any]
    ci: dict[str, list[float]] = field(default_factory=dict)
    method: str = ""
    bug: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "params": dict(self.params), "units": dict(PARAMS.get(self.code, {})),
                "ci": {k: list(v) for k, v in self.ci.items()}, "method": self.method, "bug": self.bug}


@dataclass(frozen=True)
class CameraModel:
    """The fitted factors of one sim/real comparison (empty: no measurable camera difference).

    Attributes:
        factors: in urgency order (the diagnoses' order), applied in `PIPELINE` order.
        basis: `pairs` (each sim frame against its own real frame) or `sets` (set-level statistics).
        n: pairs (or frames per side) the fit read.
        not_modelled: differences measured but outside the model, each {code, reason}.
        sim, real: the set names, when known.
    """

    factors: tuple[Factor, ...] = ()
    basis: str = "pairs"
    n: int = 0
    not_modelled: tuple[dict[str, str], ...] = ()
    sim: str | None = None
    real: str | None = None

    def codes(self) -> list[str]:
        return [f.code for f in self.factors]

    def only(self, codes: list[str] | tuple[str, ...]) -> "CameraModel":
        """The same model keeping only the factors named in `codes`."""
        keep = set(codes)
        return CameraModel(tuple(f for f in self.factors if f.code in keep), self.basis, self.n,
                           self.not_modelled, self.sim, self.real)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": FORMAT_VERSION, "sim": self.sim, "real": self.real,
                "applies_to": "sim frames (uint8 or float sRGB): gives frames as the real camera delivers them",
                "basis": self.basis, "n": self.n, "pipeline_order": list(PIPELINE),
                "factors": [f.to_dict() for f in self.factors], "not_modelled": [dict(x) for x in self.not_modelled]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CameraModel":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise InputError(f"Expected a camera model (a JSON object with \"format\": {FORMAT!r}), got "
                             f"{type(d).__name__ if not isinstance(d, dict) else repr(d.get('format'))}.")
        factors = []
        for i, f in enumerate(d.get("factors") or []):
            code = f.get("code") if isinstance(f, dict) else None
            if code not in PARAMS:
                raise InputError(f"Camera model factor {i}: expected a code in {sorted(PARAMS)}, got {code!r}.")
            params = f.get("params")
            missing = [p for p in PARAMS[code] if not isinstance(params, dict) or p not in params]
            if missing:
                raise InputError(f"Camera model factor {i} ({code}): missing parameter(s) {', '.join(missing)}.")
            factors.append(Factor(code, dict(params), {k: list(v) for k, v in (f.get("ci") or {}).items()},
                                  str(f.get("method", "")), bool(f.get("bug", code in BUGS))))
        return cls(tuple(factors), str(d.get("basis", "pairs")), int(d.get("n", 0)),
                   tuple(d.get("not_modelled") or ()), d.get("sim"), d.get("real"))

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return p


def load_camera_model(path: str | Path) -> CameraModel:
    """Read a camera_model.json (one-line InputError when it is not one)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"Cannot read the camera model {str(path)!r}: {e}.") from None
    return CameraModel.from_dict(data)


def _as_float(frame: np.ndarray) -> tuple[np.ndarray, Any, np.ndarray | None]:
    a = np.asarray(frame)
    if a.ndim != 3 or a.shape[2] not in (3, 4):
        raise InputError(f"Expected `frame` as an H x W x 3 RGB (or x 4 RGBA) array, got shape {a.shape}.")
    alpha = a[..., 3:] if a.shape[2] == 4 else None
    rgb = a[..., :3]
    if a.dtype == np.uint8:
        return rgb.astype(np.float32) * ops.LEVEL, np.uint8, alpha
    if a.dtype == np.uint16:
        return rgb.astype(np.float32) / 65535.0, np.uint16, alpha
    if np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(rgb).all():
            raise InputError("Expected `frame` without NaN or infinite values.")
        return np.clip(rgb.astype(np.float32), 0.0, 1.0), a.dtype, alpha
    raise InputError(f"Expected `frame` as uint8, uint16 or float (sRGB in [0, 1]), got dtype {a.dtype}.")


def _back(v: np.ndarray, dtype: Any, alpha: np.ndarray | None) -> np.ndarray:
    if dtype == np.uint8:
        out: np.ndarray = ops.to_u8(v)
    elif dtype == np.uint16:
        out = np.clip(np.rint(v * 65535.0), 0, 65535).astype(np.uint16)
    else:
        out = np.clip(v, 0.0, 1.0).astype(dtype)
    if alpha is not None:
        out = np.concatenate([out, alpha.astype(out.dtype)], axis=2)
    return out


def _geometric(x: np.ndarray, by: dict[str, Factor], depth: bool = False) -> np.ndarray:
    if "resolution" in by:
        w, h = int(by["resolution"].params["width"]), int(by["resolution"].params["height"])
        x = ops.resize(x, w, h) if not depth else _resize_depth(x, w, h)
    if "orientation" in by:
        x = ops.turn(x, by["orientation"].params["transform"])
    if "field_of_view" in by:
        z = 1.0 / float(by["field_of_view"].params["zoom_sim_over_real"])
        x = ops.zoom(x, z) if not depth else _zoom_depth(x, z)
    return x


def _resize_depth(d: np.ndarray, w: int, h: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(d.astype(np.float32), mode="F").resize((w, h), Image.Resampling.NEAREST))


def _zoom_depth(d: np.ndarray, z: float) -> np.ndarray:
    from scipy.ndimage import map_coordinates

    h, w = d.shape[:2]
    yy = (np.arange(h) - (h - 1) / 2.0) / z + (h - 1) / 2.0
    xx = (np.arange(w) - (w - 1) / 2.0) / z + (w - 1) / 2.0
    gy, gx = np.meshgrid(yy, xx, indexing="ij")
    return map_coordinates(d.astype(np.float32), [gy, gx], order=0, mode="mirror")


def light_linear(v: np.ndarray, by: dict[str, Factor]) -> np.ndarray:
    """Float sRGB (H, W, 3) -> linear light through the model's gains, tone curve and fall-off,
    not clipped (a lens blurs light before the sensor saturates)."""
    lin = ops.srgb_to_linear(v)
    wb = by.get("white_balance")
    g = 2.0 ** float(by["brightness"].params["stops"]) if "brightness" in by else 1.0
    gains = (g * float(wb.params["r_gain"]), g, g * float(wb.params["b_gain"])) if wb else (g, g, g)
    return ops.photometric(lin, gains, float(by["tone_curve"].params["exponent"]) if "tone_curve" in by else 1.0,
                           float(by["vignetting"].params["corner_stops"]) if "vignetting" in by else 0.0)


def apply_factors(v: np.ndarray, model: CameraModel, rng: np.random.Generator) -> np.ndarray:
    """Float sRGB (H, W, 3) in [0, 1] through the model's factors in `PIPELINE` order."""
    by = {f.code: f for f in model.factors}
    if not by:
        return v
    x = _geometric(v, by)
    if "channel_swap" in by:
        x = x[..., ::-1]
    if "value_range" in by:
        x = np.clip(x * float(by["value_range"].params["scale"]), 0.0, 1.0)
    if any(c in by for c in (*_LINEAR, "sharpness", "motion_blur")):
        lin = light_linear(x, by)
        if "sharpness" in by:
            lin = ops.gaussian_blur(lin, float(by["sharpness"].params["sigma_px"]))
        if "motion_blur" in by:
            mb = by["motion_blur"].params
            lin = ops.motion_blur(lin, float(mb["length_px"]), float(mb["angle_deg"]))
        x = ops.linear_to_srgb(lin)
    if "resize_filter" in by:
        rf = by["resize_filter"].params
        fn = ops.nearest_resample if rf["signature"] == "nearest_upscale" else ops.aliased_resample
        x = fn(x, int(rf.get("factor", 2)))
    if "sensor_noise" in by:
        sn = by["sensor_noise"].params
        x = ops.add_noise(x, float(sn["read_levels"]), float(sn["shot_levels2"]), rng)
    if "compression" in by:
        c = by["compression"].params
        x = ops.jpeg(x, int(round(float(c["quality"]))), str(c.get("subsampling", "4:4:4")))
    return np.clip(x, 0.0, 1.0)


def apply_camera_model(frame: np.ndarray, model: CameraModel | dict[str, Any] | str | Path, *,
                       rng: np.random.Generator | int | None = None, depth: np.ndarray | None = None
                       ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """A sim frame as the measured real camera would deliver it.

    Args:
        frame: H x W x 3 RGB (or RGBA: alpha passed through), uint8, uint16 or float sRGB in
            [0, 1]. Never modified.
        model: a `CameraModel`, its dict, or the path of a camera_model.json.
        rng: noise generator or seed (sensor noise is random); None draws fresh noise.
        depth: an H x W depth map of the same frame; when given, the geometric factors (frame
            size, flips, field of view) move it with the colour frame (nearest, values untouched)
            and (frame, depth) is returned. No photometric factor touches depth.

    Returns:
        The frame, same dtype and channels as given (and its depth map when one was given).
    """
    if isinstance(model, (str, Path)):
        model = load_camera_model(model)
    elif isinstance(model, dict):
        model = CameraModel.from_dict(model)
    v, dtype, alpha = _as_float(frame)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    by = {f.code: f for f in model.factors}
    if alpha is not None:  # moved with the frame, values untouched
        alpha = _geometric(alpha[..., 0], by, depth=True)[..., None]
    out = _back(apply_factors(v, model, gen), dtype, alpha)
    if depth is None:
        return out
    d = np.asarray(depth)
    if d.shape[:2] != np.asarray(frame).shape[:2]:
        raise InputError(f"Expected `depth` of the frame's size {np.asarray(frame).shape[:2]}, got {d.shape[:2]}.")
    return out, _geometric(d.copy(), by, depth=True)


def describe(f: Factor) -> str:
    """A factor in a few words with its parameters ("exposure +0.42 stops")."""
    p = f.params
    if f.code == "brightness":
        return f"exposure {float(p['stops']):+.2f} stops"
    if f.code == "white_balance":
        return f"white balance R/G x{float(p['r_gain']):.2f}, B/G x{float(p['b_gain']):.2f}"
    if f.code == "tone_curve":
        return f"tone curve exponent {float(p['exponent']):.2f}"
    if f.code == "vignetting":
        return f"vignetting {float(p['corner_stops']):+.2f} stops at the corners"
    if f.code == "sharpness":
        return f"blur sigma {float(p['sigma_px']):.2f} px"
    if f.code == "motion_blur":
        return f"motion blur {float(p['length_px']):.1f} px at {float(p['angle_deg']):.0f} deg"
    if f.code == "sensor_noise":
        mid = math.sqrt(float(p["read_levels"]) ** 2 + float(p["shot_levels2"]) * 127.5)
        return f"sensor noise {mid:.1f} levels at mid grey"
    if f.code == "compression":
        return f"JPEG quality {float(p['quality']):.0f} ({p.get('subsampling', '4:4:4')})"
    if f.code == "field_of_view":
        return f"field of view (zoom sim/real {float(p['zoom_sim_over_real']):.2f})"
    if f.code == "orientation":
        return f"orientation ({p['transform']})"
    if f.code == "resolution":
        return f"frame size {p['width']}x{p['height']}"
    if f.code == "channel_swap":
        return "channel order"
    if f.code == "value_range":
        return f"value scale x{float(p['scale']):g}"
    return f"resize filter ({p['signature']})"

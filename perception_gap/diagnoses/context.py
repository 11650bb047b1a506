"""The check context: what every plumbing check reads (sets, pairs, inferred encodings, what
already fired) and the evidence fields every finding starts with."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from perception_gap.diagnoses.common import MIN_PAIRS
from perception_gap.diagnoses.encoding import EncodingInference
from perception_gap.statistics.records import FrameRecord, SetRecords


@dataclass
class Context:
    """What every check reads: the sets, their pairs, the inferred encodings, what fired, shared analyses."""

    sim: SetRecords
    real: SetRecords
    pairs: list[tuple[FrameRecord, FrameRecord]]
    enc: EncodingInference | None = None
    fired: set[str] = field(default_factory=set)
    memo: dict = field(default_factory=dict)  # analyses several checks share (e.g. `highfreq`)
    # per side, the `format_key` most of its frames have: frames of another format are left out of
    # the image checks (and named by `frame_format`)
    formats: dict[str, tuple[str, str]] = field(default_factory=dict)
    # per-frame and per-pair readings kept across the resamples of one diagnosis (`verdicts`), keyed
    # by the statistics objects the resamples share; `resampled` is set on a resample's context
    cache: dict = field(default_factory=dict)
    resampled: bool = False

    def image_pairs(self) -> list[tuple[FrameRecord, FrameRecord]]:
        if "image_pairs" not in self.memo:
            self.memo["image_pairs"] = [(s, r) for s, r in self.pairs
                                        if self._usable(s, "sim") and self._usable(r, "real")]
        return list(self.memo["image_pairs"])

    def images(self, side: str) -> list[FrameRecord]:
        key = f"images_{side}"
        if key not in self.memo:
            frames = self.sim.frames if side == "sim" else self.real.frames
            self.memo[key] = [f for f in frames if self._usable(f, side)]
        return list(self.memo[key])

    def _usable(self, f: FrameRecord, side: str) -> bool:
        fmt = self.formats.get(side)
        return _usable(f) and (fmt is None or format_key(f) == fmt)

    def image_sides(self, keep: Callable[[FrameRecord, FrameRecord | None], bool] = lambda f, g: True,
                    ) -> tuple[str, list[FrameRecord], list[FrameRecord]]:
        """(basis, sim frames, real frames) with usable images passing `keep`.

        `keep(frame, partner)` sees the matched frame as `partner` on the pairs basis (rows of
        the two lists then match) and None on the distribution basis.
        """
        pairs = [(s, r) for s, r in self.image_pairs() if keep(s, r) and keep(r, s)]
        if len(pairs) >= MIN_PAIRS:
            return "pairs", [s for s, _ in pairs], [r for _, r in pairs]
        return ("distribution", [f for f in self.images("sim") if keep(f, None)],
                [f for f in self.images("real") if keep(f, None)])


def format_key(f: FrameRecord) -> tuple[str, str]:
    """(`grey` or `colour`, dtype) of a frame with an image: an alpha channel does not change the kind."""
    return ("grey" if f.image.channels <= 2 else "colour", f.image.dtype)


def _usable(f: FrameRecord) -> bool:
    im = f.image
    return im is not None and all(math.isfinite(v) for v in im.mean) and all(
        math.isfinite(v) for v in im.std)


def basis_evidence(basis: str, n_pairs: int, ctx: Context) -> dict:
    return {"basis": basis, "n_pairs": n_pairs if basis == "pairs" else 0,
            "n_sim": len(ctx.sim.frames), "n_real": len(ctx.real.frames)}

"""Where a set's steps came from, and steps that repeat within an episode.

Frames are put in time order by (episode, step): the noise floor's halves, the bootstrap's blocks
and the report's sequences all read that order. A step is only as good as its source: a
container's own frame index is a time; a manifest's `step` column is what the user wrote; the
last number of a folder frame's file name is a guess, and a name that ends in something else
(a heading angle, a camera id) repeats within an episode and interleaves distant frames.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Iterable

# Set source kind (the prefix of `frame_sets.source`, written by each ingest path) -> where its
# steps came from, in words.
STEP_SOURCES = {
    "folder": "the last number in each file name",
    "manifest": "the manifest's `step` column",
    "video": "the frame's place in its video (container index)",
    "lerobot": "the dataset's `frame_index` column (container index)",
    "hdf5": "the row of its demo (container index)",
    "rosbag": "the message's place in its topic (container index)",
}
MAX_EXAMPLES = 5


def step_source(set_source: str | None) -> str:
    """Where the steps of a set indexed from `set_source` (`folder:/data/x`, ...) came from."""
    kind = (set_source or "").split(":", 1)[0]
    return STEP_SOURCES.get(kind, "unknown")


@dataclass(frozen=True)
class RepeatedSteps:
    """Steps shared by several frames of one episode.

    Attributes:
        n_frames: frames that share their (episode, step) with another frame.
        n_steps: distinct (episode, step) held by more than one frame.
        n_episodes: episodes with at least one repeated step (frames without an episode count
            as one).
        examples: up to MAX_EXAMPLES (episode, step, frames) in episode and step order.
    """

    n_frames: int
    n_steps: int
    n_episodes: int
    examples: tuple[tuple[str | None, int, int], ...] = ()


def repeated_steps(frames: Iterable[tuple[Hashable | None, int | None]]) -> RepeatedSteps:
    """Repeats among (episode, step) of frames; frames without a step are left out."""
    counts = Counter((ep, st) for ep, st in frames if st is not None)
    rep = sorted(((ep, st, n) for (ep, st), n in counts.items() if n > 1),
                 key=lambda t: (t[0] is not None, str(t[0]), t[1]))
    return RepeatedSteps(
        n_frames=sum(n for _, _, n in rep), n_steps=len(rep), n_episodes=len({ep for ep, _, _ in rep}),
        examples=tuple((None if ep is None else str(ep), int(st), int(n)) for ep, st, n in rep[:MAX_EXAMPLES]))

"""User text made safe to show in a report: HTML-escaped, and bidirectional controls made visible.

Set, encoder, file and category names are user input. Beyond HTML's own special characters, a
name may hold Unicode bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and its kin): shown
as they are, they reorder the text around them, so `sim_gpj.png` can display as `sim_png.jpg` and
a table cell can claim what it does not hold. Every text field of the reports passes through
`neutralize`, which writes each control as a visible `<U+202E>`; the Jinja environments' `finalize`
and `escape` here are the one way text reaches the HTML.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup
from markupsafe import escape as _html_escape

from perception_gap.wording import MISSING

# The explicit embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), the implicit
# marks (U+200E LRM, U+200F RLM, U+061C ALM).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
_BIDI = re.compile("[" + "".join(sorted(BIDI_CONTROLS)) + "]")


def neutralize(text: str) -> str:
    """`text` with every bidirectional control written as a visible `<U+XXXX>` (plain text, not HTML)."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def _neutralize_markup(html: Markup) -> Markup:
    # inside markup the visible form must itself be escaped
    if not _BIDI.search(html):
        return html
    return Markup(_BIDI.sub(lambda m: f"&lt;U+{ord(m.group()):04X}&gt;", str(html)))


def escape(value: Any) -> Markup:
    """HTML-escaped text of `value` with bidirectional controls made visible; markup stays markup
    (its controls made visible too)."""
    if isinstance(value, Markup) or hasattr(value, "__html__"):
        return _neutralize_markup(Markup(value))
    return _html_escape(neutralize(str(value)))


def finalize(value: Any, limit: int | None = None) -> Any:
    """A Jinja `finalize`: None as the dash, plain text cut to `limit` characters and neutralized
    (autoescaping follows), markup kept with its controls made visible."""
    if value is None:
        return MISSING
    if isinstance(value, Markup):
        return _neutralize_markup(value)
    s = value if isinstance(value, str) else str(value)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return neutralize(s)

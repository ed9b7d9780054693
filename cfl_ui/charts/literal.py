"""User-supplied text shown as literal text: the one helper every page uses for what it did not write itself.

Streamlit renders markdown (and in labels a subset of it) everywhere, so a URL
value, a run's name, a config value or an error message that echoes input
could otherwise put a live link or a fetched image on the page. `md(text)`
backslash-escapes every ASCII punctuation character (CommonMark makes each of
them literal that way, which also breaks links, images, autolinks, emphasis,
HTML, LaTeX and Streamlit's :directives:); `code(text)` is an inline code span
whose fence is longer than any run of backticks in the text (nothing inside a
code span is markup).
"""
from __future__ import annotations

import re

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def md(text) -> str:
    """`text` (any value, as str) escaped so that markdown shows it exactly as it is."""
    return _PUNCTUATION.sub(r"\\\1", str(text))


def code(text) -> str:
    """`text` as an inline code span (a fence longer than any backtick run inside; newlines become spaces)."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"

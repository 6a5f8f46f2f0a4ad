"""The preview contract: what a kind's preview function returns and how it is drawn.

A kind names (``DatasetKind.preview``) a function ``(title, row) -> Record``: ``row`` is one
row of the kind as its parser sees it (a parquet row, or a converted sample's decoded row),
``title`` says where it came from. The function only picks images and texts out of the row;
drawing them (HTML or PNG) is :mod:`editstream.preview.render`'s work, by the record's layout.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


class Layout(enum.Enum):
    """How a record's images and texts are laid out in a row of the preview."""

    CHAIN = "chain"
    """Images left to right with ``texts[i]`` between image ``i`` and image ``i + 1`` (edit chains)."""
    CAPTIONED = "captioned"
    """All images, then all texts beside them (a caption, a prompt, a conversation)."""


@dataclass
class Record:
    """One thing to show: images (bytes, possibly undecodable), texts between/under them, a title."""

    title: str
    images: list[bytes | None] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    kind: str = ""
    """The name of the kind the row is of (a CSS class of the HTML preview)."""
    layout: Layout = Layout.CAPTIONED


PreviewFunction = Callable[[str, Mapping[str, Any]], Record]
"""The preview contract: ``(title, row) -> Record``."""

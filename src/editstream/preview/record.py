"""The preview contract: a kind's ``(title, row) -> Record`` picks images and texts out of a row as its parser
sees it; :mod:`editstream.preview.render` draws them by the record's layout."""

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

"""The text-to-image kind's preview: a row's image beside its captions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from editstream.plugin import Record


def captioned_image(title: str, row: Mapping[str, Any]) -> Record:
    """The ``image`` with every caption of the ``captions`` JSON object (or why they do not parse)."""
    captions = row.get("captions")
    try:
        parsed = json.loads(captions) if isinstance(captions, str) else captions
        texts = [str(v) for v in parsed.values()] if isinstance(parsed, dict) else [str(parsed)]
    except ValueError:
        texts = [f"(captions do not parse: {str(captions)[:80]})"]
    return Record(title, [row.get("image")], texts or ["(no captions)"])

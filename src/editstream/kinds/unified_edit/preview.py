"""The image-editing kind's preview: an edit chain's images with one phrasing of each edit between them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from editstream.plugin import Layout, Record


def edit_chain(title: str, row: Mapping[str, Any]) -> Record:
    """The images of ``image_list`` with the first phrasing of each instruction between them."""
    images = list(row.get("image_list") or [])
    texts = []
    for phrasings in row.get("instruction_list") or []:
        if isinstance(phrasings, list) and phrasings:
            more = f"  (+{len(phrasings) - 1} phrasings)" if len(phrasings) > 1 else ""
            texts.append(f"{phrasings[0]}{more}")
        else:
            texts.append("(no phrasings)")
    return Record(title, images, texts, layout=Layout.CHAIN)

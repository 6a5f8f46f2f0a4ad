"""Which adaptation a DST holds: a note naming its source and mapping, so that another adaptation (or a
WebDataset conversion of another source) is refused before anything is written, or replaced by ``overwrite``."""

from __future__ import annotations

import logging
from typing import Any

from ..conversion.dst import ForeignFilesError, foreign_names, held_conversion
from ..conversion.records import remove_previous
from ..conversion.source import absolute
from ..data.adapted.mapping import AdapterMapping
from ..data.identity import fingerprint
from ..io import storage
from .output import read_adaptation, remove_adaptation, write_adaptation

log = logging.getLogger(__name__)


class AnotherConversionError(FileExistsError):
    """DST holds another adaptation (of another source, or by another mapping) or a WebDataset conversion."""


def adaptation_note(src: str, mapping: AdapterMapping) -> dict[str, Any]:
    """What makes an adaptation itself: its source and its mapping (less the filter, which ``where`` replaces:
    a re-run with another filter or layout is the same adaptation, its outputs replaced as ever)."""
    data = {k: v for k, v in mapping.fingerprint_data().items() if k != "filter"}
    return {"src": absolute(src).rstrip("/"), "adapter": mapping.name, "mapping": fingerprint(data)}


def other_than(dst: str, note: dict[str, Any], so: storage.StorageOptions | None) -> str | None:
    """What ``dst`` holds when it is not the adaptation ``note`` names (``None``: nothing else)."""
    held = read_adaptation(dst, so)
    if held is not None and (held.get("src"), held.get("mapping")) != (note["src"], note["mapping"]):
        mapping = "the same mapping" if held.get("mapping") == note["mapping"] else f"mapping {held.get('adapter')!r}"
        return f"the adaptation of {held.get('src')} by {mapping}"
    shards = held_conversion(dst, so)
    return f"a WebDataset conversion of {shards}" if shards is not None else None


def refusal(where: str, other: str, src: str, mapping: AdapterMapping) -> AnotherConversionError:
    """The error for ``where`` holding ``other`` (what :func:`other_than` said) instead of this adaptation."""
    return AnotherConversionError(
        f"{where} holds {other}, not this adaptation of {absolute(src).rstrip('/')} by mapping {mapping.name!r}; "
        "nothing was written: pass overwrite=True (--overwrite) to replace it, or give another DST"
    )


def claim_dst(
    dst: str, src: str, mapping: AdapterMapping, overwrite: bool, so: storage.StorageOptions | None
) -> dict[str, Any]:
    """This adaptation's note, once ``dst`` holds nothing else: another adaptation or conversion there is an
    :class:`AnotherConversionError` (nothing written) or, with ``overwrite``, removed."""
    note = adaptation_note(src, mapping)
    other = other_than(dst, note, so)
    if other is not None and not overwrite:
        raise refusal(f"DST {dst}", other, src, mapping)
    if other is not None:
        log.warning("overwrite: replacing %s in %s", other, dst)
        remove_previous(dst, so)  # shards (of a conversion into this DST), if any
        remove_adaptation(dst, so)
    return note


def keep_note(dst: str, note: dict[str, Any], so: storage.StorageOptions | None) -> None:
    """Write ``note`` into ``dst`` unless it is there already."""
    if read_adaptation(dst, so) != note:
        write_adaptation(dst, note, so)


def refuse_held_dst(
    src: str, dst: str, parquet_dst: str, mapping: AdapterMapping, so: storage.StorageOptions | None
) -> None:
    """Refuse a DST holding foreign files or another conversion, or a staging holding another adaptation: both
    places are checked before either is written."""
    foreign = foreign_names(dst, so)
    if foreign:
        raise ForeignFilesError(dst, foreign)
    held = held_conversion(dst, so)
    if held is not None and held.rstrip("/") != absolute(parquet_dst).rstrip("/"):
        raise refusal(f"DST {dst}", f"a WebDataset conversion of {held}", src, mapping)
    other = other_than(parquet_dst, adaptation_note(src, mapping), so)
    if other is not None:
        raise refusal(f"DST {dst} (its staging {parquet_dst})", other, src, mapping)

"""Archive and split-part names: which suffixes are archives, which name one part of a split archive, the
natural order of the parts and the check that none is missing; names only, no member is read here."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

from ..io import storage
from ..io.storage import StorageOptions

log = logging.getLogger(__name__)

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")
UNSUPPORTED_SUFFIXES = (".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tbz", ".tar.zst", ".tar.lz4", ".7z", ".rar")
"""Archives that cannot be read in place by member (no random access into their compression): refused by name."""
_PART = re.compile(r"\.(?:part-?\d+|part-?[a-z]{2,}|[a-z]{2}|\d{2,})$", re.IGNORECASE)
"""The suffix of one part of a split archive: ``.part001``, ``.part1``, ``.part-aa``, ``.aa``, ``.001``, ``.00``."""
_NUMBERED = re.compile(r"(\.(?:part-?)?)(\d+|[a-z]+)", re.IGNORECASE)
"""A part suffix as its prefix and its number (digits or letters)."""


def ends_with(name: str, suffixes: Sequence[str]) -> bool:
    """Whether ``name`` ends with one of ``suffixes`` in any case (``x.TAR.GZ`` is a ``.tar.gz``)."""
    return any(name[-len(s) :].lower() == s for s in suffixes)


def archive_stem(name: str) -> str:
    """The archive a split part belongs to (``x.tar.gz.part001`` -> ``x.tar.gz``); other names as they are."""
    kinds = (*ARCHIVE_SUFFIXES, *UNSUPPORTED_SUFFIXES)
    found = None if ends_with(name, kinds) else _PART.search(name)  # x.tar.gz is no part "gz" of x.tar
    if found is not None and ends_with(name[: found.start()], kinds):
        return name[: found.start()]
    return name


def is_split_part(url: str) -> bool:
    """Whether ``url`` names one part of an archive split into pieces."""
    base = url.rstrip("/").rsplit("/", 1)[-1]
    return archive_stem(base) != base


def split_parts(url: str, storage_options: StorageOptions | None = None) -> list[str]:
    """Every part of the split archive ``url`` is one of (or names by its stem), in order."""
    head, _, base = url.rstrip("/").rpartition("/")
    stem = archive_stem(base)
    family = _family(base[len(stem) :]) if base != stem else _PART
    names = storage.list_names(head or ".", storage_options)
    parts = part_order(n for n in names if n != stem and n.startswith(stem) and family.fullmatch(n[len(stem) :]))
    if not parts:
        raise FileNotFoundError(f"no parts of the split archive {stem} in {head or '.'}")
    return [f"{head}/{n}" if head else n for n in parts]


def _family(suffix: str) -> re.Pattern[str]:
    """The suffixes of the parts numbered like ``suffix``: ``.part007`` -> ``.part`` and 3 digits,
    ``.ab`` -> 2 letters, ``.part-ab`` -> ``.part-`` and 2 letters."""
    found = _NUMBERED.fullmatch(suffix)
    if found is None:
        return _PART
    if found[2].isdigit():  # .part1 .. .part12: unpadded numbers grow in width
        return re.compile(re.escape(found[1]) + r"\d+", re.IGNORECASE)
    return re.compile(re.escape(found[1]) + f"[a-z]{{{len(found[2])}}}", re.IGNORECASE)


def part_order(names: Iterable[str]) -> list[str]:
    """Split parts in the natural order of their numbers (``.part2`` before ``.part10``)."""

    def place(name: str) -> tuple[str, int, str]:
        base = name.rstrip("/").rsplit("/", 1)[-1]
        stem = archive_stem(base)
        found = _NUMBERED.fullmatch(base[len(stem) :])
        return (stem, _ordinal(found[2].lower()) if found else -1, name)

    return sorted(names, key=place)


def joined_or_parts(urls: Sequence[str], storage_options: StorageOptions | None = None) -> list[str]:
    """The urls to read of a split archive found with its joined archive beside it: the joined one alone
    when its size is the parts' sum (it is the parts put together), else a ``ValueError`` saying why."""
    names = [u.rstrip("/").rsplit("/", 1)[-1] for u in urls]
    stem = archive_stem(next((n for n in names if archive_stem(n) != n), names[0]))
    joined = [u for u, n in zip(urls, names) if n == stem]
    parts = [u for u, n in zip(urls, names) if n != stem]
    if not joined or not parts:
        return part_order(urls)
    whole = storage.size(joined[0], storage_options)
    total = sum(storage.size(u, storage_options) for u in parts)
    if whole != total:
        raise ValueError(
            f"{joined[0]} lies beside {len(parts)} split part(s) of it ({parts[0]} ..) but its {whole:,} bytes "
            f"are not the parts' {total:,}; remove the joined archive or the parts"
        )
    log.info("%s: reading the joined archive, not its %d parts beside it", joined[0], len(parts))
    return joined[:1]


def _ordinal(digits_or_letters: str) -> int:
    """A part's place in its numbering: ``007`` -> 7, ``ab`` -> 1."""
    if digits_or_letters.isdigit():
        return int(digits_or_letters)
    return sum((ord(c) - 97) * 26**k for k, c in enumerate(reversed(digits_or_letters.lower())))


def check_parts(urls: Sequence[str]) -> None:
    """A ``FileNotFoundError`` naming the parts missing from a split archive's numbering (``.part001``,
    ``.part003``: ``.part002``; the first is ``aa``, ``000`` or ``001``); a missing last part shows as a
    truncated archive when it is indexed."""
    names = [u.rstrip("/").rsplit("/", 1)[-1] for u in urls]
    stem = archive_stem(names[0])
    numbered = [(f[1], f[2]) for f in (_NUMBERED.fullmatch(n[len(stem) :]) for n in names) if f is not None]
    if len(numbered) != len(names) or len({prefix.lower() for prefix, _ in numbered}) != 1:
        return
    prefix, sample = numbered[0]
    have = {_ordinal(x) for _, x in numbered}
    first = 1 if sample.isdigit() and min(have) >= 1 else 0
    missing = [k for k in range(first, max(have) + 1) if k not in have]
    if missing:
        width = min(len(x) for _, x in numbered)
        spell = [str(k).zfill(width) if sample.isdigit() else _letters(k, len(sample)) for k in missing[:5]]
        raise FileNotFoundError(
            f"{urls[0].rsplit('/', 1)[0]}: split archive {stem} lacks {len(missing)} part(s) "
            f"({', '.join(stem + prefix + x for x in spell)}{' ...' if len(missing) > 5 else ''}; "
            f"{len(names)} found, {names[0]} .. {names[-1]}); download every part before reading it"
        )


def _letters(k: int, width: int) -> str:
    return "".join(chr(97 + (k // 26**i) % 26) for i in reversed(range(width)))

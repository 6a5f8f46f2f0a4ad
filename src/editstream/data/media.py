"""Where the images a metadata file names are: a folder, or an archive (tar, tar.gz, zip, split into parts)
read in place by member through an index kept under ``index_dir``, so memory stays bounded by one member; the
index is flat arrays (sorted NUL-joined names, 64-bit offsets and sizes: ~24 bytes a member), as an archive of
~3M members is indexed in every process reading it."""

from __future__ import annotations

import base64
import bisect
import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import zipfile
import zlib
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, Protocol

from ..format.sft import contained_media_path
from ..io import storage
from ..io.progress import Progress
from ..io.ranged import RetryingFile
from ..io.storage import StorageOptions
from .identity import file_identity

GZIP_SPACING = 16 << 20
"""Uncompressed bytes between two gzip seek points: a 10 GB archive keeps about 20 MB of them."""
GZIP_BUFFER = 1 << 20
"""Read-ahead of a gzipped archive (indexed_gzip's default, 4 seek-point spacings, made a 4-byte member's
read decompress 64 MiB and keep it in memory)."""
INDEX_VERSION = 3
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")
_PART = re.compile(r"\.(?:part-?\d+|part-?[a-z]{2,}|[a-z]{2}|\d{3})$")
"""The suffix of one part of a split archive: ``.part001``, ``.part-aa``, ``.aa``, ``.001``."""
_NUMBERED = re.compile(r"(\.(?:part-?)?)(\d+|[a-z]+)")
"""A part suffix as its prefix and its number (digits or letters)."""


class MediaMissing(KeyError):
    """A name the metadata gives that the media source does not hold."""


class MediaSource(Protocol):
    """Members by name."""

    def read(self, name: str) -> bytes:
        """The bytes of member ``name``; :class:`MediaMissing` when there is none."""
        ...

    def names(self) -> list[str]:
        """Every member name (for an archive: from its index)."""
        ...


def archive_stem(name: str) -> str:
    """The archive a split part belongs to (``x.tar.gz.part001`` -> ``x.tar.gz``); other names as they are."""
    found = None if name.endswith(ARCHIVE_SUFFIXES) else _PART.search(name)  # x.tar.gz is no part "gz" of x.tar
    if found is not None and name[: found.start()].endswith(ARCHIVE_SUFFIXES):
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
    parts = sorted(n for n in names if n != stem and n.startswith(stem) and family.fullmatch(n[len(stem) :]))
    if not parts:
        raise FileNotFoundError(f"no parts of the split archive {stem} in {head or '.'}")
    return [f"{head}/{n}" if head else n for n in parts]


def _family(suffix: str) -> re.Pattern[str]:
    """The suffixes of the parts numbered like ``suffix``: ``.part007`` -> ``.part`` and 3 digits,
    ``.ab`` -> 2 letters, ``.part-ab`` -> ``.part-`` and 2 letters."""
    found = _NUMBERED.fullmatch(suffix)
    if found is None:
        return _PART
    kind = r"\d" if found[2].isdigit() else "[a-z]"
    return re.compile(re.escape(found[1]) + f"{kind}{{{len(found[2])}}}")


def _ordinal(digits_or_letters: str) -> int:
    """A part's place in its numbering: ``007`` -> 7, ``ab`` -> 1."""
    if digits_or_letters.isdigit():
        return int(digits_or_letters)
    return sum((ord(c) - 97) * 26**k for k, c in enumerate(reversed(digits_or_letters)))


def check_parts(urls: Sequence[str]) -> None:
    """A ``FileNotFoundError`` naming the parts missing from a split archive's numbering (``.part001``,
    ``.part003``: ``.part002``; the first is ``aa``, ``000`` or ``001``); a missing last part shows as a
    truncated archive when it is indexed."""
    names = [u.rstrip("/").rsplit("/", 1)[-1] for u in urls]
    stem = archive_stem(names[0])
    numbered = [(f[1], f[2]) for f in (_NUMBERED.fullmatch(n[len(stem) :]) for n in names) if f is not None]
    if len(numbered) != len(names) or len({prefix for prefix, _ in numbered}) != 1:
        return
    prefix, sample = numbered[0]
    have = {_ordinal(x) for _, x in numbered}
    first = 1 if sample.isdigit() and min(have) >= 1 else 0
    missing = [k for k in range(first, max(have) + 1) if k not in have]
    if missing:
        spell = [str(k).zfill(len(sample)) if sample.isdigit() else _letters(k, len(sample)) for k in missing[:5]]
        raise FileNotFoundError(
            f"{urls[0].rsplit('/', 1)[0]}: split archive {stem} lacks {len(missing)} part(s) "
            f"({', '.join(stem + prefix + x for x in spell)}{' ...' if len(missing) > 5 else ''}; "
            f"{len(names)} found, {names[0]} .. {names[-1]}); download every part before reading it"
        )


def _letters(k: int, width: int) -> str:
    return "".join(chr(97 + (k // 26**i) % 26) for i in reversed(range(width)))


class FolderMedia:
    """Files under a folder; a name outside it (by its text, or through a link) is refused as ever."""

    def __init__(self, url: str, storage_options: StorageOptions | None = None, allow_outside: bool = False) -> None:
        self.url = url.rstrip("/")
        self.storage_options = storage_options
        self.allow_outside = allow_outside

    def read(self, name: str) -> bytes:
        path = contained_media_path(self.url, name, self.allow_outside)
        try:
            return storage.read_bytes(path, self.storage_options)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise MediaMissing(f"{name!r} is not in {self.url}") from None

    def names(self) -> list[str]:
        fs, path = storage.url_to_fs(self.url, self.storage_options)
        prefix = path.rstrip("/") + "/"
        return sorted(str(p)[len(prefix) :] for p in fs.find(path))


def _open_seekable(urls: Sequence[str], storage_options: StorageOptions | None) -> IO[bytes]:
    """One archive's bytes, seekable: a local file as it is, else (remote, or split into parts) in ranged reads."""
    if len(urls) == 1 and storage.is_local(urls[0]):
        return open(storage.local_path(urls[0]), "rb")
    return io.BufferedReader(RetryingFile(urls, storage_options=storage_options))


class MemberIndex:
    """Member name -> ``(offset, size)``, read-only; iterates the names in sorted order."""

    def __init__(self, blob: bytes, starts: array[int], offsets: array[int], sizes: array[int]) -> None:
        self.blob, self.starts, self.offsets, self.sizes = blob, starts, offsets, sizes

    @classmethod
    def of(cls, members: Mapping[str, tuple[int, int]]) -> MemberIndex:
        """The index of ``members``."""
        keys = sorted((name.encode(), at, size) for name, (at, size) in members.items())
        starts, at = array("q"), 0
        for key, _, _ in keys:
            starts.append(at)
            at += len(key) + 1
        offsets, sizes = array("q", (k[1] for k in keys)), array("q", (k[2] for k in keys))
        return cls(b"\0".join(k[0] for k in keys), starts, offsets, sizes)

    def _key(self, i: int) -> bytes:
        end = self.starts[i + 1] - 1 if i + 1 < len(self.starts) else len(self.blob)
        return self.blob[self.starts[i] : end]

    def get(self, name: str) -> tuple[int, int] | None:
        """``(offset, size)`` of member ``name``, or ``None``."""
        key = name.encode()
        i = bisect.bisect_left(range(len(self.starts)), key, key=self._key)
        return (self.offsets[i], self.sizes[i]) if i < len(self.starts) and self._key(i) == key else None

    def __getitem__(self, name: str) -> tuple[int, int]:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self) -> Iterator[str]:
        return (self._key(i).decode() for i in range(len(self.starts)))

    def dumps(self) -> bytes:
        """The index as JSON text (the arrays as base64 of their bytes, in this machine's byte order)."""
        arrays = {k: base64.b64encode(getattr(self, k).tobytes()).decode() for k in ("starts", "offsets", "sizes")}
        names = base64.b64encode(self.blob).decode()
        return json.dumps({"byteorder": sys.byteorder, "names": names, **arrays}).encode()

    @classmethod
    def loads(cls, data: bytes) -> MemberIndex:
        """An index from :meth:`dumps`; a ``ValueError`` for one of another form or byte order."""
        kept = json.loads(data)
        if kept.get("byteorder") != sys.byteorder:
            raise ValueError("a member index of another byte order")
        arrays = [array("q", base64.b64decode(kept[k])) for k in ("starts", "offsets", "sizes")]
        if not len(arrays[0]) == len(arrays[1]) == len(arrays[2]):
            raise ValueError("a member index whose arrays differ in length")
        return cls(base64.b64decode(kept["names"]), *arrays)


class ArchiveMedia:
    """Members of a tar (plain or gzipped, whole or split) or zip archive, read by offset through an index."""

    def __init__(
        self, urls: Sequence[str], storage_options: StorageOptions | None = None, index_dir: str | None = None
    ) -> None:
        self.urls = list(urls)
        self.storage_options = storage_options
        self.index_dir = index_dir
        self.name = archive_stem(self.urls[0].rstrip("/").rsplit("/", 1)[-1])
        if len(self.urls) > 1 or is_split_part(self.urls[0]):
            check_parts(self.urls)
        self.gzipped = self.name.endswith((".gz", ".tgz"))
        self.zipped = self.name.endswith(".zip")
        self._open()
        self.members = self._index()

    def _open(self) -> None:
        self._raw: Any = _open_seekable(self.urls, self.storage_options)
        self._file = self._uncompressed()
        self._zip = zipfile.ZipFile(self._file) if self.zipped else None

    def __getstate__(self) -> dict[str, Any]:
        """What a worker process needs (the index, not the open files): it reopens the archive itself."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_raw", "_file", "_zip")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open()

    def _key(self) -> str:
        identity = [file_identity(u, self.storage_options) for u in self.urls]
        text = json.dumps({"version": INDEX_VERSION, "urls": self.urls, "identity": identity}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def _index_paths(self) -> tuple[str, str] | None:
        if self.index_dir is None:
            return None
        base = storage.join(self.index_dir, f"{self.name}.{self._key()}")
        return base + ".members.json", base + ".gzidx"

    def _uncompressed(self) -> IO[bytes]:
        if not self.gzipped:
            return self._raw
        try:
            import indexed_gzip
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"reading {self.name} in place needs indexed_gzip: pip install 'editstream[archives]'"
            ) from exc

        paths = self._index_paths()
        if paths and storage.is_local(paths[1]) and os.path.exists(paths[1]):
            try:
                return indexed_gzip.IndexedGzipFile(
                    fileobj=self._raw, spacing=GZIP_SPACING, index_file=paths[1], buffer_size=GZIP_BUFFER
                )
            except OSError:  # a seek point file that does not load is built again as the archive is read
                self._raw.seek(0)
        return indexed_gzip.IndexedGzipFile(fileobj=self._raw, spacing=GZIP_SPACING, buffer_size=GZIP_BUFFER)

    def _index(self) -> MemberIndex:
        paths = self._index_paths()
        if paths is not None:
            with contextlib.suppress(FileNotFoundError, ValueError, TypeError, KeyError):
                return MemberIndex.loads(storage.read_bytes(paths[0], self.storage_options))
        try:
            members = MemberIndex.of(self._scan())
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            size = sum(storage.size(u, self.storage_options) for u in self.urls)
            raise OSError(
                f"{self.urls[0].rsplit('/', 1)[0]}: cannot index {self.name} ({len(self.urls)} part(s), {size:,} "
                f"bytes): {exc}; a part is missing or cut short? compare the parts with the dataset's file list"
            ) from exc
        if paths is not None:
            storage.makedirs(self.index_dir or ".", self.storage_options)
            if self.gzipped and storage.is_local(paths[1]):  # seek points first: the member list says both exist
                temp = f"{storage.local_path(paths[1])}.{os.getpid()}.tmp"  # workers may index the same archive
                self._file.export_index(temp)  # type: ignore[attr-defined]
                os.replace(temp, storage.local_path(paths[1]))
            storage.write_bytes(paths[0], members.dumps(), self.storage_options)
        return members

    def _scan(self) -> dict[str, tuple[int, int]]:
        """Member -> (offset of its data, size), from the archive's headers (tar); for a zip, the offset is its
        place in the zip's directory (a read looks the member up there, never scanning it)."""
        if self._zip is not None:
            return {_plain(i.filename): (k, i.file_size) for k, i in enumerate(self._zip.infolist()) if not i.is_dir()}
        members: dict[str, tuple[int, int]] = {}
        total = sum(storage.size(u, self.storage_options) for u in self.urls)
        with (
            Progress(f"index {self.name}", total >> 20, "MiB") as bar,
            tarfile.open(fileobj=self._file, mode="r:") as tar,
        ):
            for info in tar:  # a full read of the archive: shown, as it is long for a large one
                if info.isfile():
                    members[_plain(info.name)] = (info.offset_data, info.size)
                bar.update((self._raw.tell() >> 20) - bar.done)
        return members

    def names(self) -> list[str]:
        return list(self.members)

    def read(self, name: str) -> bytes:
        found = self.members.get(_plain(name))
        if found is None:
            raise MediaMissing(f"{name!r} is not in {self.name}")
        offset, size = found
        if self._zip is not None:
            return self._zip.read(self._zip.filelist[offset])
        self._file.seek(offset)
        data = self._file.read(size)
        if len(data) != size:
            raise OSError(f"{self.name}: member {name!r} ends early ({len(data)} of {size} bytes)")
        return data

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        self._file.close()
        self._raw.close()


def _plain(name: str) -> str:
    """A member name as metadata names it: without a leading ``./`` or ``/``."""
    return name.removeprefix("./").lstrip("/")


def open_media(
    url: str | Sequence[str],
    storage_options: StorageOptions | None = None,
    *,
    index_dir: str | None = None,
    allow_outside: bool = False,
) -> FolderMedia | ArchiveMedia:
    """The media source at ``url``: a folder, an archive, a split archive (by one part) or a list of parts."""
    if not isinstance(url, str):
        return ArchiveMedia(list(url), storage_options, index_dir)
    if is_split_part(url):
        return ArchiveMedia(split_parts(url, storage_options), storage_options, index_dir)
    if url.rstrip("/").endswith(ARCHIVE_SUFFIXES):
        return ArchiveMedia([url], storage_options, index_dir)
    return FolderMedia(url, storage_options, allow_outside)

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
import logging
import os
import stat
import sys
import tarfile
import zipfile
import zlib
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, Protocol

from ..format.sft import contained_media_path
from ..format.tarblock import DEFAULT_MAX_MEMBER_SIZE
from ..io import storage
from ..io.progress import Progress
from ..io.ranged import RetryingFile
from ..io.storage import StorageOptions
from .archive_names import (
    ARCHIVE_SUFFIXES,
    UNSUPPORTED_SUFFIXES,
    archive_stem,
    check_parts,
    ends_with,
    is_split_part,
    joined_or_parts,
    split_parts,
)
from .identity import SourceChangedError, file_identity

log = logging.getLogger(__name__)

GZIP_SPACING = 16 << 20
"""Uncompressed bytes between two gzip seek points: a 10 GB archive keeps about 20 MB of them."""
GZIP_BUFFER = 1 << 20
"""Read-ahead of a gzipped archive (indexed_gzip's default, 4 seek-point spacings, made a 4-byte member's
read decompress 64 MiB and keep it in memory)."""
INDEX_VERSION = 4
MAX_MEMBER_SIZE = DEFAULT_MAX_MEMBER_SIZE
"""Largest media member read (the shards' cap): a bigger one (a bomb of zeros in a small .tar.gz) drops its row."""


class MediaMissing(KeyError):
    """A name the metadata gives that the media source does not hold."""


class MediaUnreadable(OSError):
    """A member the media holds but that cannot be served: not a regular file, above the size cap, encrypted,
    of an unsupported compression, or not the member the index says; the message names where and why."""


def regular_file(url: str) -> None:
    """Refuse a local path that is not a regular file (a FIFO would block the read forever)."""
    if storage.is_local(url):
        mode = os.stat(storage.local_path(url)).st_mode
        if not stat.S_ISREG(mode):
            raise MediaUnreadable(f"{url} is not a regular file (mode {stat.filemode(mode)}); it is not read")


class MediaSource(Protocol):
    """Members by name."""

    def read(self, name: str) -> bytes:
        """The bytes of member ``name``; :class:`MediaMissing` when there is none."""
        ...

    def names(self) -> list[str]:
        """Every member name (for an archive: from its index)."""
        ...


class FolderMedia:
    """Files under a folder; a name outside it (by its text, or through a link) is refused as ever."""

    def __init__(
        self,
        url: str,
        storage_options: StorageOptions | None = None,
        allow_outside: bool = False,
        max_member_size: int = MAX_MEMBER_SIZE,
    ) -> None:
        self.url = url.rstrip("/")
        self.storage_options = storage_options
        self.allow_outside = allow_outside
        self.max_member_size = max_member_size

    def read(self, name: str) -> bytes:
        path = contained_media_path(self.url, name, self.allow_outside)
        try:
            if storage.is_local(path):  # one stat: a FIFO or a huge file is refused before it is opened
                st = os.stat(storage.local_path(path))
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(path)
                if not stat.S_ISREG(st.st_mode):
                    raise MediaUnreadable(f"{path} is not a regular file (mode {stat.filemode(st.st_mode)})")
                _capped(path, name, st.st_size, self.max_member_size)
            return storage.read_bytes(path, self.storage_options)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise MediaMissing(f"{name!r} is not in {self.url}") from None

    def names(self) -> list[str]:
        fs, path = storage.url_to_fs(self.url, self.storage_options)
        prefix = path.rstrip("/") + "/"
        return sorted(str(p)[len(prefix) :] for p in fs.find(path))


def _capped(where: str, name: str, size: int, cap: int) -> None:
    """Refuse a member above the size cap, from its header, before any of it is read."""
    if size > cap:
        raise MediaUnreadable(f"{where}: member {name!r} is {size:,} bytes, above the media member cap of {cap:,}")


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
        keys = sorted((_encoded(name), at, size) for name, (at, size) in members.items())
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
        try:
            key = _encoded(name)
        except UnicodeEncodeError:  # a lone surrogate no member name can hold
            return None
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
        return (self._key(i).decode("utf-8", "surrogateescape") for i in range(len(self.starts)))

    def dumps(self, identity: Any = None) -> bytes:
        """The index as JSON text (the arrays as base64 of their bytes, in this machine's byte order), with the
        ``identity`` of the archive it was made from."""
        arrays = {k: base64.b64encode(getattr(self, k).tobytes()).decode() for k in ("starts", "offsets", "sizes")}
        names = base64.b64encode(self.blob).decode()
        kept = {"byteorder": sys.byteorder, "identity": identity, "names": names, **arrays}
        return json.dumps(kept).encode()

    @classmethod
    def loads(cls, data: bytes, identity: Any = None) -> MemberIndex:
        """An index from :meth:`dumps`; a ``ValueError`` for one of another form or byte order, or made from an
        archive of another identity than ``identity`` (when given)."""
        kept = json.loads(data)
        if kept.get("byteorder") != sys.byteorder:
            raise ValueError("a member index of another byte order")
        if identity is not None and kept.get("identity") != identity:
            raise ValueError("a member index of another archive")
        arrays = [array("q", base64.b64decode(kept[k])) for k in ("starts", "offsets", "sizes")]
        if not len(arrays[0]) == len(arrays[1]) == len(arrays[2]):
            raise ValueError("a member index whose arrays differ in length")
        return cls(base64.b64decode(kept["names"]), *arrays)


class ArchiveMedia:
    """Members of a tar (plain or gzipped, whole or split) or zip archive, read by offset through an index that
    carries the archive's identity; each read checks the member's own header (tar) or directory entry (zip)
    names it, so a stale or edited index is rebuilt, never served as another member's bytes."""

    def __init__(
        self,
        urls: Sequence[str],
        storage_options: StorageOptions | None = None,
        index_dir: str | None = None,
        max_member_size: int = MAX_MEMBER_SIZE,
    ) -> None:
        self.urls = list(urls)
        self.storage_options = storage_options
        self.index_dir = index_dir
        self.max_member_size = max_member_size
        self.name = archive_stem(self.urls[0].rstrip("/").rsplit("/", 1)[-1])
        if ends_with(self.name, UNSUPPORTED_SUFFIXES) or not ends_with(self.name, ARCHIVE_SUFFIXES):
            raise ValueError(_unsupported(self.urls[0]))
        for url in self.urls:  # before any open: a FIFO would block it forever
            regular_file(url)
        if len(self.urls) > 1 or is_split_part(self.urls[0]):
            check_parts(self.urls)
        self.gzipped = ends_with(self.name, (".gz", ".tgz"))
        self.zipped = ends_with(self.name, (".zip",))
        self.identity = [file_identity(u, self.storage_options) for u in self.urls]
        self._open()
        self.members, self._kept = self._index()

    def _open(self, kept_seek_points: bool = True) -> None:
        self._raw: Any = _open_seekable(self.urls, self.storage_options)
        self._file = self._uncompressed(kept_seek_points)
        self._zip = zipfile.ZipFile(self._file) if self.zipped else None
        self._check_unchanged()

    def _check_unchanged(self) -> None:
        """A :class:`SourceChangedError` when the open local archive is no longer the one indexed (changed in place,
        or replaced before a worker reopened it); one ``fstat``."""
        if len(self.urls) != 1 or not storage.is_local(self.urls[0]):
            return
        st = os.fstat(self._raw.fileno())
        now = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}
        if now != self.identity[0]:
            raise SourceChangedError(
                f"{self.urls[0]} changed while it was read (was {self.identity[0]}, now {now}); "
                "run again to read it as it is now"
            )

    def __getstate__(self) -> dict[str, Any]:
        """What a worker process needs (the index, not the open files): it reopens the archive itself."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_raw", "_file", "_zip")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open()

    def _key(self) -> str:
        text = json.dumps({"version": INDEX_VERSION, "urls": self.urls, "identity": self.identity}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def _index_paths(self) -> tuple[str, str] | None:
        if self.index_dir is None:
            return None
        base = storage.join(self.index_dir, f"{self.name}.{self._key()}")
        return base + ".members.json", base + ".gzidx"

    def _uncompressed(self, kept_seek_points: bool = True) -> IO[bytes]:
        if not self.gzipped:
            return self._raw
        try:
            import indexed_gzip
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"reading {self.name} in place needs indexed_gzip: pip install 'editstream[archives]'"
            ) from exc

        paths = self._index_paths()
        if kept_seek_points and paths and storage.is_local(paths[1]) and os.path.exists(paths[1]):
            try:
                return indexed_gzip.IndexedGzipFile(
                    fileobj=self._raw, spacing=GZIP_SPACING, index_file=paths[1], buffer_size=GZIP_BUFFER
                )
            except OSError:  # a seek point file that does not load is built again as the archive is read
                self._raw.seek(0)
        return indexed_gzip.IndexedGzipFile(fileobj=self._raw, spacing=GZIP_SPACING, buffer_size=GZIP_BUFFER)

    def _index(self, use_kept: bool = True) -> tuple[MemberIndex, bool]:
        """The member index and whether it was read from the kept one (not from this archive's headers)."""
        paths = self._index_paths()
        if paths is not None and use_kept:
            with contextlib.suppress(FileNotFoundError, ValueError, TypeError, KeyError):
                data = storage.read_bytes(paths[0], self.storage_options)
                return MemberIndex.loads(data, self.identity), True
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
            storage.write_bytes(paths[0], members.dumps(self.identity), self.storage_options)
        return members, False

    def _rebuild(self) -> None:
        """Index the archive again from its headers (the kept index did not match it), keeping the new index."""
        log.warning("%s: the kept member index does not match the archive; indexing it again", self.urls[0])
        self.close()
        self._open(kept_seek_points=False)
        self.members, self._kept = self._index(use_kept=False)

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
        key = _plain(name)
        found = self.members.get(key)
        if found is None:
            raise MediaMissing(f"{name!r} is not in {self.name}")
        _capped(self.name, name, found[1], self.max_member_size)
        self._check_unchanged()
        data = self._member(key, *found)
        if data is None and self._kept:  # the kept index is stale or edited: index the archive itself
            self._rebuild()
            return self.read(name)
        if data is None:
            raise MediaUnreadable(f"{self.name}: member {name!r} is not where its index says; the archive changed?")
        return data

    def _member(self, name: str, offset: int, size: int) -> bytes | None:
        """Member ``name``'s bytes, or ``None`` when the archive holds another member at its index entry."""
        if self._zip is not None:
            if offset >= len(self._zip.filelist):
                return None
            info = self._zip.filelist[offset]
            if _plain(info.filename) != name or info.file_size != size:
                return None
            return _zip_member(self._zip, info, self.name, self.max_member_size)
        if offset < tarfile.BLOCKSIZE:
            return None
        try:
            self._file.seek(offset - tarfile.BLOCKSIZE)  # the member's own header, then its data: one read
            data = self._file.read(size + tarfile.BLOCKSIZE)
        except (OSError, EOFError, zlib.error) as exc:
            raise MediaUnreadable(f"{self.name}: member {name!r} cannot be read: {exc}") from exc
        if not _names_member(data[: tarfile.BLOCKSIZE], name, size):
            return None
        if len(data) != size + tarfile.BLOCKSIZE:
            raise OSError(f"{self.name}: member {name!r} ends early ({len(data) - tarfile.BLOCKSIZE} of {size} bytes)")
        return data[tarfile.BLOCKSIZE :]

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        self._file.close()
        self._raw.close()


_ZIP_READABLE = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
for _method, _module, _label in ((zipfile.ZIP_BZIP2, "bz2", "bzip2"), (zipfile.ZIP_LZMA, "lzma", "lzma")):
    with contextlib.suppress(ImportError):
        __import__(_module)
        _ZIP_READABLE[_method] = _label


def _zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, cap: int) -> bytes:
    """One zip member's bytes; a :class:`MediaUnreadable` naming it when it is encrypted, of a compression this
    Python cannot read (AES is method 99), above the cap or damaged (its CRC checked as it is read)."""
    name = info.filename
    if info.flag_bits & 0x1:
        kind = "AES" if info.compress_type == 99 else "traditional PKWARE"
        raise MediaUnreadable(f"{where}: member {name!r} is encrypted ({kind}); no password is taken")
    if info.compress_type not in _ZIP_READABLE:
        raise MediaUnreadable(f"{where}: member {name!r} uses compression method {info.compress_type}, not read")
    _capped(where, name, info.file_size, cap)
    try:
        with zf.open(info) as f:
            data = f.read(cap + 1)
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, OSError, zlib.error, ValueError) as exc:
        raise MediaUnreadable(f"{where}: member {name!r} cannot be read: {exc}") from exc
    _capped(where, name, len(data), cap)
    return data


def _names_member(header: bytes, name: str, size: int) -> bool:
    """Whether a tar header block is that of member ``name`` of ``size`` bytes (a name too long for the block
    or not ASCII is checked by size and checksum only: the block holds a shortened form of it)."""
    try:
        info = tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
    except tarfile.TarError:
        return False
    if not info.isfile() or info.size != size:
        return False
    return _plain(info.name) == name or not name.isascii() or len(_encoded(name)) >= tarfile.LENGTH_NAME - 1


def _unsupported(url: str) -> str:
    base = url.rstrip("/").rsplit("/", 1)[-1]
    return (
        f"{url}: a {base[len(base.split('.', 1)[0]) :]} archive cannot be read in place by member (only "
        f"{', '.join(ARCHIVE_SUFFIXES)}, whole or split, are); unpack it into a folder or repack it as .tar or .zip"
    )


def _encoded(name: str) -> bytes:
    """A member name's bytes: a tar name not in UTF-8 keeps its bytes (as tarfile's surrogate escapes)."""
    return name.encode("utf-8", "surrogateescape")


def _plain(name: str) -> str:
    """A member name as metadata names it: without a leading ``./`` or ``/``."""
    return name.removeprefix("./").lstrip("/")


def open_media(
    url: str | Sequence[str],
    storage_options: StorageOptions | None = None,
    *,
    index_dir: str | None = None,
    allow_outside: bool = False,
    max_member_size: int = MAX_MEMBER_SIZE,
) -> FolderMedia | ArchiveMedia:
    """The media source at ``url``: a folder, an archive, a split archive (by one part) or a list of parts (a
    joined archive among them read instead, when it is their sum); members above ``max_member_size`` refused."""
    if not isinstance(url, str):
        return ArchiveMedia(joined_or_parts(list(url), storage_options), storage_options, index_dir, max_member_size)
    if is_split_part(url):
        parts = split_parts(url, storage_options)
        head, _, base = url.rstrip("/").rpartition("/")
        joined = f"{head}/{archive_stem(base)}" if head else archive_stem(base)
        if storage.exists(joined, storage_options):
            parts = joined_or_parts([joined, *parts], storage_options)
        return ArchiveMedia(parts, storage_options, index_dir, max_member_size)
    if ends_with(url.rstrip("/"), (*ARCHIVE_SUFFIXES, *UNSUPPORTED_SUFFIXES)):
        return ArchiveMedia([url], storage_options, index_dir, max_member_size)
    return FolderMedia(url, storage_options, allow_outside, max_member_size)

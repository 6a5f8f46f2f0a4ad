"""Source rows -> one output row of the target kind: cell values made chain parts (image bytes, Hugging Face
Image structs unwrapped, and phrasings), a value that cannot be used raising :class:`BadValue` naming the column
so only its row is dropped and counted. The output schema depends on the mapping and the source schema only, so
every output file of an adaptation has the same column types."""

from __future__ import annotations

import contextlib
import json
import posixpath
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from ...format.safe_yaml import brief
from ...format.sft import MediaOutsideError, contained_media_path
from ...io import storage
from ...io.text import UndecodableRow
from ...kinds import get_kind
from ..archive_names import archive_stem
from ..identity import Identity, file_identity
from ..media import (
    ArchiveMedia,
    FolderMedia,
    MediaMissing,
    MediaSource,
    MediaUnreadable,
    open_media,
)
from .mapping import AdapterMapping, InstructionSource


class BadValue(Exception):
    """A cell (or chain) that cannot be adapted: ``reason`` for the report, ``code`` to count it by,
    ``row`` the index of the failing row within its chain, ``column`` the cell's column if one is to blame."""

    def __init__(self, reason: str, code: str, row: int = 0, column: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.row = row
        self.column = column


def readable_rows(rows: list[Any]) -> list[dict[str, Any]]:
    """Rows as :func:`~editstream.io.parquet.batch_rows` gives them, a non-UTF-8 cell as its :class:`BadValue`."""
    out = []
    for row in rows:
        if isinstance(row, UndecodableRow):
            for column in row.columns:
                row[column] = BadValue(f"{column}: {row.reason(column)}", "bad_utf8", column=column)
        out.append(dict(row))
    return out


def bad_cell(row: dict[str, Any]) -> BadValue | None:
    """The :class:`BadValue` one of ``row``'s cells holds (a cell ``readable_rows`` could not read), else ``None``."""
    return next((value for value in row.values() if isinstance(value, BadValue)), None)


class MediaDir:
    """Reads the images a row names by path, only inside its media (``--media-dir`` and the mapping's
    ``mounts``): a name outside them is refused, one absent is a ``media_missing`` drop, one that cannot be
    served (above the size cap, encrypted, a FIFO) a ``media_unreadable`` drop naming where and why."""

    def __init__(
        self,
        root: str | None,
        storage_options: storage.StorageOptions | None = None,
        *,
        mounts: Sequence[tuple[str, MediaSource]] = (),
        index_dir: str | None = None,
    ) -> None:
        self.root = root
        self.storage_options = storage_options
        self.mounts = list(mounts)
        if root is not None:
            self.mounts.insert(0, ("", open_media(root, storage_options, index_dir=index_dir)))
        self.consulted: dict[str, Identity | None] | None = None

    @contextlib.contextmanager
    def recording(self) -> Iterator[dict[str, Identity | None]]:
        """Within it, the identity of every media file a read looked at (an archive's parts, a folder's file,
        ``None`` where it was absent), taken before reading: what a done record must find unchanged."""
        outer, self.consulted = self.consulted, {}
        try:
            yield self.consulted
        finally:
            self.consulted = outer

    def _note(self, source: MediaSource, name: str) -> None:
        """Record the identity of the files ``source`` serves ``name`` from (while recording)."""
        if self.consulted is None:
            return
        if isinstance(source, ArchiveMedia):
            for url in source.urls:
                if url not in self.consulted:
                    self.consulted[url] = file_identity(url, self.storage_options)
            return
        if not isinstance(source, FolderMedia):
            return
        try:
            url = contained_media_path(source.url, name, source.allow_outside)
        except (MediaOutsideError, OSError, ValueError):
            return  # refused by the read itself
        if url not in self.consulted:
            try:
                self.consulted[url] = file_identity(url, self.storage_options)
            except (FileNotFoundError, NotADirectoryError):
                self.consulted[url] = None

    def read(self, column: str, path: str) -> bytes:
        """The bytes of ``path`` in the media; ``BadValue`` if absent, outside it or no media is set."""
        if not self.mounts:
            raise BadValue(
                f"{column}: no image bytes, only the path {brief(path)}, and no media_dir to resolve it", "no_media_dir"
            )
        if "\0" in path:
            raise BadValue(f"{column}: image path {brief(path)} holds a NUL byte", "bad_path", column=column)
        clean = posixpath.normpath(path.replace("\\", "/"))
        if clean.startswith("/") or clean == ".." or clean.startswith("../") or "://" in path:
            raise BadValue(f"{column}: image path {brief(path)} is not inside the media directory", "media_outside")
        for prefix, source in self.mounts:
            if not clean.startswith(prefix):
                continue
            self._note(source, clean[len(prefix) :])
            try:
                return source.read(clean[len(prefix) :])
            except MediaMissing:
                continue
            except MediaUnreadable as exc:  # too big, encrypted, not a regular file...: this row only
                raise BadValue(f"{column}: media file {clean}: {exc}", "media_unreadable") from None
            except MediaOutsideError:
                raise BadValue(f"{column}: image path {brief(path)} leads outside its media", "media_outside") from None
        looked = [_place(source) for prefix, source in self.mounts if clean.startswith(prefix)]
        raise BadValue(f"{column}: media file {clean} is missing (looked in {brief(looked)})", "media_missing")


def _place(source: MediaSource) -> str:
    """Where a media source is, to name in a drop: an archive by its (unsplit) name, a folder by its path."""
    if isinstance(source, ArchiveMedia):
        return archive_stem(source.urls[0])
    return str(getattr(source, "url", source))


def image_bytes(value: Any, column: str, media: MediaDir) -> bytes:
    """The image bytes of one cell: raw binary, an Image struct (bytes, else path), or a path string."""
    if value is None:
        raise BadValue(f"{column} is null", "null_image")
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) == 0:
            raise BadValue(f"{column} is empty", "null_image")
        return bytes(value)
    if isinstance(value, dict):
        data = value.get("bytes")
        if data is not None and len(data) > 0:
            return bytes(data)
        path = value.get("path")
        if isinstance(path, str) and path:
            return media.read(column, path)
        raise BadValue(f"{column} has neither image bytes nor a path", "null_image")
    if isinstance(value, str) and value:
        return media.read(column, value)
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str) and value[0]:
        return media.read(column, value[0])  # a list of input images holding one (ShareGPT-4o's input_image)
    if isinstance(value, list):
        raise BadValue(f"{column} lists {len(value)} images; one edit step takes one", "bad_image_list")
    raise BadValue(f"{column} is a {type(value).__name__}, not an image", "null_image")


def _text(value: Any, column: str) -> Any:
    """A binary cell's text (strict UTF-8); any other value as it is."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"{column}: binary text that is not valid UTF-8 (byte {exc.start})"
        raise BadValue(reason, "bad_utf8", column=column) from None


def _checked(column: str, items: Any) -> list[str]:
    if not isinstance(items, list) or not items:
        raise BadValue(f"{column} holds no phrasings", "bad_instruction")
    items = [_text(item, column) for item in items]
    for item in items:
        if not isinstance(item, str) or not item.strip():
            reason = f"{column} holds a phrasing that is not a non-empty string: {brief(item)}"
            raise BadValue(reason, "bad_instruction")
    return items


def phrasings(value: Any, column: str, source: Any) -> list[str]:
    """The phrasings of one edit from a cell in ``source.format``, each with ``source.remove`` cut out."""
    texts = _phrasings(value, column, source.format)
    if not source.remove:
        return texts
    for cut in source.remove:
        texts = [t.replace(cut, "") for t in texts]
    return _checked(column, [" ".join(t.split()) for t in texts])


def _phrasings(value: Any, column: str, fmt: str) -> list[str]:
    if value is None:
        raise BadValue(f"{column} is null", "bad_instruction")
    value = _text(value, column)
    if fmt == "string":
        return _checked(column, [value])
    if fmt == "list":
        return _checked(column, value)
    if not isinstance(value, str):
        raise BadValue(f"{column} is a {type(value).__name__}, not a JSON string", "bad_instruction")
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise BadValue(f"{column} is not valid JSON: {exc}", "bad_instruction") from None
    return _checked(column, [parsed] if isinstance(parsed, str) else parsed)


def output_schema(mapping: AdapterMapping, source: pa.Schema) -> pa.Schema:
    """The kind's two columns, then each ``keep`` column (a list of its type per row of a grouped chain)."""
    images, texts = mapping.target_columns
    fields = [pa.field(images, pa.list_(pa.binary())), pa.field(texts, pa.list_(pa.list_(pa.string())))]
    if mapping.captioned:
        fields = [pa.field(images, pa.binary()), pa.field(texts, pa.string())]
    for column in mapping.keep:
        arrow_type = source.field(column).type if column in source.names else pa.string()
        per_row = bool(mapping.group_by) and column not in mapping.group_by
        fields.append(pa.field(column, pa.list_(arrow_type) if per_row else arrow_type))
    return pa.schema(fields)


def _cell(row: dict[str, Any], column: str, read: Callable[..., Any], option: Any) -> Any:
    """``read(row[column], column, option)``, its ``BadValue`` naming ``column``."""
    try:
        return read(row[column], column, option)
    except BadValue as exc:
        raise BadValue(exc.reason, exc.code, column=column) from None


class ChainBuilder:
    """Builds output rows from the source rows of one chain, checked by the target kind's own row checks."""

    def __init__(self, mapping: AdapterMapping, media: MediaDir, schema: pa.Schema | None = None) -> None:
        self.mapping = mapping
        self.media = media
        self.kind = get_kind(mapping.kind)
        self.image_column, self.text_column = mapping.target_columns
        # a JSON source's keep columns are typed by their first rows (parquet's by the file): checked per chain
        self.keep_types = {c: schema.field(c).type for c in mapping.keep} if schema and mapping.metadata else {}

    def build(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The output row of ``rows`` (one row, or a group's in order); ``BadValue`` (``exc.row``: the failing
        row) for a cell that cannot be adapted or a chain the kind's checks reject."""
        images: list[bytes] = []
        instructions: list[list[str]] = []
        for i, row in enumerate(rows):
            try:
                bad = bad_cell(row)
                if bad is not None:
                    raise bad
                images_in, texts_in = self._parts(row, first=i == 0)
                images.extend(_cell(row, c, image_bytes, self.media) for c in images_in)
                instructions.extend(_cell(row, s.column, phrasings, s) for s in texts_in)
            except BadValue as exc:
                raise BadValue(exc.reason, exc.code, i, exc.column) from None
        out: dict[str, Any] = {self.image_column: images, self.text_column: instructions}
        if self.mapping.captioned:
            out = {self.image_column: images[0], self.text_column: _captions(self.mapping, instructions)}
        for column in self.mapping.keep:
            per_row = self.mapping.group_by and column not in self.mapping.group_by
            out[column] = [row[column] for row in rows] if per_row else rows[0][column]
        for column, arrow_type in self.keep_types.items():
            try:
                pa.array([out[column]], arrow_type)
            except (pa.ArrowException, TypeError, ValueError):
                reason = f"{column}: {brief(out[column])} is not {arrow_type}, the type of its first rows"
                raise BadValue(reason, "bad_type", column=column) from None
        problem = self.kind.first_problem(out)
        if problem is not None:
            raise BadValue(f"the chain fails the {self.kind.name} checks: {problem}", "kind_check")
        return out

    def _parts(self, row: dict[str, Any], first: bool) -> tuple[Sequence[str], Sequence[InstructionSource]]:
        """The image columns and instruction sources of ``row`` (no first image after a group's first row;
        with ``optional_tail`` only those before the first absent image)."""
        images, texts = self.mapping.images, self.mapping.instructions
        if self.mapping.optional_tail:
            end = next((k for k in range(2, len(images)) if row.get(images[k]) is None), len(images))
            later = [c for c in images[end:] if row.get(c) is not None]
            if later:  # a turn missing before others: dropped and counted, not cut short in silence
                raise BadValue(
                    f"{images[end]} is absent but {later[0]} is not; a chain ends at its last turn",
                    "null_image",
                    column=images[end],
                )
            images, texts = images[:end], texts[: end - 1]
        return (images if first else images[1:]), texts


def _captions(mapping: AdapterMapping, phrasings: list[list[str]]) -> str:
    """The captions JSON object of a text-to-image row (``name.1``, ``name.2``... for further phrasings)."""
    captions: dict[str, str] = {}
    for source, texts in zip(mapping.instructions, phrasings):
        for k, text in enumerate(texts):
            captions[source.column if k == 0 else f"{source.column}.{k}"] = text
    return json.dumps(captions, ensure_ascii=False)


def to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """The output rows as a table of ``schema`` (column by column, so empty lists keep their types)."""
    return pa.Table.from_pydict({name: [row[name] for row in rows] for name in schema.names}, schema=schema)

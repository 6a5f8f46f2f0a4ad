"""``verify`` for roots of a JSONL + media kind: the copy of the JSONL the loader lists lines from, and the source.

The shards themselves are checked like any other (size, digest, idx, keys, every sample
decodes); this adds the kind's JSONL record: ``lines.jsonl`` must have the recorded size, hash and
line count, and, when a source JSONL is given, that file must be the one that was converted.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..format import manifest as mf
from ..format.sft import SftInfo
from ..io import storage
from ..io.lines import LineDecodeError, decode_lines
from .problems import Problem


def check_lines_root(
    root: str, manifest: mf.Manifest, source: str | None, storage_options: dict[str, Any] | None
) -> list[Problem]:
    """Problems with the root's line copy (and with its source JSONL, when given)."""
    try:
        info = SftInfo.from_manifest(manifest, root)
    except mf.ManifestError as exc:
        return [Problem("manifest", None, str(exc))]
    url = storage.join(root, info.lines_path)
    problems: list[Problem] = []
    try:
        data = storage.read_bytes(url, storage_options)
    except FileNotFoundError:
        return [Problem("lines", None, f"{url} does not exist")]
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != info.lines_bytes or digest != info.lines_sha256:
        problems.append(
            Problem(
                "lines",
                None,
                f"{url}: {len(data)} bytes with sha256 {digest}, the manifest says "
                f"{info.lines_bytes} bytes with sha256 {info.lines_sha256}",
            )
        )
    else:
        try:
            count = len(decode_lines(data, url))
        except LineDecodeError as exc:
            count = -1
            problems.append(Problem("lines", None, str(exc)))
        if count >= 0 and count != info.num_lines:
            problems.append(Problem("lines", None, f"{url}: {count} lines, the manifest says {info.num_lines}"))
    if source is not None:
        try:
            source_digest = hashlib.sha256(storage.read_bytes(source, storage_options)).hexdigest()
        except FileNotFoundError:
            problems.append(Problem("source", None, f"{source} does not exist"))
        else:
            if source_digest != info.lines_sha256:
                problems.append(Problem("source", None, f"{source} is not the JSONL that was converted (hash differs)"))
    return problems

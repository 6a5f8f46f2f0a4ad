"""Paths read from a manifest or idx: relative, normalised, inside the dataset root, or an error (a
hostile manifest must not make a reader open, or a converter delete, anything outside the root)."""

from __future__ import annotations

import re

_DRIVE = re.compile(r"^[A-Za-z]:")


def relative_path_problem(path: object) -> str | None:
    """Why ``path`` is not a safe relative path under a root, or ``None`` when it is."""
    if not isinstance(path, str):
        return f"is a {type(path).__name__}, not a string"
    if not path:
        return "is empty"
    if "\0" in path:
        return "contains a NUL byte"
    if "://" in path or "::" in path or _DRIVE.match(path):
        return "names another filesystem (a scheme, a chained URL or a drive)"
    if path.startswith(("/", "\\")):
        return "is absolute"
    if "\\" in path:
        return "contains a backslash"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "is not normalised (empty, '.' or '..' components)"
    return None

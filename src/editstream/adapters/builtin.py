"""The built-in adapters: ordinary mapping files shipped in ``builtin/*.yaml``, one per public dataset."""

from __future__ import annotations

from pathlib import Path

from .mapping import AdapterMapping, MappingError, load_mapping

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def _files() -> dict[str, Path]:
    found = {}
    for path in sorted(BUILTIN_DIR.glob("*.yaml")):
        found[load_mapping(path).name] = path
    return found


def builtin_names() -> list[str]:
    """The names ``--from`` accepts, sorted."""
    return sorted(_files())


def builtin_path(name: str) -> Path:
    """The mapping file of the built-in adapter ``name`` (to read, or to copy and change)."""
    files = _files()
    if name not in files:
        raise MappingError(
            f"unknown adapter {name!r}; the built-in adapters are {sorted(files)} (or give a mapping file)"
        )
    return files[name]


def resolve_mapping(adapter: str | Path | AdapterMapping) -> AdapterMapping:
    """A mapping from a built-in name, a mapping file path, or a mapping itself."""
    if isinstance(adapter, AdapterMapping):
        return adapter
    path = Path(adapter)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.exists():
        return load_mapping(path)
    return load_mapping(builtin_path(str(adapter)))

"""The package's shape is part of its contract: layers import downwards only, units stay small.

The converter and the loader share the ``io`` and ``format`` layers and never import each
other; no file, class or function outgrows the limits a reader can hold in mind.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "editstream"

# Which sub-packages each layer may import (besides itself). The top-level ``__init__`` and
# the ``cli`` package sit above everything.
ALLOWED = {
    "io": set(),
    "format": {"io"},
    "conversion": {"io", "format"},
    "loader": {"io", "format"},
    "packing": {"io", "format", "loader"},
    "testing": {"io", "format", "conversion", "loader"},  # test tooling sits above both (the soak uses both)
    # The command line sits above everything (it was the top-level cli.py module).
    "cli": {"io", "format", "conversion", "loader", "packing", "testing", "preview"},
    "preview": {"io", "format", "loader"},
}
MAX_FILE_LINES = 500
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _layer(path: Path) -> str | None:
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else None


def _imported_layers(path: Path, src: Path = SRC) -> set[tuple[str, int]]:
    """``(sub-package of editstream, line)`` for every editstream import in ``path``, relative ones resolved."""
    package = list(path.relative_to(src).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[list[str]] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = base + (node.module.split(".") if node.module else [])
                names = [module + [alias.name] for alias in node.names] if not node.module else [module]
                targets.extend(names)
            elif node.module and node.module.split(".")[0] == "editstream":
                targets.append(node.module.split(".")[1:] or [alias.name for alias in node.names][:1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "editstream":
                    targets.append(alias.name.split(".")[1:])
        for target in targets:
            if target and (src / target[0]).is_dir():
                found.add((target[0], node.lineno))
    return found


def test_the_layer_table_covers_every_sub_package():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(ALLOWED)


@pytest.mark.parametrize("path", [p for p in _modules() if _layer(p)], ids=lambda p: str(p.relative_to(SRC)))
def test_layers_import_only_downwards(path):
    layer = _layer(path)
    bad = sorted(
        (target, line) for target, line in _imported_layers(path) if target != layer and target not in ALLOWED[layer]
    )
    assert not bad, f"{path.relative_to(SRC)} ({layer}) imports {bad}; allowed: {sorted(ALLOWED[layer])}"


def test_the_import_check_sees_a_violation(tmp_path):
    """The check above resolves relative and absolute imports, so it catches a converter module
    importing the loader either way (and does not mistake the module's own package for one)."""
    fake = tmp_path / "editstream"
    (fake / "conversion").mkdir(parents=True)
    (fake / "loader").mkdir()
    module = fake / "conversion" / "bad.py"
    module.write_text("from ..loader import units\nimport editstream.loader.drops\nfrom .plan import x\n")
    assert sorted(_imported_layers(module, fake)) == [("conversion", 3), ("loader", 1), ("loader", 2)]


def _too_long(path: Path) -> list[str]:
    problems = []
    source = path.read_text()
    lines = len(source.splitlines())
    if lines > MAX_FILE_LINES:
        problems.append(f"file has {lines} lines (limit {MAX_FILE_LINES})")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            size = node.end_lineno - node.lineno + 1
            if size > MAX_CLASS_LINES:
                problems.append(f"class {node.name} has {size} lines (limit {MAX_CLASS_LINES})")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            size = node.end_lineno - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                problems.append(f"function {node.name} has {size} lines (limit {MAX_FUNCTION_LINES})")
    return problems


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_files_classes_and_functions_stay_small(path):
    assert _too_long(path) == []


def test_every_public_module_says_what_it_is_for():
    missing = [str(p.relative_to(SRC)) for p in _modules() if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


def test_the_package_is_typed():
    assert (SRC / "py.typed").exists()

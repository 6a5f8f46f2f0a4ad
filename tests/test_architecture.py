"""The package's shape is part of its contract: layers import downwards only, units stay small.

The converter and the loader share the ``io`` and ``format`` layers and never import each
other; no file, class or function outgrows the limits a reader can hold in mind.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "editstream"
KIND_CODE = "kinds/<name>/*"
"""The layer of a kind package's modules other than its record (``kinds/<name>/__init__.py``)."""

# Which sub-packages each layer may import (besides itself). The top-level ``__init__`` and
# the ``cli`` package sit above everything.
ALLOWED = {
    "io": set(),
    "format": {"io"},
    # A dataset kind is a record over format's vocabulary; it names its dataset, preview and
    # synth code by dotted path, so it imports nothing above format.
    "kinds": {"io", "format"},
    # That code sits beside the record in the kind's package (kinds/<name>/dataset.py, preview.py,
    # synth.py) and is built on editstream.plugin alone, as a plug-in kind is (the top-level module,
    # so not in this table; see test_kind_code_imports_editstream_only_through_the_plugin_module),
    # besides its own record.
    KIND_CODE: {"kinds"},
    # Opening data (units, rows, the row sources of every backend) sits under both the converter
    # and the loader, so each reads data the one way.
    "data": {"io", "format", "kinds"},
    "conversion": {"io", "format", "kinds", "data"},
    "loader": {"io", "format", "kinds", "data"},
    "packing": {"io", "format", "kinds", "data", "loader"},
    # the sandbox (synthetic datasets, a local S3 server for the demo and the tests) sits above both
    "sandbox": {"io", "format", "kinds", "data", "conversion", "loader"},
    # The command line sits above everything (it was the top-level cli.py module).
    "cli": {"io", "format", "kinds", "data", "conversion", "loader", "packing", "sandbox", "preview", "adapters"},
    "preview": {"io", "format", "kinds", "data", "loader"},
    # Source adapters turn public datasets' own schemas into a kind's rows, then hand them to the
    # converter through its public API; the cli wires them in, nothing below imports them.
    "adapters": {"io", "format", "kinds", "data", "conversion"},
    # NeMo Automodel's module tree, served by editstream's loader and packer (and the hook that
    # points NeMo's recipe at them); it may import everything below the command line.
    "nemo": {"io", "format", "kinds", KIND_CODE, "data", "conversion", "loader", "packing", "sandbox", "preview"}
    | {"adapters"},
}
MAX_FILE_LINES = 500
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 59


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _layer_of(parts: list[str], src: Path = SRC) -> str | None:
    """The layer of the module (or name in a module) ``editstream.<parts>``: its sub-package, or
    :data:`KIND_CODE` for a module of a kind's package other than its record."""
    if not parts or not (src / parts[0]).is_dir():
        return None
    in_kind_package = len(parts) >= 3 and parts[0] == "kinds" and (src / "kinds" / parts[1]).is_dir()
    if in_kind_package and parts[2] != "__init__" and (src / "kinds" / parts[1] / f"{parts[2]}.py").is_file():
        return KIND_CODE
    return parts[0]


def _layer(path: Path, src: Path = SRC) -> str | None:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return _layer_of(parts, src) if len(parts) > 1 else None


def _imported_layers(path: Path, src: Path = SRC) -> set[tuple[str, int]]:
    """``(layer, line)`` for every editstream import in ``path``, relative ones resolved."""
    package = list(path.relative_to(src).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[list[str]] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = base + (node.module.split(".") if node.module else [])
                targets.extend(module + [alias.name] for alias in node.names)
            elif node.module and node.module.split(".")[0] == "editstream":
                module = node.module.split(".")[1:]
                targets.extend(module + [alias.name] for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "editstream":
                    targets.append(alias.name.split(".")[1:])
        named = _named_module(node)
        if named and named.split(".")[0] == "editstream":
            targets.append(named.rstrip(".").split(".")[1:])
        for target in targets:
            layer = _layer_of(target, src)
            if layer is not None:
                found.add((layer, node.lineno))
    return found


def layer_violations(path: Path, src: Path = SRC) -> list[tuple[str, int]]:
    """``(layer, line)`` of each import of ``path`` that its layer may not make."""
    layer = _layer(path, src)
    if layer is None:
        return []
    return sorted((t, line) for t, line in _imported_layers(path, src) if t != layer and t not in ALLOWED[layer])


def test_the_layer_table_covers_every_sub_package():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages | {KIND_CODE} == set(ALLOWED)


@pytest.mark.parametrize("path", [p for p in _modules() if _layer(p)], ids=lambda p: str(p.relative_to(SRC)))
def test_layers_import_only_downwards(path):
    bad = layer_violations(path)
    layer = _layer(path)
    assert not bad, f"{path.relative_to(SRC)} ({layer}) imports {bad}; allowed: {sorted(ALLOWED[layer])}"


def test_the_import_check_sees_a_violation(tmp_path):
    """The check above resolves relative and absolute imports, so it catches a converter module
    importing the loader either way (and does not mistake the module's own package for one)."""
    fake = tmp_path / "editstream"
    (fake / "conversion").mkdir(parents=True)
    (fake / "loader").mkdir()
    module = fake / "conversion" / "bad.py"
    module.write_text(
        "from ..loader import units\nimport editstream.loader.drops\nfrom .plan import x\n"
        "import importlib\nimportlib.import_module('editstream.loader.units').load()\n"
    )
    assert sorted(_imported_layers(module, fake)) == [("conversion", 3), ("loader", 1), ("loader", 2), ("loader", 5)]


def test_a_kind_record_importing_the_loader_is_caught_and_its_dataset_module_is_not(tmp_path):
    """A kind's record is loaded by every command, so it stays low; the dataset module beside it
    builds on the loader through editstream.plugin, and nothing below the kind code may import that module."""
    fake = tmp_path / "editstream"
    for package in ("kinds/demo", "loader/datasets", "format"):
        (fake / package).mkdir(parents=True)
    (fake / "kinds" / "demo" / "__init__.py").write_text("from ...format import images\nfrom ...loader import units\n")
    (fake / "kinds" / "demo" / "dataset.py").write_text(
        "from editstream.plugin import RowDataset\nfrom . import COLUMNS\nfrom .sample import build\n"
    )
    loader = fake / "loader" / "bad.py"
    loader.write_text("from ..kinds.demo import dataset\nfrom editstream.kinds.demo import KIND\n")
    assert layer_violations(fake / "kinds" / "demo" / "__init__.py", fake) == [("loader", 2)]
    assert layer_violations(fake / "kinds" / "demo" / "dataset.py", fake) == []
    assert layer_violations(loader, fake) == [(KIND_CODE, 1)]


PLUGIN_MODULE = "editstream.plugin"


def kind_code_modules(src: Path = SRC) -> list[Path]:
    """The modules of the built-in kinds' packages other than their records (``kinds/<name>/__init__.py``)."""
    return sorted(
        path
        for package in (src / "kinds").iterdir()
        if package.is_dir() and (package / "__init__.py").exists()
        for path in package.rglob("*.py")
        if path != package / "__init__.py"
    )


def kind_code_imports(path: Path, src: Path = SRC) -> list[tuple[str, int]]:
    """``(module, line)`` of each editstream module ``path`` imports other than :data:`PLUGIN_MODULE` and its own
    kind's package: ``import_module`` strings and imports for the type checker counted too."""
    own = ".".join(_module_name(path, src).split(".")[:3])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = _base_module(path, node, src)
            modules = [f"{base}.{alias.name}" for alias in node.names] if base == "editstream" else [base]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif _named_module(node):
            modules = [str(_named_module(node)).rstrip(".")]
        for module in modules:
            inside = module == own or module.startswith(own + ".")
            if module.split(".")[0] == "editstream" and module != PLUGIN_MODULE and not inside:
                found.append((module, node.lineno))
    return sorted(found)


@pytest.mark.parametrize("path", kind_code_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_kind_code_imports_editstream_only_through_the_plugin_module(path):
    """A built-in kind is written as a plug-in is: what its code builds on is what editstream.plugin offers."""
    assert kind_code_imports(path) == [], f"{path.relative_to(SRC)} imports editstream besides {PLUGIN_MODULE}"


def test_the_kind_code_check_sees_every_way_round_the_plugin_module(tmp_path):
    fake = tmp_path / "editstream"
    (fake / "kinds" / "demo").mkdir(parents=True)
    (fake / "kinds" / "demo" / "__init__.py").write_text("from ..record import DatasetKind\n")
    dataset = fake / "kinds" / "demo" / "dataset.py"
    dataset.write_text(
        "from editstream.plugin import RowDataset\n"
        "from editstream import plugin\n"
        "from . import COLUMNS\n"
        "from .sample import build\n"
        "from ..record import DatasetKind\n"
        "from ...loader.datasets.interleave import RowDataset\n"
        "import editstream.data.rows\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from editstream.loader.pixels import transform_image\n"
        "import importlib\n"
        "synth = importlib.import_module('editstream.sandbox.synth')\n"
        "from editstream import convert\n"
    )
    assert kind_code_modules(fake) == [dataset]
    assert kind_code_imports(dataset, fake) == [
        ("editstream.convert", 13),
        ("editstream.data.rows", 7),
        ("editstream.kinds.record", 5),
        ("editstream.loader.datasets.interleave", 6),
        ("editstream.loader.pixels", 10),
        ("editstream.sandbox.synth", 12),
    ]


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


PACKING_FUNCTION_LINES = 59
"""The packer's functions stay shorter still (its runs and checkpoint code are read line by line)."""


def test_the_packers_functions_stay_under_sixty_lines():
    long = [
        f"{path.relative_to(SRC)}:{node.name} has {node.end_lineno - node.lineno + 1} lines"
        for path in sorted((SRC / "packing").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > PACKING_FUNCTION_LINES
    ]
    assert long == []


def test_every_public_module_says_what_it_is_for():
    missing = [str(p.relative_to(SRC)) for p in _modules() if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


def test_the_package_is_typed():
    assert (SRC / "py.typed").exists()


# --------------------------------------------------------------------------- the import graph


def _module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["editstream", *parts])


def _is_type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _named_module(node: ast.AST) -> str | None:
    """The module an ``import_module("editstream.x")`` / ``importlib.import_module(...)`` call names,
    when its first argument is a string written out (or starts with one: ``"editstream.nemo" + suffix``)."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name != "import_module":
        return None
    arg = node.args[0]
    while isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        arg = arg.left
    if isinstance(arg, ast.JoinedStr) and arg.values:
        arg = arg.values[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _is_main_block(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``: runs only when the file is a script, a module other than itself."""
    test = getattr(node, "test", None)
    return (
        isinstance(node, ast.If)
        and isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _runtime_imports(tree: ast.AST, typing_too: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import that runs, at module level or inside a function (lazy ones count), an
    ``import_module`` call with a written-out name counted as an ``import`` of that module;
    imports under ``if TYPE_CHECKING:`` are for the type checker only and never run (``typing_too``
    counts them), and a script's ``if __name__ == "__main__":`` block imports into another module."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if (_is_type_checking_block(node) and not typing_too) or _is_main_block(node):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        named = _named_module(node)
        if named:
            found.append(ast.Import(names=[ast.alias(name=named.rstrip("."))], lineno=node.lineno))
        stack.extend(ast.iter_child_nodes(node))
    return found


def _base_module(path: Path, node: ast.ImportFrom, src: Path) -> str:
    if not node.level:
        return node.module or ""
    package = _module_name(path, src).split(".")
    if path.name != "__init__.py":
        package.pop()
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def import_edges(path: Path, src: Path = SRC, typing_too: bool = False) -> list[tuple[str, str, int]]:
    """``(imported module, imported name or "", line)`` for every editstream import of ``path`` (with
    ``typing_too``, those under ``if TYPE_CHECKING:`` as well).

    ``from pkg import mod`` is an import of the module ``pkg.mod`` when that module exists;
    ``from mod import name`` of ``mod``.
    """
    known = {_module_name(p, src) for p in src.rglob("*.py")}
    edges = []
    for node in _runtime_imports(ast.parse(path.read_text()), typing_too):
        if isinstance(node, ast.Import):
            edges.extend((alias.name, "", node.lineno) for alias in node.names if alias.name in known)
            continue
        base = _base_module(path, node, src)
        for alias in node.names:
            target = f"{base}.{alias.name}"
            if target in known:
                edges.append((target, "", node.lineno))
            elif base in known:
                edges.append((base, alias.name, node.lineno))
    return edges


def import_cycles(src: Path = SRC) -> list[list[str]]:
    """Every group of modules that import each other, directly or round a loop (Tarjan's SCCs)."""
    graph = {_module_name(p, src): sorted({t for t, _, _ in import_edges(p, src)}) for p in sorted(src.rglob("*.py"))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for target in graph.get(name, []):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in on_stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == name:
                    break
            if len(group) > 1 or name in graph.get(name, []):
                cycles.append(sorted(group))

    for name in graph:
        if name not in index:
            visit(name)
    return cycles


def test_no_import_cycles_lazy_imports_included():
    assert import_cycles() == []


def test_no_private_name_is_imported_from_another_module():
    bad = [
        f"{_module_name(path)}:{line} imports {name} from {target}"
        for path in _modules()
        for target, name, line in import_edges(path)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert bad == []


def test_the_cycle_check_sees_a_lazy_cycle_and_a_private_import(tmp_path):
    fake = tmp_path / "editstream"
    (fake / "conversion").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "conversion" / "__init__.py").write_text("")
    (fake / "conversion" / "a.py").write_text("from . import b\n")
    (fake / "conversion" / "b.py").write_text("def f():\n    from .a import _helper\n")
    (fake / "conversion" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import thing\nfrom .b import f\n"
    )
    (fake / "conversion" / "d.py").write_text(
        "import importlib\ndef load(name):\n    return importlib.import_module('editstream.conversion.e' + name)\n"
    )
    (fake / "conversion" / "e.py").write_text(
        "from importlib import import_module\nx = import_module(f'editstream.conversion.d')\n"
    )
    (fake / "conversion" / "f.py").write_text("if __name__ == '__main__':\n    from editstream.conversion import f\n")
    assert import_cycles(fake) == [
        ["editstream.conversion.a", "editstream.conversion.b"],
        ["editstream.conversion.d", "editstream.conversion.e"],
    ]
    assert ("editstream.conversion.a", "_helper", 2) in import_edges(fake / "conversion" / "b.py", fake)
    assert [t for t, _, _ in import_edges(fake / "conversion" / "c.py", fake)] == ["editstream.conversion.b"]


PACKING_BELOW = {
    "editstream.packing.checkpoint": (
        "editstream.packing.draws",
        "editstream.packing.runs",
        "editstream.packing.dataset",
    ),
    "editstream.packing.runs": ("editstream.packing.dataset",),
    "editstream.packing.draws": ("editstream.packing.dataset",),
}
"""Inside the packer, what a part may not import, even for the type checker: the checkpoint code sits below the
strategies (runs) and their draws, and those see the packer only through ``packing.roles``."""


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def packing_upward_imports(src: Path = SRC) -> list[str]:
    """``module:line imports target`` for every import (lazy and ``TYPE_CHECKING`` ones included) that
    :data:`PACKING_BELOW` forbids."""
    return sorted(
        {
            f"{_module_name(path, src)}:{line} imports {target}"
            for path in src.rglob("*.py")
            for part, banned in PACKING_BELOW.items()
            if _within(_module_name(path, src), part)
            for target, _, line in import_edges(path, src, typing_too=True)
            if any(_within(target, above) for above in banned)
        }
    )


def test_the_checkpoint_code_sits_below_the_strategies_which_never_see_the_dataset():
    assert packing_upward_imports() == []


def test_the_packing_order_check_sees_typing_and_lazy_imports(tmp_path):
    fake = tmp_path / "editstream"
    for package in ("packing/checkpoint", "packing/runs"):
        (fake / package).mkdir(parents=True)
        (fake / package / "__init__.py").write_text("")
    for module in ("__init__", "packing/__init__", "packing/dataset", "packing/draws", "packing/roles"):
        (fake / f"{module}.py").write_text("")
    (fake / "packing" / "checkpoint" / "refs.py").write_text(
        "from typing import TYPE_CHECKING\nfrom ..roles import Host\nif TYPE_CHECKING:\n    from ..draws import B\n"
        "def f():\n    import editstream.packing.runs\n"
    )
    (fake / "packing" / "runs" / "loop.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from .. import dataset\nfrom ..checkpoint import refs\n"
    )
    (fake / "packing" / "draws.py").write_text("from .roles import Host\nfrom .dataset import PackedDataset\n")
    assert packing_upward_imports(fake) == [
        "editstream.packing.checkpoint.refs:4 imports editstream.packing.draws",
        "editstream.packing.checkpoint.refs:6 imports editstream.packing.runs",
        "editstream.packing.draws:2 imports editstream.packing.dataset",
        "editstream.packing.runs.loop:3 imports editstream.packing.dataset",
    ]


# --------------------------------------------------------------------------- one place per kind

KIND_NAMES = re.compile(r"(?<!kinds\.)\b(unified_edit|t2i_pretrain|t2i|vlm_sft)\b")
"""A built-in kind's name, except as a module path into its package (``kinds.unified_edit.dataset``):
a public class is imported from where it lives, which is not a branch on the kind's name."""
BUILTIN_KINDS = ("unified_edit", "t2i_pretrain", "vlm_sft")


def _may_spell_kind_names(relative: str) -> bool:
    """The only files of src/ that may spell a built-in kind's name: its own package and the registry
    that lists the built-ins. Everything else loops over the registry."""
    return relative == "kinds/registry.py" or relative.startswith(tuple(f"kinds/{k}/" for k in BUILTIN_KINDS))


def test_kind_names_live_in_their_kind_packages_only():
    spelled = {
        str(p.relative_to(SRC)): sorted(set(KIND_NAMES.findall(p.read_text())))
        for p in _modules()
        if KIND_NAMES.search(p.read_text())
    }
    assert {f: names for f, names in spelled.items() if not _may_spell_kind_names(f)} == {}
    assert KIND_NAMES.findall("from ..kinds.unified_edit.dataset import X\nif kind == 'unified_edit': pass") == [
        "unified_edit"
    ]


# --------------------------------------------------------------------------- shapes and units as types

SHAPE_MODULES = {"kinds/shapes.py", "data/shapes.py", "conversion/shapes.py"}
"""The one dispatch on a source shape per layer; elsewhere a shape is asked, never compared."""
UNIT_MODULES = {"data/units.py"}
"""Where the unit types are defined (and plain values typed, :func:`~editstream.data.units.as_unit`)."""


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def shape_tests(source: str) -> list[int]:
    """Lines naming a ``SourceShape`` member other than where a kind declares it (``source=`` or the
    record's default): comparing shapes is the shape modules' job."""
    tree = ast.parse(source)
    parents = _parents(tree)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "SourceShape":
            parent = parents.get(node)
            declared = isinstance(parent, ast.keyword) and parent.arg == "source"
            default = isinstance(parent, ast.AnnAssign) and parent.value is node
            if not (declared or default):
                lines.append(node.lineno)
    return lines


def _names_a_unit(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "unit" or name.endswith("_unit")


def unit_shape_tests(source: str) -> list[int]:
    """Lines that take a unit apart by shape: ``isinstance(unit, ...)`` or ``unit[0]``-style indexing."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _names_a_unit(node.value) and isinstance(node.slice, ast.Constant):
            lines.append(node.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and node.args
            and _names_a_unit(node.args[0])
        ):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_shape_or_unit_shape_is_tested_outside_their_modules(path):
    relative = str(path.relative_to(SRC))
    source = path.read_text()
    assert relative in SHAPE_MODULES or shape_tests(source) == [], f"{relative} compares source shapes"
    assert relative in UNIT_MODULES or unit_shape_tests(source) == [], f"{relative} takes units apart by shape"


def test_the_shape_and_unit_checks_see_a_planted_violation():
    planted = (
        "KIND = DatasetKind(name='x', source=SourceShape.JSONL_MEDIA)\n"
        "if kind.source is SourceShape.JSONL_MEDIA:\n"
        "    pass\n"
        "path = unit if isinstance(unit, str) else unit[0]\n"
        "rg = self.current_unit[1]\n"
    )
    assert shape_tests(planted) == [2]
    assert sorted(set(unit_shape_tests(planted))) == [4, 5]
    assert unit_shape_tests("typed = as_unit(unit)\nfor rg, first in typed.row_group_reads(after, n): pass\n") == []


# --------------------------------------------------------------------------- modes as types, not flags

MODE_FLAGS = {"elastic", "interpolate_pos", "use_flex"}
"""The packing spec's switches: chosen once (a run, a position rule), never tested where they are used."""
MODELESS_MODULES = {"packing/dataset.py"}
"""Modules that forward to what the spec chose and never branch on a switch themselves."""


def flag_branches(source: str, flags: set[str] = MODE_FLAGS) -> list[int]:
    """Lines of an ``if`` / ``while`` / conditional expression / comprehension filter whose test
    names one of ``flags`` (as a variable or an attribute)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        tests = [node.test] if isinstance(node, (ast.If, ast.IfExp, ast.While)) else []
        tests += node.ifs if isinstance(node, ast.comprehension) else []
        for test in tests:
            names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute)}
            if names & flags:
                lines.append(test.lineno)
    return lines


@pytest.mark.parametrize("relative", sorted(MODELESS_MODULES))
def test_the_packer_branches_on_no_mode_flag(relative):
    assert flag_branches((SRC / relative).read_text()) == [], f"{relative} branches on a mode flag"


def test_the_mode_flag_check_sees_a_planted_violation():
    planted = (
        "def __iter__(self):\n"
        "    if self.elastic:\n"
        "        return self._run_elastic()\n"
        "    rule = a if spec.interpolate_pos else b\n"
        "    kept = [d for d in ds if not use_flex]\n"
        "    return self.run.batches()\n"
    )
    assert flag_branches(planted) == [2, 4, 5]
    assert flag_branches("self.elastic = spec.elastic\nreturn run.batches()\n") == []


# --------------------------------------------------------------------------- backends as objects

BACKEND_NAMES = {"parquet", "source", "webdataset", "auto"}
"""The values a ``backend`` (or ``--to`` target) is spelt with: only data/backends.py compares them."""


def backend_name_tests(source: str) -> list[int]:
    """Lines comparing something named like a backend or target with a backend's name spelt out."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        spelt = [
            c
            for side in sides
            for c in ([side] if isinstance(side, ast.Constant) else getattr(side, "elts", []))
            if isinstance(c, ast.Constant) and c.value in BACKEND_NAMES
        ]
        words = {n.id for side in sides for n in ast.walk(side) if isinstance(n, ast.Name)}
        words |= {n.attr for side in sides for n in ast.walk(side) if isinstance(n, ast.Attribute)}
        words |= {
            n.slice.value
            for side in sides
            for n in ast.walk(side)
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)
        }
        words |= {
            a.value
            for side in sides
            for n in ast.walk(side)
            if isinstance(n, ast.Call)
            for a in n.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        }
        named = any("backend" in w or "target" in w or w == "to" for w in words)

        if spelt and named:
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_backends_are_asked_not_compared_by_name(path):
    relative = str(path.relative_to(SRC))
    assert relative == "data/backends.py" or backend_name_tests(path.read_text()) == []


def test_the_backend_check_sees_a_planted_compare():
    planted = (
        "if self.backend == 'webdataset':\n    pass\n"
        "ok = kw.pop('backend') not in ('auto', 'parquet')\n"
        "if opts['target'] == 'parquet': pass\n"
        "if m.form == 'parquet': pass\n"
        "if backend.reads_shards: pass\n"
        "if engine in ('auto', 'local'): pass\n"
        "if to == 'parquet': pass\n"
    )
    assert backend_name_tests(planted) == [1, 3, 4, 8]

"""Registering and detecting kinds: dotted paths checked at registration, plug-ins that fail loudly,
detection that picks the most specific kind and reports overlaps."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest
from PIL import Image

from editstream import convert
from editstream.kinds import (
    AmbiguousKindError,
    DatasetKind,
    KindPathError,
    KindPluginError,
    SourceShape,
    all_kinds,
    detect_kind,
    get_kind,
    register,
    unregister,
)
from editstream.kinds import registry as kind_registry
from helpers import SRC_DIR


@pytest.mark.parametrize(
    ("field", "path", "says"),
    [
        ("dataset", "nope.mod:X", "No module named 'nope'"),
        ("preview", "editstream.kinds.unified_edit.preview:no_such_function", "no_such_function"),
        ("synth", "editstream.kinds.unified_edit.synth", "not a 'package.module:attribute' path"),
    ],
)
def test_register_refuses_a_dotted_path_that_names_nothing(field, path, says):
    kind = DatasetKind(name="toy_paths", summary="toy", **{field: path})
    with pytest.raises(KindPathError) as caught:
        register(kind)
    assert f"dataset kind 'toy_paths': {field}={path!r} names nothing" in str(caught.value)
    assert says in str(caught.value)
    assert "toy_paths" not in [k.name for k in all_kinds()]


def test_loading_the_builtin_kinds_finds_their_modules_without_importing_them():
    """Every command loads the registry: the built-ins' dataset, preview and synth modules (and torch)
    are found there, not imported."""
    code = (
        "import sys\nfrom editstream.kinds import all_kinds\nall_kinds()\n"
        "print([m for m in sys.modules if m == 'torch' or m.rpartition('.')[2] in ('dataset', 'preview', 'synth')])"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == "[]"


def test_a_path_whose_attribute_is_missing_fails_on_first_use_naming_it():
    lazy = DatasetKind(name="toy_lazy", summary="toy", dataset="editstream.kinds.unified_edit.dataset:Anything")
    lazy.check_paths(load=False)  # the module is found; the attribute is looked up on first use
    with pytest.raises(KindPathError, match=r"dataset='editstream.kinds.unified_edit.dataset:Anything' names nothing"):
        lazy.dataset_class()
    missing = DatasetKind(name="toy_missing", summary="toy", synth="editstream.kinds.no_such_module:write")
    with pytest.raises(KindPathError, match=r"synth='editstream.kinds.no_such_module:write' names nothing: No module"):
        missing.check_paths(load=False)


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """A directory on sys.path where a test installs a fake plug-in package (dist-info + module), and a
    fresh kind registry that will discover it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(kind_registry, "_KINDS", None)

    def install(module_source: str, value: str = "toy_plugin_mod:KIND") -> None:
        info = tmp_path / "toy_plugin-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[editstream.kinds]\ntoy = {value}\n")
        (tmp_path / "toy_plugin_mod.py").write_text(textwrap.dedent(module_source))

    yield install
    sys.modules.pop("toy_plugin_mod", None)


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("import no_such_dependency_of_the_plugin\n", "failed to import (ModuleNotFoundError"),
        ("KIND = 42\n", "names a int, not a DatasetKind"),
        (
            "from editstream.kinds import DatasetKind\n"
            "KIND = DatasetKind(name='toy', summary='toy', dataset='toy_plugin_missing.data:ToyDataset')\n",
            "dataset='toy_plugin_missing.data:ToyDataset' names nothing: No module named 'toy_plugin_missing'",
        ),
        (
            "from editstream.kinds import DatasetKind\n"
            "KIND = DatasetKind(name='toy', summary='toy', aliases=('t2i',))\n",
            "the names ['t2i'] are already taken",
        ),
    ],
)
def test_a_plugin_that_cannot_load_is_an_error_naming_its_package_and_entry_point(plugin_site, source, says):
    plugin_site(source)
    for _ in range(2):  # nothing is half loaded: every call fails the same way
        with pytest.raises(KindPluginError) as caught:
            all_kinds()
        message = str(caught.value)
        assert "the plug-in package 'toy-plugin'" in message
        assert "'editstream.kinds' entry point toy = 'toy_plugin_mod:KIND'" in message
        assert says in message


def test_a_working_plugin_is_registered_after_the_builtins(plugin_site):
    plugin_site("from editstream.kinds import DatasetKind\nKIND = DatasetKind(name='toy', summary='toy')\n")
    assert [k.name for k in all_kinds()][-1] == "toy" and get_kind("toy").summary == "toy"


def test_detection_keeps_the_builtin_kinds_of_builtin_data(caplog):
    with caplog.at_level(logging.WARNING, logger="editstream"):
        assert detect_kind(["row_id", "image_list", "instruction_list"]).name == "unified_edit"
        assert detect_kind(["image", "captions", "row_id"]).name == "t2i_pretrain"
        assert detect_kind(["line", "media"]) is None
    assert caplog.records == []


def test_detection_picks_the_most_specific_kind_and_says_a_less_specific_one_fit_too(caplog):
    register(
        DatasetKind(name="toy_masks", summary="toy", columns={"image": "binary", "captions": "string", "mask": ""})
    )
    try:
        with caplog.at_level(logging.WARNING, logger="editstream"):
            assert detect_kind(["image", "captions", "mask", "row_id"]).name == "toy_masks"
            assert detect_kind(["mask", "image", "captions", "row_id"]).name == "toy_masks"  # said once
            assert detect_kind(["image", "captions"]).name == "t2i_pretrain"  # the mask is what tells them apart
        assert len(caplog.records) == 1
        message = caplog.records[0].getMessage()
        assert "fit toy_masks ['captions', 'image', 'mask']" in message
        assert "also t2i_pretrain ['captions', 'image'] with fewer columns" in message
    finally:
        unregister("toy_masks")


def test_two_kinds_that_fit_equally_are_an_error_naming_both():
    register(DatasetKind(name="toy_twin", summary="toy", columns={"captions": "string", "image": "binary"}))
    try:
        with pytest.raises(AmbiguousKindError) as caught:
            detect_kind(["image", "captions"])
        message = str(caught.value)
        assert "fit the kinds t2i_pretrain ['captions', 'image'], toy_twin ['captions', 'image'] equally" in message
        assert "name the kind" in message
    finally:
        unregister("toy_twin")


def test_a_jsonl_kind_named_by_an_alias_is_converted_under_its_own_name(tmp_path):
    """The manifest records the kind's name whichever of its names the conversion was given, as for a parquet
    kind, so every reader of the root finds the kind (and its record of the lines) under it."""
    media = tmp_path / "media"
    media.mkdir()
    Image.new("RGB", (16, 12), (200, 40, 40)).save(media / "a.png")
    (tmp_path / "lines.jsonl").write_text('{"image": "a.png"}\n{"image": "a.png"}\n')
    register(DatasetKind(name="toy_lines", aliases=("toyl",), summary="toy", source=SourceShape.JSONL_MEDIA))
    try:
        dst = tmp_path / "wds"
        summary = convert(str(tmp_path / "lines.jsonl"), str(dst), schema="toyl", media_dir=str(media), workers=1)
        manifest = json.loads((dst / "manifest.json").read_text())
        assert summary["schema"] == manifest["schema"] == "toy_lines"
        assert manifest["extra"]["toy_lines"]["num_lines"] == 2
    finally:
        unregister("toy_lines")

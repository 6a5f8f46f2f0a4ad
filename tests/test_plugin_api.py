"""The public plug-in API (``editstream.plugin``), the sample builder's names, and the one reading of
what a dataset class's constructor takes and needs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import editstream.plugin
from editstream import (
    ByteTokenizer,
    ImageTransform,
    InterleavedBaseIterableDataset,
    SftJSONLIterableDataset,
    T2IIterableDataset,
    UnifiedEditIterableDataset,
    write_synthetic_dataset,
)
from editstream.loader.datasets.parameters import dataset_parameters
from helpers import SRC_DIR, VAE, VIT

PLUGIN_NAMES = {
    "Certainty",
    "DatasetKind",
    "IMAGE_FORMATS",
    "JsonlLineDataset",
    "JsonlSynth",
    "LINE_COLUMN",
    "Layout",
    "LineDataset",
    "MEDIA_COLUMN",
    "NORMALIZATION_KEY",
    "ParquetStandardIterableDataset",
    "ParquetSynth",
    "Part",
    "Record",
    "RowDataset",
    "RowProblem",
    "SOURCES",
    "SourceShape",
    "SynthOptions",
    "SynthRow",
    "TAGS",
    "caption",
    "garbage",
    "image_header_problem",
    "instruction",
    "line_images",
    "line_problems",
    "make_image",
    "pick",
    "plan_item",
    "register",
    "share_one_storage",
    "transform_image",
    "write_jsonl_kind",
    "write_parquet_kind",
    "write_synthetic_vlm_dataset",
}


def test_the_plugin_module_exports_what_a_kind_needs_and_nothing_private():
    assert set(editstream.plugin.__all__) == PLUGIN_NAMES == set(dir(editstream.plugin))
    for name in PLUGIN_NAMES:
        assert getattr(editstream.plugin, name) is not None
    assert issubclass(editstream.plugin.RowDataset, InterleavedBaseIterableDataset)
    assert issubclass(UnifiedEditIterableDataset, editstream.plugin.RowDataset)
    assert issubclass(editstream.plugin.LineDataset, InterleavedBaseIterableDataset)
    assert issubclass(editstream.plugin.LineDataset, editstream.plugin.JsonlLineDataset)
    assert issubclass(SftJSONLIterableDataset, editstream.plugin.JsonlLineDataset)
    assert issubclass(T2IIterableDataset, editstream.plugin.ParquetStandardIterableDataset)
    with pytest.raises(AttributeError, match="no attribute '_add_image'"):
        editstream.plugin._add_image  # noqa: B018


def test_a_kind_record_built_on_the_plugin_module_stays_cheap():
    code = (
        "import sys\n"
        "from editstream.plugin import DatasetKind, Layout, Part, Record, RowProblem, image_header_problem\n"
        "print(sorted(m for m in ('torch', 'pyarrow', 'editstream.loader', 'editstream.sandbox') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == "[]"


def test_the_reference_builder_names_are_the_public_ones():
    base = InterleavedBaseIterableDataset
    assert base._init_data is base.new_sample and base._add_text is base.add_text
    assert base._add_image is base.add_image and base._add_video is base.add_video


def test_a_vit_item_without_a_vit_transform_is_an_error_naming_the_dataset():
    class Builder(InterleavedBaseIterableDataset):
        def __init__(self) -> None:
            super().__init__("no_vit")
            self.tokenizer, self.transform, self.vit_transform = ByteTokenizer(), ImageTransform(**VAE), None

    builder = Builder()
    with pytest.raises(ValueError, match="dataset 'no_vit': a ViT image item needs a vit_transform"):
        builder.add_image(builder.new_sample(), object(), need_loss=False, need_vae=False, need_vit=True)


def test_what_each_dataset_class_takes_and_needs():
    edit, t2i, sft = (
        dataset_parameters(c) for c in (UnifiedEditIterableDataset, T2IIterableDataset, SftJSONLIterableDataset)
    )
    assert edit["vit_transform"] and "frame_sampler" not in edit and "jsonl_path_list" not in edit
    assert t2i["vit_transform"] is False  # taken (read through its **kwargs), not needed
    assert t2i["image_dtype"] is False and "storage_options" in t2i and t2i["data_dir_list"]
    assert sft["frame_sampler"] and "jsonl_path_list" in sft and "vit_transform" not in sft
    lines = dataset_parameters(editstream.plugin.LineDataset)
    assert lines["jsonl_path_list"] and lines["frame_sampler"] is False and lines["vit_transform"] is False
    assert set(sft) <= set(lines)  # the base's arguments, frame_sampler a keyword: a kind without video needs none

    def factory(dataset_name: str, tokenizer: object, *, image_dtype: str = "float32") -> None: ...

    assert dataset_parameters(factory) == {"dataset_name": True, "tokenizer": True, "image_dtype": False}
    assert dataset_parameters(getattr) == {}  # a builtin without a signature takes nothing we know of


def test_t2i_keeps_the_reference_positional_order_without_a_constructor_of_its_own(tmp_path):
    write_synthetic_dataset(str(tmp_path), schema="t2i_pretrain", num_files=1, rows_per_group=2, progress=False)
    ds = T2IIterableDataset("t2i", ImageTransform(**VAE), ByteTokenizer(), [str(tmp_path)], [1], 0, 1, 0)
    assert (ds.local_rank, ds.world_size, ds.num_workers, ds.vit_transform) == (0, 1, 0, None)
    vit = ImageTransform(**VIT)
    ds = T2IIterableDataset("t2i", ImageTransform(**VAE), ByteTokenizer(), [str(tmp_path)], [1], vit_transform=vit)
    assert ds.vit_transform is vit and ds.parquet_info is None

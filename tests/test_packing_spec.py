"""One packing spec: every knob has one default and one rule, whichever NeMo surface it comes in by.

``BagelDatasetConfig``'s fields, ``PackedDataset``'s and ``make_bagel_multimodal_dataset``'s keyword
parameters and ``BagelDataloaderConfig`` are compared field by field with ``PackingSpec`` (and,
when NeMo Automodel imports here, with NeMo's own signatures).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect

import pytest

from editstream import BagelDataloaderConfig, BagelDatasetConfig, PackedDataset, make_bagel_multimodal_dataset
from editstream.nemo import BagelDatasetConfig as TwinConfig
from editstream.nemo import PackedDataset as TwinPacker
from editstream.packing.spec import DEFAULTS, EXTENSIONS, FIELDS, PACKER_KEYWORDS, SEQUENCE_KNOBS, PackingSpec
from helpers import REGISTRY, SPECIAL, make_packer, toy_info

NEMO = "nemo_automodel.components.datasets.multimodal"


def _nemo_importable() -> bool:
    try:
        return importlib.util.find_spec(NEMO) is not None
    except ImportError:
        return False


needs_nemo = pytest.mark.skipif(not _nemo_importable(), reason="NeMo Automodel is not importable here")
FACTORY_CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(BagelDatasetConfig) if not f.name.endswith("_path"))
"""The config fields ``make_bagel_multimodal_dataset`` takes as keyword arguments (all but the files)."""


def parameters(function) -> dict[str, inspect.Parameter]:
    return {name: p for name, p in inspect.signature(function).parameters.items() if name != "self"}


def test_the_field_groups_cover_the_spec_once():
    assert sorted((*PACKER_KEYWORDS, *SEQUENCE_KNOBS, *EXTENSIONS)) == sorted(FIELDS)
    assert len(set(FIELDS)) == len(FIELDS) == len(PACKER_KEYWORDS) + len(SEQUENCE_KNOBS) + len(EXTENSIONS)


def test_the_spec_is_frozen_and_keyword_only():
    with pytest.raises(TypeError):
        PackingSpec(32768)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.max_num_tokens = 1  # type: ignore[misc]


def test_the_dataset_config_takes_every_default_from_the_spec():
    defaults = {f.name: f.default for f in dataclasses.fields(BagelDatasetConfig)}
    assert {name: defaults[name] for name in FIELDS} == dataclasses.asdict(DEFAULTS)
    config = BagelDatasetConfig(grouped_datasets={"g": {}})
    assert config.spec() == DEFAULTS


def test_the_packer_keywords_take_their_defaults_from_the_spec():
    params = parameters(PackedDataset.__init__)
    assert [name for name in params if name in FIELDS] == [*PACKER_KEYWORDS, *EXTENSIONS]
    for name in (*PACKER_KEYWORDS, *EXTENSIONS):
        assert params[name].default == getattr(DEFAULTS, name), name
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in EXTENSIONS)


def test_the_factory_takes_every_config_field_with_the_configs_default():
    params = parameters(make_bagel_multimodal_dataset)
    defaults = {f.name: f.default for f in dataclasses.fields(BagelDatasetConfig)}
    assert set(FACTORY_CONFIG_FIELDS) <= set(params)
    for name in FACTORY_CONFIG_FIELDS:
        if defaults[name] is not dataclasses.MISSING and name != "grouped_datasets":
            assert params[name].default == defaults[name], name
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())


def test_the_dataloader_config_carries_no_knob_of_its_own():
    names = [f.name for f in dataclasses.fields(BagelDataloaderConfig)]
    assert names == ["dataset_config", "num_workers", "pin_memory", "prefetch_factor"]
    assert not set(names) & set(FIELDS)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("text_cond_dropout_prob", -0.1, r"text_cond_dropout_prob must be a probability in \[0, 1\], got -0.1"),
        ("max_num_tokens", True, "max_num_tokens must be a positive integer, got True"),
        ("max_latent_size", 0, "max_latent_size must be a positive integer, got 0"),
        ("prefer_buffer_before", -1, "prefer_buffer_before must be a non-negative integer, got -1"),
        ("image_dtype", "float16", "image_dtype must be 'float32' or 'uint8', got 'float16'"),
        ("elastic", 1, "elastic must be true or false, got 1"),
        ("elastic_streams", 0, "elastic_streams must be a positive integer, got 0"),
    ],
)
def test_one_rule_per_field_names_the_field_and_the_value(field, value, message):
    with pytest.raises(ValueError, match=message):
        PackingSpec(**{field: value})
    with pytest.raises(ValueError, match=message):
        BagelDatasetConfig(grouped_datasets={"g": {}}, **{field: value})


def test_the_packer_arguments_carry_extensions_only_when_set():
    assert set(DEFAULTS.packer_arguments()) == set(PACKER_KEYWORDS)
    uint8 = dataclasses.replace(DEFAULTS, image_dtype="uint8", elastic=True, elastic_streams=3)
    assert uint8.packer_arguments() == {
        **DEFAULTS.packer_arguments(),
        "image_dtype": "uint8",
        "elastic": True,
        "elastic_streams": 3,
    }


def test_a_packer_builds_its_spec_from_its_keywords_and_its_config():
    packer = make_packer(expected_num_tokens=64, max_num_tokens=96, max_buffer_size=3)
    assert packer.spec.expected_num_tokens == packer.expected_num_tokens == 64
    assert packer.spec.max_buffer_size == 3 and packer.spec.vit_patch_size == 2  # the config's knob
    assert packer.elastic is False and packer.spec.elastic is False


def test_the_spliced_signatures_bind_calls_as_they_read():
    """The knobs spliced in from the spec are real parameters: passed by position in NeMo's order, they reach
    the spec; a name no surface has, or a twin's required argument left out, is Python's TypeError."""
    groups = {"toy": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": [4]}}
    config = BagelDatasetConfig(groups, None, None, None, 64, 64, 96, 32, 3, False, False, 7)
    assert (config.expected_num_tokens, config.max_buffer_size, config.data_seed) == (64, 3, 7)
    positional = (config, None, SPECIAL, 0, 1, 0, 64, 64, 96, 32, 3)
    packer = PackedDataset(*positional, dataset_info=toy_info("toy"), registry=REGISTRY, elastic_streams=2)
    assert (packer.spec.max_num_tokens, packer.spec.max_buffer_size, packer.spec.elastic_streams) == (96, 3, 2)
    assert packer.max_buffer_size == 3 and packer.prefer_buffer_before == 32
    twin = TwinPacker(*positional, dataset_info=toy_info("toy"), registry=REGISTRY)
    assert twin.spec == dataclasses.replace(packer.spec, elastic_streams=None)
    with pytest.raises(TypeError, match="local_rank"):
        TwinPacker(config, None, SPECIAL, dataset_info=toy_info("toy"), registry=REGISTRY)
    with pytest.raises(TypeError, match="max_num_token"):
        PackedDataset(config, None, SPECIAL, 0, 1, 0, max_num_token=96)
    with pytest.raises(TypeError):
        make_bagel_multimodal_dataset(None, SPECIAL, groups)
    assert [f.name for f in dataclasses.fields(TwinConfig) if f.kw_only] == list(EXTENSIONS)
    with pytest.raises(TypeError):
        TwinConfig(groups, None, None, None, 64, 64, 96, 32, 3, False, False, 7, *[0.1] * 3, 2, 4, 2, 4, "uint8")


# --------------------------------------------------------------------------- against NeMo's own surfaces


@needs_nemo
def test_the_surfaces_match_nemos_field_by_field():
    import importlib

    datasets = importlib.import_module(f"{NEMO}.datasets")
    packing = importlib.import_module(f"{NEMO}.packing")
    loader = importlib.import_module(f"{NEMO}.loader")
    theirs = [(f.name, f.default) for f in dataclasses.fields(datasets.BagelDatasetConfig)]
    ours = [(f.name, f.default) for f in dataclasses.fields(BagelDatasetConfig)]
    assert ours[: len(theirs)] == theirs
    nemo_packer, our_packer = parameters(packing.PackedDataset.__init__), parameters(PackedDataset.__init__)
    assert list(our_packer)[: len(nemo_packer)] == list(nemo_packer)
    for name, param in nemo_packer.items():
        if param.default is not inspect.Parameter.empty:
            assert our_packer[name].default == param.default, name
    nemo_factory, our_factory = (
        parameters(datasets.make_bagel_multimodal_dataset),
        parameters(make_bagel_multimodal_dataset),
    )
    assert list(our_factory)[: len(nemo_factory)] == list(nemo_factory)
    assert all(our_factory[name].default == p.default for name, p in nemo_factory.items())
    nemo_loader = [(f.name, f.default) for f in dataclasses.fields(loader.BagelDataloaderConfig)]
    assert [(f.name, f.default) for f in dataclasses.fields(BagelDataloaderConfig)] == nemo_loader

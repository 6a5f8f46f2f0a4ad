"""editstream.nemo against the real NeMo Automodel: its config loader, its RecipeConfig, its
recipe classes under torchrun, and its own test file with the import prefix swapped.

The tests that need NeMo skip, saying why, when it is not importable (``make install`` adds
it: ``pip install --no-deps nemo-automodel==0.7.0`` plus what its recipe module imports).
The data is the demo's three synthetic groups; the YAML is tests/fixtures/nemo_bagel_pretrain.yaml.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import editstream.nemo
from editstream import BagelDataloaderConfig, BagelDatasetConfig, ByteTokenizer
from editstream.nemo.packing import PackedDataset as NemoTwinPackedDataset
from helpers import ROOT, assert_batches_equal, load_example

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PRETRAIN_YAML = FIXTURES / "nemo_bagel_pretrain.yaml"
RANK_SCRIPT = FIXTURES / "nemo_recipe_rank.py"
GROUPS = ("t2i_pretrain", "unified_edit", "vlm_sft")
NEMO_PREFIX = "nemo_automodel.components.datasets.multimodal"
NEMO_TEST = "tests/unit_tests/datasets/multimodal/test_bagel_loader.py"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


HAVE_NEMO = _importable("nemo_automodel.recipes._typed_config")
needs_nemo = pytest.mark.skipif(
    not HAVE_NEMO,
    reason="NeMo Automodel is not importable here (make install adds it: pip install --no-deps nemo-automodel==0.7.0)",
)
demo = load_example(ROOT / "examples" / "demo.py")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's three groups (source data and converted shards)."""
    out = str(tmp_path_factory.mktemp("nemo") / "demo-out")
    demo.prepare_data(out)
    return out


@pytest.fixture
def installed() -> Any:
    """``editstream.nemo.install()`` for one test, undone after it."""
    editstream.nemo.install()
    yield
    editstream.nemo.uninstall()


def write_yaml(out: str, directory: Path, flips: tuple[str, ...] = (), shard_only: bool = False) -> Path:
    """The fixture YAML over ``out`` with the ``flips`` groups on shards; ``shard_only`` also
    replaces every dataset_info entry by its converted root alone (``data_dir`` + ``backend``)."""
    config = yaml.safe_load(PRETRAIN_YAML.read_text().replace("DEMO_OUT", out))
    for group in flips:
        config["dataset"]["grouped_datasets"][group]["backend"] = "webdataset"
    if shard_only:
        for group, entries in config["dataset"]["dataset_info"].items():
            config["dataset"]["grouped_datasets"][group].pop("backend")
            for name, entry in entries.items():
                entries[name] = {"data_dir": entry["webdataset"]["data_dir"], "backend": "webdataset"}
    path = directory / f"recipe-{'-'.join(flips) or 'source'}{'-shards' if shard_only else ''}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def take_batches(loader_config: Any, n: int = 4, rank: int = 0, world_size: int = 1, seed: int = 4396) -> list[Any]:
    """The first ``n`` batches (as dicts) of a dataloader config's ``build()``, as NeMo's recipe calls it."""
    tokenizer = ByteTokenizer()
    built = loader_config.build(
        tokenizer=tokenizer,
        special_tokens=tokenizer.special_token_ids(),
        rank=rank,
        world_size=world_size,
        batch_size=1,
        global_seed=seed,
    )
    batches = []
    for batch in built.dataloader:
        batches.append(batch.to_dict())
        if len(batches) == n:
            return batches
    raise AssertionError("the loader stopped")


def direct_batches(path: Path, n: int = 4, rank: int = 0, world_size: int = 1) -> list[Any]:
    """The same YAML through editstream's own ``BagelDataloaderConfig`` (no NeMo involved)."""
    config = yaml.safe_load(path.read_text())
    loader = BagelDataloaderConfig(BagelDatasetConfig(**config["dataset"]), **config["dataloader"])
    return take_batches(loader, n, rank, world_size, config["seed"])


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)


# --------------------------------------------------------------------------- without NeMo


def test_importing_editstream_and_its_nemo_tree_imports_no_nemo():
    proc = run_python(
        "import sys, editstream, editstream.nemo\n"
        "from editstream.nemo import datasets, loader, packing, interleave, collate_fns, utils, video\n"
        "assert not [m for m in sys.modules if m.startswith('nemo_automodel')], 'NeMo was imported'\n"
        "print(editstream.nemo.installed())\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_install_without_nemo_raises_an_import_error_naming_the_package():
    proc = run_python(
        "import sys\nsys.modules['nemo_automodel'] = None\nimport editstream.nemo\n"
        "try:\n    editstream.nemo.install()\nexcept ImportError as exc:\n    print(exc)\n"
        "else:\n    raise SystemExit('install() did not raise')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "nemo-automodel" in proc.stdout and NEMO_PREFIX in proc.stdout


def test_shard_only_entries_of_every_kind_give_the_source_stream(out, tmp_path):
    """``data_dir: <converted root>`` + ``backend: webdataset`` and nothing else, for all three
    groups (the JSONL kind included: its root holds its JSONL copy)."""
    shard_only = write_yaml(out, tmp_path, shard_only=True)
    entries = yaml.safe_load(shard_only.read_text())["dataset"]["dataset_info"]
    assert all(set(e) == {"data_dir", "backend"} for group in entries.values() for e in group.values())
    batches = direct_batches(shard_only, 5)
    assert {entry["dataset_name"] for b in batches for entry in b["batch_data_indexes"]} == set(GROUPS)
    assert_batches_equal(direct_batches(write_yaml(out, tmp_path), 5), batches)


# --------------------------------------------------------------------------- NeMo's config path


@needs_nemo
@pytest.mark.parametrize("flips", [(), GROUPS], ids=["source", "all-groups-on-shards"])
def test_nemo_recipe_config_builds_editstreams_loader_with_the_direct_paths_batches(out, tmp_path, installed, flips):
    from nemo_automodel.components.config.loader import load_yaml_config
    from nemo_automodel.recipes._typed_config import RecipeConfig

    path = write_yaml(out, tmp_path, flips)
    loader_config = RecipeConfig(load_yaml_config(str(path))).bagel_dataloader
    assert type(loader_config) is editstream.nemo.BagelDataloaderConfig
    assert type(loader_config.dataset_config) is editstream.nemo.BagelDatasetConfig
    nemo_batches = take_batches(loader_config)
    assert_batches_equal(direct_batches(path), nemo_batches)
    if flips:
        assert_batches_equal(direct_batches(write_yaml(out, tmp_path)), nemo_batches)


@needs_nemo
def test_nemo_field_check_sees_editstreams_fields_only_while_installed(out, tmp_path):
    from nemo_automodel.components.config.loader import load_yaml_config
    from nemo_automodel.components.datasets.multimodal import loader as nemo_loader
    from nemo_automodel.recipes._typed_config import RecipeConfig

    nemos_own = nemo_loader.BagelDataloaderConfig
    path = tmp_path / "uint8.yaml"
    config = yaml.safe_load(write_yaml(out, tmp_path).read_text())
    config["dataset"]["image_dtype"] = "uint8"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(TypeError, match="image_dtype"):
        _ = RecipeConfig(load_yaml_config(str(path))).bagel_dataloader
    editstream.nemo.install()
    editstream.nemo.install()  # idempotent: uninstall() below still restores NeMo's own classes
    try:
        built = RecipeConfig(load_yaml_config(str(path))).bagel_dataloader
        assert built.dataset_config.image_dtype == "uint8"
        assert editstream.nemo.installed()
    finally:
        editstream.nemo.uninstall()
    assert nemo_loader.BagelDataloaderConfig is nemos_own and not editstream.nemo.installed()


SUBMODULES = (
    "collate_fns",
    "datasets",
    "distributed_iterable",
    "interleave",
    "loader",
    "packing",
    "parquet_utils",
    "transforms",
    "utils",
    "video",
)
HDFS_HOOKS = {"get_hdfs_host", "get_hdfs_block_size", "get_hdfs_extra_conf", "hdfs_ls_cmd"}
"""NeMo's placeholders for a cluster's HDFS (editstream reads any fsspec URL instead)."""


@needs_nemo
def test_every_public_name_of_nemos_tree_has_a_twin():
    import importlib

    nemo_package = importlib.import_module(NEMO_PREFIX)
    assert set(nemo_package.__all__) <= set(editstream.nemo.__all__)
    for sub in SUBMODULES:
        theirs = importlib.import_module(f"{NEMO_PREFIX}.{sub}")
        ours = importlib.import_module(f"editstream.nemo.{sub}")
        defined = {
            name
            for name, value in vars(theirs).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == theirs.__name__
        }
        assert sorted(defined - set(vars(ours)) - HDFS_HOOKS) == [], sub


def nemo_source_file(relative: str) -> str | None:
    """A file of NeMo's source: ``$NEMO_AUTOMODEL_SRC`` (a checkout, or a git directory read
    with ``git show HEAD:``); None when absent (the PyPI package holds no tests)."""
    src = Path(os.environ.get("NEMO_AUTOMODEL_SRC", "/nonexistent"))
    if (src / relative).is_file():
        return (src / relative).read_text()
    if not src.exists():
        return None
    proc = subprocess.run(["git", "-C", str(src), "show", f"HEAD:{relative}"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


@needs_nemo
@pytest.mark.nemo_source
def test_nemos_own_bagel_loader_tests_pass_against_editstream_nemo(tmp_path):
    source = nemo_source_file(NEMO_TEST)
    assert source is not None, f"set NEMO_AUTOMODEL_SRC to a NeMo Automodel checkout with {NEMO_TEST}"
    swapped = source.replace(NEMO_PREFIX, "editstream.nemo")
    assert NEMO_PREFIX not in swapped and swapped.count("editstream.nemo") >= 4
    (tmp_path / "test_bagel_loader.py").write_text(swapped)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "test_bagel_loader.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "4 passed" in proc.stdout


# --------------------------------------------------------------------------- the recipe classes


HAVE_RECIPES = HAVE_NEMO and _importable("transformers") and _importable("einops")
needs_recipes = pytest.mark.skipif(
    not HAVE_RECIPES, reason="NeMo's recipe module is not importable (it needs transformers and einops)"
)


@needs_recipes
def test_the_recipe_classes_are_nemos_and_install_on_construction(out, tmp_path):
    from nemo_automodel.cli.utils import resolve_recipe_name
    from nemo_automodel.components.config.loader import load_yaml_config
    from nemo_automodel.components.launcher.interactive import resolve_recipe_cls
    from nemo_automodel.recipes.multimodal.pretrain import PretrainRecipeForMultimodal

    cfg = load_yaml_config(str(write_yaml(out, tmp_path)))
    recipe_cls = resolve_recipe_cls(resolve_recipe_name(cfg.get("recipe")))
    assert recipe_cls is editstream.nemo.PretrainRecipeForMultimodal
    assert issubclass(recipe_cls, PretrainRecipeForMultimodal)
    assert editstream.nemo.recipes.recipe_class(cfg.get("recipe")) is recipe_cls
    try:
        recipe_cls(cfg)
        assert editstream.nemo.installed()
    finally:
        editstream.nemo.uninstall()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recipe_route_reports(out: str, tmp_path: Path, steps: int) -> tuple[Path, list[Any]]:
    """2 torchrun ranks on CPU (gloo) through NeMo's launcher resolution of the YAML's recipe line, the
    recipe's constructor and the data part of its setup(): the YAML and each rank's report."""
    path = write_yaml(out, tmp_path, ("unified_edit",))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(RANK_SCRIPT),
        str(tmp_path),
        str(steps),
        "-c",
        str(path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return path, [torch.load(tmp_path / f"rank{rank}.pt", weights_only=False) for rank in range(2)]


@needs_recipes
@pytest.mark.torchrun
@pytest.mark.slow
def test_the_recipe_class_under_torchrun_reads_each_ranks_share_through_editstream(out, tmp_path):
    """Each rank's batches through the recipe route equal editstream's direct path for that rank."""
    steps = 3
    path, reports = recipe_route_reports(out, tmp_path, steps)
    for rank, report in enumerate(reports):
        assert report["recipe"] == "editstream.nemo.recipes.PretrainRecipeForMultimodal"
        assert report["dataset"] == f"{NemoTwinPackedDataset.__module__}.{NemoTwinPackedDataset.__qualname__}"
        assert_batches_equal(direct_batches(path, steps, rank=rank, world_size=2), report["batches"])


@needs_recipes
@pytest.mark.torchrun
@pytest.mark.slow
@pytest.mark.nemo_env
def test_the_recipe_route_under_torchrun_gives_nemos_own_per_rank_batches(out, tmp_path):
    """The same route judged by NeMo's own loader classes (they need torchvision: NeMo's venv)."""
    steps = 3
    _, reports = recipe_route_reports(out, tmp_path, steps)
    for rank, report in enumerate(reports):
        assert_batches_equal(nemos_own_batches(out, tmp_path, steps, rank=rank, world_size=2), report["batches"])


def nemos_own_batches(out: str, tmp_path: Path, n: int, rank: int, world_size: int) -> list[Any]:
    """The first ``n`` batches of NeMo's own loader classes (NeMo's YAML, no editstream) for ``rank``."""
    from nemo_automodel.components.config.loader import load_yaml_config
    from nemo_automodel.recipes._typed_config import RecipeConfig

    from test_nemo_judge import SEED, nemo_yaml

    config = RecipeConfig(load_yaml_config(str(nemo_yaml(out, tmp_path))))
    assert not type(config.bagel_dataloader).__module__.startswith("editstream")
    return take_batches(config.bagel_dataloader, n, rank, world_size, SEED)


@needs_recipes
def test_the_recipe_module_runs_as_a_script_the_way_nemos_launcher_starts_it(tmp_path):
    """NeMo's launcher, starting torchrun itself, runs ``<site-packages>/editstream/nemo/recipes.py``
    as a plain script: its imports must work there (no relative import), up to reading the config."""
    script = ROOT / "src" / "editstream" / "nemo" / "recipes.py"
    missing = tmp_path / "no-such-config.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, str(script), "-c", str(missing)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode != 0
    assert "relative import" not in proc.stderr and "ImportError" not in proc.stderr
    assert "no-such-config.yaml" in proc.stderr

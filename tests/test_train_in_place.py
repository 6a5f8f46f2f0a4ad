"""Training on a public dataset in place (a ``dataset_info`` entry's ``from:``, ``stream --from``): the batches,
the drops and the resume equal those of the converted shards, on data in the published Hub layouts."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from editstream.adapters import builtin_names, run_adapter
from editstream.cli.app import main as cli_main
from editstream.data.adapted.inplace import in_place_entry
from editstream.data.open import open_data
from editstream.data.rows import BadSample
from editstream.packing.config import BagelDatasetConfig
from helpers import SMALL_PACKING, VAE, VIT, assert_batches_equal, build_dataloader, run_cli, take, torch_roundtrip
from hub_shapes import anyedit, hqedit, instructpix2pix, magicbrush, omniedit, ultraedit
from published_layouts import as_hub_cache, gpt_image_edit, seed_data_edit, sharegpt4o, x2i

BATCHES = 10


def _break_one_image(data_dir: Path) -> None:
    """Null the edited image of one row of the first file (a row the adapter drops), in place."""
    first = sorted(data_dir.glob("*.parquet"))[0]
    table = pq.read_table(first)
    rows = table.to_pylist()
    rows[4]["edited_image"] = {"bytes": None, "path": None}
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), first.resolve(), row_group_size=3)


WHERE = {"omniedit": "task != 'swap'"}
"""A filter per adapter: an ungrouped mapping with one reads the plan pass's index of the rows it keeps."""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """MagicBrush (grouped: 2 output row groups), InstructPix2Pix (ungrouped, 2 files, one bad row) and
    OmniEdit (ungrouped, filtered) in their Hub layouts, each converted to shards as ``convert --from`` does."""
    root = tmp_path_factory.mktemp("hub")
    made = {}
    for name, build, n in (
        ("magicbrush", magicbrush, 150),
        ("instructpix2pix", instructpix2pix, 230),
        ("omniedit", omniedit, 450),
    ):
        data_dir, _ = build(root / name, n)
        if name == "instructpix2pix":
            _break_one_image(data_dir)
        shards = root / f"{name}-wds"
        run_adapter(str(data_dir), str(shards), name, where=WHERE.get(name), progress=False, workers=1)
        made[name] = (data_dir, shards)
    return made


def config(entry: dict, backend: str, num_used: int = 2, kind: str = "unified_edit") -> BagelDatasetConfig:
    group = {"dataset_names": ["hub"], "weight": 1.0, "num_used_data": [num_used], "backend": backend}
    group["image_transform_args"] = dict(VAE)
    if kind == "unified_edit":
        group["vit_image_transform_args"] = dict(VIT)
    return BagelDatasetConfig(grouped_datasets={kind: group}, dataset_info={kind: {"hub": entry}}, **SMALL_PACKING)


def loaders(hub, name: str, workers: int):
    """``(in place, shards)`` loaders of the same recipe."""
    data_dir, shards = hub[name]
    where = {"where": WHERE[name]} if name in WHERE else {}
    in_place = config({"data_dir": str(data_dir), "from": name, **where}, "parquet", 3)
    converted = config({"data_dir": str(shards)}, "webdataset", 3)
    return build_dataloader(in_place, 0, 1, workers), build_dataloader(converted, 0, 1, workers)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", ["instructpix2pix", "magicbrush", "omniedit"])
def test_in_place_gives_the_batches_of_the_converted_shards(hub, name, workers):
    in_place, converted = loaders(hub, name, workers)
    expected = take(iter(converted), BATCHES)
    assert_batches_equal(expected, take(iter(in_place), BATCHES))


def test_a_row_the_adapter_drops_is_yielded_as_a_located_bad_sample(hub):
    data_dir, _ = hub["instructpix2pix"]
    handle = open_data(in_place_entry({"data_dir": str(data_dir), "from": "instructpix2pix"}, "test"))
    source = handle.source()
    units = handle.units(source)
    assert [u.row_group for u in units] == [0, 1, 0, 1]  # 115 rows per file: row groups of 100 and 15
    rows = [row for unit in units for _, row in source.iter_unit_rows(unit, None)]
    bad = [row for row in rows if isinstance(row, BadSample)]
    assert len(rows) == 230 and len(bad) == 1
    assert bad[0].where == {
        "file": str(sorted(data_dir.glob("*.parquet"))[0]),
        "row_group": 1,
        "row": 1,
        "code": "null_image",
        "column": "edited_image",
    }


@pytest.mark.parametrize("name", ["instructpix2pix", "magicbrush", "omniedit"])
def test_a_resume_in_place_continues_as_the_uninterrupted_run_and_the_shards(hub, name):
    in_place, converted = loaders(hub, name, 2)
    expected = take(iter(converted), 2 * BATCHES)
    first = iter(in_place)
    assert_batches_equal(expected[:BATCHES], take(first, BATCHES))
    state = torch_roundtrip(in_place.state_dict())
    del first
    for resumed in loaders(hub, name, 2):  # in place again, and the shards from the in-place state
        resumed.load_state_dict(state)
        assert_batches_equal(expected[BATCHES:], take(iter(resumed), BATCHES))


def plan_passes(caplog) -> int:
    return sum("plan pass over" in r.getMessage() for r in caplog.records)


def test_the_plan_index_is_kept_reused_and_renewed_when_the_source_changes(tmp_path, caplog, monkeypatch):
    data_dir, _ = magicbrush(tmp_path / "hub", 9)
    monkeypatch.setenv("EDITSTREAM_CACHE", str(tmp_path / "cache"))
    caplog.set_level(logging.INFO, logger="editstream.data.adapted.inplace")
    recipe = config({"data_dir": str(data_dir), "from": "magicbrush"}, "parquet", 1)

    def units() -> list:
        return build_dataloader(recipe, 0, 1, 0).dataset.grouped_datasets[0].data_paths

    listed = units()
    assert plan_passes(caplog) == 1 and len(list(data_dir.glob(".editstream-plan-*.json"))) == 1
    assert units() == listed and plan_passes(caplog) == 1  # read from the index, not planned again
    first = sorted(data_dir.glob("*.parquet"))[0]
    table = pq.read_table(first)
    pq.write_table(table.slice(1), first.resolve(), row_group_size=2)  # the source changes: a row fewer
    units()
    assert plan_passes(caplog) == 2


def test_a_source_changed_after_listing_stops_the_stream_naming_the_file(tmp_path):
    data_dir, _ = magicbrush(tmp_path / "hub", 9)
    recipe = config({"data_dir": str(data_dir), "from": "magicbrush"}, "parquet", 1)
    loader = build_dataloader(recipe, 0, 1, 0)
    assert loader.dataset.grouped_datasets[0].data_paths  # listed (and planned) before the change
    first = sorted(data_dir.glob("*.parquet"))[0]
    pq.write_table(pq.read_table(first), first.resolve(), row_group_size=1)
    with pytest.raises(ValueError, match="changed since its units were listed") as failed:
        take(iter(loader), 1)
    assert str(first.name) in str(failed.value) and "dataset 'unified_edit'" in str(failed.value)


@pytest.mark.parametrize(
    ("entry", "needles"),
    [
        ({"from": "nosuch"}, ["dataset_info['unified_edit']['hub']", "unknown adapter 'nosuch'", "magicbrush"]),
        ({"from": "magicbrush", "mapping": "m.yaml"}, ["dataset_info['unified_edit']['hub']", "both name"]),
        ({"where": "turn_index == 1"}, ["['where']", "from: NAME or mapping: FILE"]),
        ({"from": "magicbrush", "where": "turn_index =="}, ["dataset_info['unified_edit']['hub']", "filter"]),
        ({"from": "magicbrush", "colour": 1}, ["unknown key(s) ['colour']"]),
    ],
)
def test_bad_in_place_entries_are_errors_naming_the_dataset(tmp_path, entry, needles):
    recipe = config({"data_dir": str(tmp_path), **entry}, "parquet")
    with pytest.raises(ValueError) as failed:
        build_dataloader(recipe, 0, 1, 0)
    for needle in needles:
        assert needle in str(failed.value), (needle, str(failed.value))


def test_an_in_place_entry_on_the_webdataset_backend_needs_its_shards(tmp_path):
    recipe = config({"data_dir": str(tmp_path), "from": "magicbrush"}, "webdataset")
    with pytest.raises(ValueError, match="webdataset: sub-entry"):
        build_dataloader(recipe, 0, 1, 0)


def test_stream_from_reads_a_repository_root_a_local_dir_and_a_cache_folder(tmp_path):
    data, _ = magicbrush(tmp_path / "datasets--osunlp--MagicBrush", 12)
    cache = data.parent.parent.parent
    local_dir = tmp_path / "local-dir"
    local_dir.mkdir()
    (local_dir / "data").symlink_to(data)
    for root in (data, local_dir, cache):
        result = run_cli("stream", str(root), "--from", "magicbrush", "--samples", "5")
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert (summary["backend"], summary["schema"], summary["samples"]) == ("parquet", "unified_edit", 5)
        assert summary["drops"] == {}
    both = run_cli("stream", str(data), "--from", "magicbrush", "--mapping", "x.yaml")
    assert both.returncode == 2 and "--from and --mapping" in both.stderr
    unknown = run_cli("stream", str(data), "--from", "nosuch")
    assert unknown.returncode == 2 and "unknown adapter 'nosuch'" in unknown.stderr
    stray = run_cli("stream", str(data), "--where", "turn_index == 1")
    assert stray.returncode == 2 and "--where and --split apply to data read through an adapter" in stray.stderr
    empty = run_cli("stream", str(tmp_path), "--from", "magicbrush")
    assert empty.returncode == 1 and "holds no parquet files" in empty.stderr and "looked in" in empty.stderr


PUBLISHED = {
    "gpt-image-edit": (gpt_image_edit, "unified_edit"),
    "sharegpt4o-edit": (sharegpt4o, "unified_edit"),
    "sharegpt4o-t2i": (sharegpt4o, "t2i_pretrain"),
    "x2i": (x2i, "unified_edit"),
    "seed-data-edit": (seed_data_edit, "unified_edit"),
}
"""The adapters of JSON / JSONL metadata with media in archives, their published layouts and kinds."""


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_metadata_and_archives_in_place_give_the_batches_of_the_converted_shards(tmp_path, monkeypatch, name, workers):
    monkeypatch.setenv("EDITSTREAM_CACHE", str(tmp_path / "cache"))
    build, kind = PUBLISHED[name]
    root = build(tmp_path / "published")[0]
    shards = tmp_path / "wds"
    run_adapter(str(root), str(shards), name, progress=False, workers=1)
    # num_used_data: a multiple of the 1 to 3 output files (which files a remainder takes follows
    # the converted folder's listing order, which a metadata mapping in place cannot know)
    converted = config({"data_dir": str(shards)}, "webdataset", 6, kind)
    in_place = config({"data_dir": str(root), "from": name}, "parquet", 6, kind)
    expected = take(iter(build_dataloader(converted, 0, 1, workers)), 4)
    loader = build_dataloader(in_place, 0, 1, workers)
    stream = iter(loader)
    assert_batches_equal(expected[:2], take(stream, 2))
    state = torch_roundtrip(loader.state_dict())
    assert_batches_equal(expected[2:], take(stream, 2))
    del stream
    resumed = build_dataloader(in_place, 0, 1, workers)
    resumed.load_state_dict(state)
    assert_batches_equal(expected[2:], take(iter(resumed), 2))
    assert list((tmp_path / "cache" / "media").iterdir())  # the archives' indexes, kept for the next run


BUILDERS = {
    "anyedit": anyedit,
    "hqedit": hqedit,
    "hqedit-inverse": hqedit,
    "instructpix2pix": instructpix2pix,
    "magicbrush": magicbrush,
    "omniedit": omniedit,
    "ultraedit": ultraedit,
}


def test_every_builtin_adapter_has_test_data_in_its_published_layout():
    assert sorted([*BUILDERS, *PUBLISHED]) == builtin_names()


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_stream_from_takes_the_roots_a_download_gives_for_metadata_adapters(tmp_path, monkeypatch, name):
    monkeypatch.setenv("EDITSTREAM_CACHE", str(tmp_path / "cache"))
    root = PUBLISHED[name][0](tmp_path / "published")[0]
    cache = as_hub_cache(root, tmp_path / "datasets--org--name")
    for source in (root, cache, cache / "snapshots" / "9e1c0aa"):
        streamed = CliRunner().invoke(cli_main, ["stream", str(source), "--from", name, "--samples", "3"])
        assert streamed.exit_code == 0, streamed.output
        assert json.loads(streamed.stdout)["samples"] == 3


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_convert_preview_and_stream_take_the_roots_a_download_gives(tmp_path, name):
    """A Hub cache folder, one of its snapshots, and a ``--local-dir`` repository root (its ``data/``)."""
    data, expected = BUILDERS[name](tmp_path / "datasets--org--name")
    local_dir = tmp_path / "local-dir"
    local_dir.mkdir()
    (local_dir / "data").symlink_to(data)
    (local_dir / "README.md").write_text("a dataset card\n")
    runner = CliRunner()
    for i, root in enumerate((data.parent.parent.parent, data.parent, local_dir)):
        dst = tmp_path / f"out-{i}"
        done = runner.invoke(cli_main, ["convert", str(root), str(dst), "--from", name, "--to", "parquet"])
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["adapt"]["chains_out"] == len(expected)
        page = tmp_path / f"page-{i}.html"
        shown = runner.invoke(cli_main, ["preview", str(root), "--from", name, "-o", str(page), "-n", "3"])
        assert shown.exit_code == 0 and "(3 records)" in shown.stdout, shown.output
        streamed = runner.invoke(cli_main, ["stream", str(root), "--from", name, "--samples", "4"])
        assert streamed.exit_code == 0, streamed.output
        assert json.loads(streamed.stdout)["samples"] == 4


def test_in_place_on_s3_keeps_its_index_beside_the_data_and_streams_as_locally(s3_bucket, tmp_path):
    import s3fs

    data_dir, _ = magicbrush(tmp_path / "hub", 120)
    fs = s3fs.S3FileSystem(**s3_bucket.storage_options)
    for f in sorted(data_dir.glob("*.parquet")):
        fs.put(str(f.resolve()), f"{s3_bucket.name}/mb/data/{f.name}")
    remote = config(
        {"data_dir": f"{s3_bucket.url}/mb", "from": "magicbrush", "storage_options": s3_bucket.storage_options},
        "parquet",
    )
    local = config({"data_dir": str(data_dir), "from": "magicbrush"}, "parquet")
    expected = take(iter(build_dataloader(local, 0, 1, 0)), 6)
    assert_batches_equal(expected, take(iter(build_dataloader(remote, 0, 1, 0)), 6))
    s3fs.S3FileSystem.clear_instance_cache()
    assert [p.rsplit("/", 1)[-1][:16] for p in fs.ls(f"{s3_bucket.name}/mb/data") if p.endswith(".json")] == [
        ".editstream-plan"
    ]


def test_a_row_group_whose_every_chain_is_dropped_is_written_empty_so_the_units_still_match(tmp_path):
    data_dir, _ = instructpix2pix(tmp_path / "hub", 230)
    first = sorted(data_dir.glob("*.parquet"))[0]
    table = pq.read_table(first)
    rows = table.to_pylist()
    for row in rows[:100]:  # the whole first planned row group of the first file
        row["edited_image"] = {"bytes": None, "path": None}
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), first.resolve(), row_group_size=3)
    shards = tmp_path / "wds"
    run_adapter(str(data_dir), str(shards), "instructpix2pix", progress=False, workers=1)
    staged = pq.ParquetFile(tmp_path / "wds-parquet" / first.name).metadata
    assert [staged.row_group(i).num_rows for i in range(staged.num_row_groups)] == [0, 15]
    expected = take(iter(build_dataloader(config({"data_dir": str(shards)}, "webdataset"), 0, 1, 0)), BATCHES)
    in_place = config({"data_dir": str(data_dir), "from": "instructpix2pix"}, "parquet")
    assert_batches_equal(expected, take(iter(build_dataloader(in_place, 0, 1, 0)), BATCHES))


def test_a_mapping_the_source_does_not_fit_is_an_error_naming_the_dataset_and_the_file(tmp_path):
    data_dir, _ = instructpix2pix(tmp_path / "hub", 6)
    recipe = config({"data_dir": str(data_dir), "from": "magicbrush"}, "parquet")
    with pytest.raises(ValueError) as failed:
        build_dataloader(recipe, 0, 1, 0)
    message = str(failed.value)
    assert "dataset 'unified_edit'" in message and "train-00000-of-00002.parquet" in message
    assert "has no column(s)" in message and "img_id" in message


def test_a_filter_in_place_on_metadata_inside_archives_gives_the_converted_batches(tmp_path, monkeypatch):
    """The plan index of metadata read from inside split archives is keyed by the archives' parts and
    kept beside them (not under an ``archive#member`` path)."""
    monkeypatch.setenv("EDITSTREAM_CACHE", str(tmp_path / "cache"))
    root = gpt_image_edit(tmp_path / "published")[0]
    where = "task != 'generate'"
    shards = tmp_path / "wds"
    run_adapter(str(root), str(shards), "gpt-image-edit", where=where, progress=False, workers=1)
    converted = config({"data_dir": str(shards)}, "webdataset", 2)
    in_place = config({"data_dir": str(root), "from": "gpt-image-edit", "where": where}, "parquet", 2)
    expected = take(iter(build_dataloader(converted, 0, 1, 0)), 3)
    assert_batches_equal(expected, take(iter(build_dataloader(in_place, 0, 1, 0)), 3))
    assert [p.name for p in root.rglob(".editstream-plan-*.json")] and not list(root.rglob("*#*"))


def test_listing_and_previewing_in_place_leave_no_archive_open(tmp_path, monkeypatch):
    from editstream.adapters import InPlace, peek, resolve_mapping

    monkeypatch.setenv("EDITSTREAM_CACHE", str(tmp_path / "cache"))
    root = gpt_image_edit(tmp_path / "published")[0]
    entry = InPlace(str(root), resolve_mapping("gpt-image-edit"), where="task != 'generate'")
    fds = Path("/proc/self/fd")
    before = len(list(fds.iterdir()))
    for _ in range(3):
        assert entry.layout(None).count() == 2
        assert len(list(peek(str(root), "gpt-image-edit", 2))) == 2
    assert len(list(fds.iterdir())) == before


def test_a_unit_of_jsonl_metadata_in_place_parses_only_its_own_lines(tmp_path, monkeypatch):
    """Listing counts a JSONL file's lines and keeps where every 100th starts (by the file's identity); a unit
    seeks there and parses its own lines only, so reading every unit parses each line once, not the file per unit."""
    from editstream.data.adapted.sources import SCHEMA_ROWS

    monkeypatch.setenv("EDITSTREAM_CACHE", str(tmp_path / "cache"))
    root = x2i(tmp_path / "published")[0]
    lines = (root / "pix2pix.jsonl").read_text().splitlines()
    n = 1530
    (root / "pix2pix.jsonl").write_text("\n".join(lines[k % len(lines)] for k in range(n)) + "\n")
    parsed: list[bytes] = []
    real = json.loads
    monkeypatch.setattr(
        json, "loads", lambda text, **kw: (b"turn it blue" in text and parsed.append(text)) or real(text, **kw)
    )
    handle = open_data(in_place_entry({"data_dir": str(root), "from": "x2i"}, "test"))
    source = handle.source()
    units = handle.units(source)
    assert len(units) == 16 and len(parsed) == SCHEMA_ROWS  # listed: the lines counted, the first typed
    parsed.clear()
    last = [row for _, row in source.iter_unit_rows(units[-1], None)]
    assert len(parsed) == len(last) == 30
    first = [row for _, row in source.iter_unit_rows(units[0], None)]
    assert len(parsed) == 130 and len(first) == 100
    rest = [row for unit in units[1:-1] for _, row in source.iter_unit_rows(unit, None)]
    assert len(parsed) == n and len(first + rest + last) == n  # each line parsed once
    assert [r["instruction_list"] for r in first + rest + last] == [
        [[f"turn it blue {k % len(lines)}"]] for k in range(n)
    ]
    assert list((tmp_path / "cache" / "media").glob("pix2pix.jsonl.*.lines"))
    parsed.clear()
    again = open_data(in_place_entry({"data_dir": str(root), "from": "x2i"}, "test"))
    assert again.units(again.source()) == units and not parsed  # the kept marks and types, not a count


def test_reading_in_place_loads_no_converter_code(tmp_path):
    """The in-place row source sits in data/: streaming a published set in place imports neither the converter
    nor its front end (checked in a fresh interpreter, whose modules are only what the read needed)."""
    root = magicbrush(tmp_path / "hub", 20)[0]
    script = (
        "import sys\n"
        "from editstream.data.adapted.inplace import in_place_entry\n"
        "from editstream.data.raw_rows import iter_rows\n"
        f"entry = in_place_entry({{'data_dir': {str(root)!r}, 'from': 'magicbrush'}}, 'test')\n"
        "rows = [row for _, row in zip(range(5), iter_rows(entry))]\n"
        "print(len(rows), sorted({m.split('.')[1] for m in sys.modules if m.startswith('editstream.')}))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
        "EDITSTREAM_CACHE": str(tmp_path),
    }
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    count, layers = run.stdout.split(" ", 1)
    assert int(count) == 5
    assert "conversion" not in layers and "adapters" not in layers, layers

"""Shard format 2: the member table the converter writes into each ``.tar.idx``, the reader that slices members
through it (memoryviews, or bytes on request), and roots of the earlier format, which still stream and verify."""

from __future__ import annotations

import io
import json
import struct
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

import editstream
from editstream import ByteTokenizer, ImageTransform
from editstream.conversion import convert
from editstream.conversion.verify import verify
from editstream.format import manifest as mf
from editstream.format.idx import decode_idx, decode_table
from editstream.format.mapped_tar import table_samples
from editstream.format.member_table import MemberTable, MemberTableError, is_member_table
from editstream.format.rowcodec import encode_members
from editstream.format.tarreader import iter_samples
from editstream.format.tarwriter import TarWriter
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import VAE, VIT

LONG_KEY = "k" * 95  # with its suffixes the names pass 100 bytes: GNU long-name records shift the data


def png(size: int = 8) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (size, size), (200, 10, 30)).save(out, "PNG")
    return out.getvalue()


ROWS = [
    {"id": "a", "images": [png(), b"\x89PNG" + b"z" * 700], "blob": b""},
    {"id": "b", "images": [], "blob": b"x" * 512},
    {"id": "c", "images": [png(3)], "blob": None},
]


def write_shard(path: Path, keys: list[str]) -> MemberTable:
    with open(path, "wb") as f:
        writer = TarWriter(f)
        for key, row in zip(keys, ROWS):
            writer.write_sample(key, encode_members(row, key))
        writer.close()
    return writer.table()


@pytest.mark.parametrize("stem", ["s", LONG_KEY])
def test_the_table_locates_every_member_as_gnu_tar_and_the_stdlib_read_it(tmp_path, stem):
    keys = [f"{stem}{i}" for i in range(len(ROWS))]
    table = write_shard(tmp_path / "s.tar", keys)
    data = (tmp_path / "s.tar").read_bytes()
    with tarfile.open(tmp_path / "s.tar") as tf:  # an independent reader as the oracle
        members = tf.getmembers()
    assert [f"{table.keys[table.sample_of(j)]}.{s}" for j, s in enumerate(table.suffixes)] == [m.name for m in members]
    assert table.data_offsets == [m.offset_data for m in members] and table.sizes == [m.size for m in members]
    assert table.shard_size == len(data) and table.end_offset == len(data) - 1024
    streamed = list(iter_samples(io.BytesIO(data)))
    assert table.keys == [k for k, _, _ in streamed] and table.sample_offsets[:-1] == [o for _, o, _ in streamed]
    assert MemberTable.decode(table.encode()) == table
    assert decode_idx(table.encode()) == (table.sample_offsets[:-1], table.end_offset)


def test_a_damaged_or_foreign_table_is_refused_with_its_name(tmp_path):
    table = write_shard(tmp_path / "s.tar", ["a", "b", "c"])
    raw = bytearray(table.encode())
    assert is_member_table(raw) and not is_member_table(struct.pack("<2Q", 0, 1536))
    raw[40] ^= 1
    with pytest.raises(MemberTableError, match="x.idx: the member table's checksum"):
        MemberTable.decode(bytes(raw), "x.idx")
    with pytest.raises(MemberTableError, match="not a member table"):
        MemberTable.decode(struct.pack("<2Q", 0, 1536), "x.idx")
    lying = replace(table, sizes=[table.shard_size, *table.sizes[1:]]).encode()  # checksum fine, bounds not
    with pytest.raises(MemberTableError, match="runs past the shard"):
        MemberTable.decode(lying, "x.idx")


def test_members_are_read_only_views_that_the_references_parse_row_can_use(tmp_path):
    table = write_shard(tmp_path / "s.tar", ["a", "b", "c"])
    path = str(tmp_path / "s.tar")
    samples = table_samples(path, table, 0, table.shard_size)
    assert samples is not None
    streamed = list(iter_samples(open(path, "rb")))  # noqa: SIM115 - read once, closed by the GC
    for (key, offset, members), (want_key, want_offset, want) in zip(samples, streamed):
        assert (key, offset) == (want_key, want_offset) and members == want
        assert type(members["json"]) is bytes  # the row codec's JSON parsers take bytes
        for suffix, member in members.items():
            if suffix != "json":
                assert isinstance(member, memoryview) and member.readonly
                assert bytes(member) == want[suffix] and len(member) == len(want[suffix])
                assert member[:4] == want[suffix][:4]
    _, _, first = next(iter(table_samples(path, table, 0, table.shard_size) or []))
    image = first["images.0.png"]
    assert Image.open(io.BytesIO(image)).convert("RGB").getpixel((0, 0)) == (200, 10, 30)
    as_bytes = table_samples(path, table, 1, table.shard_size, as_bytes=True)
    assert as_bytes is not None
    assert all(type(m) is bytes for _, _, members in as_bytes for m in members.values())


def test_a_shard_that_is_not_its_tables_is_not_sliced(tmp_path):
    table = write_shard(tmp_path / "s.tar", ["a", "b", "c"])
    other = write_shard(tmp_path / "o.tar", ["x", "y", "z"])
    path = str(tmp_path / "s.tar")
    assert table_samples(path, table, 0, table.shard_size + 1) is None  # the manifest's size differs
    assert (
        table_samples(str(tmp_path / "o.tar"), replace(table, shard_size=other.shard_size), 0, other.shard_size) is None
    )
    assert table_samples(path, table, 0, table.shard_size, digest=("xxh3_128", "0" * 32)) is None
    assert table_samples(str(tmp_path / "missing.tar"), table, 0, table.shard_size) is None


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("tables")
    write_synthetic_dataset(
        str(base / "pq"), num_files=2, row_groups_per_file=2, rows_per_group=4, max_side=40, min_side=16
    )
    convert(str(base / "pq"), str(base / "wds"), workers=1, progress=False)
    return base / "pq", base / "wds"


def as_format_1(root: Path) -> None:
    """Rewrite a conversion as editstream wrote it before shard format 2: plain-offset idx files, manifest v2."""
    manifest = json.loads((root / mf.MANIFEST_NAME).read_text())
    assert manifest["format_version"] == mf.MEMBER_TABLE_VERSION
    manifest["format_version"] = 2
    for shard in manifest["shards"]:
        idx = root / shard["idx_path"]
        offsets, end = decode_idx(idx.read_bytes())
        idx.write_bytes(struct.pack(f"<{len(offsets) + 1}Q", *offsets, end))
    (root / mf.MANIFEST_NAME).write_text(json.dumps(manifest))


def test_a_new_root_has_tables_and_old_roots_still_stream_and_verify(roots, tmp_path):
    import shutil

    pq, wds = roots
    manifest = mf.Manifest.read(str(wds))
    assert manifest.member_tables and all(
        decode_table((wds / s.idx_path).read_bytes()).num_samples == s.num_samples for s in manifest.shards
    )
    source = [r.row for r in editstream.iter_rows(str(pq))]
    new = [r.row for r in editstream.iter_rows(str(wds))]
    assert new == source and isinstance(new[0]["image_list"][0], memoryview)
    assert verify(str(wds), source=str(pq)).ok
    old = tmp_path / "old"
    shutil.copytree(wds, old)
    as_format_1(old)
    assert not mf.Manifest.read(str(old)).member_tables
    rows = [r.row for r in editstream.iter_rows(str(old))]
    assert rows == source and type(rows[0]["image_list"][0]) is bytes  # today's path: members are bytes
    assert verify(str(old), source=str(pq)).ok


class Recording(editstream.UnifiedEditIterableDataset):
    """The reference's edit dataset, noting the type of the images its ``parse_row`` is handed."""

    seen: list[type] = []

    def parse_row(self, row):  # type: ignore[no-untyped-def]
        Recording.seen.append(type(row["image_list"][0]))
        return super().parse_row(row)


def parse_row_member_types(root: Path, backend: str, **options: object) -> set[type]:
    Recording.seen = []
    ds = Recording(
        "unified_edit", ImageTransform(**VAE), ByteTokenizer(), ImageTransform(**VIT), [str(root)], [2], None,
        backend=backend, num_workers=0, **options,
    )  # fmt: skip
    it = iter(ds)
    samples = [next(it) for _ in range(6)]
    assert all(s["num_tokens"] > 0 for s in samples)
    return set(Recording.seen)


@pytest.mark.parametrize("backend", ["webdataset", "parquet"])
def test_parse_row_gets_views_and_bytes_by_option_or_environment(roots, monkeypatch, backend):
    root = roots[1] if backend == "webdataset" else roots[0]
    assert parse_row_member_types(root, backend) == {memoryview}
    assert parse_row_member_types(root, backend, member_bytes=True) == {bytes}
    monkeypatch.setenv("EDITSTREAM_MEMBER_BYTES", "1")
    assert parse_row_member_types(root, backend) == {bytes}
    assert parse_row_member_types(root, backend, member_bytes=False) == {memoryview}  # the option wins


def test_verify_reports_a_table_that_does_not_describe_its_shard(roots, tmp_path):
    import shutil

    _, wds = roots
    root = tmp_path / "w"
    shutil.copytree(wds, root)
    shard = mf.Manifest.read(str(root)).shards[1]
    idx = root / shard.idx_path
    table = decode_table(idx.read_bytes())
    idx.write_bytes(replace(table, data_offsets=[table.data_offsets[0] + 512, *table.data_offsets[1:]]).encode())
    report = verify(str(root))
    assert [(p.kind, p.shard) for p in report.problems] == [("idx", shard.path)]
    assert "data_offsets" in report.problems[0].detail
    idx.write_bytes(struct.pack(f"<{shard.num_samples + 1}Q", *table.sample_offsets))  # format 1 in a v3 root
    assert "holds plain offsets" in verify(str(root)).problems[0].detail


def test_a_groups_config_takes_member_bytes(tmp_path, monkeypatch):
    from editstream import make_bagel_multimodal_dataset
    from helpers import SMALL_PACKING, pipeline_groups, synth_pipeline_data

    seen: list[type] = []
    original = editstream.UnifiedEditIterableDataset.parse_row

    def noting(self, row):  # type: ignore[no-untyped-def]
        seen.append(type(row["image_list"][0]))
        return original(self, row)

    monkeypatch.setattr(editstream.UnifiedEditIterableDataset, "parse_row", noting)
    root = synth_pipeline_data(tmp_path)
    for member_bytes, want in [(None, memoryview), (True, bytes)]:
        groups, info = pipeline_groups(root, "webdataset")
        if member_bytes is not None:
            groups["unified_edit"]["member_bytes"] = member_bytes
        tokenizer = ByteTokenizer()
        packer = make_bagel_multimodal_dataset(
            tokenizer=tokenizer, special_tokens=tokenizer.special_token_ids(), grouped_datasets=groups,
            dataset_info=info, local_rank=0, world_size=1, num_workers=0, **SMALL_PACKING, data_seed=3,
        )  # fmt: skip
        packer.set_epoch(3)
        seen.clear()
        it = iter(packer)
        next(it), next(it)
        assert set(seen) == {want}

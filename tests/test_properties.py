"""Property tests of the parsers that read untrusted bytes: the row codec, the tar reader, the
idx and the manifest. Any input ends in a correct value or a defined error, never another
exception, a hang or a crash."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import io
import json
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from editstream.conversion.verify import rows_equal
from editstream.format.idx import IdxError, decode_idx, encode_idx
from editstream.format.manifest import Manifest, ManifestError
from editstream.format.rowcodec import RowCodecError, decode_sample, encode_members
from editstream.format.tarblock import TarFormatError
from editstream.format.tarreader import iter_samples
from editstream.format.tarwriter import TarWriter

EXAMPLES = int(os.environ.get("EDITSTREAM_HYPOTHESIS_EXAMPLES", "200"))
FAST = settings(max_examples=EXAMPLES, deadline=2000, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=64),
    st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    st.dates(),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3),
    ),
    max_leaves=12,
)
rows = st.dictionaries(st.text(min_size=1, max_size=12), values, min_size=1, max_size=5)


@FAST
@given(rows)
def test_any_row_survives_the_codec_unchanged(row):
    members = dict(encode_members(row, "k"))
    back = decode_sample("k", {suffix: bytes(data) for suffix, data in members.items()})
    assert rows_equal(back, row)


@FAST
@given(
    st.dictionaries(st.text(min_size=1, max_size=10), st.binary(max_size=200), max_size=4),
    st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)),
)
def test_any_members_decode_to_a_row_or_a_codec_error(members, json_member):
    members = {**members, "json": json_member}
    try:
        row = decode_sample("k", members)
    except RowCodecError:
        return
    assert isinstance(row, dict)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@FAST
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "$bytes",
                "$tuple",
                "$dict",
                "$float",
                "$datetime",
                "$date",
                "$time",
                "$timedelta",
                "$decimal",
                "$what",
                "a",
            ]
        ),
        json_values,
        min_size=1,
        max_size=1,
    )
)
def test_hostile_tags_are_codec_errors(tagged):
    doc = json.dumps({"col": tagged}).encode()
    with contextlib.suppress(RowCodecError):
        decode_sample("k", {"json": doc})


def _archive(samples: list[tuple[str, list[tuple[str, bytes]]]]) -> bytes:
    buf = io.BytesIO()
    with TarWriter(buf) as writer:
        for key, members in samples:
            writer.write_sample(key, members)
    return buf.getvalue()


def _drain(data: bytes) -> list[str]:
    return [f"{key}.{suffix}" for key, _, members in iter_samples(io.BytesIO(data)) for suffix in members]


@FAST
@given(st.binary(max_size=4096))
def test_any_bytes_are_members_or_a_tar_format_error(data):
    try:
        names = _drain(data)
    except TarFormatError:
        return
    assert all(isinstance(n, str) for n in names)


samples = st.lists(
    st.tuples(
        st.from_regex(r"[a-z0-9_-]{1,12}", fullmatch=True),
        st.lists(
            st.tuples(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.binary(max_size=700)),
            min_size=1,
            max_size=3,
            unique_by=lambda m: m[0],
        ),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda s: s[0],
)


@FAST
@given(samples, st.data())
def test_a_damaged_archive_reads_or_fails_with_a_tar_format_error(items, draw):
    data = bytearray(_archive(items))
    for _ in range(draw.draw(st.integers(1, 4))):
        kind = draw.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = draw.draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= draw.draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
        else:
            data[at:at] = draw.draw(st.binary(min_size=1, max_size=600))
    with contextlib.suppress(TarFormatError):
        list(iter_samples(io.BytesIO(bytes(data))))


@FAST
@given(samples)
def test_an_intact_archive_reads_back_every_member(items):
    got = [(key, dict(members)) for key, _, members in iter_samples(io.BytesIO(_archive(items)))]
    assert got == [(key, dict(members)) for key, members in items]


@FAST
@given(st.binary(max_size=256))
def test_any_idx_bytes_decode_sorted_or_fail_with_an_idx_error(data):
    try:
        offsets, end = decode_idx(data)
    except IdxError:
        return
    values = [*offsets, end]
    assert values == sorted(values) and len(values) * 8 == len(data)


@FAST
@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=20))
def test_idx_round_trips(values):
    values = sorted(values)
    assert decode_idx(encode_idx(values[:-1], values[-1])) == (values[:-1], values[-1])


VALID = {
    "format": "editstream-webdataset",
    "format_version": 1,
    "created_by": "x",
    "schema": "unified_edit",
    "layout": "rowgroup",
    "columns": [{"name": "image_list", "type": "list<item: binary>"}],
    "source_root": "/src",
    "drop_bad_rows": False,
    "num_bad_rows": 0,
    "source_files": [{"path": "a.parquet", "row_groups": [2], "key_stem": "a"}],
    "shards": [
        {
            "path": "a-rg00000.tar",
            "idx_path": "a-rg00000.tar.idx",
            "num_samples": 2,
            "num_bytes": 3072,
            "sha256": "0" * 64,
            "rows": [{"file": "a.parquet", "row_group": 0, "start": 0, "stop": 2}],
            "source_file": "a.parquet",
            "row_group": 0,
            "dropped": [],
        }
    ],
    "extra": {},
}


def test_the_valid_manifest_of_these_properties_is_valid():
    assert Manifest.from_dict(json.loads(json.dumps(VALID))).num_samples == 2


def _paths(d, prefix=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


PATHS = list(_paths(VALID))


@FAST
@given(st.sampled_from(PATHS), json_values)
def test_any_field_replaced_by_any_json_is_a_valid_manifest_or_a_manifest_error(path, value):
    data = json.loads(json.dumps(VALID))
    target = data
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    try:
        manifest = Manifest.from_dict(data)
    except ManifestError:
        return
    for shard in manifest.shards:  # whatever was accepted stays inside the root
        assert ".." not in shard.path.split("/") and not shard.path.startswith("/")


@FAST
@given(st.binary(max_size=512))
def test_any_manifest_file_is_read_or_a_manifest_error(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("m")
    (root / "manifest.json").write_bytes(data)
    with pytest.raises(ManifestError):
        Manifest.read(str(root))


def test_nan_rows_compare_equal_to_themselves():
    assert rows_equal({"x": [math.nan]}, {"x": [math.nan]}) and not rows_equal({"x": 1}, {"x": 1.0})
    assert rows_equal({"d": decimal.Decimal("1.5")}, {"d": decimal.Decimal("1.5")})

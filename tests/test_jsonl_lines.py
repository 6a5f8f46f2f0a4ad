"""JSONL lines are exactly what ``open(path, "r", encoding="utf-8").readlines()`` gives, from any storage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from editstream.io.lines import LineDecodeError, decode_lines, line_start_offsets, read_jsonl_lines

PIECES = st.lists(
    st.sampled_from(["a", "é", "{}", "\n", "\r", "\r\n", "\u2028", "\x85", "\x0c", "\ufeff", " ", '"x"']),
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(PIECES)
def test_lines_match_python_text_mode_and_ranges_decode_alone(tmp_path_factory, pieces):
    data = "".join(pieces).encode("utf-8")
    path = tmp_path_factory.mktemp("lines") / "x.jsonl"
    path.write_bytes(data)
    with open(path, encoding="utf-8") as f:
        want = f.readlines()
    assert decode_lines(data) == want
    assert read_jsonl_lines(str(path)) == want
    offsets = line_start_offsets(data)
    assert len(offsets) == len(want) + 1 and offsets[-1] == len(data)
    for i in range(len(want)):
        for j in range(i, len(want) + 1):
            assert decode_lines(data[offsets[i] : offsets[j]]) == want[i:j]


def test_invalid_utf8_names_the_file_and_the_byte(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"a": 1}\n' * 5000 + b'{"b": "\xff"}\n')  # past the text wrapper's first chunk
    with pytest.raises(LineDecodeError, match=r"bad\.jsonl: not valid utf-8 at byte 45007"):
        read_jsonl_lines(str(path))


def test_lines_from_s3_are_the_same(s3_bucket, tmp_path):
    from editstream.io import storage

    data = b'{"x": 1}\r\n\r{"y": 2}\n\n{"z": "\xc3\xa9"}'
    url = f"{s3_bucket.url}/d/x.jsonl"
    storage.write_bytes(url, data, s3_bucket.storage_options)
    (tmp_path / "x.jsonl").write_bytes(data)
    assert read_jsonl_lines(url, s3_bucket.storage_options) == read_jsonl_lines(str(tmp_path / "x.jsonl"))
    assert read_jsonl_lines(url, s3_bucket.storage_options) == ['{"x": 1}\n', "\n", '{"y": 2}\n', "\n", '{"z": "é"}']

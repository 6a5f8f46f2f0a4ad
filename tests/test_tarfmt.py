"""The tar writer/reader: deterministic bytes, stdlib/GNU tar compatibility, offsets and error classes."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile

import pytest
import xxhash

from editstream.format import tarblock, tarreader, tarwriter
from editstream.format.tarblock import (
    BLOCK,
    HeaderChecksumError,
    MalformedHeaderError,
    MemberTooLargeError,
    SampleOrderError,
    TarFormatError,
    TruncatedTarError,
)
from editstream.format.tarreader import iter_samples
from editstream.format.tarwriter import TarWriter

LONG_KEY = "k" * 140

SAMPLES = [
    ("a0", [("json", b'{"x": 1}'), ("img.0.jpg", bytes(range(256)) * 7)]),
    (LONG_KEY, [("json", b"{}"), ("deeply.nested.column.name.png", b"\x89PNG" + b"z" * 600)]),
    ("c2", [("bin", b"")]),
    ("d3", [("txt", b"x" * BLOCK)]),
]


def build(samples=SAMPLES) -> tuple[bytes, TarWriter]:
    buf = io.BytesIO()
    w = TarWriter(buf, buffer_size=1000)
    for key, members in samples:
        w.write_sample(key, members)
    w.close()
    return buf.getvalue(), w


def test_same_samples_give_identical_bytes_and_digest():
    a, wa = build()
    b, wb = build()
    assert a == b
    assert wa.digest_algorithm == "xxh3_128"  # the default
    assert wa.digest == wb.digest == xxhash.xxh3_128(a).hexdigest()
    assert wa.num_bytes == len(a)
    buf = io.BytesIO()
    ws = TarWriter(buf, buffer_size=1000, digest="sha256")
    for key, members in SAMPLES:
        ws.write_sample(key, members)
    ws.close()
    assert buf.getvalue() == a and ws.digest == hashlib.sha256(a).hexdigest()


def test_stdlib_tarfile_reads_members_with_fixed_metadata():
    data, _ = build()
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        infos = tf.getmembers()
        names = [i.name for i in infos]
        assert names == [
            "a0.img.0.jpg",
            "a0.json",
            f"{LONG_KEY}.deeply.nested.column.name.png",
            f"{LONG_KEY}.json",
            "c2.bin",
            "d3.txt",
        ]
        for info in infos:
            assert (info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode) == (0, 0, 0, "", "", 0o644)
        assert tf.extractfile("a0.img.0.jpg").read() == bytes(range(256)) * 7


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar not installed")
def test_gnu_tar_lists_every_member(tmp_path):
    data, _ = build()
    path = tmp_path / "s.tar"
    path.write_bytes(data)
    out = subprocess.run(["tar", "-tf", str(path)], check=True, capture_output=True, text=True).stdout.split()
    assert out[2] == f"{LONG_KEY}.deeply.nested.column.name.png"
    assert len(out) == 6


def test_offsets_point_at_each_sample_and_reader_agrees():
    data, w = build()
    samples = list(iter_samples(io.BytesIO(data)))
    assert [s[0] for s in samples] == [k for k, _ in SAMPLES]
    assert [s[1] for s in samples] == w.offsets
    for (_key, members), (_, _, got) in zip(SAMPLES, samples):
        assert got == dict(members)
    # Reading from any sample's offset yields the rest of the archive.
    rest = list(iter_samples(io.BytesIO(data), start_offset=w.offsets[2]))
    assert [s[0] for s in rest] == ["c2", "d3"]
    # A byte range [offset, next offset) holds exactly one sample.
    one = list(iter_samples(io.BytesIO(data), start_offset=w.offsets[1], end_offset=w.offsets[2]))
    assert [s[0] for s in one] == [LONG_KEY]
    assert w.end_offset == len(data) - 2 * BLOCK


def test_reader_accepts_pax_and_directories_from_stdlib_writer():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        d = tarfile.TarInfo("dir")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        for name, payload in [
            ("dir/" + "p" * 120 + ".json", b"[1]"),
            ("dir/" + "p" * 120 + ".txt", b"hi"),
            ("dir/q.txt", "é".encode()),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
    samples = list(iter_samples(io.BytesIO(buf.getvalue())))
    assert [(k, sorted(m)) for k, _, m in samples] == [("dir/" + "p" * 120, ["json", "txt"]), ("dir/q", ["txt"])]


def _members(samples) -> int:
    """How many members the samples hold."""
    return sum(len(members) for _, _, members in samples)


def test_truncated_archive_raises_truncated_error_at_every_cut():
    data, w = build()
    for cut in (w.offsets[1] + 100, w.offsets[1] + BLOCK + 10, w.end_offset, len(data) - 2 * BLOCK + 3):
        with pytest.raises(TruncatedTarError):
            list(iter_samples(io.BytesIO(data[:cut])))


def test_flipped_header_byte_is_a_checksum_error():
    data, w = build()
    bad = bytearray(data)
    bad[w.offsets[2] + 3] ^= 0x01  # inside the name field of c2's header
    with pytest.raises(HeaderChecksumError) as info:
        list(iter_samples(io.BytesIO(bytes(bad)), source="shard-x.tar"))
    assert "shard-x.tar" in str(info.value) and str(w.offsets[2]) in str(info.value)


def test_member_size_cap():
    data, _ = build()
    with pytest.raises(MemberTooLargeError):
        list(iter_samples(io.BytesIO(data), max_member_size=1000))
    assert _members(iter_samples(io.BytesIO(data), max_member_size=256 * 7)) == 6


def test_malformed_size_field():
    block = bytearray(tarwriter._header(b"a.txt", 5, b"0"))
    block[124:136] = b"zzzzzzzzzzz\0"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    with pytest.raises(MalformedHeaderError):
        list(iter_samples(io.BytesIO(bytes(block) + b"\0" * 2048)))


def test_error_classes_share_one_base():
    for cls in (TruncatedTarError, HeaderChecksumError, MemberTooLargeError, MalformedHeaderError, SampleOrderError):
        assert issubclass(cls, TarFormatError)


def test_non_contiguous_and_duplicate_members_are_rejected():
    buf = io.BytesIO()
    for name in ("a.json", "b.json", "a.txt"):
        for chunk in tarwriter.member_bytes(name, b"1"):
            buf.write(chunk)
    buf.write(tarblock.END_OF_ARCHIVE)
    with pytest.raises(SampleOrderError, match="not contiguous"):
        list(iter_samples(io.BytesIO(buf.getvalue())))
    buf = io.BytesIO()
    for name in ("a.json", "a.json"):
        for chunk in tarwriter.member_bytes(name, b"1"):
            buf.write(chunk)
    buf.write(tarblock.END_OF_ARCHIVE)
    with pytest.raises(SampleOrderError, match="twice"):
        list(iter_samples(io.BytesIO(buf.getvalue())))


def test_writer_rejects_bad_keys_and_duplicate_members():
    w = TarWriter(io.BytesIO())
    with pytest.raises(ValueError, match="invalid sample key 'a.b'"):
        w.write_sample("a.b", [("json", b"")])
    with pytest.raises(ValueError, match="sample 'a' has two members named 'json'"):
        w.write_sample("a", [("json", b""), ("json", b"x")])
    with pytest.raises(ValueError, match="sample 'a' has no members"):
        w.write_sample("a", [])


def test_large_size_uses_base256_and_round_trips():
    field = tarwriter._octal(2**40, 12)
    assert field[0] == 0x80
    assert tarreader._parse_number(field, "size", "x", 0) == 2**40
    assert tarreader._parse_number(tarwriter._octal(1234, 12), "size", "x", 0) == 1234


class ShortReads(io.RawIOBase):
    """A non-seekable stream that returns at most 7 bytes per read (like a socket)."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = 7 if n < 0 else min(n, 7)
        out = bytes(self._data[self._pos : self._pos + n])
        self._pos += len(out)
        return out


def test_reader_handles_short_reads_on_unseekable_streams():
    data, _ = build()
    assert [k for k, _, _ in iter_samples(ShortReads(data))] == [k for k, _ in SAMPLES]


def test_background_writer_gives_the_same_bytes_and_surfaces_write_errors(tmp_path):
    data, _ = build()
    path = tmp_path / "bg.tar"
    with open(path, "wb") as f, TarWriter(f, buffer_size=600, background=True) as w:
        for key, members in SAMPLES:
            w.write_sample(key, members)
    assert path.read_bytes() == data

    class Broken(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"), TarWriter(Broken(), buffer_size=600, background=True) as w:
        for key, members in SAMPLES * 3:
            w.write_sample(key, members)

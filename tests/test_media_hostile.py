"""Hostile media on the metadata + media on-ramp: an edited or stale archive index, a member bomb, members
that cannot be read (a name not in UTF-8, encrypted zip members), FIFOs, and split parts named in every way
a download leaves them; each a located drop or a clear refusal, never wrong bytes."""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from editstream.adapters import adapt
from editstream.data.media import ArchiveMedia, MemberIndex, open_media
from helpers import run_cli
from hub_shapes import png
from test_adapters import chains_of


def _tar(path: Path, members: dict[str, bytes], mode: str = "w") -> Path:
    with tarfile.open(path, mode, format=tarfile.GNU_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _dataset(root: Path, media: str, pairs: list[tuple[str, str]]) -> Path:
    """``root/edits.jsonl`` naming ``pairs`` of images, and a mapping reading them from ``media``."""
    root.mkdir(parents=True, exist_ok=True)
    lines = [{"a": a, "b": b, "t": f"edit {k}"} for k, (a, b) in enumerate(pairs)]
    (root / "edits.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    mapping = root.parent / f"{root.name}.yaml"
    mapping.write_text(
        f"kind: unified_edit\nmetadata: [edits.jsonl]\nmedia: ['{media}']\nimages: [a, b]\ninstructions: [t]\n"
    )
    return mapping


IMAGES = {f"img/{k}.png": png(700 + k) for k in range(4)}
PAIRS = [("img/0.png", "img/1.png"), ("img/2.png", "img/3.png")]
EXPECTED = [((png(700), png(701)), (("edit 0",),)), ((png(702), png(703)), (("edit 1",),))]


def test_an_edited_kept_index_is_rebuilt_never_serving_another_members_bytes(tmp_path):
    root = tmp_path / "ds"
    mapping = _dataset(root, "pics.tar", PAIRS)
    _tar(root / "pics.tar", IMAGES)
    adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    (kept,) = (tmp_path / "out" / "_editstream_media").glob("pics.tar.*.members.json")
    index = MemberIndex.loads(kept.read_bytes())
    members = {n: index[n] for n in index}
    members["img/0.png"], members["img/1.png"] = members["img/1.png"], members["img/0.png"]  # offsets swapped
    kept.write_bytes(MemberIndex.of(members).dumps(json.loads(kept.read_bytes()).get("identity")))
    media = ArchiveMedia([str(root / "pics.tar")], index_dir=str(tmp_path / "out" / "_editstream_media"))
    assert media.read("img/0.png") == png(700) and media.read("img/1.png") == png(701)
    done = adapt(str(root), str(tmp_path / "again"), mapping, progress=False)
    assert done["dropped"] == 0 and chains_of(tmp_path / "again") == EXPECTED


def test_a_zip_index_naming_another_member_is_rebuilt(tmp_path):
    with zipfile.ZipFile(tmp_path / "p.zip", "w") as zf:
        for name, data in IMAGES.items():
            zf.writestr(name, data)
    index_dir = str(tmp_path / "idx")
    ArchiveMedia([str(tmp_path / "p.zip")], index_dir=index_dir).close()
    (kept,) = Path(index_dir).glob("*.members.json")
    index = MemberIndex.loads(kept.read_bytes())
    members = {n: index[n] for n in index}
    members["img/0.png"], members["img/2.png"] = members["img/2.png"], members["img/0.png"]
    kept.write_bytes(MemberIndex.of(members).dumps(json.loads(kept.read_bytes()).get("identity")))
    media = ArchiveMedia([str(tmp_path / "p.zip")], index_dir=index_dir)
    assert [media.read(n) for n in IMAGES] == list(IMAGES.values())


def test_an_archive_changed_in_place_under_its_open_index_is_refused(tmp_path):
    path = _tar(tmp_path / "p.tar", IMAGES)
    media = ArchiveMedia([str(path)])
    changed = dict(reversed(list(IMAGES.items())))
    with open(path, "r+b") as f:  # same file (inode), other layout
        f.write(_tar(tmp_path / "q.tar", changed).read_bytes())
    with pytest.raises(OSError, match="changed while it was read"):
        media.read("img/0.png")


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_a_member_above_the_size_cap_drops_its_row_located_before_it_is_read(tmp_path, kind):
    root = tmp_path / "ds"
    pairs = [*PAIRS, ("img/0.png", "img/bomb.png")]
    _dataset(root, f"pics.{kind}", pairs)
    big = {**IMAGES, "img/bomb.png": bytes(3 << 20)}
    if kind == "zip":
        with zipfile.ZipFile(root / "pics.zip", "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in big.items():
                zf.writestr(name, data)
    else:
        _tar(root / "pics.tar.gz", big, "w:gz")
    media = open_media(str(root / f"pics.{kind}"), max_member_size=1 << 20)
    with pytest.raises(OSError, match=r"3,145,728 bytes, above the media member cap of 1,048,576"):
        media.read("img/bomb.png")
    from editstream.data.adapted.chains import BadValue, MediaDir

    with pytest.raises(BadValue) as dropped:
        MediaDir(None, mounts=[("", media)]).read("b", "img/bomb.png")
    assert dropped.value.code == "media_unreadable" and f"pics.{kind}" in dropped.value.reason
    assert MediaDir(None, mounts=[("", media)]).read("a", "img/0.png") == png(700)


def test_unreadable_members_are_located_drops_and_the_rest_converts(tmp_path):
    root = tmp_path / "ds"
    names = ["img/0.png", "img/1.png", "img/2.png", "img/3.png", "img/enc.png", "img/aes.png"]
    pairs = [*PAIRS, ("img/0.png", "img/enc.png"), ("img/1.png", "img/aes.png")]
    mapping = _dataset(root, "pics.zip", pairs)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("img/0.png", IMAGES["img/0.png"], zipfile.ZIP_BZIP2)
        zf.writestr("img/1.png", IMAGES["img/1.png"], zipfile.ZIP_LZMA)
        zf.writestr("img/2.png", IMAGES["img/2.png"], zipfile.ZIP_DEFLATED)
        zf.writestr("img/3.png", IMAGES["img/3.png"])
        zf.writestr("img/enc.png", b"x" * 100)
        zf.writestr("img/aes.png", b"y" * 100)
    data = bytearray(buf.getvalue())
    for name, method in (("img/enc.png", None), ("img/aes.png", 99)):
        for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # the local header and the directory entry alike
            at = _header_before(data, sig, name)
            flags = 6 if sig == b"PK\x03\x04" else 8
            struct.pack_into("<H", data, at + flags, struct.unpack_from("<H", data, at + flags)[0] | 1)
            if method is not None:
                struct.pack_into("<H", data, at + flags + 2, method)
    (root / "pics.zip").write_bytes(bytes(data))
    assert len(names) == 6
    done = adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    assert chains_of(tmp_path / "out") == EXPECTED
    located = sorted((d["file"], d["row"], d["code"]) for d in done["drops"])
    assert located == [("edits.jsonl", 2, "media_unreadable"), ("edits.jsonl", 3, "media_unreadable")]
    reasons = " ".join(d["reason"] for d in done["drops"])
    assert "img/enc.png" in reasons and "encrypted (traditional PKWARE)" in reasons and "encrypted (AES)" in reasons


def _header_before(data: bytearray, sig: bytes, name: str) -> int:
    """The offset of the zip header (local or directory entry) whose name is ``name``."""
    at = -1
    while True:
        at = data.index(sig, at + 1)
        length = struct.unpack_from("<H", data, at + (26 if sig == b"PK\x03\x04" else 28))[0]
        start = at + (30 if sig == b"PK\x03\x04" else 46)
        if bytes(data[start : start + length]) == name.encode():
            return at


def test_a_tar_member_name_not_in_utf8_does_not_stop_the_conversion(tmp_path):
    root = tmp_path / "ds"
    mapping = _dataset(root, "pics.tar", [*PAIRS, ("img/0.png", "img/caf\u00e9.png")])
    with tarfile.open(root / "pics.tar", "w", format=tarfile.GNU_FORMAT, encoding="latin-1") as tar:
        for name, data in {**IMAGES, "img/caf\u00e9.png": b"latin"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    done = adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    assert chains_of(tmp_path / "out") == EXPECTED
    assert [(d["file"], d["row"], d["code"]) for d in done["drops"]] == [("edits.jsonl", 2, "media_missing")]


def test_a_fifo_as_a_media_file_is_a_located_drop_and_as_an_archive_a_refusal(tmp_path):
    root = tmp_path / "ds"
    mapping = _dataset(root, "img", [*PAIRS, ("img/0.png", "img/pipe.png")])
    (root / "img").mkdir()
    for name, data in IMAGES.items():
        (root / name).write_bytes(data)
    os.mkfifo(root / "img" / "pipe.png")
    done = adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    assert chains_of(tmp_path / "out") == EXPECTED
    (drop,) = done["drops"]
    assert (drop["row"], drop["code"]) == (2, "media_unreadable") and "not a regular file" in drop["reason"]
    os.mkfifo(tmp_path / "pics.tar")
    with pytest.raises(OSError, match="pics.tar is not a regular file"):
        open_media(str(tmp_path / "pics.tar"))
    os.mkfifo(tmp_path / "x.tar.part1")
    with pytest.raises(OSError, match="x.tar.part1 is not a regular file"):
        open_media(str(tmp_path / "x.tar.part1"))


def _split(whole: bytes, folder: Path, names: list[str]) -> None:
    step = -(-len(whole) // len(names))
    for k, name in enumerate(names):
        (folder / name).write_bytes(whole[k * step : (k + 1) * step])


@pytest.mark.parametrize(
    ("stem", "suffixes"),
    [
        ("pics.tar", [f".part{k}" for k in range(1, 13)]),
        ("pics.tar", [f".{k:02d}" for k in range(12)]),
        ("PICS.TAR.GZ", [f".part{k}" for k in range(1, 4)]),
    ],
)
def test_split_parts_numbered_any_way_read_in_their_natural_order(tmp_path, stem, suffixes):
    root = tmp_path / "ds"
    mapping = _dataset(root, f"{stem}.*", PAIRS)
    whole = _tar(tmp_path / "whole", {"pad.bin": os.urandom(40_000), **IMAGES}, "w:gz" if "GZ" in stem else "w")
    _split(whole.read_bytes(), root, [stem + s for s in suffixes])
    done = adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    assert done["dropped"] == 0 and chains_of(tmp_path / "out") == EXPECTED


def test_a_joined_archive_beside_its_parts_is_read_alone_or_the_set_refused(tmp_path):
    root = tmp_path / "ds"
    mapping = _dataset(root, "pics.tar*", PAIRS)
    whole = _tar(root / "pics.tar", {**IMAGES, "pad.bin": os.urandom(40_000)})
    _split(whole.read_bytes(), root, ["pics.tar.part1", "pics.tar.part2"])
    done = adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    assert done["dropped"] == 0 and chains_of(tmp_path / "out") == EXPECTED
    (root / "pics.tar.part2").write_bytes(b"cut")
    refused = run_cli("convert", str(root), str(tmp_path / "out2"), "--mapping", str(mapping), "--to", "parquet")
    assert refused.returncode != 0 and "not the parts'" in refused.stderr and "pics.tar.part1" in refused.stderr


@pytest.mark.parametrize("name", ["pics.tar.xz", "pics.tar.bz2"])
def test_an_archive_of_a_kind_not_read_in_place_is_named_as_such(tmp_path, name):
    root = tmp_path / "ds"
    mapping = _dataset(root, name, PAIRS)
    _tar(root / name, IMAGES, "w:xz" if name.endswith("xz") else "w:bz2")
    refused = run_cli("convert", str(root), str(tmp_path / "out"), "--mapping", str(mapping), "--to", "parquet")
    assert refused.returncode != 0 and "cannot be read in place" in refused.stderr and name in refused.stderr


def test_upper_case_suffixes_are_archives_as_lower_case(tmp_path):
    root = tmp_path / "ds"
    mapping = _dataset(root, "PICS.ZIP", PAIRS)
    with zipfile.ZipFile(root / "PICS.ZIP", "w") as zf:
        for name, data in IMAGES.items():
            zf.writestr(name, data)
    done = adapt(str(root), str(tmp_path / "out"), mapping, progress=False)
    assert done["dropped"] == 0 and chains_of(tmp_path / "out") == EXPECTED

"""Media read in place: a folder, a tar, a tar.gz whole or split into parts (by GNU split), a zip,
locally and on S3; archives indexed once (kept in an index folder) and read member by member."""

from __future__ import annotations

import gc
import io
import pickle
import subprocess
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from editstream.data import media as m
from editstream.data.media import ArchiveMedia, FolderMedia, MediaMissing, open_media


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    """A few members, one of them bigger than a gzip seek-point interval would be in a small test."""
    rng = np.random.default_rng(3)
    return {
        "images/a.png": rng.bytes(3000),
        "images/sub/b.jpg": rng.bytes(70_000),
        "c.webp": b"tiny",
        "big/d.bin": rng.bytes(1_500_000),
    }


def _tar(path: Path, files: dict[str, bytes], mode: str = "w", prefix: str = "") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(scope="module")
def archives(tmp_path_factory, files) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("media")
    out = {"tar": _tar(root / "images.tar", files), "tgz": _tar(root / "images.tar.gz", files, "w:gz", "./")}
    with zipfile.ZipFile(root / "images.zip", "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    out["zip"] = root / "images.zip"
    folder = root / "folder"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    out["folder"] = folder
    split_dir = root / "split"
    split_dir.mkdir()
    _tar(split_dir / "all.tar.gz", files, "w:gz")
    subprocess.run(
        ["split", "-b", "400000", "-d", "-a", "3", "all.tar.gz", "all.tar.gz.part"], cwd=split_dir, check=True
    )
    subprocess.run(["split", "-b", "300000", "all.tar.gz", "all.tar.gz."], cwd=split_dir, check=True)
    (split_dir / "all.tar.gz").unlink()
    out["parts"] = split_dir / "all.tar.gz.part000"
    out["aa"] = split_dir / "all.tar.gz.aa"
    return out


@pytest.mark.parametrize("which", ["tar", "tgz", "zip", "folder", "parts", "aa"])
def test_every_member_reads_back_by_its_name(archives, files, which):
    source = open_media(str(archives[which]))
    assert sorted(source.names()) == sorted(files)
    for name, data in files.items():
        assert source.read(name) == data
    with pytest.raises(MediaMissing):
        source.read("images/nope.png")


def test_split_parts_are_found_in_order_and_read_as_one_stream(archives):
    parts = m.split_parts(str(archives["parts"]))
    assert [p.rsplit(".", 1)[-1] for p in parts] == ["part000", "part001", "part002", "part003"]
    lettered = [p.rsplit(".", 1)[-1] for p in m.split_parts(str(archives["aa"]))]
    assert lettered == [f"a{c}" for c in "abcdefghij"[: len(lettered)]] and len(lettered) > 4
    assert isinstance(open_media(str(archives["aa"])), ArchiveMedia)
    assert m.is_split_part("x.tar.gz.part-ab") and m.is_split_part("x.zip.003") and not m.is_split_part("x.tar.gz")


def test_an_archive_is_indexed_once_and_the_index_is_kept(archives, files, tmp_path, monkeypatch):
    first = open_media(str(archives["tgz"]), index_dir=str(tmp_path / "index"))
    assert first.read("images/sub/b.jpg") == files["images/sub/b.jpg"]
    kept = sorted(p.name for p in (tmp_path / "index").iterdir())
    assert [k.rsplit(".", 2)[-2:] for k in kept] == [["members", "json"], ["tar", "gzidx"]] or len(kept) == 2
    assert any(k.endswith(".members.json") for k in kept) and any(k.endswith(".gzidx") for k in kept)

    def no_rescan(self):
        raise AssertionError("the archive was scanned again")

    monkeypatch.setattr(ArchiveMedia, "_scan", no_rescan)
    again = open_media(str(archives["tgz"]), index_dir=str(tmp_path / "index"))
    assert again.read("big/d.bin") == files["big/d.bin"]


@pytest.mark.parametrize("which", ["tar", "tgz", "zip", "aa"])
def test_an_archive_travels_to_another_process_with_its_index(archives, files, which, monkeypatch):
    """A process pool pickles the media with its task: the copy reopens the archive, keeps the index."""
    source = open_media(str(archives[which]))
    assert source.read("c.webp") == b"tiny"  # the original has read once: its file is open and moved

    def no_rescan(self):
        raise AssertionError("the archive was scanned again")

    monkeypatch.setattr(ArchiveMedia, "_scan", no_rescan)
    copy = pickle.loads(pickle.dumps(source))
    for name, data in files.items():
        assert copy.read(name) == data
    assert source.read("images/a.png") == files["images/a.png"]


def test_a_folder_refuses_names_outside_it(archives):
    from editstream.format.sft import MediaOutsideError

    with pytest.raises(MediaOutsideError):
        FolderMedia(str(archives["folder"])).read("../images.tar")


@pytest.mark.s3
def test_archives_on_s3_read_in_place(s3_bucket, archives, files):
    import fsspec

    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    for part in m.split_parts(str(archives["parts"])):
        fs.put(part, f"{s3_bucket.url}/media/{Path(part).name}")
    fs.put(str(archives["zip"]), f"{s3_bucket.url}/media/images.zip")
    so = s3_bucket.storage_options
    for url in (f"{s3_bucket.url}/media/all.tar.gz.part002", f"{s3_bucket.url}/media/images.zip"):
        source = open_media(url, so)
        assert source.read("big/d.bin") == files["big/d.bin"] and source.read("c.webp") == b"tiny"


def _copy_parts(archives, tmp_path: Path, which: str) -> list[Path]:
    parts = [Path(p) for p in m.split_parts(str(archives[which]))]
    for part in parts:
        (tmp_path / part.name).write_bytes(part.read_bytes())
    return [tmp_path / part.name for part in parts]


@pytest.mark.parametrize("which, gone", [("parts", 1), ("aa", 2), ("aa", 0)])
def test_a_split_archive_missing_a_part_is_refused_naming_it(archives, tmp_path, which, gone):
    parts = _copy_parts(archives, tmp_path, which)
    parts[gone].unlink()
    left = next(p for p in parts if p.exists())
    with pytest.raises(FileNotFoundError) as missing:
        open_media(str(left))
    assert parts[gone].name in str(missing.value) and "missing" in str(missing.value)


def test_a_truncated_part_is_one_error_naming_the_archive_its_parts_and_sizes(archives, tmp_path):
    parts = _copy_parts(archives, tmp_path, "aa")
    parts[-1].write_bytes(parts[-1].read_bytes()[:-5000])
    with pytest.raises(OSError) as cut:
        open_media(str(parts[0]))
    text = str(cut.value)
    assert "all.tar.gz" in text and f"{len(parts)} part" in text and "cut short" in text and "\n" not in text


def test_a_broken_seek_point_file_is_rebuilt_not_fatal(archives, files, tmp_path):
    index = tmp_path / "index"
    open_media(str(archives["tgz"]), index_dir=str(index))
    (seek_points,) = index.glob("*.gzidx")
    seek_points.write_bytes(seek_points.read_bytes()[:20])  # what a process killed while writing it leaves
    again = open_media(str(archives["tgz"]), index_dir=str(index))
    assert again.read("big/d.bin") == files["big/d.bin"]


def _open_fds() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def test_a_split_archive_holds_one_part_open_at_a_time(archives, files):
    gc.collect()  # an earlier test's archive left to the collector would close its file mid-count
    before = _open_fds()
    source = open_media(str(archives["aa"]))
    assert len(m.split_parts(str(archives["aa"]))) > 3
    assert [source.read(name) for name in files] == list(files.values())
    assert _open_fds() - before <= 1
    source.close()
    assert _open_fds() == before


def test_indexing_an_archive_shows_its_progress_once(archives, tmp_path, capfd):
    open_media(str(archives["parts"]), index_dir=str(tmp_path / "index"))
    shown = capfd.readouterr().err
    assert "index all.tar.gz:" in shown and "MiB (100%)" in shown
    open_media(str(archives["parts"]), index_dir=str(tmp_path / "index"))
    assert "index all.tar.gz" not in capfd.readouterr().err  # read from the index kept


def test_a_zip_member_is_read_by_lookup_not_a_scan_of_its_directory(tmp_path, monkeypatch):
    """Reading every member of a zip of many looks each one up: its directory is walked once, to index it."""
    names = [f"images/{k:04d}.png" for k in range(300)]
    with zipfile.ZipFile(tmp_path / "many.zip", "w") as zf:
        for name in names:
            zf.writestr(name, name.encode())
    walks = []
    real = zipfile.ZipFile.infolist
    monkeypatch.setattr(zipfile.ZipFile, "infolist", lambda self: walks.append(1) or real(self))
    source = open_media(str(tmp_path / "many.zip"))
    assert [source.read(n) for n in names] == [n.encode() for n in names]
    assert len(walks) == 1


def test_a_kept_member_index_of_many_members_loads_compactly_and_finds_every_member(tmp_path):
    """Each process loads an archive's member index: flat arrays, not a Python object per member."""
    import tracemalloc

    names = [f"images/{k:06d}.png" for k in range(20_000)]
    with tarfile.open(tmp_path / "many.tar", "w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(name[-7:-4].encode()))
    open_media(str(tmp_path / "many.tar"), index_dir=str(tmp_path / "index")).close()
    tracemalloc.start()
    source = open_media(str(tmp_path / "many.tar"), index_dir=str(tmp_path / "index"))
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert held < 50 * len(names)  # names' bytes and three 8-byte numbers a member; a dict of tuples: ~250
    assert source.names() == names and all(source.read(n) == n[-7:-4].encode() for n in names[::997])
    with pytest.raises(MediaMissing):
        source.read("images/000000.pn")
    source.close()


def test_a_small_member_of_a_gzipped_archive_reads_little_more_than_itself(tmp_path):
    """A read decompresses from its seek point to its member, not a read-ahead of many MiB."""
    rng = np.random.default_rng(5)
    members = {"first.txt": b"tiny", **{f"fill/{k}.bin": rng.bytes(1 << 20) for k in range(8)}}
    _tar(tmp_path / "big.tar.gz", members, "w:gz")
    open_media(str(tmp_path / "big.tar.gz"), index_dir=str(tmp_path / "index")).close()
    source = open_media(str(tmp_path / "big.tar.gz"), index_dir=str(tmp_path / "index"))

    def bytes_read() -> int:
        return next(int(line.split()[1]) for line in open("/proc/self/io") if line.startswith("rchar"))

    before = bytes_read()
    assert source.read("first.txt") == b"tiny"
    assert bytes_read() - before < 2 << 20  # the archive holds 8 MiB
    source.close()

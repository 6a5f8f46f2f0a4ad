"""16-bit greyscale PNGs decode to (almost) white, as in the reference, and report.json says so.

Pillow opens a 16-bit greyscale PNG (IHDR colour type 0, bit depth 16) as mode ``I;16`` and its
RGB conversion clips every value at 255. The loader keeps those pixels on both backends (parity
with the reference); the converter lists each such image under ``image_notes`` in report.json,
and a conversion without them writes the report it always wrote.
"""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.conversion import PROGRESS_DIR, convert
from editstream.format import manifest as mf
from editstream.format.images import GREY16_NOTE, image_decode_note
from editstream.kinds.t2i_pretrain.synth import CAPTIONED_IMAGE_ARROW
from editstream.kinds.unified_edit.synth import EDIT_CHAIN_ARROW
from editstream.loader.decode import decode_image
from helpers import VAE, VIT, paused_convert_command, run_cli

REPORT_KEYS_BEFORE = ["format_version", "schema", "drop_bad_rows", "num_bad_rows", "note", "bad_rows"]
"""report.json's keys, in order, as every conversion wrote them before image notes existed."""


def grey16_png(seed: int = 0, low: int = 1000) -> bytes:
    """A 16-bit greyscale PNG written by Pillow, every value in ``[low, 65535]`` (above 255)."""
    values = np.random.default_rng(seed).integers(low, 65536, (24, 32), dtype=np.uint16)
    buf = io.BytesIO()
    Image.fromarray(values).save(buf, format="PNG")
    data = buf.getvalue()
    assert (data[24], data[25]) == (16, 0), "IHDR: bit depth 16, colour type 0 (greyscale)"
    return data


def rgb8_png(seed: int = 0) -> bytes:
    values = np.random.default_rng(seed).integers(0, 200, (24, 32, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(values).save(buf, format="PNG")
    return buf.getvalue()


def raw_png(width: int, height: int, depth: int, colour: int, pixels: bytes) -> bytes:
    """A PNG built chunk by chunk (Pillow writes no 16-bit RGB or grey + alpha), filter 0 on every line."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    stride = len(pixels) // height
    lines = b"".join(b"\x00" + pixels[y * stride : (y + 1) * stride] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(lines)) + chunk(b"IEND", b"")


def edit_row(i: int, images: list[bytes]) -> dict[str, Any]:
    return {
        "row_id": str(i),
        "image_list": images,
        "instruction_list": [["make it blue"]] * (len(images) - 1),
        "source": None,
        "score": 0.5,
        "tags": [],
        "meta_blob": None,
    }


def write_edit_source(root: Path, with_grey16: bool) -> Path:
    """Six edit chains in three row groups (three shards); with ``with_grey16`` rows 1 and 4 hold
    16-bit greyscale PNGs (row 1's second image, both of row 4's), the same rows otherwise 8-bit."""
    rows = [edit_row(i, [rgb8_png(2 * i), rgb8_png(2 * i + 1)]) for i in range(6)]
    if with_grey16:
        rows[1]["image_list"][1] = grey16_png(1)
        rows[4]["image_list"] = [grey16_png(4), grey16_png(5)]
    root.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=EDIT_CHAIN_ARROW), root / "a.parquet", row_group_size=2)
    return root


def read_report(dst: Path) -> dict[str, Any]:
    return json.loads((dst / mf.REPORT_NAME).read_text())


# --------------------------------------------------------------------------- the header check


def test_only_16_bit_greyscale_pngs_get_a_note_and_the_note_is_true() -> None:
    grey16 = grey16_png()
    assert image_decode_note(grey16) == GREY16_NOTE
    assert np.asarray(decode_image(grey16)).min() == 255  # values 1000..65535: pure white after decoding
    white16 = raw_png(2, 1, 16, 0, struct.pack(">HH", 65535, 256))
    assert image_decode_note(white16) == GREY16_NOTE
    assert image_decode_note(memoryview(white16)) == GREY16_NOTE
    assert image_decode_note(bytearray(white16)) == GREY16_NOTE

    # 16-bit RGB and grey + alpha decode to the right 8-bit values: no note.
    rgb16 = raw_png(1, 1, 16, 2, struct.pack(">HHH", 0x8000, 0x4000, 0x1000))
    la16 = raw_png(1, 1, 16, 4, struct.pack(">HH", 0x8000, 0xFFFF))
    assert image_decode_note(rgb16) is None and np.asarray(decode_image(rgb16)).tolist() == [[[128, 64, 16]]]
    assert image_decode_note(la16) is None and np.asarray(decode_image(la16)).tolist() == [[[128, 128, 128]]]
    grey8 = raw_png(1, 1, 8, 0, b"\x80")
    assert image_decode_note(grey8) is None
    for not_png in (rgb8_png()[:20], b"", None, "png", b"\xff\xd8\xff" + bytes(40)):
        assert image_decode_note(not_png) is None


# --------------------------------------------------------------------------- the converter's report


def test_report_json_flags_each_16_bit_greyscale_png_with_its_location(tmp_path: Path) -> None:
    src = write_edit_source(tmp_path / "src", with_grey16=True)
    summary = convert(str(src), str(tmp_path / "dst"), workers=1, progress=False)
    report = read_report(tmp_path / "dst")

    assert summary["num_bad_rows"] == 0 and report["bad_rows"] == []  # notes are not bad rows
    assert summary["num_image_notes"] == 3 and report["num_image_notes"] == 3
    assert list(report) == [*REPORT_KEYS_BEFORE, "num_image_notes", "image_notes"]
    where = [{k: v for k, v in n.items() if k != "note"} for n in report["image_notes"]]
    assert where == [
        {"file": "a.parquet", "row_group": 0, "row": 1, "key": "a-rg00000-r0000001", "shard": "a-rg00000.tar"},
        {"file": "a.parquet", "row_group": 2, "row": 0, "key": "a-rg00002-r0000000", "shard": "a-rg00002.tar"},
        {"file": "a.parquet", "row_group": 2, "row": 0, "key": "a-rg00002-r0000000", "shard": "a-rg00002.tar"},
    ]
    assert [n["note"] for n in report["image_notes"]] == [
        f"image 1: {GREY16_NOTE}",
        f"image 0: {GREY16_NOTE}",
        f"image 1: {GREY16_NOTE}",
    ]
    assert {s.path for s in mf.Manifest.read(str(tmp_path / "dst")).shards} >= {"a-rg00000.tar", "a-rg00002.tar"}


def test_a_conversion_without_16_bit_greyscale_pngs_writes_the_report_it_always_wrote(tmp_path: Path) -> None:
    src = write_edit_source(tmp_path / "src", with_grey16=False)
    summary = convert(str(src), str(tmp_path / "dst"), workers=1, progress=False)
    report_bytes = (tmp_path / "dst" / mf.REPORT_NAME).read_bytes()
    report = json.loads(report_bytes)

    assert list(report) == REPORT_KEYS_BEFORE and "num_image_notes" not in summary
    # The bytes the report had before notes existed: the same keys, dumped the same way.
    before = {k: report[k] for k in REPORT_KEYS_BEFORE}
    assert report_bytes == (json.dumps(before, indent=1) + "\n").encode()
    assert not (tmp_path / "dst" / PROGRESS_DIR).exists()


def test_a_text_to_image_row_with_a_16_bit_greyscale_png_is_flagged(tmp_path: Path) -> None:
    rows = [
        {"row_id": "0", "image": rgb8_png(), "captions": json.dumps({"short": "a cat"})},
        {"row_id": "1", "image": grey16_png(), "captions": json.dumps({"short": "a grey cat"})},
    ]
    (tmp_path / "src").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=CAPTIONED_IMAGE_ARROW), tmp_path / "src" / "t.parquet")
    summary = convert(str(tmp_path / "src"), str(tmp_path / "dst"), workers=1, progress=False)

    report = read_report(tmp_path / "dst")
    assert summary["schema"] == "t2i_pretrain" and summary["num_bad_rows"] == 0
    assert report["image_notes"] == [
        {
            "file": "t.parquet",
            "row_group": 0,
            "row": 1,
            "key": "t-rg00000-r0000001",
            "shard": "t-rg00000.tar",
            "note": f"image: {GREY16_NOTE}",
        }
    ]


# --------------------------------------------------------------------------- the loader keeps the reference's pixels


def edit_dataset(root: Path, backend: str) -> UnifiedEditIterableDataset:
    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [str(root)],
        [1],
        None,
        num_workers=0,
        backend=backend,
        image_dtype="uint8",
    )


def first_samples(root: Path, backend: str, n: int) -> list[dict[str, Any]]:
    it = iter(edit_dataset(root, backend))
    return [next(it) for _ in range(n)]


def test_both_backends_keep_the_references_white_pixels(tmp_path: Path) -> None:
    src = write_edit_source(tmp_path / "src", with_grey16=True)
    convert(str(src), str(tmp_path / "dst"), workers=1, progress=False)
    parquet = first_samples(src, "parquet", 6)
    wds = first_samples(tmp_path / "dst", "webdataset", 6)

    for a, b in zip(parquet, wds, strict=True):
        assert a["data_indexes"] == b["data_indexes"]
        assert [t.tolist() for t in a["image_tensor_list"]] == [t.tolist() for t in b["image_tensor_list"]]
    # Per sample, which image tensors are pure white: row 4's two 16-bit images (input and edit),
    # row 1's 16-bit edit after its 8-bit input; the other four rows keep their own 8-bit pixels.
    white = sorted(tuple(int(t.min()) == 255 for t in s["image_tensor_list"]) for s in parquet)
    assert white == [(False, False, False)] * 4 + [(False, False, True), (True, True, True)]


# --------------------------------------------------------------------------- the command line, resume, repair


def test_editstream_convert_prints_and_records_the_notes(tmp_path: Path) -> None:
    src = write_edit_source(tmp_path / "src", with_grey16=True)
    result = run_cli("convert", str(src), str(tmp_path / "dst"), "--workers", "1", "--no-progress")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["num_image_notes"] == 3
    assert "3 images decode to other pixels than they hold" in result.stderr
    assert f"see image_notes in {tmp_path / 'dst' / mf.REPORT_NAME}" in result.stderr
    assert read_report(tmp_path / "dst")["num_image_notes"] == 3

    again = run_cli("convert", str(src), str(tmp_path / "dst"), "--workers", "1", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["already_done"] is True
    assert json.loads(again.stdout)["num_image_notes"] == 3 and "3 images decode" in again.stderr

    plain = run_cli("convert", str(write_edit_source(tmp_path / "plain", False)), str(tmp_path / "pdst"), "-q")
    assert plain.returncode == 0 and "num_image_notes" not in plain.stdout and "decode" not in plain.stderr


def test_a_killed_conversion_resumes_with_the_notes_of_its_finished_shards(tmp_path: Path) -> None:
    src = write_edit_source(tmp_path / "src", with_grey16=True)
    convert(str(src), str(tmp_path / "reference"), workers=1, progress=False)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        paused_convert_command(1, str(src), str(out), "--workers", "1", "--no-progress"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"paused\n"  # shard 0 done, shard 1 written
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = sorted(p for p in (out / PROGRESS_DIR).iterdir() if p.suffix == ".json")
    assert [p.name for p in records] == ["a-rg00000.tar.json"]  # shards are written in plan order
    assert "image_notes" in json.loads(records[0].read_bytes())["result"]  # shard 0's note is in its done record

    summary = convert(str(src), str(out), workers=1, progress=False)
    assert summary["skipped_shards"] == 1 and summary["num_image_notes"] == 3
    assert (out / mf.REPORT_NAME).read_bytes() == (tmp_path / "reference" / mf.REPORT_NAME).read_bytes()


def test_repairing_a_damaged_shard_keeps_the_notes_of_the_others(tmp_path: Path) -> None:
    src = write_edit_source(tmp_path / "src", with_grey16=True)
    dst = tmp_path / "dst"
    convert(str(src), str(dst), workers=1, progress=False)
    before = (dst / mf.REPORT_NAME).read_bytes()
    (dst / "a-rg00002.tar").write_bytes(b"torn")  # the shard of row group 2 is redone, 0 and 1 are kept

    summary = convert(str(src), str(dst), workers=1, progress=False)
    assert summary["converted_shards"] == 1 and summary["skipped_shards"] == 2
    assert (dst / mf.REPORT_NAME).read_bytes() == before


def test_a_vlm_sft_line_naming_a_16_bit_greyscale_png_is_flagged_by_line(tmp_path: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    (media / "ok.png").write_bytes(rgb8_png())
    (media / "grey.png").write_bytes(grey16_png())
    lines = [
        {
            "image": "ok.png",
            "conversations": [{"from": "human", "value": "<image>\nWhat?"}, {"from": "gpt", "value": "A."}],
        },
        {
            "image": "grey.png",
            "conversations": [{"from": "human", "value": "<image>\nWhy?"}, {"from": "gpt", "value": "B."}],
        },
    ]
    src = tmp_path / "chat.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    convert(str(src), str(tmp_path / "dst"), schema="vlm_sft", media_dir=str(media), workers=1, progress=False)

    (note,) = read_report(tmp_path / "dst")["image_notes"]
    assert note["file"] == "chat.jsonl" and note["line"] == 2 and "row_group" not in note
    assert note["note"] == f"media 'grey.png': {GREY16_NOTE}"

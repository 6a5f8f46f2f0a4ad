"""``editstream preview``: the pictures a user looks at, opened as a user's tools would open them.

The HTML is parsed (one section per record, every image embedded and decodable, the edit
instructions between the images); the PNG is loaded with Pillow. Converted roots, parquet
directories, foreign shards and vlm_sft JSONL all preview; a wrong output name or backend is
a usage error.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
from html.parser import HTMLParser

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from editstream.loader.decode import decode_image
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import error_lines, run_cli, synth_and_convert, write_foreign_shards


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections = 0
        self.images: list[bytes] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections += 1
        if tag == "img":
            src = attrs["src"]
            assert src.startswith("data:image/jpeg;base64,"), src[:40]  # embedded: the page needs no other file
            self.images.append(base64.b64decode(src.split(",", 1)[1]))

    def handle_data(self, data):
        self.text.append(data)


def parse(path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("preview")
    synth_and_convert(
        root / "edit", num_files=1, row_groups_per_file=2, rows_per_group=4, seed=9, corrupt_fraction=0.2, max_side=64
    )
    synth_and_convert(
        root / "t2i", schema="t2i_pretrain", num_files=1, row_groups_per_file=1, rows_per_group=4, seed=2, max_side=64
    )
    return root


def test_html_of_edit_chains(data, tmp_path):
    out = tmp_path / "edit.html"
    result = run_cli("preview", str(data / "edit" / "wds"), "-o", str(out), "-n", "5")
    assert result.returncode == 0, result.stderr
    page = parse(out)
    assert page.sections == 5
    for image in page.images:
        Image.open(io.BytesIO(image)).load()
    from editstream.conversion.inspect import find_sample

    first = find_sample(str(data / "edit" / "wds"), "part-00000-rg00000-r0000000")
    text = " ".join(page.text)
    assert first["instruction_list"][0][0] in text
    assert len(page.images) >= 2 * 5  # a chain has at least two images


def test_png_contact_sheet_from_parquet(data, tmp_path):
    out = tmp_path / "sheet.png"
    result = run_cli("preview", str(data / "edit" / "pq"), "-o", str(out), "-n", "4")
    assert result.returncode == 0, result.stderr
    with Image.open(out) as sheet:
        sheet.load()
        assert sheet.format == "PNG" and sheet.width >= 480 and sheet.height > 4 * 100


def test_t2i_foreign_and_vlm_sft(data, tmp_path):
    write_foreign_shards(tmp_path / "shards")
    vlm = write_synthetic_vlm_dataset(str(tmp_path / "vlm"), num_lines=8, video=False)
    cases = [
        ([str(data / "t2i" / "wds")], "caption"),
        ([str(tmp_path / "shards" / "shard-{000000..000001}.tar")], "json caption 0"),
        ([vlm["jsonl"], "--media-dir", vlm["media_dir"]], "human: "),
    ]
    for args, needle in cases:
        out = tmp_path / "p.html"
        result = run_cli("preview", *args, "-o", str(out), "-n", "3")
        assert result.returncode == 0, result.stderr
        page = parse(out)
        assert page.sections == 3 and page.images
        assert needle in " ".join(page.text)


def test_preview_mistakes(data, tmp_path):
    wrong_name = run_cli("preview", str(data / "edit" / "wds"), "-o", str(tmp_path / "x.jpg"))
    assert wrong_name.returncode == 2 and "name the output OUT.html or OUT.png" in wrong_name.stderr
    wrong_backend = run_cli(
        "preview", str(data / "edit" / "pq"), "--backend", "webdataset", "-o", str(tmp_path / "x.png")
    )
    assert wrong_backend.returncode == 2 and "use --backend parquet" in wrong_backend.stderr
    assert len(error_lines(wrong_backend)) == 2
    missing = run_cli("preview", str(tmp_path / "nothing"), "-o", str(tmp_path / "x.png"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def _alts_by_section(path) -> list[list[str]]:
    """The ``alt`` text of every image, section by section (the label a preview gives an image)."""
    page = path.read_text(encoding="utf-8")
    return [re.findall(r'<img [^>]*alt="([^"]*)"', section) for section in re.findall(r"<section.*?</section>", page)]


def test_a_frame_folder_that_exists_is_drawn_from_the_jsonl(tmp_path):
    """Read straight from the JSONL (as from a conversion), a frame folder shows its first frames."""
    vlm = write_synthetic_vlm_dataset(str(tmp_path / "vlm"), num_lines=6, video=False)
    with open(vlm["jsonl"], encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    folder_line = next(i for i, item in enumerate(lines) if str(item.get("video", "")).endswith("/"))
    frames = os.listdir(os.path.join(vlm["media_dir"], lines[folder_line]["video"]))
    out = tmp_path / "p.html"
    result = run_cli("preview", vlm["jsonl"], "--media-dir", vlm["media_dir"], "-o", str(out), "-n", "6")
    assert result.returncode == 0, result.stderr
    alts = _alts_by_section(out)[folder_line]
    assert alts == ["image"] * min(4, len(frames)), alts


def test_a_truncated_jpeg_is_drawn_as_the_loader_trains_on_it(tmp_path):
    """A JPEG cut in half decodes grey-filled in the loader (as in the reference): the preview says
    so instead of "undecodable"; bytes no decoder takes stay "undecodable"."""
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (64, 80, 3), dtype=np.uint8)).save(buf, format="JPEG")
    whole = buf.getvalue()
    assert decode_image(whole[: len(whole) // 2]).size == (80, 64)  # what the loader trains on
    src = tmp_path / "pq"
    src.mkdir()
    rows = {
        "image_list": [[whole, whole[: len(whole) // 2]], [whole, b"not an image"]],
        "instruction_list": [[["a"]], [["b"]]],
    }
    pq.write_table(pa.table(rows), src / "part-00000.parquet")
    out = tmp_path / "p.html"
    result = run_cli("preview", str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr
    truncated = "truncated: trained grey-filled"
    assert _alts_by_section(out) == [["image", truncated], ["image", "undecodable UnidentifiedImageError"]]


def test_a_huge_png_is_named_not_decoded_and_a_huge_text_is_cut(tmp_path):
    """A PNG over the drawing bound is described from its header alone (no pixel is decoded, so a
    preview's memory does not grow with it); a 30 MB instruction is shown cut, its length said."""
    import io as _io

    from PIL import Image

    from editstream.preview.record import Record
    from editstream.preview.render import MAX_TEXT, describe_image, to_html

    buf = _io.BytesIO()
    Image.new("L", (9000, 8000)).save(buf, format="PNG")  # 72 MP, a few hundred KB compressed
    thumb, label = describe_image(buf.getvalue())
    assert label == "9000x8000, not drawn" and max(thumb.size) <= 160
    big = Image.new("RGB", (2400, 1800), (10, 200, 30))
    buf = _io.BytesIO()
    big.save(buf, format="PNG")
    thumb, label = describe_image(buf.getvalue())
    assert label is None and thumb.size == (160, 120) and thumb.getpixel((80, 60)) == (10, 200, 30)
    page = to_html([Record("row 0", [], ["x" * 30_000_000])], "t")
    assert len(page) < 10_000 and f"+{30_000_000 - MAX_TEXT:,} characters" in page

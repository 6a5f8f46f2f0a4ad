#!/usr/bin/env python
"""MagicBrush (osunlp/MagicBrush) from its Hub layout to BAGEL edit chains: a script to copy.

MagicBrush stores one edit turn per row (img_id, turn_index, source_img, mask_img, instruction,
target_img); the turns of one session sit in different files and out of order. The built-in
``magicbrush`` adapter gathers each img_id's turns in turn_index order into one multi-turn chain
[source of turn 1, target 1, target 2, ...]. ``--to webdataset`` (default) also writes shards and
verifies them; ``--to parquet`` writes BAGEL's parquet + parquet_info.json only.

    huggingface-cli download osunlp/MagicBrush --repo-type dataset
    python converters/magicbrush.py \\
        ~/.cache/huggingface/hub/datasets--osunlp--MagicBrush/snapshots/*/data DST [--split train]

``--make-sample DIR`` writes a small synthetic dataset in MagicBrush's schema and HF-cache layout
(files symlinked into blobs/) and prints its data directory, to try the script (or the CLI) on.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import sys
from pathlib import Path
from typing import Any

from editstream.adapters import run_adapter
from editstream.conversion.verify import verify

SHAPES = ("circle", "square", "bar")
COLOURS = {"red": (220, 40, 40), "yellow": (240, 200, 30), "blue": (40, 90, 220), "white": (245, 245, 245)}
SCENES = ((90, 160, 90), (120, 170, 220), (200, 180, 140), (80, 80, 110))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", nargs="?", help="the dataset's data/ directory (the *.parquet files; symlinks are fine)")
    ap.add_argument("dst", nargs="?", help="output directory (shards, or BAGEL parquet with --to parquet)")
    ap.add_argument("--to", choices=["webdataset", "parquet"], default="webdataset")
    ap.add_argument("--split", default=None, help="only {split}-*.parquet (MagicBrush has train and dev)")
    ap.add_argument("--media-dir", default=None, help="where image paths resolve when a struct has no bytes")
    ap.add_argument("--workers", type=int, default=None, help="shard conversion processes (default: CPU count)")
    ap.add_argument("--make-sample", metavar="DIR", help="write a synthetic MagicBrush-shaped dataset to DIR and exit")
    return ap.parse_args(argv)


def _picture(background: tuple[int, int, int], shapes: list[tuple[str, str, int]]) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (128, 96), background)
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 70, 128, 96), fill=tuple(c // 2 for c in background))  # the ground
    for shape, colour, slot in shapes:
        x, y = 8 + 40 * slot, 24
        box = (x, y, x + 30, y + 30)
        if shape == "circle":
            draw.ellipse(box, fill=COLOURS[colour])
        elif shape == "square":
            draw.rectangle(box, fill=COLOURS[colour])
        else:
            draw.rectangle((x + 10, y - 10, x + 20, y + 40), fill=COLOURS[colour])
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _sessions(n: int, seed: int) -> list[dict[str, Any]]:
    """Rows in MagicBrush's schema: ``n`` sessions of 1-3 turns, each turn adding one shape."""
    rng = random.Random(seed)
    rows = []
    for s in range(n):
        background = SCENES[s % len(SCENES)]
        shapes: list[tuple[str, str, int]] = []
        for turn in range(1, 2 + s % 3):
            before = _picture(background, shapes)
            shape, colour = rng.choice(SHAPES), rng.choice(list(COLOURS))
            shapes = [*shapes, (shape, colour, turn - 1)]
            place = ("on the left", "in the middle", "on the right")[turn - 1]
            rows.append(
                {
                    "img_id": str(242679 + 131 * s),
                    "turn_index": turn,
                    "source_img": {"bytes": before, "path": None},
                    "mask_img": {"bytes": _picture((0, 0, 0), [(shape, "white", turn - 1)]), "path": None},
                    "instruction": f"add a {colour} {shape} {place}",
                    "target_img": {"bytes": _picture(background, shapes), "path": None},
                }
            )
    rng.shuffle(rows)  # as on the Hub: a session's turns in several files, out of order
    return rows


def make_sample(root: Path, sessions: int = 8, files: int = 2, seed: int = 0) -> Path:
    """A synthetic dataset in MagicBrush's schema, laid out like the HF cache; returns its data/ directory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema(
        [
            ("img_id", pa.string()),
            ("turn_index", pa.int32()),
            ("source_img", image),
            ("mask_img", image),
            ("instruction", pa.string()),
            ("target_img", image),
        ]
    )
    rows = _sessions(sessions, seed)
    data = root / "snapshots" / "0000000" / "data"
    data.mkdir(parents=True)
    (root / "blobs").mkdir()
    per_file = -(-len(rows) // files)
    for k in range(files):
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows[k * per_file : (k + 1) * per_file], schema=schema), buf)
        blob = hashlib.sha256(buf.getvalue()).hexdigest()
        (root / "blobs" / blob).write_bytes(buf.getvalue())
        (data / f"train-{k:05d}-of-{files:05d}.parquet").symlink_to(Path("..", "..", "..", "blobs", blob))
    return data


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.make_sample:
        print(make_sample(Path(args.make_sample)))
        return 0
    if not (args.src and args.dst):
        print("SRC and DST are required (or --make-sample DIR)", file=sys.stderr)
        return 2
    options: dict[str, Any] = {"workers": args.workers} if args.to == "webdataset" else {}
    result = run_adapter(
        args.src,
        args.dst,
        "magicbrush",
        to=args.to,
        split=args.split,
        media_dir=args.media_dir,
        progress=sys.stderr.isatty(),
        **options,
    )
    summary = {k: v for k, v in result["adapt"].items() if k != "drops"}  # drops: see adapt_report.json
    print(json.dumps(summary, indent=2))
    if args.to == "parquet":
        return 0
    report = verify(args.dst, workers=args.workers)
    print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

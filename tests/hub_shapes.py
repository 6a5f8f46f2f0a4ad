"""Parquet in the published Hub schemas and layouts of the six public edit datasets, for tests.

Each builder writes small parquet the way the Hub stores it: ``data/{split}-0000k-of-0000n.parquet``
in an HF-cache snapshot whose files are symlinks into ``blobs/``, Image columns as
``struct<bytes: binary, path: string>``, several files with several row groups, and for MagicBrush
the turns of a session scattered across files and out of turn order. Each returns the data
directory and the chains an adapter must produce from it.
"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""How the Hub's ``datasets`` library stores an Image feature in parquet."""


def png(i: int, side: int = 12) -> bytes:
    """A small PNG that differs for every ``i``."""
    img = Image.new("RGB", (side, side), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256))
    img.putpixel((0, 0), (i % 256, (i // 256) % 256, 7))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def hf_image(data: bytes | None, path: str | None = None) -> dict[str, Any]:
    return {"bytes": data, "path": path}


def write_hf_snapshot(
    root: Path, split: str, schema: pa.Schema, rows: list[dict[str, Any]], num_files: int, row_group_size: int
) -> Path:
    """``rows`` split over ``num_files`` files in an HF-cache snapshot; returns the snapshot's ``data`` dir.

    The files are written to ``blobs/<sha256>`` and linked as
    ``snapshots/<rev>/data/{split}-0000k-of-0000n.parquet -> ../../../blobs/<sha256>``.
    """
    data_dir = root / "snapshots" / "3f2c1e0" / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (root / "blobs").mkdir(exist_ok=True)
    per_file = -(-len(rows) // num_files)
    for k in range(num_files):
        chunk = rows[k * per_file : (k + 1) * per_file]
        buf = io.BytesIO()
        table = pa.Table.from_pylist(chunk, schema=schema)
        pq.write_table(table, buf, row_group_size=row_group_size)
        blob = hashlib.sha256(buf.getvalue()).hexdigest()
        (root / "blobs" / blob).write_bytes(buf.getvalue())
        link = data_dir / f"{split}-{k:05d}-of-{num_files:05d}.parquet"
        link.symlink_to(Path("..") / ".." / ".." / "blobs" / blob)
    return data_dir


Chain = tuple[tuple[bytes, ...], tuple[tuple[str, ...], ...]]


# --------------------------------------------------------------------------- the six datasets
def magicbrush(root: Path, n_sessions: int = 7) -> tuple[Path, list[Chain]]:
    schema = pa.schema(
        [
            ("img_id", pa.string()),
            ("turn_index", pa.int32()),
            ("source_img", IMAGE),
            ("mask_img", IMAGE),
            ("instruction", pa.string()),
            ("target_img", IMAGE),
        ]
    )
    rows, chains = [], []
    serial = 0
    for s in range(n_sessions):
        turns = 1 + s % 3
        images = [png(serial + t) for t in range(turns + 1)]
        serial += turns + 1
        texts = [f"session {s} turn {t + 1}: make it bluer" for t in range(turns)]
        chains.append((tuple(images), tuple((t,) for t in texts)))
        for t in range(turns):
            rows.append(
                {
                    "img_id": f"{100000 + s * 17}",
                    "turn_index": t + 1,
                    "source_img": hf_image(images[t], f"{s}-{t}-src.png"),
                    "mask_img": hf_image(png(9000 + serial + t), None),
                    "instruction": texts[t],
                    "target_img": hf_image(images[t + 1], f"{s}-{t}-tgt.png"),
                }
            )
    random.Random(3).shuffle(rows)  # sessions scattered over the files, turns out of order
    return write_hf_snapshot(root, "train", schema, rows, num_files=3, row_group_size=2), chains


def instructpix2pix(root: Path, n: int = 10) -> tuple[Path, list[Chain]]:
    schema = pa.schema(
        [
            ("original_prompt", pa.string()),
            ("original_image", IMAGE),
            ("edit_prompt", pa.string()),
            ("edited_prompt", pa.string()),
            ("edited_image", IMAGE),
        ]
    )
    rows, chains = [], []
    for i in range(n):
        a, b = png(2 * i), png(2 * i + 1)
        rows.append(
            {
                "original_prompt": f"a photo of cat {i}",
                "original_image": hf_image(a),
                "edit_prompt": f"turn cat {i} into a dog",
                "edited_prompt": f"a photo of dog {i}",
                "edited_image": hf_image(b),
            }
        )
        chains.append(((a, b), ((f"turn cat {i} into a dog",),)))
    return write_hf_snapshot(root, "train", schema, rows, num_files=2, row_group_size=3), chains


def ultraedit(root: Path, n: int = 9) -> tuple[Path, list[Chain]]:
    scores = ["clip_sim_source", "clip_sim_target", "clip_sim_dir", "clip_sim_image", "dinov2_sim", "ssim"]
    schema = pa.schema(
        [*[(c, pa.float64()) for c in scores]]
        + [
            ("source_caption", pa.string()),
            ("target_caption", pa.string()),
            ("idx", pa.int64()),
            ("edit_prompt", pa.string()),
            ("edit_object", pa.null()),
            ("source_image", IMAGE),
            ("edited_image", IMAGE),
            ("mask_image", pa.null()),
        ]
    )
    rows, chains = [], []
    for i in range(n):
        a, b = png(500 + 2 * i), png(501 + 2 * i)
        row: dict[str, Any] = {c: 0.1 * (i + k) for k, c in enumerate(scores)}
        row.update(
            source_caption=f"source {i}",
            target_caption=f"target {i}",
            idx=i,
            edit_prompt=f"add a hat to figure {i}",
            edit_object=None,
            source_image=hf_image(a),
            edited_image=hf_image(b),
            mask_image=None,
        )
        rows.append(row)
        chains.append(((a, b), ((f"add a hat to figure {i}",),)))
    return write_hf_snapshot(root, "FreeForm_0", schema, rows, num_files=3, row_group_size=2), chains


OMNI_TASKS = ["add", "removal", "swap", "style"]


def omniedit(root: Path, n: int = 12) -> tuple[Path, list[Chain]]:
    schema = pa.schema(
        [
            ("omni_edit_id", pa.string()),
            ("task", pa.string()),
            ("src_img", IMAGE),
            ("edited_img", IMAGE),
            ("edited_prompt_list", pa.list_(pa.string())),
            ("width", pa.int64()),
            ("height", pa.int64()),
            ("sc_score_1", pa.int64()),
            ("sc_score_2", pa.int64()),
            ("sc_reasoning", pa.string()),
            ("pq_score", pa.int64()),
            ("pq_reasoning", pa.string()),
            ("o_score", pa.float64()),
        ]
    )
    rows, chains = [], []
    for i in range(n):
        a, b = png(1000 + 2 * i), png(1001 + 2 * i)
        prompts = [f"edit {i} phrasing {k}" for k in range(1 + i % 3)]
        rows.append(
            {
                "omni_edit_id": f"omni-{i:04d}",
                "task": OMNI_TASKS[i % 4],
                "src_img": hf_image(a),
                "edited_img": hf_image(b),
                "edited_prompt_list": prompts,
                "width": 12,
                "height": 12,
                "sc_score_1": i % 10,
                "sc_score_2": (i + 3) % 10,
                "sc_reasoning": "fine",
                "pq_score": 7,
                "pq_reasoning": "sharp",
                "o_score": float(i % 10),
            }
        )
        chains.append(((a, b), (tuple(prompts),)))
    return write_hf_snapshot(root, "train", schema, rows, num_files=3, row_group_size=2), chains


def hqedit(root: Path, n: int = 8) -> tuple[Path, list[Chain]]:
    schema = pa.schema(
        [
            ("input", pa.string()),
            ("input_image", IMAGE),
            ("edit", pa.string()),
            ("inverse_edit", pa.string()),
            ("output", pa.string()),
            ("output_image", IMAGE),
        ]
    )
    rows, chains = [], []
    for i in range(n):
        a, b = png(2000 + 2 * i), png(2001 + 2 * i)
        rows.append(
            {
                "input": f"a red house {i}",
                "input_image": hf_image(a),
                "edit": f"paint house {i} blue",
                "inverse_edit": f"paint house {i} red",
                "output": f"a blue house {i}",
                "output_image": hf_image(b),
            }
        )
        chains.append(((a, b), ((f"paint house {i} blue",),)))
    return write_hf_snapshot(root, "train", schema, rows, num_files=2, row_group_size=3), chains


def anyedit(root: Path, n: int = 10) -> tuple[Path, list[Chain]]:
    schema = pa.schema(
        [
            ("image_id", pa.string()),
            ("edit_instruction", pa.string()),
            ("edit_type", pa.string()),
            ("image_file", IMAGE),
            ("edited_file", IMAGE),
            ("visual_input", IMAGE),
            ("input", pa.string()),
            ("output", pa.string()),
        ]
    )
    rows, chains = [], []
    for i in range(n):
        a, b = png(3000 + 2 * i), png(3001 + 2 * i)
        rows.append(
            {
                "image_id": f"any-{i}",
                "edit_instruction": f"remove object {i}",
                "edit_type": ["remove", "replace", "visual_sketch"][i % 3],
                "image_file": hf_image(a),
                "edited_file": hf_image(b),
                "visual_input": hf_image(png(3900 + i)) if i % 3 == 2 else None,
                "input": f"scene {i}",
                "output": f"scene {i} without the object",
            }
        )
        chains.append(((a, b), ((f"remove object {i}",),)))
    return write_hf_snapshot(root, "train", schema, rows, num_files=2, row_group_size=2), chains


DATASETS: dict[str, Callable[[Path], tuple[Path, list[Chain]]]] = {
    "magicbrush": magicbrush,
    "instructpix2pix": instructpix2pix,
    "ultraedit": ultraedit,
    "omniedit": omniedit,
    "hqedit": hqedit,
    "anyedit": anyedit,
}

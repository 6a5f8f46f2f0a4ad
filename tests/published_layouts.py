"""The metadata + archive layouts of GPT-Image-Edit-1.5M, ShareGPT-4o-Image, X2I and SEED-Data-Edit, for tests.

Each builder writes a small dataset the way its repository publishes it (see docs/adapters.md):
JSON / JSONL metadata, images in real archives: a gzipped tar cut into byte ranges
(``x.tar.gz.part001``, ``x.tar.gz.aa``, ``x.tar.gz.part-aa``) or plain tars. Each returns the
dataset root and the chains (image bytes, phrasings) an adapter must make of it, in order.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from hub_shapes import Chain, png


def tar_bytes(members: dict[str, bytes], gz: bool = True) -> bytes:
    """A tar (gzipped by default) of ``members`` (name -> bytes)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz" if gz else "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def split_into(data: bytes, stem: Path, suffixes: list[str]) -> list[Path]:
    """``data`` cut into ``len(suffixes)`` byte ranges written as ``stem + suffix`` (as ``split -b`` does)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    size = -(-len(data) // len(suffixes))
    paths = []
    for k, suffix in enumerate(suffixes):
        path = stem.parent / (stem.name + suffix)
        path.write_bytes(data[k * size : (k + 1) * size])
        paths.append(path)
    return paths


def gpt_image_edit(root: Path) -> tuple[Path, list[Chain], dict[str, Any]]:
    """``gpt-edit/{hqedit,ultraedit}.tar.gz.partNNN``, metadata inside at ``<task>/metadata/*.json``.

    hqedit/edit entry 2 names an output the archive lacks; entry 3 an input outside the archive."""
    by_file: dict[str, list[Chain]] = {}
    serial = 0
    for source, tasks, parts in (("hqedit", ("edit", "generate"), 3), ("ultraedit", ("add",), 1)):
        members: dict[str, bytes] = {}
        for task in tasks:
            entries: list[dict[str, Any]] = []
            chains = by_file.setdefault(f"gpt-edit/{task}/metadata/{source}_{task}.json", [])
            for k in range(4):
                serial += 1
                a, b, text = png(serial), png(500 + serial), f"{source} {task} edit {k}"
                ident = f"{source}_{task}_{k:05d}"
                members[f"{task}/input/{ident}.png"] = a
                members[f"{task}/output/{ident}.png"] = b
                entry = {"id": ident, "dataset_source": source, "task": task, "input": f"input/{ident}.png"}
                entry |= {"output": f"output/{ident}.png", "instruction": text, "instruction_type": "original"}
                entry["input_description"] = "a picture"
                if (source, task, k) == ("hqedit", "edit", 2):
                    del members[f"{task}/output/{ident}.png"]
                elif (source, task, k) == ("hqedit", "edit", 3):
                    entry["input"] = "../../../outside.png"
                else:
                    chains.append(((a, b), ((text,),)))
                entries.append(entry)
            members[f"{task}/metadata/{source}_{task}.json"] = json.dumps(entries).encode()
        split_into(
            tar_bytes(members), root / "gpt-edit" / f"{source}.tar.gz", [f".part{k:03d}" for k in range(1, parts + 1)]
        )
    (root / "README.md").write_text("GPT-Image-Edit-1.5M\n")
    order = [chain for name in sorted(by_file) for chain in by_file[name]]  # metadata files are read by name
    drops = {
        "missing": ("gpt-edit/edit/metadata/hqedit_edit.json", 2),
        "outside": ("gpt-edit/edit/metadata/hqedit_edit.json", 3),
    }
    return root, order, drops


def sharegpt4o(root: Path) -> tuple[Path, list[Chain], list[tuple[bytes, str]]]:
    """Two JSON lists at the root and plain tars ``*_part_N.tar`` whose members are the JSON's paths.

    The fourth edit entry lists two input images (one edit step takes one)."""
    root.mkdir(parents=True, exist_ok=True)
    edits, chains, archives = [], [], [{}, {}]
    for k in range(6):
        a, b, text = png(k), png(100 + k), f"make it {k}"
        inputs = [f"text_and_image_to_image/input_{k}.png"]
        archives[k % 2][inputs[0]] = a
        archives[(k + 1) % 2][f"text_and_image_to_image/output_{k}.png"] = b
        if k == 3:
            inputs.append(inputs[0])
        else:
            chains.append(((a, b), ((text,),)))
        edits.append(
            {
                "input_prompt": text,
                "input_image": inputs,
                "input_image_resolution": [12, 12],
                "output_image": f"text_and_image_to_image/output_{k}.png",
                "output_image_resolution": [12, 12],
            }
        )
    for k, members in enumerate(archives):
        (root / f"text_and_image_to_image_part_{k}.tar").write_bytes(tar_bytes(members, gz=False))
    (root / "text_and_image_to_image.json").write_text(json.dumps(edits))
    t2i, images = [], {}
    for k in range(3):
        images[f"text_to_image/{k}.png"] = png(200 + k)
        t2i.append(
            {
                "input_prompt": f"a scene {k}",
                "output_image": f"text_to_image/{k}.png",
                "output_image_resolution": [12, 12],
            }
        )
    (root / "text_to_image_part_0.tar").write_bytes(tar_bytes(images, gz=False))
    (root / "text_to_image.json").write_text(json.dumps(t2i))
    captioned = [(png(200 + k), json.dumps({"input_prompt": f"a scene {k}"})) for k in range(3)]
    return root, chains, captioned


def x2i(root: Path) -> tuple[Path, list[Chain]]:
    """``pix2pix.jsonl`` at the root, its images in ``pix2pix/images.tar.gz.aa, .ab, ...`` (OmniGen's format)."""
    members, chains, lines = {}, [], []
    for k in range(7):
        a, b = png(300 + k), png(400 + k)
        members[f"images/{k}_0.jpg"], members[f"images/{k}_1.jpg"] = a, b
        text = f"<img><|image_1|></img> turn it blue {k}"
        lines.append(
            json.dumps(
                {
                    "task_type": "image_edit",
                    "instruction": text,
                    "input_images": [f"pix2pix/images/{k}_0.jpg"],
                    "output_image": f"pix2pix/images/{k}_1.jpg",
                }
            )
        )
        chains.append(((a, b), ((f"turn it blue {k}",),)))
    split_into(tar_bytes(members), root / "pix2pix" / "images.tar.gz", [".aa", ".ab", ".ac", ".ad"])
    (root / "pix2pix.jsonl").write_text("\n".join(lines) + "\n")
    return root, chains


def seed_data_edit(root: Path) -> tuple[Path, list[Chain]]:
    """``multi_turn_editing/annotations/split_000N.jsonl`` (one conversation a line, 1 to 5 turns) and
    ``multi_turn_editing/images/multi_turn.tar.gz.part-aa, -ab, ...``."""
    members, chains, serial = {}, [], 0
    files: list[list[str]] = [[], []]
    for conv, turns in enumerate((3, 1, 5, 2, 4)):
        serial += 1
        folder = f"20240407_586P_2211turns/Data/{conv}"
        source = png(600 + serial)
        members[f"{folder}/src.jpg"] = source
        line: dict[str, Any] = {"source_image": f"{folder}/src.jpg"}
        images, texts = [source], []
        for t in range(1, turns + 1):
            serial += 1
            img, text = png(600 + serial), f"conversation {conv} turn {t}"
            members[f"{folder}/edit{t}.jpg"] = img
            line[f"instruction_{t}"], line[f"edit_image_{t}"] = text, f"{folder}/edit{t}.jpg"
            images.append(img)
            texts.append((text,))
        files[conv // 3].append(json.dumps(line))
        chains.append((tuple(images), tuple(texts)))
    notes = root / "multi_turn_editing" / "annotations"
    notes.mkdir(parents=True)
    for k, lines in enumerate(files):
        (notes / f"split_{k + 1:04d}.jsonl").write_text("\n".join(lines) + "\n")
    split_into(
        tar_bytes(members),
        root / "multi_turn_editing" / "images" / "multi_turn.tar.gz",
        [".part-aa", ".part-ab", ".part-ac"],
    )
    return root, chains


def as_hub_cache(root: Path, cache: Path) -> Path:
    """``root``'s files as a Hub cache folder: ``snapshots/<rev>/...`` links into ``blobs/``, ``refs/main``."""
    snap = cache / "snapshots" / "9e1c0aa"
    (cache / "blobs").mkdir(parents=True)
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text("9e1c0aa")
    for k, path in enumerate(sorted(p for p in root.rglob("*") if p.is_file())):
        blob = cache / "blobs" / f"b{k:04d}"
        blob.write_bytes(path.read_bytes())
        link = snap / path.relative_to(root)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(blob)
    return cache

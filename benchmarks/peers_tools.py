"""One measurement of one tool, in its own process: what ``benchmarks/peers.py`` runs in each tool's venv.

    python peers_tools.py TOOL MEASURE --data DIR [--src DIR] [--workers N]

TOOL is ``editstream``, ``webdataset``, ``energon``, ``litdata`` or ``mosaic``; MEASURE is

- ``prepare``: make the tool's dataset from the source parquet (``--src``) into ``--data``
  (litdata ``optimize``, MosaicML ``MDSWriter``; editstream and energon prepare through their CLIs,
  which ``peers.py`` times as whole processes);
- ``raw``: one pass over every row, nothing decoded;
- ``raw-parquet``: editstream only: the same, its parquet backend reading the source parquet (``--src``);
- ``decoded``: one pass decoding every image of each row with the one shared function
  (:func:`decode_images`), in this process (``--workers 0``) or in N torch DataLoader workers
  (each worker decodes and hands back only the image count, so the figure is the decode rate,
  not the hand-off: ``handoff.py`` measures that);
- ``limit``: the decode limit, editstream only: rows already in memory, decoded in this process
  or in N forked processes;
- ``dataset``: the tool's own training-dataset path (editstream's ``UnifiedEditIterableDataset``
  with its image transforms and tokenizer; stock webdataset's ``.decode("pilrgb")``).

It prints one JSON line: ``{"rows": ..., "images": ..., "seconds": ...}`` (seconds from opening
the dataset to the end of the pass; imports and interpreter start-up excluded). Only the
standard library, PIL and torch are imported up front: each tool is imported by its own branch.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")
IMAGE_COLUMN = "image_list"


def decode_images(images: Iterable[bytes]) -> list[Any]:
    """The one decode every tool runs: ``Image.open(io.BytesIO(b)).convert("RGB")`` on each image."""
    from PIL import Image

    return [Image.open(io.BytesIO(b)).convert("RGB") for b in images]


def member_images(sample: dict[str, Any]) -> list[bytes]:
    """The image members of a WebDataset sample (``image_list.0.jpg`` ...), in member order."""
    return [v for k, v in sorted(sample.items()) if isinstance(k, str) and k.lower().endswith(IMAGE_EXTENSIONS)]


@dataclass
class Count:
    rows: int = 0
    images: int = 0


def drain(items: Iterable[Any], count: Count, images_of: Callable[[Any], int]) -> None:
    for item in items:
        count.rows += 1
        count.images += images_of(item)


RAW_PASSES = 5
"""Passes a raw-rows run makes (each opening the dataset anew); it reports the median pass: one pass
of a small dataset takes tens of milliseconds, too short to time once on a shared machine."""


def raw_passes(open_rows: Callable[[], Iterable[Any]], count: Count) -> None:
    """``RAW_PASSES`` passes over ``open_rows()``, counting the rows of the first; the median pass is timed."""
    seconds = []
    for i in range(RAW_PASSES):
        t0 = time.perf_counter()
        rows = sum(1 for _ in open_rows())
        seconds.append(time.perf_counter() - t0)
        if i == 0:
            count.rows = rows
        elif rows != count.rows:
            raise SystemExit(f"pass {i + 1} read {rows} rows, the first {count.rows}")
    _MEASURED[:] = [statistics.median(seconds)]


def shard_urls(data: Path) -> list[str]:
    """The shards of an editstream root, in its manifest's order."""
    return [str(data / s["path"]) for s in json.loads((data / "manifest.json").read_text())["shards"]]


def loader(dataset: Any, workers: int, **kwargs: Any) -> Iterable[Any]:
    """``dataset`` itself (0 workers) or a torch DataLoader with ``workers`` worker processes over it."""
    if workers == 0:
        return dataset  # type: ignore[no-any-return]
    import torch

    return torch.utils.data.DataLoader(dataset, num_workers=workers, **{"batch_size": None, **kwargs})


# ---- editstream -----------------------------------------------------------------------------
def editstream_run(measure: str, data: Path, workers: int, count: Count, src: Path | None) -> None:
    import torch

    import editstream
    from editstream import UnifiedEditIterableDataset, iter_rows  # noqa: F401  (the lazy exports, loaded untimed)

    started()
    if measure == "raw":
        raw_passes(lambda: iter_rows(str(data)), count)
        return
    if measure == "raw-parquet":
        raw_passes(lambda: iter_rows(str(src), backend="parquet"), count)
        return
    if measure == "limit":
        editstream_limit(data, workers, count)
        return
    if measure == "dataset":
        editstream_dataset(data, workers, count)
        return

    class Decoded(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
        def __init__(self) -> None:
            self.units = editstream.iter_rows(str(data)).units

        def __iter__(self) -> Iterator[int]:
            info = torch.utils.data.get_worker_info()
            mine = self.units if info is None else self.units[info.id :: info.num_workers]
            for raw in editstream.iter_rows(str(data), units=mine):
                yield len(decode_images(raw.row[IMAGE_COLUMN]))

    drain(loader(Decoded(), workers), count, int)


def editstream_limit(data: Path, workers: int, count: Count) -> None:
    """The decode limit: every row in memory first (not timed), then decoded in 1 or ``workers`` processes."""
    import editstream

    rows = [raw.row[IMAGE_COLUMN] for raw in editstream.iter_rows(str(data))]
    count.rows = len(rows)
    count.images = sum(len(r) for r in rows)
    started()
    if workers == 0:
        for images in rows:
            decode_images(images)
    else:
        pids = []
        for w in range(workers):
            pid = os.fork()
            if pid == 0:
                for images in rows[w::workers]:
                    decode_images(images)
                os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)


def editstream_dataset(data: Path, workers: int, count: Count) -> None:
    """The training path: ``UnifiedEditIterableDataset`` (decode, resize, tokenize), one pass of rows."""
    import itertools

    import editstream

    total = sum(1 for _ in editstream.iter_rows(str(data)))
    ds = editstream.UnifiedEditIterableDataset(
        "peers",
        editstream.ImageTransform(512, 256, 16),
        editstream.ByteTokenizer(),
        editstream.ImageTransform(490, 224, 14),
        data_dir_list=[str(data)],
        num_used_data=[len(_source_files(data))],
        num_workers=max(workers, 1),
        local_rank=0,
        world_size=1,
        backend="webdataset",
    )
    ds.set_epoch(0)
    drain(itertools.islice(loader(ds, workers), total), count, lambda s: len(s["image_tensor_list"]))


def _source_files(data: Path) -> list[Any]:
    return list(json.loads((data / "manifest.json").read_text())["source_files"])


# ---- stock webdataset -----------------------------------------------------------------------
def webdataset_run(measure: str, data: Path, workers: int, count: Count) -> None:
    import webdataset as wds

    started()
    urls = shard_urls(data)
    if measure == "raw":
        raw_passes(lambda: wds.WebDataset(urls, shardshuffle=False), count)
    elif measure == "decoded":
        ds = wds.WebDataset(urls, shardshuffle=False).map(lambda s: len(decode_images(member_images(s))))
        drain(loader(ds, workers), count, int)
    elif measure == "dataset":
        ds = wds.WebDataset(urls, shardshuffle=False).decode("pilrgb").map(member_images)  # the decoded images
        drain(loader(ds, workers), count, len)
    else:
        raise SystemExit(f"webdataset has no {measure} measure")


# ---- Megatron-Energon -----------------------------------------------------------------------
def energon_run(measure: str, data: Path, workers: int, count: Count) -> None:
    from dataclasses import dataclass as energon_dataclass

    from megatron.energon import (
        Cooker,
        DefaultTaskEncoder,
        Sample,
        WorkerConfig,
        basic_sample_keys,
        get_loader,
        get_val_dataset,
        stateless,
    )

    @energon_dataclass
    class Members(Sample):  # type: ignore[misc]
        members: dict[str, Any]

    @stateless  # type: ignore[misc]
    def cook(crude: dict[str, Any]) -> Any:
        return Members(**basic_sample_keys(crude), members={k: v for k, v in crude.items() if not k.startswith("__")})

    decode = measure == "decoded"

    class Encoder(DefaultTaskEncoder):  # type: ignore[misc]
        decoder = None  # the raw member bytes: the shared decode function does the decoding
        cookers = [Cooker(cook)]

        def encode_sample(self, sample: Any) -> Any:
            return len(decode_images(member_images(sample.members))) if decode else 0

        def batch(self, samples: list[Any]) -> list[Any]:
            return samples

    if measure not in ("raw", "decoded"):
        raise SystemExit(f"energon has no {measure} measure")
    started()

    def samples() -> Iterator[int]:
        config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
        ds = get_val_dataset(str(data), split_part="train", worker_config=config, batch_size=1, task_encoder=Encoder())
        return (images for batch in get_loader(ds) for images in batch)

    if measure == "raw":
        raw_passes(samples, count)
    else:
        drain(samples(), count, int)


# ---- LitData --------------------------------------------------------------------------------
def _row_groups(src: Path) -> list[tuple[str, int]]:
    import pyarrow.parquet as pq

    return [(str(p), rg) for p in sorted(src.glob("*.parquet")) for rg in range(pq.ParquetFile(p).num_row_groups)]


def litdata_rows(item: tuple[str, int]) -> Iterator[dict[str, Any]]:
    """litdata ``optimize``'s function: the rows of one parquet row group, as dicts. The image list is
    pickled (litdata's serializers take no list of bytes), and a null string or blob is written empty:
    litdata infers each field's format per chunk, and a None makes two chunks disagree (it then fails)."""
    import pickle

    import pyarrow as pa
    import pyarrow.parquet as pq

    path, rg = item
    table = pq.ParquetFile(path).read_row_group(rg)
    empty = {f.name: b"" if pa.types.is_binary(f.type) else "" for f in table.schema if not pa.types.is_list(f.type)}
    for row in table.to_pylist():
        row = {k: empty.get(k) if v is None else v for k, v in row.items()}
        row[IMAGE_COLUMN] = pickle.dumps(row[IMAGE_COLUMN])
        yield row


def litdata_run(measure: str, data: Path, workers: int, count: Count, src: Path | None) -> None:
    import pickle

    import litdata

    started()
    if measure == "prepare":
        assert src is not None
        litdata.optimize(
            fn=litdata_rows, inputs=_row_groups(src), output_dir=str(data), chunk_bytes="64MB", num_workers=2
        )
        return
    decode = measure == "decoded"

    class Decoded(litdata.StreamingDataset):  # type: ignore[misc]
        def __getitem__(self, index: Any) -> Any:
            images = pickle.loads(super().__getitem__(index)[IMAGE_COLUMN])  # the row's image list, as written
            return len(decode_images(images)) if decode else 0

    if measure == "raw":
        raw_passes(lambda: Decoded(str(data), shuffle=False), count)
        return
    ds = Decoded(str(data), shuffle=False)
    if workers == 0:
        drain(ds, count, int)
    else:
        batches = litdata.StreamingDataLoader(ds, batch_size=1, num_workers=workers)
        drain((int(x) for batch in batches for x in batch), count, int)


# ---- MosaicML streaming ---------------------------------------------------------------------
def mds_columns(schema: Any) -> dict[str, str]:
    """The MDS column types a user would pick for a parquet schema: ``bytes`` for a binary column,
    ``float64``, ``json`` for strings and lists of strings, ``pkl`` for the rest (the image lists)."""
    import pyarrow as pa

    def strings(t: Any) -> bool:
        return bool(pa.types.is_string(t) or (pa.types.is_list(t) and strings(t.value_type)))

    def encoding(t: Any) -> str:
        if pa.types.is_binary(t):
            return "bytes"
        if pa.types.is_float64(t):
            return "float64"
        return "json" if strings(t) else "pkl"

    return {f.name: encoding(f.type) for f in schema}


def mds_row(row: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    """A row as MDSWriter takes it: a missing blob of a ``bytes`` column written as ``b""`` (MDS has no null)."""
    return {k: (b"" if v is None and columns[k] == "bytes" else v) for k, v in row.items()}


def mosaic_run(measure: str, data: Path, workers: int, count: Count, src: Path | None) -> None:
    from streaming import MDSWriter, StreamingDataset

    if measure == "prepare":
        import pyarrow.parquet as pq

        started()
        assert src is not None
        files = sorted(src.glob("*.parquet"))
        columns = mds_columns(pq.ParquetFile(files[0]).schema_arrow)
        with MDSWriter(out=str(data), columns=columns, size_limit="64mb") as writer:
            for path in files:
                for batch in pq.ParquetFile(path).iter_batches():
                    for row in batch.to_pylist():
                        writer.write(mds_row(row, columns))
        return
    decode = measure == "decoded"
    started()

    class Decoded(StreamingDataset):  # type: ignore[misc]
        def get_item(self, index: int, retry: int = 7) -> Any:
            row = super().get_item(index, retry)
            return len(decode_images(row[IMAGE_COLUMN])) if decode else 0

    ds = Decoded(local=str(data), shuffle=False, batch_size=1, allow_unsafe_types=True)  # pkl: our own data
    drain(loader(ds, workers, batch_size=1), count, lambda x: int(x if isinstance(x, int) else x[0]))


_START: list[float] = []
_MEASURED: list[float] = []
"""Seconds a run timed itself (the median raw pass); empty: from ``started()`` to the end."""


def started() -> None:
    """The timed part starts now: after the tool's imports (and, for the decode limit, loading the rows).

    PIL's image plugins are loaded first too (the first ``Image.open`` of a WebP would load them all),
    so no tool pays that one-off inside its timed pass."""
    from PIL import Image

    Image.init()
    _START[:] = [time.perf_counter()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tool", choices=["editstream", "webdataset", "energon", "litdata", "mosaic"])
    ap.add_argument("measure", choices=["prepare", "raw", "raw-parquet", "decoded", "limit", "dataset"])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--src", type=Path, default=None)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    count = Count()
    _START[:] = [time.perf_counter()]
    if args.tool == "editstream":
        editstream_run(args.measure, args.data, args.workers, count, args.src)
    elif args.tool == "webdataset":
        webdataset_run(args.measure, args.data, args.workers, count)
    elif args.tool == "energon":
        energon_run(args.measure, args.data, args.workers, count)
    elif args.tool == "litdata":
        litdata_run(args.measure, args.data, args.workers, count, args.src)
    else:
        mosaic_run(args.measure, args.data, args.workers, count, args.src)
    seconds = _MEASURED[0] if _MEASURED else time.perf_counter() - _START[0]
    print(json.dumps({"rows": count.rows, "images": count.images, "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``SftJSONLIterableDataset``: vision-language SFT samples from JSONL lines, on either backend.

Units are JSONL lines. Listing (on first use, never in the constructor) reads, for each
``(jsonl, media_dir, n)``, every line (newline kept), shuffles them with the dataset's rng
seeded ``shuffle_seed`` when ``shuffle_lines``, and keeps the first ``n`` as ``(line,
media_dir)`` pairs. ``set_epoch(seed)`` sorts the pairs, shuffles them with ``Random(seed)`` and
splits ranks and workers (a worker's slice reversed); so ``shuffle_lines`` only chooses which
lines survive the cut. A sample's ``data_indexes`` is its row index in the worker's list, and a
worker's resume status is that int (the next row is status + 1).

The two backends differ only in where lines and media come from: the source backend
(``backend="parquet"``, alias ``"source"``) reads the JSONL and media files (local or fsspec
URLs); ``backend="webdataset"`` reads roots made by ``editstream convert data.jsonl DST
--media-dir DIR``, whose recorded media dir string (give the source backend the same
string) makes the order identical. A ``data_status`` saved on one backend resumes on the other.

Deliberate differences from the reference, none of which changes the samples of good data:

- A row the reference would crash the iterator on (``change_format`` missing keys, a transform
  or tokenizer error) is dropped as ``bad_row``; a converted sample that cannot be read is
  dropped as ``bad_sample``. Every drop is counted with its location (JSONL file and 1-based
  line; shard and key on the WebDataset backend).
- A whole pass that yields nothing raises ``RuntimeError`` naming the dataset (the reference
  spins forever); listing errors name the dataset and the path.
- ``jsonl_path_list``, ``data_dir_list`` and ``num_used_data`` must have equal lengths and
  ``num_used_data`` entries must be >= 0 (the reference silently truncates to the shortest
  list, and slices with negative counts).

Opt-ins (off by default, see :mod:`editstream.loader.pixels`): ``image_dtype="uint8"`` and
``fast_decode=True`` (images only; video frames are always decoded exactly).
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ..distributed import DistributedIterableDataset
from ..drops import FATAL, FailureBudget
from ..iteration import BadSample, empty_pass_error
from ..pixels import check_fast_decode, check_image_dtype, load_image
from ..prefetch import DEFAULT_PREFETCH_BYTES, DEFAULT_PREFETCH_ITEMS
from ..sft_sample import MediaReader, build_sample, read_row
from ..sources.jsonl import JsonlLineSource, Place
from ..units import Unit

logger = logging.getLogger("editstream")

SFT_BACKENDS = ("parquet", "source", "webdataset")
"""``parquet`` and ``source`` both mean the JSONL + media files (``parquet`` is the flag value the
other datasets use); ``webdataset`` means converted roots."""


def _as_list(value: Any) -> list:
    return [value] if isinstance(value, (str, int)) else list(value)


class SftJSONLIterableDataset(DistributedIterableDataset):
    """Vision-language SFT rows from JSONL files (see the module docstring for order and resume)."""

    unit_failure_budget = 16
    """Converted samples in a row that may fail to read (after retries) before the stream stops."""
    image_dtype = "float32"
    fast_decode = False

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        frame_sampler: Any,
        jsonl_path_list: Sequence[str] | None,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        local_rank: int = 0,
        world_size: int = 1,
        num_workers: int = 8,
        data_status: list | None = None,
        shuffle_lines: bool = False,
        shuffle_seed: int = 0,
        *,
        backend: str | None = "parquet",
        storage_options: StorageOptions | None = None,
        retry: RetryPolicy | None = None,
        prefetch_bytes: int = DEFAULT_PREFETCH_BYTES,
        prefetch_samples: int = DEFAULT_PREFETCH_ITEMS,
        image_dtype: str = "float32",
        fast_decode: bool = False,
    ) -> None:
        super().__init__(dataset_name, local_rank, world_size, num_workers)
        self.image_dtype = check_image_dtype(image_dtype, f"dataset {dataset_name!r}")
        self.fast_decode = check_fast_decode(fast_decode, f"dataset {dataset_name!r}")
        if backend is not None and backend not in SFT_BACKENDS:
            raise ValueError(f"dataset {dataset_name!r}: unknown backend {backend!r}; choose one of {SFT_BACKENDS}")
        self.backend = "webdataset" if backend == "webdataset" else "parquet"
        self.transform = transform
        self.tokenizer = tokenizer
        self.frame_sampler = frame_sampler
        self.jsonl_path_list = None if jsonl_path_list is None else _as_list(jsonl_path_list)
        self.data_dir_list = _as_list(data_dir_list)
        self.num_used_data = _as_list(num_used_data)
        self.shuffle_lines = shuffle_lines
        self.shuffle_seed = shuffle_seed
        self.storage_options = storage_options
        self.set_data_status(data_status)
        self._check_lists()
        self._locations: dict[Unit, Place] = {}
        self.source: Any
        if self.backend == "webdataset":
            self._check_sampler_reads_members()
            from ..sources.sft_shards import ShardLineSource

            self.source = ShardLineSource(
                dataset_name=dataset_name,
                storage_options=storage_options,
                retry=retry,
                prefetch_bytes=prefetch_bytes,
                prefetch_samples=prefetch_samples,
            )
        else:
            self.source = JsonlLineSource(dataset_name=dataset_name, storage_options=storage_options)

    def _check_lists(self) -> None:
        lengths = {"data_dir_list": len(self.data_dir_list), "num_used_data": len(self.num_used_data)}
        if self.jsonl_path_list is not None:
            lengths["jsonl_path_list"] = len(self.jsonl_path_list)
        elif self.backend != "webdataset":
            raise ValueError(f"dataset {self.dataset_name!r}: the {self.backend} backend needs jsonl_path_list")
        if len(set(lengths.values())) != 1:
            raise ValueError(f"dataset {self.dataset_name!r}: the lists must have one entry per dataset, got {lengths}")
        bad = [n for n in self.num_used_data if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0]
        if bad:
            raise ValueError(f"dataset {self.dataset_name!r}: num_used_data entries must be ints >= 0, got {bad}")

    def _check_sampler_reads_members(self) -> None:
        sampler = self.frame_sampler
        if sampler is not None and not (hasattr(sampler, "sample_folder_frames") and hasattr(sampler, "sample_video")):
            raise TypeError(
                f"dataset {self.dataset_name!r}: the webdataset backend needs a frame_sampler with "
                f"sample_folder_frames() and sample_video() (editstream.loader.video.FrameSampler), "
                f"got {type(sampler).__name__}"
            )

    # ---- units ---------------------------------------------------------------------------
    def list_data_paths(self) -> list[Unit]:
        """The ``(line, media_dir)`` units (the JSONL files or the roots' line copies are read here)."""
        return self.get_data_paths(
            self.jsonl_path_list, self.data_dir_list, self.num_used_data, self.shuffle_lines, self.shuffle_seed
        )

    def get_data_paths(
        self,
        jsonl_path_list: Sequence[str] | None,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        shuffle_lines: bool,
        shuffle_seed: int,
    ) -> list[Unit]:
        """``(line, media_dir)`` pairs: per entry its lines, shuffled if asked, cut to its count."""
        entries = self.source.read_entries(jsonl_path_list, data_dir_list)
        units: list[Unit] = []
        locations: dict[Unit, Place] = {}
        for entry_index, (entry, count) in enumerate(zip(entries, num_used_data)):
            # Shuffling positions with the same rng state is the same permutation as shuffling the
            # lines; the positions also say where each kept line came from.
            order = list(range(len(entry.lines)))
            if shuffle_lines:
                self.rng.seed(shuffle_seed)
                self.rng.shuffle(order)
            for line_index in order[:count]:
                unit = (entry.lines[line_index], entry.image_dir)
                units.append(unit)
                locations.setdefault(unit, (entry_index, line_index))
        self._locations = locations
        return units

    def _set_worker_resume_data_status(self, worker_id: int, status: Any) -> None:
        """A worker's status is an int row index here (the base class keeps lists)."""
        if self._resume_data_status is None:
            self._resume_data_status = [None] * max(int(self.num_workers), worker_id + 1)
        while len(self._resume_data_status) <= worker_id:
            self._resume_data_status.append(None)
        self._resume_data_status[worker_id] = int(status)

    def _first_row(self, worker_id: int) -> int:
        status = self._get_worker_data_status(worker_id)
        if status is None:
            return 0
        if not isinstance(status, numbers.Integral) or isinstance(status, bool):
            raise ValueError(
                f"dataset {self.dataset_name!r}: data_status[{worker_id}] is {status!r}; vlm_sft resumes "
                f"from a row index (int), as saved by state_dict()"
            )
        return int(status) + 1

    # ---- iteration -----------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict]:
        units, worker_id = self.get_data_paths_per_worker()
        start = self._first_row(worker_id)
        stride = getattr(self.transform, "stride", None)
        if stride is None:
            raise TypeError(f"dataset {self.dataset_name!r}: transform {self.transform!r} has no stride")
        logger.info(
            "rank-%s worker-%s dataset-%s: resuming data at row#%s",
            self.local_rank,
            worker_id,
            self.dataset_name,
            start,
        )
        budget = FailureBudget(self.dataset_name, self.unit_failure_budget)
        while True:
            yielded = 0
            for sample in self._iter_rows(units, start, worker_id, stride, budget):
                yielded += 1
                yield sample
            if start == 0 and yielded == 0:
                raise empty_pass_error(self, worker_id, len(units), "JSONL lines")
            start = 0
            logger.info("%s repeat in rank-%s worker-%s", self.dataset_name, self.local_rank, worker_id)

    def _iter_rows(
        self, units: list[Unit], start: int, worker_id: int, stride: int, budget: FailureBudget
    ) -> Iterator[dict]:
        """One pass over ``units[start:]``: parse each row, drop (and count) bad ones, stamp the rest."""
        items = ((self._locations[unit], unit[0]) for unit in units[start:])
        media_stream = self.source.iter_media(items)
        try:
            for row_index, unit, media in zip(range(start, len(units)), units[start:], media_stream):
                place = self._locations[unit]
                if isinstance(media, BadSample):
                    where = {**self.source.describe(place), **media.where}
                    self.drops.record("bad_sample", where, media.error)
                    budget.failed(where, media.error)
                    continue
                budget.succeeded()
                sample = self._parse(unit[0], media, place, stride)
                if sample is None:
                    continue
                sample["data_indexes"] = {
                    "data_indexes": row_index,
                    "worker_id": worker_id,
                    "dataset_name": self.dataset_name,
                }
                self._set_worker_resume_data_status(worker_id, row_index)
                yield sample
        finally:
            media_stream.close()

    def _parse(self, line: str, media: MediaReader, place: Place, stride: int) -> dict | None:
        """The sample of one line, or ``None`` after recording why it was dropped."""
        try:
            data, images = read_row(line, media, self.frame_sampler, self._decode_image)
        except FATAL:
            raise
        except Exception as exc:  # noqa: BLE001 - the reference's try-block: any error drops the row
            self.drops.record("jsonl_parse", self.source.describe(place), exc)
            return None
        try:
            sample = build_sample(data, images, self.transform, stride, self.tokenizer, self.image_dtype)
        except FATAL:
            raise
        except Exception as exc:  # noqa: BLE001 - the reference would crash here; editstream drops the row
            self.drops.record("bad_row", self.source.describe(place), exc)
            return None
        if sample is None:
            self.drops.record("no_loss_labels", self.source.describe(place))
        return sample

    def _decode_image(self, data: bytes, img_num: int) -> Any:
        """One image of a row: exactly as the reference, or reduced with ``fast_decode``."""
        return load_image(data, (self.transform,), self.fast_decode, img_num=img_num)

    @property
    def drop_counts(self) -> dict[str, int]:
        """Drops per reason in this process (``jsonl_parse``, ``no_loss_labels``, ``bad_row``, ``bad_sample``)."""
        return self.drops.as_dict()

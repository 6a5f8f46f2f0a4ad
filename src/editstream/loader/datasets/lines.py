"""The base of a JSONL + media kind's dataset (units ``(line, media_dir)``; ``data_indexes`` a row index in the
worker's list): lines from the JSONL files and media directories, or from converted roots in the same order, so
a ``data_status`` resumes on either backend; a subclass turns a read line into its sample."""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from typing import Any

from ...data.backends import PARQUET, get_backend
from ...data.drops import FATAL
from ...data.rows import DropRow, LineRow, Position
from ...data.sources.jsonl import JsonlLineSource
from ...data.sources.sft_shards import ShardLineSource
from ...data.units import Unit, refuse_repeated_sources
from ...format.sft import MediaOutsideError
from ...io.prefetch import DEFAULT_PREFETCH_ITEMS
from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ..distributed import DataStatus, WorkerStatus
from ..iteration import SourceIterableDataset
from ..pixels import check_fast_decode, check_image_dtype, load_image


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, (str, int)) else list(value)


class JsonlLineDataset(SourceIterableDataset):
    """JSONL lines and their media on either backend, in the reference's ``SftJSONLIterableDataset`` arguments;
    a line that cannot be read is dropped (``media_outside``, ``jsonl_parse``), and a subclass defines
    :meth:`line_sample` (``None``: nothing to learn, dropped as ``no_loss_labels``)."""

    unit_noun = "JSONL lines"
    fast_decode = False
    vit_transform: Any = None
    """The transform of ViT items, which images are also decoded for (``None``: the kind makes none)."""
    source: JsonlLineSource | ShardLineSource

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
        data_status: DataStatus | None = None,
        shuffle_lines: bool = False,
        shuffle_seed: int = 0,
        *,
        backend: str | None = PARQUET,
        storage_options: StorageOptions | None = None,
        retry: RetryPolicy | None = None,
        prefetch_bytes: int | None = None,
        prefetch_samples: int = DEFAULT_PREFETCH_ITEMS,
        image_dtype: str = "float32",
        fast_decode: bool = False,
        allow_outside_media_dir: bool = False,
    ) -> None:
        super().__init__(dataset_name, local_rank, world_size, num_workers)
        self.image_dtype = check_image_dtype(image_dtype, f"dataset {dataset_name!r}")
        self.fast_decode = check_fast_decode(fast_decode, f"dataset {dataset_name!r}")
        self.backend = PARQUET if backend is None else get_backend(backend, f"dataset {dataset_name!r}")
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
        common: dict[str, Any] = {"dataset_name": dataset_name, "storage_options": storage_options}
        common["allow_outside_media_dir"] = allow_outside_media_dir
        if self.backend.reads_shards:
            self._check_sampler_reads_members()
            self.source = ShardLineSource(
                **common, retry=retry, prefetch_bytes=prefetch_bytes, prefetch_samples=prefetch_samples
            )
        else:
            self.source = JsonlLineSource(**common)

    def _check_lists(self) -> None:
        lengths = {"data_dir_list": len(self.data_dir_list), "num_used_data": len(self.num_used_data)}
        if self.jsonl_path_list is not None:
            lengths["jsonl_path_list"] = len(self.jsonl_path_list)
        elif not self.backend.reads_shards:
            raise ValueError(f"dataset {self.dataset_name!r}: the {self.backend} backend needs jsonl_path_list")
        if len(set(lengths.values())) != 1:
            raise ValueError(f"dataset {self.dataset_name!r}: the lists must have one entry per dataset, got {lengths}")
        if self.jsonl_path_list is None:
            refuse_repeated_sources(self.dataset_name, self.data_dir_list)
        else:
            pairs = list(zip(self.jsonl_path_list, self.data_dir_list))
            refuse_repeated_sources(self.dataset_name, pairs, "jsonl_path_list with data_dir_list")
        bad = [n for n in self.num_used_data if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0]
        if bad:
            raise ValueError(f"dataset {self.dataset_name!r}: num_used_data entries must be ints >= 0, got {bad}")

    def _check_sampler_reads_members(self) -> None:
        sampler = self.frame_sampler
        if sampler is not None and not (hasattr(sampler, "sample_folder_bytes") and hasattr(sampler, "sample_video")):
            raise TypeError(
                f"dataset {self.dataset_name!r}: the webdataset backend needs a frame_sampler with "
                f"sample_folder_bytes() and sample_video() (editstream.loader.video.FrameSampler), "
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
        """``(line, media_dir)`` pairs: per entry its lines, shuffled (dataset rng) if asked, cut to its count."""
        return self.source.list_lines(
            jsonl_path_list, data_dir_list, num_used_data, shuffle_lines, shuffle_seed, self.rng
        )

    # ---- positions -----------------------------------------------------------------------
    def resume_point(self, worker_id: int) -> tuple[int, Position | None]:
        """A worker's status is the row index of its last sample: the stream resumes at the next line."""
        status = self._get_worker_data_status(worker_id)
        if status is None:
            return 0, None
        if not isinstance(status, numbers.Integral) or isinstance(status, bool):
            raise ValueError(
                f"dataset {self.dataset_name!r}: data_status[{worker_id}] is {status!r}; this dataset resumes "
                f"from a row index (int), as saved by state_dict()"
            )
        return int(status) + 1, None

    def sample_index(self, unit_position: int, position: Position) -> WorkerStatus:
        """A line is a unit of one row: its ``data_indexes`` is the row index in the worker's list."""
        return unit_position

    # ---- parsing -------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        if getattr(self.transform, "stride", None) is None:
            raise TypeError(f"dataset {self.dataset_name!r}: transform {self.transform!r} has no stride")
        yield from super().__iter__()

    def parse_row(self, row: LineRow) -> dict[str, Any]:
        """Read the line and its media (drops ``media_outside``, ``jsonl_parse``), then build the sample
        (``no_loss_labels`` when there is none), as the reference's two steps."""
        try:
            item, images = self.read_line(row)
        except FATAL:
            raise
        except MediaOutsideError as exc:
            raise DropRow("media_outside") from exc
        except Exception as exc:
            raise DropRow("jsonl_parse") from exc
        sample = self.line_sample(item, images)
        if sample is None:
            raise DropRow("no_loss_labels")
        return sample

    def read_line(self, row: LineRow) -> tuple[Any, list[Any] | None]:
        """The parsed line and its decoded images or video frames (``None``: no media); whatever this raises
        drops the line (the reference's try-block), so a subclass adds its own rules of the line here."""
        return row.read(self.frame_sampler, self.decode_image)

    def line_sample(self, item: Any, images: list[Any] | None) -> dict[str, Any] | None:
        """The sample of a read line, or ``None`` when it has nothing to learn from (a subclass defines it)."""
        raise NotImplementedError

    def decode_image(self, data: bytes, img_num: int) -> Any:
        """One image of a line, for each transform: exactly as the reference, or reduced with ``fast_decode``."""
        return load_image(data, (self.transform, self.vit_transform), self.fast_decode, img_num=img_num)

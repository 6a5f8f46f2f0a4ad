"""Text-to-image samples: one caption (drawn from a JSON dict of captions), then the image."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

from ...io.storage import StorageOptions
from ..distributed import DataStatus
from ..pixels import NORMALIZATION_KEY, transform_image
from .standard import ParquetStandardIterableDataset

logger = logging.getLogger("editstream")


class T2IIterableDataset(ParquetStandardIterableDataset):
    """Rows with ``image`` (bytes) and ``captions`` (JSON ``{key: caption}``), SPEC 5b.

    Units are whole parquet files; ``data_indexes`` is ``[file_index, row_group, row]``. An
    empty caption dict encodes ``" "``; otherwise a caption is drawn with ``random.choice``
    over the encoded captions, after the image decoded, as in the reference.
    """

    unit_granularity = "file"

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        local_rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 8,
        data_status: DataStatus | None = None,
        *,
        parquet_info: Mapping[str, Any] | None = None,
        vit_transform: Any = None,
        backend: str | None = None,
        storage_options: StorageOptions | None = None,
        image_dtype: str = "float32",
        fast_decode: bool = False,
        **backend_options: Any,
    ) -> None:
        super().__init__(
            dataset_name,
            transform,
            tokenizer,
            vit_transform,
            data_dir_list,
            num_used_data,
            parquet_info,
            local_rank,
            world_size,
            num_workers,
            data_status,
            backend=backend,
            storage_options=storage_options,
            image_dtype=image_dtype,
            fast_decode=fast_decode,
            **backend_options,
        )

    def parse_row(self, row: Any) -> dict[str, Any]:
        image, norm = transform_image(self.transform, self.load_image(row["image"]), self.image_dtype)
        height, width = image.shape[1:]
        num_tokens = height * width // self.transform.stride**2

        captions = json.loads(row["captions"])
        encoded = [self.tokenizer.encode(text) for text in captions.values()]
        if encoded:
            caption = random.choice(encoded)
        else:
            logger.debug("dataset %s: row without captions, using ' '", self.dataset_name)
            caption = self.tokenizer.encode(" ")
        num_tokens += len(caption)

        text_item = {"type": "text", "enable_cfg": 1, "loss": 0, "special_token_loss": 0, "special_token_label": None}
        image_item = {
            "type": "vae_image",
            "enable_cfg": 0,
            "loss": 1,
            "special_token_loss": 0,
            "special_token_label": None,
        }
        sample = {
            "image_tensor_list": [image],
            "text_ids_list": [caption],
            "num_tokens": num_tokens,
            "sequence_plan": [text_item, image_item],
        }
        if self.image_dtype == "uint8":
            sample[NORMALIZATION_KEY] = [norm]
        return sample

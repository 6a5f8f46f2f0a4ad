"""Text-to-image samples: one caption (drawn from a JSON dict of captions), then the image."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

from editstream.plugin import NORMALIZATION_KEY, ParquetStandardIterableDataset, plan_item, transform_image

logger = logging.getLogger("editstream")


class T2IIterableDataset(ParquetStandardIterableDataset):
    """Rows with ``image`` (bytes) and ``captions`` (JSON ``{key: caption}``), SPEC 5b; units are whole files, and a
    caption is drawn with ``random.choice`` after the image decoded, as in the reference (none: ``" "``)."""

    unit_granularity = "file"

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        *args: Any,
        vit_transform: Any = None,
        parquet_info: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """The base's arguments in the reference's positional order for this class, which has no ViT transform
        (``vit_transform`` is a keyword, for a subclass that adds ViT items)."""
        given = (dataset_name, transform, tokenizer, vit_transform, data_dir_list, num_used_data, parquet_info)
        super().__init__(*given, *args, **kwargs)

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

        sample = {
            "image_tensor_list": [image],
            "text_ids_list": [caption],
            "num_tokens": num_tokens,
            "sequence_plan": [plan_item("text", 1, 0), plan_item("vae_image", 0, 1)],
        }
        if self.image_dtype == "uint8":
            sample[NORMALIZATION_KEY] = [norm]
        return sample

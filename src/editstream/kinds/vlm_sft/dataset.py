"""``SftJSONLIterableDataset``: vision-language SFT samples from JSONL lines, on the JSONL + media base
(:class:`~editstream.plugin.JsonlLineDataset`: lines and media read on either backend, resumable, a line that
cannot be read dropped); here only the conversation's rules: the ``<video>`` marker and the sample."""

from __future__ import annotations

from typing import Any

from editstream.plugin import JsonlLineDataset

from .sample import build_sample, change_format, expand_video_marker


class SftJSONLIterableDataset(JsonlLineDataset):
    """Vision-language SFT rows from JSONL files (see the module docstring for order and resume)."""

    def read_line(self, row: Any) -> tuple[Any, list[Any] | None]:
        """The line and its images or frames; a video's ``<video>`` marker becomes one ``<image>`` per frame."""
        item, images = super().read_line(row)
        if "image" not in item and "video" in item:
            expand_video_marker(item, images)
        return item, images

    def line_sample(self, item: Any, images: list[Any] | None) -> dict[str, Any] | None:
        """The reference's sample of the conversation (``None`` without a gpt turn to learn from)."""
        stride, dtype = self.transform.stride, self.image_dtype
        return build_sample(item, images, self.transform, stride, self.tokenizer, dtype, elements=self.change_format)

    def change_format(self, data: Any, num_images: int) -> list[dict[str, Any]]:
        """A line's conversation as text and image elements (NeMo's hook: a subclass may override it)."""
        return change_format(data, num_images)

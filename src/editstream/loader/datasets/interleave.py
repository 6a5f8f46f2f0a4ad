"""The sample builder (SPEC sections 2-3): text, image and video items appended to a sample's sequence
plan, also under the reference's ``_init_data`` / ``_add_*`` names; :class:`RowDataset` joins it to table rows,
:class:`LineDataset` to JSONL + media lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..distributed import DistributedIterableDataset
from ..pixels import NORMALIZATION_KEY, transform_image
from .lines import JsonlLineDataset
from .standard import ParquetStandardIterableDataset


def plan_item(kind: str, enable_cfg: int, loss: int) -> dict[str, Any]:
    """One entry of a sample's ``sequence_plan``: the item's type, CFG flag and loss flag."""
    return {"type": kind, "enable_cfg": enable_cfg, "loss": loss, "special_token_loss": 0, "special_token_label": None}


class InterleavedBaseIterableDataset(DistributedIterableDataset):
    """Mixin with the sample builder; expects ``self.tokenizer``, ``transform`` and ``vit_transform``."""

    tokenizer: Any
    transform: Any
    vit_transform: Any
    image_dtype: str = "float32"

    def new_sample(self) -> dict[str, Any]:
        """An empty sample: no items, no tokens."""
        data: dict[str, Any] = {"sequence_plan": [], "text_ids_list": [], "image_tensor_list": [], "num_tokens": 0}
        if self.image_dtype == "uint8":
            data[NORMALIZATION_KEY] = []
        return data

    def add_text(self, data: dict[str, Any], text: str, need_loss: bool, enable_cfg: bool = True) -> dict[str, Any]:
        """Append ``text``, tokenized, as a text item (``need_loss``: the model learns to produce it)."""
        ids = self.tokenizer.encode(text)
        data["num_tokens"] += len(ids)
        data["text_ids_list"].append(ids)
        data["sequence_plan"].append(plan_item("text", int(enable_cfg), int(need_loss)))
        return data

    def _append_image(self, data: dict[str, Any], transform: Any, image: Any, done: Any = None) -> Any:
        """Append ``image`` through ``transform`` (or a copy of ``done``, its output), counting its tokens."""
        tensor, norm = done if done is not None else transform_image(transform, image, self.image_dtype)
        data["num_tokens"] += tensor.shape[1] * tensor.shape[2] // transform.stride**2
        data["image_tensor_list"].append(tensor if done is None else tensor.clone())
        if NORMALIZATION_KEY in data:  # the sample lists normalizations (uint8 images)
            data[NORMALIZATION_KEY].append(norm)
        return tensor, norm

    def add_image(
        self, data: dict[str, Any], image: Any, need_loss: bool, need_vae: bool, need_vit: bool, enable_cfg: bool = True
    ) -> dict[str, Any]:
        """Append a decoded image as up to three items: the VAE target with the loss (``need_loss``), VAE
        conditioning (``need_vae``) and ViT understanding (``need_vit``, which needs a ``vit_transform``)."""
        if not (need_loss or need_vae or need_vit):
            raise ValueError("add_image / _add_image needs at least one of need_loss, need_vae, need_vit")
        if need_vit and self.vit_transform is None:
            raise ValueError(f"dataset {self.dataset_name!r}: a ViT image item needs a vit_transform; none was given")
        vae = None
        if need_loss:
            data["sequence_plan"].append(plan_item("vae_image", 0, 1))
            vae = self._append_image(data, self.transform, image)
        if need_vae:
            data["sequence_plan"].append(plan_item("vae_image", int(enable_cfg), 0))
            vae = self._append_image(data, self.transform, image, vae)
        if need_vit:
            data["sequence_plan"].append(plan_item("vit_image", int(enable_cfg), 0))
            self._append_image(data, self.vit_transform, image)
        return data

    def add_video(
        self,
        data: dict[str, Any],
        frames: Sequence[Any],
        frame_indexes: Sequence[int],
        need_loss: bool,
        need_vae: bool,
        enable_cfg: bool = True,
    ) -> dict[str, Any]:
        """Append video frames as VAE items, one split: the target (``need_loss``) or conditioning (``need_vae``)."""
        if int(bool(need_loss)) + int(bool(need_vae)) != 1:
            raise ValueError("add_video / _add_video needs exactly one of need_loss, need_vae")
        last = len(frames) - 1
        for i, (frame, frame_index) in enumerate(zip(frames, frame_indexes)):
            item = plan_item("vae_image", 0, 1) if need_loss else plan_item("vae_image", int(enable_cfg), 0)
            item["split_start"] = i == 0
            item["split_end"] = i == last
            if i < len(frame_indexes) - 1:
                item["frame_delta"] = frame_indexes[i + 1] - frame_index
            data["sequence_plan"].append(item)
            self._append_image(data, self.transform, frame)
        return data

    _init_data = new_sample
    _add_text = add_text
    _add_image = add_image
    _add_video = add_video


class RowDataset(InterleavedBaseIterableDataset, ParquetStandardIterableDataset):
    """A kind's training dataset over its table rows on either backend; a subclass defines ``parse_row``."""


class LineDataset(InterleavedBaseIterableDataset, JsonlLineDataset):
    """A JSONL + media kind's training dataset on either backend: a subclass builds the sample of a read line in
    ``line_sample`` with the builder above; ViT items need the ``vit_transform`` keyword."""

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        jsonl_path_list: Sequence[str] | None,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        *args: Any,
        frame_sampler: Any = None,
        vit_transform: Any = None,
        **kwargs: Any,
    ) -> None:
        """:class:`JsonlLineDataset`'s arguments, its frame sampler a keyword (``None``: the kind reads no video),
        and the transform of ViT items (``None``: the kind makes none)."""
        given = (dataset_name, transform, tokenizer, frame_sampler, jsonl_path_list, data_dir_list, num_used_data)
        super().__init__(*given, *args, **kwargs)
        self.vit_transform = vit_transform

"""PackedDataset: greedy token-budget packing of samples drawn from weighted dataset groups.

Behaviour follows BAGEL's packer as adopted by NeMo Automodel (same RNG consumption order, so
the same seed gives the same batches), with resumable state added: ``state_dict()`` taken
between two yielded batches lets a fresh ``PackedDataset`` continue with exactly the batches
an uninterrupted run would yield next, in the main process or inside DataLoader workers.
"""

from __future__ import annotations

import copy
import json
import logging
import numbers
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch

from .config import BagelDatasetConfig
from .sources.base import resolve_rank_and_world
from .sequence import (
    get_flattened_position_ids_extrapolate,
    get_flattened_position_ids_interpolate,
    len2weight,
    patchify,
    prepare_attention_mask_per_sample,
)

logger = logging.getLogger(__name__)

STATE_FORMAT = "editstream.PackedDataset/1"
SPECIAL_TOKEN_KEYS = ("bos_token_id", "eos_token_id", "start_of_image", "end_of_image")
BACKENDS = ("parquet", "webdataset")
_PLAN_TYPES = ("text", "vit_image", "vae_image")
_STATE_KEYS = ("started", "rank", "world_size", "num_workers", "worker_id", "data_seed", "global_seed",
               "buffer", "rng", "datasets")
_SAMPLE_KEYS = ("sequence_plan", "text_ids_list", "image_tensor_list", "num_tokens", "data_indexes")


def _current_worker_id() -> int:
    info = torch.utils.data.get_worker_info()
    return info.id if info is not None else 0


def _capture_rng() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _restore_rng(states: Mapping[str, Any]) -> None:
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    np.random.set_state(tuple(states["numpy"]))
    torch.set_rng_state(states["torch"])


def _copy_tree(obj: Any) -> Any:
    """Deep copy of containers and numpy arrays; torch tensors are shared, never copied.

    The packer never writes into a sample's tensors, so sharing them keeps ``state_dict()``
    cheap even with a full buffer of images while the returned state stays independent of
    later iteration.
    """
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, dict):
        return {key: _copy_tree(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_copy_tree(value) for value in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_copy_tree(value) for value in obj)
    if isinstance(obj, np.ndarray):
        return obj.copy()
    return copy.deepcopy(obj)


def _is_nonneg_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0


@dataclass
class _Progress:
    """What one running iteration exposes to ``state_dict()``: references, copied only on demand."""

    worker_id: int
    buffer: list
    rng: dict[str, Any] | None = None


class PackedDataset(torch.utils.data.IterableDataset):
    """Packs samples of several grouped datasets into batches of about ``expected_num_tokens``.

    Each batch is one packed sequence (a dict of tensors and lists, see ``to_tensor``);
    a DataLoader should use ``batch_size=1`` with :func:`collate_fn`. Randomness (group choice,
    cfg dropout, timesteps) comes from the global ``random`` / ``numpy`` RNGs exactly as in
    BAGEL, reseeded per rank and worker when iteration starts.
    """

    def __init__(
        self,
        data_config: BagelDatasetConfig,
        tokenizer: Any,
        special_tokens: Mapping[str, int],
        local_rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 8,
        expected_num_tokens: int = 32768,
        max_num_tokens_per_sample: int = 16384,
        max_num_tokens: int = 36864,
        prefer_buffer_before: int = 16384,
        max_buffer_size: int = 50,
        interpolate_pos: bool = False,
        use_flex: bool = False,
        data_status: Mapping[str, Any] | None = None,
        dataset_info: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        *,
        registry: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        super().__init__()
        local_rank, world_size = resolve_rank_and_world(local_rank, world_size)
        for name, value in (
            ("expected_num_tokens", expected_num_tokens),
            ("max_num_tokens_per_sample", max_num_tokens_per_sample),
            ("max_num_tokens", max_num_tokens),
            ("world_size", world_size),
        ):
            if not _is_nonneg_int(value) or value == 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, value in (
            ("prefer_buffer_before", prefer_buffer_before),
            ("max_buffer_size", max_buffer_size),
            ("num_workers", num_workers),
        ):
            if not _is_nonneg_int(value):
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if not _is_nonneg_int(local_rank) or local_rank >= world_size:
            raise ValueError(f"local_rank must be in [0, world_size={world_size}), got {local_rank!r}")
        if not isinstance(special_tokens, Mapping):
            raise ValueError(f"special_tokens must be a mapping, got {type(special_tokens).__name__}")
        missing = [key for key in SPECIAL_TOKEN_KEYS if key not in special_tokens]
        if missing:
            raise ValueError(f"special_tokens lacks {missing}; it needs {list(SPECIAL_TOKEN_KEYS)}")
        if dataset_info is None:
            raise ValueError(
                "PackedDataset needs dataset_info ({group: {dataset_name: {'data_dir': ...}}}) "
                "to find the data of every dataset named in grouped_datasets"
            )

        self.expected_num_tokens = expected_num_tokens
        self.max_num_tokens_per_sample = max_num_tokens_per_sample
        self.max_num_tokens = max_num_tokens
        self.prefer_buffer_before = prefer_buffer_before
        self.max_buffer_size = max_buffer_size
        self.tokenizer = tokenizer
        self.local_rank = local_rank
        self.world_size = world_size
        self.num_workers = num_workers
        self.use_flex = use_flex
        for key, value in special_tokens.items():
            setattr(self, key, value)
        self.data_config = data_config
        self.interpolate_pos = interpolate_pos
        self.get_flattened_position_ids = (
            get_flattened_position_ids_interpolate if interpolate_pos else get_flattened_position_ids_extrapolate
        )
        self._dataset_info = dataset_info
        self._registry = registry
        # Seeds for the per-worker reseed: ``_global_seed`` wins when set (BAGEL's global seed),
        # otherwise the seed of the last ``set_epoch``.
        self._global_seed: int | None = None
        self._data_seed: int | None = None

        self.group_names = list(data_config.grouped_datasets)
        self.grouped_datasets, self.is_mandatory, self.grouped_weights = self.build_datasets(
            data_config.grouped_datasets, data_status
        )
        total = sum(self.grouped_weights)
        if not total > 0:
            weights = dict(zip(self.group_names, self.grouped_weights))
            raise ValueError(f"the group weights must sum to more than 0, got {weights}")

        self._dataset_iters: list[Iterator[dict]] | None = None
        self._live: _Progress | None = None
        self._pending: dict[str, Any] | None = None
        self._drop_counts: dict[str, int] = {}

    # ------------------------------------------------------------------ building
    def build_datasets(
        self, datasets_metainfo: Mapping[str, Mapping[str, Any]], data_status: Mapping[str, Any] | None
    ) -> tuple[list[Any], list[bool], list[float]]:
        """Instantiate one registry dataset per group; return (datasets, is_mandatory, weights).

        Works on a deep copy, so the caller's ``grouped_datasets`` is left untouched.
        """
        registry = self._registry
        if registry is None:
            from .datasets.registry import DATASET_REGISTRY as registry
        datasets, is_mandatory, weights = [], [], []
        for group, group_args in copy.deepcopy(dict(datasets_metainfo)).items():
            args = dict(group_args)
            is_mandatory.append(bool(args.pop("is_mandatory", False)))
            weight = args.pop("weight", 0.0)
            if not isinstance(weight, numbers.Real) or isinstance(weight, bool) or not weight >= 0:
                raise ValueError(f"group {group!r}: weight must be a number >= 0, got {weight!r}")
            weights.append(weight)
            if "frame_sampler_args" in args:
                raise ValueError(
                    f"group {group!r}: frame_sampler_args (video frame sampling) is not supported by editstream"
                )
            if "image_transform_args" in args or "vit_image_transform_args" in args:
                from .transforms import ImageTransform

                if "image_transform_args" in args:
                    args["transform"] = ImageTransform(**args.pop("image_transform_args"))
                if "vit_image_transform_args" in args:
                    args["vit_transform"] = ImageTransform(**args.pop("vit_image_transform_args"))
            self._attach_dataset_info(group, args)

            resume = args.pop("resume_data_status", True)
            group_status = None
            if data_status is not None and resume and group in data_status:
                group_status = data_status[group]
            if group not in registry:
                raise ValueError(f"no dataset class registered for group {group!r}; known: {sorted(registry)}")
            dataset_cls = registry[group]
            try:
                dataset = dataset_cls(
                    dataset_name=group,
                    tokenizer=self.tokenizer,
                    local_rank=self.local_rank,
                    world_size=self.world_size,
                    num_workers=self.num_workers,
                    data_status=group_status,
                    **args,
                )
            except TypeError as exc:
                raise TypeError(
                    f"cannot build dataset group {group!r} with {getattr(dataset_cls, '__name__', dataset_cls)}"
                    f" and arguments {sorted(args)}: {exc}"
                ) from exc
            datasets.append(dataset)
        return datasets, is_mandatory, weights

    def _attach_dataset_info(self, group: str, args: dict[str, Any]) -> None:
        """Turn ``dataset_names`` into data_dir_list / parquet_info / backend / storage_options."""
        names = args.pop("dataset_names", None)
        if names is None:
            raise ValueError(f"group {group!r} has no dataset_names")
        if isinstance(names, str) or not isinstance(names, Sequence) or not names:
            raise ValueError(f"group {group!r}: dataset_names must be a non-empty list, got {names!r}")
        group_info = self._dataset_info.get(group)
        if group_info is None:
            raise ValueError(f"dataset_info has no group {group!r}; it has {sorted(self._dataset_info)}")
        metas = []
        for name in names:
            if name not in group_info:
                raise ValueError(f"dataset_info[{group!r}] has no dataset {name!r}; it has {sorted(group_info)}")
            meta = group_info[name]
            if "data_dir" not in meta:
                raise ValueError(f"dataset_info[{group!r}][{name!r}] has no data_dir")
            metas.append(meta)

        backend = _agreed_setting(group, names, metas, "backend", args.pop("backend", None))
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"group {group!r}: backend must be one of {BACKENDS}, got {backend!r}")
        storage_options = _agreed_setting(group, names, metas, "storage_options", args.pop("storage_options", None))

        args["data_dir_list"] = []
        for name, meta in zip(names, metas):
            if self.local_rank == 0:
                logger.info("preparing dataset %s/%s", group, name)
            args["data_dir_list"].append(meta["data_dir"])
            if "parquet_info_path" in meta:
                info = _read_json(meta["parquet_info_path"], meta.get("storage_options", storage_options), group, name)
                args.setdefault("parquet_info", {}).update(info)
            if "json_dir" in meta:
                args.setdefault("json_dir_list", []).append(meta["json_dir"])
            if "jsonl_path" in meta:
                args.setdefault("jsonl_path_list", []).append(meta["jsonl_path"])
        if backend is not None:
            args["backend"] = backend
        if storage_options is not None:
            args["storage_options"] = storage_options

    def set_epoch(self, seed: int) -> None:
        """Remember ``seed`` for the worker reseed and forward it to every grouped dataset."""
        self._data_seed = int(seed)
        for dataset in self.grouped_datasets:
            dataset.set_epoch(seed)

    def worker_seed(self, worker_id: int) -> int:
        """Seed of the global RNGs for ``worker_id`` of this rank: distinct per (seed, rank, worker)."""
        base = int(self._global_seed or self._data_seed or 0)
        seed = base * max(1, self.world_size) + int(self.local_rank)
        seed = seed * max(1, self.num_workers) + int(worker_id)
        return seed & 0xFFFFFFFF

    # ------------------------------------------------------------------ one sequence
    def set_sequence_status(self) -> dict[str, Any]:
        """A fresh, empty packed-sequence accumulator."""
        status: dict[str, Any] = {"curr": 0}
        for key in (
            "sample_lens", "packed_position_ids", "nested_attention_masks", "split_lens", "attn_modes",
            "packed_text_ids", "packed_text_indexes", "packed_label_ids", "ce_loss_indexes",
            "ce_loss_weights", "vae_image_tensors", "packed_latent_position_ids", "vae_latent_shapes",
            "packed_vae_token_indexes", "packed_timesteps", "mse_loss_indexes", "packed_vit_tokens",
            "vit_token_seqlens", "packed_vit_position_ids", "packed_vit_token_indexes",
        ):
            status[key] = []
        return status

    def pack_sequence(self, sample: Mapping[str, Any], sequence_status: dict[str, Any]) -> dict[str, Any]:
        """Append one sample to the accumulator and return it.

        Text gets BOS/EOS, images get vision start/end tokens; cfg dropout draws ``random.random()``
        per ``enable_cfg`` item and a loss-bearing VAE split draws its timestep from
        ``np.random.randn()``, in plan order. The sample itself is not modified.
        """
        cfg = self.data_config
        status = sequence_status
        texts = iter(sample["text_ids_list"])
        images = iter(sample["image_tensor_list"])
        split_lens: list[int] = []
        attn_modes: list[str] = []
        curr = status["curr"]
        rope_id = 0
        sample_len = 0
        split_len = 0
        timestep: float | None = None

        for item in sample["sequence_plan"]:
            split_start = item.get("split_start", True)
            if split_start:
                split_len = 0
            kind = item["type"]

            if kind == "text":
                text_ids = list(next(texts))
                if item["enable_cfg"] == 1 and random.random() < cfg.text_cond_dropout_prob:
                    continue
                shifted = [self.bos_token_id] + text_ids
                span = range(curr, curr + len(shifted))
                status["packed_text_ids"].extend(shifted)
                status["packed_text_indexes"].extend(span)
                if item["loss"] == 1:
                    status["ce_loss_indexes"].extend(span)
                    status["ce_loss_weights"].extend([len2weight(len(shifted))] * len(shifted))
                    status["packed_label_ids"].extend(text_ids + [self.eos_token_id])
                curr += len(shifted)
                split_len += len(shifted)
                self._add_closing_token(status, item, self.eos_token_id, curr)
                curr += 1
                split_len += 1
                attn_modes.append("causal")
                status["packed_position_ids"].extend(range(rope_id, rope_id + split_len))
                rope_id += split_len

            elif kind == "vit_image":
                image = next(images)
                if item["enable_cfg"] == 1 and random.random() < cfg.vit_cond_dropout_prob:
                    rope_id += 1
                    continue
                status["packed_text_ids"].append(self.start_of_image)
                status["packed_text_indexes"].append(curr)
                curr += 1
                split_len += 1
                vit_tokens = patchify(image, cfg.vit_patch_size)
                n_tokens = vit_tokens.shape[0]
                status["packed_vit_token_indexes"].extend(range(curr, curr + n_tokens))
                curr += n_tokens
                split_len += n_tokens
                status["packed_vit_tokens"].append(vit_tokens)
                status["vit_token_seqlens"].append(n_tokens)
                status["packed_vit_position_ids"].append(
                    self.get_flattened_position_ids(
                        image.size(1), image.size(2), cfg.vit_patch_size,
                        max_num_patches_per_side=cfg.max_num_patch_per_side,
                    )
                )
                self._add_closing_token(status, item, self.end_of_image, curr)
                curr += 1
                split_len += 1
                attn_modes.append("full")
                status["packed_position_ids"].extend([rope_id] * split_len)
                rope_id += 1

            elif kind == "vae_image":
                image = next(images)
                if item["enable_cfg"] == 1 and random.random() < cfg.vae_cond_dropout_prob:
                    rope_id += 1
                    continue
                status["packed_text_ids"].append(self.start_of_image)
                status["packed_text_indexes"].append(curr)
                curr += 1
                split_len += 1
                status["vae_image_tensors"].append(image)
                status["packed_latent_position_ids"].append(
                    self.get_flattened_position_ids(
                        image.size(1), image.size(2), cfg.vae_image_downsample,
                        max_num_patches_per_side=cfg.max_latent_size,
                    )
                )
                latent_h = image.shape[1] // cfg.vae_image_downsample
                latent_w = image.shape[2] // cfg.vae_image_downsample
                status["vae_latent_shapes"].append((latent_h, latent_w))
                n_tokens = latent_h * latent_w
                status["packed_vae_token_indexes"].extend(range(curr, curr + n_tokens))
                if item["loss"] == 1:
                    status["mse_loss_indexes"].extend(range(curr, curr + n_tokens))
                    if split_start:
                        timestep = np.random.randn()
                    elif timestep is None:
                        raise ValueError(
                            f"sample {sample.get('data_indexes')}: a vae_image with loss continues a split "
                            "(split_start False) that no earlier vae_image started"
                        )
                else:
                    timestep = float("-inf")
                status["packed_timesteps"].extend([timestep] * n_tokens)
                curr += n_tokens
                split_len += n_tokens
                self._add_closing_token(status, item, self.end_of_image, curr)
                curr += 1
                split_len += 1
                if split_start:
                    attn_modes.append("noise" if item["loss"] == 1 and "frame_delta" not in item else "full")
                status["packed_position_ids"].extend([rope_id] * (n_tokens + 2))
                if "frame_delta" in item:
                    rope_id += item["frame_delta"]
                elif item["loss"] == 0:
                    rope_id += 1

            if item.get("split_end", True):
                split_lens.append(split_len)
                sample_len += split_len

        status["curr"] = curr
        status["sample_lens"].append(sample_len)
        if self.use_flex:
            status["split_lens"].extend(split_lens)
            status["attn_modes"].extend(attn_modes)
        else:
            status["nested_attention_masks"].append(prepare_attention_mask_per_sample(split_lens, attn_modes))
        return status

    @staticmethod
    def _add_closing_token(status: dict[str, Any], item: Mapping[str, Any], token_id: int, index: int) -> None:
        status["packed_text_ids"].append(token_id)
        status["packed_text_indexes"].append(index)
        if item["special_token_loss"] == 1:
            status["ce_loss_indexes"].append(index)
            status["ce_loss_weights"].append(1.0)
            status["packed_label_ids"].append(item["special_token_label"])

    def to_tensor(self, sequence_status: Mapping[str, Any]) -> dict[str, Any]:
        """Turn an accumulator into the batch dict the model consumes.

        Flex mode appends one padding split (causal) of ``max_num_tokens - sequence_length``
        tokens to ``split_lens``/``attn_modes``/``sample_lens``; otherwise the per-sample masks
        are returned as ``nested_attention_masks``.
        """
        status = sequence_status
        length = sum(status["sample_lens"])
        data: dict[str, Any] = {
            "sequence_length": length,
            "sample_lens": list(status["sample_lens"]),
            "packed_text_ids": torch.tensor(status["packed_text_ids"]),
            "packed_text_indexes": torch.tensor(status["packed_text_indexes"]),
            "packed_position_ids": torch.tensor(status["packed_position_ids"]),
        }
        if self.use_flex:
            pad = self.max_num_tokens - length
            data["split_lens"] = list(status["split_lens"]) + [pad]
            data["attn_modes"] = list(status["attn_modes"]) + ["causal"]
            data["sample_lens"].append(pad)
        else:
            data["nested_attention_masks"] = list(status["nested_attention_masks"])

        images = status["vae_image_tensors"]
        if images:
            largest = [max(sizes) for sizes in zip(*(image.shape for image in images))]
            padded = torch.zeros(size=(len(images), *largest))
            for i, image in enumerate(images):
                padded[i, :, : image.shape[1], : image.shape[2]] = image
            data["padded_images"] = padded
            data["patchified_vae_latent_shapes"] = list(status["vae_latent_shapes"])
            data["packed_latent_position_ids"] = torch.cat(status["packed_latent_position_ids"], dim=0)
            data["packed_vae_token_indexes"] = torch.tensor(status["packed_vae_token_indexes"])
        if status["packed_vit_tokens"]:
            data["packed_vit_tokens"] = torch.cat(status["packed_vit_tokens"], dim=0)
            data["packed_vit_position_ids"] = torch.cat(status["packed_vit_position_ids"], dim=0)
            data["packed_vit_token_indexes"] = torch.tensor(status["packed_vit_token_indexes"])
            data["vit_token_seqlens"] = torch.tensor(status["vit_token_seqlens"])
        if status["packed_timesteps"]:
            data["packed_timesteps"] = torch.tensor(status["packed_timesteps"])
            data["mse_loss_indexes"] = torch.tensor(status["mse_loss_indexes"])
        if status["packed_label_ids"]:
            data["packed_label_ids"] = torch.tensor(status["packed_label_ids"])
            data["ce_loss_indexes"] = torch.tensor(status["ce_loss_indexes"])
            data["ce_loss_weights"] = torch.tensor(status["ce_loss_weights"])
        return data

    # ------------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Start (or, after ``load_state_dict``, resume) the stream of packed batches."""
        self._live = None
        return self._run()

    def _run(self) -> Iterator[dict[str, Any]]:
        worker_id = _current_worker_id()
        pending, self._pending = self._pending, None
        progress = _Progress(worker_id=worker_id, buffer=[])
        if pending is not None and pending["started"]:
            if pending["worker_id"] != worker_id:
                raise ValueError(
                    f"state saved by DataLoader worker {pending['worker_id']} was loaded into worker "
                    f"{worker_id}; resume requires the same worker layout"
                )
            _restore_rng(pending["rng"])
            progress.buffer = pending["buffer"]
        else:
            seed = self.worker_seed(worker_id)
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
        if self._dataset_iters is None:
            self._dataset_iters = [iter(dataset) for dataset in self.grouped_datasets]
        self._live = progress
        for batch in self._pack_batches(progress.buffer):
            # The generator is about to suspend: nothing draws from the RNGs until it resumes.
            progress.rng = _capture_rng()
            yield batch

    def _pack_batches(self, buffer: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        total = sum(self.grouped_weights)
        cumprobs = [sum(self.grouped_weights[: i + 1]) / total for i in range(len(self.grouped_weights))]
        status = self.set_sequence_status()
        batch_data_indexes: list[Any] = []
        while True:
            if status["curr"] == 0:
                for group_index in range(len(self.grouped_datasets)):
                    if not self.is_mandatory[group_index]:
                        continue
                    while True:
                        sample = self._next_sample(group_index)
                        if sample is None:
                            continue
                        num_tokens = sample["num_tokens"] + 2 * len(sample["sequence_plan"])
                        if num_tokens < self.max_num_tokens_per_sample:
                            status = self.pack_sequence(sample, status)
                            batch_data_indexes.append(sample["data_indexes"])
                            break
                        self._note_drop("oversize", sample, f"{num_tokens} tokens, not < {self.max_num_tokens_per_sample}")

            if status["curr"] < self.prefer_buffer_before and buffer:
                sample = buffer.pop(0)
                from_buffer = True
            else:
                draw = random.random()
                group_index = 0
                for i, cumprob in enumerate(cumprobs):
                    if draw < cumprob:
                        group_index = i
                        break
                sample = self._next_sample(group_index)
                from_buffer = False
                if sample is None:
                    continue

            num_tokens = sample["num_tokens"] + 2 * len(sample["sequence_plan"])
            if num_tokens > self.max_num_tokens_per_sample:
                self._note_drop("oversize", sample, f"{num_tokens} tokens > {self.max_num_tokens_per_sample}")
                continue

            if status["curr"] + num_tokens > self.max_num_tokens:
                if len(buffer) < self.max_buffer_size and not from_buffer:
                    buffer.append(sample)
                else:
                    # As in the reference, the sample that did not fit is not packed later.
                    batch = self.to_tensor(status)
                    batch["batch_data_indexes"] = batch_data_indexes
                    logger.debug("yielding a packed sequence of %d tokens", batch["sequence_length"])
                    yield batch
                    status = self.set_sequence_status()
                    batch_data_indexes = []
                continue

            status = self.pack_sequence(sample, status)
            batch_data_indexes.append(sample["data_indexes"])
            if status["curr"] >= self.expected_num_tokens:
                batch = self.to_tensor(status)
                batch["batch_data_indexes"] = batch_data_indexes
                logger.debug("yielding a packed sequence of %d tokens", batch["sequence_length"])
                yield batch
                status = self.set_sequence_status()
                batch_data_indexes = []

    def _next_sample(self, group_index: int) -> dict[str, Any] | None:
        """Next sample of a group, or None (counted and logged) when it is malformed."""
        assert self._dataset_iters is not None
        try:
            sample = next(self._dataset_iters[group_index])
        except StopIteration:
            raise RuntimeError(
                f"dataset group {self.group_names[group_index]!r} stopped yielding samples; grouped "
                "datasets must loop over their data forever"
            ) from None
        problem = self._sample_problem(sample)
        if problem is not None:
            self._note_drop("malformed", sample, f"group {self.group_names[group_index]!r}: {problem}")
            return None
        return sample

    def _sample_problem(self, sample: Any) -> str | None:
        if not isinstance(sample, Mapping):
            return f"sample is a {type(sample).__name__}, not a dict"
        missing = [key for key in _SAMPLE_KEYS if key not in sample]
        if missing:
            return f"sample lacks {missing}"
        num_tokens = sample["num_tokens"]
        if not isinstance(num_tokens, numbers.Integral) or isinstance(num_tokens, bool):
            return f"num_tokens is {num_tokens!r}, not an int"
        plan = sample["sequence_plan"]
        n_text = n_image = 0
        seen_vae = False
        for position, item in enumerate(plan):
            if not isinstance(item, Mapping) or item.get("type") not in _PLAN_TYPES:
                return f"plan item {position} is not a text/vit_image/vae_image item: {item!r}"
            lacking = [key for key in ("enable_cfg", "loss", "special_token_loss") if key not in item]
            if lacking:
                return f"plan item {position} lacks {lacking}"
            if item["type"] == "text":
                n_text += 1
                continue
            image = sample["image_tensor_list"][n_image] if n_image < len(sample["image_tensor_list"]) else None
            n_image += 1
            if not isinstance(image, torch.Tensor) or image.dim() != 3:
                return f"image for plan item {position} is not a CxHxW tensor"
            if item["type"] == "vit_image":
                p = self.data_config.vit_patch_size
                if image.shape[1] % p or image.shape[2] % p:
                    return f"vit image {tuple(image.shape)} is not a multiple of the patch size {p}"
            else:
                if item["loss"] == 1 and not item.get("split_start", True) and not seen_vae:
                    return f"plan item {position} continues a vae split that was never started"
                seen_vae = True
        if n_text != len(sample["text_ids_list"]):
            return f"plan has {n_text} text items but text_ids_list has {len(sample['text_ids_list'])}"
        if n_image != len(sample["image_tensor_list"]):
            return f"plan has {n_image} image items but image_tensor_list has {len(sample['image_tensor_list'])}"
        return None

    def _note_drop(self, reason: str, sample: Any, detail: str) -> None:
        """Count a skipped sample; log the first three of each reason, then every 100th."""
        count = self._drop_counts.get(reason, 0) + 1
        self._drop_counts[reason] = count
        if count <= 3 or count % 100 == 0:
            where = sample.get("data_indexes") if isinstance(sample, Mapping) else None
            logger.warning("skipping %s sample #%d (data_indexes=%s): %s", reason, count, where, detail)

    @property
    def drop_counts(self) -> dict[str, int]:
        """Samples skipped by this process so far, per reason (``oversize``, ``malformed``)."""
        return dict(self._drop_counts)

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the stream after the last yielded batch.

        Buffered samples, the RNG states captured when the last batch was yielded, each grouped
        dataset's ``state_dict()``, the seeds and the rank/worker layout. Valid between batches.
        """
        if self._pending is not None:
            return _copy_tree(self._pending)
        progress = self._live
        if progress is not None and progress.rng is None:
            raise RuntimeError("state_dict() is only valid between batches, and this iteration has not yielded one")
        return {
            "format": STATE_FORMAT,
            "started": progress is not None,
            "rank": self.local_rank,
            "world_size": self.world_size,
            "num_workers": self.num_workers,
            "worker_id": progress.worker_id if progress is not None else _current_worker_id(),
            "data_seed": self._data_seed,
            "global_seed": self._global_seed,
            "buffer": _copy_tree(progress.buffer) if progress is not None else [],
            "rng": _copy_tree(progress.rng) if progress is not None else None,
            "datasets": {
                name: _copy_tree(dataset.state_dict())
                for name, dataset in zip(self.group_names, self.grouped_datasets)
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Prepare this (fresh) dataset to resume from ``state``; call before ``iter()``.

        Restores the seeds (re-running ``set_epoch`` if the saved seed differs) and each
        dataset's state now; the buffer and RNG states are applied when iteration starts,
        instead of the usual reseed.
        """
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"not a PackedDataset state (expected format {STATE_FORMAT!r}, got {found!r})")
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"PackedDataset state lacks {missing}; it may be truncated or from another tool")
        for key, mine in (("rank", self.local_rank), ("world_size", self.world_size), ("num_workers", self.num_workers)):
            if state[key] != mine:
                raise ValueError(
                    f"cannot resume: the state was saved with {key}={state[key]} but this dataset has "
                    f"{key}={mine}; resume requires the same rank / world_size / num_workers layout"
                )
        saved_groups = list(state["datasets"])
        if saved_groups != self.group_names:
            raise ValueError(f"cannot resume: the state has dataset groups {saved_groups}, this dataset has {self.group_names}")
        self._global_seed = state["global_seed"]
        if state["data_seed"] is not None and state["data_seed"] != self._data_seed:
            self.set_epoch(state["data_seed"])
        for name, dataset in zip(self.group_names, self.grouped_datasets):
            dataset.load_state_dict(_copy_tree(state["datasets"][name]))
        self._pending = _copy_tree(dict(state))
        self._dataset_iters = None
        self._live = None


def _agreed_setting(
    group: str, names: Sequence[str], metas: Sequence[Mapping[str, Any]], key: str, group_value: Any
) -> Any:
    """The one value of ``key`` shared by a group's dataset_info entries (group value as default)."""
    resolved = [meta.get(key, group_value) for meta in metas]
    if any(value != resolved[0] for value in resolved[1:]):
        listing = ", ".join(f"{name}={value!r}" for name, value in zip(names, resolved))
        raise ValueError(
            f"group {group!r}: its datasets disagree on {key} ({listing}); one group is read with one "
            f"{key}, so put datasets with a different {key} in their own group"
        )
    if group_value is not None and resolved and resolved[0] != group_value:
        raise ValueError(
            f"group {group!r}: {key}={group_value!r} in grouped_datasets but {resolved[0]!r} in dataset_info"
        )
    return resolved[0] if resolved else group_value


def _read_json(url: str, storage_options: Mapping[str, Any] | None, group: str, name: str) -> dict[str, Any]:
    from .storage import read_bytes

    try:
        raw = read_bytes(url, dict(storage_options) if storage_options else None)
    except OSError as exc:
        raise OSError(f"cannot read parquet_info_path {url!r} of dataset {group}/{name}: {exc}") from exc
    try:
        info = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"parquet_info_path {url!r} of dataset {group}/{name} is not valid JSON: {exc}") from exc
    if not isinstance(info, dict):
        raise ValueError(f"parquet_info_path {url!r} of dataset {group}/{name} holds a {type(info).__name__}, not an object")
    return info


def collate_fn(batch: Any) -> dict[str, Any]:
    """DataLoader collate for ``batch_size=1``: unwrap the single packed batch unchanged.

    The packer already builds whole batches, so there is nothing to stack; with
    ``batch_size=None`` the DataLoader passes the dict itself, which is returned as is.
    """
    if isinstance(batch, Mapping):
        return dict(batch)
    if isinstance(batch, (list, tuple)) and len(batch) == 1 and isinstance(batch[0], Mapping):
        return dict(batch[0])
    size = len(batch) if isinstance(batch, (list, tuple)) else type(batch).__name__
    raise ValueError(f"collate_fn expects one packed batch (DataLoader batch_size=1), got {size}")


def make_bagel_multimodal_dataset(
    *,
    tokenizer: Any,
    special_tokens: Mapping[str, int],
    grouped_datasets: Mapping[str, Mapping[str, Any]],
    local_rank: int | None = None,
    world_size: int | None = None,
    num_workers: int = 4,
    expected_num_tokens: int = 32768,
    max_num_tokens_per_sample: int = 16384,
    max_num_tokens: int = 36864,
    prefer_buffer_before: int = 16384,
    max_buffer_size: int = 50,
    interpolate_pos: bool = False,
    use_flex: bool = False,
    data_status: Mapping[str, Any] | None = None,
    data_seed: int = 42,
    text_cond_dropout_prob: float = 0.1,
    vit_cond_dropout_prob: float = 0.4,
    vae_cond_dropout_prob: float = 0.1,
    vae_image_downsample: int = 16,
    max_latent_size: int = 32,
    vit_patch_size: int = 14,
    max_num_patch_per_side: int = 70,
    dataset_info: Mapping[str, Any] | None = None,
    registry: Mapping[str, Callable[..., Any]] | None = None,
) -> PackedDataset:
    """Build the config and the ``PackedDataset`` for a BAGEL training run in one call.

    Like the reference, it does not call ``set_epoch``: the training script calls
    ``dataset.set_epoch(data_seed)`` before iterating (``data_seed`` is kept on the config).
    """
    data_config = BagelDatasetConfig(
        grouped_datasets,
        text_cond_dropout_prob=text_cond_dropout_prob,
        vit_cond_dropout_prob=vit_cond_dropout_prob,
        vae_cond_dropout_prob=vae_cond_dropout_prob,
        vae_image_downsample=vae_image_downsample,
        max_latent_size=max_latent_size,
        vit_patch_size=vit_patch_size,
        max_num_patch_per_side=max_num_patch_per_side,
        data_seed=data_seed,
    )
    return PackedDataset(
        data_config,
        tokenizer,
        special_tokens,
        local_rank,
        world_size,
        num_workers,
        expected_num_tokens=expected_num_tokens,
        max_num_tokens_per_sample=max_num_tokens_per_sample,
        max_num_tokens=max_num_tokens,
        prefer_buffer_before=prefer_buffer_before,
        max_buffer_size=max_buffer_size,
        interpolate_pos=interpolate_pos,
        use_flex=use_flex,
        data_status=data_status,
        dataset_info=dataset_info,
        registry=registry,
    )

"""The reference run: BAGEL's endless packing loop, draw for draw, resumable between batches at the same layout;
its state holds the buffer as references and the RNG states as a chain (format 2); format 1 still loads."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...loader.distributed import current_worker_id
from ..checkpoint import formats
from ..checkpoint.chain import ChainEncoder
from ..checkpoint.points import RngPoint, apply_point, capture_point, seed_all
from ..checkpoint.references import Buffered, SampleBuffer, buffer_state, restore_buffer
from ..draws import GroupDraws, draw_group, finish, open_with_mandatory, sample_tokens, traced
from ..roles import PackingHost, SequencePacking


def reference_batches(packer: SequencePacking, draws: GroupDraws, buffer: SampleBuffer) -> Iterator[dict[str, Any]]:
    """BAGEL's packing loop, endless, draw for draw."""
    spec, weights = packer.spec, packer.grouped_weights
    total = sum(weights)
    cumprobs = [sum(weights[: i + 1]) / total for i in range(len(weights))]
    status = packer.set_sequence_status()
    batch_data_indexes: list[Any] = []
    while True:
        if status.curr == 0:
            status = open_with_mandatory(packer, draws, status, batch_data_indexes)
        if status.curr < spec.prefer_buffer_before and buffer:
            sample: dict[str, Any] | None = buffer.pop(0).sample
            from_buffer = True
        else:
            group = draw_group(cumprobs)
            sample = draws.next_sample(group)
            from_buffer = False
        if sample is None:
            continue
        num_tokens = sample_tokens(sample)
        if num_tokens > spec.max_num_tokens_per_sample:
            draws.note_drop("oversize", sample, f"{num_tokens} tokens > {spec.max_num_tokens_per_sample}")
            continue
        if status.curr + num_tokens > spec.max_num_tokens:
            if len(buffer) < spec.max_buffer_size and not from_buffer:
                buffer.append(Buffered(sample, group, draws.origins[group]))
            else:
                # As in the reference, the sample that did not fit is not packed later.
                yield finish(packer, status, batch_data_indexes)
                status, batch_data_indexes = packer.set_sequence_status(), []
            continue
        status = packer.pack_sequence(sample, status)
        batch_data_indexes.append(sample["data_indexes"])
        if status.curr >= spec.expected_num_tokens:
            yield finish(packer, status, batch_data_indexes)
            status, batch_data_indexes = packer.set_sequence_status(), []


@dataclass
class LiveIteration:
    """What one running iteration exposes to ``state_dict()``: references, encoded only on demand."""

    worker_id: int
    buffer: SampleBuffer = field(default_factory=list)
    rng: RngPoint | None = None
    encoder: ChainEncoder = field(default_factory=ChainEncoder)


class ReferenceRun:
    """The reference packing as a run: endless batches, a state between any two, resumed at the same layout."""

    def __init__(self, packer: PackingHost) -> None:
        self.packer = packer
        self.epoch = 0  # kept for the loader's epoch bookkeeping; the reference has no epochs
        self.draws: GroupDraws | None = None
        self.live: LiveIteration | None = None
        self.pending: dict[str, Any] | None = None

    def set_epoch(self, seed: int) -> None:
        """Forward ``seed`` to every grouped dataset (which takes its rank's slice of units)."""
        for dataset in self.packer.grouped_datasets:
            dataset.set_epoch(seed)

    def start_epoch(self, epoch: int) -> None:
        """Only noted: the reference stream does not end, so it has no epochs to start."""
        self.epoch = int(epoch)

    def batches(self) -> Iterator[dict[str, Any]]:
        """The stream from the start, or, after ``load_state_dict``, from where the state was taken."""
        self.live = None
        return self._run()

    def _run(self) -> Iterator[dict[str, Any]]:
        worker_id = current_worker_id()
        pending, self.pending = self.pending, None
        live = LiveIteration(worker_id=worker_id)
        if pending is not None and pending["started"]:
            if pending["worker_id"] != worker_id:
                raise ValueError(
                    f"state saved by DataLoader worker {pending['worker_id']} was loaded into worker "
                    f"{worker_id}; resume requires the same worker layout"
                )
            self._restore_buffer(pending, live)
        else:
            seed_all(self.packer.worker_seed(worker_id))
        if self.draws is None:
            self.draws = GroupDraws(self.packer, [traced(dataset) for dataset in self.packer.grouped_datasets])
        self.live = live
        for batch in reference_batches(self.packer, self.draws, live.buffer):
            # The generator is about to suspend: nothing draws from the RNGs until it resumes.
            live.rng = capture_point()
            yield batch

    def _restore_buffer(self, pending: Mapping[str, Any], live: LiveIteration) -> None:
        """The saved buffer (its referenced samples parsed again) and RNG states, into ``live``."""
        if pending["format"] == formats.LITERAL_STATE_FORMAT:
            live.buffer.extend(Buffered(sample, 0, None) for sample in pending["buffer"])
            formats.restore_rng(pending["rng"])
            return
        names, datasets = self.packer.group_names, self.packer.grouped_datasets
        live.buffer, point = restore_buffer(pending["buffer"], pending["rng"], names, datasets)
        apply_point(point)

    def state_dict(self) -> dict[str, Any]:
        """The buffer as references, the RNG chain, each group's ``state_dict()``, the seeds and layout."""
        if self.pending is not None:
            return formats.copy_tree(self.pending)
        live, packer = self.live, self.packer
        if live is not None and live.rng is None:
            raise RuntimeError("state_dict() is only valid between batches, and this iteration has not yielded one")
        buffer: list[dict[str, Any]] = []
        chain: dict[str, Any] | None = None
        if live is not None:
            assert live.rng is not None
            buffer, chain = buffer_state(live.buffer, live.rng, packer.group_names, live.encoder)
        global_seed, data_seed = packer.seeds()
        return {
            "format": formats.STATE_FORMAT,
            "started": live is not None,
            "rank": packer.local_rank,
            "world_size": packer.world_size,
            "num_workers": packer.num_workers,
            "worker_id": live.worker_id if live is not None else current_worker_id(),
            "data_seed": data_seed,
            "global_seed": global_seed,
            "buffer": buffer,
            "rng": chain,
            "datasets": {
                name: formats.copy_tree(dataset.state_dict())
                for name, dataset in zip(packer.group_names, packer.grouped_datasets)
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Check ``state`` against this layout and groups, restore seeds and datasets; the buffer waits for iter()."""
        if isinstance(state, Mapping) and state.get("format") in formats.ELASTIC_FORMATS + formats.MERGED_FORMATS:
            raise ValueError(
                f"cannot resume: the state ({state['format']}) was saved with elastic: true, this dataset is not "
                f"elastic; set elastic: true in the dataset config"
            )
        packer = self.packer
        layout = {"rank": packer.local_rank, "world_size": packer.world_size, "num_workers": packer.num_workers}
        if formats.is_nemo_state(state):
            global_seed, data_seed = packer.seeds()
            mine = {**layout, "worker_id": current_worker_id(), "data_seed": data_seed, "global_seed": global_seed}
            state = formats.from_nemo_state(state, mine, packer.group_names)
        formats.check_resumable(state, layout, packer.group_names)
        packer.restore_seeds(state["global_seed"], state["data_seed"])
        for name, dataset in zip(packer.group_names, packer.grouped_datasets):
            dataset.load_state_dict(formats.copy_tree(state["datasets"][name]))
        self.pending = formats.copy_tree(dict(state))
        self.draws = None
        self.live = None

"""check_state_contract itself: correct stages pass, and each way of breaking the contract fails.

The stages here are minimal counters, not editstream components: each yields
``{"position": p, ...}`` for p = 0, 1, 2 ... and resumes from a saved position. Each broken
variant violates exactly one clause, so a checker that stopped checking it would be caught.
"""

from __future__ import annotations

import random

import pytest

from helpers import capture_global_rng, check_state_contract, json_roundtrip, torch_roundtrip


class Counter:
    """A correct stage: item p is ``{"position": p, "value": p * p % 97}``; the state is the next position."""

    def __init__(self):
        self.position = 0

    def item(self, position):
        return {"position": position, "value": position * position % 97}

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = state["position"]

    def __iter__(self):
        while True:
            position = self.position
            self.position += 1
            yield self.item(position)


class CallerRngCounter(Counter):
    """Correct when its caller keeps the global RNG (``owns_global_rng=False``), like the datasets."""

    def item(self, position):
        return {"position": position, "draw": random.random()}


class GlobalRngCounter(Counter):
    """Owns the global RNG like PackedDataset: seeds it when starting fresh, saves and restores it."""

    def __init__(self):
        super().__init__()
        self.rng = None
        self.pending_rng = None

    def state_dict(self):
        return {"position": self.position, "rng": self.rng}

    def load_state_dict(self, state):
        self.position = state["position"]
        self.pending_rng = state["rng"]

    def __iter__(self):
        if self.pending_rng is None:
            random.seed(1234)
        else:
            version, internal, gauss = self.pending_rng
            random.setstate((version, tuple(internal), gauss))
        while True:
            position = self.position
            self.position += 1
            item = {"position": position, "draw": random.random()}
            self.rng = random.getstate()
            yield item


# --------------------------------------------------------------------------- broken variants
class SkipsOne(Counter):
    """(a): resumes one item late."""

    def load_state_dict(self, state):
        self.position = state["position"] + 1


class RepeatsOne(Counter):
    """(a): resumes one item early, repeating the last item before the state."""

    def load_state_dict(self, state):
        self.position = max(0, state["position"] - 1)


class UnsavedGlobalDraws(CallerRngCounter):
    """(a): draws from the global RNG but claims to own it (nothing restores it in a new process)."""


class LiveState(Counter):
    """(a): ``state_dict()`` hands out the dict that iteration keeps updating."""

    def __init__(self):
        self.state = {"position": 0}

    @property
    def position(self):
        return self.state["position"]

    @position.setter
    def position(self, value):
        self.state["position"] = value

    def state_dict(self):
        return self.state


class StateDictAdvances(Counter):
    """(a): taking the state moves the stage on (a flush, say), so the stream it yields changes."""

    def state_dict(self):
        state = super().state_dict()
        self.position += 1
        return state


class IntKeysLostInJson(Counter):
    """(b): positions keyed by worker id (an int); after JSON the key is "0" and the lookup misses."""

    def state_dict(self):
        return {"positions": {0: self.position}}

    def load_state_dict(self, state):
        self.position = state["positions"].get(0, 0)


class StateRelativeToRestore(Counter):
    """(c): the state counts the items this iteration yielded, right only when it started at 0."""

    def __iter__(self):
        self.yielded = 0
        for item in super().__iter__():
            self.yielded += 1
            yield item

    def state_dict(self):
        return {"position": getattr(self, "yielded", 0)}


class IgnoresTheInitialState(Counter):
    """(d): loading position 0 is taken as "nothing to restore", so a used stage does not go back."""

    def load_state_dict(self, state):
        if state["position"]:
            self.position = state["position"]


# --------------------------------------------------------------------------- the checker
@pytest.mark.parametrize("n_before", [0, 1, 5])
@pytest.mark.parametrize("roundtrips", [(json_roundtrip, torch_roundtrip), (torch_roundtrip,)])
def test_a_correct_stage_passes(n_before, roundtrips):
    state = check_state_contract(Counter, n_before, 4, roundtrips=roundtrips)
    assert state == {"position": n_before}


def test_stages_that_leave_or_keep_the_global_rng_pass_with_the_matching_flag():
    check_state_contract(CallerRngCounter, 3, 4, owns_global_rng=False)
    check_state_contract(GlobalRngCounter, 3, 4, roundtrips=(torch_roundtrip,))


@pytest.mark.parametrize(
    ("stage", "kwargs", "match"),
    [
        (SkipsOne, {}, r"^\(a, b\) a stage restored after 3 items through json_roundtrip: item 3 differs"),
        (RepeatsOne, {}, r"^\(a, b\) a stage restored after 3 items through json_roundtrip: item 3 differs"),
        (UnsavedGlobalDraws, {}, r"^\(a, b\) a stage restored after 3 items .* item 3 differs.*\['draw'\]"),
        (LiveState, {}, r"^\(a, b\) a stage restored after 3 items through json_roundtrip: item 3 differs"),
        (StateDictAdvances, {}, r"^\(a\) the run the state was taken from, going on: item 3 differs"),
        (IntKeysLostInJson, {}, r"^\(a, b\) a stage restored after 3 items through json_roundtrip: item 3 differs"),
        (StateRelativeToRestore, {}, r"^\(c\) a stage restored from a state taken 2 items after a restore: item 5"),
        (IgnoresTheInitialState, {}, r"^\(d\) a used stage loaded with a new stage's state: item 0 differs"),
        (Counter, {"make_restored": SkipsOne}, r"^\(a, b\) .* item 3 differs"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else None,
)
def test_each_broken_stage_fails_on_its_clause(stage, kwargs, match):
    with pytest.raises(AssertionError, match=match):
        check_state_contract(stage, 3, 4, **kwargs)


def test_the_int_key_stage_passes_without_json_so_clause_b_is_what_catches_it():
    check_state_contract(IntKeysLostInJson, 3, 4, roundtrips=(torch_roundtrip,))


def test_a_state_that_json_cannot_hold_fails():
    class BytesState(Counter):
        def state_dict(self):
            return {"position": self.position, "tag": b"raw"}

    with pytest.raises(TypeError, match="Object of type bytes is not JSON serializable"):
        check_state_contract(BytesState, 3, 4)


def test_the_global_rngs_are_put_back():
    random.seed(5)
    before = capture_global_rng()
    check_state_contract(GlobalRngCounter, 2, 3, roundtrips=(torch_roundtrip,))
    after = capture_global_rng()
    assert after[0] == before[0] and (after[1][1] == before[1][1]).all() and after[2].equal(before[2])


@pytest.mark.parametrize(("n_before", "n_after"), [(-1, 4), (3, 1)])
def test_too_short_a_run_is_refused(n_before, n_after):
    with pytest.raises(ValueError, match="need n_before >= 0, n_after >= 2"):
        check_state_contract(Counter, n_before, n_after)

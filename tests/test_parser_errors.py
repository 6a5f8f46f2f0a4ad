"""A parser's own bug is not a bad row: it stops the stream, while bad data is still dropped and counted."""

from __future__ import annotations

import json
import random

import pytest

from editstream import ParquetStandardIterableDataset, SftJSONLIterableDataset
from editstream.data.drops import FailureBudgetExceeded
from test_units import take, write_files


class BrokenParser(ParquetStandardIterableDataset):
    """A parser with a typo: every row hits a ``NameError`` (its code, not the data)."""

    def parse_row(self, row):
        return {"rid": row["rid"], "draw": random.random(), "oops": undefined_name}  # noqa: F821


class SometimesBroken(ParquetStandardIterableDataset):
    """Bad data raises the errors bad data raises; the row flagged ``bad`` hits an ``AttributeError`` bug."""

    def parse_row(self, row):
        rid = row["rid"]
        if rid.endswith("r0"):
            return {"rid": rid, "x": random.choice([])}  # IndexError: an empty list in the data
        if rid.endswith("r1"):
            return {"rid": rid, "x": json.loads("{not json")}  # a JSON error in the data
        if row["bad"]:
            return {"rid": rid.no_such_method()}  # the parser's own bug
        return {"rid": rid}


def make(cls, root, **kw):
    kw.setdefault("num_workers", 0)
    return cls("toy", None, None, None, [str(root)], [kw.pop("num_used", 3)], **kw)


def test_a_parser_with_a_name_error_stops_the_stream_naming_it(tmp_path):
    write_files(tmp_path, num_files=3, row_groups=4, rows=4)  # 48 rows: more than the budget
    ds = make(BrokenParser, tmp_path)
    with pytest.raises(FailureBudgetExceeded) as err:
        take(ds, 1)
    text = str(err.value)
    assert "'toy'" in text and "NameError" in text and "undefined_name" in text and "parse_row" in text
    assert "part-00" in text and "bad_row" in text  # where, and the counts so far
    assert isinstance(err.value.__cause__, NameError)  # the traceback is chained
    assert ds.drops.counts["bad_row"] == ds.parser_failure_budget + 1


def test_a_small_dataset_with_a_broken_parser_names_the_error_after_one_pass(tmp_path):
    write_files(tmp_path, num_files=1, row_groups=1, rows=3)  # fewer rows than the budget
    ds = make(BrokenParser, tmp_path, num_used=1)
    with pytest.raises(RuntimeError, match=r"gave no sample.*NameError.*undefined_name.*not a data problem") as err:
        take(ds, 1)
    assert isinstance(err.value.__cause__, NameError)


def test_data_errors_are_dropped_and_counted_without_limit(tmp_path):
    write_files(tmp_path, num_files=3, row_groups=4, rows=8)
    ds = make(SometimesBroken, tmp_path)
    ds.parser_failure_budget = 0  # data errors never touch it
    got = take(ds, 6 * 12 * 2)  # two passes
    assert {s["rid"][-2:] for s in got} == {f"r{i}" for i in range(2, 8)}
    assert ds.drop_counts == {"bad_row": 2 * 2 * 12}
    errors = {d.error.split(":")[0] for d in ds.drops.recent}
    assert errors == {"IndexError", "JSONDecodeError"}


def test_a_parser_bug_between_good_rows_is_dropped_until_it_runs_out_of_the_budget(tmp_path):
    write_files(tmp_path, num_files=1, row_groups=1, rows=8, bad={"f0g0r5"})
    ds = make(SometimesBroken, tmp_path, num_used=1)
    got = take(ds, 10)  # a bug now and then: dropped and counted like a bad row, the budget resets
    assert "f0g0r5" not in {s["rid"] for s in got}
    assert [d.error.split(":")[0] for d in ds.drops.recent if d.location["row"] == 5][0] == "AttributeError"
    ds = make(SometimesBroken, tmp_path, num_used=1)
    ds.parser_failure_budget = 0
    with pytest.raises(FailureBudgetExceeded, match="AttributeError"):
        take(ds, 10)


def test_a_jsonl_parser_error_that_is_not_data_counts_against_the_budget(tmp_path):
    lines = [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "ok"}]}] * 40
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))

    class Tokenizer:
        def encode(self, text):
            return undefined_tokenizer_table[text]  # noqa: F821

    class Transform:
        stride = 14

    ds = SftJSONLIterableDataset(
        "sft", Transform(), Tokenizer(), None, [str(tmp_path / "x.jsonl")], [str(tmp_path)], [40], num_workers=0
    )
    with pytest.raises(FailureBudgetExceeded, match="NameError.*undefined_tokenizer_table"):
        take(ds, 1)
    assert ds.drop_counts == {"bad_row": ds.parser_failure_budget + 1}


class Exits(ParquetStandardIterableDataset):
    """A plug-in parser that calls ``sys.exit`` on a row instead of raising."""

    def parse_row(self, row):
        raise SystemExit(3)


class NoTokens(ParquetStandardIterableDataset):
    """A plug-in parser whose samples lack ``num_tokens``."""

    def parse_row(self, row):
        return {"sequence_plan": [], "rid": row["rid"]}


def exploding_preview(title, row):
    raise RuntimeError("preview exploded")


def test_a_parser_that_exits_is_an_error_naming_the_dataset_and_the_row(tmp_path):
    write_files(tmp_path, num_files=1, row_groups=1, rows=3)
    with pytest.raises(RuntimeError, match=r"dataset 'toy' \(class Exits\): parse_row raised SystemExit\(3\)") as err:
        take(make(Exits, tmp_path, num_used=1), 1)
    assert "'row_group': 0, 'row': 0" in str(err.value) and "part-000.parquet" in str(err.value)


def test_stream_names_the_dataset_and_row_of_a_sample_without_num_tokens(tmp_path):
    from editstream.cli.cmd_stream import _tokens
    from editstream.cli.errors import DataProblem

    write_files(tmp_path, num_files=1, row_groups=1, rows=3)
    ds = make(NoTokens, tmp_path, num_used=1)
    (sample,) = take(ds, 1)
    with pytest.raises(DataProblem, match=r"dataset 'toy' \(kind NoTokens\): parse_row returned a sample whose "):
        _tokens(sample, ds)


def test_a_preview_function_that_raises_is_shown_on_its_row():
    from editstream.kinds import DatasetKind, register, unregister
    from editstream.preview.collect import to_record

    kind = register(DatasetKind(name="exploding", summary="test", preview="test_parser_errors:exploding_preview"))
    try:
        record = to_record(kind, "part-0 row 3", {"x": 1})
    finally:
        unregister("exploding")
    assert record.title == "part-0 row 3" and record.kind == "exploding"
    assert record.texts == ["(the exploding preview function failed on this row: RuntimeError: preview exploded)"]

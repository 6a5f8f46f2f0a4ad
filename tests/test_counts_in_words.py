"""The commands' summaries count in words: one shard, one sample, one record is never "1 shards"."""

from __future__ import annotations

import pytest

from editstream.format.detect import Partial
from editstream.io.words import counted
from helpers import run_cli


@pytest.mark.parametrize(
    ("n", "noun", "expected"), [(1, "shard", "1 shard"), (0, "shard", "0 shards"), (4, "source row", "4 source rows")]
)
def test_a_count_takes_the_singular_for_one_only(n, noun, expected):
    assert counted(n, noun) == expected


def test_an_unfinished_conversion_counts_its_shards_in_words():
    assert Partial(done=1).describe() == "1 shard done"
    assert (Partial(done=0, total=1).describe(), Partial(done=7, total=32).describe()) == (
        "0/1 shard done",
        "7/32 shards done",
    )


def test_verify_and_preview_of_a_one_shard_conversion_say_one_shard(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "wds"
    run_cli("-q", "synth", str(src), "--files", "1", "--row-groups", "1", "--rows", "1", check=True)
    run_cli("-q", "convert", str(src), str(dst), check=True)
    verified = run_cli("verify", str(dst), "--source", str(src), check=True)
    assert "OK - 1 shard, 1 sample, 1 source row compared, 0 problems" in verified.stdout
    previewed = run_cli("preview", str(dst), "-o", str(tmp_path / "p.html"), "-n", "1", check=True)
    assert previewed.stdout.strip().endswith("(1 record)")

"""A short fault soak in CI: hundreds of injected storage faults, not one sample lost, repeated
or changed (the long soak with thousands of faults is benchmarks/soak.py, in make bench)."""

from __future__ import annotations

import pytest

from fault_soak import run_soak

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def test_a_stream_through_hundreds_of_faults_equals_the_fault_free_stream():
    # 80 samples: with several ranged reads in flight a fault costs less time, and about 130 faults are met
    result = run_soak(80, every=2, stall_seconds=1.0, read_timeout=0.3)
    assert result.total_faults >= 100, result
    assert set(result.faults) == {"reset_mid_body", "http_503", "http_500", "stall"}, result.faults
    assert result.samples_yielded == result.samples_expected == 80
    assert (result.matching, result.duplicates, result.lost, result.changed) == (80, 0, 0, 0)
    assert result.unreadable_units == 0

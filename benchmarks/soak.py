#!/usr/bin/env python
"""Fault soak: stream converted shards from S3 (moto) through a fault-injecting proxy and check
that every sample equals the fault-free stream's. Prints a table.

    python benchmarks/soak.py [--samples 500] [--min-faults 1000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the soak lives beside the tests

from fault_soak import run_soak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=500, help="samples streamed (each way)")
    ap.add_argument("--min-faults", type=int, default=1000, help="fail (exit 1) below this many injected faults")
    ap.add_argument("--every", type=int, default=2, help="a fault every N-th object GET")
    args = ap.parse_args()
    result = run_soak(args.samples, every=args.every)
    rows = [
        ("samples expected (fault-free stream)", result.samples_expected),
        ("samples yielded through the faults", result.samples_yielded),
        ("equal to the fault-free sample at the same position", result.matching),
        ("duplicates", result.duplicates),
        ("lost", result.lost),
        ("changed", result.changed),
        ("units dropped as unreadable", result.unreadable_units),
        ("requests through the proxy", result.requests),
        ("faults injected", result.total_faults),
        *((f"  {kind}", n) for kind, n in sorted(result.faults.items())),
        ("seconds, fault-free", f"{result.seconds_clean:.1f}"),
        ("seconds, through the faults", f"{result.seconds_faulty:.1f}"),
        ("extra time", f"{result.seconds_faulty - result.seconds_clean:+.1f} s"),
    ]
    print("| fault soak | value |\n|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    ok = (
        result.matching == result.samples_expected
        and result.duplicates == result.lost == result.changed == 0
        and result.total_faults >= args.min_faults
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

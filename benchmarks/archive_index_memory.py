"""Peak RSS of a process that reads a published dataset in place, on an archive of many tiny members.

Builds (once) an X2I-shaped dataset: ``set.jsonl`` of N lines at the root, its images in
``set/images.tar.gz`` (N tiny members). Then, each in a fresh process (``VmHWM`` of its own): the
listing pass (indexes the archive, counts the metadata; run first, untimed), then what every worker
does: open the archive from its kept index and read 100 members (``archive``), and open the in-place
entry and read its last unit (``worker``). ``--src`` picks the editstream sources to measure, so an
older tree gives the "before" figures. Not a test: run by hand.

    python benchmarks/archive_index_memory.py --out /tmp/aim --members 200000 --src src
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

CHILD = r"""
import json, os, sys
from pathlib import Path

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) // 1024

os.environ["EDITSTREAM_CACHE"] = sys.argv[2]
from editstream.adapters import InPlace, resolve_mapping
from editstream.data.adapted.inplace import in_place_entry
from editstream.data.media import open_media
from editstream.data.open import open_data
import indexed_gzip, PIL.Image, pyarrow.parquet, torch  # what reading imports on first use, before "start"
from editstream.kinds import get_kind
get_kind("unified_edit")
root, what = Path(sys.argv[1]), sys.argv[3]
start = status("VmRSS")
if what == "archive":
    source = open_media(str(root / "set" / "images.tar.gz"), index_dir=os.path.join(sys.argv[2], "media"))
    for k in range(0, 100):
        source.read(f"images/{k:07d}.png")
else:
    handle = open_data(in_place_entry({"data_dir": str(root), "from": "x2i"}, "bench"))
    source = handle.source()
    units = handle.units(source)
    if what == "worker":
        source = __import__("pickle").loads(__import__("pickle").dumps(source))
        rows = list(source.iter_unit_rows(units[-1], None))
print(json.dumps({"what": what, "start_mb": start, "peak_mb": status("VmHWM"), "end_mb": status("VmRSS")}))
"""


def build(root: Path, n: int) -> None:
    """The dataset, unless it is there already."""
    if (root / "set.jsonl").exists():
        return
    (root / "set").mkdir(parents=True, exist_ok=True)
    with tarfile.open(root / "set" / "images.tar.gz", "w:gz", compresslevel=1) as tar:
        for k in range(n):
            info = tarfile.TarInfo(f"images/{k:07d}.png")
            info.size = 8
            tar.addfile(info, io.BytesIO(b"notapng!"))
    with open(root / "set.jsonl", "w") as out:
        for k in range(0, n, 2):
            item = {"instruction": f"edit {k}", "input_images": [f"set/images/{k:07d}.png"]}
            out.write(json.dumps({**item, "output_image": f"set/images/{k + 1:07d}.png"}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--members", type=int, default=200_000)
    parser.add_argument("--src", default="src")
    args = parser.parse_args()
    root = Path(args.out) / "data"
    build(root, args.members)
    cache = Path(args.out) / f"cache-{abs(hash(os.path.abspath(args.src))) % 10**6}"
    env = {**os.environ, "PYTHONPATH": os.path.abspath(args.src)}
    for what in ("list", "list", "archive", "worker"):  # the first listing builds the kept indexes
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), str(cache), what], env=env, capture_output=True, text=True
        )
        print(done.stdout.strip() or done.stderr[-2000:])


if __name__ == "__main__":
    main()

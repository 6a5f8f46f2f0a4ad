"""Where the exact decode path spends its time, stage by stage (a profile, not a test).

For every image of ``fast_decode.py``'s sets (generated there, cached under ``--out``), the
exact path's stages are timed apart, CPU time, median of ``--repeat`` runs each, summed per set:
open (header, limits), decode (Pillow's decoder), convert (``pil_img2rgb``: the copy
``convert("RGB")`` makes of an RGB image, which ``decode_image`` now skips), the VAE and ViT
resizes (Pillow bicubic), to-array (``np.asarray`` + transpose) and normalize (the float32
step). Decode and resize are Pillow's own C calls; their output is what the reference computes,
so the exact path cannot change them. ``--cprofile`` also prints cProfile's top functions for
``parse_row`` over each set.

    .venv/bin/python benchmarks/decode_profile.py [--repeat 5] [--out bench-out/fast_decode] [--cprofile]
"""

from __future__ import annotations

import argparse
import cProfile
import pickle
import pstats
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fast_decode as fd  # the image sets

STAGES = ("open", "decode", "convert", "resize VAE", "resize ViT", "to-array", "normalize")


def stage_times(data: bytes, transforms: tuple, repeat: int) -> dict[str, float]:
    """Median CPU seconds of each stage of the exact path for one image."""
    from editstream import pil_img2rgb
    from editstream.loader.decode import load_pixels, opened_image
    from editstream.loader.transforms import normalize_pixels

    runs: dict[str, list[float]] = {s: [] for s in STAGES}
    for _ in range(repeat):
        marks = [time.process_time()]
        image = opened_image(data)
        marks.append(time.process_time())
        image = load_pixels(image)
        marks.append(time.process_time())
        rgb = pil_img2rgb(image)  # the reference's convert: a copy when already RGB
        marks.append(time.process_time())
        resized = []
        for t in transforms:
            resized.append(rgb.resize(t.target_size(*rgb.size), Image.Resampling.BICUBIC))
            marks.append(time.process_time())
        arrays = [np.asarray(r, dtype=np.uint8).transpose(2, 0, 1) for r in resized]
        marks.append(time.process_time())
        for t, px in zip(transforms, arrays):
            normalize_pixels(px, *(np.asarray(v, np.float32)[:, None, None] for v in (t.image_mean, t.image_std)))
        marks.append(time.process_time())
        for stage, a, b in zip(STAGES, marks, marks[1:]):
            runs[stage].append(b - a)
    return {s: statistics.median(v) for s, v in runs.items()}


def profile(rows: list[dict]) -> None:
    from editstream.data.rows import Row

    ds = fd.edit_dataset(False)
    random.seed(0)
    prof = cProfile.Profile()
    prof.enable()
    for row in rows * 2:
        ds.parse_row(Row(row))
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/fast_decode", help="where fast_decode.py caches its image sets")
    ap.add_argument("--repeat", type=int, default=5, help="runs per image; each stage's median is used")
    ap.add_argument("--cprofile", action="store_true", help="also print cProfile's top functions per set")
    args = ap.parse_args()
    from editstream import ImageTransform

    transforms = (ImageTransform(512, 256, 16), ImageTransform(490, 224, 14))
    sets = fd.build_sets(Path(args.out).resolve())
    print(f"Exact path, CPU time per image (median of {args.repeat} runs per stage), load average {fd.quiet_load()}:\n")
    print("| images | ms / image | " + " | ".join(STAGES) + " |")
    print("|---|---:|" + "---:|" * len(STAGES))
    for name, path in sets.items():
        rows = pickle.loads(path.read_bytes())["rows"]
        total = dict.fromkeys(STAGES, 0.0)
        images = [data for row in rows for data in row["image_list"]]
        for data in images:
            for stage, seconds in stage_times(data, transforms, args.repeat).items():
                total[stage] += seconds
        whole = sum(total.values())
        shares = " | ".join(f"{100 * total[s] / whole:.1f} %" for s in STAGES)
        print(f"| {name} | {1000 * whole / len(images):.1f} | {shares} |")
        if args.cprofile:
            profile(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

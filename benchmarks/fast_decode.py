"""Benchmark: the exact decode path and opt-in ``fast_decode=True`` against the reference (not a test).

Three sets of generated photographic images (``tests/photos.py``: gradients,
texture, sensor noise, hard edges, text, one-pixel stripes), as ``unified_edit`` rows of three
images, decoded with the standard transforms (VAE ``ImageTransform(512, 256, 16)``, ViT
``ImageTransform(490, 224, 14)``):

1. *edit-sized*: 21 images of 512-1024 px a side, 15 JPEG (quality 90), 3 PNG, 3 WebP (quality 90);
2. *mixed large*: 21 images of 1024-4000 px a side, the same format mix (the issue's data is
   70 % JPEG, the rest PNG / WebP);
3. *camera JPEGs*: ``PHOTO_SIZES`` and 9 random sizes of 1024-4000 px, JPEG only;
4. *camera JPEGs, 3100-4000 px*: 12 random sizes of 3100-4000 px a side, JPEG only (issue 29's goal).

Paths, run by one process per source tree (``torch.set_num_threads(1)``, as in a DataLoader worker):

- ``reference``: the reference's image work written out here (torchvision is not installable
  here): ``pil_img2rgb(Image.open(...))``, Pillow's bicubic resize, ``ToTensor`` and
  ``Normalize(inplace=True)`` as torch ops, and the reference's ``_add_image``, which runs the
  VAE transform once per use (twice for a middle image of a chain); the same rows and draws;
- ``exact``: editstream's default ``parse_row``; its tensors must be bit-identical to ``reference``;
- ``fast``: ``fast_decode=True``;
- with ``--before-src DIR`` (an older ``src/``, e.g. ``git archive <commit> src | tar -x -C DIR``),
  ``exact-before`` and ``fast-before``: the same two paths of that tree.

Every round runs each path once, in an order rotated each round; the table shows each path's
median CPU time (the work is single-threaded, and on a shared machine its CPU time moves far
less than its wall-clock time) and the median over rounds of each ratio of two runs of the
same round; the wall-clock medians are shown beside them. Each run reports how much CPU
other processes used while it ran.

Quality: every image of a set decoded both ways (``load_image`` for both transforms, as
``parse_row`` does), each transform's uint8 output compared: PSNR (255 peak) over the outputs
fast decode changed, mean and worst; shapes must be equal.

    .venv/bin/python benchmarks/fast_decode.py [--pairs 3] [--before-src DIR] [--out bench-out/fast_decode]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))  # the generated photos live beside the tests
import quiet  # waiting for an idle machine, others' CPU during a run
from machine import describe

SRC = Path(__file__).resolve().parents[1] / "src"
MIX = ["JPEG"] * 15 + ["PNG"] * 3 + ["WEBP"] * 3
SETS = {
    "edit-sized, 512-1024 px, JPEG/PNG/WebP": {"sides": (512, 1024), "formats": MIX, "seed": 11, "samples": 70},
    "mixed large, 1024-4000 px, JPEG/PNG/WebP": {"sides": (1024, 4000), "formats": MIX, "seed": 12, "samples": 21},
    "camera JPEGs, 1024-4000 px": {"sides": None, "formats": ["JPEG"] * 16, "seed": 7, "samples": 20},
    "camera JPEGs, 3100-4000 px": {"sides": (3100, 4000), "formats": ["JPEG"] * 12, "seed": 13, "samples": 12},
}
SPEC_VERSION = 1  # bump when the generated sets change
PATHS = ("reference", "exact", "fast")


# --------------------------------------------------------------------------- the image sets


def _sizes(spec: dict[str, Any]) -> list[tuple[int, int]]:
    from photos import PHOTO_SIZES

    rng = np.random.default_rng(spec["seed"])
    count = len(spec["formats"])
    if spec["sides"] is None:  # the camera set: the standard sizes, then random ones
        lo, hi = 1024, 4000
        fixed = list(PHOTO_SIZES)
    else:
        (lo, hi), fixed = spec["sides"], []
    return fixed + [(int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))) for _ in range(count - len(fixed))]


def _encode(seed: int, size: tuple[int, int], fmt: str) -> bytes:
    from photos import photographic_image, photographic_jpeg

    if fmt == "JPEG":
        return photographic_jpeg(seed, *size)
    buf = io.BytesIO()
    photographic_image(seed, *size).save(buf, format=fmt, **({"quality": 90} if fmt == "WEBP" else {}))
    return buf.getvalue()


def build_sets(root: Path) -> dict[str, Path]:
    """Each set's rows pickled under ``root`` (generated once, kept while the spec is unchanged)."""
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    for i, (name, spec) in enumerate(SETS.items()):
        path = root / f"set{i}.pkl"
        key = json.dumps([SPEC_VERSION, spec])
        if not (path.exists() and pickle.loads(path.read_bytes())["key"] == key):
            print(f"generating {name} ...", file=sys.stderr)
            formats = list(spec["formats"])
            random.Random(spec["seed"]).shuffle(formats)
            images = [_encode(1000 * spec["seed"] + j, s, f) for j, (s, f) in enumerate(zip(_sizes(spec), formats))]
            rows = [
                {"image_list": images[j : j + 3], "instruction_list": [["make it brighter"], ["add a hat"]]}
                for j in range(0, len(images) - 2, 3)
            ]
            path.write_bytes(pickle.dumps({"key": key, "rows": rows, "formats": formats}))
        paths[name] = path
    return paths


# --------------------------------------------------------------------------- one timed run (a --serve process)


def reference_dataset() -> Any:
    """An edit dataset doing the reference's image work (see the module docstring)."""
    import torch
    from PIL import Image

    from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset, pil_img2rgb

    class ReferenceTransform:
        def __init__(self, size_rule: ImageTransform) -> None:
            self.rule, self.stride = size_rule, size_rule.stride
            self.mean = torch.as_tensor(size_rule.image_mean, dtype=torch.float32)[:, None, None]
            self.std = torch.as_tensor(size_rule.image_std, dtype=torch.float32)[:, None, None]

        def __call__(self, img: Any) -> torch.Tensor:
            width, height = self.rule.target_size(*img.size)
            img = img.resize((width, height), Image.Resampling.BICUBIC)  # torchvision's F.resize on PIL
            x = torch.from_numpy(np.array(img, np.uint8, copy=True)).view(height, width, 3)  # ToTensor
            x = x.permute((2, 0, 1)).contiguous().to(dtype=torch.float32).div(255)
            return x.sub_(self.mean).div_(self.std)  # Normalize(inplace=True)

    class ReferenceEdit(UnifiedEditIterableDataset):
        def load_image(self, data: Any) -> Any:
            return pil_img2rgb(Image.open(io.BytesIO(data)))

        def _add_image(self, data: dict, image: Any, need_loss: bool, need_vae: bool, need_vit: bool, enable_cfg=True):
            plan = data["sequence_plan"]
            uses = [("vae_image", 0, 1, self.transform)] if need_loss else []
            uses += [("vae_image", int(enable_cfg), 0, self.transform)] if need_vae else []
            uses += [("vit_image", int(enable_cfg), 0, self.vit_transform)] if need_vit else []
            for kind, cfg, loss, transform in uses:  # each use computes its own tensor, as the reference does
                plan.append(
                    {
                        "type": kind,
                        "enable_cfg": cfg,
                        "loss": loss,
                        "special_token_loss": 0,
                        "special_token_label": None,
                    }
                )
                tensor = transform(image)
                data["num_tokens"] += tensor.shape[1] * tensor.shape[2] // transform.stride**2
                data["image_tensor_list"].append(tensor)
            return data

    return ReferenceEdit(
        "unified_edit",
        ReferenceTransform(ImageTransform(512, 256, 16)),
        ByteTokenizer(),
        ReferenceTransform(ImageTransform(490, 224, 14)),
        data_dir_list=["unused"],
        num_used_data=[1],
    )


def edit_dataset(fast: bool) -> Any:
    """A bare edit dataset for ``parse_row`` (no files are listed: rows are passed in)."""
    from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset

    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(512, 256, 16),
        ByteTokenizer(),
        ImageTransform(490, 224, 14),
        data_dir_list=["unused"],
        num_used_data=[1],
        fast_decode=fast,
    )


def timed_run(rows: list[dict], path: str, samples: int) -> dict[str, Any]:
    """Time ``samples`` parsed samples of one path: seconds, CPU seconds, others' CPU share, digests."""
    import xxhash

    try:
        from editstream.data.rows import Row
    except ImportError:  # trees from before data/rows.py
        try:
            from editstream.loader.rows import Row  # type: ignore[no-redef]
        except ImportError:  # trees from before loader/rows.py
            from editstream.loader.iteration import Row  # type: ignore[attr-defined,no-redef]

    ds = reference_dataset() if path == "reference" else edit_dataset(path == "fast")
    random.seed(1)
    ds.parse_row(Row(rows[0]))  # warm-up, not timed: Pillow's plugins and lazy imports load on first use
    random.seed(0)
    digest, shapes = xxhash.xxh3_128(), xxhash.xxh3_128()
    watch = quiet.CpuWatch()
    watch.start()
    window, seconds, cpu = time.perf_counter(), 0.0, 0.0
    for i in range(samples):
        t0, c0 = time.perf_counter(), time.process_time()
        sample = ds.parse_row(Row(rows[i % len(rows)]))
        seconds, cpu = seconds + time.perf_counter() - t0, cpu + time.process_time() - c0
        for t in sample["image_tensor_list"]:  # not timed
            digest.update(t.numpy().tobytes())
            shapes.update(repr((sample["num_tokens"], tuple(t.shape))).encode())
    others = watch.stop() / ((time.perf_counter() - window) * (os.cpu_count() or 1))
    return {
        "seconds": seconds,
        "cpu": cpu,
        "others": others,
        "digest": digest.hexdigest(),
        "shapes": shapes.hexdigest(),
    }


def serve() -> None:
    """Answer ``set_path path samples`` lines on stdin with one JSON line each (one process per src tree)."""
    import torch

    torch.set_num_threads(1)
    cache: dict[str, list[dict]] = {}
    for line in iter(sys.stdin.readline, ""):
        set_path, path, samples = line.split()
        if set_path not in cache:
            cache[set_path] = pickle.loads(Path(set_path).read_bytes())["rows"]
        print(json.dumps(timed_run(cache[set_path], path, int(samples))), flush=True)


class Server:
    """A ``--serve`` process of this script on one src tree (startup paid once, not per run)."""

    def __init__(self, src: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(src))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve"]
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, set_path: Path, path: str, samples: int) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{set_path} {path} {samples}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the benchmark process for {path} exited ({self.proc.wait()})")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


# --------------------------------------------------------------------------- quality (this process)


def psnr(a: Any, b: Any) -> float:
    mse = float(((a.double() - b.double()) ** 2).mean())
    return float("inf") if mse == 0 else 10 * float(np.log10(255**2 / mse))


def quality(rows: list[dict]) -> dict[str, Any]:
    """PSNR of each transform's uint8 output, fast vs exact, over every image of ``rows``."""
    import torch

    from editstream import ImageTransform
    from editstream.loader.pixels import load_image

    transforms = (ImageTransform(512, 256, 16), ImageTransform(490, 224, 14))
    images = reduced = unchanged = 0
    scores: list[float] = []
    for row in rows:
        for data in row["image_list"]:
            exact, fast = load_image(data, transforms, False), load_image(data, transforms, True)
            images += 1
            reduced += getattr(fast, "scale", 1) > 1
            for t in transforms:
                a, b = t.to_uint8(exact), t.to_uint8(fast)
                if a.shape != b.shape:
                    raise AssertionError(f"shape {tuple(b.shape)} != {tuple(a.shape)}")
                if torch.equal(a, b):
                    unchanged += 1
                else:
                    scores.append(psnr(a, b))
    return {"images": images, "reduced": reduced, "unchanged": unchanged, "scores": scores}


# --------------------------------------------------------------------------- the rounds and the tables


def measure(set_path: Path, samples: int, servers: dict[str, Server], args: argparse.Namespace) -> dict[str, list]:
    """``{path: [run, ...]}`` over ``args.pairs`` rounds, the order of the paths rotated each round."""
    order = list(PATHS) + [f"{p}-before" for p in ("exact", "fast") if "before" in servers]
    runs: dict[str, list] = {p: [] for p in order}
    deadline = time.monotonic() + args.max_wait
    for r in range(args.pairs):
        for path in order[r % len(order) :] + order[: r % len(order)]:
            if args.max_wait > 0:
                quiet.wait_until_idle(args.max_others, deadline)
            server = servers["before"] if path.endswith("-before") else servers["this"]
            got = server.run(set_path, path.removesuffix("-before"), samples)
            runs[path].append(got)
            print(
                f"[{r + 1}/{args.pairs}] {set_path.name} {path}: {got['seconds']:.2f} s, others {100 * got['others']:.0f}%",
                file=sys.stderr,
            )
    return runs


def ratio(runs: dict[str, list], slow: str, fast: str) -> float | None:
    """Median over rounds of ``slow``'s CPU time over ``fast``'s in the same round."""
    if slow not in runs or fast not in runs:
        return None
    return statistics.median(a["cpu"] / b["cpu"] for a, b in zip(runs[slow], runs[fast]))


def speed_row(name: str, samples: int, runs: dict[str, list]) -> tuple[str, dict[str, float | None]]:
    med = {p: statistics.median(r["cpu"] for r in v) for p, v in runs.items()}
    wall = {p: statistics.median(r["seconds"] for r in v) for p, v in runs.items()}
    same_exact = all(a["digest"] == b["digest"] for a, b in zip(runs["reference"], runs["exact"]))
    same_shapes = all(a["shapes"] == b["shapes"] for a, b in zip(runs["reference"], runs["fast"]))
    figs = {
        "exact_vs_reference": ratio(runs, "reference", "exact"),
        "fast_vs_reference": ratio(runs, "reference", "fast"),
        "speedup": ratio(runs, "exact", "fast"),
        "exact_vs_before": ratio(runs, "exact-before", "exact"),
        "fast_vs_before": ratio(runs, "fast-before", "fast"),
    }
    if "exact-before" in runs:
        same_exact = same_exact and all(a["digest"] == b["digest"] for a, b in zip(runs["exact-before"], runs["exact"]))
    others = statistics.median(r["others"] for v in runs.values() for r in v)
    figs["wall_fast_vs_reference"] = statistics.median(
        a["seconds"] / b["seconds"] for a, b in zip(runs["reference"], runs["fast"])
    )

    def cell(key: str) -> str:
        return "-" if figs[key] is None else f"{figs[key]:.2f}x"

    before = " / ".join(f"{med[p]:.2f}" for p in ("exact-before", "fast-before") if p in med) or "-"
    line = (
        f"| {name} | {samples} | {med['reference']:.2f} | {med['exact']:.2f} | {med['fast']:.2f} | {before} | "
        f"{cell('exact_vs_reference')} | {cell('fast_vs_reference')} | {cell('speedup')} | "
        f"{cell('exact_vs_before')} / {cell('fast_vs_before')} | {'yes' if same_exact else 'NO'} | "
        f"{'yes' if same_shapes else 'NO'} | {wall['exact']:.2f} / {wall['fast']:.2f} | "
        f"{figs['wall_fast_vs_reference']:.2f}x | {100 * others:.0f}% |"
    )
    return line, figs


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/fast_decode", help="work directory (the image sets are cached here)")
    ap.add_argument("--pairs", type=int, default=3, help="rounds (each path once per round)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every set's sample count (0.3 for a quick run)")
    ap.add_argument("--before-src", default=None, help="an older src/ to measure as exact-before / fast-before")
    ap.add_argument(
        "--max-others", type=float, default=0.05, help="before each run, wait until others use under this CPU share"
    )
    ap.add_argument("--max-wait", type=float, default=120, help="total time to wait for an idle machine (s)")
    ap.add_argument("--json", default=None, help="also write the figures here (for run_all.py's summary)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    if args.serve:
        serve()
        return 0
    root = Path(args.out).resolve()
    trees = {"this": SRC} | ({"before": Path(args.before_src).resolve()} if args.before_src else {})
    servers = {name: Server(src) for name, src in trees.items()}
    sets = build_sets(root)
    load_before, started = quiet_load(), dt.datetime.now().astimezone()
    q_lines = [
        "| images | decoded | reduced | outputs unchanged | outputs changed | mean PSNR (changed) | worst PSNR |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    s_lines = [
        "| images | samples | reference s | exact s | fast s | before: exact / fast s | exact vs reference | "
        "fast vs reference | fast vs exact | vs before: exact / fast | exact bits = reference | same shapes | "
        "wall s: exact / fast | wall: fast vs reference | others' CPU (median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|",
    ]
    figures: dict[str, dict[str, float | None]] = {}
    for name, set_path in sets.items():
        q = quality(pickle.loads(set_path.read_bytes())["rows"])
        scores = q["scores"]
        mean, worst = (float(np.mean(scores)), min(scores)) if scores else (None, None)
        q_lines.append(
            f"| {name} | {q['images']} | {q['reduced']} | {q['unchanged']} | {len(scores)} | "
            f"{'-' if mean is None else f'{mean:.1f} dB'} | {'-' if worst is None else f'{worst:.1f} dB'} |"
        )
        samples = max(3, round(SETS[name]["samples"] * args.scale))
        line, figs = speed_row(name, samples, measure(set_path, samples, servers, args))
        s_lines.append(line)
        figures[name] = {"mean_psnr": mean, "worst_psnr": worst, **figs}
    for server in servers.values():
        server.close()
    print(f"Date: {started:%Y-%m-%d %H:%M %Z}. Machine: {describe(('torch', 'PIL', 'numpy'))}.")
    print(f"Load average (1 / 5 / 15 min): {load_before} before, {quiet_load()} after.\n")
    print("Quality (each transform's uint8 output, fast vs exact; PSNR over the outputs fast decode changed):\n")
    print("\n".join(q_lines))
    print(
        f"\nSpeed (parse_row on rows in memory, one process per src tree, {args.pairs} rounds; seconds are the "
        "runs' median CPU time, ratios the median over rounds of same-round CPU-time ratios; the wall-clock "
        "columns show how much the shared machine stretched them):\n"
    )
    print("\n".join(s_lines))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


def quiet_load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())

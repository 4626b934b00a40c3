#!/usr/bin/env python3
"""Turn a folder of images into INT8 calibration batches for trtc, or
calibrate and build an engine from them directly (--build).

    trtc build model.onnx --int8 --calib DIR ...

reads DIR as a set of batch files.  This script writes them from ordinary
image files (JPEG, PNG, BMP, GIF, TIFF, WebP, ... anything Pillow opens),
with torchvision-style ImageNet preprocessing:

  1. convert to RGB (grayscale, palette, RGBA/LA (alpha dropped), CMYK, ...)
  2. resize so that the shorter side is --resize pixels (bilinear, like
     ``torchvision.transforms.Resize(256)`` on a PIL image; the longer side is
     ``int(resize * long / short)``)
  3. center crop --crop x --crop (like ``transforms.CenterCrop(224)``; offsets
     ``round((size - crop) / 2)``, zero padding if the image is smaller)
  4. scale to float32 in [0, 1] (``transforms.ToTensor``)
  5. normalize per channel: (x - mean) / std (``transforms.Normalize``)
  6. stack into NCHW float32 batches of --batch images

Output (the directory is created if needed):

  --format npz (default): DIR/batch_00000.npz, batch_00001.npz, ...; each an
      uncompressed ``np.savez`` archive holding one array whose key is
      --input-name (default ``input``, the ONNX graph input name).
  --format npy: DIR/batch_00000.npy, ...; one bare array per file.

Engines have a static batch size, so a final partial batch is dropped (and
reported) unless --keep-partial is given.  Images are taken in sorted path
order; --seed N shuffles them deterministically first; --limit N uses at most
N images (after the shuffle).  Unreadable files are skipped with a warning
and counted.  Needs only numpy and Pillow.

Usage:
    python scripts/calib_images.py IMAGES_DIR OUT_DIR [--batch 8]
        [--resize 256] [--crop 224] [--mean 0.485,0.456,0.406]
        [--std 0.229,0.224,0.225] [--input-name input] [--format npz|npy]
        [--limit N] [--seed N] [--keep-partial] [--recursive] [--quiet]

Examples:
    # 32x3x224x224 ImageNet-style batches for a model whose input is "input"
    python scripts/calib_images.py ~/imagenet/val calib --batch 32 --limit 512

    # a 1x3x32x32 model (e.g. testdata/models/example_cnn.onnx)
    python scripts/calib_images.py imgs calib --batch 1 --resize 32 --crop 32
    trtc build testdata/models/example_cnn.onnx --int8 --calib calib ...

With --build MODEL the batches go straight into the trtc Python package
(``pip install ./python``): a ``trtc.EntropyCalibrator`` (or --calibrator
minmax / percentile=P) reads them one at a time as ``trtc.build(MODEL,
int8=True, calibrator=...)`` calibrates, and OUT is the engine written; the
example of a calibration script on the module:

    python scripts/calib_images.py imgs model.engine --build model.onnx --batch 1 \
        --resize 32 --crop 32 --calib-cache model.cache

Exit status: 0 on success, 1 if nothing could be written (no images found,
no readable image, or fewer images than one batch without --keep-partial),
2 on bad arguments.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

try:
    from PIL import Image, ImageOps
except ImportError:  # pragma: no cover
    sys.exit("error: Pillow is required: pip install Pillow")

IMAGE_EXTS = {
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".bmp", ".dib", ".gif", ".tif",
    ".tiff", ".webp", ".ppm", ".pgm", ".pbm", ".pnm", ".tga", ".ico",
}

try:
    BILINEAR = Image.Resampling.BILINEAR
except AttributeError:  # Pillow < 9.1
    BILINEAR = Image.BILINEAR


def parse_floats3(text: str, what: str) -> np.ndarray:
    try:
        vals = [float(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--{what}: expected 3 comma-separated numbers, got {text!r}")
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        raise argparse.ArgumentTypeError(f"--{what}: expected 3 comma-separated numbers, got {text!r}")
    return np.asarray(vals, dtype=np.float32)


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def find_images(root: Path, recursive: bool) -> list[Path]:
    it = root.rglob("*") if recursive else root.iterdir()
    files = [p for p in it if p.is_file() and p.suffix.lower() in IMAGE_EXTS]
    # Sort on the path relative to root so the order does not depend on
    # where the folder lives or on the file system's listing order.
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def to_rgb(img: "Image.Image") -> "Image.Image":
    """RGB image; alpha is dropped (as torchvision's ``img.convert('RGB')``)."""
    if img.mode == "RGB":
        return img
    if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        # 16/32-bit grayscale: scale to 8 bit before converting.
        a = np.asarray(img, dtype=np.float64)
        hi = 65535.0 if img.mode.startswith("I;16") else max(float(a.max()), 1.0)
        a = np.clip(a / hi * 255.0 + 0.5, 0, 255).astype(np.uint8)
        img = Image.fromarray(a, mode="L")
    return img.convert("RGB")


def resize_shorter(img: "Image.Image", size: int) -> "Image.Image":
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    if short == size:
        return img
    new_short, new_long = size, int(size * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return img.resize((new_w, new_h), BILINEAR)


def center_crop(a: np.ndarray, ch: int, cw: int) -> np.ndarray:
    """Center crop an HxWxC array, zero padding first if it is too small."""
    h, w = a.shape[:2]
    if h < ch or w < cw:
        pt, pl = (ch - h) // 2 if h < ch else 0, (cw - w) // 2 if w < cw else 0
        pb, pr = (ch - h + 1) // 2 if h < ch else 0, (cw - w + 1) // 2 if w < cw else 0
        a = np.pad(a, ((pt, pb), (pl, pr), (0, 0)))
        h, w = a.shape[:2]
    top = int(round((h - ch) / 2.0))
    left = int(round((w - cw) / 2.0))
    return a[top:top + ch, left:left + cw]


def preprocess(path: Path, args) -> np.ndarray:
    """One image -> float32 CHW array."""
    with Image.open(path) as im:
        im = ImageOps.exif_transpose(im) if args.exif else im
        im.load()
        img = to_rgb(im)
    if args.resize > 0:
        img = resize_shorter(img, args.resize)
    a = np.asarray(img, dtype=np.uint8)
    a = center_crop(a, args.crop_h, args.crop_w)
    x = a.astype(np.float32) / np.float32(255.0)
    x = (x - args.mean) / args.std
    return np.ascontiguousarray(x.transpose(2, 0, 1), dtype=np.float32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Turn a folder of images into NCHW float32 calibration batches for `trtc build --int8 --calib DIR`.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("images", type=Path, help="folder of images")
    ap.add_argument("out", type=Path, help="output folder (created); with --build, the engine file to write")
    ap.add_argument("--batch", type=positive_int, default=8, help="images per batch file (the engine's batch size)")
    ap.add_argument("--resize", type=int, default=256, help="shorter side after resizing (bilinear); 0 = no resize")
    ap.add_argument("--crop", default="224", help="center crop size: N or H,W")
    ap.add_argument("--mean", default="0.485,0.456,0.406", help="per-channel mean (RGB), on the [0,1] scale")
    ap.add_argument("--std", default="0.229,0.224,0.225", help="per-channel std (RGB), on the [0,1] scale")
    ap.add_argument("--input-name", default="input", help="key of the array in each .npz (the ONNX input name)")
    ap.add_argument("--format", choices=("npz", "npy"), default="npz", help="one .npz (key = input name) or one .npy per batch")
    ap.add_argument("--limit", type=positive_int, default=None, help="use at most N images")
    ap.add_argument("--seed", type=int, default=None, help="shuffle the images deterministically with this seed (default: sorted order)")
    ap.add_argument("--keep-partial", action="store_true", help="also write a last batch with fewer than --batch images")
    ap.add_argument("--recursive", action="store_true", help="also look in subfolders")
    ap.add_argument("--no-exif", dest="exif", action="store_false", help="ignore the EXIF orientation tag")
    ap.add_argument("--overwrite", action="store_true", help="allow writing into an output folder that already holds batch files")
    ap.add_argument("--quiet", "-q", action="store_true", help="only print warnings and errors")
    ap.add_argument("--build", type=Path, metavar="MODEL", default=None,
                    help="calibrate and build MODEL (.onnx) into the INT8 engine OUT with the trtc Python package, "
                         "instead of writing batch files")
    ap.add_argument("--calibrator", default="entropy", help="with --build: entropy, minmax or percentile[=P]")
    ap.add_argument("--calib-cache", type=Path, default=None,
                    help="with --build: the calibration cache, reused when it exists, written otherwise")
    ap.add_argument("--fp16", action="store_true", help="with --build: layers not in int8 run in fp16")
    args = ap.parse_args(argv)
    if args.build is None and (args.calib_cache is not None or args.fp16 or args.calibrator != "entropy"):
        ap.error("--calibrator, --calib-cache and --fp16 go with --build")

    try:
        args.mean = parse_floats3(args.mean, "mean")
        args.std = parse_floats3(args.std, "std")
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    if np.any(args.std == 0):
        ap.error("--std: values must be non-zero")
    try:
        crop = [int(v) for v in args.crop.replace("x", ",").split(",")]
    except ValueError:
        ap.error(f"--crop: expected N or H,W, got {args.crop!r}")
    if len(crop) == 1:
        crop = crop * 2
    if len(crop) != 2 or min(crop) <= 0:
        ap.error(f"--crop: expected N or H,W with positive sizes, got {args.crop!r}")
    args.crop_h, args.crop_w = crop
    if args.resize < 0:
        ap.error("--resize must be >= 0")
    if not args.input_name:
        ap.error("--input-name must not be empty")
    args.mean = args.mean.reshape(1, 1, 3)
    args.std = args.std.reshape(1, 1, 3)

    def info(msg: str) -> None:
        if not args.quiet:
            print(msg)

    def warn(msg: str) -> None:
        print(f"warning: {msg}", file=sys.stderr)

    if not args.images.is_dir():
        print(f"error: {args.images}: not a directory", file=sys.stderr)
        return 1
    paths = find_images(args.images, args.recursive)
    if not paths:
        exts = ", ".join(sorted(IMAGE_EXTS))
        hint = "" if args.recursive else " (use --recursive to search subfolders)"
        print(f"error: no images found in {args.images}{hint}; recognised extensions: {exts}", file=sys.stderr)
        return 1
    if args.seed is not None:
        random.Random(args.seed).shuffle(paths)
    found = len(paths)

    if args.build is None:
        if args.out.exists() and not args.out.is_dir():
            print(f"error: {args.out} exists and is not a directory", file=sys.stderr)
            return 1
        args.out.mkdir(parents=True, exist_ok=True)
        stale = sorted(args.out.glob("batch_*.np[yz]"))
        if stale and not args.overwrite:
            print(f"error: {args.out} already holds {len(stale)} batch file(s) (e.g. {stale[0].name}); "
                  "pass --overwrite or choose an empty folder", file=sys.stderr)
            return 1
        for p in stale:
            p.unlink()

    shape = (3, args.crop_h, args.crop_w)
    stats = {"used": 0, "skipped": 0, "dropped": 0, "last": None}

    def batches():
        """The batches, as float32 NCHW arrays, read one at a time."""
        pending: list[np.ndarray] = []
        for p in paths:
            if args.limit is not None and stats["used"] >= args.limit:
                break
            try:
                x = preprocess(p, args)
            except Exception as e:  # noqa: BLE001 - any decode error: skip the file
                stats["skipped"] += 1
                warn(f"skipping unreadable image {p}: {type(e).__name__}: {e}")
                continue
            assert x.shape == shape, (x.shape, shape)
            pending.append(x)
            stats["used"] += 1
            if len(pending) == args.batch:
                yield np.stack(pending).astype(np.float32, copy=False)
                pending = []
        if pending:
            if args.keep_partial:
                info(f"last batch holds {len(pending)} of {args.batch} images (kept: --keep-partial)")
                stats["last"] = len(pending)
                yield np.stack(pending).astype(np.float32, copy=False)
            else:
                stats["dropped"] = len(pending)
                warn(f"dropped the last {len(pending)} image(s): they do not fill a batch of {args.batch} "
                     "(engines have a static batch size; pass --keep-partial to keep them)")

    def summary() -> str:
        return (f"{found} image file(s) found, {stats['used']} used, {stats['skipped']} unreadable (skipped), "
                f"{stats['dropped']} dropped (partial batch)")

    if args.build is not None:
        return build_engine(args, batches(), summary, info)

    written = 0
    ext = "." + args.format
    for arr in batches():
        path = args.out / f"batch_{written:05d}{ext}"
        if args.format == "npz":
            np.savez(path, **{args.input_name: arr})
        else:
            np.save(path, arr)
        written += 1

    if written == 0:
        print(f"error: no batch written: {summary()}", file=sys.stderr)
        return 1
    info(summary())
    info(f"wrote {written} batch file(s) to {args.out}/ (batch_00000{ext} .. batch_{written - 1:05d}{ext}), "
         f"float32 NCHW [{args.batch}, {shape[0]}, {shape[1]}, {shape[2]}]"
         + (f" (the last one [{stats['last']}, ...])" if stats["last"] else "")
         + (f", key {args.input_name!r}" if args.format == "npz" else ""))
    return 0


def build_engine(args, batches, summary, info) -> int:
    """--build: calibrates and builds the engine in this process through the
    trtc Python package, the batches fed by a calibrator as they are read
    (nothing written but the engine and, with --calib-cache, the cache)."""
    try:
        import trtc
    except ImportError:
        print("error: --build needs the trtc Python package (pip install ./python)", file=sys.stderr)
        return 1
    name = args.calibrator.split("=", 1)[0]
    if name == "entropy":
        calibrator = trtc.EntropyCalibrator(batches, cache_file=args.calib_cache)
    elif name == "minmax":
        calibrator = trtc.MinMaxCalibrator(batches, cache_file=args.calib_cache)
    elif name == "percentile":
        p = args.calibrator.split("=", 1)[1] if "=" in args.calibrator else "99.99"
        try:
            calibrator = trtc.PercentileCalibrator(batches, float(p), cache_file=args.calib_cache)
        except ValueError as e:
            print(f"error: --calibrator {args.calibrator}: {e}", file=sys.stderr)
            return 2
    else:
        print(f"error: --calibrator {args.calibrator}: expected entropy, minmax or percentile[=P]", file=sys.stderr)
        return 2
    try:
        engine = trtc.build(args.build, int8=True, fp16=args.fp16, calibrator=calibrator)
        engine.save(args.out)
    except trtc.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    info(summary())
    layers = engine.inspect()["layers"]
    int8 = sum(1 for layer in layers if layer["precision"] == "int8")
    info(f"built {args.out}: {len(layers)} layers, {int8} in int8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

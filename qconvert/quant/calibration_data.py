"""Calibration and evaluation data for `qconvert quantize`: load it, check it, batch it.

Sources (`load_calibration`), all giving ``{input name: array of shape (N, *sample shape)}`` in
each input's dtype, samples stacked on axis 0:

- ``calib.npy``: one array of shape ``(N, *sample)`` (so a single sample of the full input shape,
  batch 1, works too), ``(N, 1, *sample)`` (a batch-1 axis per sample is squeezed) or ``sample``
  alone (one sample without a batch axis). Single-input models only.
- ``calib.npz``: one array per input name (other keys are ignored), or, for a single-input model,
  its only array; ``calib.npz:key`` picks one array of a file that holds several (data, labels...).
- a folder of ``.npy`` files, sorted by name, each one sample or a batch as above.
- a folder of images (``.png .jpg .jpeg .bmp``, sorted by name, or one image file), decoded with
  Pillow (optional: ``pip install qconvert[images]``), converted to the input's channel count
  (1: ``L``, 3: ``RGB``), resized to the input's H x W (bilinear) and laid out NHWC or NCHW like
  the input. Only for 4-D image inputs with 1 or 3 channels.

Normalization (`mean`/`std` or `scale`, from ``--mean``/``--std``/``--scale``) applies to every
source: ``(x - mean) / std`` (each a number or one per channel) or ``x * scale``; without any,
pixels stay raw 0..255. Integer (int8/uint8) inputs take the values as they are if they are
integers that fit the dtype (``--mean 128`` maps pixels to int8), otherwise it is an error.

Checks, each failing with one `QConvertError` naming the offending file: the dtype converts
without loss (float64 into float32 is fine; float data into an integer input is not; integers must
fit), the sample shape equals the input's (dynamic dims accept anything, but all samples must
agree), no NaN or infinity, at least one sample.

`random_calibration` makes random data for ``--calibration-random N`` (the CLI prints
`RANDOM_CALIBRATION_WARNING`); `progress.iter_batches` slices the data for the model and
`progress.Progress` draws the progress bar.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import QConvertError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
PILLOW_HINT = "reading images needs Pillow: pip install pillow (or pip install qconvert[images])"
RANDOM_CALIBRATION_WARNING = (
    "calibrating on random data (--calibration-random): the activation ranges it measures mean "
    "nothing for real inputs and the int8 model's accuracy will be poor; use it for smoke tests "
    "only and pass --calibration with real samples for a model you ship")

_IMAGE_MODES = {1: "L", 3: "RGB"}

DEFAULT_MAX_BYTES = 16 * 2**30
_MAX_BYTES = DEFAULT_MAX_BYTES  # set per load_calibration call
# A deflated .npz member expanding more than this many times, past ZIP_BOMB_MIN_BYTES, is refused
# as a zip bomb (real calibration data compresses a few times at most; zeros 1000 times).
ZIP_BOMB_RATIO = 200
ZIP_BOMB_MIN_BYTES = 64 * 2**20


# -- model inputs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class InputSpec:
    """One model input: `shape` has the batch dim first (dynamic dims are str or None, the whole
    shape None when the rank is unknown), `dtype` a numpy dtype name, `layout` ``"NCHW"``,
    ``"NHWC"`` or None when the input is not 4-D."""

    name: str
    shape: tuple | None
    dtype: str
    layout: str | None = None

    @property
    def sample_shape(self) -> tuple | None:
        """One sample's shape: `shape` without its batch dim (None when the rank is unknown)."""
        if self.shape is None:
            return None
        return tuple(self.shape[1:])

    @property
    def channel_axis(self) -> int | None:
        """The channel axis within a sample (0 for NCHW, 2 for NHWC), None when not 4-D."""
        return {"NCHW": 0, "NHWC": 2}.get(self.layout)

    @property
    def channels(self) -> int | None:
        """The channel count of a 4-D input (None when not 4-D or when it is dynamic)."""
        axis = self.channel_axis
        if axis is None:
            return None
        c = self.sample_shape[axis]
        return int(c) if _is_static(c) else None


def input_specs(graph, fmt: str | None = None) -> list:
    """The `InputSpec` of every input of `graph`, in order.

    `fmt` is the format whose layout the graph has: ``"onnx"`` (4-D inputs are NCHW) or
    ``"tflite"`` (4-D inputs are NHWC). A `Model` may be passed instead of a graph; its main
    graph and (unless `fmt` is given) its format are used.
    """
    if hasattr(graph, "graphs"):
        fmt = fmt or graph.format
        graph = graph.graph
    layouts = {"onnx": "NCHW", "tflite": "NHWC"}
    if fmt not in layouts:
        raise ValueError(f"input_specs: unknown model format {fmt!r}")
    specs = []
    for name in graph.inputs:
        t = graph.tensors[name]
        shape = None if t.shape is None else tuple(
            int(d) if _is_static(d) else d for d in t.shape)
        layout = layouts[fmt] if shape is not None and len(shape) == 4 else None
        specs.append(InputSpec(name, shape, t.dtype, layout))
    return specs


def check_batch_of_one(specs, what: str) -> None:
    """Refuse a model input with a fixed batch above 1 (rank 2 or more, first dimension a
    number > 1) for `what` (calibration, --verify), which run the model one sample, or a few
    stacked on a dynamic batch, at a time: one message instead of the executor's several."""
    for spec in specs:
        shape = spec.shape
        if shape is not None and len(shape) >= 2 and _is_static(shape[0]) and shape[0] > 1:
            raise QConvertError(
                f"input {spec.name!r} has a fixed batch of {shape[0]} (shape {_fmt(shape)}): "
                f"{what} runs the model on single samples; export it with batch 1 or a dynamic "
                "batch dimension")


# -- loading --------------------------------------------------------------------------------------
def load_calibration(path, specs, mean=None, std=None, scale=None, limit=None,
                     max_bytes=None, ranges: dict | None = None) -> dict:
    """Load calibration data from `path` for the model inputs `specs` (see the module docstring).

    Returns ``{input name: array (N, *sample shape)}`` in each input's dtype, with the same N for
    every input, capped at `limit` samples. `mean`/`std` (a number or one per channel) or
    `scale` normalize the data. Raises `QConvertError` naming the file at fault. Every array's
    size is checked from its header against the file (and a .npz member's against its stored
    size) before anything is read or decompressed; arrays over `max_bytes` are refused.
    `ranges`, when given, receives a `DataRange` per float input fed without normalization
    (for `scale_warning`).
    """
    global _MAX_BYTES
    _MAX_BYTES = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)
    specs = list(specs)
    path_str = str(path)
    if not specs:
        raise QConvertError("the model has no inputs to calibrate", path_str)
    if limit is not None and int(limit) < 1:
        raise QConvertError(f"the sample limit must be at least 1, not {limit}", path_str)
    norm = Normalization(mean, std, scale)
    if ranges is not None:
        norm.ranges = ranges
    file_path, key = _split_npz_key(path_str)
    p = Path(file_path)
    if not p.exists():
        raise QConvertError("no such file or folder", path_str)
    if not p.is_dir():
        from ..formats.model_io import check_regular_file

        check_regular_file(p, "data file")
    if key is not None or p.suffix.lower() == ".npz":
        data = _load_npz(p, key, specs, norm, limit)
    elif p.is_dir():
        data = _load_folder(p, specs, norm, limit)
    elif p.suffix.lower() == ".npy":
        spec = _single_input(specs, p, "a .npy file")
        data = {spec.name: prepare_samples(_read_npy(p), spec, norm, p, limit)}
    elif p.suffix.lower() in IMAGE_SUFFIXES:
        spec = _single_input(specs, p, "images")
        data = {spec.name: _load_images([p], spec, norm, p, limit)}
    else:
        raise QConvertError(
            "unsupported calibration data: expected a .npy or .npz file, a folder of .npy "
            f"files or a folder of images ({' '.join(IMAGE_SUFFIXES)})", str(p))
    counts = {len(a) for a in data.values()}
    if len(counts) > 1:
        sizes = ", ".join(f"{k!r}: {len(a)}" for k, a in data.items())
        raise QConvertError(f"inputs have different numbers of samples ({sizes})", path_str)
    return data


def data_files(path) -> list:
    """The file or folder a `--calibration` / `--eval` argument reads (``file.npz:key`` ->
    ``file.npz``), for the check that no output overwrites it; [] for None."""
    if path is None:
        return []
    return [_split_npz_key(str(path))[0]]


def _split_npz_key(path: str):
    """``file.npz:key`` -> (``file.npz``, ``key``); anything else -> (path, None)."""
    if os.path.exists(path):
        return path, None
    low = path.lower()
    start = 0
    while (i := low.find(".npz:", start)) >= 0:
        head = path[: i + 4]
        if os.path.isfile(head):
            return head, path[i + 5:]
        start = i + 1
    return path, None


def _single_input(specs, path: Path, what: str):
    if len(specs) != 1:
        names = ", ".join(repr(s.name) for s in specs)
        raise QConvertError(
            f"{what} can only feed a single-input model; this one has {len(specs)} inputs "
            f"({names}): use a .npz with one array per input name", str(path))
    return specs[0]


def _magic(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(6)
    except OSError as exc:
        raise QConvertError(f"cannot read: {exc.strerror}", str(path)) from exc


def _read_npy(path: Path) -> np.ndarray:
    head = _magic(path)
    if head.startswith(b"PK"):
        raise QConvertError("is a .npz archive, not a .npy array (name it .npz)", str(path))
    if head != b"\x93NUMPY":
        raise QConvertError("not a .npy file (no NumPy header)", str(path))
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            _checked_npy_header(f, size, str(path))
    except OSError as exc:
        raise QConvertError(f"cannot read: {exc.strerror}", str(path)) from exc
    try:
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError):  # object arrays, truncated files, files mmap cannot map
            arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc) or "object" in str(exc).lower():
            raise QConvertError("holds Python objects (pickled data is not loaded), not a "
                                "numeric array", str(path)) from exc
        raise QConvertError(f"not a valid .npy file ({exc})", str(path)) from exc
    except (OSError, EOFError) as exc:
        raise QConvertError(f"cannot read as .npy ({exc})", str(path)) from exc
    return arr


def _checked_npy_header(f, size: int, where: str):
    """Read and check a .npy header from `f` (positioned at its start) against the `size` bytes
    the file holds: a readable header (never evaluated beyond literals), a numeric dtype,
    non-negative dimensions, data at least as long as the header says, and no more than the
    memory limit. Returns (shape, dtype)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, _fortran, dtype = fmt.read_array_header_1_0(f, max_header_size=100000)
        elif version in ((2, 0), (3, 0)):
            shape, _fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=100000)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except Exception as exc:  # numpy parses the header with tokenize + literal_eval
        raise QConvertError(f"not a valid .npy file (malformed header: {exc})", where) from None
    if dtype.hasobject:
        raise QConvertError("holds Python objects (pickled data is not loaded), not a numeric "
                            "array", where)
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise QConvertError(f"not a valid .npy file (header shape {shape})", where)
    count = 1
    for d in shape:
        count *= d
    need = count * dtype.itemsize
    have = size - f.tell()
    if need > have:
        raise QConvertError(f"truncated .npy file: its header promises {need} bytes of data "
                            f"(shape {shape}, {dtype}), the file holds {have}", where)
    if need > _MAX_BYTES:
        raise QConvertError(f"array of shape {shape} ({need} bytes) exceeds the memory limit of "
                            f"{_MAX_BYTES} bytes (--max-memory)", where)
    return shape, dtype


def _check_npz_member(zf: zipfile.ZipFile, member: str, where: str) -> None:
    """Check one .npz member from the zip directory and its .npy header before it is inflated:
    a sane stored size, no zip bomb, a header consistent with the stored size."""
    try:
        info = zf.getinfo(member)
    except KeyError:
        raise QConvertError(f"has no array {member!r}", where) from None
    if info.file_size > _MAX_BYTES:
        raise QConvertError(f"array {member!r} expands to {info.file_size} bytes, more than the "
                            f"memory limit of {_MAX_BYTES} bytes (--max-memory)", where)
    ratio = info.file_size // max(info.compress_size, 1)
    if (info.compress_type != zipfile.ZIP_STORED and info.file_size > ZIP_BOMB_MIN_BYTES
            and ratio > ZIP_BOMB_RATIO):
        raise QConvertError(f"array {member!r} expands {ratio} times ({info.compress_size} -> "
                            f"{info.file_size} bytes): refusing a likely zip bomb (save real data "
                            "with np.savez, uncompressed)", where)
    try:
        with zf.open(info) as f:
            _checked_npy_header(_Counted(f), info.file_size, f"{where}:{member[:-4]}")
    except QConvertError:
        raise
    except Exception as exc:  # zlib / zipfile errors of a corrupt member
        raise QConvertError(f"cannot read array {member[:-4]!r}: {exc}", where) from exc


class _Counted:
    """A stream that counts what was read (np.lib.format reads; the header check needs `tell`)."""

    def __init__(self, f):
        self.f, self.pos = f, 0

    def read(self, n=-1):
        data = self.f.read(n)
        self.pos += len(data)
        return data

    def tell(self):
        return self.pos


def _load_npz(p: Path, key, specs, norm, limit) -> dict:
    if not p.is_file():
        raise QConvertError("is not a .npz file", str(p))
    head = _magic(p)
    if head == b"\x93NUMPY":
        raise QConvertError("is a .npy array, not a .npz archive (name it .npy)", str(p))
    if not head.startswith(b"PK"):
        raise QConvertError("not a .npz file (not a zip archive)", str(p))
    try:
        npz = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise QConvertError(f"not a valid .npz file ({exc})", str(p)) from exc
    with npz:
        keys = list(npz.files)
        listed = ", ".join(keys) if keys else "none"
        shown = f"{p}:{key}" if key is not None else str(p)

        def get(k):
            member = k if k in npz.zip.namelist() else f"{k}.npy"
            _check_npz_member(npz.zip, member, str(p))
            try:
                return npz[k]
            except ValueError as exc:
                if "pickle" in str(exc) or "object" in str(exc).lower():
                    raise QConvertError(f"array {k!r} holds Python objects, not numbers",
                                        shown) from exc
                raise QConvertError(f"cannot read array {k!r}: {exc}", shown) from exc
            except Exception as exc:  # zlib / zipfile errors of a corrupt member
                raise QConvertError(f"cannot read array {k!r}: {exc}", shown) from exc

        if key is not None:
            spec = _single_input(specs, p, "one array of a .npz")
            if key not in keys:
                raise QConvertError(f"has no array {key!r} (arrays: {listed})", str(p))
            return {spec.name: prepare_samples(get(key), spec, norm, shown, limit)}
        names = [s.name for s in specs]
        if all(n in keys for n in names):
            return {s.name: prepare_samples(get(s.name), s, norm, f"{p}:{s.name}", limit) for s in specs}
        if len(specs) > 1:
            missing = ", ".join(repr(n) for n in names if n not in keys)
            raise QConvertError(f"needs one array per model input; missing {missing} "
                                f"(arrays: {listed})", str(p))
        if not keys:
            raise QConvertError("the .npz holds no arrays", str(p))
        if len(keys) > 1:
            raise QConvertError(
                f"holds several arrays ({listed}) and none is named after the input "
                f"{names[0]!r}: pick one with {p}:<key>, e.g. {p}:{keys[0]}", str(p))
        return {names[0]: prepare_samples(get(keys[0]), specs[0], norm, shown, limit)}


def _load_folder(p: Path, specs, norm, limit) -> dict:
    try:
        entries = sorted(e for e in os.listdir(p) if not e.startswith("."))
    except OSError as exc:
        raise QConvertError(f"cannot list folder: {exc.strerror}", str(p)) from exc
    files = [p / e for e in entries if (p / e).is_file()]
    npys = [f for f in files if f.suffix.lower() == ".npy"]
    images = [f for f in files if f.suffix.lower() in IMAGE_SUFFIXES]
    if npys and images:
        raise QConvertError("folder mixes .npy files and images; keep one kind", str(p))
    if not npys and not images:
        raise QConvertError(
            "folder has no calibration data: no .npy files and no images "
            f"({' '.join(IMAGE_SUFFIXES)})", str(p))
    if images:
        spec = _single_input(specs, p, "a folder of images")
        return {spec.name: _load_images(images, spec, norm, p, limit)}
    spec = _single_input(specs, p, "a folder of .npy files")
    parts, total, first = [], 0, None
    for f in npys:
        part = prepare_samples(_read_npy(f), spec, norm, f, None if limit is None else limit - total)
        if first is None:
            first = (f, part.shape[1:])
        elif part.shape[1:] != first[1]:
            raise QConvertError(f"sample shape {_fmt(part.shape[1:])} differs from "
                                f"{_fmt(first[1])} of {first[0].name}", str(f))
        parts.append(part)
        total += len(part)
        if limit is not None and total >= limit:
            break
    return {spec.name: np.concatenate(parts, axis=0)}


def _load_images(files, spec: InputSpec, norm, where: Path, limit) -> np.ndarray:
    """Decode `files` into (N, *sample) uint8 pixels laid out like `spec`, then `prepare_samples`."""
    shape = spec.sample_shape
    c = spec.channels
    if spec.layout is None or c not in _IMAGE_MODES:
        raise QConvertError(
            f"input {spec.name!r} of shape {_fmt(spec.shape)} is not an image input (expected "
            "4-D NCHW or NHWC with 1 or 3 channels); give .npy/.npz data instead", str(where))
    try:
        from PIL import Image, ImageOps
    except ImportError as exc:
        raise QConvertError(PILLOW_HINT, str(where)) from exc
    if spec.layout == "NCHW":
        h, w = shape[1], shape[2]
    else:
        h, w = shape[0], shape[1]
    size = (int(w), int(h)) if _is_static(h) and _is_static(w) else None
    if limit is not None:
        files = files[:limit]
    pixels = []
    for f in files:
        try:
            with Image.open(f) as img:
                img = ImageOps.exif_transpose(img)
                img = img.convert(_IMAGE_MODES[c])
                if size is None:  # dynamic H x W: the first image's size
                    size = img.size
                if img.size != size:
                    img = img.resize(size, Image.Resampling.BILINEAR)
                arr = np.asarray(img, dtype=np.uint8)
        except QConvertError:
            raise
        except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError... on bad files
            raise QConvertError(f"cannot read image: {exc}", str(f)) from exc
        pixels.append(arr.reshape(arr.shape[0], arr.shape[1], c))
    batch = np.stack(pixels)  # N, H, W, C
    if spec.layout == "NCHW":
        batch = batch.transpose(0, 3, 1, 2)
    where_str = str(files[0]) if len(files) == 1 else str(where)
    return prepare_samples(np.ascontiguousarray(batch), spec, norm, where_str, None)


# -- checks and conversion ------------------------------------------------------------------------
class Normalization:
    """``(x - mean) / std`` or ``x * scale``, per tensor or per channel."""

    def __init__(self, mean, std, scale):
        self.ranges = {}  # input name -> DataRange of data fed to a float input unnormalized
        if scale is not None and (mean is not None or std is not None):
            raise QConvertError("give either --mean/--std or --scale, not both")
        self.mean = self._vector(mean, "--mean")
        self.std = self._vector(std, "--std")
        self.scale = self._vector(scale, "--scale")
        for option, v in (("--std", self.std), ("--scale", self.scale)):
            if v is not None and np.any(v <= 0):
                raise QConvertError(f"{option} must be positive, not {_num(v[v <= 0][0])}")

    @staticmethod
    def _vector(value, option):
        if value is None:
            return None
        try:
            v = np.asarray(value, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise QConvertError(f"{option} must be a number or one number per channel, "
                                f"not {value!r}") from exc
        if v.size == 0 or not np.all(np.isfinite(v)):
            raise QConvertError(f"{option} must be finite numbers, not {value!r}")
        return v

    @property
    def active(self) -> bool:
        return self.mean is not None or self.std is not None or self.scale is not None

    def apply(self, x: np.ndarray, spec: InputSpec, where: str) -> np.ndarray:
        x = x.astype(np.float64)
        if self.scale is not None:
            return x * self._shaped(self.scale, spec, where, "--scale")
        if self.mean is not None:
            x = x - self._shaped(self.mean, spec, where, "--mean")
        if self.std is not None:
            x = x / self._shaped(self.std, spec, where, "--std")
        return x

    @staticmethod
    def _shaped(v, spec: InputSpec, where, option):
        if v.size == 1:
            return v[0]
        c = spec.channels
        if c is None:
            raise QConvertError(f"{option} has {v.size} values, but input {spec.name!r} of shape "
                                f"{_fmt(spec.shape)} has no channel axis: give one number", where)
        if v.size != c:
            raise QConvertError(f"{option} has {v.size} values, but input {spec.name!r} has "
                                f"{c} channels", where)
        shape = [1] * 4  # (N, *sample)
        shape[1 + spec.channel_axis] = c
        return v.reshape(shape)


def prepare_samples(arr: np.ndarray, spec: InputSpec, norm: Normalization, where, limit) -> np.ndarray:
    """Check `arr` against `spec`, bring it to (N, *sample), cap it, normalize, convert dtype."""
    where = str(where)
    target = _target_dtype(spec, where)
    src = arr.dtype
    if src.kind not in "biuf":
        raise QConvertError(f"holds {src} data, not numbers", where)
    if target.kind in "iu" and src.kind == "f":
        raise QConvertError(f"holds {src} data but input {spec.name!r} is {target}: give "
                            f"{target} samples (for a quantized model: the float values divided "
                            "by the input's scale plus its zero point, as qconvert inspect shows "
                            "them); to quantize, give the float model instead", where)
    if target.kind == "b" and src.kind != "b":
        raise QConvertError(f"holds {src} data but input {spec.name!r} is bool", where)
    if src.kind == "b" and target.kind != "b":
        raise QConvertError(f"holds bool data but input {spec.name!r} is {target}; give numbers",
                            where)
    arr = _to_samples(arr, spec, where)
    if limit is not None:
        arr = arr[:limit]
    if len(arr) == 0:
        raise QConvertError("holds no samples (N = 0)", where)
    arr = np.asarray(arr)  # a view; of a memory-mapped .npy only `limit` samples are read
    if src.kind == "f":
        _check_finite(arr, where)
    if target.kind == "f" and not norm.active:
        _note_range(norm.ranges, spec, arr, str(where))
    if norm.active:
        if target.kind == "b":
            raise QConvertError(f"--mean/--std/--scale cannot apply to the bool input "
                                f"{spec.name!r}", where)
        arr = norm.apply(arr, spec, where)
        _check_normalized(arr, spec, where)
        if target.kind in "iu" and not np.array_equal(arr, np.round(arr)):
            raise QConvertError(f"normalized values are not integers, but input {spec.name!r} "
                                f"is {target} (quantized)", where)
    if target.kind in "iu":
        _check_int_range(arr, target, spec, where)
        return np.ascontiguousarray(arr.astype(target))
    if target.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr.astype(target)
        if src.kind in "iub" and not norm.active:
            if not np.array_equal(out.astype(src), arr):
                raise QConvertError(f"{src} values do not fit {target} exactly", where)
        elif not np.all(np.isfinite(out)):
            raise QConvertError(f"values exceed the range of {target} (input {spec.name!r})",
                                where)
        return np.ascontiguousarray(out)
    return np.ascontiguousarray(arr.astype(target))


@dataclass(frozen=True)
class DataRange:
    """What the data fed, unnormalized, to one float input looks like: its dtype as given, its
    smallest and largest values, whether every value is a whole number (integer-typed data, or
    float data within 0..255 that holds no fraction), where it came from
    (the first file), and the input it feeds (its dtype and shape, as text)."""

    dtype: str
    lo: float
    hi: float
    whole: bool
    where: str
    input: str = ""

    @property
    def looks_unscaled(self) -> bool:
        """The signature of raw pixels or counts: integer-typed data reaching above 1, or whole
        numbers in 0..255 reaching above 1 (a float model is most often trained on 0..1 or
        normalized inputs; the model itself cannot say which, so this is a guess)."""
        if self.hi <= 1:
            return False
        if np.dtype(self.dtype).kind in "iu":
            return True
        return self.whole and self.lo >= 0 and self.hi <= 255


def _note_range(ranges: dict, spec: InputSpec, arr: np.ndarray, where: str) -> None:
    """Record (or widen) the `DataRange` of input `spec` from `arr` (one file's samples)."""
    lo, hi = float(arr.min()), float(arr.max())
    whole = arr.dtype.kind in "iu" or (lo >= 0 and hi <= 255 and _all_whole(arr))
    old = ranges.get(spec.name)
    if old is not None:
        lo, hi, whole, where = min(lo, old.lo), max(hi, old.hi), whole and old.whole, old.where
    ranges[spec.name] = DataRange(str(arr.dtype), lo, hi, whole, where,
                                  f"{spec.dtype} {_fmt(spec.shape)}")


def _all_whole(arr: np.ndarray, chunk: int = 1 << 20) -> bool:
    """Every value of the float array `arr` a whole number; read in chunks (no copy of a large
    memory-mapped array), stopping at the first fraction."""
    flat = arr.reshape(-1)
    return all(np.array_equal(part, np.floor(part))
               for part in (flat[i:i + chunk] for i in range(0, flat.size, chunk)))


def scale_warning(ranges: dict) -> str | None:
    """One line (without a `qconvert: warning:` prefix) when data fed unnormalized to a float
    input looks like raw pixels or counts (`DataRange.looks_unscaled`): it names the data's
    dtype and range, what the model's inputs most often expect and the options that fix it;
    None when no input's data looks so."""
    odd = {name: r for name, r in ranges.items() if r.looks_unscaled}
    if not odd:
        return None
    parts = [f"float input {name!r} ({r.input}) gets {r.dtype} data {_num(r.lo)}..{_num(r.hi)}"
             + ("" if np.dtype(r.dtype).kind in "iu" else " (whole numbers)")
             for name, r in odd.items()]
    return (f"{'; '.join(parts)}, unnormalized, for a float model: a model trained on 0..1 or "
            "normalized inputs would be calibrated at the wrong scale and its int8 model be "
            "poor (qconvert cannot tell from the model which range it expects, only from the "
            "data); pass --scale 0.00392156862745098 (1/255) for 0..1 inputs, --mean/--std for "
            "a normalization, or --scale 1 to confirm the raw values")


# Normalized data whose largest magnitude falls outside this range is refused: no model is
# trained on inputs of 1e30 or 1e-30 (`--std 1e-30`), and int8 scales that follow would be
# denormal or overflow.
NORMALIZED_RANGE = (1e-6, 1e6)


def _check_normalized(arr: np.ndarray, spec: InputSpec, where) -> None:
    """Refuse `--mean` / `--std` / `--scale` that take the data to absurd magnitudes."""
    top = float(np.max(np.abs(arr))) if arr.size else 0.0
    low, high = NORMALIZED_RANGE
    if top > high or 0 < top < low:
        raise QConvertError(f"--mean/--std/--scale take the data for input {spec.name!r} to "
                            f"magnitudes of {top:.3g}, outside {low:g}..{high:g}: check the "
                            "normalization options", where)


def _target_dtype(spec: InputSpec, where) -> np.dtype:
    try:
        dt = np.dtype(spec.dtype)
    except TypeError:
        dt = None
    if dt is None or dt.kind not in "biuf":
        raise QConvertError(f"input {spec.name!r} has dtype {spec.dtype}, which calibration data "
                            "cannot feed", where)
    return dt


def _to_samples(arr: np.ndarray, spec: InputSpec, where) -> np.ndarray:
    """(N, *sample), (N, 1, *sample) or sample alone -> (N, *sample); an error otherwise."""
    sample = spec.sample_shape
    if sample is None:  # unknown rank: the array is (N, *sample)
        if arr.ndim == 0:
            raise QConvertError("holds a single number, not samples", where)
        return arr
    k = len(sample)
    if arr.ndim == k + 1 and _matches(arr.shape[1:], sample):
        return arr
    if arr.ndim == k + 2 and arr.shape[1] == 1 and _matches(arr.shape[2:], sample):
        return arr.reshape(arr.shape[:1] + arr.shape[2:])
    if arr.ndim == k and _matches(arr.shape, sample):
        return arr[None]
    expected = _fmt(("N",) + sample)
    hint = ""
    if spec.layout and arr.ndim in (k, k + 1):
        tail = arr.shape[-3:]
        perm = (2, 0, 1) if spec.layout == "NCHW" else (1, 2, 0)
        other = "NHWC" if spec.layout == "NCHW" else "NCHW"
        if _matches(tuple(tail[i] for i in perm), sample):
            hint = f" (it looks like {other} data; the model takes {spec.layout})"
    raise QConvertError(f"data of shape {_fmt(arr.shape)} does not fit input {spec.name!r} of "
                        f"shape {_fmt(spec.shape)}: expected {expected}{hint}", where)


def _matches(shape, sample) -> bool:
    return len(shape) == len(sample) and all(
        not _is_static(d) or int(d) == s for d, s in zip(sample, shape))


def _check_finite(arr: np.ndarray, where) -> None:
    ok = np.isfinite(arr)
    if ok.all():
        return
    flat = np.argmin(ok.reshape(len(arr), -1).all(axis=1))
    bad = arr[flat][~ok[flat]][0]
    what = "NaN" if np.isnan(bad) else "infinity"
    raise QConvertError(f"contains {what} (first in sample {int(flat)})", where)


def _check_int_range(arr: np.ndarray, target: np.dtype, spec: InputSpec, where) -> None:
    info = np.iinfo(target)
    if arr.size == 0:
        return
    lo, hi = arr.min(), arr.max()
    if lo < info.min or hi > info.max:
        raise QConvertError(
            f"values {_num(lo)}..{_num(hi)} do not fit input {spec.name!r} of dtype {target} "
            f"[{info.min}, {info.max}]" + (" (try --mean 128 for pixels into int8)"
                                           if target == np.int8 and lo >= 0 and hi <= 255 else ""),
            where)


def _num(x) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() else f"{x:g}"


def _is_static(d) -> bool:
    return isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0


def _fmt(shape) -> str:
    if shape is None:
        return "[unknown rank]"
    return "[" + ", ".join(str(d) if _is_static(d) else (d if isinstance(d, str) else "?")
                           for d in shape) + "]"


# -- random data ----------------------------------------------------------------------------------
def random_calibration(specs, n: int, seed: int = 0) -> dict:
    """`n` random samples per input (for ``--calibration-random``): standard normal floats,
    uniformly random integers over the dtype's full range, random bools. Dynamic dims other than
    the batch are taken as 1. Deterministic for a given `seed`. Print
    `RANDOM_CALIBRATION_WARNING` when using it."""
    if int(n) < 1:
        raise QConvertError(f"--calibration-random needs at least 1 sample, not {n}")
    rng = np.random.default_rng(seed)
    data = {}
    for spec in specs:
        dt = _target_dtype(spec, None)
        sample = spec.sample_shape or ()
        shape = (int(n),) + tuple(int(d) if _is_static(d) else 1 for d in sample)
        if dt.kind == "f":
            data[spec.name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            data[spec.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            info = np.iinfo(dt)
            data[spec.name] = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    return data

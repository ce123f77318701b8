"""Loading and saving models: format detection by content, atomic writes.

The format is recognized from the bytes, never from the extension: a TFLite flatbuffer carries
the `TFL3` file identifier at offset 4, anything else is tried as an ONNX protobuf. Writes go to a
temporary file in the destination directory and are renamed into place, so an error never leaves
a partial file behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import QConvertError
from .ir import Model
from .ir.graph import GraphError, list_ops

FORMAT_SUFFIX = {"tflite": ".tflite", "onnx": ".onnx"}


def detect_format(data: bytes):
    """('tflite', None) or ('onnx', ParsedOnnx) from the content; QConvertError otherwise.

    The parsed ONNX model (its large weights left in `data`, see `onnx_reader.parse_onnx_lean`)
    is returned so the reader does not parse the bytes a second time.
    """
    if not data:
        raise QConvertError("file is empty")
    if len(data) >= 8 and data[4:8] == b"TFL3":
        return "tflite", None
    from .onnx_reader import parse_onnx_lean

    try:
        return "onnx", parse_onnx_lean(data)
    except QConvertError:
        raise QConvertError("not a TFLite or ONNX model (format not recognized from its content)")


def read_bytes(path: str | Path) -> bytes:
    """The whole file, or a QConvertError naming it (missing, a directory, unreadable)."""
    path = Path(path)
    if not path.exists():
        raise QConvertError("no such file", str(path))
    if path.is_dir():
        raise QConvertError("is a directory, not a model file", str(path))
    try:
        return path.read_bytes()
    except OSError as exc:
        raise QConvertError(f"cannot read: {exc.strerror}", str(path)) from exc


def load_model(path: str | Path) -> Model:
    """Read and verify the model at `path`; errors name the file."""
    try:
        data = read_bytes(path)
        fmt, parsed = detect_format(data)
        if fmt == "tflite":
            from .tflite_reader import read_tflite

            model = read_tflite(data)
        else:
            from .onnx_reader import read_onnx_parsed

            del data  # `parsed` holds what is needed (the weights are views of these bytes)
            model = read_onnx_parsed(parsed, path)
        try:
            model.verify()
        except GraphError as exc:
            raise QConvertError(f"invalid model graph: {exc}") from exc
        model.meta["source_path"] = str(path)
        return model
    except QConvertError as exc:
        raise exc.with_path(str(path))


def require_known_ops(model: Model, purpose: str) -> None:
    """Refuse work that needs every op's meaning, naming all unknown ops (with counts) at once."""
    counts: dict = {}
    for node in model.opaque_nodes():
        counts[node.op] = counts.get(node.op, 0) + 1
    if counts:
        raise QConvertError(f"cannot {purpose}: ops unknown to qconvert: {list_ops(counts)}")


def serialize(model: Model, fmt: str | None = None) -> bytes:
    """The bytes of `model` in `fmt` (default: its own format)."""
    fmt = fmt or model.format
    if fmt != model.format:
        require_known_ops(model, f"convert {model.format} to {fmt}")
        raise QConvertError(f"converting {model.format} to {fmt} is not supported yet")
    if fmt == "tflite":
        from .tflite_writer import write_tflite

        return write_tflite(model)
    from .onnx_writer import write_onnx

    return write_onnx(model)


def format_of_output(path: str | Path, default: str) -> str:
    """Output format from the output file's extension (`default` when it has neither)."""
    suffix = Path(path).suffix.lower()
    return {".tflite": "tflite", ".onnx": "onnx"}.get(suffix, default)


def check_output_path(path: str | Path, inputs=()) -> Path:
    """Fail early (before any work) if `path` cannot be written or would overwrite an input."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise QConvertError("output directory does not exist", str(path))
    if path.is_dir():
        raise QConvertError("output path is a directory", str(path))
    if not os.access(parent, os.W_OK):
        raise QConvertError("output directory is not writable", str(path))
    for source in inputs:
        if path.exists() and Path(source).exists() and path.resolve() == Path(source).resolve():
            raise QConvertError("refusing to overwrite the input model; choose another -o",
                                str(path))
    return path


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same directory and a rename."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise QConvertError(f"cannot write: {exc.strerror}", str(path)) from exc
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_files_atomic(files: dict) -> None:
    """Write {path: bytes} all or nothing: every file goes to a temporary file beside its
    target first; only when all are written are they renamed into place (on failure the
    temporary files are removed and no target is touched)."""
    temps = []
    try:
        for path, data in files.items():
            path = Path(path)
            parent = path.parent if str(path.parent) else Path(".")
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
        for tmp, path in temps:
            os.replace(tmp, path)
    except OSError as exc:
        raise QConvertError(f"cannot write: {exc.strerror}", str(exc.filename or "")) from exc
    finally:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def default_output(path: str | Path, tag: str, fmt: str) -> Path:
    """`<stem>_<tag><suffix>` next to the input, e.g. model_converted.tflite."""
    path = Path(path)
    return path.with_name(f"{path.stem}_{tag}{FORMAT_SUFFIX[fmt]}")

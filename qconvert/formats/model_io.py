"""Loading and saving models: format detection by content, atomic writes.

The format is recognized from the bytes, never from the extension: a TFLite flatbuffer carries
the `TFL3` file identifier at offset 4, anything else is tried as an ONNX protobuf. Writes go to a
temporary file in the destination directory and are renamed into place, so an error never leaves
a partial file behind.
"""

from __future__ import annotations

import mmap
import os
import stat
import sys
from pathlib import Path

from ..errors import QConvertError
from ..ir import Model
from ..ir.graph import GraphError, list_ops

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
    check_regular_file(path, "model file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise QConvertError(f"cannot read: {exc.strerror}", str(path)) from exc


def map_file(path: str | Path):
    """A read-only `mmap` of the whole file (None when it is empty), or a QConvertError naming
    it. ONNX weights are copied out of it one by one (`onnx_reader.parse_onnx_lean`), so the
    file's bytes are never all in this process's memory next to them."""
    path = Path(path)
    check_regular_file(path, "model file")
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise QConvertError(f"cannot read: {getattr(exc, 'strerror', None) or exc}",
                            str(path)) from exc


def _close_quietly(mapped) -> None:
    """Unmap now; a view still held somewhere (none should be) defers that to its release."""
    try:
        mapped.close()
    except BufferError:
        pass


def check_regular_file(path: str | Path, what: str = "file") -> None:
    """Refuse a missing path, a folder, or a FIFO / device / socket (reading one would wait
    forever or never end) before opening it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise QConvertError("no such file", str(path)) from None
    except OSError as exc:
        raise QConvertError(f"cannot read: {exc.strerror}", str(path)) from exc
    if stat.S_ISDIR(mode):
        raise QConvertError(f"is a directory, not a {what}", str(path))
    if not stat.S_ISREG(mode):
        kind = "FIFO" if stat.S_ISFIFO(mode) else "device or socket"
        raise QConvertError(f"is a {kind}, not a regular file; refusing to read it", str(path))


def load_model(path: str | Path) -> Model:
    """Read and verify the model at `path`; errors name the file."""
    try:
        mapped = map_file(path)
        if mapped is None or mapped[4:8] == b"TFL3":  # empty (refused below), or TFLite
            if mapped is not None:
                mapped.close()
            data = read_bytes(path)
        else:
            data = mapped
        fmt, parsed = detect_format(data)
        if fmt == "tflite":
            from .tflite_reader import read_tflite

            model = read_tflite(data)
        else:
            from .onnx_reader import read_onnx_parsed

            del data  # `parsed` holds what is needed (the weights are copied out of the map)
            try:
                model = read_onnx_parsed(parsed, path)
            finally:
                if mapped is not None:
                    parsed = None
                    _close_quietly(mapped)
        try:
            model.verify()
        except GraphError as exc:
            raise QConvertError(f"invalid model graph: {exc}") from exc
        model.meta["source_path"] = str(path)
        for notice in model.meta.pop("read_notices", ()):  # one line each, on stderr
            sys.stderr.write(f"qconvert: note: {path}: {notice}\n")
        return model
    except QConvertError as exc:
        raise exc.with_path(str(path))


def load_model_data(data: bytes, name: str, path: str | Path | None = None) -> Model:
    """Read and verify a model held in memory (`qconvert.load(bytes)`): `name` stands for its
    file in errors, `path` (when it was read from one) locates ONNX external data."""
    try:
        fmt, parsed = detect_format(bytes(data))
        if fmt == "tflite":
            from .tflite_reader import read_tflite

            model = read_tflite(bytes(data))
        else:
            from .onnx_reader import read_onnx_parsed

            model = read_onnx_parsed(parsed, path if path is not None else Path(name))
        try:
            model.verify()
        except GraphError as exc:
            raise QConvertError(f"invalid model graph: {exc}") from exc
        model.meta["source_path"] = str(path if path is not None else name)
        return model
    except QConvertError as exc:
        raise exc.with_path(str(path if path is not None else name))


def require_known_ops(model: Model, purpose: str) -> None:
    """Refuse work that needs every op's meaning, naming all unknown ops (with counts) at once."""
    counts: dict = {}
    for node in model.opaque_nodes():
        counts[node.op] = counts.get(node.op, 0) + 1
    if counts:
        raise QConvertError(f"cannot {purpose}: ops unknown to qconvert: {list_ops(counts)}")


# Ops that run another subgraph.
_CALLING_OPS = ("CALL_ONCE", "CALL", "WHILE", "IF", "If", "Loop", "Scan")


def require_one_graph(model: Model, purpose: str) -> None:
    """Refuse work done on one graph for a model with several subgraphs, naming the ops that
    make it so: every op of the other subgraphs, the main graph's ops that call one, and the
    main graph's ops unknown to qconvert (a streaming model's VAR_HANDLE / READ_VARIABLE /
    ASSIGN_VARIABLE), all with counts."""
    if len(model.graphs) == 1:
        return
    counts: dict = {}
    nodes = [n for n in model.graph.nodes if n.opaque or n.op in _CALLING_OPS]
    for g in model.graphs[1:]:
        nodes += g.nodes
    for node in nodes:
        counts[node.op] = counts.get(node.op, 0) + 1
    raise QConvertError(f"cannot {purpose}: a model with {len(model.graphs)} subgraphs "
                        f"(state or control flow): {list_ops(counts) or 'no ops'}")


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
    """Fail early (before any work) if `path` cannot be written or would overwrite an input
    (see `output_files.OutputFiles.add`)."""
    from .output_files import OutputFiles

    return OutputFiles(inputs).add(path)


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same directory and a rename."""
    from .output_files import write_outputs

    write_outputs({path: data})


def default_output(path: str | Path, tag: str, fmt: str) -> Path:
    """`<stem>_<tag><suffix>` next to the input, e.g. model_converted.tflite."""
    path = Path(path)
    return path.with_name(f"{path.stem}_{tag}{FORMAT_SUFFIX[fmt]}")

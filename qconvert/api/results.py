"""What the C exports of the Python API return: the files in memory, written on request."""

from __future__ import annotations

import json
import os
from pathlib import Path


class _Files:
    """A set of generated files {file name: bytes}, written together into one folder."""

    def __init__(self, files: dict):
        self.files = {str(k): v for k, v in files.items()}

    def save(self, folder: str | os.PathLike) -> list:
        """Write every file into `folder` (created if missing), all or nothing; the paths."""
        from qconvert.errors import QConvertError
        from qconvert.formats.output_files import write_outputs

        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise QConvertError("output path exists and is not a directory", str(folder))
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise QConvertError(f"cannot create the output folder: {exc.strerror}",
                                str(folder)) from None
        paths = {folder / name: data for name, data in self.files.items()}
        write_outputs(paths)
        return list(paths)


class CHeader(_Files):
    """`export_c_header`'s result: `files` (the header, and the kernel sources with
    `with_kernels`), `text` the header, `layers` the layer count, `quantization` (a float
    model quantized first: its `report` and `report_html()`; else None)."""

    def __init__(self, files: dict, header: str, layers: int, quantization=None):
        super().__init__(files)
        self.header = header
        self.layers = layers
        self.quantization = quantization

    @property
    def text(self) -> str:
        """The header's text."""
        return self.files[self.header].decode("ascii")

    def to_bytes(self) -> bytes:
        """The header's bytes (what `export-c-header -o FILE` writes)."""
        return self.files[self.header]


class CExport(_Files):
    """`export_c`'s result: `files` {file name: bytes} (NAME.h, NAME.c, kernels), `c_name`,
    `summary` (`c_export.model.render.ExportSummary`), `report` (the --report dict) and
    `quantization` (a float model quantized first: its `report` and `report_html()`; else
    None)."""

    def __init__(self, files: dict, c_name: str, summary, report_text: str,
                 quantization=None):
        super().__init__(files)
        self.c_name = c_name
        self.summary = summary
        self.report_text = report_text
        self.quantization = quantization

    @property
    def report(self) -> dict:
        """The --report document: per-layer figures and totals (arena, flash, MACs)."""
        return json.loads(self.report_text)

    def to_bytes(self) -> bytes:
        """NAME.c's bytes."""
        return self.files[f"{self.c_name}.c"]

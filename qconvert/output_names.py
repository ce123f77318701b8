"""What each command's `-o` may be called: a name whose extension says another kind of file
than the one written is refused before any work.

`quantize -o model.h` used to write an ONNX model named model.h, and `export-c -o model.c` a
folder named model.c. A model output must end in .tflite or .onnx (the extension chooses the
format), a header in .h, and export-c's folder must not end in a file extension. A name with no
extension (`-o /dev/null`, a FIFO, `-o model`) is left alone: nothing in it says otherwise.
"""

from __future__ import annotations

from pathlib import Path

from .errors import QConvertError

# what each kind of output is written as, and the extensions that say so
EXPECTED = {
    "model": (".tflite", ".onnx"),
    "header": (".h", ".hpp", ".hh"),
    "json": (".json",),
    "html": (".html", ".htm"),
}
# extensions that name a file, never a folder (export-c's DIR)
FILE_SUFFIXES = frozenset({
    ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".o", ".a", ".s", ".tflite", ".onnx",
    ".json", ".html", ".htm", ".txt", ".md", ".npy", ".npz", ".bin", ".elf", ".hex", ".py",
    ".zip", ".gz", ".tar", ".csv", ".pb", ".lite",
})


def check_output_name(path, kind: str, option: str = "-o") -> None:
    """Refuse `path` for an output of `kind` (a key of `EXPECTED`) when its extension names
    another kind of file; one line naming the expected extensions."""
    if path is None:
        return
    suffix = Path(str(path)).suffix
    expected = EXPECTED[kind]
    if suffix and suffix.lower() not in expected:
        names = " or ".join(expected[:2]) if kind != "header" else ".h"
        what = {"model": "a model (the extension chooses the format)", "header": "a C header",
                "json": "JSON", "html": "an HTML page"}[kind]
        raise QConvertError(f"{option} {suffix}: this writes {what}; give a name ending in "
                            f"{names}", str(path))


def check_output_folder(path, option: str = "-o") -> None:
    """Refuse export-c's output folder when its name ends in a file's extension (`-o model.c`
    would make a folder called model.c)."""
    if path is None:
        return
    suffix = Path(str(path)).suffix
    if suffix.lower() in FILE_SUFFIXES and not Path(str(path)).is_dir():
        raise QConvertError(f"{option} {suffix}: export-c writes a folder (NAME.h, NAME.c and "
                            "the kernels); give a folder name without a file extension",
                            str(path))

"""What each command's `-o` may be called: a name whose extension says another kind of file
than the one written is refused before any work.

`quantize -o model.h` used to write an ONNX model named model.h, and `export-c -o model.c` a
folder named model.c. An extension is refused when it names a known kind of file (`KINDS`,
`OTHER_FILES`) other than the one written: a model output takes .tflite or .onnx (the extension
chooses the format), a header .h, and export-c's folder no file extension. A name with no
extension or one qconvert does not know (`-o /dev/null`, `-o copy.bin`: the input's format) is
left alone, as is an output that is one of the command's inputs (the output check refuses that
with its own message).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import QConvertError

# what each kind of output is written as, and the extensions that say so
KINDS = {
    "model": ((".tflite", ".onnx"), "a model (the extension chooses the format)"),
    "header": ((".h", ".hpp", ".hh"), "a C header"),
}
# extensions of other kinds of file: never the name of a model, a header or a folder
OTHER_FILES = frozenset({
    ".c", ".cc", ".cpp", ".cxx", ".s", ".o", ".a", ".elf", ".hex", ".ld", ".json", ".html",
    ".htm", ".txt", ".md", ".csv", ".npy", ".npz", ".py", ".ipynb", ".zip", ".gz", ".tar",
    ".pb", ".h5", ".keras", ".pt", ".pth", ".lite", ".png", ".jpg", ".jpeg",
})
_KNOWN = OTHER_FILES | {s for suffixes, _ in KINDS.values() for s in suffixes}


def _is_an_input(path, inputs) -> bool:
    for source in inputs:
        try:
            if source is not None and os.path.samefile(path, source):
                return True
        except OSError:
            continue
    return False


def check_output_name(path, kind: str, inputs=(), option: str = "-o") -> None:
    """Refuse `path` for an output of `kind` (a key of `KINDS`) when its extension names
    another known kind of file; one line naming the expected extensions."""
    if path is None:
        return
    suffix = Path(str(path)).suffix
    expected, what = KINDS[kind]
    if suffix.lower() in _KNOWN and suffix.lower() not in expected \
            and not _is_an_input(path, inputs):
        names = " or ".join(expected[:2]) if kind == "model" else expected[0]
        raise QConvertError(f"{option} {suffix}: this writes {what}; give a name ending in "
                            f"{names}", str(path))


def check_output_folder(path, option: str = "-o") -> None:
    """Refuse export-c's output folder when its name ends in a file's extension (`-o model.c`
    would make a folder called model.c); an existing folder is used whatever its name."""
    if path is None:
        return
    suffix = Path(str(path)).suffix
    if suffix.lower() in _KNOWN and not Path(str(path)).is_dir():
        raise QConvertError(f"{option} {suffix}: export-c writes a folder (NAME.h, NAME.c and "
                            "the kernels); give a folder name without a file extension",
                            str(path))

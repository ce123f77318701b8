"""The model set of bench_mcu: where each int8 model comes from, its inputs, and the reference
outputs of the TFLite Micro Python interpreter.

Int8 models are taken as they are; float models (TFLite or ONNX) are quantized by
`qconvert quantize` with their calibration file, into the work folder. Inputs are seeded
full-range random integers (the seed is the model's name), so every image of a model runs the
same bytes and a rerun the same figures.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
CORPUS = MODELS / "corpus"
SAMPLES = ROOT / "sample_models"


@dataclass(frozen=True)
class ModelSource:
    """A model of the set: its file and, for a float model, the calibration data."""
    name: str
    path: Path
    calibration: Path | None = None


def model_set() -> dict:
    """{name: ModelSource}: the MLPerf Tiny models, the digits models, then every corpus model
    (int8 as is, float with its `_calib` file), in a fixed order."""
    named = [
        ModelSource("kws", MODELS / "kws_ref_model.tflite"),
        ModelSource("resnet8", MODELS / "pretrainedResnet_quant.tflite"),
        ModelSource("ad01", MODELS / "ad01_int8.tflite"),
        ModelSource("vww_tflc", CORPUS / "vww_mobilenet_v1_int8_tflc.tflite"),
        ModelSource("vww_qc", CORPUS / "vww_mobilenet_v1.tflite",
                    CORPUS / "vww_mobilenet_v1_calib.npy"),
        ModelSource("digits_tflite", MODELS / "digits_cnn.tflite",
                    SAMPLES / "digits_calib_nhwc.npy"),
        ModelSource("digits_onnx", MODELS / "digits_cnn.onnx", SAMPLES / "digits_calib_nchw.npy"),
        ModelSource("streaming_kws_int8", MODELS / "streaming_kws_int8.tflite"),
    ]
    taken = {m.path for m in named}
    for path in sorted(CORPUS.glob("*.tflite")) + sorted(CORPUS.glob("*.onnx")):
        if path in taken:
            continue
        calib = next((c for c in (CORPUS / f"{path.stem}_calib.npy",
                                  CORPUS / f"{path.stem}_calib.npz") if c.is_file()), None)
        if calib is None and "int8" not in path.stem:
            continue  # a float model without calibration data
        named.append(ModelSource(f"corpus_{path.stem}", path, calib))
    return {m.name: m for m in named}


def int8_model(source: ModelSource, work: Path) -> Path:
    """The int8 .tflite of `source`: the file itself, or `qconvert quantize` of it into `work`;
    RuntimeError with qconvert's last line when quantizing fails."""
    if source.calibration is None:
        return source.path
    work.mkdir(parents=True, exist_ok=True)
    target = work / f"{source.name}_int8.tflite"
    done = subprocess.run([sys.executable, "-m", "qconvert.cli", "quantize", str(source.path),
                           "--calibration", str(source.calibration), "-o", str(target)],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no message"]
        raise RuntimeError(f"qconvert quantize failed: {lines[-1]}")
    return target


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file (ties a prebuilt image to the exact model bytes it embeds)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _interpreter(model: Path):
    from tflite_micro.python.tflite_micro import runtime

    return runtime.Interpreter.from_bytes(model.read_bytes())


def _details(it, getter) -> list:
    """Every input's (or output's) details: the interpreter has no count, so read until it
    refuses (its C++ side prints the refusal on stderr, silenced here)."""
    out, i = [], 0
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            while True:
                try:
                    out.append(getter(i))
                except (IndexError, RuntimeError, ValueError):
                    return out
                i += 1
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def inputs_for(name: str, model: Path) -> list:
    """Seeded full-range random arrays for every input of the int8 `model`."""
    it = _interpreter(model)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = []
    for d in _details(it, it.get_input_details):
        dtype = np.dtype(d["dtype"])
        info = np.iinfo(dtype)
        shape = [int(s) if int(s) > 0 else 1 for s in d["shape"]]
        arrays.append(rng.integers(max(info.min, -32768), min(info.max, 32767) + 1, shape)
                      .astype(dtype))
    return arrays


def reference_outputs(model: Path, arrays: list) -> list:
    """The TFLite Micro Python interpreter's outputs for `arrays`, as raw bytes per output."""
    it = _interpreter(model)
    for i, a in enumerate(arrays):
        it.set_input(a, i)
    it.invoke()
    count = len(_details(it, it.get_output_details))
    return [np.ascontiguousarray(it.get_output(i)).tobytes() for i in range(count)]


def q7_reference_outputs(source: ModelSource, arrays: list) -> dict:
    """{"dsp": bytes list, "scalar": ...}: qconvert's q7 executor on `arrays` (the int8 input
    bytes read as the q7 input) for the q7 model `export-c --scheme q7` builds from `source`,
    with the legacy average pool of each build (`executor.q7_kernels`)."""
    from qconvert.c_export.q7_command import plan_q7_for
    from qconvert.executor.q7_kernels import run_q7

    q7, _ = plan_q7_for(source.path, source.calibration)
    x = np.asarray(arrays[0], np.int8).reshape(1, *q7.input_shape)
    return {path: [np.ascontiguousarray(run_q7(q7.layers, x, path)).tobytes()]
            for path in ("dsp", "scalar")}


def input_file(arrays: list, path: Path) -> Path:
    """Write the inputs' bytes, concatenated in model order, for QEMU's loader."""
    path.write_bytes(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays))
    return path

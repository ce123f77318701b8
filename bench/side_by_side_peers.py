"""The TensorFlow-side peers of `bench/bench_side_by_side.py`, run by it as a child process in a
separate virtualenv (TensorFlow is never a dependency of qconvert or of its tests):

    python -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.20.0 ai-edge-quantizer tflite==2.18.0
    python bench/bench_side_by_side.py --tf-python /tmp/tfvenv/bin/python

    /tmp/tfvenv/bin/python bench/side_by_side_peers.py JOBS.json   (what the bench runs)

JOBS.json is a list of {"name", "float" (a float .tflite), "calib" (.npy, the model's layout),
"keras" (a tests/corpus/make_corpus_keras.py model name or null), "out" (a folder)}. For each
job it writes, when it can:
- `<out>/<name>.tflc.tflite`: the TFLite converter's full-int8 model (Optimize.DEFAULT, the
  calibration samples one at a time as representative dataset, TFLITE_BUILTINS_INT8, int8 input
  and output), from the Keras model rebuilt by make_corpus_keras.py's own code with its seeds,
  checked to reproduce the committed float .tflite (the same bytes) first;
- `<out>/<name>.aeq.tflite`: ai-edge-quantizer's static int8 model (recipe static_wi8_ai8,
  min/max calibration on the same samples) of the float .tflite as given.
and prints one JSON line per job: {"name", "tflc": path or "why not", "aeq": path or "why not"}.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _keras_corpus():
    """make_corpus_keras.py's models, rebuilt in its order with its seeds: ({name: (keras
    model, float .tflite bytes)}, the module, whose `to_tflite(model, calib)` is the TFLite
    converter's full-int8 model)."""
    import tensorflow as tf

    spec = importlib.util.spec_from_file_location(
        "make_corpus_keras", ROOT / "tests" / "corpus" / "make_corpus_keras.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(100)  # consumed as its main() does, so weights match
    for n, size in ((4, 96), (4, 64), (8, 32)):
        mod.smooth_images(rng, n, size, size, 3)
    mod.mfcc_like(rng, 8, 49, 10)
    jobs = [("vww_mobilenet_v1", mod.vww_mobilenet_v1, 11, 0, True),
            ("keras_mobilenet_v2", mod.mobilenet_v2, 12, 0, False),
            ("keras_mobilenet_v3_small", lambda: mod.mobilenet_v3(False), 13, 0, False),
            ("keras_mobilenet_v3_minimal", lambda: mod.mobilenet_v3(True), 14, 0, False),
            ("keras_resnet8", mod.resnet8, 15, 4, False),
            ("keras_ds_cnn", mod.ds_cnn, 16, 0, True)]
    models = {}
    for name, build, seed, dead, _int8 in jobs:
        model = build()
        mod.randomise_batchnorm(model, seed, dead)
        models[name] = (model, mod.to_tflite(model))
    return models, mod


def aeq_int8(float_path: Path, calib: np.ndarray) -> bytes:
    """ai-edge-quantizer's static int8 (int8 weights, int8 activations) model."""
    from ai_edge_quantizer import quantizer, recipe
    from ai_edge_quantizer.utils import tfl_interpreter_utils as utils

    qt = quantizer.Quantizer(str(float_path))
    qt.load_quantization_recipe(recipe.static_wi8_ai8())
    interp = utils.create_tfl_interpreter(str(float_path))
    signature = interp.get_signature_runner()
    (input_name,) = signature.get_input_details()
    data = {utils.DEFAULT_SIGNATURE_KEY: [{input_name: s[None]} for s in calib]}
    result = qt.quantize(qt.calibrate(data), enable_progress_report=False)
    return bytes(result.quantized_model)


def main(jobs_file: str) -> int:
    jobs = json.loads(Path(jobs_file).read_text())
    keras, corpus = _keras_corpus() if any(j.get("keras") for j in jobs) else ({}, None)
    for job in jobs:
        out = Path(job["out"])
        calib = np.load(job["calib"]).astype(np.float32)
        line = {"name": job["name"], "tflc": "no Keras model", "aeq": None}
        if job.get("keras"):
            model, float_blob = keras[job["keras"]]
            if float_blob != Path(job["float"]).read_bytes():
                line["tflc"] = "rebuilt Keras model differs from the committed float file"
            else:
                dst = out / f"{job['name']}.tflc.tflite"
                try:
                    dst.write_bytes(corpus.to_tflite(model, calib))
                    line["tflc"] = str(dst)
                except Exception as exc:  # a row of the table, not a crash
                    line["tflc"] = f"failed: {str(exc).splitlines()[0][:120]}"
        dst = out / f"{job['name']}.aeq.tflite"
        try:
            dst.write_bytes(aeq_int8(Path(job["float"]), calib))
            line["aeq"] = str(dst)
        except Exception as exc:
            line["aeq"] = f"failed: {(str(exc).splitlines() or [type(exc).__name__])[0][:120]}"
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

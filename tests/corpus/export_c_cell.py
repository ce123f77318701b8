"""The corpus's `export-c` cell: the whole model as C, bit-exact with TFLite Micro.

`qconvert export-c MODEL` (float models with their `--calibration`, as a user runs it) must
either refuse in one line naming ops of the model, or write C that gcc compiles with
`-std=c99 -Wall -Wextra -Werror -pedantic` and that, built on the host with qconvert's portable
kernels, gives on every oracle feed exactly what TFLite Micro gives for the int8 model; the same
with `--kernels cmsis-nn` linked with CMSIS-NN when ../shared/third_party/CMSIS-NN is there (the
cell's detail says when it is not). The Cortex-M4 firmware test in tests/test_corpus.py reuses
what the cell keeps in `runner.export_c_models`. A float model is exported from the `quantize`
cell's int8 model when that cell succeeded (export-c `--calibration` quantizes with the same
options; calibrating once keeps the corpus fast), else
from the float model with `--calibration`, which must then refuse too. A stateful model
(`frames` > 0: resource variables, LSTM state) is compared over a stream: its feeds in a row
without a reset against one TFLite Micro interpreter, then the reset functions its NAME.h
declares (`NAME_reset`, `NAME_reset_lstm`) and its first `frames` feeds again against a fresh
interpreter, bit for bit on every call.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.export_c_harness import (build_host, cmsis_nn_available, harness_source,  # noqa: E402
                                      io_layout, parse)


def export_c_cell(runner, model, fail):
    """(status, detail) of `export-c` on `model`; `fail(message)` raises the harness failure."""
    from .harness import run_tflm, tflite_io

    from .harness import check_refusal_names, run_cli

    folder = runner._out(model, "export-c", "d")
    int8_model = model.path
    quantized = runner.cell(model.name, "quantize") if model.precision == "float" else None
    if quantized is not None and quantized.status == "ok":
        # the quantize cell's int8 model: export-c --calibration quantizes with the same
        # options (tests/c_export/test_export_c.py checks the C is the same), so calibrate once
        int8_model = runner._out(model, "quantize", "tflite")
        code, stdout, err, crash = run_cli(["export-c", int8_model, "-o", folder, "--name",
                                            "corpus"])
        if crash is not None:
            fail(f"crashed: {crash.strip().splitlines()[-1]}")
        if code != 0:
            lines = [ln for ln in err.splitlines() if ln.strip()]
            prefix = f"qconvert: error: {int8_model}: "
            if code != 1 or len(lines) != 1 or not lines[0].startswith(prefix):
                fail(f"refusal is not one line: {err.strip()[:300]}")
            cause = lines[0][len(prefix):]
            check_refusal_names(model, cause)
            return "refused", cause
    else:
        args = ["export-c", model.path, "-o", folder, "--name", "corpus"]
        if model.precision == "float":
            args += model.calibration_args
        refused, stdout = runner._invoke(model, "export-c", args, [folder])
        if refused:
            return refused
        if quantized is not None:
            fail(f"export-c succeeded where quantize did not ({quantized.status})")
    feeds, _, _ = runner._float_reference(model)
    printed = runner.stdout.get((model.name, "quantize"), "")
    if model.format == "onnx" and "transpose ONNX data by" in printed:
        feeds = runner._to_tflite_layout(feeds, printed)  # the permutation the conversion made
    elif model.format == "onnx":
        feeds = [[_nhwc(a, d["shape"]) for a, d in zip(feed, tflite_io(int8_model)[0])]
                 for feed in feeds]
    qfeeds = runner._quantized_feeds(int8_model, feeds)
    want = run_tflm(int8_model, qfeeds)
    from qconvert.formats.model_io import load_model

    graph = load_model(int8_model).graph
    samples = [[np.asarray(a).reshape(_dims(graph, n)).astype(graph.tensors[n].dtype)
                for a, n in zip(feed, graph.inputs)] for feed in qfeeds]
    resets, replay = _restart(folder, "corpus", model, fail)
    if replay:  # after the reset: what a fresh interpreter gives on the first calls
        fresh = run_tflm(int8_model, qfeeds[:replay])
        if not all(np.array_equal(a, b) for f, w in zip(fresh, want) for a, b in zip(f, w)):
            fail("TFLite Micro: a fresh interpreter differs from the first run's first calls")
        want = want + fresh
    source = harness_source("corpus", io_layout(graph), samples,
                            (["corpus_" + r for r in resets], replay) if replay else None)
    dtypes = [np.dtype(graph.tensors[n].dtype) for n in graph.outputs]
    check_build(folder, source, dtypes, want, "portable", fail)
    if cmsis_nn_available():
        cmsis_folder = runner._out(model, "export-c", "cmsis")
        code, _, err, crash = run_cli(["export-c", int8_model, "-o", cmsis_folder, "--name",
                                       "corpus", "--kernels", "cmsis-nn"])
        if crash is not None or code != 0:
            fail(f"export-c --kernels cmsis-nn fails: {(crash or err).strip()[-300:]}")
        check_build(cmsis_folder, source, dtypes, want, "cmsis-nn", fail)
        kernels = "both kernel sets"
    else:
        kernels = "portable kernels only: CMSIS-NN is not beside the repository"
    runner.export_c_models[model.name] = (Path(int8_model), graph, samples, want,
                                          (resets, replay))
    arena = re.search(r"arena (\d+) bytes", stdout)
    stream = (f"; {len(samples)} calls in a row, then {', '.join(f'NAME_{r}()' for r in resets)}"
              f" and the first {replay} again" if replay else "")
    return "ok", (f"arena {arena.group(1)} B, " if arena else "") + (
        f"bit-exact TFLM ({kernels}{stream})")


def _restart(folder, name, model, fail) -> tuple:
    """(reset functions without the `NAME_` prefix, calls to replay after them) of a stateful
    model (`frames` > 0): every `void NAME_reset...(void)` NAME.h declares (`NAME_reset` of
    resource-variable state, `NAME_reset_lstm` of LSTM state), replaying `frames` calls; a
    stateful model's C without one fails. ((), 0) for a model without state."""
    if not model.frames:
        return (), 0
    header = (Path(folder) / f"{name}.h").read_text()
    resets = re.findall(rf"^void {name}_(reset\w*)\(void\);", header, re.MULTILINE)
    if not resets:
        fail(f"{name}.h of a stateful model declares no {name}_reset / {name}_reset_lstm")
    return tuple(resets), model.frames


def check_build(folder, source, dtypes, want, kernels, fail):
    """Build `folder` on the host with `kernels` and the harness `source`, and compare every
    call's outputs with `want` (TFLite Micro's); `fail(message)` on the first difference."""
    try:
        exe = build_host(folder, source, cmsis=kernels == "cmsis-nn")
    except AssertionError as exc:
        fail(f"gcc rejects the C ({kernels}): {str(exc)[-300:]}")
    out = subprocess.run([exe], capture_output=True, text=True, check=False, timeout=300)
    if out.returncode != 0:
        fail(f"the C model ({kernels}) exits with {out.returncode}")
    got = parse(out.stdout, dtypes, len(want))
    for k, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            if not np.array_equal(a.view(np.uint8), np.asarray(b).reshape(-1).view(np.uint8)):
                fail(f"C output ({kernels}) differs from TFLite Micro on feed {k}")


def _nhwc(array, shape):
    """An ONNX-layout feed in the TFLite model's layout when the conversion printed no
    permutation: channels moved last (NCHW -> NHWC, NCL -> NLC) when that is what the TFLite
    input's shape says (the conversion's default)."""
    shape = tuple(int(d) for d in shape)
    a = np.asarray(array)
    last = (0, *range(2, a.ndim), 1)
    if a.ndim >= 3 and a.shape != shape and tuple(np.transpose(a, last).shape) == shape:
        return np.ascontiguousarray(np.transpose(a, last))
    return a


def _dims(graph, name) -> tuple:
    from qconvert.c_export.model.steps import tensor_dims

    return tensor_dims(graph, name)

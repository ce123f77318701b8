"""Labelled accuracy (`quantize --eval DATA --labels FILE`): float vs int8 top-1 over every
evaluation sample and both confusion matrices.

The float model runs in the float reference executor on the evaluation data in its own layout;
the int8 model in the integer executor (bit-exact with TFLite Micro; a QDQ ONNX model in the
float executor, as onnxruntime runs it) on the same samples in its layout, quantized at its
input as the firmware would. The class of a sample is the argmax of the first output's last
axis. Labels are one class index per sample, or one-hot rows.
"""

from __future__ import annotations

import os

import numpy as np

from qconvert.errors import QConvertError

BATCH = 64  # samples per executor call


def load_labels(labels, where: str = "labels") -> np.ndarray:
    """The labels as an int64 vector: from a .npy (or file.npz:key) path or an array; one-hot
    or score rows become their argmax."""
    if isinstance(labels, (str, os.PathLike)):
        where = str(labels)
        path, _, key = where.partition(".npz:")
        try:
            if key:
                with np.load(path + ".npz") as z:
                    labels = z[key]
            else:
                labels = np.load(where, allow_pickle=False)
        except (OSError, ValueError, KeyError) as exc:
            raise QConvertError(f"cannot read the labels: {exc}", where) from None
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] > 1:
        labels = labels.argmax(axis=1)
    labels = labels.reshape(-1) if labels.ndim == 2 else labels
    if labels.ndim != 1 or labels.dtype.kind not in "iub" or len(labels) == 0:
        raise QConvertError(f"labels must be one class index (an integer) per sample or "
                            f"one-hot rows; got {labels.dtype} of shape {labels.shape}", where)
    if labels.min() < 0:
        raise QConvertError(f"a label is negative ({int(labels.min())})", where)
    return labels.astype(np.int64)


def classes_of(outputs: np.ndarray) -> np.ndarray:
    """The predicted class of each sample: the argmax of the last axis."""
    return outputs.reshape(len(outputs), -1).argmax(axis=1)


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: int) -> list:
    """classes x classes counts, rows the true class, columns the predicted one."""
    counts = np.bincount(labels * classes + predicted, minlength=classes * classes)
    return counts.reshape(classes, classes).tolist()


def _run_int(model, feeds: dict, rounding: str) -> np.ndarray:
    from qconvert.executor.int_executor import run_int8

    from .params import quantized_inputs

    graph = model.graph
    inputs = quantized_inputs(graph, feeds)
    total = len(next(iter(inputs.values())))
    params: dict = {}
    first = graph.outputs[0]
    return np.concatenate([run_int8(graph, {k: v[i:i + BATCH] for k, v in inputs.items()},
                                    rounding=rounding, params=params)[first]
                           for i in range(0, total, BATCH)])


def _run_float(model, feeds: dict) -> np.ndarray:
    from qconvert.executor.float_executor import run_float_batched

    return run_float_batched(model, feeds, BATCH)[model.graph.outputs[0]]


def labelled_accuracy(float_model, float_feeds: dict, int_model, int_feeds: dict, labels,
                      rounding: str = "double", where: str = "labels") -> dict:
    """{"samples", "classes", "float_top1", "int8_top1", "agreement", "confusion_float",
    "confusion_int8"} over every evaluation sample (see the module docstring)."""
    labels = load_labels(labels, where)
    n = len(next(iter(float_feeds.values())))
    if len(labels) != n:
        raise QConvertError(f"{len(labels)} labels for {n} evaluation samples: give one label "
                            "per --eval sample", where)
    float_out = _run_float(float_model, float_feeds)
    int_out = (_run_int(int_model, int_feeds, rounding) if int_model.format == "tflite"
               else _run_float(int_model, int_feeds))
    classes = int(np.prod(float_out.shape[1:]))
    if classes < 2:
        raise QConvertError("the model's first output has one value per sample: --labels "
                            "needs a classifier (one score per class)", where)
    if labels.max() >= classes:
        raise QConvertError(f"label {int(labels.max())} is not a class of the model's "
                            f"{classes} outputs (0..{classes - 1})", where)
    f, q = classes_of(float_out), classes_of(int_out)
    return {"samples": n, "classes": classes,
            "float_top1": float(np.mean(f == labels)), "int8_top1": float(np.mean(q == labels)),
            "agreement": float(np.mean(f == q)),
            "confusion_float": confusion(labels, f, classes),
            "confusion_int8": confusion(labels, q, classes)}


def render_accuracy(acc: dict) -> list:
    """The report's lines for the labelled accuracy."""
    return [f"labelled top-1 over {acc['samples']} samples: float "
            f"{100 * acc['float_top1']:.2f}%, int8 {100 * acc['int8_top1']:.2f}% "
            f"(int8 agrees with float on {100 * acc['agreement']:.2f}%)"]

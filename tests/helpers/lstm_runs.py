"""Running LSTM models as a stream: TFLite Micro's consecutive invokes, the CLI, the C build.

An LSTM keeps its hidden and cell state in variable tensors between invokes, so its oracle is
one TFLite Micro interpreter invoked frame after frame (`oracles.tflm_stream`), and its C export is
checked by one harness binary that calls NAME_invoke frame after frame (`c_outputs`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np


def int_feed(tensor, seed=3) -> np.ndarray:
    """Full-range random integers of the tensor's shape and type."""
    info = np.iinfo(tensor.dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, tensor.shape).astype(
        tensor.dtype)


def cli(*args) -> object:
    """`qconvert ARGS` through click's runner (the result: exit_code, output)."""
    from click.testing import CliRunner

    from qconvert.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def c_outputs(folder: Path, graph, frames: list, main_c=None, **build) -> list:
    """The exported model `net` in `folder` built on the host (`build`: build_host's options)
    and run on `frames` one after another: its first output per frame, in the graph's type."""
    from helpers.export_c_harness import build_host, harness_source, io_layout, parse

    main_c = main_c or harness_source("net", io_layout(graph), [[f] for f in frames])
    text = subprocess.run([build_host(folder, main_c, **build)], capture_output=True, text=True,
                          check=True).stdout
    out = graph.tensors[graph.outputs[0]]
    return [c.reshape(out.shape) for (c,) in parse(text, [np.dtype(out.dtype)], len(frames))]

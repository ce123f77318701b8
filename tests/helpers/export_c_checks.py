"""`export-c`'s C checked bit for bit against TFLite Micro, one model at a time: `export` writes
a model's C into a folder, `int8_samples` / `s16_samples` make its inputs, `expected` /
`expected16` are TFLite Micro's outputs for them, `assert_bit_exact` compares what the C
printed with those; `check_host` / `check_board` (int8) and `check_host16` (16x8) do all of it
with gcc on the host or arm-none-eabi-gcc and QEMU on an emulated Cortex-M
(tests/helpers/export_c_harness.py). `invoke` runs the qconvert command line in-process.
Shared by the c_export tests and the quant tests that export what they quantize."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from helpers.export_c_harness import (build_cortex_m, build_host, harness_source, io_layout, parse,
                                      run_qemu)
from helpers.int8_models import tflm
from helpers.int16_models import INT16_MODELS, feeds_for
from helpers.int16_models import tflm as tflm16
from helpers.oracles import TEST_MODELS
from qconvert.c_export.model.prepare import prepare_model
from qconvert.c_export.model.render import ModelOptions, render_model
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model

# the 16x8 test models exported whole (the parts of the mixed model are covered by it)
S16_MODELS = [p for p in INT16_MODELS if p.stem not in ("mixed_head_int8", "mixed_tail_int8")]


def invoke(args):
    """Run `qconvert ARGS` in-process (paths allowed among the arguments); exceptions raise."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def export(path: Path, folder: Path, kernels="portable", name="net", patches=0) -> tuple:
    """Write the export-c files of the model at `path` into `folder` (fully connected weights
    1x4 for the portable kernels, row-major for cmsis-nn); (files, summary)."""
    files, summary = render_model(prepare_model(load_model(path)), ModelOptions(
        name=name, kernels=kernels, fc_layout="1x4" if kernels == "portable" else "rowmajor",
        patches=patches))
    folder.mkdir(parents=True, exist_ok=True)
    for f, data in files.items():
        (folder / f).write_bytes(data)
    return files, summary


# -- inputs and TFLite Micro's outputs ----------------------------------------------------------
def int8_samples(graph, name, count=4) -> list:
    """Inputs: wide and narrow random int8, and real digits for the digits models (`name`
    starting with "digits"); float inputs as ramps."""
    rng = np.random.default_rng(len(name))
    samples = []
    digits = np.load(TEST_MODELS / "digits_data_nhwc.npz")["test"] if name.startswith("digits") \
        else None
    for k in range(count):
        sample = []
        for n in graph.inputs:
            t = graph.tensors[n]
            shape = tuple(1 if not isinstance(d, int) or d < 0 else d for d in t.shape)
            if t.dtype == "float32":
                sample.append(np.linspace(-3 - k, 3 + k, int(np.prod(shape)),
                                          dtype=np.float32).reshape(shape))
            elif digits is not None and k < 2:
                s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
                q = np.clip(np.round(digits[k] / s) + z, -128, 127).astype(np.int8)
                sample.append(q.reshape(shape))
            else:
                lo, hi = (-128, 128) if k % 2 else (-40, 30)
                sample.append(rng.integers(lo, hi, size=shape).astype(np.int8))
        samples.append(sample)
    return samples


def s16_samples(graph, count=3) -> list:
    """`count` inputs of a 16x8 (or mixed) model: `feeds_for` seeds 0 (moderate), 1, 2... (the
    whole integer range)."""
    return [[feeds_for(graph, seed)[n] for n in graph.inputs] for seed in range(count)]


def expected(path: Path, samples) -> list:
    """TFLite Micro's outputs of the int8 model at `path` for each sample."""
    data = path.read_bytes()
    return [tflm(data, s) for s in samples]


def expected16(path: Path, samples) -> list:
    """TFLite Micro's outputs of the 16x8 model at `path` for each sample (an arena for large
    int16 activations)."""
    data = path.read_bytes()
    return [tflm16(data, s) for s in samples]


def assert_bit_exact(got, expected, label):
    """Every output of every sample the C printed (`got`, as `parse` reads it) has the dtype and
    the bytes of TFLite Micro's (`expected`)."""
    for k, (outs, refs) in enumerate(zip(got, expected)):
        assert len(outs) == len(refs), label
        for j, (o, r) in enumerate(zip(outs, refs)):
            r = np.asarray(r).reshape(-1)
            assert o.dtype == r.dtype and np.array_equal(o.view(np.uint8), r.view(np.uint8)), (
                f"{label}: sample {k} output {j}: {np.count_nonzero(o != r)} of {r.size} differ")


# -- whole checks -------------------------------------------------------------------------------
def _outputs(graph, text, count) -> list:
    return parse(text, [np.dtype(graph.tensors[n].dtype) for n in graph.outputs], count)


def check_host(path, folder, kernels, name, patches=0):
    """Export the int8 model at `path` into `folder`, build it with gcc on the host (`kernels`:
    portable or cmsis-nn), run `int8_samples(graph, name)`: TFLite Micro's bits."""
    graph = load_model(path).graph
    samples = int8_samples(graph, name)
    export(path, folder, kernels, patches=patches)
    exe = build_host(folder, harness_source("net", io_layout(graph), samples),
                     cmsis=kernels == "cmsis-nn")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert_bit_exact(_outputs(graph, out, len(samples)), expected(path, samples),
                     f"{name} ({kernels})")


def check_board(path, folder, kernels, board, name, patches=0):
    """`check_host` on an emulated Cortex-M `board` (m4, m55, ...: arm-none-eabi-gcc and
    qemu-system-arm), three samples."""
    graph = load_model(path).graph
    samples = int8_samples(graph, name, count=3)
    export(path, folder, kernels, patches=patches)
    elf = build_cortex_m(folder, harness_source("net", io_layout(graph), samples), board,
                         cmsis=kernels == "cmsis-nn")
    assert_bit_exact(_outputs(graph, run_qemu(elf, board), len(samples)),
                     expected(path, samples), f"{name} ({kernels}, {board})")


def check_host16(path, folder, kernels, samples=None):
    """`check_host` for a 16x8 (or mixed) model: `samples` or `s16_samples(graph)`, the 16x8
    oracle."""
    graph = load_model(path).graph
    samples = samples or s16_samples(graph)
    export(path, folder, kernels)
    exe = build_host(folder, harness_source("net", io_layout(graph), samples),
                     cmsis=kernels == "cmsis-nn")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert_bit_exact(_outputs(graph, out, len(samples)), expected16(path, samples),
                     f"{path.stem} ({kernels})")

"""Many small int8 models in ONE export-c image, checked bit for bit: `export_models` writes
each model's C (one name prefix each) into one folder, `run_image` builds a single program
(host gcc, or arm-none-eabi-gcc for an emulated Cortex-M under QEMU) running every model on
its `image_samples` and compares each output with TFLite Micro's (or a given oracle's). One
build for dozens of one-layer models keeps the kernel tests fast. Shared by the c_export tests
of the specialised kernels (fast paths, 1xN, Helium tiles, pad folding, transpose conv)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from helpers.export_c_harness import (build_cortex_m, build_host, image_source, io_layout, parse,
                                      run_qemu, split_image_output)
from helpers.oracles import tflm_invoke
from qconvert.c_export.model.prepare import prepare_model
from qconvert.c_export.model.render import ModelOptions, render_model
from qconvert.formats.model_io import load_model
from qconvert.formats.tflite_reader import read_tflite


def image_samples(data: bytes, count=3) -> list:
    """Full-range, narrow and extreme int8 inputs."""
    graph = read_tflite(data).graph
    rng = np.random.default_rng(len(data))
    out = []
    for k in range(count):
        sample = []
        for name in graph.inputs:
            shape = graph.tensors[name].shape
            lo, hi = [(-128, 128), (-20, 21), (-128, -100)][k % 3]
            sample.append(rng.integers(lo, hi, size=shape).astype(np.int8))
        out.append(sample)
    return out


def export_models(models: dict, folder: Path, kernels="portable") -> dict:
    """Export every {name: tflite bytes} into `folder`; {name: (graph, files, summary)}."""
    folder.mkdir(parents=True, exist_ok=True)
    done = {}
    for name, data in models.items():
        path = folder / f"{name}.tflite"
        path.write_bytes(data)
        model = load_model(path)
        files, summary = render_model(prepare_model(model),
                                      ModelOptions(name=name, kernels=kernels))
        for f, content in files.items():
            (folder / f).write_bytes(content)
        done[name] = (model.graph, files, summary)
        path.unlink()
    return done


def run_image(models: dict, folder: Path, board=None, defines=(), expected=None,
              kernels="portable") -> dict:
    """Build one image (host when `board` is None) running every model on its samples; assert
    each output equals `expected(name, data, samples)` (default: TFLite Micro)."""
    exported = export_models(models, folder, kernels)
    cmsis = kernels == "cmsis-nn"
    entries, samples = [], {}
    for name, data in models.items():
        samples[name] = image_samples(data)
        entries.append((name, io_layout(exported[name][0]), samples[name]))
    main_c = image_source(entries)
    if board is None:
        exe = build_host(folder, main_c, defines=list(defines), cmsis=cmsis)
        text = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    else:
        text = run_qemu(build_cortex_m(folder, main_c, board, defines=list(defines),
                                       cmsis=cmsis), board)
    blocks = split_image_output(text)
    for name, data in models.items():
        graph = exported[name][0]
        got = parse(blocks[name], [np.dtype(graph.tensors[n].dtype) for n in graph.outputs],
                    len(samples[name]))
        for k, (outs, sample) in enumerate(zip(got, samples[name])):
            refs = expected(name, data, sample) if expected else \
                tflm_invoke(data, sample, arena_size=1 << 20)
            for o, r in zip(outs, refs):
                r = np.asarray(r).reshape(-1)
                assert np.array_equal(o.view(np.uint8), r.view(np.uint8)), (
                    f"{name} ({board or 'host'}): sample {k}: {np.count_nonzero(o != r)} of "
                    f"{r.size} differ")
    return exported

"""The "cmsis-whole" kernel set of bench/profile_layers.py: CMSIS-NN alone, one call per layer.

`export-c --kernels cmsis-nn` keeps qconvert's own kernels where they were measured faster on
cores without Helium (`cmsis_lowering`: `keep_on_dsp`, `fast_conv_step`, `fast_fc_step`) and
lets the memory plan overlap a convolution's output with its input by calling CMSIS-NN once
per band of rows (`cmsis_nn.row_bands`). TFLite Micro does neither: it calls CMSIS-NN once per
layer. This module renders that export, the reference qconvert's kernels are held to, by
switching those four choices off while it renders; no CLI option makes it, as no user needs it.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from unittest import mock

FAST_HEADER = "qconvert_nn_fast.h"  # qconvert's fast kernels: absent from a cmsis-whole export


def render(model: Path, name: str) -> dict:
    """{file name: bytes} of `model`'s export-c with CMSIS-NN alone, one call per layer, as C
    name `name` (fully connected weights row-major, as `--kernels cmsis-nn` writes them);
    RuntimeError when a qconvert fast kernel is still called (the switches went stale)."""
    from qconvert.c_export.model import cmsis_lowering, cmsis_nn
    from qconvert.c_export.model.prepare import prepare_model
    from qconvert.c_export.model.render import ModelOptions, render_model
    from qconvert.formats.model_io import load_model

    switches = [(cmsis_lowering, "keep_on_dsp", lambda fast, cmsis: cmsis),
                (cmsis_lowering, "fast_conv_step", lambda *args: None),
                (cmsis_lowering, "fast_fc_step", lambda *args: None),
                (cmsis_nn, "row_bands", lambda *args, **kwargs: None)]
    with ExitStack() as stack:
        for module, attribute, replacement in switches:
            stack.enter_context(mock.patch.object(module, attribute, replacement))
        files, _ = render_model(prepare_model(load_model(model)), ModelOptions(
            name=name, kernels="cmsis-nn", fc_layout="rowmajor"))
    if FAST_HEADER.encode() in files[f"{name}.c"]:
        raise RuntimeError(f"cmsis-whole export of {model} still calls qconvert's fast kernels "
                           "(bench/cmsis_whole.py's switches no longer reach them)")
    return files


def export(model: Path, folder: Path, name: str) -> Path:
    """Write the cmsis-whole export of `model` into folder/src (emptied first); that folder."""
    src = folder / "src"
    src.mkdir(parents=True, exist_ok=True)
    for old in src.glob("*"):
        old.unlink()
    for file_name, data in render(model, name).items():
        (src / file_name).write_bytes(data)
    return src

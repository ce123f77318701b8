"""The work of `qconvert convert`, `fuse` and `quantize`, from their options to the files written.

Each command takes its request (`requests`: filled by the command line or the Python API) and is
two functions: `*_work(request, model, fmt)` runs the route `routes.find_route` gives for
(model format, output format, intent) over the loaded model, serializes and checks the result
with `--verify` when asked, writing nothing (the API's `qconvert.fuse` / `convert` /
`quantize` call it); `*_command(request)` checks the output paths first, loads the model, runs
the work and writes every file in one all-or-nothing commit (`output_files`); it returns what
the CLI prints. A refusal is a `QConvertError` (one line). `c_export.command` does the same for
the C exports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import json_text
from .command_inputs import load_with_shapes
from ..errors import QConvertError
from ..formats.pads_spelling import model_nodes
from .quantizing import (check_quantize_request, finish_quantization, quantizing_job,
                         reload, report_files)
from .route_steps import Job, run_route
from .routes import find_route


@dataclass
class Written:
    """What a command wrote: the model file `path` in `fmt` (`size` bytes, `nodes` nodes), the
    ONNX -> TFLite conversion when one ran, the pass counts (`fuse`: with the node counts
    before and after) and the quantization report (`quantize`)."""

    path: str
    fmt: str
    size: int
    nodes: int
    conversion: object = None
    counts: dict | None = None
    nodes_before: int = 0
    report: dict | None = None
    data: bytes = b""
    pairs: object = None


def load_for_output(model, output, input_shapes, outputs, tag: str) -> tuple:
    """(model, output path, output format) of a command writing one model: `model` loaded with
    its input shapes and its external data files registered as inputs of `outputs`; the path is
    `output` or, when it is None, the default one (`tag`: converted, fused, int8), which the
    caller registers with `outputs` (fuse first checks its route)."""
    from ..formats.model_io import default_output, format_of_output

    m = load_with_shapes(model, input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    out = output or str(default_output(model, tag, m.format))
    return m, out, format_of_output(out, m.format)


def convert_work(request, m, fmt: str) -> Written:
    """The work of `qconvert convert` on the loaded model `m`, to `fmt`; writes nothing."""
    from ..formats.model_io import serialize
    from ..passes.cleanup.store_float16 import has_float16_weights, store_float16

    keep_float16 = request.keep_float16
    if keep_float16 and not (fmt == "tflite" and has_float16_weights(m.graph)):
        raise QConvertError("--keep-float16 keeps float16 weights the model has in a TFLite "
                            "output; " + ("this model has none" if fmt == "tflite"
                                          else f"the output is {fmt}"), str(request.model))
    job = run_route(find_route(m.format, fmt, "convert"),
                    Job(m, input_layout=request.input_layout))
    m, conversion = job.model, job.conversion
    if keep_float16:
        store_float16(m.graph)
    try:
        data = serialize(m, fmt)
        if request.verify:
            from .verify import verify_convert

            verify_convert(m, reload(request), fmt, data, request.verify, conversion)
    except QConvertError as exc:
        raise exc.with_path(str(request.model))
    return Written("", fmt, len(data), len(m.graph.nodes), conversion, data=data)


def convert_command(request) -> Written:
    """`qconvert convert` (see its --help): `request` is a `requests.ConvertRequest`."""
    from ..formats.output_files import OutputFiles

    model, output = request.model, request.output
    outputs = OutputFiles([model])
    if output is not None:
        outputs.add(output)
    m, out, fmt = load_for_output(model, output, request.input_shapes, outputs, "converted")
    if output is None:
        outputs.add(out)
    written = convert_work(request, m, fmt)
    outputs.commit({out: written.data})
    written.path = out
    return written


def pass_names(pass_list) -> tuple:
    """The passes `--passes A,B` names (default: the fusion pipeline); unknown names refused."""
    from ..passes.pipeline import FUSE_PIPELINE

    names = FUSE_PIPELINE
    if pass_list is not None:
        names = tuple(n.strip() for n in pass_list.split(",") if n.strip())
        known = set(FUSE_PIPELINE)
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise QConvertError(f"unknown pass {', '.join(map(repr, unknown)) or '(none given)'}; "
                                "see qconvert fuse --list-passes")
    return names


def fuse_work(request, m, fmt: str, out_name: str) -> Written:
    """The work of `qconvert fuse` on the loaded model `m`, to `fmt` (`out_name`: the output's
    file name, for refusals); writes nothing. `counts` and the node counts are the report."""
    from ..ir.graph import GraphError
    from ..formats.model_io import serialize
    from ..passes import PassContext

    names = pass_names(request.passes)
    route = find_route(m.format, fmt, "fuse")
    before = sum(model_nodes(g) for g in m.graphs)
    try:
        counts = run_route(route, Job(m, passes=names, output=out_name)).counts
        data = serialize(m, fmt)
        if request.verify:
            from .verify import verify_fuse

            verify_fuse(reload(request), fmt, names, PassContext(fmt), data, request.verify)
    except GraphError as exc:
        raise QConvertError(f"internal error: {exc}", str(request.model)) from exc
    except QConvertError as exc:
        raise exc.with_path(str(request.model))
    after = sum(model_nodes(g) for g in m.graphs)
    return Written("", fmt, len(data), after, counts=counts, nodes_before=before, data=data,
                   report={"passes": counts, "nodes_before": before, "nodes_after": after})


def fuse_command(request) -> Written:
    """`qconvert fuse` (see its --help): `request` is a `requests.FuseRequest`."""
    from ..formats.output_files import OutputFiles

    pass_names(request.passes)
    model, output, report = request.model, request.output, request.report
    outputs = OutputFiles([model])
    for path in (output, report):
        if path is not None:
            outputs.add(path)
    m, out, fmt = load_for_output(model, output, request.input_shapes, outputs, "fused")
    route = find_route(m.format, fmt, "fuse")
    if route.refusal is not None and not route.steps:  # refused before the output is checked
        run_route(route, Job(m, output=os.path.basename(out)))
    if output is None:
        outputs.add(out)
    written = fuse_work(request, m, fmt, os.path.basename(out))
    contents = {out: written.data}
    if report is not None:
        contents[report] = (json_text.dumps(written.report) + "\n").encode()
    outputs.commit(contents)
    written.path = out
    return written


def quantize_work(request, m, fmt: str) -> Written:
    """The work of `qconvert quantize` on the loaded model `m`, to `fmt`; writes nothing.
    `report` is the --report dict, `pairs` the float / int8 output pairs the HTML plots."""
    from ..formats.model_io import serialize

    check_quantize_request(request)
    options = request.quantize_options()
    try:
        job, evaluation = quantizing_job(request, m, find_route(m.format, fmt, "quantize"),
                                         options)
        m = job.model
        blob = serialize(m, fmt)
    except QConvertError as exc:
        raise exc.with_path(str(request.model))
    result, pairs = finish_quantization(request, job, blob, fmt, evaluation, options)
    if fmt == "tflite":
        from ..c_export.model.resources import int8_resources

        resources = int8_resources(blob)
        if resources is not None:
            result["resources"] = resources
    return Written("", fmt, len(blob), len(m.graph.nodes), job.conversion, report=result,
                   data=blob, pairs=pairs)


def quantize_command(request) -> Written:
    """`qconvert quantize` (see its --help): `request` is a `requests.QuantizeRequest`."""
    from ..formats.output_files import OutputFiles
    from ..quant import calibration_data as cd
    from .requests import is_path, model_name

    check_quantize_request(request)
    files = [p for p in (request.calibration, request.eval_data, request.labels)
             if p is not None and is_path(p)]
    outputs = OutputFiles([request.model, *(f for p in files for f in cd.data_files(p))])
    for path in (request.output, request.report, request.report_html):
        if path is not None:
            outputs.add(path)
    m, out, fmt = load_for_output(request.model, request.output, request.input_shapes, outputs,
                                  "int8")
    if request.output is None:
        outputs.add(out)
    written = quantize_work(request, m, fmt)
    contents = {out: written.data}
    contents.update(report_files(written.report, written.pairs, model_name(request.model),
                                 request.report, request.report_html))
    outputs.commit(contents)
    written.path = out
    return written

"""The work of `qconvert convert`, `fuse` and `quantize`, from their options to the files written.

Each function checks the options, loads the model, runs the route `routes.find_route` gives for
(model format, output format, intent), serializes, checks the result with `--verify` when asked
and writes every file in one all-or-nothing commit (`output_files`); it returns what the CLI
prints. A refusal is a `QConvertError` (one line). `c_export.command` does the same for the C
exports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import json_text
from .command_inputs import calibration_data, load_with_shapes, memory_limit, normalization
from ..errors import QConvertError
from ..formats.pads_spelling import model_nodes
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


def convert_command(model, output, input_layout, input_shapes, verify,
                    keep_float16: bool = False) -> Written:
    """`qconvert convert` (see its --help)."""
    from ..formats.model_io import serialize
    from ..formats.output_files import OutputFiles
    from ..passes.cleanup.store_float16 import has_float16_weights, store_float16

    outputs = OutputFiles([model])
    if output is not None:
        outputs.add(output)
    m, out, fmt = load_for_output(model, output, input_shapes, outputs, "converted")
    if output is None:
        outputs.add(out)
    if keep_float16 and not (fmt == "tflite" and has_float16_weights(m.graph)):
        raise QConvertError("--keep-float16 keeps float16 weights the model has in a TFLite "
                            "output; " + ("this model has none" if fmt == "tflite"
                                          else f"the output is {fmt}"), model)
    job = run_route(find_route(m.format, fmt, "convert"), Job(m, input_layout=input_layout))
    m, conversion = job.model, job.conversion
    if keep_float16:
        store_float16(m.graph)
    try:
        data = serialize(m, fmt)
        if verify:
            from .verify import verify_convert

            verify_convert(m, lambda: load_with_shapes(model, input_shapes), fmt, data, verify,
                           conversion)
    except QConvertError as exc:
        raise exc.with_path(model)
    outputs.commit({out: data})
    return Written(out, fmt, len(data), len(m.graph.nodes), conversion)


def fuse_command(model, output, pass_list, report, input_shapes, verify) -> Written:
    """`qconvert fuse` (see its --help)."""
    from ..ir.graph import GraphError
    from ..formats.model_io import serialize
    from ..formats.output_files import OutputFiles
    from ..passes import PassContext
    from ..passes.pipeline import FUSE_PIPELINE

    names = FUSE_PIPELINE
    if pass_list is not None:
        names = tuple(n.strip() for n in pass_list.split(",") if n.strip())
        known = set(FUSE_PIPELINE)
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise QConvertError(f"unknown pass {', '.join(map(repr, unknown)) or '(none given)'}; "
                                "see qconvert fuse --list-passes")
    outputs = OutputFiles([model])
    for path in (output, report):
        if path is not None:
            outputs.add(path)
    m, out, fmt = load_for_output(model, output, input_shapes, outputs, "fused")
    route = find_route(m.format, fmt, "fuse")
    if route.refusal is not None and not route.steps:  # refused before the output is checked
        run_route(route, Job(m, output=os.path.basename(out)))
    if output is None:
        outputs.add(out)
    before = sum(model_nodes(g) for g in m.graphs)
    try:
        counts = run_route(route, Job(m, passes=names, output=os.path.basename(out))).counts
        data = serialize(m, fmt)
        if verify:
            from .verify import verify_fuse

            verify_fuse(lambda: load_with_shapes(model, input_shapes), fmt, names,
                        PassContext(fmt), data, verify)
    except GraphError as exc:
        raise QConvertError(f"internal error: {exc}", model) from exc
    except QConvertError as exc:
        raise exc.with_path(model)
    after = sum(model_nodes(g) for g in m.graphs)
    contents = {out: data}
    if report is not None:
        contents[report] = (json_text.dumps({"passes": counts, "nodes_before": before,
                                             "nodes_after": after}) + "\n").encode()
    outputs.commit(contents)
    return Written(out, fmt, len(data), after, counts=counts, nodes_before=before)


def quantize_command(model, output, calibration, calibration_random, eval_data, mean, std,
                     scale, options, max_memory, report, report_html, input_layout,
                     input_shapes, verify) -> Written:
    """`qconvert quantize` (see its --help) with the `QuantizeOptions` `options` (its
    `max_memory` is set from the `--max-memory` text `max_memory` when the data loads)."""
    from ..formats.model_io import serialize
    from ..formats.output_files import OutputFiles
    from ..quant import calibration_data as cd

    if (calibration is None) == (calibration_random is None):
        raise QConvertError("give exactly one of --calibration DATA or --calibration-random N")
    if verify and options.wide:
        from ..quant.report import int_executor_runs_int16

        if not int_executor_runs_int16():
            raise QConvertError("--verify runs the integer executor, which has no 16x8 kernels "
                                "yet; leave out --verify with int16 activations", model)
    outputs = OutputFiles([model, *cd.data_files(calibration), *cd.data_files(eval_data)])
    for path in (output, report, report_html):
        if path is not None:
            outputs.add(path)
    m, out, fmt = load_for_output(model, output, input_shapes, outputs, "int8")
    if output is None:
        outputs.add(out)

    def load_data(source):
        specs = cd.input_specs(source.graph, source.format)
        norm = normalization(mean, std, scale)
        options.max_memory = limit = memory_limit(max_memory)
        data = calibration_data(specs, calibration, calibration_random, norm, limit, verify)
        evaluation = (cd.load_calibration(eval_data, specs, **norm, max_bytes=limit)
                      if eval_data else None)
        return data, evaluation

    try:
        job = run_route(find_route(m.format, fmt, "quantize"),
                        Job(m, input_layout=input_layout, options=options, load_data=load_data,
                            progress=True))
        m = job.model
        blob = serialize(m, fmt)
    except QConvertError as exc:
        raise exc.with_path(model)
    if verify:
        from .verify import verify_quantize

        conversion = job.conversion
        try:
            verify_quantize(lambda: load_with_shapes(model, input_shapes), fmt, blob, verify,
                            job.source_data, conversion and conversion.input_perms,
                            conversion and conversion.output_perms)
        except QConvertError as exc:
            raise exc.with_path(model)
    result = job.report
    pairs = result.pop("_output_pairs", None)
    contents = {out: blob}
    if report is not None:
        contents[report] = (json_text.dumps(result) + "\n").encode()
    if report_html is not None:
        from ..quant.report_html import render_html

        contents[report_html] = render_html(result, os.path.basename(model), pairs).encode()
    outputs.commit(contents)
    return Written(out, fmt, len(blob), len(m.graph.nodes), job.conversion, report=result)

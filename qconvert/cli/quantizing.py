"""The quantization step every quantizing command shares (`quantize`, and `export-c` /
`export-c-header` given a float model): its refusals, the route run with the calibration and
evaluation data, then `--verify`, the evaluation count and the labelled accuracy added to the
report, and the report's files (JSON, HTML)."""

from __future__ import annotations

from .. import json_text
from .command_inputs import calibration_data, evaluation_data, load_with_shapes
from ..errors import QConvertError
from .requests import is_path
from .route_steps import Job, run_route


def reload(request):
    """A fresh copy of the request's model (the `--verify` checks run it again)."""
    return lambda: load_with_shapes(request.model, request.input_shapes)


def check_quantize_request(request) -> None:
    """Refusals that need no model: exactly one calibration source; --verify with 16x8."""
    if (request.calibration is None) == (request.calibration_random is None):
        raise QConvertError("give exactly one of --calibration DATA or --calibration-random N")
    if request.labels is not None and request.eval_data is None:
        raise QConvertError("--labels gives the classes of --eval's samples: give --eval DATA "
                            "too")
    wide = getattr(request, "activations", "int8") == "int16" or \
        getattr(request, "int16_layers", None) is not None
    if request.verify and wide:
        from ..quant.report import int_executor_runs_int16

        if not int_executor_runs_int16():
            raise QConvertError("--verify runs the integer executor, which has no 16x8 kernels "
                                "yet; leave out --verify with int16 activations",
                                str(request.model))


def quantizing_job(request, m, route, options) -> tuple:
    """Run `route` (quantize, or a C export of a float model) over the loaded model `m` with
    the request's calibration (and evaluation) data: (the route's `Job`, the evaluation data in
    the source model's layout or None)."""
    norm = request.normalization()
    source_eval: dict = {}

    def load_data(source):
        from ..quant import calibration_data as cd

        specs = cd.input_specs(source.graph, source.format)
        limit = options.max_memory
        data = calibration_data(specs, request.calibration, request.calibration_random, norm,
                                limit, request.verify)
        evaluation = evaluation_data(specs, request.eval_data, norm, limit)
        source_eval["data"] = evaluation
        return data, evaluation

    job = run_route(route, Job(m, input_layout=request.input_layout, options=options,
                               load_data=load_data if request.data_given else None,
                               progress=request.progress))
    return job, source_eval.get("data")


def finish_quantization(request, job, blob: bytes, fmt: str, evaluation, options) -> tuple:
    """After a quantizing route: `--verify` on the written bytes `blob`, the evaluation
    sample count and the labelled accuracy (`--labels`) added to the report; (report, the
    float / int8 output pairs the HTML plots)."""
    if request.verify:
        from .verify import verify_quantize

        conversion = job.conversion
        try:
            verify_quantize(reload(request), fmt, blob, request.verify, job.source_data,
                            conversion and conversion.input_perms,
                            conversion and conversion.output_perms)
        except QConvertError as exc:
            raise exc.with_path(str(request.model))
    result = job.report
    pairs = result.pop("_output_pairs", None)
    if evaluation is not None:
        result["eval_samples"] = len(next(iter(evaluation.values())))
    if request.labels is not None:
        from ..quant.accuracy import labelled_accuracy

        where = str(request.labels) if is_path(request.labels) else "labels"
        try:
            result["labelled"] = labelled_accuracy(
                reload(request)(), evaluation, job.model, job.evaluation, request.labels,
                options.rounding, where)
        except QConvertError as exc:
            raise exc.with_path(where)
    return result, pairs


def report_files(report: dict, pairs, name: str, json_path, html_path) -> dict:
    """{path: bytes} of the quantization report as JSON (`--report`) and HTML
    (`--report-html`), for the paths given."""
    contents = {}
    if json_path is not None:
        contents[json_path] = (json_text.dumps(report) + "\n").encode()
    if html_path is not None:
        from ..quant.report_html import render_html

        contents[html_path] = render_html(report, name, pairs).encode()
    return contents

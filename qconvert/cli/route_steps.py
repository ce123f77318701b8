"""What a route is (`Route`, a row of `routes.ROUTES`), the work it carries (`Job`), its steps,
and `run_route`, which runs a route's steps.

A step is a function `(route, job)`, held by the route table itself; it checks something (and
refuses in one line) or changes the job's model. See `routes` for what each step does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import QConvertError
from ..ir import Model

ANY = "any"
C_TARGETS = ("c-header", "c")


@dataclass(frozen=True)
class Route:
    """One row of `routes.ROUTES`: the steps (functions of this module) run for a (source,
    precision, target, intent), in order."""

    source: str
    precision: str
    target: str
    intent: str
    steps: tuple
    refusal: str | None = None

    @property
    def quantized_format(self) -> str:
        """The format a quantizing route writes int8 in (C exports quantize TFLite)."""
        return "tflite" if self.target in C_TARGETS else self.target

    @property
    def purpose(self) -> str:
        """How refusals word the work ("convert tflite to onnx", "export C")."""
        if self.target == "c-header":
            return "export a C header"
        if self.target == "c":
            return "export C"
        return f"convert {self.source} to {self.target}"


# `--input-layout` refused (`no_input_layout`), by intent
INPUT_LAYOUT_REFUSALS = {
    "convert": "--input-layout applies to ONNX -> TFLite conversion only",
    "quantize": "--input-layout applies to ONNX -> int8 TFLite only",
    "export": "--input-layout applies to ONNX models only",
}


@dataclass
class Job:
    """One command's work as its route's steps see it.

    Given: `model` (as read; the steps replace it, e.g. by its TFLite conversion),
    `input_layout` (`--input-layout`, None when not given), `passes` (`fuse`), `options`
    (`QuantizeOptions`), `load_data(model as read) -> (calibration, evaluation or None)` (None:
    no calibration data given), `progress` (draw a progress bar while calibrating), `output`
    (the output's file name, for refusals). Set by the steps: `conversion`
    (`passes.onnx_to_tflite.convert.TfliteConversion`), `source_data` (calibration data in the
    source model's layout), `data` / `evaluation` (in the model's layout), `counts` (rewrites
    per pass) and `report` (the quantization report).
    """

    model: Model
    input_layout: str | None = None
    passes: tuple = ()
    options: object = None
    load_data: Callable | None = None
    progress: bool = False
    output: str = ""
    source: Model | None = None
    conversion: object = None
    source_data: dict | None = None
    data: dict | None = None
    evaluation: dict | None = None
    counts: dict = field(default_factory=dict)
    report: dict | None = None
    q7: object = None  # `--scheme q7`: the quant.q7_plan.Q7Model (`quantize-q7`)

    def __post_init__(self):
        self.source = self.source or self.model


def run_route(route: Route, job: Job) -> Job:
    """Run `route`'s steps over `job` in order; for a refused route, its refusal after them."""
    for step in route.steps:
        step(route, job)
    if route.refusal is not None:
        raise QConvertError(route.refusal.format(output=job.output))
    return job


def no_input_layout(route: Route, job: Job) -> None:
    if job.input_layout is not None:
        raise QConvertError(INPUT_LAYOUT_REFUSALS[route.intent])


def one_graph(route: Route, job: Job) -> None:
    from ..formats.model_io import require_one_graph

    require_one_graph(job.model, route.purpose)


def known_ops(route: Route, job: Job) -> None:
    from ..formats.model_io import require_known_ops

    require_known_ops(job.model, route.purpose)


def one_graph_or_state(route: Route, job: Job) -> None:
    from ..executor.streaming import require_one_graph_or_state

    require_one_graph_or_state(job.model, route.purpose)


def known_ops_or_state(route: Route, job: Job) -> None:
    from ..executor.streaming import require_known_ops_or_state

    require_known_ops_or_state(job.model, route.purpose)


def no_calibration(route: Route, job: Job) -> None:
    if job.load_data is not None:
        raise QConvertError("the model is already int8; --calibration and "
                            "--calibration-random apply to float models only")


def need_calibration(route: Route, job: Job) -> None:
    if job.load_data is None:
        raise QConvertError(f"float model: to {route.purpose} it must be int8; give "
                            "--calibration DATA (or --calibration-random N) to quantize it first")


def onnx_to_tflite(route: Route, job: Job) -> None:
    from .input_shapes import with_shape_hint
    from ..passes.onnx_to_tflite.convert import convert_onnx_to_tflite

    try:
        job.conversion = convert_onnx_to_tflite(job.model, job.input_layout or "nhwc")
    except QConvertError as exc:
        raise (with_shape_hint(exc, job.model.graph) if "dynamic" in exc.cause else exc)
    job.model = job.conversion.model
    _data_follows_model(job)


def _data_follows_model(job: Job) -> None:
    """Calibration and evaluation data (given in the ONNX layout) in the converted model's."""
    if job.conversion is not None and job.data is not None:
        from ..passes.onnx_to_tflite.convert import data_to_tflite_layout

        perms = job.conversion.input_perms
        scalars = [name for name, perm in perms.items() if len(perm) == 0]
        if scalars:
            raise QConvertError(f"input {scalars[0]!r} is a scalar (rank 0): calibration stacks "
                                "samples on a batch axis, which it has not; give the input a "
                                "shape such as [1]")
        job.data, job.evaluation = (data_to_tflite_layout(d, perms)
                                    for d in (job.data, job.evaluation))


def fuse(route: Route, job: Job) -> None:
    from ..passes import PassContext
    from ..passes.pipeline import run_pipeline

    job.counts = run_pipeline(job.model, job.passes, PassContext(route.target))


def check_engine(route: Route, job: Job) -> None:
    from ..quant.ort_engine import check_engine

    check_engine(job.options.engine, route.quantized_format)


def load_data(route: Route, job: Job) -> None:
    job.source_data, job.evaluation = job.load_data(job.source)
    job.data = job.source_data
    _data_follows_model(job)


def quantize(route: Route, job: Job) -> None:
    from ..quant.calibration_data import check_batch_of_one, input_specs
    from ..quant.quantize import quantize_model

    check_batch_of_one(input_specs(job.model), "calibration")

    if not job.progress:
        job.report = quantize_model(job.model, job.data, job.options, job.evaluation)
        return
    from ..quant.progress import Progress

    with Progress(len(next(iter(job.data.values()))), "calibrating") as bar:
        job.report = quantize_model(job.model, job.data, job.options, job.evaluation,
                                    progress=lambda done, _total: bar.update(done - bar.done))


def quantize_q7(route: Route, job: Job) -> None:
    """`--scheme q7`: the float model calibrated and planned as power-of-two q7."""
    from qconvert.quant.calibration_data import check_batch_of_one, input_specs
    from qconvert.quant.q7_quantize import quantize_q7_model

    check_batch_of_one(input_specs(job.model), "calibration")
    job.q7, job.report = quantize_q7_model(job.model, job.data, job.options)

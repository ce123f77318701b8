"""`--verify N`: run the input model and the model about to be written on the same N inputs in
the reference executors, and refuse to write when their outputs diverge.

The safety net of `fuse`, `convert` and `quantize`: whatever a pass or writer got wrong, no
command exits 0 with a model whose outputs differ from the input's beyond these tolerances.
The written model is checked as written (its bytes read back), so writer bugs are caught too.

Inputs are random (`random_samples`: standard normal floats, full-range int8 for quantized
inputs, 0 / 1 for other integer inputs such as token ids), one sample per call; `quantize` instead takes its N samples from the calibration
data (cycled), because random values outside the calibrated ranges measure clipping, not bugs.
A model with resource variables (a streaming model) gets the N samples as N consecutive frames,
its state carried from one to the next (`executor.streaming`); so does an LSTM model when the
model it is compared with keeps the LSTM state too (a TFLite source), each run from the reset
state. Against a stateless source (an ONNX LSTM) each sample runs from the reset state.

Criteria (`FLOAT_RTOL`, `MIN_SQNR_DB`):
- float model against float model (fuse, convert, ONNX -> TFLite): every output agrees within
  1e-4 of that output's largest magnitude over the N samples (float rounding of folded weights
  is ~1e-6), with inf / NaN exactly where they were;
- int8 model against int8 model (fuse or convert of an int8 TFLite model): bit for bit, in the
  integer executor;
- float model against its int8 model (quantize): each output's SQNR (float output against the
  dequantized int8 output, over the N samples) is at least 10 dB; a quantization bug (a wrong
  scale, bias or multiplier) falls far below, a sound int8 model of the test models reaches
  15-40 dB even on random calibration; a bool output (a comparison) instead flips at most
  `MAX_BOOL_FLIPS` (1 %) of its values: int8 moves a threshold by up to a step, so values
  within a step of it may flip, an SQNR of 0 / 1 values means nothing.

On failure `VerifyError` names the output and, where the two models share intermediate tensors
by name, the first layer (in graph order) whose output diverges beyond the same criterion.
"""

from __future__ import annotations

import numpy as np

from ..errors import QConvertError
from ..ir import Graph, Model

FLOAT_RTOL = 1e-4
MIN_SQNR_DB = 10.0
MAX_BOOL_FLIPS = 0.01  # share of a bool output's values quantize may flip


class VerifyError(QConvertError):
    """The written model's outputs diverge from the input's (nothing is written)."""


def is_int8_model(model: Model) -> bool:
    """An integer TFLite model (int8, 16x8 or mixed): some node other than DEQUANTIZE computes on
    a quantized int8 or int16 activation (a float model with a QUANTIZE -> DEQUANTIZE pair stays
    a float model)."""
    g = model.graph
    if model.format != "tflite":
        return False
    return any(node.op != "Dequantize" and any(
        g.tensors[i].dtype in ("int8", "int16") and g.tensors[i].quant is not None
        and g.tensors[i].data is None for i in node.present_inputs()) for node in g.nodes)


def _runner(model: Model):
    """`runner(graph, feeds, observe, keep, carry)` for the executor that runs `model`
    (`carry`: an op's variable state between calls, `streaming.run_frames`)."""
    from ..executor.float_executor import run_float
    from ..executor.int_executor import run_int8

    if is_int8_model(model):
        def run(graph, feeds, observe=None, keep=(), carry=None):
            outs = list(graph.outputs) + [k for k in keep if k not in graph.outputs
                                          and graph.tensors[k].data is None
                                          and k not in graph.inputs]
            view = Graph(graph.name, graph.tensors, graph.nodes, graph.inputs, outs)
            result = run_int8(view, feeds, observe=observe, carry=carry)
            for k in keep:
                if k not in result:
                    result[k] = feeds[k] if k in feeds else graph.tensors[k].data
            return result
        return run
    return lambda graph, feeds, observe=None, keep=(), carry=None: run_float(
        graph, feeds, observe, keep, carry=carry)


def _unsupported(model: Model) -> bool:
    """Whether the executor `_runner` picks lacks a kernel for some op of the main graph
    (resource-variable ops aside: `run_frames` handles them)."""
    from ..executor.float_executor import unsupported_ops
    from ..executor.int16_kernels import INT16_KERNELS, is_int16_node
    from ..executor.int_kernels import INT_KERNELS
    from ..executor.streaming import is_resource_op

    g = model.graph
    if is_int8_model(model):
        return any(not is_resource_op(n) and (n.opaque or n.op not in (
            INT16_KERNELS if is_int16_node(g, n) else INT_KERNELS)) for n in g.nodes)
    view = Graph(g.name, g.tensors, [n for n in g.nodes if not is_resource_op(n)], g.inputs,
                 g.outputs)
    return bool(unsupported_ops(view))


def _runnable(model: Model) -> Model:
    """`model`, or when the executor lacks a kernel for one of its ops (the int32 shape
    arithmetic a converter leaves in an int8 model: SHAPE -> PACK), a copy with a dynamic batch
    declared 1 (the samples' batch) and constants folded (`fold-constants`: static shape
    arithmetic becomes constants). Only then: folding both
    models alike would hide a folding bug from `fuse --verify`."""
    import copy

    from ..passes import PassContext, run_passes

    if not _unsupported(model):
        return model
    memo = {id(t.data): t.data for g in model.graphs for t in g.tensors.values()
            if t.data is not None}
    folded = Model(model.format, copy.deepcopy(model.graphs, memo), dict(model.meta))
    for g in folded.graphs:  # the samples' batch is 1: a dynamic batch is 1 here
        for t in g.tensors.values():
            if t.data is None and t.shape and t.shape[0] is None:
                t.shape = (1,) + tuple(t.shape[1:])
    run_passes(folded, ["fold-constants"], PassContext(model.format))
    return folded


def run_samples(model: Model, samples: list, keep=(), stream: bool = False) -> list:
    """Run `samples` ([{input: array with a batch of 1}]) one call each; resource-variable
    state carries over. An LSTM's variable state carries over only when `stream` (both models
    of the comparison keep it, `verify_models`): otherwise each sample runs from the reset
    state, so a TFLite LSTM compares with the ONNX LSTM it was converted from (stateless) as
    with itself. Every call starts the stream from the initial state (no state left over from
    an earlier run)."""
    from ..executor.streaming import has_state, run_frames

    model = _runnable(model)
    runner = _runner(model)
    if has_state(model) or stream:
        return run_frames(model, samples, runner, keep=keep)
    keep = [k for k in keep if k in model.graph.tensors]
    return [runner(model.graph, s, None, keep) for s in samples]


def samples_of(data: dict, n: int) -> list:
    """N single-sample feeds {input: array (1, ...)} from {input: array (count, ...)}, cycled."""
    count = len(next(iter(data.values())))
    return [{k: v[i % count:i % count + 1] for k, v in data.items()} for i in range(n)]


def random_samples(model: Model, n: int, seed: int = 0) -> list:
    """N random single-sample feeds for `model`'s inputs: standard normal floats, full-range
    int8 / uint8 for quantized inputs, and 0 or 1 for other integer inputs (token ids,
    indices: any table has rows 0 and 1 more often than it has row 2**31)."""
    from ..quant.calibration_data import check_batch_of_one, input_specs, random_calibration

    specs = input_specs(model)
    check_batch_of_one(specs, "--verify")
    data = random_calibration(specs, n, seed)
    rng = np.random.default_rng(seed + 1)
    for name, array in data.items():
        t = model.graph.tensors[name]
        if array.dtype.kind in "iu" and not (t.quant is not None and array.dtype.itemsize == 1):
            data[name] = rng.integers(0, 2, array.shape).astype(array.dtype)
    return samples_of(data, n)


def _dequantized(graph: Graph, name: str, value: np.ndarray) -> np.ndarray:
    t = graph.tensors[name]
    if value.dtype == np.bool_:  # a comparison's output: compared as bools (`_Check.fails`)
        return value
    if t.quant is None or value.dtype.kind == "f" or not t.quant.scale.size:
        return value.astype(np.float64)
    q = t.quant
    shape = [1] * value.ndim
    if q.axis is not None:
        shape[q.axis] = -1
    scale = q.scale.astype(np.float64).reshape(shape)
    zp = q.zero_point.astype(np.float64).reshape(shape)
    return (value.astype(np.float64) - zp) * scale


def _static(shape):
    """A shape with dynamic dimensions (the batch) taken as 1, for matching tensors by name."""
    return None if shape is None else tuple(d if isinstance(d, (int, np.integer)) else 1
                                            for d in shape)


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    """10 log10(sum ref^2 / sum (ref - got)^2); inf when equal."""
    noise = float(np.sum((ref - got) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0:
        return float("inf")
    return 10 * np.log10(signal / noise) if signal > 0 else float("-inf")


class _Check:
    """The comparison rule for one pair of models (module docstring)."""

    def __init__(self, mode: str):
        self.mode = mode  # "float", "exact" or "sqnr"

    def describe(self) -> str:
        return {"float": f"max error above {FLOAT_RTOL:g} x the largest magnitude",
                "exact": "not bit-exact",
                "sqnr": f"SQNR below {MIN_SQNR_DB:g} dB"}[self.mode]

    def fails(self, ref: list, got: list) -> str | None:
        """None when `got` (arrays per sample) passes against `ref`, else the measured figure."""
        if self.mode == "sqnr" and ref and np.asarray(ref[0]).dtype == np.bool_:
            a = np.concatenate([np.asarray(r).reshape(-1) for r in ref])
            b = np.concatenate([np.asarray(g).reshape(-1) for g in got]).astype(np.bool_)
            if a.shape != b.shape:
                return f"shape {a.shape} vs {b.shape}"
            flips = int(np.sum(a != b))
            return f"{flips} of {a.size} bool values flip (more than {MAX_BOOL_FLIPS:.0%})" \
                if flips > MAX_BOOL_FLIPS * a.size else None
        a = np.concatenate([np.asarray(r).reshape(-1) for r in ref]).astype(np.float64)
        b = np.concatenate([np.asarray(g).reshape(-1) for g in got]).astype(np.float64)
        if a.shape != b.shape:
            return f"shape {a.shape} vs {b.shape}"
        if self.mode == "exact":
            bad = int(np.sum(a != b))
            return f"{bad} of {a.size} values differ" if bad else None
        finite = np.isfinite(a)
        if not np.array_equal(np.isfinite(b), finite) or not np.array_equal(
                a[~finite], b[~finite], equal_nan=True):  # NaN where the input has NaN: equal
            return "inf / NaN where the input model had none (or the reverse)"
        a, b = a[finite], b[finite]
        if self.mode == "float":
            scale = float(np.max(np.abs(a))) if a.size else 0.0
            err = float(np.max(np.abs(a - b))) if a.size else 0.0
            return f"max error {err:.3g} (largest magnitude {scale:.3g})" \
                if err > FLOAT_RTOL * max(scale, 1e-30) else None
        db = sqnr_db(a, b)
        return f"SQNR {db:.1f} dB" if db < MIN_SQNR_DB else None


def _produced(graph) -> set:
    """The tensors some node of `graph` writes."""
    return {o for node in graph.nodes for o in node.outputs if o is not None}


def verify_models(before: Model, after: Model, samples: list, after_samples: list | None = None,
                  output_perms: dict | None = None, quantized: bool = False,
                  name_layer: bool = True) -> None:
    """Raise `VerifyError` when `after` diverges from `before` on `samples`.

    `after_samples` are the same samples in `after`'s layout and dtypes (ONNX -> TFLite, int8
    inputs), `output_perms` {output: permutation} takes `before`'s outputs to `after`'s layout
    (intermediate tensors are then not compared), `quantized` selects the SQNR criterion.
    `name_layer` False skips the search for the first diverging layer: fusion keeps a layer's
    output name while its value changes (a conv's output becomes the folded BatchNorm's), so
    names do not pair the values of a fused model; `fuse` names the pass instead.
    """
    mode = "sqnr" if quantized else ("exact" if is_int8_model(after) else "float")
    check = _Check(mode)
    g0, g1 = before.graph, after.graph
    made = _produced(g0) & _produced(g1)
    shared = [] if output_perms or not name_layer else [
        n for n in g1.tensors if n in g0.tensors and n not in g1.inputs
        and g1.tensors[n].data is None and g0.tensors[n].data is None
        and _static(g1.tensors[n].shape) == _static(g0.tensors[n].shape)
        and g0.tensors[n].dtype not in ("resource", "variant", "string")
        and n in made]  # not an LSTM's state or intermediates
    from ..executor.streaming import has_variable_state

    # an LSTM's state on both sides (a TFLite source): compare the streams the firmware runs
    stream = has_variable_state(before) and has_variable_state(after)
    try:
        ref = run_samples(before, samples, keep=shared, stream=stream)
    except QConvertError as exc:
        raise QConvertError(f"--verify: cannot run the input model in the reference executor: "
                            f"{exc}") from None
    try:
        got = run_samples(after, after_samples or samples, keep=shared, stream=stream)
    except QConvertError as exc:
        raise VerifyError(f"--verify: the written model diverges from the input: it does not "
                          f"run in the reference executor ({exc})") from None
    failures = []
    for out0, out1 in zip(g0.outputs, g1.outputs):
        perm = (output_perms or {}).get(out1)
        r = [_dequantized(g0, out0, s[out0]) for s in ref]
        if perm is not None and tuple(perm) != tuple(range(len(perm))):
            r = [np.transpose(x, perm) for x in r]
        figure = check.fails(r, [_dequantized(g1, out1, s[out1]) for s in got])
        if figure is not None:
            failures.append(f"output {out1!r}: {figure}")
    if not failures:
        return
    where = ""
    for node in g1.nodes:
        name = next((o for o in node.outputs if o in shared), None)
        if name is None:
            continue
        figure = check.fails([_dequantized(g0, name, s[name]) for s in ref],
                             [_dequantized(g1, name, s[name]) for s in got])
        if figure is not None:
            where = f"; first diverging layer {node.name!r} ({node.label}): {figure}"
            break
    raise VerifyError(f"--verify: the written model diverges from the input over "
                      f"{len(samples)} samples ({check.describe()}): {'; '.join(failures)}{where}")


def reread(model: Model, fmt: str, data: bytes) -> Model:
    """The model as written: `data` parsed again (so writer bugs are caught too)."""
    if fmt == "tflite":
        from ..formats.tflite_reader import read_tflite

        return read_tflite(data)
    from ..formats.onnx_reader import read_onnx

    return read_onnx(data, model.meta.get("source_path", "."))


# -- the three commands ----------------------------------------------------------------------
def _quantized_feeds(model: Model, samples: list) -> list:
    """`samples` (float) as `model`'s inputs take them: int8 inputs quantized with their
    parameters (round half away from zero, clamped), float inputs unchanged."""
    from ..int8.rounding import round_half_away

    g = model.graph
    out = []
    for s in samples:
        feed = {}
        for name, x in s.items():
            t = g.tensors.get(name)
            if t is not None and t.dtype in ("int8", "int16") and t.quant is not None:
                q = round_half_away(np.asarray(x, np.float64) / float(t.quant.scale[0]))
                info = np.iinfo(t.dtype)  # int16: a 16x8 model's input
                feed[name] = np.clip(q + int(t.quant.zero_point[0]), info.min,
                                     info.max).astype(t.dtype)
            else:
                feed[name] = x
        out.append(feed)
    return out


class _AskForShapes:
    """Around a check on random samples of a model whose inputs have dynamic dimensions beyond
    the batch (taken as 1 by `random_samples`): an executor error there (a 3x3 kernel on a
    1x1 image) is not the model's fault, so it becomes one line asking for `--input-shape`."""

    def __init__(self, model: Model):
        from .input_shapes import suggest_input_shapes

        self.hint = suggest_input_shapes(model.graph)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if self.hint is None or kind is None or not issubclass(kind, QConvertError) \
                or issubclass(kind, VerifyError):
            return False
        raise QConvertError("--verify runs random inputs with the dynamic dimensions taken as "
                            f"1, where the model cannot run ({exc.cause}); give the sizes it "
                            f"runs at: {self.hint}") from None


def verify_fuse(load, fmt: str, names, context, written: bytes, n: int) -> None:
    """`fuse --verify N`: the written model against the input on N random inputs. On failure
    the pipeline runs again on a fresh copy, checked after every pass that rewrote something,
    and the error names the first pass that broke the model (or the writer). `load()` reads
    the input model afresh (as the command read it)."""
    from ..passes.pipeline import run_pipeline

    reference = load()
    samples = random_samples(reference, n)
    try:
        with _AskForShapes(reference):
            verify_models(reference, reread(reference, fmt, written), samples, name_layer=False)
    except VerifyError as exc:
        fresh = load()

        def after(name, rewrites):
            if rewrites:
                try:
                    verify_models(reference, fresh, samples, name_layer=False)
                except VerifyError as bad:
                    raise VerifyError(str(bad).replace("the written model diverges",
                                                       f"pass {name!r} makes the model diverge")
                                      ) from None

        run_pipeline(fresh, names, context, after=after)
        raise VerifyError(f"{exc} (every pass checks out in memory: the {fmt} writer "
                          "broke it)") from None


def verify_convert(source: Model, load, fmt: str, written: bytes, n: int,
                   conversion=None) -> None:
    """`convert --verify N`: the written model against the input model (`load()` reads it
    afresh) on N random inputs (given in the input's layout; ONNX -> TFLite, `conversion` a
    `TfliteConversion`, transposes them with the model)."""
    reference = load()
    samples = random_samples(reference, n)
    after_samples, output_perms = None, None
    if conversion is not None:
        perms = conversion.input_perms
        after_samples = [{k: np.ascontiguousarray(np.transpose(v, perms[k])) for k, v in s.items()}
                         for s in samples]
        output_perms = {k: tuple(v) for k, v in conversion.output_perms.items()}
    with _AskForShapes(reference):
        verify_models(reference, reread(source, fmt, written), samples, after_samples,
                      output_perms)


def verify_quantize(load, fmt: str, written: bytes, n: int, data: dict,
                    perms: dict | None, output_perms: dict | None) -> None:
    """`quantize --verify N`: the written int8 model (integer executor; ONNX QDQ in the float
    executor) against the float input model on N calibration samples (`data`, in the input
    model's layout; `load()` reads that model afresh), by output SQNR (module docstring)."""
    reference = load()
    samples = samples_of(data, n)
    written_model = reread(reference, fmt, written)
    after_samples = samples
    if perms is not None:
        after_samples = [{k: np.ascontiguousarray(np.transpose(v, perms[k])) for k, v in s.items()}
                         for s in samples]
    after_samples = _quantized_feeds(written_model, after_samples)
    verify_models(reference, written_model, samples, after_samples, output_perms or None,
                  quantized=True)

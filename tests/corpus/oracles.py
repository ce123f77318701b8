"""What the corpus harness judges with: the settings (tolerances, sample counts, gcc flags), a
cell's outcome, the CLI run in-process, models read independently of qconvert (op types,
tensor names, inputs), the oracle feeds, and the runtimes (onnxruntime with graph
optimizations off, LiteRT with the reference kernels, the TFLite Micro interpreter) with the
comparisons of their outputs. `harness` runs the cells with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .manifest import CorpusModel


# Float outputs of fuse / convert / ONNX -> TFLite: max |got - want| <= TOLERANCE * max |want|.
TOLERANCE = 1e-4
# int8 outputs (dequantized) against the float model on the calibration samples.
SQNR_FLOOR_DB = 15.0
# Samples of each model's calibration data the oracles feed (plus one random sample).
ORACLE_SAMPLES = 2
# Every convert, fuse and quantize also runs qconvert's own `--verify N` with this N.
VERIFY_SAMPLES = 2
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


@dataclass
class Cell:
    """The outcome of one command on one model: `status` ok / refused / FAIL, `detail` the
    oracle's figure, the refusal's cause or what failed; `seconds` the command's wall time."""

    model: str
    command: str
    status: str
    detail: str
    seconds: float = 0.0


class _Fail(Exception):
    """An oracle check failed."""


# -- running the CLI ------------------------------------------------------------------------------
def run_cli(args: list) -> tuple:
    """(exit code, stdout, stderr, crash text or None) of `qconvert ARGS`, run in-process."""
    import traceback

    from click.testing import CliRunner

    from qconvert.cli.app import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    crash = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crash = "".join(traceback.format_exception(*result.exc_info))
    return result.exit_code, result.stdout, result.stderr, crash


# -- reading models independently -----------------------------------------------------------------
def onnx_ops(path: Path) -> tuple:
    """(op types, node and tensor names, node count) of an ONNX model, read with `onnx`."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    ops, names, count = set(), set(), 0

    def walk(g):
        nonlocal count
        for n in g.node:
            count += 1
            ops.add(n.op_type)
            names.update([n.name, *n.input, *n.output])
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
        names.update(i.name for i in g.initializer)
        names.update(i.name for i in g.input)
        names.update(o.name for o in g.output)

    walk(m.graph)
    return ops, names, count


def tflite_ops(path: Path) -> tuple:
    """(builtin op names, tensor names, operator count over all subgraphs) of a TFLite model,
    read with the `tflite` flatbuffer package."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    code_names = {v: k for k, v in vars(BuiltinOperator).items() if k.isupper()}
    m = tflite.Model.GetRootAsModel(Path(path).read_bytes(), 0)
    codes = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        codes.append(oc.CustomCode().decode() if code == 32 and oc.CustomCode() else
                     code_names.get(code, str(code)))
    ops, names, count = set(), set(), 0
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for t in range(sg.TensorsLength()):
            names.add(sg.Tensors(t).Name().decode())
        for o in range(sg.OperatorsLength()):
            count += 1
            ops.add(codes[sg.Operators(o).OpcodeIndex()])
    return ops, names, count


def densify_count(path: Path) -> int:
    """How many DENSIFY operators (builtin 124) a TFLite file has, read with `tflite`."""
    import tflite

    m = tflite.Model.GetRootAsModel(Path(path).read_bytes(), 0)
    codes = [max(m.OperatorCodes(i).BuiltinCode(), m.OperatorCodes(i).DeprecatedBuiltinCode())
             for i in range(m.OperatorCodesLength())]
    return sum(codes[m.Subgraphs(s).Operators(o).OpcodeIndex()] == 124
               for s in range(m.SubgraphsLength())
               for o in range(m.Subgraphs(s).OperatorsLength()))


def model_ops(model: CorpusModel) -> tuple:
    """(op types, names, operator count) of a corpus model, read independently of qconvert."""
    return onnx_ops(model.path) if model.format == "onnx" else tflite_ops(model.path)


_ONNX_VOCAB: set = set()


def op_vocabulary(fmt: str) -> set:
    """Every op type name of a format: ONNX's operator schemas or TFLite's builtin operators."""
    global _ONNX_VOCAB
    if fmt == "onnx":
        if not _ONNX_VOCAB:
            import onnx.defs

            _ONNX_VOCAB = {s.name for s in onnx.defs.get_all_schemas_with_history()}
        return _ONNX_VOCAB
    from tflite.BuiltinOperator import BuiltinOperator

    return {k for k in vars(BuiltinOperator) if k.isupper()}


# -- data -----------------------------------------------------------------------------------------
def calibration_samples(model: CorpusModel) -> list:
    """Per input (model order), the calibration array (N, *sample) as float32."""
    spec = model.calibration
    key = None
    if ":" in Path(spec).name:
        spec, key = spec.rsplit(":", 1)
    data = np.load(spec)
    if isinstance(data, np.ndarray):
        return [data.astype(np.float32)]
    if key is not None:
        return [data[key].astype(np.float32)]
    return [data[name].astype(np.float32) for name in input_names(model)]


def input_names(model: CorpusModel) -> list:
    """The model's input names in order (ONNX: initializers left out)."""
    if model.format == "onnx":
        import onnx

        m = onnx.load(str(model.path), load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        return [i.name for i in m.graph.input if i.name not in inits]
    return [d["name"] for d in _litert(model.path.read_bytes()).get_input_details()]


def dynamic_batch(model: CorpusModel) -> bool:
    """True when every input of an ONNX model has a dynamic first dimension."""
    if model.format != "onnx":
        return False
    import onnx

    m = onnx.load(str(model.path), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    dims = [i.type.tensor_type.shape.dim[0] for i in m.graph.input if i.name not in inits]
    return all(d.dim_param or d.dim_value <= 0 for d in dims)


def oracle_feeds(model: CorpusModel, batch2: bool = False) -> list:
    """Feeds for the oracles, each a list of float32 arrays in input order: the first
    `ORACLE_SAMPLES` calibration samples (for a stateful model: that many frames in a row),
    with `batch2` those two samples again as one batch of 2, and last one random sample with
    the data's mean and spread. All batch 1 but the batch of 2."""
    arrays = calibration_samples(model)
    n = max(model.frames, ORACLE_SAMPLES)
    feeds = [[a[i % len(a)][None] for a in arrays] for i in range(n)]
    if batch2:
        feeds.append([a[:2] for a in arrays])
    rng = np.random.default_rng(1234)
    feeds.append([(a.mean() + a.std() * rng.standard_normal(a.shape[1:]))[None]
                  .astype(np.float32) for a in arrays])
    return feeds


def _fit(array: np.ndarray, shape) -> np.ndarray:
    """A calibration sample in the shape the runtime declares (a leading batch 1 added or
    dropped)."""
    shape = tuple(int(d) for d in shape)
    if array.shape == shape or any(d <= 0 for d in shape):
        return array
    if tuple(d for d in array.shape if d != 1) != tuple(d for d in shape if d != 1):
        raise _Fail(f"input data {array.shape} does not fit the model's input {shape}")
    return array.reshape(shape)


# -- runtimes (the oracles) -----------------------------------------------------------------------
def run_onnxruntime(path: Path, feeds: list) -> list:
    """Outputs of an ONNX model in onnxruntime (graph optimizations off), one list per feed."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return [sess.run(None, dict(zip(names, feed))) for feed in feeds]


def onnx_output_names(path: Path) -> list:
    """The graph output names of an ONNX model, in order."""
    import onnx

    return [o.name for o in onnx.load(str(path), load_external_data=False).graph.output]


def _litert(blob: bytes, keep_all=False):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=blob, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     num_threads=1, experimental_preserve_all_tensors=keep_all)
    it.allocate_tensors()
    return it


def run_litert_tensors(path: Path, feeds: list) -> list:
    """Per feed (frame), every numeric tensor of the main graph by name, in LiteRT with the
    reference kernels and all intermediate tensors kept: a stateful model's hidden state is
    compared this way, not only through outputs that are 0 for most inputs."""
    it = _litert(Path(path).read_bytes(), keep_all=True)
    ins = it.get_input_details()
    details = [d for d in it.get_tensor_details() if d["name"] and d["dtype"] in (
        np.float32, np.int8, np.int16, np.int32)]
    frames = []
    for feed in feeds:
        for d, a in zip(ins, feed):
            it.set_tensor(d["index"], _fit(a, d["shape"]).astype(d["dtype"]))
        it.invoke()
        values = {}
        for d in details:
            try:
                values[d["name"]] = it.get_tensor(d["index"]).copy()
            except ValueError:  # a tensor without data (not computed in this call)
                continue
        frames.append(values)
    return frames


def run_litert(path: Path, feeds: list) -> tuple:
    """(outputs per feed, output names) of a TFLite model in LiteRT with the reference kernels,
    all feeds on one interpreter in order (so a stateful model sees them as frames)."""
    it = _litert(Path(path).read_bytes())
    ins, outs = it.get_input_details(), it.get_output_details()
    results = []
    for feed in feeds:
        for d, a in zip(ins, feed):
            it.set_tensor(d["index"], _fit(a, d["shape"]).astype(d["dtype"]))
        it.invoke()
        results.append([it.get_tensor(d["index"]).copy() for d in outs])
    return results, [d["name"] for d in outs]


def tflite_io(path: Path) -> tuple:
    """(input details, output details) of a TFLite model as LiteRT reports them."""
    it = _litert(Path(path).read_bytes())
    return it.get_input_details(), it.get_output_details()


def run_tflm(path: Path, feeds: list) -> list:
    """Outputs of an int8 TFLite model in the TFLite Micro interpreter (reference kernels), one
    list per feed; feeds are already in the model's input dtypes; one interpreter for all."""
    from tflite_micro.python.tflite_micro import runtime

    blob = Path(path).read_bytes()
    n_out = len(_litert(blob).get_output_details())
    it = runtime.Interpreter.from_bytes(blob)
    results = []
    for feed in feeds:
        for i, a in enumerate(feed):
            it.set_input(_fit(a, it.get_input_details(i)["shape"]), i)
        it.invoke()
        results.append([np.array(it.get_output(i)) for i in range(n_out)])
    return results


def quantize(x: np.ndarray, scale: float, zero_point: int, dtype) -> np.ndarray:
    """Float to int8 as TFLite does (round half away from zero, saturate)."""
    v = np.asarray(x, np.float64) / scale
    q = np.sign(v) * np.floor(np.abs(v) + 0.5) + zero_point
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    ref = np.asarray(ref, np.float64)
    noise = float(np.sum((ref - np.asarray(got, np.float64)) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return float("inf")
    return 10.0 * np.log10(max(signal, 1e-30) / noise)


def _align(ref: np.ndarray, got: np.ndarray, where: str) -> np.ndarray:
    """`ref` in `got`'s shape when they differ only by size-1 axes (a batch-1 axis more or
    less); anything else is a mismatch (layouts are never guessed)."""
    if ref.shape == got.shape:
        return ref
    if ref.size == got.size and (ref.squeeze().shape == got.squeeze().shape):
        return ref.reshape(got.shape)
    raise _Fail(f"{where}: output shape {got.shape} does not match the source's {ref.shape}")


def _compare_float(want: list, got: list, where: str) -> float:
    """Worst relative error over all outputs and feeds; raises past `TOLERANCE`."""
    worst = 0.0
    for wf, gf in zip(want, got):
        if len(wf) != len(gf):
            raise _Fail(f"{where}: {len(gf)} outputs, the source has {len(wf)}")
        for w, g in zip(wf, gf):
            w = _align(np.asarray(w), np.asarray(g), where)
            if not np.all(np.isfinite(g)):
                raise _Fail(f"{where}: non-finite outputs")
            scale = max(float(np.max(np.abs(w))), 1e-30)
            err = float(np.max(np.abs(w.astype(np.float64) - g))) / scale
            worst = max(worst, err)
    if worst > TOLERANCE:
        raise _Fail(f"{where}: outputs differ by {worst:.3g} (relative), over {TOLERANCE}")
    return worst


def _by_name(outputs: list, names: list, order: list) -> list:
    """Reorder each feed's outputs from `names` order to `order` (matching by name)."""
    if order is None:
        return outputs
    if sorted(names) != sorted(order):
        raise _Fail(f"output names {sorted(names)[:4]} differ from the source's "
                    f"{sorted(order)[:4]}")
    index = [names.index(n) for n in order]
    return [[out[i] for i in index] for out in outputs]

"""Run a qconvert command on a corpus model and judge the result with an independent oracle.

Every (model, command) cell ends in one of three states:

- ``ok``: the command exited 0 and its output passed the oracle: float outputs within
  `TOLERANCE` of the source model's (onnxruntime with graph optimizations off, LiteRT with the
  reference kernels; a stateful model frame by frame on one interpreter, every tensor the two
  models share compared), int8 outputs equal bit for bit between the TFLite Micro interpreter
  and qconvert's integer executor (a stateful model: LiteRT's reference kernels, frame by
  frame) with an output SQNR against the float model of at least `SQNR_FLOOR_DB`, a C header that gcc compiles with
  ``-Wall -Wextra -Werror -pedantic``, an inspect table with one row per operator of the model;
- ``refused``: exit status 1, exactly one stderr line ``qconvert: error: <model>: <cause>``, no
  traceback, nothing written, and the cause names ops or tensors that are in the model (every
  quoted name exists in it; every op type it names is one of the model's);
- ``FAIL``: anything else (a crash, a wrong output, a refusal that names nothing of the model);
  the test suite fails on it.

The commands run in-process through click's test runner, convert / fuse / quantize with
qconvert's own `--verify`, models with fixed shapes in the manifest with `--input-shape`;
results are cached per (model, command), so the test suite and `bench/model_coverage.py` each
run every cell once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .manifest import BY_NAME, CorpusModel

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

    from qconvert.cli import main

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


# -- the cells ------------------------------------------------------------------------------------
class CorpusRunner:
    """Runs and caches the cells; `workdir` receives every output."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._cells: dict = {}
        self._float: dict = {}
        self.stdout: dict = {}  # (model, command) -> what the command printed

    def cell(self, model_name: str, command: str) -> Cell:
        key = (model_name, command)
        if key not in self._cells:
            model = BY_NAME[model_name]
            start = time.perf_counter()
            try:
                status, detail = getattr(self, "_" + command.replace("-", "_"))(model)
            except _Fail as exc:
                status, detail = "FAIL", str(exc)
            except Exception as exc:  # a runtime rejects qconvert's output
                status, detail = "FAIL", f"oracle could not run the output: {exc}"[:300]
            if status == "refused" and model.format == "onnx" and command in (
                    "quantize", "export-c-header", "export-c"):
                status, detail = self._names_what_conversion_refuses(model, command, detail)
            self._cells[key] = Cell(model_name, command, status, detail,
                                    time.perf_counter() - start)
        return self._cells[key]

    def _names_what_conversion_refuses(self, model: CorpusModel, command: str, cause: str):
        """`quantize` to TFLite and `export-c-header` of an ONNX model run the ONNX -> TFLite
        conversion: their refusal must name every op that conversion refuses."""
        conversion = self.cell(model.name, "to-tflite")
        if conversion.status != "refused":
            return "refused", cause
        missing = named_ops(model, conversion.detail) - named_ops(model, cause)
        if missing:
            return "FAIL", (f"refusal omits {sorted(missing)}, which the ONNX -> TFLite "
                            f"conversion it runs refuses: {cause[:200]}")
        return "refused", cause

    # -- shared steps
    def _out(self, model: CorpusModel, command: str, ext: str) -> Path:
        d = self.workdir / model.name
        d.mkdir(exist_ok=True)
        return d / f"{command}.{ext}"

    def _invoke(self, model: CorpusModel, command: str, args: list, outputs: list):
        """Run the command; returns (None, stdout) on exit 0, or the (status, detail) of a
        refusal (or a failure) when it did not succeed."""
        for p in outputs:
            if p.exists():
                p.unlink()
        code, out, err, crash = run_cli(args)
        self.stdout[(model.name, command)] = out
        if crash is not None:
            raise _Fail(f"crashed: {crash.strip().splitlines()[-1]}")
        if code == 0:
            missing = [p.name for p in outputs if not p.exists()]
            if missing:
                raise _Fail(f"exit 0 but wrote no {', '.join(missing)}")
            return None, out
        return self._refusal(model, code, err, outputs), out

    def _refusal(self, model: CorpusModel, code: int, err: str, outputs: list) -> tuple:
        lines = [ln for ln in err.splitlines()
                 if ln.strip() and not ln.startswith("qconvert: warning:")]
        if code != 1:
            raise _Fail(f"exit status {code}: {err.strip()[:200]}")
        if len(lines) != 1 or "Traceback" in err:
            raise _Fail(f"refusal is not one line: {err.strip()[:300]}")
        prefix = f"qconvert: error: {model.path}: "
        if not lines[0].startswith(prefix):
            raise _Fail(f"refusal does not start with {prefix!r}: {lines[0][:200]}")
        written = [p.name for p in outputs if p.exists()]
        if written:
            raise _Fail(f"refused but wrote {', '.join(written)}")
        cause = lines[0][len(prefix):]
        check_refusal_names(model, cause)
        return "refused", cause

    def _float_reference(self, model: CorpusModel, batch2: bool = False) -> tuple:
        """(feeds, outputs per feed, output names) of the source model in its own oracle
        runtime (int8 sources: quantized feeds, TFLite Micro); `batch2` adds a feed of two
        samples for an ONNX model with a dynamic batch (outputs that keep it)."""
        batch2 = batch2 and dynamic_batch(model) and not model.shapes
        key = (model.name, batch2)
        if key not in self._float:
            feeds = oracle_feeds(model, batch2)
            if model.format == "onnx":
                outs, names = run_onnxruntime(model.path, feeds), onnx_output_names(model.path)
            elif model.precision == "int8":
                feeds = self._quantized_feeds(model.path, feeds)
                outs, names = run_tflm(model.path, feeds), None
            else:
                outs, names = run_litert(model.path, feeds)
            self._float[key] = (feeds, outs, names)
        return self._float[key]

    @staticmethod
    def _quantized_feeds(path: Path, feeds: list) -> list:
        ins, _ = tflite_io(path)
        out = []
        for feed in feeds:
            row = []
            for d, a in zip(ins, feed):
                a = _fit(a, d["shape"])
                if d["dtype"] != np.float32:
                    a = quantize(a, *d["quantization"], d["dtype"])
                row.append(a)
            out.append(row)
        return out

    @staticmethod
    def _verify_args() -> list:
        """qconvert's own check of what it writes (`--verify N`: convert, fuse, quantize)."""
        return ["--verify", str(VERIFY_SAMPLES)]

    @staticmethod
    def _shape_args(model: CorpusModel, command: str) -> list:
        """`--input-shape NAME:d0,...` for a model whose manifest fixes its dynamic dims."""
        if not model.shapes:
            return []
        out = []
        for name, shape in model.shapes.items():
            out += ["--input-shape", f"{name}:{','.join(str(d) for d in shape)}"]
        return out

    def _same_format_check(self, model: CorpusModel, path: Path, where: str) -> str:
        feeds, want, names = self._float_reference(model, batch2=True)
        if model.format == "onnx":
            got = _by_name(run_onnxruntime(path, feeds), onnx_output_names(path), names)
            err = _compare_float(want, got, where + " (onnxruntime)")
            batch = ", batch 1 and 2" if any(len(f[0]) == 2 for f in feeds) else ""
            return f"max rel err {err:.1e} (onnxruntime{batch})"
        if model.precision == "int8":
            got = run_tflm(path, feeds)
            for w, g in zip(want, got):
                if len(w) != len(g) or any(not np.array_equal(a, b) for a, b in zip(w, g)):
                    raise _Fail(f"{where}: int8 outputs differ from the source's (TFLite Micro)")
            if not model.frames:
                return "bit-exact (TFLite Micro)"
            shared = self._compare_state(model, path, feeds, where)
            return (f"bit-exact (TFLite Micro, {len(feeds)} frames; {shared} shared tensors "
                    "equal per frame in LiteRT)")
        got, got_names = run_litert(path, feeds)
        err = _compare_float(want, _by_name(got, got_names, names), where + " (LiteRT)")
        if not model.frames:
            return f"max rel err {err:.1e} (LiteRT)"
        shared = self._compare_state(model, path, feeds, where)
        return (f"max rel err {err:.1e} (LiteRT, {len(feeds)} frames, {shared} shared tensors "
                "compared per frame)")

    @staticmethod
    def _compare_state(model: CorpusModel, path: Path, feeds: list, where: str) -> int:
        """Every tensor the source and `path` share by name, frame by frame: float ones within
        `TOLERANCE`, integer ones equal; returns how many were compared."""
        want = run_litert_tensors(model.path, feeds)
        got = run_litert_tensors(path, feeds)
        names = sorted(set(want[0]) & set(got[0]))
        if not names:
            raise _Fail(f"{where}: no tensor in common with the source to compare state")
        for name in names:
            if want[0][name].dtype.kind == "f":
                _compare_float([[w[name]] for w in want], [[g[name]] for g in got],
                               f"{where}: tensor {name!r}")
            elif not all(np.array_equal(w[name], g[name]) for w, g in zip(want, got)):
                raise _Fail(f"{where}: tensor {name!r} differs from the source's in LiteRT")
        return len(names)

    # -- commands
    def _inspect(self, model: CorpusModel):
        import json

        refused, out = self._invoke(model, "inspect", ["inspect", model.path, "--json"], [])
        if refused:
            return refused
        report = json.loads(out)
        _, _, count = model_ops(model)
        layers = len(report["layers"])
        if model.format == "onnx":  # Constant nodes are values, not layers
            import onnx

            g = onnx.load(str(model.path), load_external_data=False).graph
            count -= sum(n.op_type == "Constant" for n in g.node)
        if layers != count:
            raise _Fail(f"inspect lists {layers} layers, the model has {count} operators")
        macs = sum(int(r.get("macs") or 0) for r in report["layers"])
        return "ok", f"{layers} layers, {macs / 1e6:.2f}M MACs"

    def _convert(self, model: CorpusModel):
        ext = "onnx" if model.format == "onnx" else "tflite"
        out = self._out(model, "convert", ext)
        refused, _ = self._invoke(model, "convert", ["convert", model.path, "-o", out,
                                                     *self._verify_args(),
                                                     *self._shape_args(model, "convert")], [out])
        return refused or ("ok", self._same_format_check(model, out, "convert"))

    def _fuse(self, model: CorpusModel):
        ext = "onnx" if model.format == "onnx" else "tflite"
        out = self._out(model, "fuse", ext)
        refused, stdout = self._invoke(model, "fuse", ["fuse", model.path, "-o", out,
                                                       *self._verify_args(),
                                                       *self._shape_args(model, "fuse")], [out])
        if refused:
            return refused
        nodes = re.search(r"nodes: (\d+) -> (\d+)", stdout)
        figure = self._same_format_check(model, out, "fuse")
        return "ok", (f"{nodes.group(1)} -> {nodes.group(2)} nodes, " if nodes else "") + figure

    def _to_tflite(self, model: CorpusModel):
        out = self._out(model, "to-tflite", "tflite")
        refused, stdout = self._invoke(model, "to-tflite", [
            "convert", model.path, "-o", out, *self._verify_args(),
            *self._shape_args(model, "convert")], [out])
        if refused:
            return refused
        feeds, want, names = self._float_reference(model)
        tfeeds = self._to_tflite_layout(feeds, stdout)
        want = self._outputs_to_tflite_layout(want, names, stdout)
        got, got_names = run_litert(out, tfeeds)
        err = _compare_float(want, _by_name(got, got_names, names), "ONNX -> TFLite (LiteRT)")
        return "ok", f"max rel err {err:.1e} (LiteRT vs onnxruntime)"

    @staticmethod
    def _to_tflite_layout(feeds: list, stdout: str) -> list:
        """Feeds permuted as the conversion printed (`transpose ONNX data by (0, 2, 3, 1)`),
        one permutation per input in order; inputs without one stay as they are."""
        perms = []
        for line in stdout.splitlines():
            if line.startswith("input '"):
                m = re.search(r"transpose ONNX data by \(([\d, ]+)\)", line)
                perms.append(tuple(int(v) for v in m.group(1).split(",")) if m else None)
        out = []
        for feed in feeds:
            out.append([np.ascontiguousarray(np.transpose(a, perms[i]))
                        if i < len(perms) and perms[i] else a for i, a in enumerate(feed)])
        return out

    @staticmethod
    def _outputs_to_tflite_layout(outputs: list, names: list, stdout: str) -> list:
        """The ONNX model's outputs in the layout the conversion printed for each
        (`output 'p1': NHWC [...]`: channels moved last)."""
        nhwc = set(re.findall(r"^output '(.*)': NHWC", stdout, re.MULTILINE))
        return [[np.transpose(o, (0, *range(2, o.ndim), 1)) if n in nhwc else o
                 for o, n in zip(feed, names)] for feed in outputs]

    def _quantize(self, model: CorpusModel):
        out = self._out(model, "quantize", "tflite")
        refused, stdout = self._invoke(
            model, "quantize", ["quantize", model.path, "--calibration", model.calibration,
                                "-o", out, *self._verify_args(),
                                *self._shape_args(model, "quantize")], [out])
        if refused:
            return refused
        feeds, want, names = self._float_reference(model)
        if model.format == "onnx":
            feeds = self._to_tflite_layout(feeds, stdout)
            want = self._outputs_to_tflite_layout(want, names, stdout)
        qfeeds = self._quantized_feeds(out, feeds)
        tflm = run_tflm(out, qfeeds)
        if model.frames:  # state kept between frames: LiteRT's reference kernels, same frames
            ref_int8, _ = run_litert(out, qfeeds)
            exact, label = ref_int8, "LiteRT reference"
        else:
            from qconvert.executor.int_executor import run_int8
            from qconvert.model_io import load_model

            graph = load_model(out).graph
            exact = []
            for feed in qfeeds:
                res = run_int8(graph, dict(zip(graph.inputs, feed)))
                exact.append([res[name] for name in graph.outputs])
            label = "qconvert's integer executor"
        for t, e in zip(tflm, exact):
            if len(t) != len(e) or any(not np.array_equal(a, np.asarray(b).reshape(a.shape))
                                       for a, b in zip(t, e)):
                raise _Fail(f"int8 model: TFLite Micro and {label} differ")
        _, outs = tflite_io(out)
        deq = [[(o.astype(np.float64) - d["quantization"][1]) * d["quantization"][0]
                if o.dtype != np.float32 else o for o, d in zip(f, outs)] for f in tflm]
        deq = _by_name(deq, [d["name"] for d in outs], names)
        sq = self._sqnr(want, deq, "int8 TFLite")
        return "ok", f"bit-exact TFLM, SQNR {sq:.1f} dB"

    def _sqnr(self, want: list, got: list, where: str) -> float:
        """Output SQNR over the calibration samples (the last feed, random, is left out: a
        trained model's output on noise says nothing of its quantization)."""
        want, got = want[:-1], got[:-1]
        ref = np.concatenate([_align(np.asarray(w), np.asarray(g), where).ravel()
                              for wf, gf in zip(want, got) for w, g in zip(wf, gf)])
        val = np.concatenate([np.asarray(g).ravel() for gf in got for g in gf])
        sq = sqnr_db(ref, val)
        if not sq >= SQNR_FLOOR_DB:
            raise _Fail(f"{where}: output SQNR {sq:.1f} dB is below the floor of "
                        f"{SQNR_FLOOR_DB} dB")
        return sq

    def _quantize_qdq(self, model: CorpusModel):
        out = self._out(model, "quantize-qdq", "onnx")
        refused, _ = self._invoke(
            model, "quantize-qdq", ["quantize", model.path, "--calibration", model.calibration,
                                    "-o", out, *self._verify_args(),
                                    *self._shape_args(model, "quantize")], [out])
        if refused:
            return refused
        feeds, want, names = self._float_reference(model, batch2=True)
        got = _by_name(run_onnxruntime(out, feeds), onnx_output_names(out), names)
        sq = self._sqnr(want, got, "QDQ ONNX")
        return "ok", f"SQNR {sq:.1f} dB (onnxruntime)"

    def _export_c(self, model: CorpusModel):
        from .export_c_cell import export_c_cell

        def fail(message):
            raise _Fail(message)

        return export_c_cell(self, model, fail)

    def _export_c_header(self, model: CorpusModel):
        out = self._out(model, "export-c-header", "h")
        args = ["export-c-header", model.path, "-o", out, "--name", "corpus"]
        if model.precision == "float":
            args += ["--calibration", model.calibration]
        args += self._shape_args(model, "export-c-header")
        refused, stdout = self._invoke(model, "export-c-header", args, [out])
        if refused:
            return refused
        gcc = shutil.which("gcc")
        if gcc is None:
            raise _Fail("gcc is needed to check the header")
        src = out.with_name("include_header.c")
        src.write_text(f'#include "{out.name}"\nint corpus_main(void) {{ return 0; }}\n')
        done = subprocess.run([gcc, *CFLAGS, "-c", src.name, "-o", os.devnull], cwd=out.parent,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise _Fail(f"gcc rejects the header: {done.stderr.strip()[:300]}")
        layers = re.search(r"\((\d+) layers, (\d+) bytes\)", stdout)
        return "ok", (f"{layers.group(1)} layers, {int(layers.group(2)) // 1024} kB, "
                      if layers else "") + "gcc -Wall -Wextra -Werror ok"


# -- refusal checks -------------------------------------------------------------------------------
def _norm(op: str) -> str:
    """An op name compared across spellings: `DepthwiseConv2D`, `DEPTHWISE_CONV_2D` and
    `depthwise_conv_2d` are one op."""
    return op.replace("_", "").lower()


def _matches(word: str, have: set) -> str | None:
    """The model op (normalized) `word` names: the same op in any spelling, or an abbreviation
    of it of at least 4 letters as qconvert's own op names are (LayerNorm: LayerNormalization)."""
    w = _norm(word)
    if w in have:
        return w
    longer = [h for h in have if len(w) >= 4 and h.startswith(w)]
    return longer[0] if len(longer) == 1 else None


def named_ops(model: CorpusModel, cause: str) -> set:
    """The model's op types a message names (normalized spelling), quoted names left out."""
    have = {_norm(o) for o in model_ops(model)[0]}
    bare = re.sub(r"'[^']*'", "", cause)
    found = (_matches(w, have) for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", bare)
             if w != w.lower())
    return {f for f in found if f is not None}


def check_refusal_names(model: CorpusModel, cause: str) -> None:
    """A refusal must name things of the model: every quoted name is one of its nodes, tensors
    or op types; every op-like word (one with a capital letter) that is an op of the model's
    format is one the model has; and it names at least one op or tensor of the model."""
    ops, names, _ = model_ops(model)
    quoted = re.findall(r"'([^']*)'", cause)
    stray = [q for q in quoted if q not in names and q not in ops]
    if stray:
        raise _Fail(f"refusal names {stray[:3]}, not in the model: {cause[:200]}")
    bare = re.sub(r"'[^']*'", "", cause)
    words = {w for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", bare)
             if len(w) > 2 and w != w.lower()}
    vocab = {_norm(v) for v in op_vocabulary(model.format)}
    have = {_norm(o) for o in ops}
    foreign = sorted(w for w in words if _norm(w) in vocab and _norm(w) not in have)
    if foreign:
        raise _Fail(f"refusal names ops {foreign} the model does not have: {cause[:200]}")
    if not quoted and not named_ops(model, cause):
        raise _Fail(f"refusal names no op or tensor of the model: {cause[:200]}")


def summarize_refusal(cause: str) -> str:
    """A refusal's cause, shortened for the table: quoted names and parenthesised details
    dropped, repeated ops counted (`Conv x4`)."""
    def split(text, sep):
        parts, depth, cur = [], 0, ""
        i = 0
        while i < len(text):
            ch = text[i]
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and text.startswith(sep, i):
                parts.append(cur)
                cur = ""
                i += len(sep)
                continue
            cur += ch
            i += 1
        return parts + [cur]

    def strip(text):
        text = re.sub(r"'[^']*'", "", text)
        while re.search(r"\([^()]*\)", text):
            text = re.sub(r"\s*\((x\d+)\)", r" \1", text)
            text = re.sub(r"\s*\([^()]*\)", "", text)
        return " ".join(text.split())

    head = re.match(r"^(cannot [^:]*: )", cause)
    prefix = head.group(1) if head else ""
    clauses = []
    for clause in split(cause[len(prefix):], "; "):
        if ": " not in clause:
            clauses.append(strip(clause))
            continue
        label, _, items = clause.partition(": ")
        counts: dict = {}
        for item in split(items, ", "):
            name = strip(item)
            m = re.match(r"^(.*?) x(\d+)$", name)
            name, n = (m.group(1), int(m.group(2))) if m else (name, 1)
            counts[name] = counts.get(name, 0) + n
        body = ", ".join(k if v == 1 else f"{k} x{v}" for k, v in counts.items())
        clauses.append(f"{strip(label)}: {body}")
    return prefix + "; ".join(clauses)


# -- the README table -----------------------------------------------------------------------------
def coverage_markdown(cells: dict, models: list, commands: tuple) -> str:
    """The coverage table in Markdown: `ok` (with the SQNR for quantize), `refused (n)`,
    `FAIL (n)` or `-` per cell, and below it the numbered causes, each listed once."""
    notes: dict = {}

    def text(cell):
        if cell is None:
            return "-"
        if cell.status == "ok":
            db = re.search(r"SQNR ([-\d.]+ dB)", cell.detail)
            return f"ok, {db.group(1)}" if db else "ok"
        why = summarize_refusal(cell.detail) if cell.status == "refused" else cell.detail
        n = notes.setdefault(f"{cell.status}: {why}" if cell.status == "FAIL" else why,
                             len(notes) + 1)
        return f"{cell.status} ({n})"

    lines = ["| model | " + " | ".join(commands) + " |", "|---" * (len(commands) + 1) + "|"]
    for m in models:
        lines.append(f"| {m.name} | " + " | ".join(text(cells.get((m.name, c)))
                                                 for c in commands) + " |")
    lines.append("")
    lines += [f"({n}) {why}  " for why, n in notes.items()]
    return "\n".join(lines)


def parse_coverage_markdown(text: str, commands: tuple) -> dict:
    """{model: {command: (status, cause or None)}} from `coverage_markdown`'s text."""
    notes = dict(re.findall(r"^\((\d+)\) (.*?)\s*$", text, re.MULTILINE))
    rows = {}
    for line in [ln for ln in text.splitlines() if ln.startswith("|")][2:]:
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        row = {}
        for c, v in zip(commands, cols[1:]):
            m = re.match(r"^(ok|refused|FAIL)(?: \((\d+)\))?", v)
            row[c] = ((m.group(1), notes.get(m.group(2)) if m.group(2) else None) if m
                      else (v, None))
        rows[cols[0]] = row
    return rows

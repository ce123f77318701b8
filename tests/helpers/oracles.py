"""Where the test models are, and independent runtimes to execute them.

Oracles: onnxruntime with its graph optimizations disabled (ONNX), LiteRT (float TFLite), and the
TFLite Micro interpreter with its reference kernels (int8 TFLite, bit-exact).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# Models the tests need are copied into the repository (tests/models); ../shared is never required.
TEST_MODELS = ROOT / "tests" / "models"
SAMPLE_MODELS = ROOT / "sample_models"


def all_model_paths() -> list:
    paths = sorted(TEST_MODELS.glob("*.tflite")) + sorted(TEST_MODELS.glob("*.onnx"))
    paths += sorted(SAMPLE_MODELS.glob("*.tflite")) + sorted(SAMPLE_MODELS.glob("*.onnx"))
    assert paths, "no models found"
    return paths


def random_inputs(details, seed=0) -> list:
    """Random arrays for (shape, dtype) pairs: normal floats, full-range integers."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in details:
        shape = [d if isinstance(d, (int, np.integer)) and d > 0 else 1 for d in shape]
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        else:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape,
                                       endpoint=False).astype(dtype))
    return arrays


def run_onnx(model_bytes: bytes, seed=0) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    types = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
             "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    ins = sess.get_inputs()
    arrays = random_inputs([(i.shape, types[i.type]) for i in ins], seed)
    return sess.run(None, {i.name: a for i, a in zip(ins, arrays)})


def litert_invoke(model_bytes: bytes, arrays=None, seed=0) -> list:
    """LiteRT's (reference kernels) outputs for the input `arrays` (in input order), or for
    random inputs of `seed` (`random_inputs`) when `arrays` is None."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model_bytes,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    ins = it.get_input_details()
    if arrays is None:
        arrays = random_inputs([(d["shape"], d["dtype"]) for d in ins], seed)
    for d, a in zip(ins, arrays):
        it.set_tensor(d["index"], a)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def run_litert(model_bytes: bytes, seed=0) -> list:
    """LiteRT's outputs for random inputs of `seed`."""
    return litert_invoke(model_bytes, seed=seed)


def tflm_invoke(model_bytes: bytes, arrays=None, seed=0, arena_size=None) -> list:
    """TFLite Micro's outputs for the input `arrays` (in input order), or for random inputs of
    `seed` (`random_inputs`) when `arrays` is None; `arena_size` None: the runtime's default."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model_bytes, arena_size=arena_size)
    if arrays is None:
        details, i = [], 0
        while True:
            try:
                d = it.get_input_details(i)
            except Exception:
                break
            details.append((d["shape"], d["dtype"]))
            i += 1
        arrays = random_inputs(details, seed)
    for i, a in enumerate(arrays):
        it.set_input(a, i)
    it.invoke()
    outputs, i = [], 0
    while True:
        try:
            it.get_output_details(i)
        except IndexError:
            break
        outputs.append(np.array(it.get_output(i)))
        i += 1
    return outputs


def ort_per_sample(path, x: np.ndarray) -> np.ndarray:
    """onnxruntime's (graph optimizations off) first output for each sample of `x` fed alone as
    a batch of one, concatenated along the first axis."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


def litert_per_sample(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    """LiteRT's (reference kernels) first output for each sample of `x` fed alone as a batch of
    one, stacked along the first axis."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model_bytes,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    rows = []
    for sample in x:
        it.set_tensor(inp["index"], sample[None].astype(inp["dtype"]))
        it.invoke()
        rows.append(it.get_tensor(out["index"])[0].copy())
    return np.stack(rows)


def run_tflm(model_bytes: bytes, seed=0) -> list:
    """TFLite Micro's outputs for random inputs of `seed`."""
    return tflm_invoke(model_bytes, seed=seed)


def assert_close(reference: list, actual: list, rel: float = 1e-5) -> None:
    """Outputs agree within `rel` relative to each output's largest magnitude."""
    assert len(reference) == len(actual)
    for ref, got in zip(reference, actual):
        assert ref.shape == got.shape and ref.dtype == got.dtype
        finite = np.isfinite(ref)
        np.testing.assert_array_equal(ref[~finite], got[~finite])  # inf / nan where they were
        ref, got = ref[finite], got[finite]
        scale = max(float(np.max(np.abs(ref))), 1e-30) if ref.size else 1.0
        err = float(np.max(np.abs(ref.astype(np.float64) - got))) if ref.size else 0.0
        assert err <= rel * scale, f"max error {err:.3g} exceeds {rel} x {scale:.3g}"


class OnnxNet:
    """A tiny ONNX graph builder for tests: constants, nodes, inputs, named outputs."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs = [], [], []

    def const(self, name, array):
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def rand(self, name, *shape, positive=False):
        a = self.rng.standard_normal(shape).astype(np.float32)
        return self.const(name, np.abs(a) + 0.5 if positive else a)

    def input(self, name, shape):
        from onnx import TensorProto, helper

        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def node(self, op, ins, out, **attrs):
        from onnx import helper

        self.nodes.append(helper.make_node(op, ins, [out], name=out + "_node", **attrs))
        return out

    def conv(self, x, cin, cout, out, k=3, group=1, bias=True, **attrs):
        ins = [x, self.rand(out + "_w", cout, cin // group, k, k)]
        if bias:
            ins.append(self.rand(out + "_b", cout))
        return self.node("Conv", ins, out, group=group, kernel_shape=[k, k], **attrs)

    def bn(self, x, c, out, prefix="bn", eps=1e-5):
        return self.node("BatchNormalization",
                         [x, self.rand(prefix + "_g", c), self.rand(prefix + "_b", c),
                          self.rand(prefix + "_m", c), self.rand(prefix + "_v", c, positive=True)],
                         out, epsilon=eps)

    def build(self, outputs, opset=13) -> bytes:
        from onnx import TensorProto, helper

        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        g = helper.make_graph(self.nodes, "g", self.inputs, outs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m.SerializeToString()


def stream_frames(shape, dtype, n: int, seed=0) -> list:
    """`n` random frames of one input, as a streaming model is fed: normal floats, full-range
    int8 (a wake-word output is 0 for most of them, so tests compare every tensor)."""
    return [random_inputs([(shape, dtype)], seed + i)[0] for i in range(n)]


def tflm_invokes(model_bytes: bytes, frames: list, outputs: int = 1) -> list:
    """Per frame, the first `outputs` outputs, one TFLite Micro interpreter for the whole
    stream (its resource and variable tensors carry the state from one invoke to the next)."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model_bytes)
    result = []
    for frame in frames:
        it.set_input(frame, 0)
        it.invoke()
        result.append([np.array(it.get_output(k)) for k in range(outputs)])
    return result


def tflm_frames(model_bytes: bytes, frames: list, outputs: int) -> list:
    """`tflm_invokes` with every output flattened."""
    return [[a.reshape(-1) for a in outs] for outs in tflm_invokes(model_bytes, frames, outputs)]


def litert_outputs(model_bytes: bytes, frames: list) -> list:
    """The first output of every frame, one LiteRT interpreter (default kernels) invoked on the
    frames in order (a model's variable state carries over, as in an application)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model_bytes)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for frame in frames:
        it.set_tensor(i, frame)
        it.invoke()
        outs.append(it.get_tensor(o).copy())
    return outs


def litert_stream(model_bytes: bytes, frames: list) -> list:
    """Run `frames` one after another through one LiteRT interpreter (reference kernels, so
    int8 is bit-exact; state kept in resource variables carries over between frames). Returns,
    per frame, {tensor name: value} of every numeric tensor of the main subgraph
    (`experimental_preserve_all_tensors` keeps the intermediates)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model_bytes, experimental_preserve_all_tensors=True,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    index = it.get_input_details()[0]["index"]
    tensors = [d for d in it.get_tensor_details() if np.dtype(d["dtype"]).kind in "biuf"]
    results = []
    for frame in frames:
        it.set_tensor(index, frame)
        it.invoke()
        results.append({d["name"]: it.get_tensor(d["index"]).copy() for d in tensors})
    return results


def assert_streams_agree(reference: list, actual: list, rel: float = 0.0,
                         min_shared: int = 1, atol: float = 0.0) -> int:
    """Every tensor the two runs share by name (same shape and dtype) agrees in every frame:
    within `rel` of the tensor's largest magnitude plus `atol` (exactly when both are 0).
    Returns how many tensors were compared."""
    shared = [k for k in reference[0] if k in actual[0]
              and reference[0][k].shape == actual[0][k].shape
              and reference[0][k].dtype == actual[0][k].dtype]
    assert len(shared) >= min_shared, f"only {len(shared)} shared tensors: {shared}"
    for i, (ref, got) in enumerate(zip(reference, actual)):
        for name in shared:
            a, b = ref[name].astype(np.float64), got[name].astype(np.float64)
            tol = (rel * max(float(np.max(np.abs(a))), 1e-30) if a.size else 0.0) + atol
            err = float(np.max(np.abs(a - b))) if a.size else 0.0
            assert err <= tol, f"frame {i}, tensor {name!r}: max error {err:.3g} > {tol:.3g}"
    return len(shared)


def tflm_stream(model_bytes: bytes, frames: list) -> list:
    """Run `frames` one after another through one TFLite Micro interpreter (its resource
    variables carry the state); the first output of each frame."""
    return [outs[0] for outs in tflm_invokes(model_bytes, frames)]

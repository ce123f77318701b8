"""One IR spelling: readers normalise, writers translate back, passes never see protobuf.

- No module under passes/, schemas/ or qconvert/ir/ imports onnx, and importing every pass
  (and the float executor) does not load it (checked in a fresh interpreter).
- The ONNX reader finds what subgraph bodies read (and whether they are pure) once, from the
  NodeProto: the use index and the side-effect table only read the result.
- The ONNX type codes qconvert keeps equal the onnx package's.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import qconvert
from qconvert.dtypes import ONNX_TO_IR
from qconvert.formats.model_io import load_model

REPO = Path(qconvert.__file__).resolve().parent.parent
NO_ONNX = [REPO / "passes", REPO / "schemas", REPO / "qconvert" / "ir"]


def _imports(path: Path) -> set:
    """Top-level names of every module `path` imports (absolute imports)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_passes_schemas_and_ir_never_import_onnx():
    offenders = [str(p.relative_to(REPO)) for folder in NO_ONNX
                 for p in sorted(folder.rglob("*.py")) if "onnx" in _imports(p)]
    assert offenders == []
    assert sum(1 for folder in NO_ONNX for _ in folder.rglob("*.py")) > 20  # the scan saw files


def test_importing_every_pass_does_not_load_onnx():
    code = ("import sys, qconvert.passes, qconvert.passes.pipeline, "
            "qconvert.executor.float_executor; "
            "print(sorted(m for m in sys.modules if m == 'onnx' or m.startswith('onnx.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_onnx_type_codes_match_the_onnx_package():
    for code, name in ONNX_TO_IR.items():
        onnx_name = TensorProto.DataType.Name(code)
        assert name == {"FLOAT": "float32", "DOUBLE": "float64"}.get(onnx_name, onnx_name.lower())
    assert len(ONNX_TO_IR) == 20


def _if_model(body_domain: str = "") -> bytes:
    """x -> Relu -> r; an If whose then-branch reads `r` from the outer scope."""
    then = helper.make_graph(
        [helper.make_node("Neg", ["r"], ["t"], domain=body_domain)], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [cond])
    opsets = [helper.make_opsetid("", 13)] + (
        [helper.make_opsetid(body_domain, 1)] if body_domain else [])
    return helper.make_model(g, opset_imports=opsets).SerializeToString()


def test_onnx_reader_lists_subgraph_reads_once(tmp_path):
    path = tmp_path / "if.onnx"
    path.write_bytes(_if_model())
    model = load_model(str(path))
    node = model.graph.nodes[1]
    assert node.opaque and node.origin["body_reads"] == ("r", "x")
    assert node.origin["body_pure"] is True
    g = model.graph
    assert g.read_in_body("r") and g.sole_reader("r") is None  # Relu's output stays observable


def test_onnx_reader_marks_bodies_with_custom_ops_impure(tmp_path):
    from qconvert.schemas.effects import is_pure

    path = tmp_path / "if_custom.onnx"
    path.write_bytes(_if_model("com.example"))
    node = load_model(str(path)).graph.nodes[1]
    assert node.origin["body_pure"] is False and not is_pure(node)


# -- one spelling whatever the format read ------------------------------------------------------
def _spelling_model(opset: int) -> bytes:
    """x [2, 3, 4] -> Transpose -> Unsqueeze -> Squeeze -> ReduceSum -> Split -> Reshape -> Cast,
    each list-valued parameter spelled as `opset` spells it (attributes at 11, inputs at 13;
    ReduceMean keeps its attribute until 18)."""
    f32 = TensorProto.FLOAT
    inits, nodes = [], []

    def param(op_input: str, values, attr: str | None, since: int) -> tuple:
        """(inputs to append, attributes) for a list parameter."""
        if opset >= since:
            inits.append(numpy_helper.from_array(np.array(values, np.int64), op_input))
            return [op_input], {}
        return [], {attr: values}

    nodes.append(helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]))  # [4, 2, 3]
    extra, attrs = param("unsq_axes", [0], "axes", 13)
    nodes.append(helper.make_node("Unsqueeze", ["t"] + extra, ["u"], **attrs))  # [1, 4, 2, 3]
    extra, attrs = param("sq_axes", [0], "axes", 13)
    nodes.append(helper.make_node("Squeeze", ["u"] + extra, ["s"], **attrs))  # [4, 2, 3]
    extra, attrs = param("sum_axes", [1], "axes", 13)
    nodes.append(helper.make_node("ReduceSum", ["s"] + extra, ["r"], keepdims=0, **attrs))
    extra, attrs = param("mean_axes", [1], "axes", 18)
    nodes.append(helper.make_node("ReduceMean", ["r"] + extra, ["m"], keepdims=1, **attrs))
    extra, attrs = param("sizes", [1, 3], "split", 13)
    nodes.append(helper.make_node("Split", ["r"] + extra, ["p0", "p1"], axis=0, **attrs))
    inits.append(numpy_helper.from_array(np.array([3, 3], np.int64), "shape"))
    nodes.append(helper.make_node("Reshape", ["p1", "shape"], ["y"]))
    nodes.append(helper.make_node("Cast", ["m"], ["z"], to=TensorProto.INT32))
    g = helper.make_graph(nodes, "spelling", [helper.make_tensor_value_info("x", f32, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", f32, [3, 3]),
                           helper.make_tensor_value_info("z", TensorProto.INT32, [4, 1]),
                           helper.make_tensor_value_info("p0", f32, [1, 3])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=7).SerializeToString()


def _ir(path: Path) -> list:
    """(op, attributes, constant values of the parameter inputs) of every node, in order."""
    model = load_model(str(path))
    g = model.graph
    rows = []
    for n in g.nodes:
        params = [None if i is None else
                  (g.constant(i).tolist() if g.constant(i) is not None else "activation")
                  for i in n.inputs[1:]]
        rows.append((n.op, n.attrs, params))
    return rows


def test_onnx_attribute_and_input_spellings_read_the_same(tmp_path):
    """An opset-11 model (perm, axes, split as attributes) and its opset-13 twin (as inputs)
    give the same IR: every parameter a constant input, no attribute spelling left."""
    paths = {}
    for opset in (11, 13):
        paths[opset] = tmp_path / f"s{opset}.onnx"
        paths[opset].write_bytes(_spelling_model(opset))
    old, new = _ir(paths[11]), _ir(paths[13])
    assert old == new
    ops = {op: (attrs, params) for op, attrs, params in new}
    assert ops["Transpose"] == ({}, [[2, 0, 1]])
    assert ops["Squeeze"] == ({}, [[0]]) and ops["Unsqueeze"] == ({}, [[0]])
    assert ops["Split"][1] == [[1, 3]] and "split" not in ops["Split"][0]
    assert ops["ReduceSum"][1] == [[1]] and ops["ReduceMean"][1] == [[1]]
    assert ops["Cast"][0]["to"] == "int32"  # the IR's dtype name, not TensorProto.INT32


def test_onnx_writer_spells_parameters_as_the_opset_wants(tmp_path):
    """Written back, each model has its own spelling again (the source protobuf is the
    oracle: same attributes, inputs and initializers node by node) and onnxruntime computes
    the same outputs as from the source."""
    import onnx

    from helpers.oracles import run_onnx
    from qconvert.formats.model_io import serialize

    for opset in (11, 13):
        source = _spelling_model(opset)
        path = tmp_path / f"s{opset}.onnx"
        path.write_bytes(source)
        written = serialize(load_model(str(path)), "onnx")
        a, b = onnx.load_from_string(source).graph, onnx.load_from_string(written).graph
        assert [(n.op_type, list(n.input), sorted(x.name for x in n.attribute)) for n in a.node] \
            == [(n.op_type, list(n.input), sorted(x.name for x in n.attribute)) for n in b.node]
        assert [n.attribute for n in a.node] == [n.attribute for n in b.node]
        assert sorted(t.name for t in a.initializer) == sorted(t.name for t in b.initializer)
        onnx.checker.check_model(onnx.load_from_string(written), full_check=True)
        for want, got in zip(run_onnx(source), run_onnx(written)):
            np.testing.assert_array_equal(want, got)


# -- writers translate back: every node as the source file had it --------------------------------
def _models(ext: str) -> list:
    from helpers.oracles import TEST_MODELS

    return sorted(TEST_MODELS.glob(f"*.{ext}")) + sorted((TEST_MODELS / "corpus").glob(f"*.{ext}"))


# the builtins whose parameters the IR respells: TRANSPOSE, RESHAPE, SQUEEZE, MEAN, REDUCE_MAX,
# SUM, CAST (codes of the TFLite schema)
RESPELLED = {39, 22, 43, 40, 82, 74, 53}


def _tflite_ops(data: bytes) -> list:
    """(builtin code, input names, output names, options type, options fields) per operator
    of every subgraph, read with the `tflite` package (-1 inputs as None; an empty options
    table the same as none: qconvert writes one for every op that has an options type)."""
    import tflite

    from qconvert.formats.tflite_options import OPTIONS_NAMES, read_options

    m = tflite.Model.GetRootAs(data, 0)
    rows = []
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)

        def name(i):
            return None if i < 0 else sg.Tensors(int(i)).Name()

        for k in range(sg.OperatorsLength()):
            op = sg.Operators(k)
            code = m.OperatorCodes(op.OpcodeIndex())
            if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) not in RESPELLED:
                continue
            kind = OPTIONS_NAMES.get(op.BuiltinOptionsType())
            options = read_options(op.BuiltinOptions(), kind) if op.BuiltinOptions() else {}
            rows.append((max(code.BuiltinCode(), code.DeprecatedBuiltinCode()),
                         [name(i) for i in op.InputsAsNumpy()] if not op.InputsIsNone() else [],
                         [name(i) for i in op.OutputsAsNumpy()] if not op.OutputsIsNone() else [],
                         kind if options else None, options))
    return rows


def _tflite_constants(data: bytes) -> dict:
    """name -> bytes of every tensor holding a buffer."""
    import tflite

    m = tflite.Model.GetRootAs(data, 0)
    out = {}
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for k in range(sg.TensorsLength()):
            t = sg.Tensors(k)
            buf = m.Buffers(t.Buffer())
            if t.Buffer() and not buf.DataIsNone():
                out[(s, t.Name())] = bytes(buf.DataAsNumpy())
    return out


def _has_sparse_tensor(data: bytes) -> bool:
    """Whether any tensor of the TFLite model carries sparsity metadata."""
    import tflite

    m = tflite.Model.GetRootAs(data, 0)
    return any(m.Subgraphs(s).Tensors(k).Sparsity() is not None
               for s in range(m.SubgraphsLength())
               for k in range(m.Subgraphs(s).TensorsLength()))


def test_tflite_round_trip_writes_every_operator_as_the_source_had_it(tmp_path):
    """Read -> write of every TFLite test model: each operator the IR respells has the
    source's inputs, outputs and option values (RESHAPE `new_shape`, MEAN `keep_dims`...
    spelled back from the IR), every constant the same bytes; and writing is a fixpoint
    (read -> write of the written file gives the same bytes)."""
    from qconvert.formats.model_io import serialize

    paths = _models("tflite")
    assert len(paths) >= 10
    respelled = 0
    for path in paths:
        source = path.read_bytes()
        written = serialize(load_model(str(path)), "tflite")
        if _has_sparse_tensor(source):
            # sparse constants are densified on read (and a DENSIFY of one folded): the
            # written model is dense (tests/formats/test_sparse_tflite.py checks its values)
            assert not _has_sparse_tensor(written), path.name
        else:
            assert _tflite_ops(written) == _tflite_ops(source), path.name
            respelled += len(_tflite_ops(source))
            assert _tflite_constants(written) == _tflite_constants(source), path.name
        again = tmp_path / path.name
        again.write_bytes(written)
        assert serialize(load_model(str(again)), "tflite") == written, path.name
    assert respelled >= 10  # RESHAPE and MEAN of the Keras models at least


def test_onnx_round_trip_writes_every_node_as_the_source_had_it(tmp_path):
    """Read -> write of every ONNX test model: each node has the source's op, inputs, outputs
    and attributes (Transpose `perm`, Cast `to` as TensorProto codes again), every
    initializer the same values; and writing is a fixpoint."""
    import onnx
    from onnx import numpy_helper as nh

    from qconvert.formats.model_io import serialize

    paths = _models("onnx")
    assert len(paths) >= 8
    for path in paths:
        src = onnx.load_from_string(path.read_bytes()).graph
        written = serialize(load_model(str(path)), "onnx")
        out = onnx.load_from_string(written).graph
        consts = {n.output[0] for n in src.node if n.op_type == "Constant"}
        nodes = [n for n in src.node if n.op_type != "Constant"]
        assert [(n.op_type, list(n.input), list(n.output)) for n in out.node] == \
            [(n.op_type, list(n.input), list(n.output)) for n in nodes], path.name
        for a, b in zip(nodes, out.node):
            assert {x.name: x for x in a.attribute} == {x.name: x for x in b.attribute}, a.name
        src_values = {t.name: nh.to_array(t) for t in src.initializer}
        for n in src.node:
            if n.op_type == "Constant":
                src_values[n.output[0]] = nh.to_array(n.attribute[0].t) \
                    if n.attribute[0].name == "value" else None
        for t in out.initializer:
            want = src_values[t.name]
            if want is not None:
                np.testing.assert_array_equal(nh.to_array(t), want)
        names = {t.name for t in out.initializer}
        assert {t.name for t in src.initializer} <= names <= set(src_values), path.name
        again = tmp_path / path.name
        again.write_bytes(written)
        assert serialize(load_model(str(again)), "onnx") == written, path.name


def test_both_onnx_spellings_convert_to_one_tflite_with_the_same_ir_spelling(tmp_path):
    """Converted to TFLite, the opset-11 and opset-13 twins give the same bytes; LiteRT runs
    the result as onnxruntime runs the source; read back, the TFLite nodes spell their
    parameters as the ONNX ones do (SQUEEZE's `squeeze_dims` option an axes input, `keep_dims`
    the `keepdims` attribute, Cast's `to` a dtype name), and reading it back and writing it
    gives the same bytes."""
    from click.testing import CliRunner

    from helpers.oracles import assert_close, run_litert, run_onnx
    from qconvert.cli.app import main
    from qconvert.formats.model_io import serialize

    converted = {}
    for opset in (11, 13):
        src = tmp_path / f"s{opset}.onnx"
        src.write_bytes(_spelling_model(opset))
        out = tmp_path / f"s{opset}.tflite"
        result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out)])
        assert result.exit_code == 0, result.output
        converted[opset] = out.read_bytes()
    assert converted[11] == converted[13]
    want = run_onnx(_spelling_model(13))
    got = run_litert(converted[13])
    assert len(got) == 3
    for w, g in zip(want, got):  # same output order (y, z, p0), same shapes
        assert w.shape == g.shape and w.dtype == g.dtype
        assert_close([w], [g])

    path = tmp_path / "s13.tflite"
    model = load_model(str(path))
    g = model.graph
    by_op: dict = {}
    for n in g.nodes:
        by_op.setdefault(n.op, []).append(n)
    squeeze = by_op["Squeeze"][0]
    assert squeeze.attrs == {} and g.constant(squeeze.inputs[1]).tolist() == [0]
    assert by_op["Mean"][0].attrs["keepdims"] == 1 and by_op["ReduceSum"][0].attrs["keepdims"] == 0
    assert by_op["Cast"][0].attrs["to"] == "int32"
    assert all(n.attrs["allowzero"] == 1 and g.constant(n.inputs[1]) is not None
               and "new_shape" not in n.attrs for n in by_op["Reshape"])
    assert all("perm" not in n.attrs and g.constant(n.inputs[1]) is not None
               for n in by_op["Transpose"])
    assert serialize(model, "tflite") == converted[13]

    # the same ops read from the ONNX source carry the same attributes
    onnx_nodes = {n.op: n for n in load_model(str(tmp_path / "s13.onnx")).graph.nodes}
    for op in ("Squeeze", "Transpose"):
        assert onnx_nodes[op].attrs == by_op[op][0].attrs == {}
    assert onnx_nodes["Cast"].attrs["to"] == by_op["Cast"][0].attrs["to"]
    assert onnx_nodes["ReduceSum"].attrs["keepdims"] == by_op["ReduceSum"][0].attrs["keepdims"]
    assert onnx_nodes["ReduceMean"].attrs["keepdims"] == by_op["Mean"][0].attrs["keepdims"]


def test_tflite_cast_options_have_no_ir_meaning_and_survive(tmp_path):
    """TFLite CAST's CastOptions type codes: the IR's `to` is the output type; the codes ride
    in `origin` and are written back as they were (read with the `tflite` package); LiteRT
    runs the written model."""
    import tflite
    from ai_edge_litert.interpreter import Interpreter

    from qconvert.ir import Graph, Model, Node, Tensor
    from qconvert.formats.model_io import serialize
    from qconvert.formats.tflite_reader import read_tflite

    g = Graph("main")
    g.add_tensor(Tensor("x", (1, 3), "float32"))
    g.add_tensor(Tensor("y", (1, 3), "int32"))
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes.append(Node("Cast", ["x"], ["y"], {"to": "int32"}, "y",
                        origin={"kept_options": {"in_data_type": 0, "out_data_type": 2}}))
    data = serialize(Model("tflite", [g]))
    op = tflite.Model.GetRootAs(data, 0).Subgraphs(0).Operators(0)
    options = tflite.CastOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    assert (options.InDataType(), options.OutDataType()) == (0, 2)
    node = read_tflite(data).graph.nodes[0]
    assert node.attrs == {"to": "int32"}
    assert node.origin["kept_options"] == {"in_data_type": 0, "out_data_type": 2}
    x = np.array([[-1.5, 0.2, 7.9]], np.float32)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]),
                                  [[-1, 0, 7]])


def test_type_code_attributes_are_dtype_names_in_the_ir(tmp_path):
    """QuantizeLinear's `output_dtype` (like Cast's `to`) is a TensorProto code in ONNX and a
    dtype name in the IR; written back it is the code again, and the kernel reading the name
    computes what onnxruntime does."""
    import onnx
    import onnxruntime as ort

    from qconvert.executor.float_kernels import KERNELS
    from qconvert.formats.model_io import serialize

    scale = numpy_helper.from_array(np.array(0.05, np.float32), "scale")
    node = helper.make_node("QuantizeLinear", ["x", "scale"], ["y"], output_dtype=TensorProto.INT8)
    g = helper.make_graph([node], "q",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [2, 5])], [scale])
    source = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)],
                               ir_version=10).SerializeToString()
    path = tmp_path / "q.onnx"
    path.write_bytes(source)
    model = load_model(str(path))
    n = model.graph.nodes[0]
    assert n.op == "Quantize" and n.attrs["output_dtype"] == "int8"
    written = onnx.load_from_string(serialize(model, "onnx")).graph.node[0]
    assert [(a.name, a.i) for a in written.attribute] == [("output_dtype", TensorProto.INT8)]
    x = np.linspace(-9, 9, 10, dtype=np.float32).reshape(2, 5)
    got = KERNELS["Quantize"](n, [x, model.graph.constant("scale"), None], ["int8"])[0]
    want = ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)

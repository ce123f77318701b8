"""Read -> IR -> write of every shared and sample model keeps its outputs and is deterministic.

Outputs are compared in independent runtimes on random inputs: onnxruntime (optimizations off) for
ONNX, LiteRT's reference kernels for TFLite, and TFLite Micro for int8 TFLite (bit-identical).
Models with a custom op no runtime has are compared structurally with the `tflite` parser.
"""

from __future__ import annotations

import numpy as np
import pytest
import tflite

from helpers.oracles import all_model_paths, run_litert, run_onnx, run_tflm
from qconvert.formats.model_io import load_model, serialize

MODELS = all_model_paths()


def _has_custom_op(model) -> bool:
    return any(n.opaque and n.origin.get("custom_code") for n in model.opaque_nodes())


def _is_int8(model) -> bool:
    """Fully integer model (int8 activations), as TFLite Micro runs them."""
    return any(model.graph.tensors[n].dtype == "int8" for n in model.graph.inputs)


def _assert_same(before, after, exact: bool):
    assert len(before) == len(after)
    for a, b in zip(before, after):
        assert a.shape == b.shape and a.dtype == b.dtype
        if exact or a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=0)


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_roundtrip_keeps_outputs_and_is_deterministic(path):
    original = path.read_bytes()
    model = load_model(path)
    written = serialize(model)
    assert serialize(load_model_bytes(written, path)) == written, "second write differs"
    assert serialize(model) == written, "writing the same IR twice differs"
    if model.format == "onnx":
        _assert_same(run_onnx(original), run_onnx(written), exact=False)
    elif _has_custom_op(model):
        _assert_same_structure(original, written)
    else:
        _assert_same(run_litert(original), run_litert(written), exact=_is_int8(model))
        if _is_int8(model):
            _assert_same(run_tflm(original), run_tflm(written), exact=True)


def load_model_bytes(data: bytes, like_path):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / like_path.name
        p.write_bytes(data)
        return load_model(p)


def _ops(data: bytes) -> list:
    m = tflite.Model.GetRootAs(data, 0)
    g = m.Subgraphs(0)
    result = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        oc = m.OperatorCodes(op.OpcodeIndex())
        custom = bytes(op.CustomOptionsAsNumpy()) if not op.CustomOptionsIsNone() else None
        ins = [g.Tensors(j).Name() if j >= 0 else None for j in op.InputsAsNumpy()]
        outs = [g.Tensors(j).Name() for j in op.OutputsAsNumpy()]
        result.append((max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()), oc.CustomCode(),
                       oc.Version(), custom, op.BuiltinOptionsType(), ins, outs))
    return result


def _tensors(data: bytes) -> dict:
    m = tflite.Model.GetRootAs(data, 0)
    g = m.Subgraphs(0)
    result = {}
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        buf = m.Buffers(t.Buffer())
        payload = bytes(buf.DataAsNumpy()) if not buf.DataIsNone() else b""
        result[t.Name()] = (list(t.ShapeAsNumpy()), t.Type(), payload)
    return result


def _assert_same_structure(original: bytes, written: bytes):
    """Operators (codes, versions, custom options, wiring) and tensors (shape, type, data) agree."""
    assert _ops(original) == _ops(written)
    assert _tensors(original) == _tensors(written)


def test_custom_op_sample_is_covered_structurally():
    """The custom-op sample exists and carries its custom code and raw options unchanged."""
    from helpers.oracles import SAMPLE_MODELS

    path = SAMPLE_MODELS / "custom_op.tflite"
    model = load_model(path)
    assert _has_custom_op(model)
    (node,) = [n for n in model.graph.nodes if n.opaque]
    assert node.op == "QcvTestCustom"
    written = serialize(model)
    custom = [op for op in _ops(written) if op[1] is not None]
    assert custom[0][1] == b"QcvTestCustom"
    assert custom[0][3] == bytes(range(7)) + b"qconvert"


def test_signature_defs_and_metadata_survive():
    from helpers.oracles import TEST_MODELS

    original = (TEST_MODELS / "digits_cnn.tflite").read_bytes()
    written = serialize(load_model(TEST_MODELS / "digits_cnn.tflite"))
    a, b = tflite.Model.GetRootAs(original, 0), tflite.Model.GetRootAs(written, 0)
    assert b.SignatureDefsLength() == a.SignatureDefsLength() == 1

    def sig(m):
        sd = m.SignatureDefs(0)
        g = m.Subgraphs(sd.SubgraphIndex())
        return (sd.SignatureKey(),
                [(sd.Inputs(i).Name(), g.Tensors(sd.Inputs(i).TensorIndex()).Name())
                 for i in range(sd.InputsLength())],
                [(sd.Outputs(i).Name(), g.Tensors(sd.Outputs(i).TensorIndex()).Name())
                 for i in range(sd.OutputsLength())])

    assert sig(a) == sig(b)

    def metadata(m):
        return {m.Metadata(i).Name(): bytes(m.Buffers(m.Metadata(i).Buffer()).DataAsNumpy())
                for i in range(m.MetadataLength())}

    assert metadata(a) == metadata(b)


def test_per_channel_quantization_survives():
    from helpers.oracles import TEST_MODELS

    original = TEST_MODELS / "kws_ref_model.tflite"
    before = load_model(original)
    after = load_model_bytes(serialize(before), original)
    for name, t in before.graph.tensors.items():
        u = after.graph.tensors[name]
        assert (t.quant is None) == (u.quant is None)
        if t.quant is not None:
            np.testing.assert_array_equal(t.quant.scale, u.quant.scale)
            np.testing.assert_array_equal(t.quant.zero_point, u.quant.zero_point)
            assert t.quant.axis == u.quant.axis
    per_channel = [t for t in before.graph.tensors.values() if t.quant and t.quant.per_channel]
    assert len(per_channel) >= 9

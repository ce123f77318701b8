"""Per-op knowledge is one schema entry (`schemas/ops.py`) plus tables keyed by its op names that
must stay beside their code (kernels, rewrite rules, C emitters). These tests cross-check them,
so an op added in one place and forgotten in another fails here, naming the op and the table.

Each check is a function of the tables returning its problems (an empty list when consistent);
the tests run it on the real tables, and `test_every_check_fails_when_an_entry_goes_missing`
runs it again with one entry removed from a copy, so none of them can pass vacuously. The gaps
that are allowed are listed in the `*_EXCEPTIONS` dicts, each with its reason.
"""

from __future__ import annotations

import numpy as np
import pytest
import tflite

from qconvert import schemas
from qconvert.formats import tflite_reader
from qconvert.c_export.model import steps as model_steps
from qconvert.c_export.header.layer_spec import OP_SPECS
from qconvert.c_export.model.lowering import LOWERINGS, LOWERINGS16
from qconvert.executor.float_executor import IN_PLACE
from qconvert.executor.float_kernels import CONTEXT_KERNELS, KERNELS
from qconvert.executor.int16_kernels import INT16_KERNELS
from qconvert.executor.int_kernels import INT_KERNELS
from qconvert.int8.prepare import LAYER_PARAMS as INT_PARAMS
from qconvert.int8.prepare.int16 import LAYER_PARAMS16
from qconvert.ir import Node
from qconvert.passes.cleanup import eliminate, fold_constants
from qconvert.passes.fusion import equalize
from qconvert.passes.fusion.conv_add import CONV_ADD
from qconvert.passes.fusion.conv_batchnorm import CONV_BATCHNORM
from qconvert.passes.fusion.conv_mul import CONV_MUL
from qconvert.passes.fusion.linear_layer import LAYERS
from qconvert.passes.onnx_to_tflite import (ops as onnx_to_tflite_ops,
                                            ops_spatial as onnx_to_tflite_spatial)
from qconvert.passes.onnx_to_tflite.layout_rules import REDUCERS, RULES
from qconvert.passes.onnx_to_tflite.ops import (BOUND_PRESERVING, CHECKS,
                                                FOLDS_WHEN_STATIC, GLOBAL_POOLS,
                                                MAPPING_RULES)
from qconvert.passes.onnx_to_tflite.ops_spatial import SPATIAL_RULES
from qconvert.quant import int16 as quant_int16
from qconvert.quant import invariants
from qconvert.schemas.activations import ACTIVATION_RANGES

SCHEMAS = {s.name: s for s in schemas.all_schemas()}

# Tables that stay beside their code, keyed by schema op name.
KEYED_TABLES = {
    "float kernels (executor/float_kernels*)": KERNELS,
    "float kernels taking ctx": CONTEXT_KERNELS,
    "float in-place kernels (executor/float_executor.IN_PLACE)": IN_PLACE,
    "int kernels (executor/int_kernels*)": INT_KERNELS,
    "int layer params (int8/prepare: LAYER_PARAMS)": INT_PARAMS,
    "C header specs (c_export/header/layer_spec.OP_SPECS)": OP_SPECS,
    "C lowerings (c_export/model/lowering.LOWERINGS)": LOWERINGS,
    "layout rules (passes/onnx_to_tflite/layout_rules.RULES)": RULES,
    "ONNX -> TFLite lowering rules (onnx_to_tflite_*)": {**MAPPING_RULES, **SPATIAL_RULES},
    "ONNX -> TFLite checks (onnx_to_tflite_ops.CHECKS)": CHECKS,
    "ONNX ops folded once static (FOLDS_WHEN_STATIC)": FOLDS_WHEN_STATIC,
    "global pools lowered to pools (GLOBAL_POOLS)": {**GLOBAL_POOLS,
                                                      **{v: k for k, v in GLOBAL_POOLS.items()}},
    "reductions (layout_rules.REDUCERS)": {**REDUCERS, **{v: k for k, v in REDUCERS.items()}},
    "range-preserving ops (BOUND_PRESERVING)": BOUND_PRESERVING,
    "linear layers (passes/fusion/linear_layer.LAYERS)": LAYERS,
    "affine ops fused into layers (the patterns of fusion/conv_*)":
        {op for f in (CONV_BATCHNORM, CONV_MUL, CONV_ADD) for op in
         ((f.pattern.ops,) if isinstance(f.pattern.ops, str) else f.pattern.ops)},
    "output lower bounds (onnx_to_tflite_ops.LOWER_BOUNDS)": onnx_to_tflite_ops.LOWER_BOUNDS,
    "ops lifted to NHWC (onnx_to_tflite_spatial.LIFTED)": onnx_to_tflite_spatial.LIFTED,
    "ops transposes sink through (onnx_to_tflite_spatial.SINKS, BINARY_SINKS)":
        onnx_to_tflite_spatial.SINKS | onnx_to_tflite_spatial.BINARY_SINKS,
    "pass-through ops of eliminate (the patterns of its PASS_THROUGH rules)":
        {f.pattern.ops for f in eliminate.PASS_THROUGH},
    "ops fold-constants never folds": fold_constants.NEVER_FOLD,
    "equalize's layers and pass-through ops": equalize._FIRST | equalize._PASS_THROUGH,
    "layers the quantization invariants check (quant/invariants)": set(invariants._LAYERS),
    "C lookup-table, binary and data-movement ops (c_export/model/steps)":
        {*model_steps._LOOKUP_OPS, *model_steps.BINARY, *model_steps.MOVEMENT},
    "TFLite reductions the reader respells (tflite_reader._REDUCERS)": tflite_reader._REDUCERS,
    "16x8 kernels (executor/int16_kernels)": INT16_KERNELS,
    "16x8 layer params (int8/prepare/int16)": LAYER_PARAMS16,
    "16x8 C lowerings (c_export/model/lowering.LOWERINGS16)": LOWERINGS16,
    "ops the quantizer makes 16x8 (quant/int16)": quant_int16.INT16_KERNELS,
}

# -- allowed gaps, each with its reason ----------------------------------------------------------
# ops with an int kernel (TFLite Micro semantics) but no int8 rule in the schema
INT_KERNEL_WITHOUT_INT8_RULE = {
    "Quantize": "the float -> int8 boundary: it makes the scale, no rule picks one for it",
    "Dequantize": "the int8 -> float boundary: its output is float",
}
# layout-sensitive ONNX ops without a layout rule
LAYOUT_EXCEPTIONS = {
    "BatchNorm": "folded into the layer before by `fuse` (or by batchnorm-to-affine); one left "
                 "over is refused by CHECKS, which names it",
}
# ONNX-only ops (no TFLite builtin) that no rule lowers to TFLite ops
LOWERING_EXCEPTIONS = {
    "BatchNorm": LAYOUT_EXCEPTIONS["BatchNorm"],
}
# per-channel-weight ops that are not in linear_layer.LAYERS
LINEAR_EXCEPTIONS = {
    "Gemm": "its weight orientation depends on transB: linear_layer._GEMM holds both rules",
    "TransposeConv": "TFLite TRANSPOSE_CONV (output_shape, weights, x, bias): fusions do not "
                     "fold into it (ONNX ConvTranspose is the layer they fold into)",
}


# -- checks: tables -> problems -------------------------------------------------------------------
def unknown_keys(schemas_: dict, tables: dict) -> list:
    """Keys of per-op tables that are not schema ops."""
    return [f"{table}: {op!r} is not a schema op" for table, keys in tables.items()
            for op in sorted(keys) if op not in schemas_]


def float_kernel_gaps(schemas_: dict, kernels: dict) -> list:
    """Every schema op has a float kernel (the float executor and fold-constants run them)."""
    return [f"{op}: no float kernel" for op in schemas_ if kernels.get(op) is None]


def _missing(ops, table, what: str) -> list:
    """f"{op}: {what}" for each op of `ops` that `table` lacks."""
    return [f"{op}: {what}" for op in ops if op not in table]


def int_kernel_gaps(schemas_: dict, int_kernels: dict, int_params: dict) -> list:
    """An op with an int8 rule and a TFLite form has an int kernel and its layer params; an
    int kernel belongs to an op with an int8 rule (or a listed exception); params and
    kernels come in pairs."""
    problems = [f"{op}: int8 rule {s.int8!r} and a TFLite form but no int kernel"
                for op, s in schemas_.items()
                if s.int8 and s.tflite is not None and op not in int_kernels]
    problems += [f"{op}: int kernel but no int8 rule in its schema" for op in int_kernels
                 if op in schemas_ and not schemas_[op].int8
                 and op not in INT_KERNEL_WITHOUT_INT8_RULE]
    return (problems + _missing(int_kernels, int_params, "int kernel without layer params")
            + _missing(int_params, int_kernels, "layer params without an int kernel"))


def int8_version_gaps(schemas_: dict, int_kernels: dict) -> list:
    """Every op the integer executor runs is written to int8 TFLite with its int8 builtin
    version (`TfliteSpec.int8_version`), and only those ops declare one."""
    problems = [f"{op}: int kernel but no TfliteSpec.int8_version" for op in int_kernels
                if op in schemas_ and (schemas_[op].tflite is None
                                       or schemas_[op].tflite.int8_version is None)]
    problems += [f"{op}: int8_version but no int kernel" for op, s in schemas_.items()
                 if s.tflite is not None and s.tflite.int8_version is not None
                 and op not in int_kernels]
    return problems


def fixed_output_gaps(schemas_: dict) -> list:
    """int8 rule `fixed_output` if and only if the schema gives the (scale, zero point)."""
    return [f"{op}: int8 {s.int8!r} with fixed_output {s.fixed_output!r}"
            for op, s in schemas_.items()
            if (s.int8 == "fixed_output") != (s.fixed_output is not None)]


def header_gaps(int_kernels: dict, int_params: dict, op_specs: dict, lowerings: dict) -> list:
    """Every op with TFLite Micro parameters is exportable: a header spec (export-c-header) and
    a C lowering (export-c); a header spec needs the parameters it prints."""
    problems = [f"{op}: int kernel but no header spec (layer_spec.OP_SPECS)" for op in int_kernels
                if op not in op_specs]
    problems += [f"{op}: header spec but no layer params" for op in op_specs
                 if op not in int_params]
    problems += [f"{op}: header spec but no C lowering (lowering.LOWERINGS)" for op in op_specs
                 if op not in lowerings]
    problems += [f"{op}: C lowering but no header spec" for op in lowerings if op not in op_specs]
    return problems


def layout_gaps(schemas_: dict, rules: dict) -> list:
    """A layout-sensitive op that can come from ONNX (NCHW) has a rule for the NHWC pass."""
    return [f"{op}: layout-sensitive ONNX op without a layout rule" for op, s in schemas_.items()
            if s.layout_sensitive and s.onnx is not None and op not in rules
            and op not in LAYOUT_EXCEPTIONS]


def lowering_gaps(schemas_: dict, rules: dict, folds: frozenset) -> list:
    """An ONNX op without a TFLite builtin is lowered by a rule of the NHWC pass (which emits
    TFLite ops) or folded away once shapes are static."""
    return [f"{op}: ONNX-only op with no lowering rule" for op, s in schemas_.items()
            if s.onnx is not None and s.tflite is None and op not in rules and op not in folds
            and op not in LOWERING_EXCEPTIONS]


def linear_layer_gaps(schemas_: dict, layers: dict) -> list:
    """The linear layers fusions fold into are the ops with per-channel weights, and each
    rule counts output channels on the axis the schema's `weight_channel_axis` names."""
    problems = [f"{op}: per-channel weights but no linear_layer rule" for op, s in schemas_.items()
                if s.int8 == "per_channel_weights" and op not in layers
                and op not in LINEAR_EXCEPTIONS]
    for op, rule in layers.items():
        s = schemas_.get(op)
        if s is None or s.int8 != "per_channel_weights" or s.input_index("weights") is None:
            problems.append(f"{op}: linear_layer rule but no per-channel weights in its schema")
            continue
        for fmt, axis in s.weight_channel_axis.items():
            shape = [2, 3, 5, 7]
            w = np.zeros(shape, np.float32)
            node = Node(op, [], [], {})
            if rule.channels(w, node) != shape[axis]:
                problems.append(f"{op}: linear_layer counts {rule.channels(w, node)} channels, "
                                f"the schema's {fmt} channel axis {axis} has {shape[axis]}")
    return problems


def int16_gaps(int16_kernels: dict, int16_params: dict, lowerings16: dict, quantized: frozenset,
               int_kernels: dict) -> list:
    """A 16x8 op has an int8 kernel too, its 16x8 parameters and a 16x8 C lowering; the
    quantizer makes 16x8 only ops the 16x8 executor runs."""
    return (_missing(int16_kernels, int_kernels, "16x8 kernel but no int8 kernel")
            + _missing(int16_kernels, int16_params, "16x8 kernel but no 16x8 params")
            + _missing(int16_kernels, lowerings16, "16x8 kernel but no 16x8 C lowering")
            + _missing(lowerings16, int16_kernels, "16x8 C lowering but no 16x8 kernel")
            + _missing(quantized, int16_kernels, "quantized to 16x8 but no 16x8 kernel"))


def fused_activation_gaps(schemas_: dict, op_specs: dict) -> list:
    """An op activations fuse into has a TFLite options table with a fused activation (the
    `tflite` package's schema, not ours) and, when exportable, int clamps in its header."""
    problems = []
    for op, s in schemas_.items():
        if not s.fuses_activation:
            continue
        options = getattr(tflite, s.tflite.options, None) if s.tflite and s.tflite.options else None
        if options is None or not hasattr(options, "FusedActivationFunction"):
            problems.append(f"{op}: fuses_activation but its TFLite options have no fused "
                            "activation")
        fields = {f[0] for f in op_specs[op].fields} if op in op_specs else None
        if fields is not None and not {"activation_min", "activation_max"} <= fields:
            problems.append(f"{op}: fuses_activation but its header has no activation clamps")
    return problems


def clamp_gaps(schemas_: dict) -> list:
    """A clamp op names a TFLite fused activation whose range it is, or `inputs` (Clip); the
    ops a fused activation replaces are exactly the clamps."""
    return [f"{op}: clamp {s.clamp!r} is neither a fused activation nor 'inputs'"
            for op, s in schemas_.items()
            if s.clamp is not None and s.clamp != "inputs" and s.clamp not in ACTIVATION_RANGES]


def stays_float_gaps(schemas_: dict) -> list:
    """Inputs kept float when quantizing are parameters, never data or weights."""
    return [f"{op}: input {slot.name!r} stays float but has role {slot.role!r}"
            for op, s in schemas_.items() for slot in s.inputs
            if slot.stays_float and slot.role != "param"]


# -- the tests ------------------------------------------------------------------------------------
# every check on the real tables: each must find nothing (what each asks: its function above)
CHECKS_ON_THE_TABLES = {
    "every table is keyed by schema ops": lambda: unknown_keys(SCHEMAS, KEYED_TABLES),
    "every schema op has a float kernel": lambda: float_kernel_gaps(SCHEMAS, KERNELS),
    "int8 ops have int kernels and params": lambda: int_kernel_gaps(SCHEMAS, INT_KERNELS,
                                                                    INT_PARAMS),
    "int kernel ops have an int8 TFLite version": lambda: int8_version_gaps(SCHEMAS, INT_KERNELS),
    "fixed output ops give their scale": lambda: fixed_output_gaps(SCHEMAS),
    "int8 ops are exportable to C": lambda: header_gaps(INT_KERNELS, INT_PARAMS, OP_SPECS,
                                                        LOWERINGS),
    "layout-sensitive ONNX ops have a layout rule": lambda: layout_gaps(SCHEMAS, RULES),
    "ONNX-only ops have a lowering rule": lambda: lowering_gaps(SCHEMAS, RULES,
                                                                FOLDS_WHEN_STATIC),
    "linear layers match the schemas' weight channel axis": lambda: linear_layer_gaps(SCHEMAS,
                                                                                      LAYERS),
    "16x8 ops have kernels, params and C lowerings": lambda: int16_gaps(
        INT16_KERNELS, LAYER_PARAMS16, LOWERINGS16, quant_int16.INT16_KERNELS, INT_KERNELS),
    "fusable layers carry a fused activation": lambda: fused_activation_gaps(SCHEMAS, OP_SPECS),
    "clamps name a fused activation range": lambda: clamp_gaps(SCHEMAS),
    "float parameters are parameters": lambda: stays_float_gaps(SCHEMAS),
}


@pytest.mark.parametrize("check", CHECKS_ON_THE_TABLES)
def test_the_tables_agree(check):
    assert CHECKS_ON_THE_TABLES[check]() == []


def test_exceptions_name_real_gaps():
    """An exception that no longer excuses anything must go (the table was completed)."""
    assert set(INT_KERNEL_WITHOUT_INT8_RULE) <= set(INT_KERNELS)
    assert all(not SCHEMAS[op].int8 for op in INT_KERNEL_WITHOUT_INT8_RULE)
    assert all(op not in RULES and SCHEMAS[op].layout_sensitive for op in LAYOUT_EXCEPTIONS)
    assert all(op not in RULES and op not in FOLDS_WHEN_STATIC for op in LOWERING_EXCEPTIONS)
    assert all(op not in LAYERS and SCHEMAS[op].int8 == "per_channel_weights"
               for op in LINEAR_EXCEPTIONS)
    assert "BatchNorm" in CHECKS  # what refuses a BatchNorm no fusion removed


def _without(table, op):
    """A copy of `table` (dict or set) without `op`."""
    if isinstance(table, dict):
        return {k: v for k, v in table.items() if k != op}
    return frozenset(k for k in table if k != op)


def _replace(schema, **changes):
    import dataclasses

    return {**SCHEMAS, schema.name: dataclasses.replace(schema, **changes)}


@pytest.mark.parametrize("case", [
    "unknown key", "float kernel", "int kernel", "int params", "int8 version", "fixed output",
    "header spec", "C lowering", "16x8", "layout rule", "lowering rule", "linear layer",
    "linear axis", "fused activation", "clamp", "stays float"])
def test_every_check_fails_when_an_entry_goes_missing(case):
    import dataclasses

    conv, softmax = SCHEMAS["Conv2D"], SCHEMAS["Softmax"]
    problems = {
        "unknown key": lambda: unknown_keys(_without(SCHEMAS, "Conv2D"), KEYED_TABLES),
        "float kernel": lambda: float_kernel_gaps(SCHEMAS, _without(KERNELS, "Gelu")),
        "int kernel": lambda: int_kernel_gaps(SCHEMAS, _without(INT_KERNELS, "Conv2D"),
                                              _without(INT_PARAMS, "Conv2D")),
        "int params": lambda: int_kernel_gaps(SCHEMAS, INT_KERNELS, _without(INT_PARAMS, "Add")),
        "int8 version": lambda: int8_version_gaps(_replace(conv, tflite=dataclasses.replace(
            conv.tflite, int8_version=None)), INT_KERNELS),
        "fixed output": lambda: fixed_output_gaps(_replace(softmax, fixed_output=None)),
        "header spec": lambda: header_gaps(INT_KERNELS, INT_PARAMS, _without(OP_SPECS, "Mean"),
                                           LOWERINGS),
        "C lowering": lambda: header_gaps(INT_KERNELS, INT_PARAMS, OP_SPECS,
                                          _without(LOWERINGS, "Mean")),
        "16x8": lambda: int16_gaps(INT16_KERNELS, LAYER_PARAMS16, LOWERINGS16,
                                   quant_int16.INT16_KERNELS, _without(INT_KERNELS, "Conv2D")),
        "layout rule": lambda: layout_gaps(SCHEMAS, _without(RULES, "MaxPool")),
        "lowering rule": lambda: lowering_gaps(SCHEMAS, _without(RULES, "Gemm"),
                                               FOLDS_WHEN_STATIC),
        "linear layer": lambda: linear_layer_gaps(SCHEMAS, _without(LAYERS, "Conv2D")),
        "linear axis": lambda: linear_layer_gaps(
            _replace(conv, weight_channel_axis={"onnx": 1}), LAYERS),
        "fused activation": lambda: fused_activation_gaps(
            _replace(SCHEMAS["Relu"], fuses_activation=True), OP_SPECS),
        "clamp": lambda: clamp_gaps(_replace(SCHEMAS["Relu6"], clamp="RELU7")),
        "stays float": lambda: stays_float_gaps(_replace(conv, inputs=(
            dataclasses.replace(conv.inputs[0], stays_float=True),) + conv.inputs[1:])),
    }[case]()
    assert problems, case

"""The quantization plan of a float graph: every activation's (scale, zero point) and every
layer's int8 weights and int32 bias. Format-neutral; `tflite_int8` and `qdq` write it out.

Activation parameters follow the op schemas' int8 rules:
- `same_scale` ops (reshape, max and average pool, concat, pad, transpose, select...) pass values
  through, so their inputs and output share one (scale, zero point): the tensors are grouped
  (union-find) and each group gets the union of its members' calibrated ranges (a bool input,
  SelectV2's condition, is no activation and keeps none);
- `fixed_output` ops: softmax and logistic outputs are 1/256 with zero point -128, tanh 1/128
  with 0 (what TFLite's int8 kernels require);
- clamping activations (Relu, Relu6, Clip) whose input is read by nothing else and made by a
  layer with its own range (not a pass-through op): the input takes the activation's output
  range, as a fused activation does in TFLite and as onnxruntime's QDQ quantizer does. The
  values it drops are the ones the activation clamps anyway (the activation still runs), and
  the conv output no longer spends int8 steps on the negative values a ReLU zeroes;
- every other float activation gets its own range.
Layers (`per_channel_weights`): weights per output channel (conv, depthwise; fully connected
layers per tensor unless `fc_per_channel`), or every layer per tensor (`per_tensor`), bias at
s_in * s_w (see `params`).
LSTMs (`lstm`): TFLite Micro's integer LSTM scheme, `lstm_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qconvert import schemas
from qconvert.errors import QConvertError
from qconvert.ir import Graph
from qconvert.ir.graph import list_ops
from qconvert.schemas.activations import clamp_ops

from qconvert.executor.streaming import is_resource_op, variable_key
from qconvert.int8.multipliers import conv_multipliers

from .lstm_plan import LSTM_RULE, plan_lstms
from .params import activation_params, int16_activation_params, quantize_layer

BORDER = "int16_border"  # node.origin flag of a QUANTIZE between int8 and int16 activations
FIXED_OUTPUT_INT16 = 1.0 / 32768.0  # int16 softmax / logistic / tanh outputs, zero point 0
# constant inputs (slots) a 16x8 layer takes as int8, not int16: TFLite Micro's 16x8 PRELU
# requires an int8 alpha
INT8_CONSTANTS_16X8 = {"PRelu": (1,)}

# per-op facts of the op schemas, by op
FIXED_OUTPUT = {s.name: s.fixed_output for s in schemas.all_schemas() if s.fixed_output}
# same_scale ops whose activation operands must all be in the output's parameters (TFLite's
# int8 MAXIMUM / MINIMUM compare the raw int8 values): one activation operand joins the output;
# with two, the output takes its own range and the writer requantizes both into it
SHARED_OPERANDS = frozenset({"Maximum", "Minimum"})
# same_scale ops copying every input's bytes into the output (TFLite CONCATENATION, PACK)
CONCATS = frozenset({"Concat", "Pack"})
# same_scale ops copying one of their value operands per element (TFLite SELECT_V2: x or y as
# the bool condition says): every activation operand joins the output
SELECTS = frozenset({"SelectV2"})
FC_OPS = frozenset(s.name for s in schemas.all_schemas() if s.fully_connected)
CLAMPS = clamp_ops()
# float constant inputs that are parameters, not values, and stay float (ONNX Resize roi, scales)
FLOAT_PARAMS = {s.name: tuple(i for i, slot in enumerate(s.inputs) if slot.stays_float)
                for s in schemas.all_schemas() if any(slot.stays_float for slot in s.inputs)}


@dataclass
class LayerPlan:
    """One layer's quantized weights and the parameters TFLM derives from them."""

    node: str
    op: str
    weights: np.ndarray          # int8
    weight_scales: np.ndarray    # float32, one per channel (or one)
    channel_axis: int
    per_channel: bool
    bias: np.ndarray | None      # int32
    multiplier: np.ndarray = field(default=None)
    shift: np.ndarray = field(default=None)
    widened: list = field(default_factory=list)  # channels whose weight scale was widened
    input_scale: float | None = None  # s_in the bias was quantized against


@dataclass
class QuantPlan:
    """What the writers apply: activation parameters, per-layer weights and biases, other constants."""

    activations: dict            # tensor name -> (float32 scale, int zero point)
    layers: dict                 # layer's first output name -> LayerPlan
    constants: dict              # other float constant name -> (scale, zero point)
    int16: frozenset = frozenset()  # activations and constants planned int16 (16x8 layers)
    lstms: dict = field(default_factory=dict)  # LSTM output name -> lstm_plan.LstmPlan


def dequantize_hybrid_weights(graph: Graph) -> int:
    """Turn int8 weights of a float ("dynamic range" / hybrid) model back into float32.

    The TFLite converter's weight-only quantization stores conv / FC weights as int8 with
    scales while activations stay float; quantizing such a model starts from
    `(q - zero_point) * scale` along the weights' quantized axis. Returns how many changed.
    """
    float_out = {}
    for node in graph.nodes:
        out = graph.tensors.get(node.outputs[0]) if node.outputs and node.outputs[0] else None
        if out is not None and out.dtype.startswith("float"):
            for name in node.present_inputs():
                float_out[name] = True
    count = 0
    for name, t in graph.tensors.items():
        q = t.quant
        if t.data is None or q is None or t.dtype not in ("int8", "uint8") or name not in float_out:
            continue
        shape = [1] * t.data.ndim
        if q.per_channel:
            shape[q.axis] = -1
        scale = q.scale.astype(np.float64).reshape(shape if q.per_channel else ())
        zp = q.zero_point.astype(np.float64).reshape(shape if q.per_channel else ())
        data = ((t.data.astype(np.float64) - zp) * scale).astype(np.float32)
        data.flags.writeable = False
        t.data, t.dtype, t.quant = data, "float32", None
        count += 1
    return count


def check_float(graph: Graph) -> None:
    """Refuse a model whose activations are already integers."""
    if any(t.data is None and (t.quant is not None or t.dtype in ("int8", "uint8"))
           for t in graph.tensors.values()):
        raise QConvertError("model is already quantized (its activations are integers)")


def check_quantizable(graph: Graph) -> None:
    """Refuse an already-quantized graph, ops without an int8 rule (all named at once), a Div by
    a constant, and a constant graph output.
    TFLite resource-variable ops are quantizable: a variable takes the int8 parameters of the
    values read from it and assigned to it (`plan_activations`)."""
    check_float(graph)
    counts: dict = {}
    for node in graph.nodes:
        if is_resource_op(node) or node.origin.get(BORDER):
            continue
        schema = None if node.opaque else schemas.get(node.op)
        if schema is None or schema.int8 is None:
            label = _user_label(node, schema)
            counts[label] = counts.get(label, 0) + 1
    if counts:
        raise QConvertError(f"cannot quantize: ops with no int8 rule: {list_ops(counts)}")
    divisors = [n.name or n.outputs[0] for n in graph.nodes
                if n.op == "Div" and not n.opaque and graph.constant(n.inputs[1]) is not None
                and graph.tensors[n.inputs[1]].dtype.startswith("float")]
    if divisors:  # an int8 divisor near its zero point would divide by (almost) zero
        raise QConvertError("cannot quantize: Div by a constant (int8 would round small "
                            f"divisors to 0; multiply by the reciprocal): {', '.join(divisors)}")
    constant = [repr(o) for o in graph.outputs if graph.constant(o) is not None]
    if constant:  # no batch axis, nothing calibration measures; int8 runs cannot produce it
        raise QConvertError(f"cannot quantize: graph output {', '.join(constant)} is a constant "
                            "(an initializer, not computed from the inputs); remove it from the "
                            "model's outputs")


def variable_group(var_handle) -> str:
    """The union-find key of the resource variable a VAR_HANDLE names."""
    return "\0variable:" + variable_key(var_handle)


def _user_label(node, schema) -> str:
    """The op as the user's file names it: an ONNX-only op by its op_type (LayerNormalization,
    not the IR's LayerNorm)."""
    if schema is not None and schema.tflite is None and schema.onnx is not None:
        return schema.onnx.op_type
    return node.label


def weight_channel_axis(node, fmt: str) -> int:
    """The output-channel axis of a layer's weights."""
    if node.op == "Gemm":
        return 0 if node.attrs.get("transB", 0) else 1
    return schemas.get(node.op).weight_channel_axis[fmt]


class _Groups:
    """Union-find over tensor names."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, a):
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def is_activation(graph: Graph, name: str) -> bool:
    """A float tensor computed at run time; a TFLite variable (an LSTM's state) is not: its
    op's plan gives it its parameters (`lstm_plan`)."""
    t = graph.tensors[name]
    return t.data is None and t.dtype.startswith("float") and not t.extra.get("is_variable")


def _clamped_input(graph: Graph, node) -> str | None:
    """The input of clamping activation `node` if it may take the activation's output range:
    an activation `node` is the sole reader of (`Graph.sole_reader`: no other reader, not a
    graph output), not a graph input, made by an op with its own range (so it shares its
    parameters with no other tensor)."""
    x = node.inputs[0] if node.inputs else None
    producer = graph.producer(x)
    if producer is None or not is_activation(graph, x) or graph.sole_reader(x) is not node:
        return None
    return x if schemas.get(producer.op).int8 in ("per_channel_weights", "requantize") else None


def clamped_inputs(graph: Graph) -> set:
    """The activations that take the range of the clamping activation reading them (module
    docstring): their own range is never needed, and no QDQ pair of their own is written."""
    found = set()
    for node in graph.nodes:
        if node.op in CLAMPS and not node.opaque and node.outputs \
                and is_activation(graph, node.outputs[0]):
            x = _clamped_input(graph, node)
            if x is not None:
                found.add(x)
    return found


def activation_groups(graph: Graph, apart=frozenset()) -> tuple:
    """The activations that must share one (scale, zero point): ({root: [member names]},
    {tensor: fixed (scale, zero point) of its op}, clamped inputs). Pass-through (`same_scale`)
    ops join their data inputs and outputs, a clamp joins the input it takes over, a resource
    variable joins its reads and assignments (`plan_activations`). Concat inputs in `apart`
    (`concat_inputs_apart`) keep their own parameters: the writer requantizes them."""
    groups = _Groups()
    fixed: dict = {}
    clamped = clamped_inputs(graph)  # inputs whose own range is not needed
    names = [n for n in graph.inputs if is_activation(graph, n)]
    handles: dict = {}
    shared_operands: list = []  # (activation operands, output) of SHARED_OPERANDS nodes
    for node in graph.nodes:
        outs = [o for o in node.outputs if o is not None and is_activation(graph, o)]
        names += outs
        if is_resource_op(node):
            if node.op == "VAR_HANDLE":
                handles[node.outputs[0]] = variable_group(node)
            elif node.op == "READ_VARIABLE" and outs:
                groups.union(outs[0], handles[node.inputs[0]])
            elif node.op == "ASSIGN_VARIABLE" and is_activation(graph, node.inputs[1]):
                groups.union(node.inputs[1], handles[node.inputs[0]])
            continue
        rule = _int8_rule(node)
        if rule == "same_scale" and outs:
            ins = [i for i in node.present_inputs() if is_activation(graph, i)]
            if node.op in CONCATS:
                data = [i for i in ins if i not in apart]
            elif node.op in SELECTS:
                data = ins
            elif node.op in SHARED_OPERANDS and len(ins) > 1:
                shared_operands.append((ins, outs[0]))  # after the other unions (below)
                data = []
            else:
                data = ins[:1]
            for i in data:
                groups.union(i, outs[0])
            for o in outs[1:]:  # Split: every part keeps the input's parameters
                groups.union(o, outs[0])
        elif rule == "fixed_output" and outs:
            fixed[outs[0]] = FIXED_OUTPUT[node.op]
        elif node.op in CLAMPS and outs and node.inputs[0] in clamped:
            groups.union(node.inputs[0], outs[0])
    # MAXIMUM / MINIMUM of activations already sharing parameters (two parts of one split)
    # join their output; otherwise the output keeps its own range and the writer
    # requantizes the operands into it
    for ins, out in shared_operands:
        if len({groups.find(i) for i in ins}) == 1:
            groups.union(ins[0], out)
    members: dict = {}
    for name in names:
        members.setdefault(groups.find(name), []).append(name)
    return members, fixed, clamped


def _fixed_source(graph: Graph, name: str):
    """The fixed (scale, zero point) of the softmax / logistic / tanh whose output `name` is,
    through single-input pass-through ops (reshape, resize...); None for any other tensor."""
    node = graph.producer(name)
    while node is not None and not node.opaque and schemas.get(node.op).int8 == "same_scale" \
            and node.op not in CONCATS | SHARED_OPERANDS | SELECTS and node.inputs:
        node = graph.producer(node.inputs[0])
    if node is None or node.opaque or node.origin.get(BORDER):
        return None
    return FIXED_OUTPUT.get(node.op)


def concat_inputs_apart(graph: Graph, ranges: dict) -> frozenset:
    """Concat inputs with a fixed output range (a Sigmoid's [0, 1), `_fixed_source`) whose
    concat's calibrated output range reaches more than one int8 step beyond that fixed range.
    Joined, the concat would take the fixed range and clip every other input (a detector's box
    branch next to its scores); apart, the concat's output covers all its inputs and the fixed
    input is requantized into its scale. A concat whose inputs all fit the fixed range is
    left joined (one scale, no requantization)."""
    apart = set()
    for node in graph.nodes:
        if node.op not in CONCATS or node.opaque or not node.outputs \
                or node.outputs[0] not in ranges:
            continue
        lo, hi = (float(v) for v in ranges[node.outputs[0]][:2])
        for name in node.present_inputs():
            fixed = _fixed_source(graph, name) if is_activation(graph, name) else None
            if fixed is None:
                continue
            scale, zp = float(fixed[0]), int(fixed[1])
            f_lo, f_hi = (-128 - zp) * scale, (127 - zp) * scale
            if lo < f_lo - scale or hi > f_hi + scale:
                apart.add(name)
    return frozenset(apart)


def _int8_rule(node) -> str | None:
    """The node's int8 rule; a 16x8 border QUANTIZE (`int16.BORDER`) has its own range."""
    if node.origin.get(BORDER):
        return "requantize"
    return schemas.get(node.op).int8


def plan_activations(graph: Graph, ranges: dict, int16=frozenset()) -> dict:
    """{tensor: (scale, zero point)} for every float activation (module docstring rules);
    tensors in `int16` get symmetric int16 parameters (zero point 0, the fixed outputs
    1/32768), as TFLite's 16x8 kernels require.

    A resource variable is one group: every READ_VARIABLE output and every value an
    ASSIGN_VARIABLE writes to it share one (scale, zero point), from the union of their ranges,
    so the int8 state means the same number on both sides of a call (TFLite Micro stores the
    bytes assigned and hands them back to the next read)."""
    members, fixed, clamped = activation_groups(graph, concat_inputs_apart(graph, ranges))
    params = {}
    for root, group in members.items():
        wide = group[0] in int16
        pinned = [fixed[n] for n in group if n in fixed]
        if pinned:
            scale, zp = (FIXED_OUTPUT_INT16, 0) if wide else pinned[0]
            scale = np.float32(scale)
        else:
            seen = [ranges[n] for n in group if n in ranges and n not in clamped]
            if not seen:
                raise QConvertError(f"tensor {group[0]!r} was never computed during calibration")
            lo, hi = min(r[0] for r in seen), max(r[1] for r in seen)
            scale, zp = int16_activation_params(lo, hi) if wide else activation_params(lo, hi)
        for n in group:
            params[n] = (np.float32(scale), int(zp))
    return params


def plan(graph: Graph, ranges: dict, fmt: str, fc_per_channel: bool = False,
         input_means: dict | None = None, int16=frozenset(),
         per_tensor: bool = False) -> QuantPlan:
    """The whole plan: activations, then each layer's weights and bias against its input scale.

    `input_means` ({layer output: mean of its input per channel}, `bias_correction`) turns on
    bias correction for the layers it names. `int16`: the activations planned int16 (16x8
    layers, `int16.py`); a layer writing one gets an int64 bias."""
    check_quantizable(graph)
    acts = plan_activations(graph, ranges, int16)
    planned = _plan_layers(graph, acts, fmt, fc_per_channel, input_means or {}, int16,
                           per_tensor)
    layers = {}
    wanted: dict = {}  # constant -> [(reader, (scale, zero point), int16)] in node order
    for node in graph.nodes:
        if is_resource_op(node) or node.origin.get(BORDER):
            continue
        schema = schemas.get(node.op)
        if schema.int8 == LSTM_RULE:  # its constants: `lstm_plan`
            continue
        x_slot, w_slot, b_slot = layer_slots(node)
        if id(node) in planned:
            layer = planned[id(node)]
            if isinstance(layer, Exception):
                raise layer
            layers[node.outputs[0]] = layer
            skip = {node.inputs[i] for i in (w_slot, b_slot) if i < len(node.inputs)}
        else:
            skip = set()
        skip |= {node.inputs[i] for i in FLOAT_PARAMS.get(node.op, ()) if i < len(node.inputs)}
        narrow = {node.inputs[i] for i in INT8_CONSTANTS_16X8.get(node.op, ())
                  if i < len(node.inputs)}
        for name in node.present_inputs():
            t = graph.tensors[name]
            if name in skip or t.data is None or not t.dtype.startswith("float"):
                continue
            data = t.data.astype(np.float64)
            out = node.outputs[0]
            wide = out in int16 and name not in narrow
            own = int16_activation_params if wide else activation_params
            params = (acts[out] if schema.int8 == "same_scale" and out in acts
                      else own(data.min(initial=0), data.max(initial=0)))
            wanted.setdefault(name, []).append((node, params, wide))
    consts, wide_consts = split_shared_constants(graph, wanted)
    return QuantPlan(acts, layers, consts, frozenset(int16) | frozenset(wide_consts),
                     plan_lstms(graph, acts, ranges, int16))


def split_shared_constants(graph: Graph, wanted: dict) -> tuple:
    """({constant: (scale, zero point)}, {int16 constants}) with one quantized copy per
    distinct need: `wanted` lists each float constant's readers with the parameters each needs.
    Readers needing the same parameters share the constant; every other need gets its own
    float copy (a fresh name, the same data) that its readers are rewired to read.

    A constant read by several same-scale ops (MAXIMUM, MINIMUM, CONCATENATION, PADV2...)
    must be stored in each reader's output scale: those kernels compare or copy the int8
    values as raw integers, so one copy in the last reader's scale would make every other
    reader clamp at (or copy) the wrong value."""
    consts: dict = {}
    wide_consts: set = set()
    for name, needs in wanted.items():
        copies: dict = {}  # (scale, zero point, int16) -> constant name
        for node, (scale, zp), wide in needs:
            key = (float(scale), int(zp), wide)
            if key not in copies:
                copies[key] = name if not copies else graph.add_constant(
                    f"{name}_requantized", graph.tensors[name].data,
                    graph.tensors[name].dtype)
            target = copies[key]
            if target != name:
                graph.set_inputs(node, [target if i == name else i for i in node.inputs])
            consts[target] = (scale, zp)
            if wide:
                wide_consts.add(target)
    return consts, wide_consts


def _plan_layers(graph: Graph, acts: dict, fmt: str, fc_per_channel: bool, input_means: dict,
                 int16, per_tensor: bool = False) -> dict:
    """{id(node): its LayerPlan, or the error planning it raised} for every layer with constant
    weights; the layers are independent of each other, so they are shared among the CPUs
    (`executor.parallel`); the caller raises the first error in node order."""
    from qconvert.executor.parallel import on_workers, one_blas_thread

    nodes = [node for node in graph.nodes
             if not is_resource_op(node) and not node.origin.get(BORDER)
             and schemas.get(node.op).int8 == "per_channel_weights"
             and graph.constant(node.inputs[layer_slots(node)[1]]) is not None]
    planned: dict = {}

    def run(items):
        for node in items:
            try:
                planned[id(node)] = _plan_layer(graph, node, acts, fmt, fc_per_channel,
                                                input_means.get(node.outputs[0]),
                                                node.outputs[0] in int16, per_tensor)
            except Exception as exc:  # noqa: BLE001  (raised by the caller, in node order)
                planned[id(node)] = exc

    # the largest layers first, so the last ones taken are small and the CPUs finish together;
    # BLAS on one thread (its own threads would wait for the CPUs the layers already use)
    with one_blas_thread():
        on_workers(run, sorted(nodes, key=lambda n: -graph.constant(
            n.inputs[layer_slots(n)[1]]).size))
    return planned


def layer_slots(node) -> tuple:
    """(data, weights, bias) input slots of a layer: (0, 1, 2), except TFLite TRANSPOSE_CONV
    (output_shape, weights, x, bias): (2, 1, 3). From the op schema's input roles."""
    schema = schemas.get(node.op)
    if schema is None:
        return 0, 1, 2
    slots = (schema.input_index("data"), schema.input_index("weights"),
             schema.input_index("bias"))
    return (0, 1, 2) if None in slots else slots


def _plan_layer(graph, node, acts, fmt, fc_per_channel, input_mean=None,
                wide: bool = False, per_tensor: bool = False) -> LayerPlan:
    x_slot, w_slot, b_slot = layer_slots(node)
    x = node.inputs[x_slot]
    if x not in acts:
        raise QConvertError(f"{node.op} {node.name!r} reads a constant input; cannot quantize")
    s_in = acts[x][0]
    s_out = acts[node.outputs[0]][0]
    w = graph.constant(node.inputs[w_slot])
    b = graph.constant(node.inputs[b_slot]) if len(node.inputs) > b_slot else None
    axis = weight_channel_axis(node, fmt)
    if node.op == "Gemm":
        w = w * float(node.attrs.get("alpha", 1.0))
        if b is not None:
            b = np.broadcast_to(b.reshape(-1) * float(node.attrs.get("beta", 1.0)),
                                (w.shape[axis],))
    if node.op == "ConvTranspose" and int(node.attrs.get("group", 1) or 1) > 1:
        raise QConvertError(f"ConvTranspose {node.name!r}: group {node.attrs['group']} (its "
                            "weights' channel axis is not the output channel; no int8 form)")
    per_channel = not per_tensor and (fc_per_channel or node.op not in FC_OPS)
    try:
        # 16x8: a weight scale small enough to make s_in s_w / s_out < 2^-32 gives a zero
        # multiplier (the 48-bit bias guard can ask for one: s_in is ~256x smaller)
        floor = 2.0**-31 * float(s_out) / float(s_in) * (1 + 1e-6) if wide else 0.0
        w_q, s_w, b_q, widened = (quantize_layer(w, b, s_in, axis, per_channel, 64, floor)
                                  if wide else quantize_layer(w, b, s_in, axis, per_channel))
        if input_mean is not None:
            from .bias_correction import corrected_layer, weight_error_bias

            shift_c = weight_error_bias(node, fmt, w, w_q, s_w, axis if per_channel else None,
                                        input_mean)
            if shift_c is not None and np.any(shift_c):
                base = np.zeros(w.shape[axis]) if b is None else np.asarray(b, np.float64)
                if wide:  # int64 bias: the weight scales chosen again for it (48-bit guard)
                    w_q, s_w, b_q, widened = quantize_layer(
                        w, base.reshape(-1) + shift_c, s_in, axis, per_channel, 64, floor)
                else:
                    w_q, s_w, b_q, widened = corrected_layer(
                        w, base.reshape(-1) + shift_c, w_q, s_w, widened, s_in, axis,
                        per_channel)
    except ValueError as exc:
        raise QConvertError(f"{node.op} {node.name!r}: {exc}") from exc
    # TFLite Micro takes double(s_in) * double(s_w) for per-tensor FC too (measured against
    # its interpreter with probe layers), so every layer uses the double product.
    _, multiplier, shift = conv_multipliers(s_in, s_w, s_out)
    return LayerPlan(node.name, node.op, w_q, s_w, axis, per_channel, b_q,
                     np.atleast_1d(multiplier), np.atleast_1d(shift),
                     [int(c) for c in np.flatnonzero(widened)], np.float32(s_in))

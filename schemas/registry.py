"""The op-schema types (`OpSchema`, `Input`, `TfliteSpec`, `OnnxSpec`) and the registry
they are entered in (`register`) and looked up from (`get`, `by_tflite_code`, `by_onnx_op`).

Kept apart from the package's `__init__` so that `ops` (the entries) imports the types
without importing the package that imports it: the registry is filled at one place, the
package (`from . import ops`), and read through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Input:
    """One input slot: its role (`data`, `weights`, `bias`, `param`, `state`: a TFLite variable
    the op reads and updates, an LSTM's), whether it may be omitted,
    whether it repeats (Concat's inputs), and whether a float constant in it stays float when
    the model is quantized (`stays_float`: a parameter such as Resize's roi and scales, not a
    value). `from_quantization` (``"input"`` / ``"output"``): a node that has none of its
    parameters so marked as inputs (TFLite QUANTIZE / DEQUANTIZE) holds them in the
    quantization parameters of its first input / output tensor, the slot's name being the
    field (`scale`, `zero_point`); the float executor hands them to the kernel as these
    inputs (`float_kernels_quant.implied_inputs`), so the kernel sees one form."""

    name: str
    role: str = "data"
    optional: bool = False
    variadic: bool = False
    stays_float: bool = False
    from_quantization: str | None = None


@dataclass(frozen=True)
class TfliteSpec:
    """How the op appears in a TFLite flatbuffer: its BuiltinOperator and BuiltinOptions names.

    Option fields are translated generically (see `qconvert.formats.tflite_options`): the fused activation
    becomes `activation`, stride/dilation/filter pairs become `strides`/`dilations`/
    `kernel_shape`, `Padding` becomes explicit `pads`, anything else keeps its snake_case name.
    `int8_version`: the builtin's version qconvert writes for the op's int8 form (the version
    TFLite's converter gives it; None: the op has no int8 kernel).
    """

    code: str
    options: str | None = None
    version: int = 1
    option_inputs: dict = field(default_factory=dict)
    """IR input slot name -> the option field (IR attribute name) TFLite spells it as. The
    reader makes the option a constant input (the IR spelling), the writer turns that input
    back into the option. A slot in `input_too` may also be a real input tensor in TFLite (it
    is then kept, and the option follows the node's `origin`)."""
    input_too: frozenset = frozenset()
    int8_version: int | None = None


@dataclass(frozen=True)
class OnnxSpec:
    """How the op appears in ONNX: op_type, domain and the attributes it carries (IR names
    equal ONNX names) with their defaults. `spatial` ops get `auto_pad` resolved to `pads`."""

    op_type: str
    attrs: dict = field(default_factory=dict)
    domain: str = ""
    spatial: bool = False
    attr_inputs: dict = field(default_factory=dict)
    """IR input slot name -> the first opset whose op takes it as an input, None when ONNX
    always spells it as the attribute of that name (Transpose `perm`). The reader makes such
    an attribute a constant input (the IR spelling); the writer turns the input back into the
    attribute for the opsets that need it. The attribute keeps its place in `attrs`."""


@dataclass(frozen=True)
class OpSchema:
    """One IR op.

    - `inputs`: ordered input slots (the same order in every format that has the op).
    - `layout_sensitive`: carries a `layout` attribute (`NCHW` or `NHWC`).
    - `weight_layout`: format -> layout of the weights input (e.g. ``"OHWI"``), and
      `weight_channel_axis`: format -> the per-channel (output-channel) axis of that layout.
    - `int8`: how the op is quantized: ``per_channel_weights``, ``same_scale``,
      ``fixed_output``, ``requantize`` or None (no int8 rule; must be fused away first).
    - `fixed_output`: for ``fixed_output`` ops, the (scale, zero point) of the int8 output that
      TFLite Micro requires.
    - `fully_connected`: a fully connected layer: its int8 weights are per tensor unless asked
      for per channel (TFLite Micro's FULLY_CONNECTED before version 12 is per tensor only).
    - `fuses_activation`: a following Relu / Relu6 / Clip becomes its TFLite fused `activation`
      (`fuse-activation`).
    - `clamp`: the op clamps its input: the TFLite fused activation whose range it is (``RELU``,
      ``RELU6``: see `schemas.activations`), or ``inputs`` when its min / max inputs give the
      range (Clip).
    - `macs`: the rule `inspect` uses to count multiply-accumulates, or None.
    - `pure`: the op has no effect but its outputs (no state written, nothing called), so a
      node of it whose outputs nobody reads is dead. Every op of the table is pure unless its
      entry says otherwise; opaque ops are judged by `schemas.effects`.
    """

    name: str
    doc: str
    inputs: tuple
    tflite: TfliteSpec | None = None
    onnx: OnnxSpec | None = None
    layout_sensitive: bool = False
    weight_layout: dict = field(default_factory=dict)
    weight_channel_axis: dict = field(default_factory=dict)
    int8: str | None = None
    macs: str | None = None
    pure: bool = True
    fixed_output: tuple | None = None
    fully_connected: bool = False
    fuses_activation: bool = False
    clamp: str | None = None

    def slot_index(self, name: str) -> int:
        """Position of the input slot called `name`."""
        return next(i for i, slot in enumerate(self.inputs) if slot.name == name)

    def onnx_attribute_slots(self, opset: int) -> dict:
        """{input position: attribute name} of the inputs ONNX `opset` spells as attributes."""
        if self.onnx is None:
            return {}
        return {self.slot_index(name): name for name, since in self.onnx.attr_inputs.items()
                if since is None or opset < since}

    def tflite_option_slots(self) -> dict:
        """{input position: option attribute} of the inputs TFLite spells as options."""
        if self.tflite is None:
            return {}
        return {self.slot_index(name): attr for name, attr in self.tflite.option_inputs.items()}

    def input_index(self, role: str) -> int | None:
        """Position of the first input with `role`, or None."""
        for i, slot in enumerate(self.inputs):
            if slot.role == role:
                return i
        return None

    @property
    def min_inputs(self) -> int:
        return sum(1 for slot in self.inputs if not slot.optional)


_REGISTRY: dict = {}
_BY_TFLITE: dict = {}
_BY_ONNX: dict = {}


def register(schema: OpSchema) -> OpSchema:
    """Add `schema` to the registry; names must be unique per format."""
    if schema.name in _REGISTRY:
        raise ValueError(f"op schema {schema.name!r} registered twice")
    _REGISTRY[schema.name] = schema
    if schema.tflite is not None:
        _BY_TFLITE[schema.tflite.code] = schema
    if schema.onnx is not None:
        _BY_ONNX[(schema.onnx.domain, schema.onnx.op_type)] = schema
    return schema


def get(name: str) -> OpSchema | None:
    """The schema of IR op `name`, or None for an op outside the table."""
    return _REGISTRY.get(name)


def by_tflite_code(code: str) -> OpSchema | None:
    """The schema whose TFLite builtin is `code` (e.g. ``"CONV_2D"``), or None."""
    return _BY_TFLITE.get(code)


def by_onnx_op(op_type: str, domain: str = "") -> OpSchema | None:
    """The schema of ONNX `op_type` in `domain` (``""`` and ``"ai.onnx"`` are the same)."""
    return _BY_ONNX.get(("" if domain == "ai.onnx" else domain, op_type))


def all_schemas() -> list:
    """Every registered op schema, in registration order."""
    return list(_REGISTRY.values())


"""The firmware helpers export-c puts in NAME.h / NAME.c for the model's inputs and outputs:
the layout of each as macros (rank, dims initializer; NHWC names for 4-D tensors), and
NAME_quantize_input / NAME_dequantize_output, which convert between the application's floats
and the model's int8 (or int16) tensors with the scale and zero point of the header.

`NAME_quantize_input` is TFLite's QUANTIZE: q = round(x / scale) + zero point (float division,
rounding half away from zero, computed exactly without libm), saturated to the type; a NaN
becomes the zero point. `NAME_dequantize_output`
is scale * (q - zero point). A model with one input (output) gets the unnumbered names, one
with several NAME_quantize_input<i> (NAME_dequantize_output<i>). Inputs and outputs that are
float32 (--io-type float32) or per-channel quantized get the layout macros only.
"""

from __future__ import annotations

from .steps import DTYPES, tensor_dims

_LIMITS = {"int8_t": (-128, 127), "int16_t": (-32768, 32767)}
_NHWC = ("BATCH", "HEIGHT", "WIDTH", "CHANNELS")


def is_quantized_tensor(graph, name) -> bool:
    t = graph.tensors[name]
    return (DTYPES[t.dtype][0] in _LIMITS and t.quant is not None
            and t.quant.scale.size == 1)


def _keys(tag: str, names) -> list:
    """(index, macro key, function suffix) per tensor: INPUT0 / INPUT and "" for one tensor."""
    if len(names) == 1:
        return [(0, f"{tag}0", "")]
    return [(i, f"{tag}{i}", str(i)) for i in range(len(names))]


def layout_macros(graph, upper: str) -> list:
    """NAME_INPUT<i>_RANK / _DIMS (and _BATCH, _HEIGHT, _WIDTH, _CHANNELS for 4-D, NHWC),
    the same for outputs; unnumbered aliases for a single input / output."""
    lines = []
    for tag, names in (("INPUT", graph.inputs), ("OUTPUT", graph.outputs)):
        for i, n in enumerate(names):
            dims = tensor_dims(graph, n)
            keys = [f"{tag}{i}"] + ([tag] if len(names) == 1 else [])
            for k in keys:
                lines.append(f"#define {upper}_{k}_RANK {len(dims)}")
                lines.append(f"#define {upper}_{k}_DIMS {{{', '.join(map(str, dims))}}}")
                if len(dims) == 4:
                    lines += [f"#define {upper}_{k}_{axis} {d}" for axis, d in zip(_NHWC, dims)]
    return lines


def prototypes(graph, name: str) -> list:
    """The helpers' declarations."""
    lines = []
    for tag, names, fn, signature in (
            ("INPUT", graph.inputs, "quantize_input", "(const float *values, {t} *input)"),
            ("OUTPUT", graph.outputs, "dequantize_output", "(const {t} *output, float *values)")):
        for i, _, suffix in _keys(tag, names):
            n = names[i]
            if is_quantized_tensor(graph, n):
                ctype = DTYPES[graph.tensors[n].dtype][0]
                lines.append(f"void {name}_{fn}{suffix}{signature.format(t=ctype)};")
    return lines


def definitions(graph, name: str, upper: str) -> list:
    """The helpers' C99 bodies (no libm, no undefined behaviour for any float input)."""
    lines = []
    for i, key, suffix in _keys("INPUT", graph.inputs):
        n = graph.inputs[i]
        if not is_quantized_tensor(graph, n):
            continue
        ctype = DTYPES[graph.tensors[n].dtype][0]
        lo, hi = _LIMITS[ctype]
        m = f"{upper}_{key}"
        lines += [
            f"/* float -> {ctype} for input {i}: round(x / scale) + zero point, saturated",
            " * (TFLite's QUANTIZE; rounding half away from zero, exact) */",
            f"void {name}_quantize_input{suffix}(const float *values, {ctype} *input)",
            "{",
            "    size_t i;",
            f"    for (i = 0; i < (size_t){m}_SIZE; ++i) {{",
            f"        float r = values[i] / {m}_SCALE;",
            "        float t;",
            "        int32_t q;",
            "        if (!(r > -65536.0f)) { /* below the range, or NaN */",
            "            r = (r == r) ? -65536.0f : 0.0f;",
            "        } else if (r > 65536.0f) {",
            "            r = 65536.0f;",
            "        }",
            "        t = (float)(int32_t)r; /* toward zero; r - t is exact */",
            "        if (r - t >= 0.5f) {",
            "            t += 1.0f;",
            "        } else if (r - t <= -0.5f) {",
            "            t -= 1.0f;",
            "        }",
            f"        q = (int32_t)t + {m}_ZERO_POINT;",
            f"        input[i] = ({ctype})(q < ({lo}) ? ({lo}) : q > {hi} ? {hi} : q);",
            "    }",
            "}",
            ""]
    for i, key, suffix in _keys("OUTPUT", graph.outputs):
        n = graph.outputs[i]
        if not is_quantized_tensor(graph, n):
            continue
        ctype = DTYPES[graph.tensors[n].dtype][0]
        m = f"{upper}_{key}"
        lines += [
            f"/* {ctype} -> float for output {i}: scale * (q - zero point) */",
            f"void {name}_dequantize_output{suffix}(const {ctype} *output, float *values)",
            "{",
            "    size_t i;",
            f"    for (i = 0; i < (size_t){m}_SIZE; ++i) {{",
            f"        values[i] = {m}_SCALE * (float)((int32_t)output[i] - {m}_ZERO_POINT);",
            "    }",
            "}",
            ""]
    return lines

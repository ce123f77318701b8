"""The LSTM ops: TFLite UNIDIRECTIONAL_SEQUENCE_LSTM and ONNX LSTM (kept apart from `ops.py`).

`UnidirectionalSequenceLSTM` is TFLite's op with its 24 inputs in TFLite's order (`LSTM_SLOTS`):
the sequence, four input-to-gate and four recurrent-to-gate weight matrices ([S, I] and [S, S],
gates input / forget / cell / output), three optional peephole vectors, four gate biases, an
optional projection ([P, S] and bias), the two *variable* state tensors (hidden [B, P or S],
cell [B, S]: TFLite `is_variable`, zero at the first call, carried from call to call) and four
optional layer-norm coefficient vectors. CIFG (no input gate) omits the input-gate weights and
bias. Options, IR names: `activation` (the cell gate's and the hidden state's nonlinearity),
`cell_clip`, `proj_clip` (0: none), `time_major` ([T, B, I] when true, [B, T, I] when false),
`asymmetric_quantize_inputs` (hybrid kernels only), `diagonal_recurrent_tensors`.

`LSTM` is ONNX's op (gates i, o, f, c in its W / R / B rows); `onnx-to-tflite` lowers its forward
direction to `UnidirectionalSequenceLSTM` (`passes/onnx_to_tflite/ops_lstm.py`).

Both ops are impure: the TFLite op writes its state tensors; the ONNX one is marked so as well,
so no pass drops it unread before the lowering has looked at it. Their int8 rule is `lstm`: TFLite
Micro's 8-bit activation / 16-bit gate and cell scheme (`qconvert/quant/lstm_plan.py`, its
Prepare in `qconvert/int8/prepare/lstm.py`).
"""

from __future__ import annotations

from .registry import Input, OnnxSpec, OpSchema, TfliteSpec, register

GATES = ("input", "forget", "cell", "output")  # TFLite's gate order

LSTM_SLOTS = (
    Input("x"),
    *(Input(f"input_to_{g}_weights", "param", optional=(g == "input")) for g in GATES),
    *(Input(f"recurrent_to_{g}_weights", "param", optional=(g == "input")) for g in GATES),
    *(Input(f"cell_to_{g}_weights", "param", optional=True) for g in ("input", "forget", "output")),
    *(Input(f"{g}_gate_bias", "param", optional=(g == "input")) for g in GATES),
    Input("projection_weights", "param", optional=True),
    Input("projection_bias", "param", optional=True),
    Input("output_state", "state"),
    Input("cell_state", "state"),
    *(Input(f"{g}_layer_norm_coefficients", "param", optional=True) for g in GATES),
)
assert len(LSTM_SLOTS) == 24

register(OpSchema(
    "UnidirectionalSequenceLSTM",
    "LSTM over a sequence with state in two variable tensors (TFLite "
    "UNIDIRECTIONAL_SEQUENCE_LSTM; see schemas/lstm.py).", LSTM_SLOTS,
    tflite=TfliteSpec("UNIDIRECTIONAL_SEQUENCE_LSTM", "UnidirectionalSequenceLSTMOptions",
                      int8_version=1),
    int8="lstm", macs="lstm", pure=False))

register(OpSchema(
    "LSTM", "ONNX LSTM (gates i, o, f, c); lowered to UnidirectionalSequenceLSTM.",
    (Input("x"), Input("w", "param"), Input("r", "param"), Input("b", "param", optional=True),
     Input("sequence_lens", "param", optional=True),
     Input("initial_h", "param", optional=True), Input("initial_c", "param", optional=True),
     Input("p", "param", optional=True)),
    onnx=OnnxSpec("LSTM", {"activation_alpha": None, "activation_beta": None,
                           "activations": None, "clip": None, "direction": "forward",
                           "hidden_size": None, "input_forget": 0, "layout": 0}),
    macs="onnx_lstm", pure=False))

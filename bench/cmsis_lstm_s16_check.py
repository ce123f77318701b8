"""Is CMSIS-NN's arm_lstm_unidirectional_s16 bit-exact with TFLite Micro's reference 16x8 LSTM?

Why export-c runs its own `qconvert_lstm_s16` in `--kernels cmsis-nn` builds too
(docs/lstm.md): this builds CMSIS-NN's 16x8 LSTM on the host (gcc, the library's plain C path)
with the parameters TFLite Micro's CMSIS-NN glue derives (effective biases: bias + the weight
row sums times the input offset, the recurrent row sums times minus the hidden zero point; the
gate, cell and hidden multipliers of `qconvert.int8.prepare.lstm`), runs it on random int16
frames of 16x8 builder LSTMs (tests/models/make_lstm_models.py) with the state carried, and
prints how many output values differ from TFLite Micro's consecutive invokes, and the largest
difference. The builder's `weight_gain` scales the weights' real values, so the gate
pre-activations leave the Q3.12 range [-8, 8) more or less often.

    python bench/cmsis_lstm_s16_check.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "models"))

_LSTM_SOURCES = ["LSTMFunctions/arm_lstm_unidirectional_s16.c",
                 "NNSupportFunctions/arm_nn_lstm_step_s16.c",
                 "NNSupportFunctions/arm_nn_lstm_calculate_gate_s16.c",
                 "ActivationFunctions/arm_nn_activation_s16.c"]


def _c_array(name: str, ctype: str, values) -> str:
    body = ", ".join(str(int(v)) for v in np.ravel(values))
    return f"static const {ctype} {name}[] = {{{body}}};"


def _main_c(graph, frames: list) -> str:
    """A C program running arm_lstm_unidirectional_s16 on `frames`, printing the outputs."""
    from qconvert.int8.prepare import layer_params

    node = graph.nodes[0]
    p = layer_params(graph, node)
    w = [graph.tensors[node.inputs[1 + j]].data.astype(np.int64) for j in range(8)]
    bias = [graph.tensors[node.inputs[12 + k]].data.astype(np.int64) for k in range(4)]
    lines = ["#include <stdio.h>", "#include <string.h>", '#include "arm_nnfunctions.h"']
    gates = []
    for k, act in enumerate(["ARM_SIGMOID", "ARM_SIGMOID", "ARM_TANH", "ARM_SIGMOID"]):
        lines.append(_c_array(f"w{k}", "int8_t", w[k]))
        lines.append(_c_array(f"r{k}", "int8_t", w[4 + k]))
        lines.append(_c_array(f"b{k}", "int64_t", bias[k]))
        lines.append(_c_array(f"eb{k}", "int64_t",
                              bias[k] + w[k].sum(axis=1) * p["input_offset"]))
        lines.append(_c_array(f"hb{k}", "int64_t", w[4 + k].sum(axis=1) * p["hidden_offset"]))
        gates.append(f"{{{p['fc_multiplier'][k]}, {p['fc_shift'][k]}, w{k}, eb{k}, "
                     f"{p['fc_multiplier'][4 + k]}, {p['fc_shift'][4 + k]}, r{k}, hb{k}, b{k}, "
                     f"{act}}}")
    x = graph.tensors[node.inputs[0]]
    batch, steps, features = x.shape
    units = w[0].shape[0]
    lines.append(_c_array("frames", "int16_t", np.stack(frames)))
    lines += [
        "int main(void)", "{",
        f"    static int16_t out[{batch * steps * units}], hidden[{batch * units}], "
        f"cell[{batch * units}], t1[{batch * units}], t2[{batch * units}];",
        f"    const cmsis_nn_lstm_params p = {{0, {batch}, {steps}, {features}, {units}, "
        f"{p['input_offset']}, {p['forget_multiplier']}, {p['forget_shift']}, "
        f"{p['input_multiplier']}, {p['input_shift']}, {p['cell_clip']}, "
        f"{p['cell_scale_power']}, {p['hidden_multiplier']}, {p['hidden_shift']}, "
        f"{p['hidden_zero_point']}, {gates[1]}, {gates[0]}, {gates[2]}, {gates[3]}}};",
        "    cmsis_nn_lstm_context ctx;", "    int f, i;",
        "    ctx.temp1 = t1; ctx.temp2 = t2; ctx.cell_state = cell; ctx.hidden_state = hidden;",
        "    memset(hidden, 0, sizeof(hidden)); memset(cell, 0, sizeof(cell));",
        f"    for (f = 0; f < {len(frames)}; ++f) {{",
        f"        arm_lstm_unidirectional_s16(frames + f * {batch * steps * features}, out, "
        "&p, &ctx);",
        f"        for (i = 0; i < {batch * steps * units}; ++i) printf(\"%d \", out[i]);",
        "        printf(\"\\n\");", "    }", "    return 0;", "}", ""]
    return "\n".join(lines)


def check(weight_gain: float, seed: int, frames: int = 4) -> tuple:
    """(differing values, total values, largest difference) for one builder model."""
    from helpers.export_c_harness import CMSIS_NN, cmsis_library
    from helpers.lstm_runs import int_feed, tflm_sequence
    from make_lstm_models import lstm_int8_tflite

    from qconvert.formats.tflite_reader import read_tflite

    data = lstm_int8_tflite(seed=seed, wide=True, units=16, features=12, steps=6,
                            weight_gain=weight_gain)
    graph = read_tflite(data).graph
    xs = [int_feed(graph.tensors["x"], 100 + k) for k in range(frames)]
    want = np.stack(tflm_sequence(data, xs)).reshape(frames, -1).astype(np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        main = Path(tmp) / "main.c"
        main.write_text(_main_c(graph, xs))
        exe = Path(tmp) / "lstm"
        lib = cmsis_library("gcc", ["-O1"])
        sources = [str(CMSIS_NN / "Source" / s) for s in _LSTM_SOURCES]
        subprocess.run(["gcc", "-std=c99", "-O1", "-w", f"-I{CMSIS_NN / 'Include'}", str(main),
                        *sources, str(lib), "-o", str(exe)], check=True)
        text = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    got = np.array([[int(v) for v in line.split()] for line in text.splitlines()])
    diff = np.abs(got - want)
    return int(np.count_nonzero(diff)), diff.size, int(diff.max())


def main() -> None:
    from helpers.export_c_harness import cmsis_nn_available

    if not cmsis_nn_available():
        sys.exit("CMSIS-NN is not beside the repository (../shared/third_party/CMSIS-NN)")
    print("CMSIS-NN arm_lstm_unidirectional_s16 (host gcc, plain C path) vs TFLite Micro,")
    print("16x8 builder LSTM (16 units, 12 features, 6 steps), 4 frames, state carried")
    print("weight_gain  seed  differing values        largest difference")
    for gain in (0.25, 1.0, 4.0):
        for seed in (0, 1):
            n, total, largest = check(gain, seed)
            print(f"{gain:11}  {seed:4}  {n:6} of {total:<12}  {largest}")


if __name__ == "__main__":
    main()

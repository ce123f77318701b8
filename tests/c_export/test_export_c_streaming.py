"""`qconvert export-c` of streaming models: TFLite resource variables (VAR_HANDLE /
READ_VARIABLE / ASSIGN_VARIABLE, a CALL_ONCE init subgraph) as static C state.

Oracle: the TFLite Micro Python interpreter run frame after frame on one interpreter (its own
resource variables carry the state), every output of every frame, bit for bit, against the C
built by gcc on the host and by arm-none-eabi-gcc for Cortex-M4 under qemu-system-arm, both
kernel sets. A detector's output hides a broken state (it is the same for most inputs), so the
state is compared too: the C's `NAME_variable(i)` after every frame against what a
READ_VARIABLE appended at the end of the model's main graph (a probe output, the only change
to the model) gives in TFLite Micro.

Variants of tests/models/streaming_kws_int8.tflite, edited in the IR, hold what the shipped
models do not: a second variable whose initial value the init subgraph computes (a
StridedSlice of a constant), a READ of a variable after its ASSIGN in the same frame, and a
READ whose tensor is still read after the variable is assigned, which must be a copy (an alias
would show the new value), and whose assigned value must not be written into the state by the
layer producing it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.oracles import TEST_MODELS, stream_frames, tflm_frames
from helpers.export_c_harness import (NEEDS_CMSIS, NEEDS_CROSS, build_cortex_m, build_host,
                                      io_layout, run_qemu)

from qconvert.cli.app import main
from qconvert.ir import Node, Tensor
from qconvert.formats.model_io import load_model, serialize

MODEL = TEST_MODELS / "streaming_kws_int8.tflite"
CORPUS_MODEL = TEST_MODELS / "corpus" / "streaming_kws_tflite.tflite"
CORPUS_CALIB = TEST_MODELS / "corpus" / "streaming_kws_tflite_calib.npy"
FRAMES = 60
RESET_AT = 37  # NAME_reset() before this frame: a new stream from there


# -- models -----------------------------------------------------------------------------------
def _var_handles(graph) -> dict:
    """{SharedName: handle tensor} of the VAR_HANDLEs of `graph`."""
    return {n.origin["options"]["SharedName"].decode(): n.outputs[0] for n in graph.nodes
            if n.op == "VAR_HANDLE"}


def _read(graph, handle, out, like_tensor, like_node):
    """A READ_VARIABLE of `handle` into a new tensor `out` shaped like `like_tensor`."""
    graph.tensors[out] = Tensor(out, like_tensor.shape, like_tensor.dtype, None,
                                like_tensor.quant.copy())
    return Node("READ_VARIABLE", [handle], [out], {}, out, True, dict(like_node.origin))


def with_state_probes(model):
    """`model` with a READ_VARIABLE of every variable appended to its main graph as extra
    outputs `probe_<variable>`: in TFLite Micro, the state each frame leaves."""
    g = model.graph
    read = next(n for n in g.nodes if n.op == "READ_VARIABLE")
    likes = {}
    for n in g.nodes:
        if n.op in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            handle = n.inputs[0]
            likes.setdefault(handle, g.tensors[n.outputs[0] if n.op == "READ_VARIABLE"
                                               else n.inputs[1]])
    handles = {v: k for k, v in _var_handles(g).items()}
    for handle in likes:  # in order of first use, as the C numbers the variables
        shared = handles[handle]
        g.nodes.append(_read(g, handle, f"probe_{shared}", likes[handle], read))
        g.outputs.append(f"probe_{shared}")
    return model


def _const(graph, name, values, dtype, quant=None):
    graph.tensors[name] = Tensor(name, tuple(np.shape(values)), dtype,
                                 np.asarray(values, dtype=dtype), quant)
    return name


def two_variable_model():
    """streaming_kws_int8 with a second variable `prev` (the previous frame), initialised by a
    StridedSlice the init subgraph computes, and extra outputs:

        x = StridedSlice(frame);  READ prev -> p;  ASSIGN prev <- x;  pair = Concat(p, frame)
        READ state (after its ASSIGN) -> again;  after = StridedSlice(again)

    `p` is read between the StridedSlice computing prev's new value and its ASSIGN (so the
    StridedSlice must not write `x` into the state) and read again after the ASSIGN (so READ
    prev must copy); `again` reads the new state."""
    model = load_model(MODEL)
    g, init = model.graph, model.graphs[1]
    nodes = g.nodes
    find = {n.op: n for n in nodes}
    read, slice_, concat = find["READ_VARIABLE"], find["StridedSlice"], find["Concat"]
    frame = g.tensors["Reshape"]                       # [1, 1, 10, 1], the frame's quant
    handle_like = next(n for n in nodes if n.op == "VAR_HANDLE")
    g.tensors["prev_h"] = Tensor("prev_h", (), "resource")
    handle = Node("VAR_HANDLE", [], ["prev_h"], {}, "prev_h", True,
                  {**handle_like.origin, "options": {"Container": b"", "SharedName": b"prev"}})
    full = [_const(g, f"full_{k}", v, "int32") for k, v in
            enumerate(([0, 0, 0, 0], [1, 1, 10, 1], [1, 1, 1, 1]))]
    plain = {**slice_.attrs, "begin_mask": 0, "end_mask": 0}
    g.tensors["x"] = Tensor("x", frame.shape, "int8", None, frame.quant.copy())
    g.tensors["pair"] = Tensor("pair", (1, 2, 10, 1), "int8", None, frame.quant.copy())
    like_slice = g.tensors["strided_slice"]
    g.tensors["after"] = Tensor("after", like_slice.shape, "int8", None, like_slice.quant.copy())
    assign_like = next(n for n in nodes if n.op == "ASSIGN_VARIABLE")
    extra = [
        Node("StridedSlice", ["Reshape", *full], ["x"], plain, "x", False, dict(slice_.origin)),
        _read(g, "prev_h", "p", frame, read),
        Node("ASSIGN_VARIABLE", ["prev_h", "x"], [], {}, "assign_prev", True,
             dict(assign_like.origin)),
        Node("Concat", ["p", "Reshape"], ["pair"], dict(concat.attrs), "pair", False,
             dict(concat.origin)),
        _read(g, next(iter(_var_handles(g).values())), "again", g.tensors["ReadVariableOp"],
              read),
        Node("StridedSlice", ["again", *slice_.inputs[1:]], ["after"], dict(slice_.attrs),
             "after", False, dict(slice_.origin)),
    ]
    at = nodes.index(assign_like) + 1
    g.nodes = nodes[:at] + extra + nodes[at:]
    g.nodes.insert(1, handle)
    g.outputs += ["pair", "after"]
    # the init subgraph computes prev's first value: rows 2 of a constant [1, 8, 10, 1]
    init.tensors["prev_h"] = Tensor("prev_h", (), "resource")
    table = (np.arange(80, dtype=np.int64) * 37 % 256 - 128).reshape(1, 8, 10, 1)
    _const(init, "table", table, "int8", frame.quant.copy())
    cuts = [_const(init, f"cut_{k}", v, "int32") for k, v in
            enumerate(([0, 2, 0, 0], [1, 3, 10, 1], [1, 1, 1, 1]))]
    init.tensors["first"] = Tensor("first", frame.shape, "int8", None, frame.quant.copy())
    init_assign = next(n for n in init.nodes if n.op == "ASSIGN_VARIABLE")
    init.nodes += [
        Node("VAR_HANDLE", [], ["prev_h"], {}, "prev_h", True, dict(handle.origin)),
        Node("StridedSlice", ["table", *cuts], ["first"], plain, "first", False,
             dict(slice_.origin)),
        Node("ASSIGN_VARIABLE", ["prev_h", "first"], [], {}, "init_prev", True,
             dict(init_assign.origin))]
    return model


# -- running ----------------------------------------------------------------------------------
def expected(model, frames: list) -> tuple:
    """(outputs per frame, variables per frame) from TFLite Micro, a new interpreter at
    RESET_AT (what NAME_reset promises)."""
    outputs = len(model.graph.outputs)
    probed = serialize(with_state_probes(model))
    runs = (tflm_frames(probed, frames[:RESET_AT], outputs + len(_var_handles(model.graph)))
            + tflm_frames(probed, frames[RESET_AT:], outputs + len(_var_handles(model.graph))))
    return [r[:outputs] for r in runs], [r[outputs:] for r in runs]


def stream_main(name: str, ios: dict, frames: list, variables: list) -> str:
    """main.c: every frame through NAME_invoke, printing the return code, every output and
    every variable (`variables`: bytes of each) in hex; NAME_reset() before frame RESET_AT."""
    (ctype, size), = ios["inputs"]
    rows = ",\n".join("{" + ",".join(map(str, np.asarray(f).view(np.uint8).reshape(-1)))
                      + "}" for f in frames)
    lines = ["#include <stdio.h>", "#include <stdint.h>", f'#include "{name}.h"', "",
             f"static const uint8_t in[{len(frames)}][{size}] = {{{rows}}};"]
    lines += [f"static {c} out{i}[{n}];" for i, (c, n) in enumerate(ios["outputs"])]
    lines += ["static void hex(const void *p, unsigned n)", "{", "    unsigned i;",
              "    for (i = 0; i < n; ++i) {",
              '        printf("%02x", (unsigned)((const uint8_t *)p)[i]);', "    }",
              '    printf("\\n");', "}", "", "int main(void)", "{", "    int k;",
              f"    for (k = 0; k < {len(frames)}; ++k) {{",
              f"        if (k == {RESET_AT}) {{", f"            {name}_reset();", "        }",
              f"        printf(\"rc %d\\n\", {name}_invoke(",
              f"            (const {ctype} *)(const void *)in[k], "
              + ", ".join(f"out{i}" for i in range(len(ios["outputs"]))) + "));"]
    lines += [f"        hex(out{i}, sizeof out{i});" for i in range(len(ios["outputs"]))]
    lines += [f"        hex({name}_variable({i}), {n}u);" for i, n in enumerate(variables)]
    lines += ["    }", f"    return {name}_variable({len(variables)}) != NULL;", "}", ""]
    return "\n".join(lines)


def parse_stream(text: str, outputs: int, variables: int) -> list:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    per = 1 + outputs + variables
    assert len(lines) % per == 0, text[-500:]
    frames = []
    for k in range(0, len(lines), per):
        assert lines[k] == "rc 0", lines[k]
        frames.append([np.frombuffer(bytes.fromhex(h), np.int8) for h in lines[k + 1:k + per]])
    return frames


def export(model_path: Path, folder: Path, kernels="portable", name="net", extra=()) -> str:
    r = CliRunner().invoke(main, ["export-c", str(model_path), "-o", str(folder), "--name", name,
                                  "--kernels", kernels, *map(str, extra)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def run_stream(model_path: Path, tmp: Path, kernels: str, board=None) -> tuple:
    """Export, build (host or `board`), run FRAMES frames: (C frames, TFLM outputs, TFLM
    variables, the NAME.c text)."""
    model = load_model(model_path)
    folder = tmp / f"c_{kernels}_{board or 'host'}"
    export(model_path, folder, kernels)
    graph = model.graph
    ios = io_layout(graph)
    from qconvert.c_export.model.steps import tensor_dims

    frames = stream_frames(list(tensor_dims(graph, graph.inputs[0])), np.int8, FRAMES)
    want_out, want_vars = expected(model, frames)
    sizes = [a.size for a in want_vars[0]]
    source = stream_main("net", ios, frames, sizes)
    cmsis = kernels == "cmsis-nn"
    if board is None:
        exe = build_host(folder, source, cmsis=cmsis)
        text = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    else:
        text = run_qemu(build_cortex_m(folder, source, board, cmsis=cmsis), board, timeout=300)
    got = parse_stream(text, len(ios["outputs"]), len(sizes))
    return got, want_out, want_vars, (folder / "net.c").read_text()


def assert_stream(got, want_out, want_vars, label):
    assert len(got) == len(want_out) == FRAMES
    for k, (g, wo, wv) in enumerate(zip(got, want_out, want_vars)):
        for j, (a, b) in enumerate(zip(g, list(wo) + list(wv))):
            kind = f"output {j}" if j < len(wo) else f"variable {j - len(wo)}"
            assert np.array_equal(a, b.view(np.int8)), (
                f"{label}: frame {k} {kind}: {np.count_nonzero(a != b.view(np.int8))} of "
                f"{b.size} bytes differ from TFLite Micro")
    # the stream really moves: the state differs between frames, the output too
    assert len({g[-1].tobytes() for g in got}) > FRAMES // 2
    assert len({g[0].tobytes() for g in got}) > 5


def notes(source: str) -> dict:
    """{(op, variable): [how, ...]} from NAME.c's top comment."""
    out: dict = {}
    for op, var, how in re.findall(r"layer \d+: (READ_VARIABLE|ASSIGN_VARIABLE) (\S+): (\w+)",
                                   source):
        out.setdefault((op, var), []).append(how)
    return out


@pytest.fixture(scope="module")
def variant(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("variant") / "two_variables.tflite"
    path.write_bytes(serialize(two_variable_model()))
    return path


# -- host -------------------------------------------------------------------------------------
KERNELS = ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)]


@pytest.mark.parametrize("kernels", KERNELS)
def test_streaming_model_is_bit_exact_with_tflm_frame_by_frame(tmp_path, kernels):
    got, want_out, want_vars, source = run_stream(MODEL, tmp_path, kernels)
    assert_stream(got, want_out, want_vars, f"streaming_kws_int8 ({kernels}, host)")
    # no copy at all: the slice reads the state, the concat writes it
    assert notes(source) == {("READ_VARIABLE", "state"): ["alias"],
                             ("ASSIGN_VARIABLE", "state"): ["direct"]}
    invoke = source.split("_invoke_with_arena(")[1]
    assert not [ln for ln in invoke.splitlines() if "memcpy(" in ln and "state_s8" in ln]
    assert "READ_VARIABLE" not in invoke and "ASSIGN_VARIABLE" not in invoke  # no code


@pytest.mark.parametrize("kernels", KERNELS)
def test_two_variables_read_after_assign_and_computed_init(tmp_path, variant, kernels):
    got, want_out, want_vars, source = run_stream(variant, tmp_path, kernels)
    assert_stream(got, want_out, want_vars, f"two variables ({kernels}, host)")
    how = notes(source)
    # the read after the assign sees the new state, without a copy
    assert how[("READ_VARIABLE", "state")] == ["alias", "alias"]
    assert how[("ASSIGN_VARIABLE", "state")] == ["direct"]
    # must not: READ prev runs between the StridedSlice computing prev's new value and its
    # ASSIGN, so that layer must not write the state; `p` is read after the ASSIGN, so READ
    # prev must copy
    assert how[("READ_VARIABLE", "prev")] == ["copy"]
    assert how[("ASSIGN_VARIABLE", "prev")] == ["copy"]
    # pair = [previous frame, this frame]: frame k's first half is frame k-1 (the initial value
    # the init subgraph computed at frame 0 and after the reset)
    table = (np.arange(80) * 37 % 256 - 128).reshape(8, 10)
    for k in (0, 1, RESET_AT - 1, RESET_AT, RESET_AT + 1):
        first = got[k][1][:10]
        before = table[2] if k in (0, RESET_AT) else got[k - 1][1][10:]
        assert np.array_equal(first, np.asarray(before, np.int8)), k
    # the computed initial value is not uniform: an array copied by NAME_init
    assert "static const uint8_t net_initial1[10]" in source


def test_export_is_deterministic_and_documents_the_state(tmp_path):
    printed = export(MODEL, tmp_path / "a")
    assert "net: a streaming model: 80 bytes of state" in printed
    export(MODEL, tmp_path / "b")
    for f in (tmp_path / "a").iterdir():
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name
    header = (tmp_path / "a" / "net.h").read_text()
    assert "#define NET_STATE_SIZE 80" in header
    for fn in ("void net_init(void);", "void net_reset(void);",
               "const void *net_variable(int index);"):
        assert fn in header


def test_explicit_init_and_invoke_with_arena(tmp_path):
    """NAME_init() called by the user first, then NAME_invoke_with_arena on the user's arena:
    the same stream as TFLite Micro (the state is the model's, not the arena's)."""
    model = load_model(MODEL)
    folder = tmp_path / "c"
    export(MODEL, folder)
    frames = stream_frames([1, 10], np.int8, 12)
    want = tflm_frames(MODEL.read_bytes(), frames, 1)
    rows = ",\n".join("{" + ",".join(map(str, f.view(np.uint8).reshape(-1))) + "}"
                      for f in frames)
    main_c = "\n".join([
        "#include <stdio.h>", "#include <stdint.h>", '#include "net.h"',
        f"static const uint8_t in[{len(frames)}][10] = {{{rows}}};",
        "static int32_t arena[NET_ARENA_SIZE / 4 + 1];", "static int8_t out[4];",
        "int main(void)", "{", "    int k;", "    unsigned i;", "    net_init();",
        f"    for (k = 0; k < {len(frames)}; ++k) {{",
        "        printf(\"rc %d\\n\", net_invoke_with_arena(",
        "            (const int8_t *)(const void *)in[k], out, arena));",
        '        for (i = 0; i < 4; ++i) { printf("%02x", (unsigned)(uint8_t)out[i]); }',
        '        printf("\\n");', "    }", "    return 0;", "}", ""])
    text = subprocess.run([build_host(folder, main_c)], capture_output=True, text=True,
                          check=True).stdout
    got = parse_stream(text, 1, 0)
    assert len(got) == len(frames) and model.graph.outputs
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g[0], w[0].view(np.int8)), k


def test_corpus_streaming_model_quantized_by_qconvert(tmp_path):
    """The corpus's Keras streaming KWS (float; state read, concatenated, sliced, assigned
    last): quantized with its calibration frames, exported, bit-exact frame by frame; export-c
    --calibration on the float model writes the same C."""
    int8 = tmp_path / "int8.tflite"
    r = CliRunner().invoke(main, ["quantize", str(CORPUS_MODEL), "--calibration",
                                  str(CORPUS_CALIB), "-o", str(int8)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    got, want_out, want_vars, source = run_stream(int8, tmp_path, "portable")
    assert_stream(got, want_out, want_vars, "corpus streaming_kws_tflite (host)")
    assert notes(source) == {("READ_VARIABLE", "frame_buffer"): ["alias"],
                             ("ASSIGN_VARIABLE", "frame_buffer"): ["direct"]}
    direct = tmp_path / "direct"
    export(CORPUS_MODEL, direct, extra=["--calibration", CORPUS_CALIB])
    # the same after the SPDX line and the comment naming the source file
    assert (direct / "net.c").read_text().split(" */", 2)[2] == source.split(" */", 2)[2]


# -- refusals ---------------------------------------------------------------------------------
def test_unsupported_ops_of_a_streaming_model_are_named_in_one_line(tmp_path):
    """A streaming model with an op export-c cannot emit: one line naming it (and not the
    resource-variable ops, which it exports), nothing written."""
    model = load_model(MODEL)
    g = model.graph
    soft = next(n for n in g.nodes if n.op == "Softmax")
    soft.op, soft.opaque = "MYSTERY", True
    soft.origin = {"code": 32, "custom_code": "MYSTERY", "version": 1, "options_type": "NONE",
                   "options": {}, "custom_options": None, "custom_options_format": 0}
    from qconvert.c_export.model.render import ModelOptions, render_model
    from qconvert.c_export.model.prepare import prepare_model
    from qconvert.errors import QConvertError

    with pytest.raises(QConvertError) as err:
        render_model(prepare_model(model), ModelOptions("net"))
    message = str(err.value)
    assert "\n" not in message and "MYSTERY" in message
    assert "VARIABLE" not in message and "CALL_ONCE" not in message
    path = tmp_path / "bad.tflite"
    path.write_bytes(serialize(model))
    r = CliRunner().invoke(main, ["export-c", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 1 and not (tmp_path / "out").exists()
    line = r.output.strip().splitlines()[-1]
    assert len(r.output.strip().splitlines()) == 1 and "MYSTERY" in line, r.output


def test_a_variable_read_before_any_value_is_refused(tmp_path):
    model = load_model(MODEL)
    model.graphs[1].nodes = [n for n in model.graphs[1].nodes if n.op != "ASSIGN_VARIABLE"]
    path = tmp_path / "noinit.tflite"
    path.write_bytes(serialize(model))
    r = CliRunner().invoke(main, ["export-c", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 1 and not (tmp_path / "out").exists()
    assert "'state' is read before any assignment" in r.output


def test_export_c_header_still_refuses_streaming_models(tmp_path):
    r = CliRunner().invoke(main, ["export-c-header", str(MODEL), "-o", str(tmp_path / "w.h")])
    assert r.exit_code == 1 and "a model with 2 subgraphs" in r.output


# -- Cortex-M4 --------------------------------------------------------------------------------
@NEEDS_CROSS
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("which", ["shipped", "two_variables"])
def test_cortex_m4_frame_by_frame(tmp_path, variant, kernels, which):
    path = MODEL if which == "shipped" else variant
    got, want_out, want_vars, _ = run_stream(path, tmp_path, kernels, board="m4")
    assert_stream(got, want_out, want_vars, f"{which} ({kernels}, Cortex-M4)")


def test_single_rounding_build_matches_the_integer_executor(tmp_path):
    """-DQCONVERT_SINGLE_ROUNDING (CMSIS-NN's rounding): every output and the state of every
    frame equal qconvert's integer executor run frame by frame with single rounding (TFLite
    Micro has no such build), a new stream from RESET_AT."""
    from qconvert.executor.int_executor import run_int8
    from qconvert.executor.streaming import run_frames
    from qconvert.ir import Graph

    model = load_model(MODEL)
    folder = tmp_path / "c"
    export(MODEL, folder)
    frames = stream_frames([1, 10], np.int8, FRAMES)
    ios = io_layout(model.graph)
    exe = build_host(folder, stream_main("net", ios, frames, [80]),
                     defines=["-DQCONVERT_SINGLE_ROUNDING"])
    got = parse_stream(subprocess.run([exe], capture_output=True, text=True, check=True).stdout,
                       1, 1)

    def runner(g, feeds, observe, keep, carry):
        outs = list(g.outputs) + [k for k in keep if k not in g.outputs]
        return run_int8(Graph(g.name, g.tensors, g.nodes, g.inputs, outs), feeds,
                        rounding="single", observe=observe, carry=carry)

    name = model.graph.inputs[0]
    want = []
    for part in (frames[:RESET_AT], frames[RESET_AT:]):
        want += run_frames(model, [{name: f} for f in part], runner, keep=["concat"])
    output = model.graph.outputs[0]
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g[0], w[output].reshape(-1)), f"frame {k} output"
        assert np.array_equal(g[1], w["concat"].reshape(-1)), f"frame {k} state"
    assert len({g[0].tobytes() for g in got}) > 5


def test_a_read_after_assign_that_is_a_graph_output_is_a_copy(tmp_path):
    """Must not alias: a READ whose tensor is a graph output is a copy into the arena (the
    outputs are copied out of it at the end of the call). The model with the probes (a READ of
    each variable at the end of the main graph, as graph outputs) exported itself, bit-exact
    with TFLite Micro frame by frame."""
    path = tmp_path / "probed.tflite"
    path.write_bytes(serialize(with_state_probes(two_variable_model())))
    got, want_out, want_vars, source = run_stream(path, tmp_path, "portable")
    assert_stream(got, want_out, want_vars, "probed (portable, host)")
    how = notes(source)
    assert how[("READ_VARIABLE", "state")] == ["alias", "alias", "copy"]
    assert how[("READ_VARIABLE", "prev")] == ["copy", "copy"]
